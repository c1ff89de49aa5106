"""The REAL sglang MegaMoE pre-dispatch kernel, built from a published sglang wheel, as sglang builds it.

Why this exists: the padded-stride scenario must say, version by version, whether the kernel users install
writes into the scale rows' padding. `make upstream` unpacks each version's
`sglang/kernels/jit/csrc/deepseek_v4/mega_moe_pre_dispatch.cuh` and its JIT headers into
.vendor/sglang-<version>/ (sglang itself is never installed: it pins its own torch and imports its server).
This module compiles them the way sglang 0.5.17+'s JIT does (sglang/kernels/jit/utils/compile: a generated
wrapper exporting `MegaMoEPreDispatchKernel<32, true>::run` through TVM_FFI_DLL_EXPORT_TYPED_FUNC, nvcc with
`-gencode=arch=compute_90a,code=sm_90a -DSGL_CUDA_ARCH=900 -std=c++20 -O3 --expt-relaxed-constexpr`, linked
with -ltvm_ffi -lcudart), once per version and flags, into the CUDA-extension cache, and loads it with
`tvm_ffi.load_module`. The wrapper's arguments are what sglang's `mega_moe_pre_dispatch` passes
(sglang/kernels/ops/attention/dsv4/moe.py): x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx,
buf_topk_weights.

The command lines are pure functions (`compile_command`, `link_command`, `wrapper_source`), tested on the CPU.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from gpu_memsafety.upstream import catalogue as U
from gpu_memsafety.util.cuda_build import cached_library, tree_text
from gpu_memsafety.errors import Unsupported
from gpu_memsafety.kernels.pre_dispatch.layout import SGLANG_REFUSALS

GROUP_SIZE = 32
CUH = U.PRE_DISPATCH_CUH
JIT_DIR = "sglang/kernels/jit"
# sglang's DEFAULT_CFLAGS and get_default_target_flags (0.5.17 .. 0.5.19), and toolchain's base flags.
CUDA_FLAGS = ("-Xcompiler", "-fPIC")
# What tvm-ffi's _decorate_with_tvm_ffi prepends to every generated unit (sglang compile/spec.py).
FFI_INCLUDES = ("tvm/ffi/container/tensor.h", "tvm/ffi/dtype.h", "tvm/ffi/error.h", "tvm/ffi/extra/c_env_api.h",
                "tvm/ffi/function.h")
def arch_target(capability: tuple[int, int]) -> str:
    """sglang's JIT target for a capability (arch._cuda_arch_suffix): 9.x and 10.x+ get the 'a' variant."""
    major, minor = capability
    return f"{major}{minor}{'a' if major >= 9 else ''}"


def target_flags(capability: tuple[int, int]) -> list[str]:
    target = arch_target(capability)
    return [f"-gencode=arch=compute_{target},code=sm_{target}", f"-DSGL_CUDA_ARCH={capability[0] * 100 + capability[1] * 10}",
            "-std=c++20", "-O3", "--expt-relaxed-constexpr"]


def wrapper_source(cuh: Path, pdl: bool = True, group_size: int = GROUP_SIZE) -> str:
    """The unit sglang generates for `load_jit(cuda_files=[...], cuda_wrappers=[("run", ...)])`."""
    lines = [f"#include <{h}>" for h in FFI_INCLUDES]
    lines.append(f'#include "{cuh}"')
    lines.append("namespace sglang {")
    lines.append(f"TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, (MegaMoEPreDispatchKernel<{group_size}, "
                 f"{'true' if pdl else 'false'}>::run));")
    lines.append("}  // namespace sglang")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Toolchain:
    nvcc: str
    cxx: str
    cudart: str                 # the libcudart.so the module links against
    tvm_includes: tuple[str, ...]
    tvm_lib_dir: str
    tvm_lib_name: str


def compile_command(tc: Toolchain, capability: tuple[int, int], jit_include: Path, source: Path, obj: Path) -> list[str]:
    includes = [f"-I{p}" for p in (*tc.tvm_includes, str(jit_include))]
    return [tc.nvcc, *CUDA_FLAGS, *target_flags(capability), "-lineinfo", f"-ccbin={tc.cxx}", *includes,
            "-c", str(source), "-o", str(obj)]


def link_command(tc: Toolchain, obj: Path, out: Path) -> list[str]:
    return [tc.cxx, str(obj), "-shared", f"-L{tc.tvm_lib_dir}", f"-l{tc.tvm_lib_name}",
            f"-Wl,-rpath,{tc.tvm_lib_dir}", tc.cudart, f"-Wl,-rpath,{Path(tc.cudart).parent}", "-o", str(out)]


