"""A sanitized process's output, read and sorted onto the cases of its batch.

`read_sanitizer` turns one process's log and `--xml --save` file into a `SanitizerRun` (its records, and why
it cannot be trusted when it did not run to the end); `place_sanitizer_records` sorts the records onto the
cases of the batch: memory accesses by address (gpu_memsafety.sanitizer.attribute), racecheck and synccheck records by
the kernel that made them (gpu_memsafety.sanitizer.hazards), and what cannot be placed (no address, an API error that
says a kernel failed, an Imprecise record) becomes an UNPLACED finding showing the raw record, never dropped.

Pure: no torch, no processes. The engine (gpu_memsafety.engine.batches) asks for this once per batch: records belong to a
process, not to a case.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from gpu_memsafety.sanitizer import hazards
from gpu_memsafety.job import FAULT, WorkerResult
from gpu_memsafety.model import MEMCHECK, OVERREAD, OVERWRITE, DetectorRun, Finding
from gpu_memsafety.sanitizer import attribute, parse
from gpu_memsafety.sanitizer.parse import API_ERROR, HAZARD, MEMORY_ACCESS, OTHER, SYNC_ERROR, SanitizerRecord
from gpu_memsafety.sanitizer.tool import SANITIZER_ERROR_EXITCODE

if TYPE_CHECKING:
    from gpu_memsafety.scenario.definition import Case, Scenario

    Item = tuple[Scenario, Case]

UNPLACED = "(unplaced)"
UNPLACED_REGION = "unplaced"

# API errors every real run has and that say nothing about the kernel: the CUDA runtime probes driver entry
# points with cuGetProcAddress and gets CUDA_ERROR_INVALID_VALUE for the ones this driver lacks (34 of them in
# every sanitized H200 run, tests/data/sanitizer/memcheck-mxfp4-overread-target-aborted.*).
BENIGN_API_ERRORS: tuple[tuple[str, str], ...] = (("cuGetProcAddress", "CUDA_ERROR_INVALID_VALUE"),)
# API errors that mean a kernel's work failed (driver and runtime share these codes): illegal address, launch
# out of resources, launch timeout, device assert, hardware stack error, illegal instruction, misaligned
# address, invalid address space, invalid PC, launch failure.
KERNEL_FAILURE_CODES = frozenset({700, 701, 702, 710, 714, 715, 716, 717, 718, 719})
KERNEL_FAILURE_WORDS = ("ILLEGAL_ADDRESS", "IllegalAddress", "LAUNCH_FAILED", "LaunchFailure", "ILLEGAL_INSTRUCTION",
                        "IllegalInstruction", "MISALIGNED", "Misaligned", "LAUNCH_OUT_OF_RESOURCES",
                        "LaunchOutOfResources", "ASSERT", "Assert", "HARDWARE_STACK", "HardwareStack", "INVALID_PC",
                        "InvalidPc", "LAUNCH_TIMEOUT", "LaunchTimeout")


@dataclass(frozen=True)
class SanitizerRun:
    """One sanitized process, as read from its XML and its log (see read_sanitizer)."""

    tool: str
    records: tuple[SanitizerRecord, ...] = ()
    problem: str = ""                 # why the run cannot be trusted; "" when it ran to the end
    summary_errors: int | None = None  # the "ERROR SUMMARY: N errors" count
    exit_code: int | None = None
    describe: str = ""                # "compute-sanitizer 2025.3.1 (/path)"
    never_attached: str = ""          # why it never instrumented the worker (the tool could not start there)
    caveat: str = ""                  # what its detector could not check here, said on its line when it ran

    @property
    def ran(self) -> bool:
        return not self.problem

    @property
    def attached(self) -> bool:
        return not self.never_attached

    def not_started(self, detector: str) -> DetectorRun | None:
        """A sanitizer that never attached could not start its detector: 'could not run' (rule 6: a failure on a GPU
        machine unless --gpu-memsafety-allow-unsupported; what the other detectors saw is kept), naming what was needed and
        what was found. Its missing XML and ERROR SUMMARY follow from that. None when it attached."""
        if self.attached:
            return None
        return DetectorRun(detector, False, f"needed {self.tool} attached to the worker process to instrument its "
                                            f"CUDA calls; found {self.describe or 'compute-sanitizer'}, which never "
                                            f"attached: {self.never_attached}", missing=True)

    def disagreement(self) -> str:
        """Why the sanitizer's own count or exit code disagrees with its records; "" when they agree."""
        if self.summary_errors is not None and self.summary_errors != len(self.records):
            return (f"compute-sanitizer counted {self.summary_errors} errors (ERROR SUMMARY) but its XML holds "
                    f"{len(self.records)} records: records were lost or added")
        if self.summary_errors and self.exit_code == 0:
            return f"compute-sanitizer counted {self.summary_errors} errors but exited with code 0"
        if self.exit_code == SANITIZER_ERROR_EXITCODE and self.summary_errors == 0 and not self.records:
            return (f"compute-sanitizer exited with its error code {SANITIZER_ERROR_EXITCODE} but counted no "
                    "errors and wrote no records")
        return ""



