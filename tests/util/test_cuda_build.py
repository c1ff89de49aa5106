"""harness/gpu_memsafety/util/cuda_build.py on the CPU: the CUDA-extension build cache that `make sanitize`'s xdist workers and
later runs share. The key follows the source and flags, unchanged files are not rewritten (so ninja sees them
up to date), a stale torch build baton is cleared, and the file lock makes a second process wait for the
first one's build instead of building beside it. The build itself (nvcc) runs on the GPU machine."""
from __future__ import annotations

import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.job import ERROR, UNSUPPORTED
from gpu_memsafety.engine.worker import classify
from gpu_memsafety.util import cuda_build
from gpu_memsafety.util.build_errors import KernelBuildError, ToolchainMissing


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


# ------------------------------------------------------------- cached_library: an upstream kernel's launcher

def _copying(log: list[str]):
    """Commands that 'compile' by copying the unit to the output, logging each call."""
    def commands(unit: Path, out: Path) -> list[list[str]]:
        log.append(unit.name)
        return [["cp", str(unit), str(out)]]
    return commands


def test_a_library_is_built_once_per_source_and_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(cuda_build.CACHE_ENV, str(tmp_path))
    log: list[str] = []
    build = lambda source, key: cuda_build.cached_library(   # noqa: E731
        "up", "k-1.0", library="launch.so", unit="launch.cu", source=source, key=key, commands=_copying(log),
        what="up 1.0's kernel")
    first = build("src", ["-O3"])
    assert first.read_text() == "src" and first.parent.parent == tmp_path / "up" and first.parent.name.startswith("k-1.0-")
    assert build("src", ["-O3"]) == first and log == ["launch.cu"]          # reused: the commands did not run again
    assert build("src", ["-O2"]) != first and build("src2", ["-O3"]) != first and len(log) == 3
    assert sorted(p.name for p in first.parent.iterdir()) == ["launch.cu", "launch.so"]   # no temporary left


@pytest.mark.e2e
def test_a_failing_command_leaves_no_library_and_says_what_failed(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setenv(cuda_build.CACHE_ENV, str(tmp_path))
    script = "import sys; print('x' * 9000); print('launch.cu(3): error: expected a \";\"', file=sys.stderr); sys.exit(2)"
    failing = lambda unit, out: [[sys.executable, "-c", f"open({str(out)!r}, 'w').write('half')"],   # noqa: E731
                                 [sys.executable, "-c", script]]
    with pytest.raises(KernelBuildError) as info:
        cuda_build.cached_library("up", "k", library="launch.so", unit="launch.cu", source="s", key=[],
                                  commands=failing, what="up 1.0's kernel")
    text = str(info.value)
    assert text.startswith("building up 1.0's kernel failed") and 'launch.cu(3): error: expected a ";"' in text
    assert len(text) < 5000 and "command = " in text and "build_dir = " in text
    [folder] = [p for p in (tmp_path / "up").iterdir() if p.is_dir()]
    assert sorted(p.name for p in folder.iterdir()) == ["launch.cu"]       # neither the library nor the half-written one
    with pytest.raises(KernelBuildError, match="wrote no library"):
        cuda_build.cached_library("up", "k", library="launch.so", unit="launch.cu", source="t", key=[],
                                  commands=lambda unit, out: [["true"]], what="up 1.0's kernel")


@pytest.mark.e2e
def test_an_upstream_builder_compiles_its_launcher_through_the_cache(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """flashinfer's top-k launcher with a stand-in nvcc: the command line it is given, the include tree in the key."""
    from gpu_memsafety.kernels.topk_sampling import build as topk
    monkeypatch.setenv(cuda_build.CACHE_ENV, str(tmp_path / "cache"))
    include = tmp_path / "include"
    (include / "flashinfer").mkdir(parents=True)
    (include / "flashinfer" / "sampling.cuh").write_text("// v1")
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(f"#!{sys.executable}\nimport sys\nargs = sys.argv[1:]\n"
                    f"open({str(tmp_path / 'argv')!r}, 'a').write(' '.join(args) + '\\n')\n"
                    "open(args[args.index('-o') + 1], 'w').write('lib')\n")
    nvcc.chmod(0o755)
    monkeypatch.setattr(topk, "include_dir", lambda version: include)
    monkeypatch.setattr(topk, "find_nvcc", lambda: str(nvcc))
    library = topk.build("0.6.1", (9, 0))
    assert library.name == "launch.so" and library.read_text() == "lib" and library.parent.parent.name == "flashinfer"
    [argv] = (tmp_path / "argv").read_text().splitlines()
    assert "-gencode=arch=compute_90a,code=sm_90a" in argv and f"-I{include}" in argv and "-shared" in argv
    assert topk.build("0.6.1", (9, 0)) == library                                      # cached
    (include / "flashinfer" / "sampling.cuh").write_text("// v2")                     # a changed header: rebuilt
    assert topk.build("0.6.1", (9, 0)) != library and len((tmp_path / "argv").read_text().splitlines()) == 2


@pytest.mark.e2e
def test_sglangs_builder_compiles_then_links_through_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """sglang's pre-dispatch module with a stand-in nvcc and c++: compile to cuda.o, link to the library."""
    from gpu_memsafety.kernels.pre_dispatch import sglang
    monkeypatch.setenv(cuda_build.CACHE_ENV, str(tmp_path / "cache"))
    src = tmp_path / "sglang"
    (src / sglang.JIT_DIR / "include").mkdir(parents=True)
    (src / sglang.CUH).parent.mkdir(parents=True, exist_ok=True)
    (src / sglang.CUH).write_text("// kernel")
    tool = f"#!{sys.executable}\nimport sys\nargs = sys.argv[1:]\n" \
           f"open({str(tmp_path / 'argv')!r}, 'a').write(sys.argv[0] + ' ' + ' '.join(args) + '\\n')\n" \
           "open(args[args.index('-o') + 1], 'w').write('built')\n"
    for name in ("nvcc", "cxx"):
        (tmp_path / name).write_text(tool)
        (tmp_path / name).chmod(0o755)
    tc = sglang.Toolchain(str(tmp_path / "nvcc"), str(tmp_path / "cxx"), "/x/libcudart.so", ("/x/inc",), "/x/lib", "tvm_ffi")
    monkeypatch.setattr(sglang, "source_dir", lambda version: src)
    monkeypatch.setattr(sglang, "toolchain", lambda: tc)
    library = sglang.build("0.5.19", (9, 0))
    assert library.name == "mega_moe_pre_dispatch.so" and library.read_text() == "built"
    compile_line, link_line = (tmp_path / "argv").read_text().splitlines()
    assert compile_line.startswith(tc.nvcc) and f"-c {library.parent / 'cuda.cu'} -o {library.parent / 'cuda.o'}" in compile_line
    assert link_line.startswith(tc.cxx) and str(library.parent / "cuda.o") in link_line and "-ltvm_ffi" in link_line
    assert library.parent.name.startswith("pre_dispatch-0.5.19-sm90a-") and sglang.build("0.5.19", (9, 0)) == library
