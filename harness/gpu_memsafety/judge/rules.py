"""The judge: from what a case left behind (its worker result and its batch's sanitizer records) to its
findings and its outcome, baselines included. The one place where an outcome is decided.

Pure: no torch, no processes, no state. The engine runs processes, reads what each left behind and sorts it
(gpu_memsafety.engine.batches: worker results, cases that timed out or died, the sanitizer's records placed on
the cases); it asks for each case's outcome through the one entry point, gpu_memsafety.judge.decide.decide, which
reaches the rules here: `gate` (before anything runs: a case that cannot run here at all), `judge_case` (from a
worker's result), `lost` (a case that left no result). What the run is (its mode, the machine, whether the mode's
sanitizer can run here) is the `Standing` each of them is given.

Detectors are units (gpu_memsafety.detectors.registry): each turns a case's `Evidence` into a `DetectorRun` (did it run,
and if not, could it have) and a list of `Finding`s. A sanitizer tool's records are placed once per batch
(gpu_memsafety.sanitizer.records: records belong to a process, not a case) and handed to the detector through
`Evidence.sanitizer_findings`. This module keeps only the rules.

The rules, in order (each has a test in tests/judge/test_judge.py):
 1. status unsupported: could not run (COULD_NOT_RUN on a GPU machine unless --gpu-memsafety-allow-unsupported, else
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
    a kernel whose build needs a tool the machine lacks (gpu_memsafety.util.build_errors.ToolchainMissing, an Unsupported) is
    rule 1's could not run; a compile error in its source (KernelBuildError) stays UNRESOLVED, a failure.
 7. a mode whose detectors this scenario does not use, or that cannot see its bug: NOT_APPLICABLE.
 8. a baseline (apply_baseline) turns FINDING into EXPECTED_FINDING only when every finding is accepted on
    detector, kind, buffer and region; it never touches UNEXPECTEDLY_CLEAN.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from gpu_memsafety.detectors.base import Evidence, wild_accesses
from gpu_memsafety.detectors.registry import UNITS, explained, reconcile
from gpu_memsafety.cover import COVER_WATCHED
from gpu_memsafety.job import ERROR, FAULT, NOT_APPLICABLE, OOM, UNSUPPORTED, WorkerResult
from gpu_memsafety.detectors.modes import Mode
from gpu_memsafety.judge.verdict import ON_PAGES, Assessment, assess, conclude
from gpu_memsafety.model import CaseResult, DetectorRun, Expectation, Finding, Outcome
from gpu_memsafety.placement import layout
from gpu_memsafety.report.picture import BUFFERS, buffer_records
from gpu_memsafety.scenario.definition import Case, Scenario

Item = tuple[Scenario, Case]


# ----------------------------------------------------------------------------------------------- inputs

@dataclass(frozen=True)
class Machine:
    """Where the cases ran: what decides whether a case that could not run fails."""

    gpu: bool
    allow_unsupported: bool = False
    gpu_missing_reason: str = ""   # why there is no GPU, e.g. "CUDA_VISIBLE_DEVICES is set and empty"


@dataclass(frozen=True)
class Standing:
    """What a run is, for every case it judges: its mode (or one stage's), the machine, and whether the mode's
    sanitizer can run here."""

    mode: Mode
    machine: Machine
    sanitizer_missing: str = ""     # why the mode's sanitizer cannot run here ("" when it can)

    def sanitize(self) -> bool:
        """Whether this run's processes go under the mode's sanitizer."""
        return bool(self.mode.sanitizer) and not self.sanitizer_missing


@dataclass(frozen=True)
class Seen:
    """What the verdict of a case judged from evidence saw, for a later stage of a staged mode (engine/staged.py):
    the verdict's assessment (judge.combine adds the stages' up), the case's buffer map, and the launches each
    detector checked to the byte (Unit.checked_whole, which a later stage's Unit.left_out reads)."""

    assessment: Assessment
    buffers: tuple[Mapping[str, Any], ...]
    checked: Mapping[str, int]


# ------------------------------------------------------------------------------------------------ rules

def judge_case(st: Standing, ev: Evidence) -> CaseResult:
    res, scenario, case = ev.result, ev.scenario, ev.case
    # what the case expects on the arch it ran on: read once, every rule below and the result read this one
    expectation = scenario.expectation(case, res.arch)
    runs = _runs(st, ev)
    if res.status == UNSUPPORTED:
        return cannot_run(st, scenario, case, res.message, res, runs)
    if res.status == NOT_APPLICABLE:
        return _result(st, scenario, case, Outcome.NOT_APPLICABLE, res.message, [], runs, res)
    if res.status == OOM:
        mem = res.memory
        where = (f" ({mem['free_bytes_after_release'] / 2**30:.1f} GiB of {mem['total_bytes'] / 2**30:.1f} GiB free "
                 f"after releasing the case)") if mem else ""
        return _result(st, scenario, case, Outcome.UNRESOLVED, f"out of memory{where}: the case did not run to "
                            f"the end; nothing was checked\n{res.message}\n{res.traceback}", [], runs, res)
    if res.status == ERROR and (why := explained(res.message)):
        # an error a detector explains, the run judging nothing (Unit.explains: the interpreter's fence kept a run
        # without the trace from making stray accesses)
        runs = [d if d.ran else DetectorRun(d.detector, False, f"not judged: {why}") for d in runs]
        wild = _wild_fault(st, expectation)
        if wild:
            return _result(st, scenario, case, Outcome.NOT_APPLICABLE, f"{res.message}; {wild}", [], runs, res)
        return _result(st, scenario, case, Outcome.UNRESOLVED, res.message, [], runs, res)
    if res.status == ERROR:
        return _result(st, scenario, case, Outcome.UNRESOLVED, f"{res.message}\n{res.traceback}", [], runs, res)
    used = [d for d in st.mode.detectors if d in scenario.detectors]
    void = {d: why for d in used if (why := UNITS[d].void(ev))}
    if void:       # a detector's evidence cannot be judged on this case, by the case's own expectation: no verdict of it
        runs = [DetectorRun(d.detector, False, void[d.detector]) if d.detector in void else d for d in runs]
        used = [d for d in used if d not in void]
    findings = [f for d in used for f in UNITS[d].findings(ev)]
    if res.status == FAULT and not any(UNITS[f.detector].explains_fault for f in findings if f.detector in UNITS):
        wild = _wild_fault(st, expectation)
        if wild:
            return _result(st, scenario, case, Outcome.NOT_APPLICABLE, f"{_died(st)}: {res.message}; {wild}",
                                findings, runs, res)
        return _result(st, scenario, case, Outcome.CRASHED, f"{_died(st)}: {res.message}", findings, runs, res)
    problem = _unchecked(st, ev, runs)
    if problem:
        return _result(st, scenario, case, Outcome.UNRESOLVED, problem, findings, runs, res)
    # where each buffer was placed (its guard page's side, its placement), read once from the worker's buffer map
    pages = layout.guard_page_offsets(res.buffers) if ON_PAGES.intersection(used) else None
    placements = layout.placements(res.buffers)
    assessed = assess(expectation, findings, runs, pages=pages, placements=placements)
    # what a later stage of a staged mode reads (judge.combine adds the stages' assessments up; Unit.left_out)
    seen = Seen(assessed, list(res.buffers), {d: n for d in used if (n := UNITS[d].checked_whole(ev))})
    verdict = conclude(expectation, [assessed])
    outcome, message = verdict.outcome, verdict.message
    missing = [d for d in runs if d.missing and not d.ran]
    partial: dict[str, str] = {}
    if missing and outcome in (Outcome.CLEAN, Outcome.EXPECTED_FINDING, Outcome.UNSUPPORTED):
        why = "; ".join(f"{d.detector} could not run: {d.detail}" for d in missing)
        if (st.machine.gpu and not st.machine.allow_unsupported) or not any(d.ran for d in runs):
            ran = f" (what ran: {message})" if outcome is not Outcome.UNSUPPORTED else ""
            result = cannot_run(st, scenario, case, why + ran, res, runs, findings)
            result.seen = seen
            return result
        # As a staged mode does (judge.combine, rule 4): the verdict of the detectors that ran stands and the
        # case is partial, which the headline counts as ran ("memcheck did not run on N").
        partial = {d.detector: d.detail for d in missing}
        message = f"{message} (partial: {why})"
    elif missing:
        partial = {d.detector: d.detail for d in missing}    # a failure judged on part of its detectors
    if outcome is Outcome.UNSUPPORTED:
        outcome = Outcome.NOT_APPLICABLE
    if void and outcome is Outcome.NOT_APPLICABLE:      # say why a detector did not count, not that it did not run
        message = message + "".join(f" ({d} ran and {why.removeprefix('not applicable here: ')})"
                                    for d, why in void.items())
    stress = res.evidence.get("stress")
    if stress is not None:
        message = (f"stress runs no memory-safety detector: {stress['iterations']} iterations ran without a "
                   f"crash under production conditions")
    result = _result(st, scenario, case, outcome, message, findings, runs, res)
    if verdict.missing:
        result.details["missing_expected"] = list(verdict.missing)   # a baseline never hides these
    if partial:
        result.details["partial"] = partial
    result.seen = seen
    return result


def gate(st: Standing, scenario: Scenario, case: Case) -> CaseResult | None:
    """A result for a case that cannot run here at all (no process is started for it); None otherwise."""
    if scenario.needs_gpu(case) and not st.machine.gpu:
        why = st.machine.gpu_missing_reason or "NVML reports no device"
        return cannot_run(st, scenario, case, f"needs a CUDA GPU; found none ({why})")
    if st.mode.needs_gpu and not st.machine.gpu:
        return cannot_run(st, scenario, case, f"{st.mode.name} mode needs a CUDA GPU; found none")
    used = [d for d in st.mode.detectors if d in scenario.detectors]
    if st.mode.detectors and not used:
        # Nothing this mode sees applies to the scenario: no process, no build (rule 7, decided up front).
        why = (f"{st.mode.name} mode runs {', '.join(st.mode.detectors) or 'no detector'}; scenario "
               f"{scenario.name} uses {', '.join(scenario.detectors)}")
        return _result(st, scenario, case, Outcome.NOT_APPLICABLE, why, [], _not_started(st, scenario))
    if st.mode.sanitizer and st.sanitizer_missing and all(UNITS[d].sanitizer for d in used):
        return cannot_run(st, scenario, case, st.sanitizer_missing)
    return None


def _died(st: Standing) -> str:
    """What a worker that died in a launch lost: its CUDA context on a GPU; without one (Triton's interpreter
    on the host) a stray access hits host memory and the process itself dies."""
    return "CUDA context lost" if st.machine.gpu else "the worker process died (no GPU: a stray access hit host memory)"

def _wild_fault(st: Standing, expectation: Expectation) -> str:
    """Why a lost context is not this case's failure in a mode without memcheck ("" when it is): the case is
    expected to access memory that is no buffer of ours (an UNATTRIBUTED expectation, e.g. triton#8327's
    scratchpad writes), and such an access ends the kernel wherever it meets an unmapped address, which
    depends on where the allocator put things. No detector here can tell that fault from another; memcheck
    places the access and is the mode that judges it."""
    wild = wild_accesses(expectation)
    if any(UNITS[d].places_strays for d in st.mode.detectors) or not wild:
        return ""
    return (f"not judged here: the expected {wild} reaches memory outside every "
            f"buffer of the case and can end the kernel at an unmapped address; {st.mode.name} mode cannot "
            f"tell that fault from another one (memcheck places it: run mode complete or memcheck)")

def _unchecked(st: Standing, ev: Evidence, runs: list[DetectorRun]) -> str:
    """Why the case checked nothing, or cannot be trusted; "" when its evidence stands."""
    res = ev.result
    ran = {d.detector for d in runs if d.ran}
    distrust = next((why for d in runs if d.ran and d.detector in UNITS and (why := UNITS[d.detector].distrust(ev))), "")
    if distrust:
        return distrust
    if st.mode.guarded and not res.guarded:
        return ("nothing was guarded: the adapter allocated no buffer through the context (ctx.tensor / ctx.rows), "
                "so no detector had anything to check")
    blind = [d for d in st.mode.needs_watch(ev.scenario.detectors) if d in ran]
    if blind and not res.covered and res.status != FAULT:
        narrowed = (f"cover was narrowed to watched buffers ({res.cover!r}) and none was allocated with watch=True"
                    if res.cover == COVER_WATCHED else "no buffer got this mode's placement")
        return (f"nothing was guarded for {', '.join(blind)}: no buffer was covered ({narrowed}), and "
                f"{'it sees' if len(blind) == 1 else 'they see'} only covered buffers")
    run = ev.sanitizer
    if st.mode.sanitizer and run is not None and run.attached:   # never attached: its detectors say so (rule 6)
        if not run.ran:
            return f"{run.tool} did not run properly: {run.problem}"
        disagreement = run.disagreement()
        if disagreement:
            return disagreement
    refused = bool(res.notes.get("refused"))   # a host-side refusal contract: no launch, by design
    if not res.launches and res.status != FAULT and not refused:
        return "the kernel was never launched: nothing was checked"
    return ""

def _runs(st: Standing, ev: Evidence) -> list[DetectorRun]:
    runs = []
    for det in st.mode.detectors:
        if det not in ev.scenario.detectors:
            runs.append(DetectorRun(det, False, f"scenario {ev.scenario.name} does not use {det}"))
        elif UNITS[det].sanitizer and ev.sanitizer is None:
            runs.append(DetectorRun(det, False, st.sanitizer_missing or "not sanitized", missing=True))
        else:
            runs.append(UNITS[det].ran(ev))
    return runs

def cannot_run(st: Standing, scenario: Scenario, case: Case, why: str, res: WorkerResult | None = None,
               runs: list[DetectorRun] | None = None, findings: list[Finding] | None = None) -> CaseResult:
    """A case that should have run here and could not: a failure on a GPU machine, unless allowed."""
    if st.machine.gpu and not st.machine.allow_unsupported:
        outcome, why = Outcome.COULD_NOT_RUN, f"{why}\n(on a machine with a GPU this fails; --gpu-memsafety-allow-unsupported accepts it)"
    else:
        outcome = Outcome.UNSUPPORTED
    return _result(st, scenario, case, outcome, why, findings or [], runs if runs is not None else _not_started(st, scenario), res)

def lost(st: Standing, scenario: Scenario, case: Case, outcome: Outcome, message: str) -> CaseResult:
    """A case that started and left no result (timeout, crash), or never got to run (UNRESOLVED)."""
    return _result(st, scenario, case, outcome, message, [], _not_started(st, scenario))

def _not_started(st: Standing, scenario: Scenario) -> list[DetectorRun]:
    return [DetectorRun(d, False, f"scenario {scenario.name} does not use {d}" if d not in scenario.detectors
                        else "case did not run") for d in st.mode.detectors]

def _result(st: Standing, scenario: Scenario, case: Case, outcome: Outcome, message: str, findings: list[Finding],
            runs: list[DetectorRun], res: WorkerResult | None = None) -> CaseResult:
    details: dict[str, Any] = {}
    if res is not None:
        details = {k: v for k, v in (("notes", res.notes), ("kernel_seconds", res.kernel_seconds),
                                     ("seconds", res.seconds),
                                     ("stress_iterations", (res.evidence.get("stress") or {}).get("iterations")),
                                     *((d, res.evidence.get(d)) for d in UNITS if UNITS[d].keeps_evidence),
                                     ("device", res.device), ("memory", res.memory),
                                     ("passes", res.passes), ("stray_processes", res.stray_processes))
                   if v not in (None, {}, "", [])}
        if res.cover and st.mode.watch_placement != layout.GUARDED:
            # which buffers got this mode's placement: the worker's buffer map says (each layout's placement)
            details["cover"] = {"cover": res.cover, "covered": res.covered, "watched": list(res.watched)}
        if findings and res.buffers:
            # the layout of each buffer a finding names, for the picture of the finding (report.picture)
            details[BUFFERS] = buffer_records(res.buffers, findings,
                                              lambda name, lo, hi: scenario.describe(case, name, lo, hi)
                                              if scenario.describe else "")
    return CaseResult(case_id=case.id, scenario=scenario.name, variant=case.variant, params=dict(case.params),
                      kernel=(res.kernel if res else "") or scenario.kernel(case), arch=res.arch if res else "",
                      mode=st.mode.name, outcome=outcome,
                      expected=scenario.expectation(case, res.arch if res else "").describe(),
                      findings=reconcile(findings), detectors=runs, message=message.strip(),
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
