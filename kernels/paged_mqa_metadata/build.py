"""Build and launch the REAL DeepGEMM SM90 metadata kernel from the headers a vLLM wheel bundles.

vLLM ships DeepGEMM's JIT sources in vllm/third_party/deep_gemm/include/; DeepGEMM compiles
`sched::sm90_paged_mqa_logits_metadata<aligned_batch_size, 256, num_sms, false>` at run time and launches it
with one block of 32 threads and `aligned_batch_size * 4` bytes of dynamic shared memory
(csrc/jit_kernels/impls/sm90_fp8_mqa_logits.hpp, `sm90_paged_mqa_logits_metadata`). `make upstream` unpacks the
header and its include closure (44 files, 0.6 MB) into .vendor/vllm-<version>/; this module compiles that
header unchanged, with DeepGEMM's JIT flags (csrc/jit/compiler.hpp) plus -lineinfo (DG_JIT_WITH_LINEINFO), into
a shared library whose one exported function is the host launch above, and calls it through ctypes on torch
tensors' device pointers and torch's current stream. vLLM itself is never imported (it pins its own torch).

The command line and the launcher's source are pure functions, tested on the CPU.
"""
from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any

from gpu_memsafety.upstream import catalogue as U
from gpu_memsafety.errors import Unsupported
from gpu_memsafety.util.cuda_build import cached_library, find_nvcc, tree_text
from gpu_memsafety.util.build_errors import KernelBuildError
from gpu_memsafety.kernels.paged_mqa_metadata import layout as L

HEADER = "deep_gemm/scheduler/sm90_paged_mqa_logits.cuh"
ENTRY = "gms_paged_mqa_metadata"
# DeepGEMM's NVCC flags for a JIT kernel (csrc/jit/compiler.hpp), -lineinfo as DG_JIT_WITH_LINEINFO=1 adds it.
DG_FLAGS = ("-std=c++20", "--diag-suppress=39,161,174,177,186,940", "--ptxas-options=--register-usage-level=10",
            "--compiler-options=-fPIC,-O3,-fconcepts,-Wno-deprecated-declarations,-Wno-abi", "-O3",
            "--expt-relaxed-constexpr", "--expt-extended-lambda", "-lineinfo")


def include_dir(version: str, vendor: Path | None = None) -> Path:
    """The unpacked DeepGEMM include root of vLLM `version`, or Unsupported saying how to get it."""
    art = U.artifact(f"vllm-{L.check_version(version)}")
    folder = U.unpacked(art, vendor)
    if folder is None:
        raise Unsupported(U.how_to_get(art))
    root = folder / U.VLLM_DG_INCLUDE
    if not (root / HEADER).is_file():
        raise Unsupported(f"{art.label}: {root / HEADER} is missing from the unpacked wheel; run `make upstream` again")
    return root


def takes_num_atoms(header_text: str) -> bool:
    """Whether this copy's kernel takes `num_next_n_atoms` (vLLM 0.33.0's) after `is_context_lens_2d`."""
    head = header_text.split("sm90_paged_mqa_logits_metadata(", 1)[-1].split(")", 1)[0]
    return "num_next_n_atoms" in head


def launcher_source(batch_size: int, num_sms: int, *, num_atoms_arg: bool) -> str:
    """The host side of DeepGEMM's SM90 metadata launch for one (aligned batch, num_sms) instantiation."""
    aligned, smem = L.aligned_batch_size(batch_size), L.smem_bytes(batch_size)
    atoms = "num_next_n_atoms, " if num_atoms_arg else ""
    return f"""// gpu-memsafety: DeepGEMM's SM90 get_paged_mqa_logits_metadata launch (non-varlen), generated.
// cuda_bf16.h first: vLLM 0.27.1's deep_gemm/common/math.cuh calls __float22bfloat162_rn before its include
// chain declares it, which DeepGEMM's device-only (-cubin) build never notices; this unit's host pass does.
#include <cuda_bf16.h>
#include <{HEADER}>
#include <cuda_runtime.h>
#include <cstdint>

extern "C" int {ENTRY}(uint32_t batch_size, uint32_t next_n, uint32_t num_next_n_atoms,
                       const uint32_t* context_lens, uint32_t* schedule_metadata, void* stream) {{
    (void)num_next_n_atoms;
    const auto kernel = &deep_gemm::sched::sm90_paged_mqa_logits_metadata<{aligned}, {L.SPLIT_KV}, {num_sms}, false>;
    constexpr int kSmemSize = {smem};
    if (kSmemSize > 48 * 1024) {{
        const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemSize);
        if (e != cudaSuccess) return static_cast<int>(e);
    }}
    kernel<<<1, {L.NUM_THREADS}, kSmemSize, static_cast<cudaStream_t>(stream)>>>(
        batch_size, next_n, true, {atoms}context_lens, nullptr, schedule_metadata);
    return static_cast<int>(cudaGetLastError());
}}
"""


