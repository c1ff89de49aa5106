"""compute-sanitizer memcheck: reads and writes past the end and before the start of every covered buffer.

Each covered buffer is an exact allocation of its own (placement `exact`: no guard, start 256-aligned, memcheck's
`--padding` keeps other allocations away), so the first byte past the end, or before the start, is outside every
allocation. The records are read and placed once per batch (gpu_memsafety.sanitizer.records: by address onto the
case whose buffer holds it); this detector hands a case its share. memcheck ends the kernel at its first bad
access, and the worker process with it (`ends_process`): the rest of the batch reruns in a fresh process.

Its rule over each sanitized process's placed records (`batch_rule`, `RecordRule`): accesses that map to no buffer
of a multi-case batch (strays) send the cases whose kernel they name to run one per process, where their own run
says whose they are; an access record memcheck lost (the kernel ended, no record of why) sends its case to run
alone, up to LOST_RECORD_RUNS runs, the last with the GPU to itself, before the case is unresolved.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Sequence

from gpu_memsafety.detectors.base import BatchView, Evidence, Sorting, Unit, sanitizer_ran, with_defaults
from gpu_memsafety.model import GUARD, KINDS, MEMCHECK, POISON, DetectorRun, Finding
from gpu_memsafety.placement import layout as L
from gpu_memsafety.sanitizer.records import Placed, stray_owners

if TYPE_CHECKING:
    from gpu_memsafety.scenario.definition import Case, Scenario

# Runs of a case in which memcheck may lose the access record before the case is unresolved: the batch's run, one
# alone in its process, and one alone on the GPU (gpu_use; run 38: a record lost in the batch and again alone in its
# process at a load average of 15 on 16 cores).
LOST_RECORD_RUNS = 3
# Where a case's details keep the runs in which memcheck lost its access record.
LOST_RECORD_DETAILS = "memcheck_lost_record"


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

    def batch_rule(self) -> "RecordRule":
        return RecordRule()


class RecordRule:
    """memcheck's rule over the placed records of each sanitized process of one run: stray accesses and lost access
    records (the module's docstring). Remembers, across the run's batches, each case's lost records and the strays
    a case was sent to run alone for."""

    def __init__(self) -> None:
        # Runs of a case in which memcheck lost the access record that made it end the kernel (records.lost_record)
        self.lost_records: dict[str, list[dict[str, Any]]] = {}
        # Stray records of a batch claimed, by their kernel's name, by a case sent to run alone: its own run must
        # show an access of that kernel, or the record (whose owner is then unknown) stays on it as a finding
        self.stray_claims: dict[str, list[Finding]] = {}

    def sort(self, items: "Sequence[tuple[Scenario, Case]]", batch: BatchView, placed: Placed) -> Sorting:
        sorting = Sorting()
        if placed.strays and len(items) > 1:
            ran = [i for i in range(len(items)) if i in batch.results or i in batch.crashed or i in batch.timed_out]
            owners = stray_owners(placed.strays, items, batch.results)
            if len(owners) >= len(ran) or any(i not in batch.results for i in ran):
                return Sorting(restart=f"{sum(f.count for f in placed.strays)} sanitizer records map to no buffer; "
                                       f"rerunning {len(ran)} cases one per process",
                               restart_ids=[items[i][1].id for i in ran])
            # Every case that started left a result, and the records name the kernels of only some: those rerun
            # one per process, the others are judged on this run.
            sorting.alone += list(owners)
            for owner, claimed in owners.items():
                self.stray_claims[owner] = claimed      # only the strays whose kernel names this case
            sorting.note = (f"{sum(f.count for f in placed.strays)} sanitizer records map to no buffer and name the "
                            f"kernel of {len(owners)} of the {len(items)} cases")
        lost = self._lost(items, batch, placed)
        again = [c for c in lost if len(self.lost_records[c]) < LOST_RECORD_RUNS]
        sorting.alone += [c for c in again if c not in sorting.alone]
        sorting.given_up = {c: self._given_up(c) for c in lost if c not in again}
        if again and not sorting.note:
            sorting.note = "memcheck ended the kernel and lost the access record"
        return sorting

    def gpu_alone(self, case_id: str) -> bool:
        """Whether the run of this case alone in its process must have the GPU to itself (gpu_use): the last run
        of a case whose access record memcheck lost in every run so far (LOST_RECORD_RUNS)."""
        return len(self.lost_records.get(case_id, ())) >= LOST_RECORD_RUNS - 1

    def evidence(self, case_id: str, found: list[Finding], single: bool) -> tuple[list[Finding], dict[str, Any]]:
        """A case's share of the records, with the strays it was sent to run alone for that its own run did not
        repeat, and the runs in which memcheck lost its record (what the case is judged on is this run)."""
        if single and case_id in self.stray_claims:
            found = found + unreproduced(self.stray_claims.pop(case_id), found)
        details = {LOST_RECORD_DETAILS: self.lost_records[case_id]} if case_id in self.lost_records else {}
        return found, details

    def _lost(self, items: "Sequence[tuple[Scenario, Case]]", batch: BatchView, placed: Placed) -> list[str]:
        """The cases of this batch whose access record memcheck lost (records.lost_record), each loss remembered
        with what the process left: its exit code, the API errors, the sanitizer's count, its last words."""
        for case_id in placed.lost:
            run = batch.sanitizer
            self.lost_records.setdefault(case_id, []).append({
                "batch_cases": len(items), "exit_code": batch.returncode,
                "summary_errors": getattr(run, "summary_errors", None) if run is not None else None,
                "api_errors": placed.details.get("api_errors", []), "load": batch.load,
                **({"gpu_use": batch.gpu_use} if batch.gpu_use else {}), "log_tail": _tail(batch.log, 8)})
        return list(placed.lost)

    def _given_up(self, case_id: str) -> tuple[str, dict[str, Any]]:
        """A case whose access record memcheck lost again when it ran alone: nothing about its accesses is known,
        so it is neither passed nor failed on a finding; unresolved, with both runs."""
        runs = self.lost_records[case_id]
        use = runs[-1].get("gpu_use") or {}
        last = ("alone on the GPU" if use.get("alone") else
                f"alone in its process, asked to have the GPU alone and still sharing it after {use['waited_s']:.0f} s"
                if use.get("exclusive") else "alone in its process")
        return (f"memcheck ended the kernel (an API error says it failed: "
                f"{', '.join(sorted({e['error'] for r in runs for e in r['api_errors'] if e.get('class') == 'kernel'}))}) "
                f"and wrote no record of the access that made it end it, in {len(runs)} runs, the last one {last}: the "
                f"case is judged on no lost record (details.{LOST_RECORD_DETAILS})"), {LOST_RECORD_DETAILS: runs}


def unreproduced(claimed: Sequence[Finding], found: Sequence[Finding]) -> list[Finding]:
    """The stray records a case was sent to run alone for (their kernel has its name) that its own run did not
    repeat: no access of their kernel. Their owner is then not known (a batch mate whose kernel label is not its
    kernel's name may have made them), so they stay findings of this case, saying so: never dropped."""
    kernels = {f.kernel for f in found}
    note = ("seen in its batch's run and not when this case ran alone: which case of the batch made it is not known "
            "(a kernel label that is not the launched kernel's name?)")
    return [replace(f, note=f"{f.note}; {note}" if f.note else note) for f in claimed if f.kernel not in kernels]


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


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
