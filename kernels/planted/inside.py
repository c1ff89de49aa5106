"""Planted reads inside the allocation: poison-mode calibration targets, in Triton and in CUDA C++ (inside.cu).

A scale-like buffer of `rows` physical rows, `width` float32 each, `stride` elements apart (stride > width: row
padding), of which only the first `tokens` rows hold data (the rest are unused rows); the host writes only the
logical bytes, so padding and unused rows keep their markers. Variants:
- packed_stride_read: a consumer copies `tokens` rows out, walking them with the packed stride (`t * width`)
  instead of the allocation's (`t * stride`): it reads the padding of every row but the last one it reaches;
- strided_read: its fixed twin (the allocation's stride);
- unused_rows_read: a column sum over every physical row, unused ones included (`rows` instead of `tokens`):
  it reads the logical-width bytes of each unused row;
- used_rows_read: its fixed twin (the first `tokens` rows only).
No byte leaves the allocation, so memcheck sees none of it and no guard marker changes (they are reads);
poison mode sees them because the output changes when padding or unused rows change pattern. The Triton
kernels run on the GPU and, with TRITON_INTERPRET=1, on the CPU.
"""
from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType
from typing import Any

from gpu_memsafety.errors import Unsupported

VARIANTS = ("packed_stride_read", "strided_read", "unused_rows_read", "used_rows_read")
ITEM = 4              # float32
BLOCK = 32            # Triton: elements of one row per program (>= width)
CU_PATH = Path(__file__).with_name("inside.cu")
BINDING = """
#include <torch/extension.h>
#include <cstdint>
void planted_inside_launch(int, uintptr_t, uintptr_t, long long, long long, long long, uintptr_t);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch", &planted_inside_launch); }
"""
KERNELS = {"copy": "planted_inside_copy", "sum": "planted_inside_sum"}


def kernel_name(impl: str, variant: str) -> str:
    base = KERNELS["copy" if variant in ("packed_stride_read", "strided_read") else "sum"]
    return base if impl == "triton" else base + "_cuda"


def walk(variant: str, *, tokens: int, rows: int, width: int, stride: int) -> tuple[int, int]:
    """(rows the kernel walks, elements from one row to the next): the one place each variant's addressing is
    decided, for the kernels and for the scenario's model of the bytes read."""
    if variant == "packed_stride_read":
        return tokens, width            # the bug: packed addressing over padded rows
    if variant == "strided_read":
        return tokens, stride
    if variant == "unused_rows_read":
        return rows, stride             # the bug: every physical row, unused ones included
    if variant == "used_rows_read":
        return tokens, stride
    raise Unsupported(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")


@functools.cache
def _triton_kernels() -> dict[str, Any]:
    import triton
    import triton.language as tl

    @triton.jit
    def planted_inside_copy(scale, out, step, width, BLOCK: tl.constexpr):
        t = tl.program_id(0)
        j = tl.arange(0, BLOCK)
        m = j < width
        tl.store(out + t * width + j, tl.load(scale + t * step + j, mask=m, other=0.0), mask=m)

    @triton.jit
    def planted_inside_sum(scale, out, walked, step, width, BLOCK: tl.constexpr):
        j = tl.arange(0, BLOCK)
        m = j < width
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for r in range(0, walked):
            acc += tl.load(scale + r * step + j, mask=m, other=0.0)
        tl.store(out + j, acc, mask=m)

    return {"copy": planted_inside_copy, "sum": planted_inside_sum}


@functools.cache
def _cuda_module(capability: tuple[int, int]) -> ModuleType:
    from gpu_memsafety.util.cuda_build import build_extension
    return build_extension("planted_inside", CU_PATH, BINDING, capability)


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo

    p, variant = case.params, case.variant
    impl, tokens, rows, width, stride = p["impl"], p["tokens"], p["rows"], p["width"], p["stride"]
    walked, step = walk(variant, tokens=tokens, rows=rows, width=width, stride=stride)
    if impl == "cuda" and ctx.device.type != "cuda":
        raise Unsupported("needs a CUDA GPU; torch.cuda.is_available() is False")
    if width > BLOCK and impl == "triton":
        raise Unsupported(f"the Triton kernel covers rows of up to {BLOCK} elements, got width {width}")
    scale = ctx.rows("scale", rows=rows, row_bytes=width * ITEM, row_stride=stride * ITEM, used_rows=tokens,
                     dtype=torch.float32, watch=True)
    values = torch.arange(tokens * width, dtype=torch.float32).reshape(tokens, width) % 13 + 1
    scale[:tokens].copy_(values.to(ctx.device))     # the logical bytes only: padding and unused rows keep markers
    copy = variant in ("packed_stride_read", "strided_read")
    out = ctx.tensor("out", (tokens, width) if copy else (width,), torch.float32)
    if impl == "triton":
        kernels = _triton_kernels()
        if copy:
            def once() -> None:
                kernels["copy"][(walked,)](scale, out, step, width, BLOCK=BLOCK)
        else:
            def once() -> None:
                kernels["sum"][(1,)](scale, out, walked, step, width, BLOCK=BLOCK)
    else:
        module = _cuda_module(torch.cuda.get_device_capability(ctx.device))

        def once() -> None:
            stream = torch.cuda.current_stream(ctx.device).cuda_stream
            module.launch(0 if copy else 1, scale.data_ptr(), out.data_ptr(), walked, step, width, stream)
    once()
    return RunInfo(kernel=kernel_name(impl, variant), outputs={"out": out}, relaunch=once)
