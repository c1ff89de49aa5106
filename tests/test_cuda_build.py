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

from gpu_memsafety.engine.job import ERROR, UNSUPPORTED
from gpu_memsafety.engine.worker import classify
from gpu_memsafety.kernels import cuda_build
from gpu_memsafety.kernels.errors import KernelBuildError, ToolchainMissing


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(cuda_build.CACHE_ENV, str(tmp_path / "c"))
    assert cuda_build.cache_root() == tmp_path / "c"
    monkeypatch.delenv(cuda_build.CACHE_ENV)
    from gpu_memsafety.util.paths import cache_dir
    assert cuda_build.cache_root() == cache_dir()        # the harness's one cache directory


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


# ------------------------------------------------------------------ a build that cannot happen here vs a broken source

def _toolkit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, nvcc: bool = True, ninja: bool = True) -> None:
    from torch.utils import cpp_extension
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    if nvcc:
        (home / "bin" / "nvcc").write_text("#!/bin/sh\n")
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", str(home))
    monkeypatch.setattr(cpp_extension, "is_ninja_available", lambda: ninja)


def _load(tmp_path: Path) -> Any:
    return cuda_build._load("m", [tmp_path / "k.cu"], ["-O3"], tmp_path, tmp_path / "k.cu")


def test_no_nvcc_is_a_missing_toolchain_naming_what_was_needed_and_found(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    """No toolkit: the case could not run here (worker status unsupported -> `could not run`, a failure on a GPU
    machine unless --allow-unsupported), never `unresolved` as if the source were broken."""
    from torch.utils import cpp_extension
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", None)
    with pytest.raises(ToolchainMissing, match=r"building k.cu needs nvcc from a CUDA toolkit; found: torch found no "
                                               r"CUDA toolkit") as info:
        _load(tmp_path)
    assert classify(info.value) == UNSUPPORTED
    _toolkit(monkeypatch, tmp_path, nvcc=False, ninja=False)
    with pytest.raises(ToolchainMissing, match=r"has no bin/nvcc; ninja \(torch builds extensions with it\); found: none"):
        _load(tmp_path)


def test_an_nvcc_too_old_for_the_gpu_is_a_missing_toolchain(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from torch.utils import cpp_extension
    _toolkit(monkeypatch, tmp_path)

    def too_old(**_: Any) -> None:
        raise RuntimeError("Error building extension 'm': nvcc fatal   : Unsupported gpu architecture 'compute_120'")
    monkeypatch.setattr(cpp_extension, "load", too_old)
    with pytest.raises(ToolchainMissing, match=r"needs an nvcc that supports compute_120 .*found one that does not"):
        _load(tmp_path)


def test_a_compile_error_in_the_source_stays_a_build_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A broken source is the kernel's fault, not the machine's: KernelBuildError, an error (unresolved, a failure
    that --allow-unsupported does not accept), with the compiler's words."""
    from torch.utils import cpp_extension
    _toolkit(monkeypatch, tmp_path)

    def broken(**_: Any) -> None:
        raise RuntimeError("k.cu(3): error: expected a \";\"")
    monkeypatch.setattr(cpp_extension, "load", broken)
    with pytest.raises(KernelBuildError, match=r"expected a") as info:
        _load(tmp_path)
    assert not isinstance(info.value, ToolchainMissing) and classify(info.value) == ERROR
