"""The calls the block-table gather scenario makes, as pure data (shared by the scenario and the adapter).

Shapes:
- `issue`: vLLM issue #55636's geometry: a [num_reqs, 4] int32 block table, two tokens, `token_to_req_indices`
  [0, 1], top-k rows of 4, block_size 64 (DeepSeek-V4's compressed c4 cache: 256-token blocks / 4). Token 1 is a
  CUDA-graph padding token with one top-k entry: its request has a row only when the producer pads the table.
- `capture`: a decode capture of 8 tokens for 3 real requests (one token each), 16 blocks per request, 512 top-k
  entries per token (DeepSeek-V4-Flash's index_topk), some of them -1; tokens 3..7 are padding.
Policies (the variant): `unpadded`, the table built for the real requests only (what vLLM did before main padded
it: the bug); `padded`, the table built to every token's request with NULL_BLOCK_ID rows (vLLM main's producer,
per the issue's re-check: clean, while the kernel itself stays unguarded); `column_overrun`, a real token whose
top-k entry lies past its row's blocks (the column bound PR #55744 adds) on the table's last row.
"""
from __future__ import annotations

import random
from typing import Any, Mapping

from gpu_memsafety.kernels.block_table_gather.layout import Gather

BLOCK_SIZE = 64
SHAPES = ("issue", "capture")
POLICIES = ("unpadded", "padded", "column_overrun")


def _issue(policy: str) -> tuple[Gather, int]:
    if policy == "column_overrun":
        # One real request, one token; entry 257 is block 4 of a 4-block row: element 4, past a 1-row table.
        return Gather(((0, 70, 257, -1),), (0,), rows=1, stride=4, block_size=BLOCK_SIZE), 1
    rows = 2 if policy == "padded" else 1
    # Token 1's one entry (5: block 0) is the only load past a 1-row table, so memcheck, which ends the kernel at
    # its first bad load, sees all of it: 4 bytes at 16..19, exact.
    return Gather(((0, 70, 130, 255), (5, -1, -1, -1)), (0, 1), rows=rows, stride=4, block_size=BLOCK_SIZE), 1


def _capture(policy: str) -> tuple[Gather, int]:
    if policy == "column_overrun":
        raise ValueError("column_overrun is an issue-shape case")
    real, tokens, stride, width = 3, 8, 16, 512
    rnd = random.Random(55636)
    topk = tuple(tuple(-1 if rnd.random() < 0.1 else rnd.randrange(stride * BLOCK_SIZE) for _ in range(width))
                 for _ in range(tokens))
    rows = tokens if policy == "padded" else real
    return Gather(topk, tuple(range(tokens)), rows=rows, stride=stride, block_size=BLOCK_SIZE), real


def gather(shape: str, policy: str) -> tuple[Gather, int]:
    """The call, and how many of its requests are real (rows past them are NULL_BLOCK_ID padding)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    if shape == "issue":
        return _issue(policy)
    if shape == "capture":
        return _capture(policy)
    raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")


def gather_of(case: Any) -> Gather:
    p: Mapping[str, Any] = case.params
    return gather(p["shape"], case.variant)[0]
