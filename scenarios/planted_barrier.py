"""Planted invalid barrier: calibration for synccheck.

`kernels/planted/race.cu`: two halves of a block waiting at two different barrier instructions must be a
synccheck `barrier` finding in `planted_divergent_barrier` naming a line marked BARRIER; its fixed twin (one
barrier) must be clean. CUDA only (needs a GPU and nvcc).
"""
from __future__ import annotations

from harness.hazards import BARRIER_BUFFER
from harness.model import BARRIER, SYNCCHECK, Expectation, ExpectedFinding
from harness.scenario import Case, Param, Scenario
from kernels.planted.race import VARIANTS

N = 4096   # 16 blocks of 256 threads
NAME = "planted_barrier"
OWN = ("divergent_barrier", "barrier_fixed")


def _expect(case: Case) -> Expectation:
    if case.variant == "divergent_barrier":
        return Expectation((ExpectedFinding(BARRIER, BARRIER_BUFFER, (SYNCCHECK,)),), "barriers in divergent code")
    return Expectation()


SCENARIO = Scenario(
    name=NAME,
    summary="planted divergent barrier (halves of a block at two different barriers) and its fixed twin",
    adapter="kernels.planted.race:run_case",
    params=(Param("n", int, low=1, high=1 << 28),),
    variants=OWN,
    cases=lambda: [Case(NAME, v, {"n": N}, f"cuda-n{N}") for v in OWN],
    expect=_expect,
    kernel=lambda case: VARIANTS[case.variant][2],
    needs_gpu=lambda case: True,
    detectors=(SYNCCHECK,),
    timeout_s=120.0,
)
