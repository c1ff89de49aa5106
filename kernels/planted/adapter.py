"""Planted out-of-bounds kernels: the harness's own calibration targets.

A Triton kernel that copies and sums a uint8 buffer, with an off-by-`extra` read or write planted on
purpose, so that every detector can be checked against a bug whose exact bytes are known: reading
src[n .. n+extra) (overread), reading src[-extra .. 0) (underread), writing dst[n .. n+extra) (overwrite),
writing dst[-extra .. 0) (underwrite).
Runs on the GPU and, with TRITON_INTERPRET=1, on the CPU.
"""
from __future__ import annotations

from typing import Any

from gpu_memsafety.errors import Unsupported

BLOCK = 1024


def _kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def planted_copy_sum(src, dst, total, n, READ_EXTRA: tl.constexpr, WRITE_LO: tl.constexpr,
                         WRITE_EXTRA: tl.constexpr, BLOCK: tl.constexpr, READ_LO: tl.constexpr = 0):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(src + offs, mask=offs < n + READ_EXTRA, other=0)
        tl.atomic_add(total, tl.sum(x.to(tl.int32), axis=0))
        if READ_LO > 0:   # a neighbour "to the left" of element 0 that does not exist: src[-READ_LO .. 0)
            u = tl.load(src + offs - READ_LO, mask=offs < READ_LO, other=0)
            tl.atomic_add(total, tl.sum(u.to(tl.int32), axis=0))
        tl.store(dst + offs - WRITE_LO, x, mask=(offs < n + WRITE_EXTRA + WRITE_LO))

    return planted_copy_sum


_CACHE: dict[str, Any] = {}


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo

    p = case.params
    from gpu_memsafety.kernels.planted import calibration
    if case.variant in calibration.VARIANTS:
        return calibration.run_case(case, ctx)
    if p["impl"] == "cuda":
        from gpu_memsafety.kernels.planted import cuda as planted_cuda
        return planted_cuda.run_case(case, ctx)
    if p["impl"] != "triton":
        raise Unsupported(f"unknown impl {p['impl']!r}")
    n = p["n"]
    src = ctx.tensor("src", (n,), torch.uint8, watch=True)
    dst = ctx.tensor("dst", (n,), torch.uint8, watch=True)
    src.copy_((torch.arange(n, dtype=torch.int64) % 7 + 1).to(torch.uint8).to(ctx.device))
    total = torch.zeros(1, dtype=torch.int32, device=ctx.device)
    kernel = _CACHE.setdefault("k", _kernel())
    extra = p["extra"]
    read_extra = extra if case.variant == "overread" else 0
    write_extra = extra if case.variant == "overwrite" else 0
    write_lo = extra if case.variant == "underwrite" else 0
    read_lo = extra if case.variant == "underread" else 0
    if read_lo > BLOCK:
        raise Unsupported(f"an underread of {read_lo} B is more than one block ({BLOCK} B) of this kernel")
    grid = ((n + read_extra + write_extra + BLOCK - 1) // BLOCK + (1 if write_lo else 0),)

    def once() -> None:
        kernel[grid](src, dst, total, n, READ_EXTRA=read_extra, WRITE_LO=write_lo, WRITE_EXTRA=write_extra, BLOCK=BLOCK,
                     READ_LO=read_lo)

    once()
    return RunInfo(kernel="planted_copy_sum", outputs={"total": total}, relaunch=once)
