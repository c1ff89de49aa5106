"""The verdict for one test of a host suite (`pytest --gpu-memsafety`): from its TestEvidence to a CaseResult,
reached through the one entry point, gpu_memsafety.judge.decide.decide (the host path's face, gpu_memsafety.host.judge,
gathers the evidence and asks there).

The same closed outcomes as a scenario case (model.Outcome), decided here in one place, in this order (a test per
rule in tests/host/test_host_judge.py):
 0. an error of the harness itself while gathering the test's evidence: UNRESOLVED, naming the error.
 1. the mode could not run in this process: without a GPU, NOT_APPLICABLE; on a GPU machine (the allocator could not
    be built or installed, memory was allocated before it could be, no compute-sanitizer) COULD_NOT_RUN, a failure;
    both say what was needed and what was found, and the test ran unguarded. Unless the test's own
    gpu_memsafety_guarded tensors were checked (they need no allocator, and work on a CPU): then the verdict is
    theirs (rule 8), and the message says the mode itself did not run.
 2. the test's gpu_memsafety marker turned guarding off: NOT_APPLICABLE, with the marker's reason.
 3. the CUDA context was lost before the test started: NOT_APPLICABLE (an earlier test's crash is that test's).
 4. its process died, or the CUDA context was lost while it ran, and no finding explains it (a guard-page fault, a
    memcheck record): CRASHED.
 5. a break (gpu_memsafety.host.breaks) and nothing found: NOT_APPLICABLE with the break's reason.
 6. the detector ran but cannot be trusted (a truncated sanitizer output): UNRESOLVED.
 7. it made no CUDA allocation and nothing was found: NOT_APPLICABLE (nothing of its own to guard; the live blocks
    of earlier tests were still checked, and a change in them would have been a finding of this test).
 8. findings against the marker's expectations: each expectation matched and nothing else: EXPECTED_FINDING;
    anything unexpected: FINDING; an expectation this mode can see, not seen: UNEXPECTEDLY_CLEAN; else CLEAN.
A baseline (judge.rules.apply_baseline) then accepts known findings by test and Finding.key().
The test's own result never changes the verdict and is kept beside it (details["test"]); a verdict's message says
it too, but for a passing test that is `not applicable`: its reason (no GPU, nothing to check) is one many tests share
and is grouped by (a skip's or a failure's own words stay: they may be why).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Protocol, Sequence

from gpu_memsafety.detectors.registry import UNITS, says
from gpu_memsafety.detectors import suite_modes as host_modes
from gpu_memsafety.model import KINDS, OVERREAD, OVERWRITE, REGIONS, CaseResult, DetectorRun, Finding, Outcome, placed

# The modes and which detectors each runs: detectors/suite_modes.py, the one table of suite modes.
MODE_DETECTORS = host_modes.DETECTORS_OF
# What each detector sees, explains and reports is the detector's own (gpu_memsafety.detectors.base.Unit), read from
# the registry as the scenario path reads it: a finding that explains a lost CUDA context (`explains_fault`: a
# guard-page fault; memcheck ends the kernel it reports, --destroy-on-device-error kernel, and the error that leaves
# is its doing); a write at exact bytes that the guard markers also saw changed is the same write
# (`exact_accesses`: fold).


# ------------------------------------------------------------------------------------------------- inputs

# The test's own outcome, in pytest's words (what its summary counts).
PASSED, FAILED, SKIPPED, ERROR, XFAILED, XPASSED = "passed", "failed", "skipped", "error", "xfailed", "xpassed"
OWN_OUTCOMES = (PASSED, FAILED, SKIPPED, ERROR, XFAILED, XPASSED)


@dataclass(frozen=True)
class OwnResult:
    """The test's own result, kept beside the memory-safety verdict and never changed by it."""

    outcome: str
    message: str = ""            # first line of the failure or skip reason
    duration_s: float = 0.0
    unguarded_rerun: str = ""    # when a break made it fail guarded: how its own result was obtained instead

    def __post_init__(self) -> None:
        if self.outcome not in OWN_OUTCOMES:
            raise ValueError(f"unknown test outcome {self.outcome!r}; known: {', '.join(OWN_OUTCOMES)}")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"outcome": self.outcome, "message": self.message, "duration_s": round(self.duration_s, 3)}
        if self.unguarded_rerun:
            data["unguarded_rerun"] = self.unguarded_rerun
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "OwnResult":
        return cls(str(data["outcome"]), str(data.get("message", "")), float(data.get("duration_s", 0.0)),
                   str(data.get("unguarded_rerun", "")))


