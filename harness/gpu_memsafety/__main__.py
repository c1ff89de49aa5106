"""`python -m gpu_memsafety COMMAND`: the same commands as the `gpu-memsafety` console script (cli/main.py)."""
from __future__ import annotations

import sys

from gpu_memsafety.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
