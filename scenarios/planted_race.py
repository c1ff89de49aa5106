"""Planted shared-memory race: calibration for racecheck.

`kernels/planted/race.cu`: a tree reduction missing its barriers must be a racecheck `race` in
`planted_reduce_race` naming the line marked RACE (a write and a read of the same shared words); its fixed
twin must be clean. CUDA only (needs a GPU and nvcc). The invalid barrier is `planted_barrier` (synccheck):
kept apart so that each mode judges only the bug it can see; both come from one definition
(`gpu_memsafety.kernels.planted.race.scenario`).
"""
from __future__ import annotations

from gpu_memsafety.model import RACE, RACECHECK, SHARED, ExpectedFinding
from gpu_memsafety.kernels.planted.race import scenario

SCENARIO = scenario("planted_race", "race", "race_fixed", ExpectedFinding(RACE, SHARED, (RACECHECK,)),
                    "tree reduction without __syncthreads",
                    "planted shared-memory race (tree reduction without __syncthreads) and its fixed twin")
