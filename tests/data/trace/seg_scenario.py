"""seg_end: an overread whose value never matters: poison cannot see it; memcheck on a GPU and the interpreter's
trace on a CPU can (tests/test_trace.py). Both cases expect nothing."""
from __future__ import annotations

import torch

import seg_kernel
from gpu_memsafety.api import Case, Expectation, Param, RunContext, RunInfo, Scenario


def run_case(case: Case, ctx: RunContext) -> RunInfo:
    n = case.params["n"]
    ids = ctx.tensor("ids", (n,), torch.int32)
    ids.copy_(torch.arange(n, dtype=torch.int32) // 3)
    out = ctx.tensor("out", (n,), torch.int32, watch=True)
    kernel = seg_kernel.seg_end(ids, out, buggy=case.variant == "buggy")
    return RunInfo(kernel=kernel, outputs={"out": out})


SCENARIO = Scenario(
    name="seg_end",
    summary="segment ends whose buggy twin loads one id past the end and ignores it",
    adapter=run_case,
    params=(Param("n", int, low=2, high=4096),),
    variants=("buggy", "fixed"),
    cases=lambda: [Case("seg_end", v, {"n": 36}, "n36") for v in ("buggy", "fixed")],
    expect=lambda case: Expectation(),
    kernel=lambda case: "_seg_end",
    needs_gpu=lambda case: False,
)
