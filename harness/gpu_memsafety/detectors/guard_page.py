"""Guard page: covered tensors flush against an unmapped page (then right after one): a hardware fault, no sanitizer.

The worker-side action (`run`) places every covered buffer against an unmapped page of a VMM reservation, back
pages first; when that pass runs through, a second pass puts each right after a front page, so that an access
before the start faults too (`passes` in the result). A fault ends the CUDA context and names neither the buffer
nor the side: the runner reruns the case with one buffer on a page at a time (gpu_memsafety.detectors.pageprobe plans
them) and hands the reruns to this detector in `Evidence.reruns`; without them a finding names every candidate and
matches no expectation (a visible failure).
"""
from __future__ import annotations

from typing import Any

from gpu_memsafety.detectors import pageprobe
from gpu_memsafety.detectors.base import Evidence, Unit
from gpu_memsafety.detectors.guard import merge as merge_guard
from gpu_memsafety.job import FAULT, WorkerResult
from gpu_memsafety.model import GUARD, GUARD_PAGE, OVERREAD, OVERWRITE, DetectorRun, Finding
from gpu_memsafety.placement import layout as L

ACTION = "guard_page"


class GuardPageDetector(Unit):
    name = GUARD_PAGE
    sanitizer = None
    placement = L.GUARD_PAGE_BACK
    needs_cover = True
    needs_gpu = True
    action = ACTION
    action_at = f"{__name__}:run"
    deadline_factor = 2.0       # two passes when clean
    explains_fault = True
    ends_process = True
    sees = (OVERREAD, OVERWRITE)
    tells_read_from_write = False   # a fault is a fault: its kind is read or write

    def reruns(self, result: WorkerResult) -> pageprobe.Probing | None:
        """A fault with buffers on pages: the reruns with one buffer on a page at a time that name it and its side."""
        return pageprobe.start(result.buffers, result.watched) if result.status == FAULT else None

    def ran(self, ev: Evidence) -> DetectorRun:
        placed = any(b.get("backend") == "vmm" for b in ev.result.buffers)
        if placed or ev.result.status == FAULT:
            return DetectorRun(GUARD_PAGE, True, "VMM guard page")
        return DetectorRun(GUARD_PAGE, False, "no VMM guard page was placed (no CUDA virtual memory management here)",
                           missing=True)

    def findings(self, ev: Evidence) -> list[Finding]:
        res = ev.result
        if res.status != FAULT:
            return []
        # Only a buffer that really sat on an unmapped page can have faulted on it (the buffer map says which).
        probing = ev.reruns or pageprobe.start(res.buffers, res.watched, cap=0)
        if probing is None:
            candidates = res.watched or [b["name"] for b in res.buffers]
            if not candidates:
                return []
            probing = pageprobe.Probing(pageprobe.BACK, tuple(candidates), cap=0)
        reruns = probing.to_json()
        ran = "; ".join(f"{r['pages']}: {r['status']} in {r['seconds']:.1f} s" for r in reruns["runs"]) or "none"
        out = []
        for named in probing.conclude():
            # a write only where the guard markers saw one (a rerun that ran through); the fault cannot say
            kind, access = (OVERWRITE, "write (the guard markers saw it)") if named.written else (OVERREAD, "read or write")
            which = (f"on {named.buffer}'s guard page" if named.named
                     else f"on the guard page of one of {named.buffer.replace('|', ', ')} (not told apart)")
            note = f"hardware fault {which}: {named.how}; no sanitizer: {res.message}"
            if probing.stopped:
                note += f" ({probing.stopped}; not run: {', '.join(probing.not_run) or '-'})"
            # the fault ends the adapter before it returns its RunInfo: the scenario names the kernel instead
            out.append(fault_finding(kind, named.buffer, named.region, note, kernel=res.kernel or ev.kernel_label(),
                                     arch=res.arch, details={"access": access, "direction": named.how,
                                                             "candidates": "|".join(probing.candidates),
                                                             "named": "yes" if named.named else "no", "reruns": ran,
                                                             **({"reruns_stopped": probing.stopped} if probing.stopped else {})}))
        return out


def fault_finding(kind: str, buffer: str, region: str, note: str, *, kernel: str = "", arch: str = "",
                  details: Any = ()) -> Finding:
    """A guard-page finding, a scenario case's or a host test's (host/guard_page.py): a hardware fault counts no bytes
    and is never exact; the note says what the reruns told and what they could not."""
    return Finding(detector=GUARD_PAGE, kind=kind, buffer=buffer, region=region, bytes=0, kernel=kernel, arch=arch,
                   note=note, exact=False, details=details)


def run(worker: Any, adapter: Any, case: Any) -> dict[str, Any]:
    """The worker side: a rerun's own placements (one pass), or back pages and then, when that ran through with a
    buffer on a page, front pages (a fault in either pass ends the process like any lost context)."""
    from gpu_memsafety.detectors.launch import once
    entry = worker.entry
    if entry is not None and entry.placements is not None:     # a guard-page rerun: its placements, one pass
        return once(worker, adapter, case, placements=dict(entry.placements))
    first = once(worker, adapter, case)
    if worker.placement != L.GUARD_PAGE_BACK or not first["passes"][0]["pages"]:
        return first      # one pass: nothing covered, or no VMM here (no buffer sat on a page)
    return merge_passes(first, once(worker, adapter, case, watch_placement=L.GUARD_PAGE_FRONT))


def merge_passes(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two placement passes of one case as one result: the first pass's buffer map (its pages are what the verdict
    reads), launches and kernel time added, the guard markers changed in either pass, both passes listed."""
    merged = dict(first)
    merged["launches"] = first["launches"] + second["launches"]
    merged["kernel_seconds"] = first["kernel_seconds"] + second["kernel_seconds"]
    merged["watched"] = sorted(set(first["watched"]) | set(second["watched"]))
    merged["passes"] = first["passes"] + second["passes"]
    evidence = dict(first["evidence"])
    guards = [first["evidence"].get(GUARD), second["evidence"].get(GUARD)]
    if None in guards:
        evidence.pop(GUARD, None)        # checked in one pass only: not checked for the case
    else:
        evidence[GUARD] = merge_guard(*guards)
    merged["evidence"] = evidence
    return merged


DETECTOR = GuardPageDetector()
