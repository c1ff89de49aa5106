"""Adapters for tests/helpers/fake_kernels/fake_scenarios/fake_poison.py: torch ops on the CPU standing in for kernels
whose adapter declares no output (poison-mode tests). The "overread" adds x's first back-guard float to out."""
from __future__ import annotations

from typing import Any

import torch

from gpu_memsafety.scenario.context import RunInfo


def run_case(case: Any, ctx: Any) -> Any:
    n = case.params["n"]
    x = ctx.tensor("x", (n,), torch.float32)
    x.fill_(1.0)
    if case.variant.startswith("foreign"):
        return _foreign(case, ctx, x, n)
    out = ctx.tensor("out", (n,), torch.float32, watch=True)
    if case.variant == "undeclared_overread":
        buf = ctx.arena.buffers["x"]
        past = buf.storage[buf.layout.front + buf.layout.nbytes:][:4].view(torch.float32)   # x[n], past the end
        out.copy_(x + past.sum())
    else:
        out.copy_(x * 2)
    return RunInfo(kernel="fake_undeclared")          # no outputs declared: the bug is the adapter's omission


def run_rows(case: Any, ctx: Any) -> Any:
    """tests/helpers/fake_kernels/fake_scenarios/fake_rows.py: y = ctx.rows(8 rows, 5 used) of 4 floats, each used row
    written from x; the whole y (unused rows too) is the declared output."""
    rows, used, width = case.params["n"], 5, 4
    x = ctx.tensor("x", (used, width), torch.float32)
    x.copy_(torch.arange(used * width, dtype=torch.float32).view(used, width))
    y = ctx.rows("y", rows=rows, row_bytes=width * 4, row_stride=width * 4, used_rows=used, dtype=torch.float32,
                 watch=True)
    if case.variant == "unused_read":
        y[:used].copy_(x + y[used].sum())          # the first unused row is read: marker bytes into every result
    else:
        y[:used].copy_(x * 2)
    return RunInfo(kernel="fake_rows", outputs={"y": y})


def run_recount(case: Any, ctx: Any) -> Any:
    """tests/helpers/fake_kernels/fake_scenarios/fake_recount.py: out = x + the sum of the 8 floats past x's end (32 B). In an
    exact placement (the memcheck stage) nothing of ours lies there: the read is memcheck's to report."""
    n = case.params["n"]
    x = ctx.tensor("x", (n,), torch.float32)
    x.fill_(1.0)
    out = ctx.tensor("out", (n,), torch.float32, watch=True)
    buf = ctx.arena.buffers["x"]
    past = buf.storage[buf.layout.front + buf.layout.nbytes:][:32]
    extra = past.view(torch.float32).sum() if past.numel() == 32 else torch.zeros(())
    out.copy_(x + extra)
    return RunInfo(kernel="fake_recount", outputs={"out": out})


_KEPT: dict[int, torch.Tensor] = {}


def _foreign(case: Any, ctx: Any, x: Any, n: int) -> Any:
    """The result in a tensor the context did not allocate (an adapter's own torch.empty, or a library's persistent
    workspace), x read one float past its end: poison can compare only what it is shown."""
    buf = ctx.arena.buffers["x"]
    past = buf.storage[buf.layout.front + buf.layout.nbytes:][:4].view(torch.float32)
    if case.variant == "foreign_kept":
        out = _KEPT.setdefault(n, torch.empty(n, dtype=torch.float32, device=x.device))
    else:
        out = torch.empty(n, dtype=torch.float32, device=x.device)
    out.copy_(x + past.sum())
    if case.variant == "foreign_undeclared":
        return RunInfo(kernel="fake_foreign")
    return RunInfo(kernel="fake_foreign", outputs={"out": out})