@dataclass
class Placed:
    """A batch's sanitizer records, sorted: findings per case id, and what is kept in every case's details."""

    findings: dict[str, list[Finding]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)           # the process's API errors, explained records
    strays: list[Finding] = field(default_factory=list)             # accesses no buffer of a multi-case batch holds
    alone: list[str] = field(default_factory=list)                  # cases a hazard may belong to: rerun one per process
    # Cases whose kernel the sanitizer ended (a kernel-failure API error, the process died in the launch) while it
    # wrote no record of the access that made it end it: the record was lost (`lost_record`). Judged on a rerun.
    lost: list[str] = field(default_factory=list)


def read_sanitizer(tool: str, log: str, xml: bytes | None, *, exit_code: int | None, timed_out: bool,
                   describe: str = "", caveat: str = "") -> SanitizerRun:
    """A sanitized process's output (its log, its `--xml --save` file or None when missing) -> SanitizerRun."""
    text = parse.parse_text(log)
    problems = []
    never = ""
    if text.attached is False:
        never = text.problem or "target terminated before first instrumented API call"
        problems.append(f"compute-sanitizer never attached to the worker ({never})")
    internal = [r for r in text.records if r.category == "internal_error"]
    if text.attached and text.summary_errors is not None:
        # After a full sanitized run, "process didn't terminate successfully" only says the target died
        # (a destructor aborting on the context memcheck ended, say); the worker's exit judges that.
        internal = [r for r in internal if not _target_died(r.text)]
    if internal:
        problems.append("compute-sanitizer internal error: " + internal[0].text)
    records: tuple[SanitizerRecord, ...] = ()
    summary = text.summary_errors
    if tool in hazards.TOOLS:
        # racecheck and synccheck records come from their text (the format known from real runs); the XML is
        # only checked to be complete, and the tool's own count is checked against the text here.
        records, disagreement = hazards.tool_records(tool, text)
        problems += [disagreement] if disagreement else []
        summary = None
    if xml is None:
        problems.append("compute-sanitizer wrote no XML (sanitizer.xml missing)")
    else:
        try:
            parsed = parse.parse_xml(xml)
        except Exception as exc:  # noqa: BLE001 - hostile or broken XML is a non-pass, with the reason
            problems.append(f"sanitizer XML unreadable: {exc}")
        else:
            records = records if tool in hazards.TOOLS else parsed.records
            if not parsed.complete:
                problems.append(f"sanitizer XML incomplete: {parsed.problem}")
    if text.summary_errors is None and not timed_out:
        problems.append("compute-sanitizer printed no ERROR SUMMARY (it did not finish)")
    return SanitizerRun(tool, records, "; ".join(problems), summary, exit_code, describe, never_attached=never,
                        caveat=caveat)


def _target_died(text: str) -> bool:
    return text.strip().startswith("Error: process didn't terminate successfully")


def api_error_class(record: SanitizerRecord) -> str:
    """'benign' (a probe every run makes), 'kernel' (a kernel's work failed) or 'other' (kept, not failing)."""
    if any(record.api.startswith(api) and record.error == error for api, error in BENIGN_API_ERRORS):
        return "benign"
    if record.result in KERNEL_FAILURE_CODES or any(w in record.error for w in KERNEL_FAILURE_WORDS):
        return "kernel"
    return "other"


