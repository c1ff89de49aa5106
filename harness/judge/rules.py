"""The judge: from what a case left behind (its worker result and its batch's sanitizer records) to its
findings and its outcome, baselines included. The one place where an outcome is decided.

Pure: no torch, no processes. The runner runs processes and hands over a `Batch` (worker results, cases that
timed out or died, the sanitizer run read from its files); the judge returns one CaseResult per case that
started. Before anything runs, `Judge.gate` says which cases cannot run here at all.

Detectors plug in through `DETECTOR_JUDGES`: each turns a case's `Evidence` into a `DetectorRun` (did it run, and
if not, could it have) and a list of `Finding`s. A sanitizer tool's records are placed once per batch
(`place_sanitizer_records`: records belong to a process, not a case) and handed to the detector through
`Evidence.sanitizer_findings`. To add a detector: write a class with `name`, `explains_fault`, `ran()` and
`findings()`, add it to DETECTOR_JUDGES and to the modes that run it (harness/engine/modes.py).

The rules, in order (each has a test in tests/test_judge.py):
 1. status unsupported: could not run (COULD_NOT_RUN on a GPU machine unless --allow-unsupported, else
    UNSUPPORTED); not_applicable: NOT_APPLICABLE; oom and error: UNRESOLVED, nothing was checked.
 2. a fault (lost context, or a death in the launch) that no detector turned into a finding: CRASHED.
 3. nothing guarded (no buffer through the context, or none covered for a detector that needs one: every buffer
    is covered unless the scenario or the run narrows cover to watched ones): UNRESOLVED.
 4. a sanitizer that did not run to the end (crashed, killed, truncated XML), a record count or exit code that
    disagrees with its records, or a kernel that was never launched: UNRESOLVED. A sanitizer that never attached
    did not start its detector: rule 6.
 5. verdict.decide on the findings of the detectors that ran; sanitizer records that cannot be placed are
    findings of their own (buffer "(unplaced)"), so they fail the case, showing the raw record.
 6. a detector that should have run and could not (no usable compute-sanitizer, one that never attached, no VMM
    guard page) turns a pass (clean, expected) into "could not run", naming what was needed and what was found;
    a kernel whose build needs a tool the machine lacks (gpu_memsafety.kernels.errors.ToolchainMissing, an Unsupported) is
    rule 1's could not run; a compile error in its source (KernelBuildError) stays UNRESOLVED, a failure.
 7. a mode whose detectors this scenario does not use, or that cannot see its bug: NOT_APPLICABLE.
 8. a baseline (apply_baseline) turns FINDING into EXPECTED_FINDING only when every finding is accepted on
    detector, kind, buffer and region; it never touches UNEXPECTEDLY_CLEAN.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any, Mapping, Protocol, Sequence

from gpu_memsafety.sanitizer import attribute
from gpu_memsafety.detectors import hazards
from gpu_memsafety.placement import layout
from gpu_memsafety.detectors import pageprobe
from gpu_memsafety.sanitizer import parse
from gpu_memsafety.engine.job import ERROR, FAULT, NOT_APPLICABLE, OOM, UNSUPPORTED, WorkerResult
from gpu_memsafety.model import (GUARD, GUARD_PAGE, MEMCHECK, OVERREAD, OVERWRITE, POISON, RACECHECK, SYNCCHECK, UNINIT,
                           CaseResult,
                           DetectorRun, Finding, Outcome)
from gpu_memsafety.engine.modes import COVER_WATCHED, Mode
from gpu_memsafety.sanitizer.tool import SANITIZER_ERROR_EXITCODE
from gpu_memsafety.sanitizer.parse import API_ERROR, HAZARD, MEMORY_ACCESS, OTHER, SYNC_ERROR, SanitizerRecord
from gpu_memsafety.scenario.definition import Case, Scenario
from gpu_memsafety.judge.verdict import decide
from gpu_memsafety.report.picture import BUFFERS, buffer_records

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


# ----------------------------------------------------------------------------------------------- inputs

@dataclass(frozen=True)
class Machine:
    """Where the cases ran: what decides whether a case that could not run fails."""

    gpu: bool
    allow_unsupported: bool = False
    gpu_missing_reason: str = ""   # why there is no GPU, e.g. "CUDA_VISIBLE_DEVICES is set and empty"


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

    @property
    def ran(self) -> bool:
        return not self.problem

    @property
    def attached(self) -> bool:
        return not self.never_attached

    def not_started(self, detector: str) -> DetectorRun | None:
        """A sanitizer that never attached could not start its detector: 'could not run' (rule 6: a failure on a GPU
        machine unless --allow-unsupported; what the other detectors saw is kept), naming what was needed and
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
class Batch:
    """What one worker process left behind, by case index; the runner fills it, the judge reads it."""

    results: dict[int, WorkerResult] = field(default_factory=dict)
    crashed: dict[int, str] = field(default_factory=dict)       # started, no result: why the process ended
    timed_out: dict[int, float] = field(default_factory=dict)   # killed at this deadline (s)
    returncode: int | None = None
    log: str = ""
    sanitizer: SanitizerRun | None = None                       # None: not sanitized
    left_behind: list[dict[str, Any]] = field(default_factory=list)   # processes alive after it ended: killed

    @property
    def sanitized(self) -> bool:
        return self.sanitizer is not None


