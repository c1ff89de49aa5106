"""Planted invalid barrier: calibration for synccheck.

`kernels/planted/race.cu`: two halves of a block waiting at two different barrier instructions must be a
synccheck `barrier` finding in `planted_divergent_barrier` naming a line marked BARRIER; its fixed twin (one
barrier) must be clean. CUDA only (needs a GPU and nvcc). One definition with `planted_race`
(`gpu_memsafety.kernels.planted.race.scenario`).
"""
from __future__ import annotations

from gpu_memsafety.sanitizer.hazards import BARRIER_BUFFER
from gpu_memsafety.model import BARRIER, SYNCCHECK, ExpectedFinding
from gpu_memsafety.kernels.planted.race import scenario

SCENARIO = scenario("planted_barrier", "divergent_barrier", "barrier_fixed",
                    ExpectedFinding(BARRIER, BARRIER_BUFFER, (SYNCCHECK,)), "barriers in divergent code",
                    "planted divergent barrier (halves of a block at two different barriers) and its fixed twin")
