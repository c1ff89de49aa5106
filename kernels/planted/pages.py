"""Planted reads on either side of an unwatched input: guard-page naming and direction calibration (issue 20).

`out[i] = a[i - A_SHIFT] + b[i + B_EXTRA]` over n uint8 elements, in Triton and in CUDA C++ (pages.cu). Only `out`
is watched, as a user naturally would; `a` and `b` are inputs nobody told the harness about. Variants:
- `read_past_end`: b is read B_EXTRA bytes past its end (b[n .. n+B_EXTRA)); `read_past_end_fixed` masks that
  read to b's bounds;
- `read_before_start`: a is read A_SHIFT bytes before its start (a[-A_SHIFT .. 0)); `read_before_start_fixed`
  masks it.
With every buffer on a guard page (guard_page mode, every buffer covered) the fault names several candidates; the
reruns must name b past_end and a before_start (harness/gpu_memsafety/detectors/pageprobe.py). Triton runs on the CPU too (TRITON_INTERPRET=1).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from gpu_memsafety.scenario.definition import Variant
from gpu_memsafety.kernels.planted import checked_case

BLOCK = 1024
SHIFT = 64            # bytes read outside: before a's start, or past b's end
CU_PATH = Path(__file__).with_name("pages.cu")
BINDING = """
#include <torch/extension.h>
#include <cstdint>
void planted_pages_launch(uintptr_t, uintptr_t, uintptr_t, long long, int, int, int, uintptr_t);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch", &planted_pages_launch); }
"""


@dataclass(frozen=True)
class PageRead(Variant):
    """What a variant reads outside: bytes of a before its start, bytes of b past its end; `fixed` masks both reads
    to the tensors' bounds (the same shifts, inside)."""

    a_shift: int = 0
    b_extra: int = 0
    fixed: bool = False


VARIANTS = (PageRead("read_past_end", b_extra=SHIFT), PageRead("read_past_end_fixed", b_extra=SHIFT, fixed=True),
            PageRead("read_before_start", a_shift=SHIFT),
            PageRead("read_before_start_fixed", a_shift=SHIFT, fixed=True))
BY_NAME = {v.name: v for v in VARIANTS}


@functools.cache
def _triton_kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def planted_pages_add(a, b, out, n, A_SHIFT: tl.constexpr, B_EXTRA: tl.constexpr, FIXED: tl.constexpr,
                          BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        mask_a = mask & (offs - A_SHIFT >= 0) if FIXED else mask       # the bug: a read before a's start
        mask_b = mask & (offs + B_EXTRA < n) if FIXED else mask        # the bug: b read past its end
        x = tl.load(a + offs - A_SHIFT, mask=mask_a, other=0)
        y = tl.load(b + offs + B_EXTRA, mask=mask_b, other=0)
        tl.store(out + offs, x + y, mask=mask)

    return planted_pages_add


@functools.cache
def _cuda_module(capability: tuple[int, int]) -> ModuleType:
    from gpu_memsafety.util.cuda_build import build_extension
    return build_extension("planted_pages", CU_PATH, BINDING, capability)


def kernel_name(impl: str) -> str:
    return "planted_pages_add" if impl == "triton" else "planted_pages_add_cuda"


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo

    impl, n, name = checked_case(case, ctx, tuple(BY_NAME))
    variant = BY_NAME[name]
    a = ctx.tensor("a", (n,), torch.uint8)
    b = ctx.tensor("b", (n,), torch.uint8)
    out = ctx.tensor("out", (n,), torch.uint8, watch=True)
    a.copy_((torch.arange(n, dtype=torch.int64) % 7 + 1).to(torch.uint8).to(ctx.device))
    b.copy_((torch.arange(n, dtype=torch.int64) % 5 + 1).to(torch.uint8).to(ctx.device))
    a_shift, b_extra, fixed = variant.a_shift, variant.b_extra, variant.fixed
    if impl == "triton":
        kernel = _triton_kernel()
        grid = ((n + BLOCK - 1) // BLOCK,)

        def once() -> None:
            kernel[grid](a, b, out, n, A_SHIFT=a_shift, B_EXTRA=b_extra, FIXED=fixed, BLOCK=BLOCK)
    else:
        module = _cuda_module(torch.cuda.get_device_capability(ctx.device))

        def once() -> None:
            stream = torch.cuda.current_stream(ctx.device).cuda_stream
            module.launch(a.data_ptr(), b.data_ptr(), out.data_ptr(), n, a_shift, b_extra, int(fixed), stream)

    once()
    return RunInfo(kernel=kernel_name(impl), outputs={"out": out}, relaunch=once)
