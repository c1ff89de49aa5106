"""From what one worker process left behind to one decision per case: the engine's side of judging a batch.

The runner runs a batch's process and fills a `Batch` (worker results, cases that timed out or died, the sanitizer's
run read from its files). Here the sanitizer's records are placed on the batch's cases once
(gpu_memsafety.sanitizer.records), every detector's batch rule says which cases must run again one per process
before they are judged and which it gives up on (Unit.batch_rule), a detector's reruns of a case are asked for
(Unit.reruns), and every other case that started is handed to the one decision, gpu_memsafety.judge.decide.decide,
as its evidence. No detector is named: what each asks for is its unit's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from gpu_memsafety.detectors.base import BatchRule, Evidence, Reruns
from gpu_memsafety.detectors.registry import UNITS
from gpu_memsafety.job import WorkerResult
from gpu_memsafety.judge.decide import NoResult, Ran, Unstarted, decide
from gpu_memsafety.judge.rules import Seen, Standing
from gpu_memsafety.model import CaseResult
from gpu_memsafety.sanitizer.records import Placed, SanitizerRun, place_sanitizer_records
from gpu_memsafety.scenario.definition import Case, Scenario

Item = tuple[Scenario, Case]


@dataclass
class Batch:
    """What one worker process left behind, by case index; the runner fills it."""

    results: dict[int, WorkerResult] = field(default_factory=dict)
    crashed: dict[int, str] = field(default_factory=dict)       # started, no result: why the process ended
    timed_out: dict[int, float] = field(default_factory=dict)   # killed at this deadline (s)
    returncode: int | None = None
    log: str = ""
    load: float | None = None                                   # the host's 1-minute load average when it ended
    sanitizer: SanitizerRun | None = None                       # None: not sanitized
    left_behind: list[dict[str, Any]] = field(default_factory=list)   # processes alive after it ended: killed
    gpu_use: dict[str, Any] | None = None                       # a run that asked for the GPU alone: gpu_use.Held
    exit_hung: float | None = None      # killed this many s after its last case's result, neither going on nor ending

    @property
    def sanitized(self) -> bool:
        return self.sanitizer is not None


@dataclass
class Judged:
    """One batch, sorted."""

    done: list[CaseResult]            # one result per case that started
    rest: list[int]                   # indexes of the cases to run again (never started, or rerun alone)
    alone: list[str] = field(default_factory=list)   # case ids that must run one per process from now on
    note: str = ""                    # why they rerun (kept beside the batch's files)
    # results a detector must rerun the case over before they can be judged (index -> the result, and the reruns
    # to start from: Unit.reruns, the guard page's probes): the runner runs them and asks `probed` for the outcome
    probe: dict[int, tuple[WorkerResult, Reruns]] = field(default_factory=dict)


class Batches:
    """Every batch of one run (one mode, one machine), in turn: what the detectors' batch rules remember across
    them, and what the cases judged from evidence showed a later stage of a staged mode."""

    def __init__(self, standing: Standing) -> None:
        self.standing = standing
        # Every detector's rule over a sanitized process's placed records (Unit.batch_rule), for this run
        self.rules: list[BatchRule] = [rule for unit in UNITS.values() if (rule := unit.batch_rule()) is not None]
        # What each case judged from evidence showed (judge.rules.Seen): a staged mode's later stages read it
        self.seen: dict[str, Seen] = {}

    # -- before a batch ---------------------------------------------------------------------------------
    def gate(self, scenario: Scenario, case: Case) -> CaseResult | None:
        """A result for a case that cannot run here at all (no process is started for it); None otherwise."""
        return decide(Unstarted(self.standing, scenario, case))

    def wants_gpu_alone(self, items: Sequence[Item]) -> bool:
        """Whether this process must have the GPU to itself (gpu_use): a detector's rule asks it for the run of a
        case alone in its process."""
        return len(items) == 1 and any(rule.gpu_alone(items[0][1].id) for rule in self.rules)

    # -- after a batch ----------------------------------------------------------------------------------
    def judge_batch(self, items: Sequence[Item], batch: Batch) -> Judged:
        """Results of the cases of `items` that started, the indexes of those that never started, and the cases
        to run again one per process (a detector's batch rule: only a process of its own can say what a case did,
        and no other case is blamed)."""
        placed = place_sanitizer_records(items, batch.results, batch.sanitizer) if batch.sanitizer else Placed()
        sortings = [rule.sort(items, batch, placed) for rule in self.rules] if batch.sanitizer else []
        restart = next((s for s in sortings if s.restart), None)
        if restart is not None:
            return Judged([], list(range(len(items))), restart.restart_ids, restart.restart)
        alone = list(placed.alone) if len(items) > 1 else []
        for sorting in sortings:
            alone += [c for c in sorting.alone if c not in alone]
        given_up = {c: why for s in sortings for c, why in s.given_up.items()}
        done: list[CaseResult] = []
        rest: list[int] = []
        probe: dict[int, tuple[WorkerResult, Reruns]] = {}
        rerun = [i for i, (_, case) in enumerate(items) if case.id in alone]
        for index, (scenario, case) in enumerate(items):
            if index in rerun:
                continue
            if case.id in given_up:
                why, details = given_up[case.id]
                done.append(decide(NoResult(self.standing, scenario, case, why, details=details)))
                continue
            probing = self.reruns(scenario, batch.results[index]) if index in batch.results else None
            if probing is not None:
                probe[index] = (batch.results[index], probing)
            elif index in batch.results:
                found = placed.findings.get(case.id, [])
                kept: dict[str, Any] = {}
                for rule in self.rules:
                    found, more = rule.evidence(case.id, found, len(items) == 1)
                    kept.update(more)
                if placed.details:
                    kept = {"sanitizer_records": placed.details, **kept}
                ev = Evidence(scenario, case, batch.results[index], self.standing.mode, batch.sanitizer, tuple(found))
                done.append(self._decided(decide(Ran(self.standing, ev, kept))))
            elif index in batch.timed_out:
                done.append(decide(NoResult(self.standing, scenario, case, timed_out=batch.timed_out[index],
                                            log=batch.log)))
            elif index in batch.crashed:
                done.append(decide(NoResult(self.standing, scenario, case, batch.crashed[index], crashed=True,
                                            log=batch.log)))
            else:
                rest.append(index)
        if rest and not done and not rerun and not probe:
            # The process died before any case started: report them all rather than start it again forever.
            why = f"worker process exited with code {batch.returncode} before running any case"
            done = [decide(NoResult(self.standing, *items[i], why, log=batch.log)) for i in rest]
            rest = []
        if rerun:
            whys = [s.note for s in sortings if s.note and any(c in s.alone for c in alone)]
            if any(c in placed.alone for c in alone) or not whys:
                whys.append(f"{self.standing.mode.sanitizer} records name a kernel that {len(rerun)} cases of the "
                            "batch launched (or none)")
            note = f"{'; '.join(whys)}: rerunning {', '.join(items[i][1].id for i in rerun)} one per process"
            return Judged(done, sorted(rest + rerun), [items[i][1].id for i in rerun], note, probe)
        return Judged(done, rest, probe=probe)

    def reruns(self, scenario: Scenario, result: WorkerResult) -> Reruns | None:
        """The reruns a result needs before it can be judged (None: none), from the first detector of this mode that
        the scenario uses and that asks for them (Unit.reruns: a guard-page fault with buffers on pages)."""
        for det in self.standing.mode.detectors:
            if det in scenario.detectors:
                reruns = UNITS[det].reruns(result)
                if reruns is not None:
                    return reruns
        return None

    def probed(self, scenario: Scenario, case: Case, result: WorkerResult, probing: Reruns) -> CaseResult:
        """A result judged with its reruns (the runner ran them)."""
        ev = Evidence(scenario, case, result, self.standing.mode, reruns=probing)
        return self._decided(decide(Ran(self.standing, ev)))

    def lost(self, scenario: Scenario, case: Case, why: str) -> CaseResult:
        """A case that never got to run (unresolved)."""
        return decide(NoResult(self.standing, scenario, case, why))

    def _decided(self, result: CaseResult) -> CaseResult:
        if result.seen is not None:
            self.seen[result.case_id] = result.seen
        return result
