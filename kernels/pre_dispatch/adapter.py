"""Harness adapter for the MXFP8 pre-dispatch kernel: guarded buffers in, one launch, outputs out.

The scale buffer is the watched one: its rows are padded exactly as the real caller pads them (or packed,
for the reverse mismatch), and every padding byte, unused row and guard byte holds the marker.
"""
from __future__ import annotations

from typing import Any

from harness.errors import Unsupported
from kernels.pre_dispatch import layout as PL

TOPK = 8


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from harness.context import RunInfo
    from kernels.pre_dispatch.launch import launch

    p = case.params
    if p["impl"] == "cuda" and ctx.device.type != "cuda":
        raise Unsupported("needs a CUDA GPU; torch.cuda.is_available() is False")
    hidden, nt, pm = p["hidden"], p["num_tokens"], p["padded_max"]
    g = PL.scale_row_bytes(hidden)
    alloc_stride = g if case.variant == "strided_on_packed" else PL.padded_row_stride(hidden)
    x = ctx.tensor("x", (nt, hidden), torch.bfloat16)
    x.copy_(ctx.randn((nt, hidden)) * 3)
    ids = ctx.tensor("topk_ids", (nt, TOPK), torch.int32)
    ids.copy_(torch.randint(0, 256, (nt, TOPK), generator=ctx.generator(), dtype=torch.int32).to(ctx.device))
    weights = ctx.tensor("topk_weights", (nt, TOPK), torch.float32)
    weights.copy_(torch.rand((nt, TOPK), generator=ctx.generator()).to(ctx.device))
    q_out = ctx.tensor("q", (pm, hidden), torch.uint8)
    scale = ctx.rows("scale", rows=pm, row_bytes=g, row_stride=alloc_stride, used_rows=nt, dtype=torch.int32, watch=True)
    ids_out = ctx.tensor("ids_out", (pm, TOPK), torch.int64)
    weights_out = ctx.tensor("weights_out", (pm, TOPK), torch.float32)
    def once() -> None:
        if case.variant == "strided_on_packed":
            # A caller that passes the padded stride for a buffer it allocated packed: the host check that
            # compares the stride with the tensor is what the fix adds, so it is bypassed to reproduce the bug.
            launch(p["impl"], x, ids, weights, q_out, scale, ids_out, weights_out, num_tokens=nt, mode="strided",
                   row_stride_bytes=PL.padded_row_stride(hidden), check=False)
        else:
            launch(p["impl"], x, ids, weights, q_out, scale, ids_out, weights_out, num_tokens=nt, mode=case.variant)

    once()
    return RunInfo(kernel=PL.kernel_name(p["impl"], "strided"),
                   outputs={"q": q_out[:nt].view(torch.int8), "scale": scale[:nt],
                            "ids": ids_out, "weights": weights_out}, relaunch=once)
