"""racecheck and synccheck records -> findings: a hazard names the kernel, the source line and the two accesses.

Pure (no torch, triton or CUDA), tested on CPU with text in the shape of real output (sanitizer/parse/text_log.py says which).
A shared-memory hazard has no byte range in any buffer the harness allocated: its buffer is `__shared__`
and its place is the pair of source lines. racecheck's analysis mode reports one access and every access it
races with, each with its hazard count; its hazard mode reports one pair per record with the threads and the
shared address. Both become one finding per kernel and unordered pair of accesses, so the same race reads
the same whichever mode or order the tool used. A record the harness cannot read to the end (no second
access) is kept as a finding with that said, never dropped.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from gpu_memsafety.model import BARRIER, RACE, RACECHECK, SHARED, SHARED_MEMORY, SYNCCHECK, Finding
from gpu_memsafety.sanitizer.parse import (API_ERROR, HAZARD, INTERNAL_ERROR, MEMORY_ACCESS, OTHER, PROCESS_EXIT, SYNC_ERROR,
                           HazardAccess, ParseResult, SanitizerRecord)

BARRIER_BUFFER = "barrier"   # the "buffer" of a synccheck finding: the synchronisation primitive, not memory
SHARED_REGION = SHARED_MEMORY   # the region of every hazard and barrier finding
TOOLS = ("racecheck", "synccheck")
# What each tool's summary line counts (memcheck's ERROR SUMMARY counts accesses, API errors and unknown
# records, not "Target application returned an error": tests/data/sanitizer/memcheck-mxfp4-*; racecheck's
# "N hazards displayed" counts its race reports).
_COUNTED = {"racecheck": (HAZARD,), "synccheck": (SYNC_ERROR, API_ERROR, MEMORY_ACCESS, OTHER)}


@dataclass(frozen=True)
class _Side:
    direction: str
    source: str

    @classmethod
    def of(cls, access: HazardAccess) -> "_Side":
        return cls(access.direction, access.source)

    def describe(self) -> str:
        return f"{self.direction or 'unknown'} at {self.source or '?'}"


@dataclass
class _Race:
    hazards: int = 0
    records: int = 0
    addresses: set[int] | None = None
    level: str = ""
    kinds: set[str] | None = None
    first: SanitizerRecord | None = None


def race_findings(records: Iterable[SanitizerRecord], *, arch: str = "") -> list[Finding]:
    """One finding per kernel and unordered pair of accesses; counts add up over records."""
    races: dict[tuple[str, _Side, _Side], _Race] = defaultdict(_Race)
    incomplete: list[SanitizerRecord] = []
    for rec in records:
        if rec.category != HAZARD:
            continue
        if len(rec.accesses) < 2:
            incomplete.append(rec)
            continue
        first = rec.accesses[0]
        for other in rec.accesses[1:]:
            _add(races, rec, first, other)
    findings = [_race_finding(kernel, a, b, race, arch) for (kernel, a, b), race in races.items()]
    findings += [_incomplete_finding(rec, arch) for rec in incomplete]
    return findings


def _add(races: dict[tuple[str, _Side, _Side], _Race], rec: SanitizerRecord, first: HazardAccess,
         other: HazardAccess) -> None:
    a, b = sorted((_Side.of(first), _Side.of(other)), key=lambda s: (s.direction != "write", s.source))
    race = races[(rec.kernel or first.kernel, a, b)]
    race.hazards += other.hazards if other.hazards is not None else 1
    race.records += 1
    if rec.address is not None:
        race.addresses = (race.addresses or set()) | {rec.address}
    if rec.hazard:
        race.kinds = (race.kinds or set()) | {rec.hazard}
    race.level = race.level or rec.level
    race.first = race.first or rec


def _race_finding(kernel: str, a: _Side, b: _Side, race: _Race, arch: str) -> Finding:
    kinds = f" ({'/'.join(sorted(race.kinds))})" if race.kinds else ""
    where = f", {len(race.addresses)} shared address(es)" if race.addresses else ""
    level = f" [{race.level}]" if race.level else ""
    note = (f"{a.describe()} races with {b.describe()}{kinds}: {race.hazards} hazard(s) in "
            f"{race.records} record(s){where}{level}")
    first = race.first
    details = [("access", a.describe()), ("other_access", b.describe()), ("hazards", str(race.hazards))]
    details += [("hazard_kinds", "/".join(sorted(race.kinds)))] if race.kinds else []
    details += [("level", race.level)] if race.level else []
    return Finding(detector=RACECHECK, kind=RACE, buffer=SHARED, region=SHARED_REGION,
                   bytes=len(race.addresses or ()), count=race.hazards, kernel=kernel, arch=arch,
                   first_thread=_xyz(first.thread if first else None), first_block=_xyz(first.block if first else None),
                   source=f"{a.source} / {b.source}", note=note, exact=False, details=tuple(details))


def _incomplete_finding(rec: SanitizerRecord, arch: str) -> Finding:
    seen = ", ".join(_Side.of(a).describe() for a in rec.accesses) or "no access"
    return Finding(detector=RACECHECK, kind=RACE, buffer=SHARED, region=SHARED_REGION, bytes=0, kernel=rec.kernel,
                   arch=arch, source=rec.accesses[0].source if rec.accesses else "",
                   note=f"racecheck record without a second access ({seen}): {rec.text}", exact=False)


def sync_findings(records: Iterable[SanitizerRecord], *, arch: str = "") -> list[Finding]:
    """One finding per kernel, source line and error message; `count` is the number of records (threads)."""
    groups: dict[tuple[str, str, str], list[SanitizerRecord]] = defaultdict(list)
    for rec in records:
        if rec.category == SYNC_ERROR:
            groups[(rec.kernel, _source(rec), rec.error)].append(rec)
    out = []
    for (kernel, source, error), recs in groups.items():
        first = recs[0]
        out.append(Finding(detector=SYNCCHECK, kind=BARRIER, buffer=BARRIER_BUFFER, region=SHARED_REGION, bytes=0,
                           count=len(recs), kernel=kernel, arch=arch, first_thread=_xyz(first.thread),
                           first_block=_xyz(first.block), source=source,
                           note=f"{first.text} at {source or '?'}: {len(recs)} record(s)", exact=False,
                           details=(("error", error or first.text), ("records", str(len(recs))))))
    return out


def race_and_barrier_findings(records: Sequence[SanitizerRecord], *, arch: str = "") -> list[Finding]:
    """Every hazard and barrier finding of a record list (either tool's)."""
    return race_findings(records, arch=arch) + sync_findings(records, arch=arch)


def tool_records(tool: str, text: ParseResult) -> tuple[tuple[SanitizerRecord, ...], str]:
    """racecheck's and synccheck's records, from their text output (the format known from real runs), and
    why they cannot be trusted ("" when the tool's own count agrees with them)."""
    records = tuple(r for r in text.records if r.category not in (INTERNAL_ERROR, PROCESS_EXIT))
    counted = sum(r.category in _COUNTED[tool] for r in records)
    if text.summary_errors is not None and text.summary_errors != counted:
        what = "hazards displayed (RACECHECK SUMMARY)" if tool == "racecheck" else "errors (ERROR SUMMARY)"
        return records, (f"{tool} counted {text.summary_errors} {what} but its text output holds {counted} "
                         "records: records were lost or not understood")
    return records, ""


@dataclass
class Assigned:
    """A batch's hazard and barrier findings sorted onto its cases."""

    findings: dict[str, list[Finding]]
    alone: list[str]   # cases to rerun one per process: a record none or several of them could have made


def kernel_owners(kernel: str, kernels: Mapping[str, str]) -> list[str]:
    """Cases of a batch (case id -> its kernel label: RunInfo.kernel, such as 'planted_reduce_race' or a Triton
    name's prefix) whose label the record's kernel name holds, the most specific label only (a record of
    `planted_far_write_cuda` is not also a `planted_far_write` case's, though that name holds the shorter label);
    every case when none does."""
    named = {case_id: label for case_id, label in kernels.items() if label and label in kernel}
    labels = set(named.values())
    return [case_id for case_id, label in named.items()
            if not any(label != other and label in other for other in labels)] or list(kernels)


def assign(records: Iterable[SanitizerRecord], kernels: Mapping[str, str], *, arch: str = "") -> Assigned:
    """Records of one sanitized process -> findings per case (`kernels`: case id -> its kernel label, in batch
    order). A shared-memory hazard has no address that names a case, so a record belongs to the one case that
    launched its kernel; when several cases of the batch did (a buggy variant and its fixed twin), or none
    says so, those cases are rerun alone: a process with one case leaves no doubt."""
    mine, alone = by_kernel([rec for rec in records if rec.category in (HAZARD, SYNC_ERROR)], kernels)
    return Assigned({case_id: race_and_barrier_findings(recs, arch=arch) for case_id, recs in mine.items()}, alone)


def by_kernel(records: Iterable[SanitizerRecord],
              kernels: Mapping[str, str]) -> tuple[dict[str, list[SanitizerRecord]], list[str]]:
    """Records without an address that names a case, sorted onto the one case of the batch whose kernel made them
    (kernel_owners); the cases of a record that several (or none) could have made, to run one per process, and
    none of their records kept."""
    mine: dict[str, list[SanitizerRecord]] = defaultdict(list)
    alone: list[str] = []
    for rec in records:
        owners = kernel_owners(rec.kernel, kernels)
        if len(owners) == 1:
            mine[owners[0]].append(rec)
        else:
            alone += [c for c in owners if c not in alone]
    return {case_id: recs for case_id, recs in mine.items() if case_id not in alone}, alone


def _source(rec: SanitizerRecord) -> str:
    return HazardAccess("", rec.kernel, rec.pc, rec.file, rec.line).source


def _xyz(v: tuple[int, int, int] | None) -> str:
    return f"({v[0]},{v[1]},{v[2]})" if v else ""
