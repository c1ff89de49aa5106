"""Build and launch the REAL FlashInfer top-k sampling kernel from a flashinfer-python wheel's headers.

FlashInfer compiles its sampling module at run time (flashinfer/jit/sampling.py: csrc/sampling.cu and its
binding, through tvm-ffi). `make upstream` unpacks include/flashinfer/sampling.cuh and its include closure (8
files, 0.4 MB) from each pinned wheel into .vendor/flashinfer-python-<version>/. This module compiles a unit
that includes that header unchanged and exports one C function doing what csrc/sampling.cu's
`top_k_sampling_from_probs` does for float probs and int32 indices: `sampling::TopKSamplingFromProb<float,
int32_t>(...)` with the caller's tensors, deterministic, no seed or offset tensors. It is loaded with ctypes
and called on torch tensors' device pointers and torch's current stream; flashinfer itself is never imported.

Flags: FlashInfer's JIT flags for a sampling build on Hopper (flashinfer/jit/core.py, cpp_ext.py:
-std=c++17, -use_fast_math, -DFLASHINFER_ENABLE_{F16,BF16,FP8_E4M3,FP8_E5M2}, --expt-relaxed-constexpr,
-gencode for sm_90a) plus -lineinfo. One difference: CUB and libcu++ come from the CUDA toolkit, not from the
wheel's vendored CCCL (10 MB per version, over the device's carry budget); the kernel's code is the wheel's.
"""
from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any

from gpu_memsafety.upstream import catalogue as U
from gpu_memsafety.errors import Unsupported
from gpu_memsafety.util.cuda_build import cached_library, find_nvcc, tree_text
from gpu_memsafety.kernels.topk_sampling import layout as L

HEADER = "flashinfer/sampling.cuh"
ENTRY = "gms_top_k_sampling"
FI_FLAGS = ("-std=c++17", "-use_fast_math", "-DFLASHINFER_ENABLE_F16", "-DFLASHINFER_ENABLE_BF16",
            "-DFLASHINFER_ENABLE_FP8_E4M3", "-DFLASHINFER_ENABLE_FP8_E5M2", "--compiler-options=-fPIC",
            "--expt-relaxed-constexpr", "-O3", "-lineinfo")

LAUNCHER = f"""// gpu-memsafety: csrc/sampling.cu's top_k_sampling_from_probs for float probs, int32 ids (generated)
#include <{HEADER}>
#include <cstdint>

extern "C" int {ENTRY}(float* probs, int32_t* output, bool* valid, int32_t* indices, int32_t* top_k_arr,
                       uint32_t batch_size, uint32_t top_k_val, uint32_t d, uint64_t seed, uint64_t offset,
                       void* stream) {{
    // csrc/sampling.cu passes the int32 top_k tensor as float*; the kernel reads it as IdType*.
    return static_cast<int>(flashinfer::sampling::TopKSamplingFromProb<float, int32_t>(
        probs, output, valid, indices, reinterpret_cast<float*>(top_k_arr), batch_size, top_k_val, d,
        /*deterministic=*/true, nullptr, seed, nullptr, offset, static_cast<cudaStream_t>(stream)));
}}
"""


def include_dir(version: str, vendor: Path | None = None) -> Path:
    art = U.artifact(f"flashinfer-{L.check_version(version)}")
    folder = U.unpacked(art, vendor)
    if folder is None:
        raise Unsupported(U.how_to_get(art))
    root = folder / U.FLASHINFER_INCLUDE
    if not (root / HEADER).is_file():
        raise Unsupported(f"{art.label}: {root / HEADER} is missing from the unpacked wheel; run `make upstream` again")
    return root


def compile_command(nvcc: str, capability: tuple[int, int], include: Path, source: Path, library: Path) -> list[str]:
    major, minor = capability
    arch = f"{major}{minor}{'a' if major >= 9 else ''}"
    return [nvcc, *FI_FLAGS, f"-gencode=arch=compute_{arch},code=sm_{arch}", f"-I{include}", "-shared",
            "--cudart", "shared", str(source), "-o", str(library)]


def build(version: str, capability: tuple[int, int]) -> Path:
    """The launcher library for `version` on `capability`, compiled once into the cache."""
    include = include_dir(version)
    nvcc = find_nvcc()
    probe = compile_command(nvcc, capability, include, Path("launch.cu"), Path("launch.so"))
    return cached_library("flashinfer", f"top_k_sampling-{version}", library="launch.so", unit="launch.cu",
                          source=LAUNCHER, key=[" ".join(probe[1:]), *tree_text(include)],
                          commands=lambda unit, out: [compile_command(nvcc, capability, include, unit, out)],
                          what=f"flashinfer {version}'s top-k sampling")


@functools.lru_cache(maxsize=None)
def _entry(library: str) -> Any:
    fn = getattr(ctypes.CDLL(library), ENTRY)
    fn.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_uint32] * 3 + [ctypes.c_uint64] * 2 + [ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def launch(version: str, probs: Any, output: Any, valid: Any, indices: Any, top_k: Any, *, seed: int = 5339) -> None:
    """top_k_sampling_from_probs(probs, top_k, indices=indices, deterministic=True) into output / valid."""
    import torch

    rows, d = probs.shape
    if top_k.numel() != rows:      # csrc/sampling.cu's check_tensor_param: the length is checked against probs
        raise ValueError(f"top_k has {top_k.numel()} entries for {rows} rows of probs")
    capability = tuple(torch.cuda.get_device_capability(probs.device))
    fn = _entry(str(build(version, capability)))
    stream = torch.cuda.current_stream(probs.device).cuda_stream
    err = fn(probs.data_ptr(), output.data_ptr(), valid.data_ptr(), indices.data_ptr(), top_k.data_ptr(),
             output.numel(), 0, d, seed, 0, ctypes.c_void_p(stream))
    if err != 0:
        raise RuntimeError(f"flashinfer {version} TopKSamplingFromProb failed: CUDA error {err}")
    torch.cuda.synchronize(probs.device)
