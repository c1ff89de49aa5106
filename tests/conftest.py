"""Fixtures shared by the harness's own tests."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Iterator

import pytest

FAKE_DIR = Path(__file__).resolve().parent / "fake_kernels"


@pytest.fixture(scope="module")
def worker_env(request: pytest.FixtureRequest) -> Iterator[Path]:
    """PYTHONPATH for the worker (the runner puts the repository root before it: the fake adapters import from
    tests/fake_kernels) and a place for the fake adapters' pid files (FAKE_FAULTS_DIR), for one test module."""
    with tempfile.TemporaryDirectory(prefix=f"{request.module.__name__.rsplit('.', 1)[-1]}-") as tmp:
        mp = pytest.MonkeyPatch()
        mp.setenv("PYTHONPATH", str(FAKE_DIR))
        mp.setenv("FAKE_FAULTS_DIR", tmp)
        try:
            yield Path(tmp)
        finally:
            mp.undo()
