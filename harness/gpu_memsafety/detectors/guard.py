"""Guard markers: 0xA5 in front and back guards, row padding and unused rows, checked after the case's run.

The one detector no sanitizer replaces: it sees every overwrite outside a tensor's logical bytes, including writes
that stay inside the allocation (row padding, unused rows), at near-native speed, and never a read. The arena
writes the markers (gpu_memsafety.placement.guard), the worker checks them once the adapter has returned, after all
of the case's launches (its evidence: the changed runs of marker bytes per buffer), and this module turns them into
findings (gpu_memsafety.sanitizer.attribute.guard_findings: one per buffer and region class, exact bytes).

What that cannot see: marker bytes a later launch of the same case writes back (held-out ht_e: a rollback copies a
snapshot's guard over the bytes an earlier launch wrote past the end; memcheck sees both on a GPU), and writes that
leave a uniform marker as it was: its own value, marker bytes copied over marker bytes, an atomic min (the
scrambled-marker run of detectors/fillcheck.py, in the complete and uninit modes, sees those).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from gpu_memsafety.detectors.base import Evidence, Unit
from gpu_memsafety.model import BEFORE_START, GUARD, OVERWRITE, PAST_END, UNATTRIBUTED, DetectorRun, Finding
from gpu_memsafety.placement import layout as L
from gpu_memsafety.sanitizer import attribute


class GuardDetector(Unit):
    name = GUARD
    sanitizer = None
    placement = L.GUARDED
    needs_cover = needs_gpu = False
    action = None               # the markers are checked after whatever launches the case
    deadline_factor = 1.0
    explains_fault = ends_process = False
    sees = (OVERWRITE,)
    marks_writes = True         # every changed marker byte was written: a count or a lower bound, never widened

    def merge_evidence(self, before: Any, after: Any) -> Any:
        return merge(before, after)

    def ran(self, ev: Evidence) -> DetectorRun:
        ok = ev.of(GUARD) is not None
        return DetectorRun(GUARD, ok, "markers verified" if ok else "markers not checked")

    def findings(self, ev: Evidence) -> list[Finding]:
        """One finding per buffer and region class of changed marker bytes; a guard overwritten from its outer
        edge (another allocation's overrun landing in it) is a finding of that overrun, naming its victim."""
        guard = dict(ev.of(GUARD) or {})
        found = spills(guard, ev.result.buffers)
        for spill in found:
            guard[spill.victim] = [r for r in guard[spill.victim] if r not in spill.runs]
        own = attribute.guard_findings(guard, kernel=ev.result.kernel, arch=ev.result.arch, case_id=ev.case.id,
                                       buffers=ev.result.buffers,
                                       describe=lambda _case_id, name, s, e: ev.describe(name, s, e))
        return own + [s.finding(ev.result.kernel, ev.result.arch) for s in found]


@dataclass(frozen=True)
class Spill:
    """Marker bytes of a buffer (the victim) changed from the outer edge of its allocation inward and not from the
    tensor outward: a write that came from outside the allocation, another allocation's overrun (front guard,
    from its first byte up) or underrun (back guard, from its last byte down). The culprit: the buffer of ours
    whose own guard on that side was overwritten to its allocation's edge right next to the victim's, else an
    allocation the adapter did not make through the context (UNATTRIBUTED: memcheck names its kernel)."""

    victim: str
    side: str                              # BEFORE_START (front guard) or PAST_END (back guard) of the victim
    runs: tuple[dict[str, Any], ...]       # the victim's changed marker runs on that side
    culprit: str

    def finding(self, kernel: str, arch: str) -> Finding:
        nbytes = sum(r["end"] - r["start"] for r in self.runs)
        lo, hi = min(r["start"] for r in self.runs), max(r["end"] for r in self.runs)
        guard, edge, way = (("front guard", "first", "overrun of the allocation below it") if self.side == BEFORE_START
                            else ("back guard", "last", "underrun of the allocation above it"))
        who = (f"{self.culprit}, whose own guard was overwritten to the edge of its allocation next to it"
               if self.culprit != UNATTRIBUTED else "an allocation the adapter did not make through the context")
        note = (f"{self.victim}'s {guard} was overwritten from its allocation's {edge} byte ({nbytes} B, bytes "
                f"{lo}..{hi - 1} relative to {self.victim}), not from {self.victim}'s own bytes outward: an {way}, "
                f"{who}; {self.victim} itself was not accessed out of bounds there")
        return Finding(detector=GUARD, kind=OVERWRITE, buffer=self.culprit,
                       region=PAST_END if self.side == BEFORE_START else BEFORE_START, bytes=nbytes,
                       count=len(self.runs), kernel=kernel, arch=arch, exact=False, note=note,
                       details=(("access", "write"), ("victim", self.victim), ("victim_region", self.side),
                                ("victim_bytes", f"{lo}..{hi - 1}"), ("zone", guard.replace(" ", "_"))))


def spills(guard: Mapping[str, Sequence[Mapping[str, Any]]], buffers: Sequence[Mapping[str, Any]]) -> list[Spill]:
    """The guards of `buffers` (the worker's buffer map) that another allocation's write reached (see Spill): a
    guard written from its allocation's outer edge but not from the tensor's own edge; or both guards of one
    buffer written from their outer edges (a write across the whole allocation), even where the runs reach the
    tensor. One guard written across its whole width on one side only stays the buffer's own access."""
    records = {b["name"]: b for b in buffers if "layout" in b}
    layouts = {name: L.GuardLayout.from_json(b["layout"]) for name, b in records.items()}
    out = []
    for name, runs in guard.items():
        lay = layouts.get(name)
        if lay is None or lay.placement != L.GUARDED:
            continue
        front = tuple(r for r in runs if L.region_class(r["region"]) == BEFORE_START)
        back = tuple(r for r in runs if L.region_class(r["region"]) == PAST_END)
        end = lay.nbytes + lay.back
        front_outer = bool(lay.front) and any(r["start"] == -lay.front for r in front)
        back_outer = bool(lay.back) and any(r["end"] == end for r in back)
        # Both guards written from their allocation's outer edges: one write from outside that spans the whole
        # allocation (an own access would have to run a whole guard past both ends of the tensor in one launch).
        across = front_outer and back_outer
        if front_outer and (across or not any(r["end"] == 0 for r in front)):
            out.append(Spill(name, BEFORE_START, front, _culprit(name, BEFORE_START, guard, records, layouts)))
        if back_outer and (across or not any(r["start"] == lay.nbytes for r in back)):
            out.append(Spill(name, PAST_END, back, _culprit(name, PAST_END, guard, records, layouts)))
    return out


# How far apart two allocations may be and still be neighbours (cudaMalloc rounds sizes up to 2 MiB pages).
NEIGHBOUR_GAP = 2 << 20


def _culprit(victim: str, side: str, guard: Mapping[str, Sequence[Mapping[str, Any]]],
             records: Mapping[str, Mapping[str, Any]], layouts: Mapping[str, L.GuardLayout]) -> str:
    """The buffer of ours next to the victim (below it for a front-guard spill, above for a back-guard one) whose
    own guard on the facing side was overwritten to its allocation's edge; UNATTRIBUTED when none was."""
    base = int(records[victim]["alloc_base"])
    end = base + int(records[victim]["alloc_size"])
    for name, rec in records.items():
        lay = layouts[name]
        if name == victim or lay.placement != L.GUARDED:
            continue
        lo, hi = int(rec["alloc_base"]), int(rec["alloc_base"]) + int(rec["alloc_size"])
        runs = guard.get(name, ())
        if side == BEFORE_START and 0 <= base - hi <= NEIGHBOUR_GAP:
            if any(r["end"] == lay.nbytes + lay.back and L.region_class(r["region"]) == PAST_END for r in runs):
                return name
        if side == PAST_END and 0 <= lo - end <= NEIGHBOUR_GAP:
            if any(r["start"] == -lay.front and L.region_class(r["region"]) == BEFORE_START for r in runs):
                return name
    return UNATTRIBUTED


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