@dataclass
class Judged:
    """The judge's answer for one batch."""

    done: list[CaseResult]            # one result per case that started
    rest: list[int]                   # indexes of the cases to run again (never started, or rerun alone)
    alone: list[str] = field(default_factory=list)   # case ids that must run one per process from now on
    note: str = ""                    # why they rerun (kept beside the batch's files)
    # guard-page faults to rerun with one buffer on a page at a time (index -> its result, and the reruns to start
    # from): the runner runs them and asks judge_probed for the outcome
    probe: dict[int, tuple[WorkerResult, pageprobe.Probing]] = field(default_factory=dict)


@dataclass(frozen=True)
class Evidence:
    """Everything the judge knows about one case."""

    scenario: Scenario
    case: Case
    result: WorkerResult
    mode: Mode
    sanitizer: SanitizerRun | None = None
    sanitizer_findings: tuple[Finding, ...] = ()   # this case's share of the batch's placed records
    pages: pageprobe.Probing | None = None          # the guard-page reruns after a fault (GuardPageDetector)

    def describe(self, name: str, start: int, end: int) -> str:
        return self.scenario.describe(self.case, name, start, end) if self.scenario.describe else ""


# -------------------------------------------------------------------------------------------- detectors

class Detector(Protocol):
    name: str
    explains_fault: bool   # a finding of this detector explains a lost context (it is that detector's evidence)
    needs_sanitizer: bool  # it runs only inside a sanitized process (a compute-sanitizer tool)

    def ran(self, ev: Evidence) -> DetectorRun: ...

    def findings(self, ev: Evidence) -> list[Finding]: ...


class GuardDetector:
    name, explains_fault, needs_sanitizer = GUARD, False, False

    def ran(self, ev: Evidence) -> DetectorRun:
        ok = ev.result.markers_checked and ev.result.guard is not None
        return DetectorRun(GUARD, ok, "markers verified" if ok else "markers not checked")

    def findings(self, ev: Evidence) -> list[Finding]:
        return attribute.guard_findings(ev.result.guard or {}, kernel=ev.result.kernel, arch=ev.result.arch,
                                        case_id=ev.case.id, buffers=ev.result.buffers,
                                        describe=lambda _case_id, name, s, e: ev.describe(name, s, e))


class MemcheckDetector:
    name, explains_fault, needs_sanitizer = MEMCHECK, True, True

    def ran(self, ev: Evidence) -> DetectorRun:
        run = ev.sanitizer
        if run is None:
            return DetectorRun(MEMCHECK, False, "not sanitized", missing=True)
        if not run.attached:
            return run.not_started(MEMCHECK)  # type: ignore[return-value]
        if not run.ran:
            return DetectorRun(MEMCHECK, False, run.problem)
        return DetectorRun(MEMCHECK, True, run.describe or "compute-sanitizer ran")

    def findings(self, ev: Evidence) -> list[Finding]:
        return [_with(f, arch=ev.result.arch) for f in ev.sanitizer_findings]


def _kernel_label(ev: Evidence) -> str:
    try:
        return str(ev.scenario.kernel(ev.case))
    except Exception:   # a scenario's label function is user code: a report never fails on it
        return ""


