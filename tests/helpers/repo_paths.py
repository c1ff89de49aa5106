"""Where the tests find the checkout's files: one module, so that no test works a path out from its own folder
(the test folders mirror the packages and may move; this file is tests/helpers/repo_paths.py)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]      # the checkout
TESTS = ROOT / "tests"
# The shared modules the tests import (host_fake, report_samples, ...): on the tests' import path through
# pyproject.toml's pytest `pythonpath`, and on a child pytest's through PYTHONPATH.
HELPERS = TESTS / "helpers"
FAKE_DIR = HELPERS / "fake_kernels"             # the fake adapters and scenarios a worker imports (PYTHONPATH)
DATA = TESTS / "data"                           # recorded sanitizer output, reports, schemas
SANITIZER_DATA = DATA / "sanitizer"
