"""kernels/cuda_build.py on the CPU: the CUDA-extension build cache that `make sanitize`'s xdist workers and
later runs share. The key follows the source and flags, unchanged files are not rewritten (so ninja sees them
up to date), a stale torch build baton is cleared, and the file lock makes a second process wait for the
first one's build instead of building beside it. The build itself (nvcc) runs on the GPU machine."""
from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest

from kernels import cuda_build


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(cuda_build.CACHE_ENV, str(tmp_path / "c"))
    assert cuda_build.cache_root() == tmp_path / "c"
    monkeypatch.delenv(cuda_build.CACHE_ENV)
    assert cuda_build.cache_root() == Path.home() / ".cache" / "gpu-memsafety"


def test_build_key_changes_with_source_and_flags_only() -> None:
    key = cuda_build.build_key("src", "binding", "-O3")
    assert key == cuda_build.build_key("src", "binding", "-O3")
    assert len({key, cuda_build.build_key("src2", "binding", "-O3"), cuda_build.build_key("src", "binding", "-O2")}) == 3


def test_unchanged_file_is_not_rewritten_and_a_changed_one_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "k.cu"
    cuda_build.write_if_changed(path, "a")
    os.utime(path, (1, 1))
    cuda_build.write_if_changed(path, "a")
    assert path.stat().st_mtime == 1                       # ninja sees it up to date
    cuda_build.write_if_changed(path, "b")
    assert path.read_text() == "b" and path.stat().st_mtime > 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.cu"]    # no temporary left behind


def test_build_dir_is_keyed_and_a_stale_baton_is_cleared(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(cuda_build.CACHE_ENV, str(tmp_path))
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k() {}")
    calls: list[dict[str, Any]] = []

    def fake_load(module_name: str, sources: list[Path], flags: list[str], build_dir: Path, origin: Path) -> str:
        calls.append({"name": module_name, "dir": build_dir, "baton": (build_dir / "lock").exists(), "flags": flags})
        return module_name

    monkeypatch.setattr(cuda_build, "_load", fake_load)
    first = cuda_build.build_extension("k", cu, "binding", (9, 0))
    (calls[0]["dir"] / "lock").write_text("")              # torch's baton, left by a build that was killed
    second = cuda_build.build_extension("k", cu, "binding", (9, 0))
    assert first == second and calls[0]["dir"] == calls[1]["dir"]
    assert calls[0]["dir"].parent == tmp_path / "cuda" and calls[0]["dir"].name.startswith("k-")
    assert not calls[1]["baton"]
    assert "-gencode=arch=compute_90,code=sm_90" in calls[0]["flags"] and "-lineinfo" in calls[0]["flags"]


def _hold(lock: str, marks: str, hold_s: float) -> None:
    with cuda_build.exclusive(Path(lock)):
        with open(marks, "a") as f:
            f.write(f"enter {os.getpid()} {time.time()}\n")
        time.sleep(hold_s)
        with open(marks, "a") as f:
            f.write(f"leave {os.getpid()} {time.time()}\n")


def test_second_process_waits_for_the_first_ones_build(tmp_path: Path) -> None:
    lock, marks = str(tmp_path / "b.lock"), str(tmp_path / "marks")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hold, args=(lock, marks, 0.5)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    events = [line.split()[0] for line in Path(marks).read_text().splitlines()]
    assert events == ["enter", "leave", "enter", "leave"]     # never two builds at once
