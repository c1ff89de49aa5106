"""Every detector, by name: the one list the mode table, the worker, the judge and the scheduler read.

Each entry is a unit of gpu_memsafety.detectors.base.Detector's shape, defined in its own module. Adding a detector: its
module, a line here, a row in the mode table (gpu_memsafety.engine.modes).
"""
from __future__ import annotations

from gpu_memsafety.detectors import guard, guard_page, hazards, memcheck, poison, trace, uninit
from gpu_memsafety.detectors.base import Detector
from gpu_memsafety.model import DETECTORS as NAMES

UNITS: dict[str, Detector] = {d.name: d for d in (
    guard.DETECTOR, memcheck.DETECTOR, guard_page.DETECTOR, poison.DETECTOR, uninit.DETECTOR, trace.DETECTOR,
    hazards.RACECHECK_DETECTOR, hazards.SYNCCHECK_DETECTOR)}

if tuple(UNITS) != NAMES:     # the model's vocabulary and the registry name the same detectors, in one order
    raise RuntimeError(f"detector registry {tuple(UNITS)} differs from gpu_memsafety.model.DETECTORS {NAMES}")