def place_sanitizer_records(items: Sequence[Item], results: Mapping[int, WorkerResult],
                            run: SanitizerRun) -> Placed:
    """Sort one sanitized process's records onto the cases of its batch.

    Memory accesses with an address and size are placed by address (gpu_memsafety.sanitizer.attribute). Records that cannot
    be placed (no or bad address or size, Imprecise and unknown records, an API error that says a kernel failed)
    become UNPLACED findings showing the raw record, unless explained: memcheck ends a kernel that made a placed
    error (`--destroy-on-device-error kernel`), which turns the rest of that kernel's warps into Imprecise
    "Illegal instruction" records and the API calls after it into illegal-instruction errors. API errors are
    kept in every case's details, never dropped.
    """
    placed = Placed()
    shared = [r for r in run.records if r.category == MEMORY_ACCESS and not r.unplaceable and r.space == "shared"]
    accesses = [_access(r) for r in run.records
                if r.category == MEMORY_ACCESS and not r.unplaceable and r.space != "shared"]
    by_address = _place_accesses(items, results, accesses)
    placed.strays = by_address.pop("", [])
    placed_kernels = {f.kernel for fs in (*by_address.values(), placed.strays) for f in fs}
    placed.findings = by_address
    kernels = _kernels(items, results)
    if shared:
        # A shared-memory address names no case (and no buffer of ours): the kernel that made it does, and the
        # record is that case's, at its offset in the block's shared memory on the case's GPU (sanitizer.attribute).
        for case_id, recs in _by_kernel(shared, kernels, placed).items():
            arch = next((r.arch for i, r in results.items() if items[i][1].id == case_id), "")
            for owner, found in _place_accesses(items, {}, [_access(r) for r in recs], alone=case_id,
                                                arch=arch).items():
                placed.findings.setdefault(owner, []).extend(found)
        placed_kernels |= {r.kernel for r in shared}
    tool_records = [r for r in run.records if r.category in (HAZARD, SYNC_ERROR)]
    if tool_records:
        # No address names a case: the kernel does (hazards.assign), or a process of its own.
        assigned = hazards.assign(tool_records, kernels)
        for case_id, found in assigned.findings.items():
            placed.findings.setdefault(case_id, []).extend(found)
        placed.alone += [c for c in assigned.alone if c not in placed.alone]
        placed_kernels |= {r.kernel for r in tool_records}
    unplaced: list[SanitizerRecord] = []
    explained: list[SanitizerRecord] = []
    api_errors: Counter[tuple[str, str, int | None, str]] = Counter()
    for rec in run.records:
        if rec.category == MEMORY_ACCESS and rec.unplaceable:
            unplaced.append(rec)
        elif rec.category == API_ERROR:
            cls = api_error_class(rec)
            api_errors[(rec.api, rec.error, rec.result, cls)] += 1
            if cls == "kernel":
                (explained if placed_kernels else unplaced).append(rec)
        elif rec.category == OTHER:
            (explained if rec.kernel and rec.kernel in placed_kernels else unplaced).append(rec)
    if api_errors:
        placed.details["api_errors"] = [{"api": a, "error": e, "result": r, "class": c, "count": n}
                                        for (a, e, r, c), n in sorted(api_errors.items(), key=str)]
    if explained:
        placed.details["explained_records"] = _grouped(explained)
    if unplaced:
        blamed = _blamed(items, results)
        if lost_record(run, placed_kernels, unplaced):
            placed.lost = [c for c in blamed if any(items[i][1].id == c and r.status == FAULT for i, r in results.items())]
        for finding in _unplaced_findings(unplaced):
            for case_id in blamed:
                placed.findings.setdefault(case_id, []).append(finding)
    return placed


def lost_record(run: SanitizerRun, placed_kernels: set[str], unplaced: Sequence[SanitizerRecord]) -> bool:
    """The process's kernel failed under memcheck and memcheck wrote no record of why: every record it could not
    place is an API error saying a kernel failed (cudaErrorLaunchFailure: memcheck ended the kernel), and it placed
    no access, hazard or shared-memory record at all. Seen on the H200 under concurrency (issue 26: -n 8, a case
    that is exact alone); the access that made memcheck end the kernel is what is missing, so the case is neither
    passed nor failed on it: the judge reruns it alone."""
    return (run.tool == "memcheck" and not placed_kernels and bool(unplaced)
            and all(r.category == API_ERROR and api_error_class(r) == "kernel" for r in unplaced))


def stray_owners(strays: Sequence[Finding], items: Sequence[Item],
                 results: Mapping[int, WorkerResult]) -> dict[str, list[Finding]]:
    """The cases of a multi-case batch that may have made its stray accesses (accesses no buffer holds), each with
    the strays it may have made: those whose kernel (RunInfo.kernel) the record names; every case that left a
    result when a record names none of them. Only these need a process of their own to say whose the access is:
    the others' own records are placed by address. In batch order."""
    kernels = _kernels(items, results)
    claims: dict[str, list[Finding]] = {}
    for finding in strays:
        for case_id in hazards.kernel_owners(finding.kernel, kernels):
            claims.setdefault(case_id, []).append(finding)
    return claims


def _kernels(items: Sequence[Item], results: Mapping[int, WorkerResult]) -> dict[str, str]:
    """Case id -> the kernel it launched (RunInfo.kernel; the scenario's label when the case died in the launch and
    left none), in batch order: what a record without an address is assigned by."""
    out = {}
    for index, result in sorted(results.items()):
        scenario, case = items[index]
        label = result.kernel
        if not label:
            try:
                label = str(scenario.kernel(case))
            except Exception:   # noqa: BLE001 - a scenario's label function is user code
                label = ""
        out[case.id] = label
    return out


