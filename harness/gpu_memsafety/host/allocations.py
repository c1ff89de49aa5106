"""What a finding on a pytest suite's test says about the allocation it hit: how the code names it, its size, who
made it and where, and bytes outside it in words. One definition for every detector's host face (the guard
markers, memcheck's records, the guard page, the trace); and the allocator shim's changed marker bytes as findings
(the scenario path's guard findings, sanitizer/attribute.guard_findings, with what the allocation is)."""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from gpu_memsafety.host.launches import TensorUse, name_of
from gpu_memsafety.detectors.suite_modes import MARKERS_DETECTOR
from gpu_memsafety.model import BEFORE_START, PAST_END, Finding
from gpu_memsafety.host.allocator import Allocation, GuardHit
from gpu_memsafety.sanitizer.attribute import guard_findings

STACK_SHOWN = 6


def allocation_details(alloc: Allocation, test: str, uses: Sequence[TensorUse] = (),
                       kernel: str = "") -> tuple[tuple[str, str], ...]:
    """What a finding says about the allocation it hit: how the code names it (the kernel's parameter, the test's
    variable: host/launches.py), size, who made it, where (innermost frame first)."""
    name = name_of(alloc.ptr, uses, kernel) if alloc.ptr else ""
    named = (("tensor", name),) if name else ()
    stack = "\n".join(f.describe() for f in alloc.stack[:STACK_SHOWN]) or "(no Python frame outside torch)"
    made = "this test" if alloc.test == test else alloc.test
    freed = f"; freed during {'this test' if alloc.freed_in == test else alloc.freed_in}" if alloc.freed_in else ""
    return named + (("size", str(alloc.size)), ("allocated_in", made + freed), ("device", f"cuda:{alloc.device}"),
            ("stack", stack))


def where_text(lo: int, hi: int, size: int) -> str:
    """Bytes [lo, hi) outside an allocation of `size` bytes, relative to its first byte, in words."""
    if hi <= 0:
        return f"{-lo} to {-hi + 1} B before the first byte" if hi < 0 else f"{-lo} B before the first byte"
    return f"bytes {lo - size}..{hi - size - 1} past the end (offsets {lo}..{hi - 1})"


def marker_findings(hits: Sequence[GuardHit], test: str, arch: str, uses: Sequence[TensorUse] = ()) -> list[Finding]:
    """Changed marker bytes -> one overwrite finding per allocation and side (before_start, past_end)."""
    out = []
    for hit in hits:
        size = hit.allocation.size
        runs = [{"region": BEFORE_START if hi <= 0 else PAST_END, "start": lo, "end": hi,
                 "logical": where_text(lo, hi, size)} for lo, hi in hit.changed_runs()]
        state = "still allocated (markers re-armed)" if hit.live else "freed during the test; checked before release"
        for f in guard_findings({hit.allocation.label: runs}, kernel="", arch=arch, detector=MARKERS_DETECTOR):
            side = "before the start of" if f.region == BEFORE_START else "past the end of"
            out.append(replace(f, note=f"{f.bytes} marker byte(s) changed {side} a {size} B allocation; {state}",
                               details=(*f.details, *allocation_details(hit.allocation, test, uses))))
    return out