class GuardPageDetector:
    """A lost context with buffers on guard pages. The fault names neither the buffer nor the side: the runner
    reruns the case with one buffer on a page at a time (harness/detectors/pageprobe.py) and hands the reruns over in
    `Evidence.pages`; without them a finding names every candidate and matches no expectation."""

    name, explains_fault, needs_sanitizer = GUARD_PAGE, True, False

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
        probing = ev.pages or pageprobe.start(res.buffers, res.watched, cap=0)
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
            out.append(Finding(detector=GUARD_PAGE, kind=kind, buffer=named.buffer, region=named.region, bytes=0,
                               kernel=res.kernel or _kernel_label(ev), arch=res.arch, note=note, exact=False,
                               details={"access": access, "direction": named.how,
                                        "candidates": "|".join(probing.candidates),
                                        "named": "yes" if named.named else "no", "reruns": ran,
                                        **({"reruns_stopped": probing.stopped} if probing.stopped else {})}))
        return out


class PoisonDetector:
    name, explains_fault, needs_sanitizer = POISON, False, False

    def ran(self, ev: Evidence) -> DetectorRun:
        ok = ev.result.poison is not None
        return DetectorRun(POISON, ok, "two patterns compared" if ok else "not run")

    def findings(self, ev: Evidence) -> list[Finding]:
        from gpu_memsafety.detectors import poison
        return poison.overread_findings(ev.result.poison, kernel=ev.result.kernel, arch=ev.result.arch)


class UninitDetector:
    name, explains_fault, needs_sanitizer = UNINIT, False, False

    def ran(self, ev: Evidence) -> DetectorRun:
        from gpu_memsafety.detectors import uninit
        report = ev.result.uninit
        return DetectorRun(UNINIT, report is not None, uninit.checked_outputs(report) if report is not None else "not run")

    def findings(self, ev: Evidence) -> list[Finding]:
        from gpu_memsafety.detectors import uninit
        if ev.result.uninit is None:
            return []
        return uninit.never_written_findings(ev.result.uninit, ev.result.buffers, kernel=ev.result.kernel, arch=ev.result.arch,
                               describe=ev.describe)


class HazardDetector:
    """racecheck or synccheck: a compute-sanitizer tool whose records (harness/detectors/hazards.py, from the tool's text)
    are sorted onto cases by the kernel that made them; records nobody can place come with them, failing the
    case with the raw record."""

    explains_fault, needs_sanitizer = False, True

    def __init__(self, name: str) -> None:
        self.name = name

    def ran(self, ev: Evidence) -> DetectorRun:
        run = ev.sanitizer
        if run is None:
            return DetectorRun(self.name, False, "not sanitized", missing=True)
        if run.tool != self.name:
            return DetectorRun(self.name, False, f"the process ran under {run.tool}, not {self.name}")
        if not run.attached:
            return run.not_started(self.name)  # type: ignore[return-value]
        if not run.ran:
            return DetectorRun(self.name, False, run.problem)
        return DetectorRun(self.name, True, run.describe or f"compute-sanitizer {self.name} ran")

    def findings(self, ev: Evidence) -> list[Finding]:
        return [_with(f, arch=ev.result.arch) for f in ev.sanitizer_findings]


# Each detector's judge-side half by detector name (the names are gpu_memsafety.model.DETECTORS).
DETECTOR_JUDGES: dict[str, Detector] = {d.name: d for d in (
    GuardDetector(), MemcheckDetector(), GuardPageDetector(), PoisonDetector(), UninitDetector(),
    HazardDetector(RACECHECK), HazardDetector(SYNCCHECK))}


# ------------------------------------------------------------------------------- sanitizer records

@dataclass
class Placed:
    """A batch's sanitizer records, sorted: findings per case id, and what is kept in every case's details."""

    findings: dict[str, list[Finding]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)           # the process's API errors, explained records
    strays: list[Finding] = field(default_factory=list)             # accesses no buffer of a multi-case batch holds
    alone: list[str] = field(default_factory=list)                  # cases a hazard may belong to: rerun one per process


