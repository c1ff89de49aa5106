"""compute-sanitizer memcheck: reads and writes past the end and before the start of every covered buffer.

Each covered buffer is an exact allocation of its own (placement `exact`: no guard, start 256-aligned, memcheck's
`--padding` keeps other allocations away), so the first byte past the end, or before the start, is outside every
allocation. The records are read and placed once per batch (gpu_memsafety.sanitizer.records: by address onto the
case whose buffer holds it); this detector hands a case its share. memcheck ends the kernel at its first bad
access, and the worker process with it (`ends_process`): the rest of the batch reruns in a fresh process.
"""
from __future__ import annotations

from dataclasses import replace

from gpu_memsafety.detectors.base import Evidence, Unit, sanitizer_ran, with_defaults
from gpu_memsafety.model import GUARD, KINDS, MEMCHECK, POISON, DetectorRun, Finding
from gpu_memsafety.placement import layout as L


class MemcheckDetector(Unit):
    name = MEMCHECK
    sanitizer = "memcheck"
    placement = L.EXACT
    needs_cover = True
    needs_gpu = False           # the sanitizer needs a GPU; without one the detector could not run (said so)
    action = None               # it watches the plain launch from the sanitizer
    deadline_factor = 1.0       # the runner scales a sanitized process's deadline (modes.SANITIZER_SLOWDOWN)
    explains_fault = True
    ends_process = True
    sees = tuple(KINDS)
    places_strays = True        # a record of an access outside every allocation, by address
    exact_accesses = True
    watches_covered_ends = True  # each covered buffer is an allocation of its own: both ends are watched

    def ran(self, ev: Evidence) -> DetectorRun:
        return sanitizer_ran(ev, MEMCHECK)

    def findings(self, ev: Evidence) -> list[Finding]:
        return [with_defaults(f, arch=ev.result.arch) for f in ev.sanitizer_findings]

    def reconcile(self, findings: list[Finding]) -> list[Finding]:
        return undercounts(findings)


DETECTOR = MemcheckDetector()


def undercounts(findings: list[Finding]) -> list[Finding]:
    """The case's findings, with memcheck's counts that another detector shows to be short marked inexact.

    Memcheck terminates a kernel at its first precise error: it reports the accesses in flight then, not those the
    threads would have made next. Two detectors can prove a count short, in the same buffer and region:
    - for a write, the guard markers seeing more bytes written (changed marker bytes are bytes really written: a
      count or a lower bound, never a widened bound like poison's). Held-out hp_a on the H200: a 4,400 B row written
      past the end; memcheck 816 B, the guard its whole 1,024 B guard.
    - for a read, poison's bound holding a byte outside memcheck's ranges at one of its ends (each end of a poison
      range is a byte whose change changed the output, widened to its element: a byte read). Held-out hu_a on the
      H200: a rotary kernel read 128 B past its cos/sin cache (two rows), memcheck saw the 64 B of the sin halves,
      the warps never reaching their cos loads.
    Such a count stays what memcheck saw, inexact, with the other count named; a count nothing contradicts stays
    exact."""
    out = []
    for f in findings:
        if f.detector == MEMCHECK and f.exact:
            more = [g for g in findings if (g.kind, g.buffer, g.region) == (f.kind, f.buffer, f.region)
                    and not g.detail("victim") and _shows_more(g, f)]
            if more:
                best = max(more, key=lambda g: g.bytes)
                why = (f"at least: memcheck ends the kernel at its first error, and {best.detector} saw "
                       f"{'at least ' if not best.exact and best.detector == GUARD else ''}{best.bytes} B here"
                       + (f" ({_spans(best)})" if best.detector == POISON else ""))
                f = replace(f, exact=False, note="; ".join(x for x in (f.note, why) if x))
        out.append(f)
    return out


def _shows_more(other: Finding, mine: Finding) -> bool:
    """`other` proves memcheck's `mine` short: the guard's count is larger; a poison range has an end byte (a byte
    read) that none of memcheck's ranges holds."""
    if other.detector == GUARD:
        return other.bytes > mine.bytes
    if other.detector != POISON or not other.ranges or not mine.ranges:
        return False
    held = lambda byte: any(r.start <= byte < r.end for r in mine.ranges)   # noqa: E731
    return any(not held(r.start) or not held(r.end - 1) for r in other.ranges)


def _spans(f: Finding) -> str:
    return ", ".join(f"{r.start}..{r.end}" for r in f.ranges)
