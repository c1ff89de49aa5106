"""split_total: stray writes outside every allocation a kernel can reach, in memory the launcher allocated itself
(one float past its torch.empty workspace) and far from everything (2^40 B past it). On a CPU the interpreter's
trace names them and keeps the interpreter from touching that memory (tests/test_trace.py). Every case expects
nothing."""
from __future__ import annotations

import torch

import ws_kernel
from gpu_memsafety.api import Case, Expectation, Param, RunContext, RunInfo, Scenario


def run_case(case: Case, ctx: RunContext) -> RunInfo:
    n = case.params["n"]
    x = ctx.tensor("x", (n,), torch.float32)
    x.copy_(torch.arange(n, dtype=torch.float32))
    out = ctx.tensor("out", (1,), torch.float32, watch=True)
    kernel = ws_kernel.split_total(x, out, variant=case.variant)
    return RunInfo(kernel=kernel, outputs={"out": out})


SCENARIO = Scenario(
    name="split_total",
    summary="split sums into the launcher's own workspace: one split too many, or a write far past it",
    adapter=run_case,
    params=(Param("n", int, low=1, high=4096),),
    variants=("ws_overrun", "wild", "ws_fixed"),
    cases=lambda: [Case("split_total", v, {"n": 64}, "n64") for v in ("ws_overrun", "wild", "ws_fixed")],
    expect=lambda case: Expectation(),
    kernel=lambda case: "_split_sums",
    needs_gpu=lambda case: False,
)