def read_sanitizer(tool: str, log: str, xml: bytes | None, *, exit_code: int | None, timed_out: bool,
                   describe: str = "") -> SanitizerRun:
    """A sanitized process's output (its log, its `--xml --save` file or None when missing) -> SanitizerRun."""
    from gpu_memsafety.sanitizer import parse
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
    return SanitizerRun(tool, records, "; ".join(problems), summary, exit_code, describe, never_attached=never)


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
    accesses = [_access(r) for r in run.records if r.category == MEMORY_ACCESS and not r.unplaceable]
    by_address = _place_accesses(items, results, accesses)
    placed.strays = by_address.pop("", [])
    placed_kernels = {f.kernel for fs in (*by_address.values(), placed.strays) for f in fs}
    placed.findings = by_address
    tool_records = [r for r in run.records if r.category in (HAZARD, SYNC_ERROR)]
    if tool_records:
        # No address names a case: the kernel does (hazards.assign), or a process of its own.
        assigned = hazards.assign(tool_records, {items[i][1].id: r.kernel for i, r in sorted(results.items())})
        for case_id, found in assigned.findings.items():
            placed.findings.setdefault(case_id, []).extend(found)
        placed.alone = assigned.alone
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
        for finding in _unplaced_findings(unplaced):
            for case_id in blamed:
                placed.findings.setdefault(case_id, []).append(finding)
    return placed


def _place_accesses(items: Sequence[Item], results: Mapping[int, WorkerResult],
                    accesses: list[attribute.Access]) -> dict[str, list[Finding]]:
    """Findings per case id; "" holds accesses that map to no buffer of a batch of several cases (strays)."""
    buffers = [attribute.BufferRef.from_record(items[i][1].id, rec) for i, res in results.items() for rec in res.buffers]
    by_id = {c.id: (s, c) for s, c in items}

    def describe(case_id: str, name: str, start: int, end: int) -> str:
        sc = by_id.get(case_id)
        return sc[0].describe(sc[1], name, start, end) if sc and sc[0].describe else ""

    # A process that ran one case: what maps to no buffer is that case's, named from its nearest buffer.
    alone = items[0][1].id if len(items) == 1 else None
    return attribute.aggregate(accesses, buffers, describe=describe, stray_case=alone)


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
                            space=record.space)


def _source(record: SanitizerRecord) -> str:
    return f"{PurePath(record.file).name}:{record.line}" if record.file else ""


def _xyz(v: tuple[int, int, int] | None) -> str:
    return f"({v[0]},{v[1]},{v[2]})" if v else ""


def _with(f: Finding, **changes: Any) -> Finding:
    return replace(f, **{k: v for k, v in changes.items() if v and not getattr(f, k)})


# ------------------------------------------------------------------------------------------------ judge