def compile_command(nvcc: str, capability: tuple[int, int], include: Path, source: Path, library: Path) -> list[str]:
    """nvcc with DeepGEMM's flags for this GPU (sm_90a on Hopper), building a shared library."""
    major, minor = capability
    arch = f"{major}{minor}{'a' if major >= 9 else ''}"
    return [nvcc, *DG_FLAGS, f"--gpu-architecture=sm_{arch}", f"-I{include}", "-shared", "--cudart", "shared",
            str(source), "-o", str(library)]


def build(version: str, batch_size: int, num_sms: int, capability: tuple[int, int]) -> Path:
    """The library for one instantiation, compiled once into the cache (a file lock across processes)."""
    include = include_dir(version)
    header = (include / HEADER).read_text(encoding="utf-8")
    if takes_num_atoms(header) != L.TAKES_NUM_ATOMS[version]:
        raise KernelBuildError(f"vLLM {version}'s {HEADER} {'takes' if takes_num_atoms(header) else 'lacks'} "
                               f"num_next_n_atoms, unlike what kernels/paged_mqa_metadata/layout.py records")
    source = launcher_source(batch_size, num_sms, num_atoms_arg=L.TAKES_NUM_ATOMS[version])
    nvcc = find_nvcc()
    probe = compile_command(nvcc, capability, include, Path("launch.cu"), Path("launch.so"))
    return cached_library("deep_gemm", f"metadata-vllm{version}", library="launch.so", unit="launch.cu", source=source,
                          key=[" ".join(probe[1:]), *tree_text(include)],
                          commands=lambda unit, out: [compile_command(nvcc, capability, include, unit, out)],
                          what=f"DeepGEMM's metadata kernel from vLLM {version}")


@functools.lru_cache(maxsize=None)
def _entry(library: str) -> Any:
    fn = getattr(ctypes.CDLL(library), ENTRY)
    fn.argtypes = [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def launch(version: str, context_lens: Any, schedule_metadata: Any, num_sms: int) -> None:
    """DeepGEMM's get_paged_mqa_logits_metadata(context_lens [batch, next_n] int32, 64, num_sms) on SM90,
    writing into `schedule_metadata` ([num_sms + 1, 2] int32, the tensor the host would have allocated)."""
    import torch

    batch_size, next_n = context_lens.shape
    if context_lens.dtype != torch.int32 or not context_lens.is_contiguous():
        raise ValueError("context_lens must be a contiguous int32 [batch, next_n] tensor (DeepGEMM's host asserts)")
    if tuple(schedule_metadata.shape) != (num_sms + 1, 2) or schedule_metadata.dtype != torch.int32:
        raise ValueError(f"schedule_metadata must be int32 [{num_sms + 1}, 2]")
    capability = tuple(torch.cuda.get_device_capability(context_lens.device))
    fn = _entry(str(build(version, batch_size, num_sms, capability)))
    stream = torch.cuda.current_stream(context_lens.device).cuda_stream
    err = fn(batch_size, next_n, L.num_next_n_atoms(next_n), context_lens.data_ptr(), schedule_metadata.data_ptr(),
             ctypes.c_void_p(stream))
    if err != 0:
        raise RuntimeError(f"launching {L.KERNEL} (vLLM {version}) failed: CUDA error {err}")
    torch.cuda.synchronize(context_lens.device)
