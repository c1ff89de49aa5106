"""Harness adapter for triton_kernels' mxfp4 MoE matmul (the last-expert OOB read).

The weight scale's swizzled storage is the watched buffer: the harness places it so that its last byte is
the last byte of its allocation (memcheck: the overread leaves the allocation on every run), flush against
an unmapped page (guard-page mode: the overread faults in hardware), or inside guards in a poison pattern.
Everything else (quantization, swizzle, routing, the call) is kernels/mxfp4/moe.py.
"""
from __future__ import annotations

from typing import Any


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from harness.context import RunInfo
    from kernels.mxfp4 import moe as M

    p = case.params
    M.check_device(ctx.device)
    padded = case.variant in ("padded", "batched_padded", "batched_splitk1_padded")

    def alloc_scale(nbytes: int) -> Any:
        return ctx.tensor("w_scale", (nbytes,), torch.uint8, watch=True)

    prepared = M.prepare(p["E"], p["N"], p["K"], padded=padded, seed=ctx.seed, device=ctx.device, alloc_scale=alloc_scale)
    flags: dict[str, Any] = {}
    if case.variant.startswith("batched"):
        split_k = 1 if "splitk1" in case.variant else None
        x = M.make_batched_input(prepared, p["tokens"], seed=ctx.seed)
        once = lambda: M.run_batched(prepared, x, split_k=split_k, on_flags=flags.update)  # noqa: E731
        counts: tuple[int, ...] = (p["tokens"],) * p["E"]
    else:
        routing = M.route(prepared, p["tokens"], p["top_k"], seed=ctx.seed)
        x = M.make_tokens(prepared, p["tokens"], seed=ctx.seed)
        once = lambda: M.run(prepared, x, routing, on_flags=flags.update)  # noqa: E731
        counts = routing.expert_counts
    y = once()
    notes = {"api": prepared.api_gen, "triton_kernels": prepared.located.describe(),
             "scale_storage_bytes": prepared.layout.nbytes, "expected_overread_bytes": prepared.layout.overread_bytes,
             "expert_rows": list(counts), "opt_flags": {k: str(v) for k, v in flags.items()}}
    return RunInfo(kernel="_matmul_ogs" if prepared.api_gen == "matmul_ogs" else "_matmul", outputs={"y": y},
                   notes=notes, relaunch=once)

