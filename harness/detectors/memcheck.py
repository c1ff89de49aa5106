"""compute-sanitizer memcheck: reads and writes past the end and before the start of every covered buffer.

Each covered buffer is an exact allocation of its own (placement `exact`: no guard, start 256-aligned, memcheck's
`--padding` keeps other allocations away), so the first byte past the end, or before the start, is outside every
allocation. The records are read and placed once per batch (gpu_memsafety.sanitizer.records: by address onto the
case whose buffer holds it); this detector hands a case its share. memcheck ends the kernel at its first bad
access, and the worker process with it (`ends_process`): the rest of the batch reruns in a fresh process.
"""
from __future__ import annotations

from gpu_memsafety.detectors.base import Evidence, sanitizer_ran, with_defaults
from gpu_memsafety.model import MEMCHECK, DetectorRun, Finding
from gpu_memsafety.placement import layout as L


class MemcheckDetector:
    name = MEMCHECK
    sanitizer = "memcheck"
    placement = L.EXACT
    needs_cover = True
    needs_gpu = False           # the sanitizer needs a GPU; without one the detector could not run (said so)
    action = None               # it watches the plain launch from the sanitizer
    deadline_factor = 1.0       # the runner scales a sanitized process's deadline (modes.SANITIZER_SLOWDOWN)
    explains_fault = True
    ends_process = True

    def ran(self, ev: Evidence) -> DetectorRun:
        return sanitizer_ran(ev, MEMCHECK)

    def findings(self, ev: Evidence) -> list[Finding]:
        return [with_defaults(f, arch=ev.result.arch) for f in ev.sanitizer_findings]


DETECTOR = MemcheckDetector()