class Judge:
    """Decides every outcome of one run (one mode, one machine)."""

    def __init__(self, mode: Mode, machine: Machine, *, sanitizer_missing: str = "", sanitizer_describe: str = "") -> None:
        self.mode = mode
        self.machine = machine
        self.sanitizer_missing = sanitizer_missing     # why the mode's sanitizer cannot run here ("" when it can)
        self.sanitizer_describe = sanitizer_describe

    # -- before anything runs -------------------------------------------------------------------------
    def gate(self, scenario: Scenario, case: Case) -> CaseResult | None:
        """A result for a case that cannot run here at all (no process is started for it); None otherwise."""
        if scenario.needs_gpu(case) and not self.machine.gpu:
            why = self.machine.gpu_missing_reason or "NVML reports no device"
            return self.cannot_run(scenario, case, f"needs a CUDA GPU; found none ({why})")
        if self.mode.needs_gpu and not self.machine.gpu:
            return self.cannot_run(scenario, case, f"{self.mode.name} mode needs a CUDA GPU; found none")
        used = [d for d in self.mode.detectors if d in scenario.detectors]
        if self.mode.detectors and not used:
            # Nothing this mode sees applies to the scenario: no process, no build (rule 7, decided up front).
            why = (f"{self.mode.name} mode runs {', '.join(self.mode.detectors) or 'no detector'}; scenario "
                   f"{scenario.name} uses {', '.join(scenario.detectors)}")
            return self._result(scenario, case, Outcome.NOT_APPLICABLE, why, [], self._not_started(scenario))
        if self.mode.sanitizer and self.sanitizer_missing and all(DETECTOR_JUDGES[d].needs_sanitizer for d in used):
            return self.cannot_run(scenario, case, self.sanitizer_missing)
        return None

    def sanitize(self) -> bool:
        """Whether this run's processes go under the mode's sanitizer."""
        return bool(self.mode.sanitizer) and not self.sanitizer_missing

    # -- after a batch ---------------------------------------------------------------------------------
    def judge_batch(self, items: Sequence[Item], batch: Batch) -> Judged:
        """Results of the cases of `items` that started, the indexes of those that never started, and the cases
        to run again one per process (sanitizer records that map to no buffer of a multi-case batch: only a
        process of its own can say which case made them, and no other case is blamed)."""
        placed = place_sanitizer_records(items, batch.results, batch.sanitizer) if batch.sanitizer else Placed()
        if placed.strays and len(items) > 1:
            ran = [i for i in range(len(items)) if i in batch.results or i in batch.crashed or i in batch.timed_out]
            note = (f"{sum(f.count for f in placed.strays)} sanitizer records map to no buffer; rerunning {len(ran)} "
                    f"cases one per process")
            return Judged([], list(range(len(items))), [items[i][1].id for i in ran], note)
        alone = placed.alone if len(items) > 1 else []
        done: list[CaseResult] = []
        rest: list[int] = []
        probe: dict[int, tuple[WorkerResult, pageprobe.Probing]] = {}
        rerun = [i for i, (_, case) in enumerate(items) if case.id in alone]
        for index, (scenario, case) in enumerate(items):
            if index in rerun:
                continue
            probing = self.page_probing(scenario, batch.results[index]) if index in batch.results else None
            if probing is not None:
                probe[index] = (batch.results[index], probing)
            elif index in batch.results:
                ev = Evidence(scenario, case, batch.results[index], self.mode, batch.sanitizer,
                              tuple(placed.findings.get(case.id, ())))
                result = self.judge_case(ev)
                if placed.details:
                    result.details["sanitizer_records"] = placed.details
                done.append(result)
            elif index in batch.timed_out:
                done.append(self.lost(scenario, case, Outcome.TIMEOUT,
                                      f"no result after {batch.timed_out[index]:.0f} s; worker killed\n{_tail(batch.log)}"))
            elif index in batch.crashed:
                done.append(self.lost(scenario, case, Outcome.CRASHED, f"{batch.crashed[index]}\n{_tail(batch.log)}"))
            else:
                rest.append(index)
        if rest and not done and not rerun and not probe:
            # The process died before any case started: report them all rather than start it again forever.
            why = f"worker process exited with code {batch.returncode} before running any case\n{_tail(batch.log)}"
            done = [self.lost(*items[i], Outcome.UNRESOLVED, why) for i in rest]
            rest = []
        if rerun:
            note = (f"{self.mode.sanitizer} records name a kernel that {len(rerun)} cases of the batch launched (or "
                    f"none): rerunning {', '.join(items[i][1].id for i in rerun)} one per process")
            return Judged(done, sorted(rest + rerun), [items[i][1].id for i in rerun], note, probe)
        return Judged(done, rest, probe=probe)

    def page_probing(self, scenario: Scenario, result: WorkerResult) -> pageprobe.Probing | None:
        """The reruns a guard-page fault needs before it can be judged (None: none): a case of a scenario that uses
        the guard page, in a mode that runs it, that lost its context with buffers on pages."""
        if result.status != FAULT or GUARD_PAGE not in self.mode.detectors or GUARD_PAGE not in scenario.detectors:
            return None
        return pageprobe.start(result.buffers, result.watched)

    def judge_probed(self, scenario: Scenario, case: Case, result: WorkerResult, probing: pageprobe.Probing) -> CaseResult:
        """A guard-page fault judged with its reruns (the runner ran `probing`'s probes); the reruns, their times
        and what was not run stay in the details."""
        judged = self.judge_case(Evidence(scenario, case, result, self.mode, pages=probing))
        judged.details["guard_page_reruns"] = probing.to_json()
        judged.duration_s += sum(r.seconds for r in probing.runs)
        return judged

    def judge_case(self, ev: Evidence) -> CaseResult:
        res, scenario, case = ev.result, ev.scenario, ev.case
        runs = self._runs(ev)
        if res.status == UNSUPPORTED:
            return self.cannot_run(scenario, case, res.message, res, runs)
        if res.status == NOT_APPLICABLE:
            return self._result(scenario, case, Outcome.NOT_APPLICABLE, res.message, [], runs, res)
        if res.status == OOM:
            mem = res.memory
            where = (f" ({mem['free_bytes_after_release'] / 2**30:.1f} GiB of {mem['total_bytes'] / 2**30:.1f} GiB free "
                     f"after releasing the case)") if mem else ""
            return self._result(scenario, case, Outcome.UNRESOLVED, f"out of memory{where}: the case did not run to "
                                f"the end; nothing was checked\n{res.message}\n{res.traceback}", [], runs, res)
        if res.status == ERROR:
            return self._result(scenario, case, Outcome.UNRESOLVED, f"{res.message}\n{res.traceback}", [], runs, res)
        used = [d for d in self.mode.detectors if d in scenario.detectors]
        findings = [f for d in used for f in DETECTOR_JUDGES[d].findings(ev)]
        if res.status == FAULT and not any(DETECTOR_JUDGES[f.detector].explains_fault for f in findings if f.detector in DETECTOR_JUDGES):
            return self._result(scenario, case, Outcome.CRASHED, f"CUDA context lost: {res.message}", findings, runs, res)
        problem = self._unchecked(ev, runs)
        if problem:
            return self._result(scenario, case, Outcome.UNRESOLVED, problem, findings, runs, res)
        pages = layout.guard_page_offsets(res.buffers) if GUARD_PAGE in used else None
        verdict = decide(scenario.expectation(case, res.arch), findings, runs, pages=pages,
                         placements=layout.placements(res.buffers))
        outcome, message = verdict.outcome, verdict.message
        missing = [d for d in runs if d.missing and not d.ran]
        if missing and outcome in (Outcome.CLEAN, Outcome.EXPECTED_FINDING, Outcome.UNSUPPORTED):
            why = "; ".join(f"{d.detector} could not run: {d.detail}" for d in missing)
            seen = f" (what ran: {message})" if outcome is not Outcome.UNSUPPORTED else ""
            return self.cannot_run(scenario, case, why + seen, res, runs, findings)
        if outcome is Outcome.UNSUPPORTED:
            outcome = Outcome.NOT_APPLICABLE
        if res.stress_iterations is not None:
            message = (f"stress runs no memory-safety detector: {res.stress_iterations} iterations ran without a "
                       f"crash under production conditions")
        result = self._result(scenario, case, outcome, message, findings, runs, res)
        if verdict.missing:
            result.details["missing_expected"] = list(verdict.missing)   # a baseline never hides these
        return result

    def _unchecked(self, ev: Evidence, runs: list[DetectorRun]) -> str:
        """Why the case checked nothing, or cannot be trusted; "" when its evidence stands."""
        res = ev.result
        ran = {d.detector for d in runs if d.ran}
        if self.mode.guarded and not res.guarded:
            return ("nothing was guarded: the adapter allocated no buffer through the context (ctx.tensor / ctx.rows), "
                    "so no detector had anything to check")
        blind = [d for d in self.mode.needs_watch(ev.scenario.detectors) if d in ran]
        if blind and not res.covered and res.status != FAULT:
            narrowed = (f"cover was narrowed to watched buffers ({res.cover!r}) and none was allocated with watch=True"
                        if res.cover == COVER_WATCHED else "no buffer got this mode's placement")
            return (f"nothing was guarded for {', '.join(blind)}: no buffer was covered ({narrowed}), and "
                    f"{'it sees' if len(blind) == 1 else 'they see'} only covered buffers")
        run = ev.sanitizer
        if self.mode.sanitizer and run is not None and run.attached:   # never attached: its detectors say so (rule 6)
            if not run.ran:
                return f"{run.tool} did not run properly: {run.problem}"
            disagreement = run.disagreement()
            if disagreement:
                return disagreement
        refused = bool(res.notes.get("refused"))   # a host-side refusal contract: no launch, by design
        if not res.launches and res.status != FAULT and not refused:
            return "the kernel was never launched: nothing was checked"
        return ""

    def _runs(self, ev: Evidence) -> list[DetectorRun]:
        runs = []
        for det in self.mode.detectors:
            if det not in ev.scenario.detectors:
                runs.append(DetectorRun(det, False, f"scenario {ev.scenario.name} does not use {det}"))
            elif DETECTOR_JUDGES[det].needs_sanitizer and ev.sanitizer is None:
                runs.append(DetectorRun(det, False, self.sanitizer_missing or "not sanitized", missing=True))
            else:
                runs.append(DETECTOR_JUDGES[det].ran(ev))
        return runs

    # -- results that are not a verdict ----------------------------------------------------------------
    def cannot_run(self, scenario: Scenario, case: Case, why: str, res: WorkerResult | None = None,
                   runs: list[DetectorRun] | None = None, findings: list[Finding] | None = None) -> CaseResult:
        """A case that should have run here and could not: a failure on a GPU machine, unless allowed."""
        if self.machine.gpu and not self.machine.allow_unsupported:
            outcome, why = Outcome.COULD_NOT_RUN, f"{why}\n(on a machine with a GPU this fails; --allow-unsupported accepts it)"
        else:
            outcome = Outcome.UNSUPPORTED
        return self._result(scenario, case, outcome, why, findings or [], runs if runs is not None else self._not_started(scenario), res)

    def lost(self, scenario: Scenario, case: Case, outcome: Outcome, message: str) -> CaseResult:
        """A case that started and left no result (timeout, crash), or never got to run (UNRESOLVED)."""
        return self._result(scenario, case, outcome, message, [], self._not_started(scenario))

    def _not_started(self, scenario: Scenario) -> list[DetectorRun]:
        return [DetectorRun(d, False, f"scenario {scenario.name} does not use {d}" if d not in scenario.detectors
                            else "case did not run") for d in self.mode.detectors]

    def _result(self, scenario: Scenario, case: Case, outcome: Outcome, message: str, findings: list[Finding],
                runs: list[DetectorRun], res: WorkerResult | None = None) -> CaseResult:
        details: dict[str, Any] = {}
        if res is not None:
            details = {k: v for k, v in (("notes", res.notes), ("kernel_seconds", res.kernel_seconds),
                                         ("seconds", res.seconds), ("stress_iterations", res.stress_iterations),
                                         ("poison", res.poison), ("device", res.device), ("memory", res.memory),
                                         ("passes", res.passes), ("stray_processes", res.stray_processes))
                       if v not in (None, {}, "", [])}
            if res.cover and self.mode.watch_placement != layout.GUARDED:
                # which buffers got this mode's placement: the worker's buffer map says (each layout's placement)
                details["cover"] = {"cover": res.cover, "covered": res.covered, "watched": list(res.watched)}
            if findings and res.buffers:
                # the layout of each buffer a finding names, for the picture of the finding (report.picture)
                details[BUFFERS] = buffer_records(res.buffers, findings,
                                                  lambda name, lo, hi: scenario.describe(case, name, lo, hi)
                                                  if scenario.describe else "")
        return CaseResult(case_id=case.id, scenario=scenario.name, variant=case.variant, params=dict(case.params),
                          kernel=(res.kernel if res else "") or scenario.kernel(case), arch=res.arch if res else "",
                          mode=self.mode.name, outcome=outcome,
                          expected=scenario.expectation(case, res.arch if res else "").describe(),
                          findings=findings, detectors=runs, message=message.strip(),
                          duration_s=float(res.seconds if res else 0.0), details=details)


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


