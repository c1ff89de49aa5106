"""One judgement per case from the stages of a staged mode (the complete mode: memcheck and the guard markers in
one sanitized process, then poison and uninit, then racecheck and synccheck where the kernel uses them).

Each stage is judged by its own mode's judge (gpu_memsafety.judge.rules) and leaves a `StageResult`: its case result and,
when its outcome came from the verdict, the verdict's assessment (gpu_memsafety.judge.verdict.Assessment). This module adds
them up:
1. a stage that did not judge the case from evidence (timeout, crash, unresolved, could not run) decides the case:
   a failure is never hidden by another stage's pass;
2. a stage that skipped the case (the adapter said unsupported or not applicable: another architecture, a
   triton too old) decides it when it is the first stage; a later stage that skipped adds nothing (its reason is
   kept in details.stages);
3. otherwise one verdict from every stage's assessment (gpu_memsafety.judge.verdict.conclude): an expected finding is seen
   when any stage saw it, missed when a stage could check it and none saw it;
4. a detector that should have run and could not (no compute-sanitizer, no GPU): on a machine with a GPU a pass
   becomes "could not run" (a failure, unless --gpu-memsafety-allow-unsupported); without one the verdict of what ran stands and
   the case is marked partial (details.partial: the detectors that did not run and why), which the report's
   headline says.
Pure: no torch, no processes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from gpu_memsafety.detectors.registry import explained, reconcile, says
from gpu_memsafety.judge.verdict import Assessment, conclude
from gpu_memsafety.model import CaseResult, DetectorRun, Finding, Outcome
from gpu_memsafety.scenario.definition import Case, Scenario

# Outcomes of a stage that decide the case whatever the other stages saw (rule 1).
DECIDING = (Outcome.CRASHED, Outcome.TIMEOUT, Outcome.UNRESOLVED, Outcome.COULD_NOT_RUN)
# Outcomes of a stage that skipped the case (rule 2).
SKIPPED = (Outcome.UNSUPPORTED, Outcome.NOT_APPLICABLE)


@dataclass(frozen=True)
class StageResult:
    stage: str                       # the stage's mode name
    result: CaseResult
    assessment: Assessment | None    # None: the outcome did not come from the verdict


def stops(stage: StageResult) -> bool:
    """The case runs no later stage: this one failed without a verdict, or skipped it."""
    return stage.assessment is None and stage.result.outcome in (*DECIDING, *SKIPPED)


def combine(mode: str, detectors: Sequence[str], scenario: Scenario, case: Case, stages: Sequence[StageResult], *,
            gpu: bool, allow_unsupported: bool, left: Mapping[str, str] | None = None) -> CaseResult:
    """The case's one result in `mode` (whose detectors, in order, are `detectors`) from its stages, in order.
    `left`: detectors no stage ran for the case because they had nothing to look at, and why (their lines say so)."""
    if not stages:
        used = ", ".join(scenario.detectors)
        return _result(mode, scenario, case, Outcome.NOT_APPLICABLE,
                       f"no stage of {mode} runs a detector scenario {scenario.name} uses ({used})", [], [], stages)
    findings = distinct([f for s in stages for f in s.result.findings])
    runs = _runs(detectors, stages, left or {})
    missing = {d.detector: d.detail for d in runs if d.missing and not d.ran}
    fenced = _fenced(stages)
    deciding = next((s for s in stages if s.assessment is None and s.result.outcome in DECIDING and s not in fenced),
                    None)
    if deciding is not None:
        others = "".join(f"\n[{s.stage}] {s.result.outcome.label}: {s.result.message.splitlines()[0] if s.result.message else ''}"
                         for s in stages if s is not deciding)
        result = _result(mode, scenario, case, deciding.result.outcome,
                         f"[{deciding.stage}] {deciding.result.message}{others}", findings, runs, stages)
        if missing:
            result.details["partial"] = dict(missing)    # counted with the others that ran without them
        return result
    judged = [s for s in stages if s.assessment is not None]
    if not judged:
        first = stages[0]
        return _result(mode, scenario, case, first.result.outcome, first.result.message, findings, runs, stages)
    arch = next((s.result.arch for s in judged if s.result.arch), "")
    expectation = scenario.expectation(case, arch)
    verdict = conclude(expectation, [s.assessment for s in judged if s.assessment is not None])
    outcome, message = verdict.outcome, verdict.message
    partial: dict[str, str] = {}
    if missing and outcome in (Outcome.CLEAN, Outcome.EXPECTED_FINDING, Outcome.UNSUPPORTED):
        why = "; ".join(f"{name} could not run: {detail}" for name, detail in missing.items())
        if gpu and not allow_unsupported:
            outcome, message = Outcome.COULD_NOT_RUN, (f"{why} (what ran: {message})\n(on a machine with a GPU this "
                                                       f"fails; --gpu-memsafety-allow-unsupported accepts it)")
        else:
            partial = dict(missing)
            message = f"{message} (partial: {why})"
    elif missing:
        # A failure judged on part of its detectors (a finding without a GPU): it fails as it is, and the
        # headline's "memcheck did not run on N" counts it with the passes that ran without memcheck.
        partial = dict(missing)
    if outcome is Outcome.UNSUPPORTED:
        outcome = Outcome.NOT_APPLICABLE
    result = _result(mode, scenario, case, outcome, message, findings, runs, stages)
    if verdict.missing:
        result.details["missing_expected"] = list(verdict.missing)
    if partial:
        result.details["partial"] = partial
    return result


def _fenced(stages: Sequence[StageResult]) -> list[StageResult]:
    """The stages that ended the case over an error a detector explains (Unit.explains: stray accesses the
    interpreter's fence did not let a run without the trace make), where another stage ran a detector that places
    stray accesses on the case (the trace): that stage's findings say what the accesses were, so such a stage decides
    nothing (rule 1 does not apply) and adds nothing."""
    if not any(d.ran and says(d.detector, "places_strays")
               for s in stages for d in s.result.detectors):
        return []
    return [s for s in stages if s.assessment is None and s.result.outcome is Outcome.UNRESOLVED
            and explained(s.result.message)]


def distinct(findings: Sequence[Finding]) -> list[Finding]:
    """Each observation once: a detector that runs in two stages (the guard markers, checked after the memcheck
    stage's launch and again after the values stage's) sees the same bytes twice; the report, the kernel table's
    byte counts and a baseline count them once. Same detector, kind, kernel, buffer, region, bytes and ranges is
    the same finding (the first stage's kept); one that differs in any of them stays."""
    seen: set[tuple[str, tuple[tuple[str, int, int], ...]]] = set()
    out = []
    for f in findings:
        ident = (f.key(), tuple((r.region, r.start, r.end) for r in f.ranges))
        if ident not in seen:
            seen.add(ident)
            out.append(f)
    return [f for f in out if not any(g is not f and _covers(g, f) for g in out)]


def _covers(big: Finding, small: Finding) -> bool:
    """`small` is a part of what `big` saw: the same detector, kind, kernel, buffer and region, and every byte range of
    `small` inside one of `big`'s, `big` seeing more (the guard markers of the memcheck stage saw 4 of 16 B written
    with the marker's own value; the values stage's complementary-marker run saw all 16: held-out hr_a)."""
    same = (big.detector, big.kind, big.kernel, big.buffer, big.region) == \
           (small.detector, small.kind, small.kernel, small.buffer, small.region)
    if not same or not small.ranges or not big.ranges or big.bytes <= small.bytes:
        return False
    return all(any(b.start <= r.start and r.end <= b.end for b in big.ranges) for r in small.ranges)


def _runs(detectors: Sequence[str], stages: Sequence[StageResult], left: Mapping[str, str]) -> list[DetectorRun]:
    """One line per detector of the mode: ran in some stage (each stage that ran it says how), else why not (one
    that should have run and could not stays `missing`; one that had nothing to look at says so)."""
    out = []
    for name in detectors:
        mine = [(s.stage, d) for s in stages for d in s.result.detectors if d.detector == name]
        ran = [(stage, d) for stage, d in mine if d.ran]
        if ran:
            detail = ran[0][1].detail if len(ran) == 1 else "; ".join(f"[{stage}] {d.detail}" for stage, d in ran)
            out.append(DetectorRun(name, True, detail))
        elif mine:
            missing = [d for _, d in mine if d.missing]
            first = (missing or [d for _, d in mine])[0]
            out.append(DetectorRun(name, False, first.detail, missing=bool(missing)))
        else:
            out.append(DetectorRun(name, False, left.get(name, "no stage of this run applied to the case")))
    return out


def _result(mode: str, scenario: Scenario, case: Case, outcome: Outcome, message: str, findings: list[Finding],
            runs: list[DetectorRun], stages: Sequence[StageResult]) -> CaseResult:
    details: dict[str, Any] = {}
    for s in stages:
        for key, value in s.result.details.items():
            details.setdefault(key, value)
    details["stages"] = [{"mode": s.stage, "outcome": s.result.outcome.label, "seconds": round(s.result.duration_s, 3),
                          **({"message": s.result.message[:300]} if s.assessment is None else {})} for s in stages]
    details.pop("missing_expected", None)
    first = next((s.result for s in stages if s.result.arch), stages[0].result if stages else None)
    arch = first.arch if first else ""
    kernel = (first.kernel if first else "") or scenario.kernel(case)
    return CaseResult(case_id=case.id, scenario=scenario.name, variant=case.variant, params=dict(case.params),
                      kernel=kernel, arch=arch, mode=mode, outcome=outcome,
                      expected=scenario.expectation(case, arch).describe(), findings=reconcile(findings),
                      detectors=runs,
                      message=message.strip(), duration_s=sum(s.result.duration_s for s in stages), details=details)
