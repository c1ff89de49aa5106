"""Adapters for tests/fake_kernels/fake_scenarios/fake_poison.py: torch ops on the CPU standing in for kernels
whose adapter declares no output (poison-mode tests). The "overread" adds x's first back-guard float to out."""
from __future__ import annotations

from typing import Any

import torch

from gpu_memsafety.scenario.context import RunInfo


def run_case(case: Any, ctx: Any) -> Any:
    n = case.params["n"]
    x = ctx.tensor("x", (n,), torch.float32)
    x.fill_(1.0)
    out = ctx.tensor("out", (n,), torch.float32, watch=True)
    if case.variant == "undeclared_overread":
        buf = ctx.arena.buffers["x"]
        past = buf.storage[buf.layout.front + buf.layout.nbytes:][:4].view(torch.float32)   # x[n], past the end
        out.copy_(x + past.sum())
    else:
        out.copy_(x * 2)
    return RunInfo(kernel="fake_undeclared")          # no outputs declared: the bug is the adapter's omission
