"""Build a CUDA C++ extension once per source and device, cached across runs, processes and xdist workers.

The build directory is keyed by a hash of the sources, the flags, torch's version and the Python ABI, so a
later run (or a parallel process) reuses the library without recompiling; a file lock serialises the one
build that is needed. A compile error becomes a KernelBuildError carrying the compiler output's tail.

Three ways in: `build_extension` (a torch extension module), `build_library` (a plain shared library through
torch's builder), and `cached_library` (an upstream kernel's generated launcher compiled by the caller's own
commands, keyed by its include closure: DeepGEMM's, flashinfer's and sglang's kernels).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterator, Sequence

from gpu_memsafety.util.build_errors import KernelBuildError, ToolchainMissing
from gpu_memsafety.util.paths import CACHE_ENV, cache_dir

# -lineinfo puts file:line into the SASS so memcheck names the source line of a bad access.
NVCC_FLAGS = ["-O3", "-std=c++17", "-lineinfo"]
OUTPUT_TAIL = 4000
# nvcc's words for an architecture it does not know ("nvcc fatal   : Unsupported gpu architecture 'compute_120'"):
# the toolkit is too old for this GPU, not a fault of the source.
UNSUPPORTED_ARCH = re.compile(r"Unsupported gpu architecture '([^']+)'")


def cache_root() -> Path:
    """Where builds are cached: the harness's one cache directory (util.paths.cache_dir, $GPU_MEMSAFETY_CACHE)."""
    return cache_dir()


def arch_flags(capability: tuple[int, int]) -> list[str]:
    """nvcc flags for exactly this device (sm_90 machine code on an H100/H200)."""
    arch = f"{capability[0]}{capability[1]}"
    return [f"-gencode=arch=compute_{arch},code=sm_{arch}"]


def build_key(*parts: str) -> str:
    import torch
    env = [torch.__version__, str(torch.version.cuda), sys.implementation.cache_tag or "", sys.platform]
    return hashlib.sha256("\0".join([*parts, *env]).encode()).hexdigest()[:16]


def build_extension(name: str, cu_path: Path, binding: str, capability: tuple[int, int]) -> ModuleType:
    cu_source = cu_path.read_text(encoding="utf-8")
    flags = [*NVCC_FLAGS, *arch_flags(capability)]
    key = build_key(cu_source, binding, " ".join(flags))
    build_dir = cache_root() / "cuda" / f"{name}-{key}"
    build_dir.mkdir(parents=True, exist_ok=True)
    with exclusive(build_dir.with_name(build_dir.name + ".lock")):
        (build_dir / "lock").unlink(missing_ok=True)   # torch's baton, left behind by a killed build
        sources = [write_if_changed(build_dir / cu_path.name, cu_source),
                   write_if_changed(build_dir / "binding.cpp", binding)]
        return _load(f"gpu_memsafety_{name}_{key}", sources, flags, build_dir, cu_path)


def find_nvcc() -> str:
    """nvcc of $CUDA_HOME (or $CUDA_PATH), else the one on PATH; ToolchainMissing naming what was looked at."""
    import shutil

    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = str(Path(home) / "bin" / "nvcc") if home else shutil.which("nvcc")
    if not nvcc or not Path(nvcc).is_file():
        raise ToolchainMissing(f"building this kernel needs nvcc (CUDA toolkit); found none "
                               f"(CUDA_HOME={home or 'unset'}, nvcc not on PATH)")
    return nvcc


def build_library(name: str, cu_path: Path, capability: tuple[int, int], *, extra_ldflags: list[str] | None = None) -> Path:
    """A plain shared library (no Python module, nothing imported) from one .cu file, cached like build_extension:
    what a ctypes or torch.cuda.memory.CUDAPluggableAllocator user loads by path. Builds without initializing CUDA
    (the architecture flags are given, so torch never asks the device)."""
    cu_source = cu_path.read_text(encoding="utf-8")
    flags = [*NVCC_FLAGS, *arch_flags(capability)]
    ldflags = list(extra_ldflags or [])
    key = build_key(cu_source, " ".join(flags), " ".join(ldflags))
    build_dir = cache_root() / "cuda" / f"{name}-{key}"
    build_dir.mkdir(parents=True, exist_ok=True)
    module_name = f"gpu_memsafety_{name}_{key}"
    with exclusive(build_dir.with_name(build_dir.name + ".lock")):
        (build_dir / "lock").unlink(missing_ok=True)
        built = build_dir / f"{module_name}.so"
        if built.exists() and (build_dir / ".complete").exists():
            return built
        source = write_if_changed(build_dir / cu_path.name, cu_source)
        problem = toolchain_problem()
        if problem:
            raise ToolchainMissing(f"building {cu_path.name} needs {problem}")
        from torch.utils import cpp_extension
        try:
            cpp_extension.load(name=module_name, sources=[str(source)], extra_cflags=["-O2"], extra_cuda_cflags=flags,
                               extra_ldflags=ldflags, build_directory=str(build_dir), verbose=False,
                               is_python_module=False)
        except (RuntimeError, OSError, ImportError, subprocess.CalledProcessError) as exc:
            raise KernelBuildError(f"building {cu_path.name} failed\nsource = {cu_path}\nbuild_dir = {build_dir}\n"
                                   f"nvcc_flags = {' '.join(flags)}\nldflags = {' '.join(ldflags)}\n"
                                   f"--- compiler output (tail) ---\n{str(exc)[-OUTPUT_TAIL:]}") from exc
        (build_dir / ".complete").write_text(module_name, encoding="utf-8")
        return built


