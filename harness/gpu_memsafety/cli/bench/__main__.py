"""`python -m gpu_memsafety.cli.bench ...`: the same as `gpu-memsafety bench ...`; the parent starts its
measuring children this way (`... child JOB.json`)."""
import sys

from gpu_memsafety.cli.bench import main

sys.exit(main())
