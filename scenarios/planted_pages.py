"""Planted reads past the end and before the start of unwatched inputs: guard-page naming and direction
calibration (issue 20 items 1 and 4).

`kernels/planted/pages.py` (Triton, and a CUDA C++ twin): three buffers, only the output watched. With every buffer
covered, guard-page mode puts all three on pages, so a fault has three candidates; its reruns must name `b` for a
read 64 bytes past its end (`past_end`: a fault with its back page, none with its front page) and `a` for a read 64
bytes before its start (`before_start`: the front-page pass faults, the back page does not). n = 4,096 bytes, a
multiple of 256: no alignment tail, the first byte outside is on the page. Memcheck (every buffer flush-ended) sees
the same bytes exactly and poison sees them change the output, on their side; the fixed twins are clean everywhere.
"""
from __future__ import annotations

from gpu_memsafety.model import (BEFORE_START, GUARD_PAGE, MEMCHECK, OVERREAD, PAST_END, POISON, Expectation,
                           ExpectedFinding)
from gpu_memsafety.scenario.definition import Case, Param, Scenario
from gpu_memsafety.kernels.planted.pages import SHIFT, VARIANTS, kernel_name
from gpu_memsafety.scenarios.planted_oob import describe_bytes

N = 4096


def _cases() -> list[Case]:
    return [Case("planted_pages", variant, {"impl": impl, "n": N}, f"{impl}-n{N}", ("calibration",))
            for impl in ("triton", "cuda") for variant in VARIANTS]


def _expect(case: Case) -> Expectation:
    n = case.params["n"]
    if case.variant == "read_past_end":
        return Expectation((ExpectedFinding(OVERREAD, "b", (MEMCHECK, POISON, GUARD_PAGE), region=PAST_END, bytes=SHIFT,
                                            ranges=((n, n + SHIFT),)),), "unwatched input b read 64 B past its end")
    if case.variant == "read_before_start":
        return Expectation((ExpectedFinding(OVERREAD, "a", (MEMCHECK, POISON, GUARD_PAGE), region=BEFORE_START,
                                            bytes=SHIFT, ranges=((-SHIFT, 0),)),),
                           "unwatched input a read 64 B before its start")
    return Expectation()


SCENARIO = Scenario(
    name="planted_pages",
    summary="planted reads past the end / before the start of unwatched inputs (guard-page naming and direction)",
    adapter="gpu_memsafety.kernels.planted.pages:run_case",
    params=(Param("impl", str, choices=("triton", "cuda")), Param("n", int, low=1, high=1 << 28)),
    variants=VARIANTS,
    cases=_cases,
    expect=_expect,
    kernel=lambda case: kernel_name(case.params["impl"]),
    needs_gpu=lambda case: case.params["impl"] == "cuda",
    describe=describe_bytes,
    timeout_s=120.0,
    cost_s=0.3,
)
