"""Planted shared-memory race: calibration for racecheck.

`kernels/planted/race.cu`: a tree reduction missing its barriers must be a racecheck `race` in
`planted_reduce_race` naming the line marked RACE (a write and a read of the same shared words); its fixed
twin must be clean. CUDA only (needs a GPU and nvcc). The invalid barrier is `planted_barrier` (synccheck):
kept apart so that each mode judges only the bug it can see.
"""
from __future__ import annotations

from harness.model import RACE, RACECHECK, SHARED, Expectation, ExpectedFinding
from harness.scenario import Case, Param, Scenario
from kernels.planted.race import VARIANTS

N = 4096   # 16 blocks of 256 threads
NAME = "planted_race"
OWN = ("race", "race_fixed")


def _expect(case: Case) -> Expectation:
    if case.variant == "race":
        return Expectation((ExpectedFinding(RACE, SHARED, (RACECHECK,)),), "tree reduction without __syncthreads")
    return Expectation()


SCENARIO = Scenario(
    name=NAME,
    summary="planted shared-memory race (tree reduction without __syncthreads) and its fixed twin",
    adapter="kernels.planted.race:run_case",
    params=(Param("n", int, low=1, high=1 << 28),),
    variants=OWN,
    cases=lambda: [Case(NAME, v, {"n": N}, f"cuda-n{N}") for v in OWN],
    expect=_expect,
    kernel=lambda case: VARIANTS[case.variant][2],
    needs_gpu=lambda case: True,
    detectors=(RACECHECK,),
    timeout_s=120.0,
)
