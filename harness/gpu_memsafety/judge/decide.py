"""The one decision: `decide(evidence)`, from what is known of one case to its CaseResult. Every outcome of a run
comes from here, on both paths: a scenario case (the engine: gpu_memsafety.engine.runner, engine/batches.py,
engine/staged.py) and a test of a pytest suite (`pytest --gpu-memsafety`: gpu_memsafety.host.judge). Pure: no torch,
no processes, no state; the caller gathers the evidence, runs what a detector asks to rerun (Unit.reruns,
Unit.batch_rule) and asks again.

What a case's evidence can be, each a type of its own:
- `Unstarted`: a scenario case before any process: decide says whether it cannot run here at all (judge.rules.gate),
  None when it runs;
- `Ran`: a scenario case's worker result with its share of the sanitizer's records and its reruns (judge.rules:
  the numbered rules);
- `NoResult`: a scenario case that left no result: killed at its deadline, died with its process, never got to run,
  or given up on by a detector (judge.rules.lost);
- `Staged`: the stages of a staged mode for one case (judge.combine);
- `TestEvidence`: one test of a pytest suite, with its own outcome and its marker (judge.suite).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, overload

from gpu_memsafety.detectors.base import Evidence
from gpu_memsafety.judge import combine, rules, suite
from gpu_memsafety.judge.combine import StageResult
from gpu_memsafety.judge.rules import Standing
from gpu_memsafety.judge.suite import TestEvidence
from gpu_memsafety.model import CaseResult, Outcome
from gpu_memsafety.scenario.definition import Case, Scenario


@dataclass(frozen=True)
class Unstarted:
    """A scenario case before any process is started for it."""

    standing: Standing
    scenario: Scenario
    case: Case


@dataclass(frozen=True)
class Ran:
    """A scenario case judged from its worker's result (`seen`: its evidence, its share of the batch's placed records
    and, where a detector reran it, the reruns), with what is kept beside the verdict in its details."""

    standing: Standing
    seen: Evidence
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NoResult:
    """A scenario case that left no result: `timed_out` (killed at this deadline, s), `crashed` (its process died
    while it ran), else it never got to run or cannot be judged (`why`); `log`: its process's output."""

    standing: Standing
    scenario: Scenario
    case: Case
    why: str = ""
    timed_out: float | None = None
    crashed: bool = False
    log: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Staged:
    """The stages of a staged mode for one case, each judged by its own stage's mode (StageResult)."""

    mode: str
    detectors: Sequence[str]
    scenario: Scenario
    case: Case
    stages: Sequence[StageResult]
    gpu: bool
    allow_unsupported: bool = False
    left: Mapping[str, str] = field(default_factory=dict)   # detector -> why a later stage did not run it


CaseEvidence = Unstarted | Ran | NoResult | Staged | TestEvidence


@overload
def decide(evidence: Unstarted) -> CaseResult | None: ...


@overload
def decide(evidence: Ran | NoResult | Staged | TestEvidence) -> CaseResult: ...


def decide(evidence: CaseEvidence) -> CaseResult | None:
    """The outcome of one case from its evidence (the module's docstring lists the kinds); None only for an
    `Unstarted` case that nothing keeps from running."""
    if isinstance(evidence, Unstarted):
        return rules.gate(evidence.standing, evidence.scenario, evidence.case)
    if isinstance(evidence, Ran):
        result = rules.judge_case(evidence.standing, evidence.seen)
        result.details.update(evidence.details)
        reruns = evidence.seen.reruns
        if reruns is not None:       # the reruns, their times and what was not run stay in the details
            result.details[reruns.details_key] = reruns.to_json()
            result.duration_s += sum(r.seconds for r in reruns.runs)
        return result
    if isinstance(evidence, NoResult):
        if evidence.timed_out is not None:
            outcome, why = Outcome.TIMEOUT, f"no result after {evidence.timed_out:.0f} s; worker killed"
        else:
            outcome, why = (Outcome.CRASHED if evidence.crashed else Outcome.UNRESOLVED), evidence.why
        result = rules.lost(evidence.standing, evidence.scenario, evidence.case, outcome,
                            f"{why}\n{_tail(evidence.log)}" if evidence.log else why)
        result.details.update(evidence.details)
        return result
    if isinstance(evidence, Staged):
        return combine.combine(evidence.mode, evidence.detectors, evidence.scenario, evidence.case, evidence.stages,
                               gpu=evidence.gpu, allow_unsupported=evidence.allow_unsupported, left=evidence.left)
    if isinstance(evidence, TestEvidence):
        return suite.judge(evidence)
    raise TypeError(f"decide: {type(evidence).__name__} is no case evidence (one of {', '.join(_KINDS)})")


_KINDS = ("Unstarted", "Ran", "NoResult", "Staged", "TestEvidence")


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])