def _by_kernel(records: Sequence[SanitizerRecord], kernels: Mapping[str, str], placed: Placed) -> dict[str, list[SanitizerRecord]]:
    """Records sorted onto the one case of the batch that launched their kernel; a record several cases (or none)
    could have made sends those cases to run one per process (placed.alone)."""
    mine, alone = hazards.by_kernel(records, kernels)
    placed.alone += [c for c in alone if c not in placed.alone]
    return {case_id: recs for case_id, recs in mine.items() if case_id not in placed.alone}


def _place_accesses(items: Sequence[Item], results: Mapping[int, WorkerResult], accesses: list[attribute.Access],
                    alone: str | None = None, arch: str = "") -> dict[str, list[Finding]]:
    """Findings per case id; "" holds accesses that map to no buffer of a batch of several cases (strays). `alone`:
    the case they all belong to (a batch of one, or the owner of shared-memory records by their kernel)."""
    buffers = [attribute.BufferRef.from_record(items[i][1].id, rec) for i, res in results.items() for rec in res.buffers]
    by_id = {c.id: (s, c) for s, c in items}

    def describe(case_id: str, name: str, start: int, end: int) -> str:
        sc = by_id.get(case_id)
        return sc[0].describe(sc[1], name, start, end) if sc and sc[0].describe else ""

    # A process that ran one case: what maps to no buffer is that case's, named from its nearest buffer.
    if alone is None and len(items) == 1:
        alone = items[0][1].id
    return attribute.aggregate(accesses, buffers, arch=arch, describe=describe, stray_case=alone)


def _blamed(items: Sequence[Item], results: Mapping[int, WorkerResult]) -> list[str]:
    """Who an unplaced record is charged to: the cases whose process died in a launch, else every case."""
    faulted = [items[i][1].id for i, r in results.items() if r.status == FAULT]
    return faulted or [c.id for _, c in items]


def _grouped(records: Sequence[SanitizerRecord]) -> list[dict[str, Any]]:
    groups: Counter[tuple[str, str, str, str]] = Counter((r.kind, r.kernel, r.text or r.error, r.api) for r in records)
    return [{"kind": k, "kernel": f, "text": t, "api": a, "count": n} for (k, f, t, a), n in sorted(groups.items())]


def _unplaced_findings(records: Sequence[SanitizerRecord]) -> list[Finding]:
    groups: dict[tuple[str, str, str], list[SanitizerRecord]] = {}
    for rec in records:
        kind = {"read": OVERREAD, "write": OVERWRITE}.get(rec.direction, "unknown")
        groups.setdefault((kind, rec.kernel, _why_unplaced(rec)), []).append(rec)
    return [Finding(detector=MEMCHECK, kind=kind, buffer=UNPLACED, region=UNPLACED_REGION, bytes=0, count=len(recs),
                    kernel=kernel, first_thread=_xyz(recs[0].thread), first_block=_xyz(recs[0].block),
                    source=_source(recs[0]), exact=False,
                    note=f"the harness cannot place this record ({why}); raw: {raw_record(recs[0])}")
            for (kind, kernel, why), recs in groups.items()]


def _why_unplaced(rec: SanitizerRecord) -> str:
    if rec.category == MEMORY_ACCESS:
        return rec.unplaceable
    if rec.category == API_ERROR:
        return "an API error that says a kernel failed, and no placed access explains it"
    if rec.kind:
        return f"a {rec.kind} record, which names no address"
    return "a record the parser does not know"


def raw_record(rec: SanitizerRecord) -> str:
    """The record as the sanitizer gave it: kind, text and every field it had."""
    parts = [f"kind={rec.kind!r}" if rec.kind else "", f"text={rec.text!r}" if rec.text else ""]
    parts += [f"{k}={v!r}" for k, v in (("api", rec.api), ("error", rec.error), ("result", rec.result),
                                        ("address", rec.address), ("size", rec.size), ("kernel", rec.kernel)) if v]
    parts += [f"{k}={v!r}" for k, v in rec.details]
    return ", ".join(p for p in parts if p)


def _access(record: SanitizerRecord) -> attribute.Access:
    """A placeable memory-access record, reduced to what attribution needs (its kind from gpu_memsafety.sanitizer.parse)."""
    kind = parse.classify(record)
    direction = record.direction or (kind if kind in (parse.READ, parse.WRITE, parse.ATOMIC) else "read")
    return attribute.Access(address=int(record.address or 0), size=int(record.size or 1), direction=direction,
                            kernel=record.kernel or "", thread=record.thread, block=record.block, source=_source(record),
                            misaligned=kind == parse.MISALIGNED, text=record.text, path=record.file,
                            space=record.space, inlined=record.inlined)


def _source(record: SanitizerRecord) -> str:
    return f"{PurePath(record.file).name}:{record.line}" if record.file else ""


def _xyz(v: tuple[int, int, int] | None) -> str:
    return f"({v[0]},{v[1]},{v[2]})" if v else ""


