"""Planted shared-memory race and invalid __syncthreads: calibration for racecheck and synccheck.

`kernels/planted/race.cu`: a tree reduction missing its barriers must be a racecheck `race` in
`planted_reduce_race` naming the line marked RACE (a write and a read of the same shared words); two
halves of a block waiting at different __syncthreads must be a synccheck `barrier` finding in
`planted_divergent_barrier` naming one of the lines marked BARRIER; both fixed twins must be clean.
CUDA only (needs a GPU and nvcc); the other detectors do not apply.
"""
from __future__ import annotations

from harness.hazards import BARRIER_BUFFER
from harness.model import BARRIER, RACE, RACECHECK, SHARED, SYNCCHECK, Expectation, ExpectedFinding
from harness.scenario import Case, Param, Scenario
from kernels.planted.race import VARIANTS

N = 4096   # 16 blocks of 256 threads


def _expect(case: Case) -> Expectation:
    if case.variant == "race":
        return Expectation((ExpectedFinding(RACE, SHARED, (RACECHECK,)),), "tree reduction without __syncthreads")
    if case.variant == "divergent_barrier":
        return Expectation((ExpectedFinding(BARRIER, BARRIER_BUFFER, (SYNCCHECK,)),), "__syncthreads in divergent code")
    return Expectation()


SCENARIO = Scenario(
    name="planted_race",
    summary="planted shared-memory race (reduction without __syncthreads) and divergent __syncthreads, with fixed twins",
    adapter="kernels.planted.race:run_case",
    params=(Param("n", int, low=1, high=1 << 28),),
    variants=tuple(VARIANTS),
    cases=lambda: [Case("planted_race", v, {"n": N}, f"cuda-n{N}") for v in VARIANTS],
    expect=_expect,
    kernel=lambda case: VARIANTS[case.variant][2],
    needs_gpu=lambda case: True,
    detectors=(RACECHECK, SYNCCHECK),
    timeout_s=120.0,
)