class Break(Protocol):
    """A break seen during a test (gpu_memsafety.host.breaks.Seen is one)."""

    def reason(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


class TestSeen(Protocol):
    """What the detectors saw of one test (gpu_memsafety.host.evidence.Evidence is one): the fields the rules read."""

    test: str
    mode: str
    arch: str
    hits_truncated: int
    findings: list[Finding]
    detector_problem: str
    breaks: Sequence[Break]
    unavailable: str
    missing: bool
    context_lost: str
    earlier_loss: str
    guarded_blocks: int
    allocated: int
    crashed: str
    markers_checked: bool
    detector_notes: list[str]
    fixture_checked: int
    fixture_findings: list[Finding]
    launches: int
    accesses: int
    unfinished: list[str]
    partial: dict[str, str]


@dataclass(frozen=True)
class TestEvidence:
    """One test of a pytest suite, as the decision reads it: what the detectors saw (`seen`), the findings of the
    allocator's markers on its allocations (host.allocations.marker_findings), the test's own outcome and its
    gpu_memsafety marker (its expectations, its off switch); `harness_error`: the harness itself failed while
    gathering the evidence (what it said, and where)."""

    __test__ = False        # not a pytest test class

    seen: TestSeen
    own: OwnResult
    marker: "TestMarker" = field(default_factory=lambda: TestMarker())
    marker_findings: tuple[Finding, ...] = ()
    harness_error: tuple[str, str] | None = None


# ------------------------------------------------------------------------------------------- expectations

class MarkerError(ValueError):
    """A gpu_memsafety marker that cannot be read: says which argument and what is allowed."""


@dataclass(frozen=True)
class Expected:
    """One finding a test is known to produce (an upstream bug), matched field by field where given."""

    kind: str
    region: str | None = None
    bytes: int | None = None
    size: int | None = None      # the allocation's size in bytes
    site: str | None = None      # a substring of a frame of the allocation's stack ("mxfp.py:142", "downcast")

    def matches(self, finding: Finding, allocation: Mapping[str, str]) -> bool:
        blind = (finding.detector in UNITS and not UNITS[finding.detector].tells_read_from_write
                 and {finding.kind, self.kind} <= {OVERREAD, OVERWRITE})
        if finding.kind != self.kind and not blind:
            return False
        if self.region is not None and finding.region != self.region and placed(finding):
            return False
        if self.bytes is not None and finding.exact and finding.bytes != self.bytes:
            return False
        if self.size is not None and allocation.get("size") != str(self.size):
            return False
        return self.site is None or self.site in allocation.get("stack", "")

    def describe(self) -> str:
        parts = [self.kind]
        parts += [f"{self.region}"] if self.region else []
        parts += [f"{self.bytes} B"] if self.bytes is not None else []
        parts += [f"of a {self.size} B allocation"] if self.size is not None else []
        parts += [f"allocated at {self.site}"] if self.site else []
        return " ".join(parts)


@dataclass(frozen=True)
class TestMarker:
    """A test's `@pytest.mark.gpu_memsafety(...)`: known bugs, or what not to guard."""

    expected: tuple[Expected, ...] = ()
    issue: str = ""
    guard: bool = True
    sites: tuple[str, ...] = ()   # only findings in allocations made at one of these sites count
    reason: str = ""

    def describe(self) -> str:
        if not self.expected:
            return "clean"
        issue = f" (upstream {self.issue})" if self.issue else ""
        return "; ".join(e.describe() for e in self.expected) + issue


MARKER_ARGS = ("expect", "issue", "guard", "sites", "reason", "bytes", "region", "size", "site")


def marker_from(kwargs: Mapping[str, Any]) -> TestMarker:
    """Read `gpu_memsafety(expect=..., issue=..., guard=..., sites=..., reason=...)`; expect is a kind ("overread"),
    a dict of Expected's fields, or a list of either; bytes/region/size/site beside a single kind apply to it."""
    unknown = sorted(set(kwargs) - set(MARKER_ARGS))
    if unknown:
        raise MarkerError(f"gpu_memsafety marker: unknown argument(s) {', '.join(unknown)}; known: {', '.join(MARKER_ARGS)}")
    guard = kwargs.get("guard", True)
    if not isinstance(guard, bool):
        raise MarkerError(f"gpu_memsafety marker: guard must be True or False, got {guard!r}")
    raw = kwargs.get("expect", ())
    items = raw if isinstance(raw, (list, tuple)) else [raw]
    shared = {k: kwargs[k] for k in ("bytes", "region", "size", "site") if k in kwargs}
    if shared and len(items) != 1:
        raise MarkerError("gpu_memsafety marker: bytes/region/size/site go with a single expect=KIND; "
                          "for several, give expect=[{'kind': ..., 'bytes': ...}, ...]")
    expected = tuple(_expected(item if isinstance(item, dict) else {"kind": item, **shared}) for item in items)
    sites = kwargs.get("sites", ())
    sites = (sites,) if isinstance(sites, str) else tuple(str(s) for s in sites)
    return TestMarker(expected, str(kwargs.get("issue", "")), guard, sites, str(kwargs.get("reason", "")))


def _expected(fields: Mapping[str, Any]) -> Expected:
    kind = fields.get("kind")
    if kind not in KINDS:
        raise MarkerError(f"gpu_memsafety marker: expect kind {kind!r} is not one of {', '.join(KINDS)}")
    region = fields.get("region")
    if region is not None and region not in REGIONS:
        raise MarkerError(f"gpu_memsafety marker: region {region!r} is not one of {', '.join(REGIONS)}")
    extra = sorted(set(fields) - {"kind", "region", "bytes", "size", "site"})
    if extra:
        raise MarkerError(f"gpu_memsafety marker: unknown expect field(s) {', '.join(extra)}")
    for key in ("bytes", "size"):
        if fields.get(key) is not None and (not isinstance(fields[key], int) or fields[key] < 0):
            raise MarkerError(f"gpu_memsafety marker: {key} must be a non-negative int, got {fields[key]!r}")
    return Expected(str(kind), region, fields.get("bytes"), fields.get("size"),
                    str(fields["site"]) if fields.get("site") else None)


# --------------------------------------------------------------------------------------------- verdict

def judge(te: TestEvidence) -> CaseResult:
    """The rules of the module's docstring, in order."""
    ev, own, marker = te.seen, te.own, te.marker
    if te.harness_error is not None:
        problem, where = te.harness_error
        result = _case(ev, own, marker, Outcome.UNRESOLVED, problem, [],
                       [DetectorRun(d, False, problem) for d in MODE_DETECTORS.get(ev.mode, ())])
        result.details["harness_error"] = where[-4000:]
        return result
    runs = _detector_runs(ev)

    def result(outcome: Outcome, message: str, findings: Sequence[Finding] = ()) -> CaseResult:
        return _case(ev, own, marker, outcome, message, list(findings), runs)

    if ev.unavailable and not ev.fixture_checked:
        outcome = Outcome.COULD_NOT_RUN if ev.missing else Outcome.NOT_APPLICABLE
        return result(outcome, f"{ev.mode} mode could not run here: {ev.unavailable}; the test ran unguarded")
    if ev.unavailable:
        outcome, message = _verdict(ev, list(ev.fixture_findings), marker, fixture_only=True)
        if ev.missing and outcome in (Outcome.CLEAN, Outcome.EXPECTED_FINDING):
            outcome = Outcome.COULD_NOT_RUN
        return result(outcome, f"{message}; {ev.mode} mode could not run here ({ev.unavailable}): only the "
                               f"gpu_memsafety_guarded tensors were checked", ev.fixture_findings)
    if not marker.guard:
        return result(Outcome.NOT_APPLICABLE, f"not guarded: its gpu_memsafety marker says guard=False"
                                             f"{': ' + marker.reason if marker.reason else ''}")
    if ev.earlier_loss:
        return result(Outcome.NOT_APPLICABLE, f"not checked: {ev.earlier_loss}")
    findings = fold(ev.findings + ev.fixture_findings + list(te.marker_findings))
    findings, ignored = _narrow(findings, marker.sites)
    lost = ev.crashed or ev.context_lost
    if lost and not any(says(f.detector, "explains_fault") for f in findings):
        return result(Outcome.CRASHED, f"{lost}; {_own_words(own)}", findings)
    if ev.breaks and not findings:
        return result(Outcome.NOT_APPLICABLE, "; ".join(b.reason() for b in ev.breaks))
    if ev.detector_problem:
        return result(Outcome.UNRESOLVED, f"{ev.detector_problem}; nothing it saw is trusted", findings)
    if ev.mode == host_modes.TRACE and not findings and not ev.launches and not ev.fixture_checked:
        # (the test's own outcome and reason follow in every message: _case)
        return result(Outcome.NOT_APPLICABLE, "nothing to check: the test ran no Triton kernel in Triton's interpreter")
    if ev.mode == host_modes.TRACE and not findings and ev.unfinished:
        # a kernel the interpreter could not run to its end was not checked to its end: never a clean
        return result(Outcome.NOT_APPLICABLE, f"not checked to the end: {len(ev.unfinished)} of {ev.launches} "
                                             f"interpreted launch(es) did not finish (first: {ev.unfinished[0]}); "
                                             f"nothing was found in the {ev.accesses:,} accesses made before")
    if ev.mode != host_modes.TRACE and not findings and not ev.allocated and not ev.fixture_checked:
        live = (f"; {ev.guarded_blocks} allocation(s) of earlier tests, still live, were checked and unchanged"
                if ev.guarded_blocks else "")
        return result(Outcome.NOT_APPLICABLE, f"nothing to guard: the test made no CUDA allocation{live}")
    # trace mode where no kernel ran in the interpreter: only the test's gpu_memsafety_guarded tensors were checked
    outcome, message = _verdict(ev, findings, marker, fixture_only=ev.mode == host_modes.TRACE and not ev.launches)
    if ev.unfinished:
        message += (f"; {len(ev.unfinished)} interpreted launch(es) did not finish and were checked only up to there "
                    f"(first: {ev.unfinished[0]})")
    if ev.detector_notes:
        message += "; " + "; ".join(ev.detector_notes)
    if ignored:
        message += f"; {ignored} finding(s) outside the marker's sites ({', '.join(marker.sites)}) not counted"
    if ev.hits_truncated:
        message += f"; {ev.hits_truncated} more allocation(s) with changed guards were not listed"
    return result(outcome, message, findings)


def fold(findings: list[Finding]) -> list[Finding]:
    """complete mode: a write memcheck and the markers both saw is one finding. The markers' bytes stand (every byte
    the kernel wrote; memcheck ends a kernel at its first bad access, so a thread's later stores never happen), with
    memcheck's kernel, source line and thread; a memcheck write the markers did not see (beyond their 256 B, or
    landing in another allocation) stays memcheck's. Likewise in trace mode, a write the trace saw into a
    gpu_memsafety_guarded tensor's guard, which the fixture's markers saw too: one finding, with the kernel."""
    guards = [f for f in findings if says(f.detector, "marks_writes")]
    exact = {id(f) for f in findings if says(f.detector, "exact_accesses")}   # a detector that saw each access
    out: list[Finding] = []
    folded: dict[int, Finding] = {}
    for f in findings:
        g = next((g for g in guards if id(f) in exact and f.kind == OVERWRITE and _same_place(f, g)), None)
        if g is None:
            out.append(f)
            continue
        base = folded.get(id(g), g)
        path = () if base.detail("path") or not f.detail("path") else (("path", f.detail("path")),)
        folded[id(g)] = replace(base, kernel=base.kernel or f.kernel, source=base.source or f.source,
                                details=(*base.details, *path),
                                first_thread=base.first_thread or f.first_thread,
                                first_block=base.first_block or f.first_block,
                                note=(f"{base.note}; " if base.note else "") +
                                     f"{f.detector} saw {f.bytes} B of it by {f.kernel or 'a kernel'}"
                                     f"{' (' + f.source + ')' if f.source else ''}")
    return [folded.get(id(f), f) for f in out]


def _same_place(f: Finding, g: Finding) -> bool:
    """memcheck's f lies inside the bytes the markers g saw changed, on an allocation of the same label and side."""
    if f.region != g.region or _label(f.buffer) != _label(g.buffer) or not f.ranges or not g.ranges:
        return False
    return all(any(h.start <= r.start and r.end <= h.end for h in g.ranges) for r in f.ranges)


def _label(buffer: str) -> str:
    """An allocation's label without the number that tells apart allocations sharing it (host/records.names)."""
    return buffer.split(" (#", 1)[0]


def _narrow(findings: list[Finding], sites: Sequence[str]) -> tuple[list[Finding], int]:
    if not sites:
        return findings, 0
    kept = [f for f in findings if any(s in f.detail("stack") for s in sites)]
    return kept, len(findings) - len(kept)


def _verdict(ev: TestSeen, findings: list[Finding], marker: TestMarker,
             fixture_only: bool = False) -> tuple[Outcome, str]:
    seeable = set(UNITS[host_modes.MARKERS_DETECTOR].sees) if fixture_only else {k for d in MODE_DETECTORS[ev.mode] for k in UNITS[d].sees}
    unexpected = [f for f in findings if not any(e.matches(f, dict(f.details)) for e in marker.expected)]
    visible = [e for e in marker.expected if e.kind in seeable]
    missing = [e for e in visible if not any(e.matches(f, dict(f.details)) for f in findings)]
    unseen = [e for e in marker.expected if e.kind not in seeable]
    blind = (f"; not checkable in {ev.mode} mode (it cannot see {', '.join(sorted({e.kind for e in unseen}))}): "
             f"{'; '.join(e.describe() for e in unseen)}") if unseen else ""
    issue = f" (upstream {marker.issue})" if marker.issue else ""
    if unexpected:
        extra = f"; also expected but not seen: {'; '.join(e.describe() for e in missing)}" if missing else ""
        return Outcome.FINDING, "; ".join(_short(f) for f in unexpected) + extra + blind
    if missing:
        return Outcome.UNEXPECTEDLY_CLEAN, (f"expected but not seen: {'; '.join(e.describe() for e in missing)}"
                                            f"{issue}: the bug may be fixed (or the test no longer reaches it)" + blind)
    if findings:
        return Outcome.EXPECTED_FINDING, "; ".join(_short(f) for f in findings) + issue + blind
    if fixture_only:
        return Outcome.CLEAN, f"clean: {ev.fixture_checked} gpu_memsafety_guarded tensor(s) checked" + blind
    checked = (f"{ev.accesses:,} accesses of {ev.launches} interpreted Triton launch(es) checked"
               if ev.mode == host_modes.TRACE else
               f"{ev.guarded_blocks} allocation(s) checked" if ev.mode not in host_modes.SANITIZED else "no memcheck record")
    return Outcome.CLEAN, f"clean under {'/'.join(MODE_DETECTORS[ev.mode])} ({checked})" + blind


def _short(f: Finding) -> str:
    name = f" ({f.detail('tensor')})" if f.detail("tensor") else ""
    return f"{f.detector} {f.kind} of {f.buffer}{name}/{f.region} {f.bytes} B" + (f" by {f.kernel}" if f.kernel else "")


def _own_words(own: OwnResult) -> str:
    return f"the test itself {own.outcome}" + (f" ({own.message})" if own.message else "")


def _detector_runs(ev: TestSeen) -> list[DetectorRun]:
    runs = []
    for det in MODE_DETECTORS[ev.mode]:
        if ev.unavailable:
            runs.append(DetectorRun(det, False, ev.unavailable))
        elif (need := host_modes.RAN_IF.get((ev.mode, det))) and need[2] and not getattr(ev, need[0]):
            runs.append(DetectorRun(det, False, "; ".join(ev.detector_notes) or need[1]))
        elif ev.detector_problem:
            runs.append(DetectorRun(det, False, ev.detector_problem))
        elif need and not getattr(ev, need[0]):
            runs.append(DetectorRun(det, False, need[1]))
        else:
            runs.append(DetectorRun(det, True, host_modes.RAN_WORDS[det].format(accesses=ev.accesses,
                                                                                launches=ev.launches)))
    fixture = host_modes.MARKERS_DETECTOR
    if ev.fixture_checked and not any(r.detector == fixture and r.ran for r in runs):
        line = DetectorRun(fixture, True, f"gpu_memsafety_guarded: {ev.fixture_checked} tensor(s) checked at teardown")
        runs = [r for r in runs if r.detector != fixture] + [line]
    # the detectors of the mode asked for that could not run here, where nothing else of theirs ran
    runs += [DetectorRun(det, False, why) for det, why in ev.partial.items() if all(r.detector != det for r in runs)]
    return runs


def _case(ev: TestSeen, own: OwnResult, marker: TestMarker, outcome: Outcome, message: str, findings: list[Finding],
          runs: list[DetectorRun]) -> CaseResult:
    details: dict[str, Any] = {"test": own.to_json(),
                               "allocations": {"made": ev.allocated, "checked": ev.guarded_blocks}}
    if ev.breaks:
        details["breaks"] = [b.to_json() for b in ev.breaks]
    if marker.issue:
        details["upstream"] = marker.issue
    partial = {r.detector: r.detail for r in runs if not r.ran and r.detector in ev.partial}
    if partial:
        details["partial"] = partial
    return CaseResult(case_id=ev.test, scenario=module_of(ev.test), variant=variant_of(ev.test), params={},
                      kernel=module_of(ev.test), arch=ev.arch, mode=ev.mode, outcome=outcome,
                      expected=marker.describe(), findings=findings, detectors=runs,
                      message=message if outcome is Outcome.NOT_APPLICABLE and own.outcome == "passed"
                      else f"{message}; {_own_words(own)}",
                      duration_s=own.duration_s, details=details)


def module_of(nodeid: str) -> str:
    """'tests/test_matmul.py::test_op[...]' -> 'tests/test_matmul.py' (a report's suite, and its matrix row)."""
    return nodeid.split("::", 1)[0]


def variant_of(nodeid: str) -> str:
    """The parametrization id: 'tests/t.py::test_op[a-b]' -> 'a-b' ('' when not parametrized)."""
    name = nodeid.rsplit("::", 1)[-1]
    return name[name.index("[") + 1: -1] if name.endswith("]") and "[" in name else ""