# --------------------------------------------------------------------------------------------- baseline

def apply_baseline(result: CaseResult, baseline: Any) -> CaseResult:
    """A FINDING whose every finding the baseline accepts (case, detector, kind, kernel, buffer, region and bytes
    all equal) becomes EXPECTED_FINDING ("accepted by baseline"), unless an expected finding of the scenario
    was not seen: then it is UNEXPECTEDLY_CLEAN. A known bug that vanished stays unexpectedly clean whatever
    the baseline accepts."""
    if baseline is None or result.outcome is not Outcome.FINDING:
        return result
    from gpu_memsafety.judge.baseline import compare
    diff = compare([result], baseline)
    if diff.new:
        return result
    missing = result.details.get("missing_expected") or []
    if missing:
        result.outcome = Outcome.UNEXPECTEDLY_CLEAN
        result.message = (f"expected but not seen: {' | '.join(missing)} (the baseline accepts the other findings, "
                          f"never a known bug that vanished): {result.message}")
        return result
    result.outcome = Outcome.EXPECTED_FINDING
    result.message = f"accepted by baseline: {result.message}"
    result.details["baseline"] = [{"finding": seen.key, "reason": entry.reason, "upstream": entry.upstream}
                                  for seen, entry in diff.accepted]   # read by report.baselines and report.load
    return result
