"""racecheck and synccheck as detector units: compute-sanitizer tools whose records become findings in
gpu_memsafety.sanitizer.hazards (read from the tool's text, sorted onto cases by the kernel that made them)."""
from __future__ import annotations

from gpu_memsafety.detectors.base import Evidence, Unit, sanitizer_ran, with_defaults
from gpu_memsafety.model import BARRIER, RACE, RACECHECK, SYNCCHECK, DetectorRun, Finding
from gpu_memsafety.placement import layout as L


class HazardDetector(Unit):
    """racecheck or synccheck: a compute-sanitizer tool whose records (from the tool's text) are sorted onto cases by
    the kernel that made them (sanitizer.hazards.assign); records nobody can place come with them, failing the case with the raw
    record."""

    placement = L.GUARDED
    needs_cover = needs_gpu = False
    action = None               # it watches the plain launch from the sanitizer
    explains_fault = ends_process = False

    def __init__(self, name: str, deadline_factor: float, sees: tuple[str, ...]) -> None:
        self.name = self.sanitizer = name
        self.deadline_factor = deadline_factor
        self.sees = sees

    def ran(self, ev: Evidence) -> DetectorRun:
        return sanitizer_ran(ev, self.name)

    def findings(self, ev: Evidence) -> list[Finding]:
        return [with_defaults(f, arch=ev.result.arch) for f in ev.sanitizer_findings]


# racecheck tracks every shared-memory access: far slower than memcheck (DESIGN: 1,000x and more).
RACECHECK_DETECTOR = HazardDetector(RACECHECK, deadline_factor=10.0, sees=(RACE,))
SYNCCHECK_DETECTOR = HazardDetector(SYNCCHECK, deadline_factor=1.0, sees=(BARRIER,))
