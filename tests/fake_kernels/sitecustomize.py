"""Start-up hook for the worker processes of tests/test_fault_injection.py, and for nothing else.

Why it exists: the worker finds a case's scenario by importing `scenarios.<name>`, and `scenarios` is the
repository's own regular package, which always comes first on the worker's PYTHONPATH. Tests may only add
files under tests/, so the fake scenarios in tests/fake_kernels/fake_scenarios/ are added to that package's
search path here. Python imports `sitecustomize` at start-up from the first sys.path entry that has one;
the fault-injection tests put this directory on PYTHONPATH (the runner appends it after the repository
root), so only their worker processes, and the fake compute-sanitizer they start, run this file.
"""
from __future__ import annotations

import os

_FAKE_SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_scenarios")

try:
    import scenarios as _scenarios
except ImportError:  # started from somewhere the repository is not on sys.path: nothing to extend
    pass
else:
    if _FAKE_SCENARIOS not in _scenarios.__path__:
        _scenarios.__path__.append(_FAKE_SCENARIOS)