# --- the machine ------------------------------------------------------------------------------------------
def source_dir(version: str) -> Path:
    """.vendor/sglang-<version>/, or Unsupported saying how to get it."""
    art = U.artifact(f"sglang-{version}")
    folder = U.unpacked(art)
    if folder is None:
        raise Unsupported(U.how_to_get(art))
    return folder


def toolchain() -> Toolchain:
    """nvcc, a C++20 host compiler and the pinned apache-tvm-ffi, or Unsupported naming what is missing."""
    problem = U.tvm_ffi_problem()
    if problem:
        raise Unsupported(problem)
    from tvm_ffi.libinfo import find_dlpack_include_path, find_include_path, find_libtvm_ffi

    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = str(Path(home) / "bin" / "nvcc") if home else shutil.which("nvcc")
    if not nvcc or not Path(nvcc).is_file():
        raise Unsupported(f"needs nvcc (CUDA toolkit, sglang builds this kernel at run time); found none "
                          f"(CUDA_HOME={home or 'unset'}, nvcc not on PATH)")
    cxx = os.environ.get("CXX", "c++")
    check_cxx20(cxx)
    lib = Path(find_libtvm_ffi())
    includes = tuple(dict.fromkeys([find_include_path(), find_dlpack_include_path()]))
    return Toolchain(nvcc, cxx, find_cudart(Path(nvcc), home), includes, str(lib.parent), lib.stem.removeprefix("lib"))


def find_cudart(nvcc: Path, home: str | None, system_roots: Sequence[Path] | None = None) -> str:
    """libcudart.so of the toolkit nvcc belongs to (nvcc may be a wrapper script outside the toolkit)."""
    if system_roots is None:
        system_roots = [Path("/usr/local/cuda"), *sorted(Path("/usr/local").glob("cuda-*"), reverse=True)]
    homes = [Path(home)] if home else []
    homes += [nvcc.parent.parent, nvcc.resolve().parent.parent, *system_roots]
    tried = []
    for root in dict.fromkeys(homes):
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            found = sorted((root / sub).glob("libcudart.so*"))
            if found:
                return str(found[0])
            tried.append(str(root / sub))
    raise Unsupported(f"needs the CUDA runtime library (libcudart.so) next to nvcc {nvcc}; searched {', '.join(tried)}")


@functools.lru_cache(maxsize=None)
def check_cxx20(cxx: str) -> None:
    """Unsupported unless `cxx` accepts -std=c++20 (sglang's headers use designated initializers, concepts)."""
    try:
        proc = subprocess.run([cxx, "-std=c++20", "-x", "c++", "-E", "-"], input="int main(){}\n", text=True,
                              capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unsupported(f"needs a host C++ compiler with C++20 (g++ >= 10); `{cxx}` could not run: {exc}") from exc
    if proc.returncode != 0:
        raise Unsupported(f"needs a host C++ compiler with C++20 (g++ >= 10); `{cxx} -std=c++20` refused: "
                          f"{proc.stderr.strip()[-300:]}")


def build(version: str, capability: tuple[int, int]) -> Path:
    """The shared library for `version` on `capability`, compiled once into the cache (file lock across
    processes; a finished build is reused by every later run and xdist worker)."""
    src = source_dir(version)
    tc = toolchain()
    cuh = src / CUH
    wrapper = wrapper_source(cuh)
    include = src / JIT_DIR / "include"
    probe = compile_command(tc, capability, include, Path("cuda.cu"), Path("cuda.o"))

    def commands(unit: Path, out: Path) -> list[list[str]]:
        obj = unit.with_name("cuda.o")
        return [compile_command(tc, capability, include, unit, obj), link_command(tc, obj, out)]

    return cached_library("sglang", f"pre_dispatch-{version}-sm{arch_target(capability)}",
                          library="mega_moe_pre_dispatch.so", unit="cuda.cu", source=wrapper,
                          key=[" ".join(probe), *tree_text(src / JIT_DIR)], commands=commands,
                          what=f"sglang {version} mega_moe_pre_dispatch")


@functools.lru_cache(maxsize=None)
def load(version: str, capability: tuple[int, int]) -> Any:
    """The loaded tvm-ffi module (one per process and version); `.run(...)` is sglang's entry point."""
    import tvm_ffi

    return tvm_ffi.load_module(str(build(version, capability)))


def launch(version: str, x: Any, topk_idx: Any, topk_weights: Any, buf_x: Any, buf_x_sf: Any, buf_topk_idx: Any,
           buf_topk_weights: Any) -> None:
    """sglang's `mega_moe_pre_dispatch(...)` for `version`, on the current device; then a synchronize."""
    import torch

    capability = tuple(torch.cuda.get_device_capability(x.device))
    module = load(version, capability)
    module.run(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights)
    torch.cuda.synchronize(x.device)


def refusal_matches(version: str, message: str) -> bool:
    return SGLANG_REFUSALS[version] in message
