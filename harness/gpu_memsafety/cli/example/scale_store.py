"""`scale_store`: does the vector-scale kernel write outside `out`? (docs/writing-a-scenario.md)

A scenario says which cases to run (variants x parameters), how to run one (the adapter: it takes
buffers from the harness instead of torch.empty), and what each case must show (the expectation).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

import scale_kernel                      # the kernel module beside this file
from gpu_memsafety.api import (GUARD, MEMCHECK, OVERWRITE, Case, Expectation, ExpectedFinding, Param, RunContext,
                         RunInfo, Scenario, Variant, grid)


@dataclass(frozen=True)
class Store(Variant):
    buggy: bool = False                  # a typed field: the adapter reads it, nothing parses the name


VARIANTS = (Store("buggy", "stores out[n], one element past the end", buggy=True),
            Store("fixed", "the same kernel with the right mask"))


def cases() -> list[Case]:
    return [Case("scale_store", v.name, p, f"n{p['n']}", ("smoke",) if p["n"] == 1000 else ())
            for v in VARIANTS for p in grid(n=[1000, 4096])]


def run_case(case: Case, ctx: RunContext) -> RunInfo:
    n = case.params["n"]
    x = ctx.tensor("x", (n,), torch.float32)
    x.copy_(ctx.randn((n,), torch.float32))
    out = ctx.tensor("out", (n,), torch.float32, watch=True)   # the buffer whose end matters (a hint: all are covered)
    kernel = scale_kernel.scale(x, out, 2.0, buggy=SCENARIO.variant(case).buggy)
    return RunInfo(kernel=kernel, outputs={"out": out})


def expect(case: Case) -> Expectation:
    if not SCENARIO.variant(case).buggy:
        return Expectation()                                     # the fixed kernel must stay clean
    end = 4 * case.params["n"]                                   # out's size in bytes
    return Expectation((ExpectedFinding(OVERWRITE, "out", (GUARD, MEMCHECK), bytes=4, ranges=((end, end + 4),)),),
                       "the buggy kernel writes out[n]")


def describe(case: Case, buffer: str, start: int, end: int) -> str:
    """Byte offsets in the scenario's words: which elements."""
    n = case.params["n"]
    first, last = start // 4, (end - 1) // 4
    where = f"{buffer}[{first}]" if first == last else f"{buffer}[{first}..{last}]"
    return f"{where}, {first - n + 1} element(s) past the end" if first >= n else where


SCENARIO = Scenario(
    name="scale_store",
    summary="vector scale whose buggy twin stores one element past the end of out",
    adapter=run_case,
    params=(Param("n", int, low=1, high=1 << 28),),
    variants=VARIANTS,
    cases=cases,
    expect=expect,
    kernel=lambda case: "scale_buggy" if SCENARIO.variant(case).buggy else "scale_fixed",
    needs_gpu=lambda case: False,        # Triton runs on the CPU too (TRITON_INTERPRET=1, set by the harness)
    describe=describe,
)
