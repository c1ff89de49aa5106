"""Planted unwritten-memory bugs: uninit-mode calibration targets, in Triton and in CUDA C++.

`out[i] = (out[i] if ACCUMULATE else 0) + x[i]` over n float32 elements, `out` allocated and not written by
the host (a `torch.empty` output). Variants: `accumulate_empty` accumulates into it (every result depends on
never-written bytes); `accumulate_zeroed` is its fixed twin (the host zeroes `out` first); `grid_short` stores
without accumulating but launches one block fewer than the data needs (the last block's elements of `out` are
never written); `grid_full` is its fixed twin (the grid covers every element). The Triton kernel runs on the GPU and, with TRITON_INTERPRET=1, on the CPU.
"""
from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType
from typing import Any

from gpu_memsafety.kernels.planted import checked_case

BLOCK = 1024          # Triton: elements per program
CUDA_THREADS = 256    # CUDA: threads per block (uninit.cu)
CU_PATH = Path(__file__).with_name("uninit.cu")
BINDING = """
#include <torch/extension.h>
#include <cstdint>
void planted_accumulate_launch(uintptr_t, uintptr_t, long long, int, int, uintptr_t);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch", &planted_accumulate_launch); }
"""
VARIANTS = ("accumulate_empty", "accumulate_zeroed", "grid_short", "grid_full")


@functools.cache
def _triton_kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def planted_accumulate(x, out, n, ACCUMULATE: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        value = tl.load(x + offs, mask=mask, other=0.0)
        if ACCUMULATE:
            value += tl.load(out + offs, mask=mask, other=0.0)
        tl.store(out + offs, value, mask=mask)

    return planted_accumulate


@functools.cache
def _cuda_module(capability: tuple[int, int]) -> ModuleType:
    from gpu_memsafety.util.cuda_build import build_extension
    return build_extension("planted_uninit", CU_PATH, BINDING, capability)


def block_elements(impl: str) -> int:
    """Elements one block (program) covers: what a grid one block short leaves unwritten at the end."""
    return BLOCK if impl == "triton" else CUDA_THREADS


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo

    impl, n, variant = checked_case(case, ctx, VARIANTS)
    x = ctx.tensor("x", (n,), torch.float32)
    out = ctx.tensor("out", (n,), torch.float32, watch=True)
    x.copy_((torch.arange(n, dtype=torch.float32) % 13 + 1).to(ctx.device))
    accumulate = variant in ("accumulate_empty", "accumulate_zeroed")
    if variant == "accumulate_zeroed":
        out.zero_()            # the fix: the host writes every byte the kernel accumulates into
    short = variant == "grid_short"
    if impl == "triton":
        once = _triton_launch(x, out, n, accumulate, short)
    else:
        once = _cuda_launch(ctx, x, out, n, accumulate, short)
    once()
    kernel = "planted_accumulate" if impl == "triton" else "planted_accumulate_cuda"
    return RunInfo(kernel=kernel, outputs={"out": out}, relaunch=once)


def _triton_launch(x: Any, out: Any, n: int, accumulate: bool, short: bool) -> Any:
    kernel = _triton_kernel()
    grid = ((n + BLOCK - 1) // BLOCK - (1 if short else 0),)
    return lambda: kernel[grid](x, out, n, ACCUMULATE=accumulate, BLOCK=BLOCK)


def _cuda_launch(ctx: Any, x: Any, out: Any, n: int, accumulate: bool, short: bool) -> Any:
    import torch
    module = _cuda_module(torch.cuda.get_device_capability(ctx.device))

    def once() -> None:
        stream = torch.cuda.current_stream(ctx.device).cuda_stream
        module.launch(x.data_ptr(), out.data_ptr(), n, int(accumulate), int(short), stream)

    return once
