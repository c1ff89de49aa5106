"""Every detector, by name: the one list the mode table, the worker, the judge and the scheduler read.

Each entry is a unit of gpu_memsafety.detectors.base.Detector's shape, defined in its own module. Adding a detector: its
module, a line here, a row in the mode table (gpu_memsafety.detectors.modes).
"""
from __future__ import annotations

from typing import Sequence

from gpu_memsafety.detectors import guard, guard_page, hazards, memcheck, poison, trace, trace_race, uninit
from gpu_memsafety.detectors.base import Detector
from gpu_memsafety.model import DETECTORS as NAMES, Finding

UNITS: dict[str, Detector] = {d.name: d for d in (
    guard.DETECTOR, memcheck.DETECTOR, guard_page.DETECTOR, poison.DETECTOR, uninit.DETECTOR, trace.DETECTOR,
    trace_race.DETECTOR, hazards.RACECHECK_DETECTOR, hazards.SYNCCHECK_DETECTOR)}

if tuple(UNITS) != NAMES:     # the model's vocabulary and the registry name the same detectors, in one order
    raise RuntimeError(f"detector registry {tuple(UNITS)} differs from gpu_memsafety.model.DETECTORS {NAMES}")


def says(name: str, part: str) -> bool:
    """What the detector `name` says of one part of its unit (`explains_fault`, `marks_writes`, `places_strays`,
    `exact_accesses`, ...): False for a name that is no detector's (a finding the host placed itself)."""
    unit = UNITS.get(name)
    return unit is not None and bool(getattr(unit, part))


def reconcile(findings: list[Finding]) -> list[Finding]:
    """A case's findings after every detector has said what its own show of the others' (Unit.reconcile: memcheck's
    counts that another detector proves short are marked inexact)."""
    for unit in UNITS.values():
        findings = unit.reconcile(findings)
    return findings


def explained(message: str) -> str:
    """Why an error that ended a run (its result's message) is a detector's to judge, the run itself judging nothing
    (Unit.explains: the interpreter's fence stopping a run over stray accesses, which the trace judges); "" when no
    detector says so."""
    return next((why for unit in UNITS.values() if (why := unit.explains(message))), "")


def fence(detectors: Sequence[str]) -> bool:
    """Fence Triton's interpreter for the rest of this worker process (gpu_memsafety.detectors.trace.fence: no stray
    access touches host memory), strict unless one of the process's `detectors` places stray accesses itself."""
    return trace.fence(strict=not any(UNITS[d].places_strays for d in detectors))
