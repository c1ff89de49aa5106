"""Split sums into a workspace the launcher makes itself with torch.empty (no context buffer), then their total.
The buggy launcher runs one split more than the workspace holds; the far one writes 2^40 bytes past it
(tests/test_trace.py)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 16


@triton.jit
def _split_sums(x, ws, n, FAR: tl.constexpr, BLOCK: tl.constexpr):
    s = tl.program_id(0)
    offs = s * BLOCK + tl.arange(0, BLOCK)
    part = tl.sum(tl.load(x + offs, mask=offs < n, other=0.0), axis=0)
    tl.store(ws + s + FAR, part)


@triton.jit
def _total(ws, out, splits, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(out, tl.sum(tl.load(ws + i, mask=i < splits, other=0.0), axis=0))


def split_total(x: torch.Tensor, out: torch.Tensor, *, variant: str) -> str:
    splits = triton.cdiv(x.numel(), BLOCK)
    ws = torch.empty(splits, dtype=torch.float32, device=x.device)       # the launcher's own workspace
    grid = splits + 1 if variant == "ws_overrun" else splits             # the bug: one split too many
    far = (1 << 40) // 4 if variant == "wild" else 0                     # the far write: 2^40 B past ws
    _split_sums[(grid,)](x, ws, x.numel(), FAR=far, BLOCK=BLOCK)
    _total[(1,)](ws, out, splits, BLOCK=triton.next_power_of_2(splits))
    return "_split_sums"