def tree_text(root: Path) -> list[str]:
    """Every file under `root`, as path and text: what a build from an include tree is keyed by."""
    return [f"{p.relative_to(root)}\0{p.read_text(errors='replace')}" for p in sorted(root.rglob("*")) if p.is_file()]


def cached_library(folder: str, stem: str, *, library: str, unit: str, source: str, key: Sequence[str],
                   commands: Callable[[Path, Path], Sequence[list[str]]], what: str) -> Path:
    """A shared library built once from one generated source file by the caller's commands, reused after.

    Its build directory, <cache>/<folder>/<stem>-<digest>, is keyed by the source and `key` (the command line, the
    include tree's text). Under the directory's file lock: a finished library is returned; else `source` is written
    as `unit` and `commands(unit, out)` run in order, the last one writing `out` (a temporary name), which becomes
    `library` only when every command succeeded. A failing command is a KernelBuildError naming `what`, the
    directory, the command and its output's tail."""
    digest = hashlib.sha256("\0\0".join([source, *key]).encode()).hexdigest()[:16]
    build_dir = cache_root() / folder / f"{stem}-{digest}"
    built = build_dir / library
    build_dir.mkdir(parents=True, exist_ok=True)
    with exclusive(build_dir.with_name(build_dir.name + ".lock")):
        if built.is_file():
            return built
        written = write_if_changed(build_dir / unit, source)
        tmp = build_dir / f".{os.getpid()}.{library}"
        for cmd in commands(written, tmp):
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                tmp.unlink(missing_ok=True)
                raise KernelBuildError(f"building {what} failed\nbuild_dir = {build_dir}\ncommand = {' '.join(cmd)}\n"
                                       f"--- output (tail) ---\n{(proc.stdout + proc.stderr)[-OUTPUT_TAIL:]}")
        if not tmp.is_file():
            raise KernelBuildError(f"building {what} wrote no library\nbuild_dir = {build_dir}\nexpected = {tmp}")
        os.replace(tmp, built)
    return built


def driver_ldflags() -> list[str]:
    """Linking the CUDA driver API (libcuda): the toolkit's stub when it has one, else the driver's own libcuda.so.1;
    at run time the driver's libcuda.so.1 is loaded either way, as torch does."""
    from torch.utils import cpp_extension
    home = Path(cpp_extension.CUDA_HOME or "/usr/local/cuda")
    stubs = [d for d in (home / "lib64" / "stubs", home / "targets" / "x86_64-linux" / "lib" / "stubs")
             if (d / "libcuda.so").exists()]
    if stubs:
        return [f"-L{stubs[0]}", "-lcuda"]
    for lib in (Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib64"), Path("/usr/local/nvidia/lib64")):
        if (lib / "libcuda.so.1").exists():
            return [f"-L{lib}", "-l:libcuda.so.1"]
    return ["-lcuda"]


def toolchain_problem() -> str:
    """What building a CUDA extension needs and this machine lacks ("" when nvcc and ninja are there)."""
    import shutil

    import torch
    from torch.utils import cpp_extension
    missing = []
    home = cpp_extension.CUDA_HOME
    if not home or not (Path(home) / "bin" / "nvcc").is_file():
        found = (f"CUDA_HOME={home} has no bin/nvcc" if home else
                 f"torch found no CUDA toolkit (CUDA_HOME, CUDA_PATH, nvcc on PATH: {shutil.which('nvcc') or 'none'}, "
                 f"/usr/local/cuda), torch {torch.__version__} built for CUDA "
                 f"{torch.version.cuda or 'none'}")
        missing.append(f"nvcc from a CUDA toolkit; found: {found}")
    if not cpp_extension.is_ninja_available():
        missing.append("ninja (torch builds extensions with it); found: none on PATH")
    return "; ".join(missing)


def _load(module_name: str, sources: list[Path], flags: list[str], build_dir: Path, origin: Path) -> ModuleType:
    from torch.utils import cpp_extension
    problem = toolchain_problem()
    if problem:
        raise ToolchainMissing(f"building {origin.name} needs {problem}")
    try:
        return cpp_extension.load(name=module_name, sources=[str(s) for s in sources], extra_cflags=["-O2"],
                                  extra_cuda_cflags=flags, build_directory=str(build_dir), verbose=False)
    except (RuntimeError, OSError, ImportError, subprocess.CalledProcessError) as exc:
        output = str(exc)
        unknown = UNSUPPORTED_ARCH.search(output)
        if unknown:
            raise ToolchainMissing(f"building {origin.name} needs an nvcc that supports {unknown.group(1)} (the GPU's "
                                   f"architecture); found one that does not: {unknown.group(0).strip()} "
                                   f"(nvcc_flags = {' '.join(flags)})") from exc
        raise KernelBuildError(f"building {origin.name} failed\nsource = {origin}\nbuild_dir = {build_dir}\n"
                               f"nvcc_flags = {' '.join(flags)}\n--- compiler output (tail) ---\n{output[-OUTPUT_TAIL:]}") from exc


def write_if_changed(path: Path, text: str) -> Path:
    """Write atomically, and only when different, so ninja sees an unchanged file as up to date."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return path
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


@contextlib.contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
