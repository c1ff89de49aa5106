"""A MoE segment-end kernel whose buggy twin loads ids[n] and never uses its value (tests/test_trace.py)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _seg_end(ids, out, n, BLOCK: tl.constexpr, BUGGY: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < n
    cur = tl.load(ids + i, mask=m, other=0)
    if BUGGY:
        nxt = tl.load(ids + i + 1, mask=m, other=-1)        # lane n-1 reads ids[n], past the end
    else:
        nxt = tl.load(ids + i + 1, mask=i + 1 < n, other=-1)
    end = (i == n - 1) | (nxt != cur)                      # lane n-1 is an end whatever it read
    tl.store(out + i, end.to(tl.int32), mask=m)


def seg_end(ids: torch.Tensor, out: torch.Tensor, *, buggy: bool) -> str:
    n = ids.numel()
    _seg_end[(1,)](ids, out, n, BLOCK=triton.next_power_of_2(n), BUGGY=buggy)
    return "_seg_end"
