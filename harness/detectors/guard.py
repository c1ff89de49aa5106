"""Guard markers: 0xA5 in front and back guards, row padding and unused rows, checked after the launch.

The one detector no sanitizer replaces: it sees every overwrite outside a tensor's logical bytes, including writes
that stay inside the allocation (row padding, unused rows), at near-native speed, and never a read. The arena
writes the markers (gpu_memsafety.placement.guard), the worker checks them after every launch of a mode that runs this
detector (its evidence: the changed runs of marker bytes per buffer), and this module turns them into findings
(gpu_memsafety.sanitizer.attribute.guard_findings: one per buffer and region class, exact bytes).
"""
from __future__ import annotations

from typing import Any

from gpu_memsafety.detectors.base import Evidence
from gpu_memsafety.model import GUARD, DetectorRun, Finding
from gpu_memsafety.placement import layout as L
from gpu_memsafety.sanitizer import attribute


class GuardDetector:
    name = GUARD
    sanitizer = None
    placement = L.GUARDED
    needs_cover = needs_gpu = False
    action = None               # the markers are checked after whatever launches the case
    deadline_factor = 1.0
    explains_fault = ends_process = False

    def ran(self, ev: Evidence) -> DetectorRun:
        ok = ev.of(GUARD) is not None
        return DetectorRun(GUARD, ok, "markers verified" if ok else "markers not checked")

    def findings(self, ev: Evidence) -> list[Finding]:
        return attribute.guard_findings(ev.of(GUARD) or {}, kernel=ev.result.kernel, arch=ev.result.arch,
                                        case_id=ev.case.id, buffers=ev.result.buffers,
                                        describe=lambda _case_id, name, s, e: ev.describe(name, s, e))


def merge(*checks: dict[str, list[dict[str, Any]]] | None) -> dict[str, list[dict[str, Any]]] | None:
    """The guard evidence of several launches of one case as one: per buffer, the changed runs of any of them
    (offsets are relative to each tensor's start, the same in every launch), merged per region. None when no
    launch checked the markers."""
    given = [c for c in checks if c is not None]
    if not given:
        return None
    guard: dict[str, list[dict[str, Any]]] = {}
    for name in {n: None for c in given for n in c}:
        by_region: dict[str, list[tuple[int, int]]] = {}
        for r in (run for c in given for run in c.get(name, [])):
            by_region.setdefault(r["region"], []).append((r["start"], r["end"]))
        guard[name] = sorted(({"region": region, "start": lo, "end": hi, "logical": ""}
                              for region, spans in by_region.items() for lo, hi in L.merge_runs(spans)),
                             key=lambda r: (r["start"], r["end"]))
    return guard


DETECTOR = GuardDetector()
