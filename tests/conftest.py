"""Fixtures shared by the harness's own tests, and the one rule for which tests see a GPU.

The suite is the CPU machine's (CI has no GPU): a test pins what the harness does there. On a GPU machine (`make test`
on an H100 runner) the processes a test starts (case workers, pytest and command-line runs) would see the GPU and do
something else: a worker the runner was told has no GPU would put its tensors on it under Triton's interpreter. So
every test not marked `gpu` runs with CUDA_VISIBLE_DEVICES="" (set before its fixtures, module-scoped ones included),
and a `gpu` test with the variable as the run started. The pytest process itself keeps the GPU it found at collection
(torch reads the variable once), which the `gpu` tests' skip conditions read.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

# An xdist worker freezes its heap before it reports finished, so that pytest's cleanup ends within execnet's 5 s
# and a green run ends without a KeyboardInterrupt traceback (fixtures/worker_end.py).
from gpu_memsafety.fixtures.worker_end import pytest_sessionfinish  # noqa: F401
from repo_paths import FAKE_DIR

VISIBLE = "CUDA_VISIBLE_DEVICES"
_STARTED_WITH = os.environ.get(VISIBLE)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the test's fixtures: no GPU for what a CPU test starts; the run's own setting for a `gpu` test."""
    if item.get_closest_marker("gpu") is None:
        os.environ[VISIBLE] = ""
    elif _STARTED_WITH is None:
        os.environ.pop(VISIBLE, None)
    else:
        os.environ[VISIBLE] = _STARTED_WITH


@pytest.fixture(scope="module")
def worker_env(request: pytest.FixtureRequest) -> Iterator[Path]:
    """PYTHONPATH for the worker (the runner puts the repository root before it: the fake adapters import from
    tests/helpers/fake_kernels) and a place for the fake adapters' pid files (FAKE_FAULTS_DIR), for one test module."""
    with tempfile.TemporaryDirectory(prefix=f"{request.module.__name__.rsplit('.', 1)[-1]}-") as tmp:
        mp = pytest.MonkeyPatch()
        mp.setenv("PYTHONPATH", str(FAKE_DIR))
        mp.setenv("FAKE_FAULTS_DIR", tmp)
        try:
            yield Path(tmp)
        finally:
            mp.undo()
