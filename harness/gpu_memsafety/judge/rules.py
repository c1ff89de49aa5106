"""The judge: from what a case left behind (its worker result and its batch's sanitizer records) to its
findings and its outcome, baselines included. The one place where an outcome is decided.

Pure: no torch, no processes. The runner runs processes and hands over a `Batch` (worker results, cases that
timed out or died, the sanitizer run read from its files); the judge returns one CaseResult per case that
started. Before anything runs, `Judge.gate` says which cases cannot run here at all.

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

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from gpu_memsafety.detectors.base import Evidence, Reruns, wild_accesses
from gpu_memsafety.detectors.registry import UNITS, reconcile
from gpu_memsafety.cover import COVER_WATCHED
from gpu_memsafety.job import ERROR, FAULT, NOT_APPLICABLE, OOM, STRAY_ACCESS, UNSUPPORTED, WorkerResult
from gpu_memsafety.detectors.modes import Mode
from gpu_memsafety.judge.verdict import ON_PAGES, Assessment, assess, conclude
from gpu_memsafety.model import CaseResult, DetectorRun, Expectation, Finding, Outcome
from gpu_memsafety.placement import layout
from gpu_memsafety.report.picture import BUFFERS, buffer_records
from gpu_memsafety.sanitizer.records import Placed, SanitizerRun, place_sanitizer_records, stray_owners
from gpu_memsafety.scenario.definition import Case, Scenario

Item = tuple[Scenario, Case]


# ----------------------------------------------------------------------------------------------- inputs

@dataclass(frozen=True)
class Machine:
    """Where the cases ran: what decides whether a case that could not run fails."""

    gpu: bool
    allow_unsupported: bool = False
    gpu_missing_reason: str = ""   # why there is no GPU, e.g. "CUDA_VISIBLE_DEVICES is set and empty"


# Runs of a case in which memcheck may lose the access record before the case is unresolved: the batch's run, one
# alone in its process, and one alone on the GPU (gpu_use; run 38: a record lost in the batch and again alone in its
# process at a load average of 15 on 16 cores).
LOST_RECORD_RUNS = 3


@dataclass
class Batch:
    """What one worker process left behind, by case index; the runner fills it, the judge reads it."""

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
    """The judge's answer for one batch."""

    done: list[CaseResult]            # one result per case that started
    rest: list[int]                   # indexes of the cases to run again (never started, or rerun alone)
    alone: list[str] = field(default_factory=list)   # case ids that must run one per process from now on
    note: str = ""                    # why they rerun (kept beside the batch's files)
    # results a detector must rerun the case over before they can be judged (index -> the result, and the reruns
    # to start from: Unit.reruns, the guard page's probes): the runner runs them and asks judge_probed for the outcome
    probe: dict[int, tuple[WorkerResult, Reruns]] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ judge

class Judge:
    """Decides every outcome of one run (one mode, one machine)."""

    def __init__(self, mode: Mode, machine: Machine, *, sanitizer_missing: str = "", sanitizer_describe: str = "",
                 sanitizer_caveat: str = "") -> None:
        self.mode = mode
        self.machine = machine
        self.sanitizer_missing = sanitizer_missing     # why the mode's sanitizer cannot run here ("" when it can)
        self.sanitizer_describe = sanitizer_describe
        self.sanitizer_caveat = sanitizer_caveat       # what a ran detector's line adds (memcheck: bulk tensor copies)
        # The verdict's assessment of each case judged from evidence (not of a case that crashed, timed out, ...)
        self.assessed: dict[str, Assessment] = {}
        # Runs of a case in which memcheck lost the access record that made it end the kernel (records.lost_record)
        self.lost_records: dict[str, list[dict[str, Any]]] = {}
        # The buffer map of each case judged from evidence: what a later stage of a staged mode may still look at
        self.buffer_maps: dict[str, list[dict[str, Any]]] = {}
        # Launches a detector checked to the byte, per case judged from evidence and detector (Unit.checked_whole:
        # the interpreter's trace); a later stage of a staged mode reads them (Unit.left_out)
        self.checked: dict[str, dict[str, int]] = {}
        # Stray records of a batch claimed, by their kernel's name, by a case sent to run alone: its own run must
        # show an access of that kernel, or the record (whose owner is then unknown) stays on it as a finding
        self.stray_claims: dict[str, list[Finding]] = {}

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
        if self.mode.sanitizer and self.sanitizer_missing and all(UNITS[d].sanitizer for d in used):
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
        narrowed = ""
        if placed.strays and len(items) > 1:
            ran = [i for i in range(len(items)) if i in batch.results or i in batch.crashed or i in batch.timed_out]
            owners = stray_owners(placed.strays, items, batch.results)
            if len(owners) >= len(ran) or any(i not in batch.results for i in ran):
                note = (f"{sum(f.count for f in placed.strays)} sanitizer records map to no buffer; rerunning "
                        f"{len(ran)} cases one per process")
                return Judged([], list(range(len(items))), [items[i][1].id for i in ran], note)
            # Every case that started left a result, and the records name the kernels of only some: those rerun
            # one per process, the others are judged on this run.
            placed.alone += [c for c in owners if c not in placed.alone]
            for owner, claimed in owners.items():
                self.stray_claims[owner] = claimed      # only the strays whose kernel names this case
            narrowed = (f"{sum(f.count for f in placed.strays)} sanitizer records map to no buffer and name the "
                        f"kernel of {len(owners)} of the {len(items)} cases; ")
        alone = placed.alone if len(items) > 1 else []
        done: list[CaseResult] = []
        rest: list[int] = []
        probe: dict[int, tuple[WorkerResult, Reruns]] = {}
        rerun = [i for i, (_, case) in enumerate(items) if case.id in alone]
        lost = self._lost(items, batch, placed)
        for index, (scenario, case) in enumerate(items):
            if index in rerun:
                continue
            if case.id in lost and len(self.lost_records[case.id]) < LOST_RECORD_RUNS:
                rerun.append(index)              # judged on a run of its own, never on the lost record
                continue
            if case.id in lost:
                done.append(self._lost_twice(scenario, case))
                continue
            probing = self.reruns(scenario, batch.results[index]) if index in batch.results else None
            if probing is not None:
                probe[index] = (batch.results[index], probing)
            elif index in batch.results:
                found = placed.findings.get(case.id, [])
                if len(items) == 1 and case.id in self.stray_claims:
                    found = found + unreproduced(self.stray_claims.pop(case.id), found)
                ev = Evidence(scenario, case, batch.results[index], self.mode, batch.sanitizer, tuple(found))
                result = self.judge_case(ev)
                if placed.details:
                    result.details["sanitizer_records"] = placed.details
                if case.id in self.lost_records:
                    # an earlier run lost the record; this one (alone in its process) is what the case is judged on
                    result.details["memcheck_lost_record"] = self.lost_records[case.id]
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
            why = ("memcheck ended the kernel and lost the access record" if all(items[i][1].id in lost for i in rerun)
                   else f"{self.mode.sanitizer} records name a kernel that {len(rerun)} cases of the batch launched (or "
                        "none), or memcheck lost the access record that ended a kernel")
            note = f"{narrowed or why + ': '}rerunning {', '.join(items[i][1].id for i in rerun)} one per process"
            return Judged(done, sorted(rest + rerun), [items[i][1].id for i in rerun], note, probe)
        return Judged(done, rest, probe=probe)

    def wants_gpu_alone(self, items: Sequence[Item]) -> bool:
        """Whether this process must have the GPU to itself (gpu_use): the last run of a case whose access record
        memcheck lost in every run so far, the last of them alone in its process (LOST_RECORD_RUNS)."""
        return len(items) == 1 and len(self.lost_records.get(items[0][1].id, ())) >= LOST_RECORD_RUNS - 1

    def _lost(self, items: Sequence[Item], batch: Batch, placed: Placed) -> list[str]:
        """The cases of this batch whose access record memcheck lost (records.lost_record), each loss remembered
        with what the process left: its exit code, the API errors, the sanitizer's count, its last words."""
        for case_id in placed.lost:
            run = batch.sanitizer
            self.lost_records.setdefault(case_id, []).append({
                "batch_cases": len(items), "exit_code": batch.returncode,
                "summary_errors": run.summary_errors if run is not None else None,
                "api_errors": placed.details.get("api_errors", []), "load": batch.load,
                **({"gpu_use": batch.gpu_use} if batch.gpu_use else {}), "log_tail": _tail(batch.log, 8)})
        return list(placed.lost)

    def _lost_twice(self, scenario: Scenario, case: Case) -> CaseResult:
        """A case whose access record memcheck lost again when it ran alone: nothing about its accesses is known,
        so it is neither passed nor failed on a finding; unresolved, with both runs."""
        runs = self.lost_records[case.id]
        use = runs[-1].get("gpu_use") or {}
        last = ("alone on the GPU" if use.get("alone") else
                f"alone in its process, asked to have the GPU alone and still sharing it after {use['waited_s']:.0f} s"
                if use.get("exclusive") else "alone in its process")
        result = self.lost(scenario, case, Outcome.UNRESOLVED, (
            f"memcheck ended the kernel (an API error says it failed: "
            f"{', '.join(sorted({e['error'] for r in runs for e in r['api_errors'] if e.get('class') == 'kernel'}))}) "
            f"and wrote no record of the access that made it end it, in {len(runs)} runs, the last one {last}: the "
            f"case is judged on no lost record (details.memcheck_lost_record)"))
        result.details["memcheck_lost_record"] = runs
        return result

    def reruns(self, scenario: Scenario, result: WorkerResult) -> Reruns | None:
        """The reruns a result needs before it can be judged (None: none), from the first detector of this mode that
        the scenario uses and that asks for them (Unit.reruns: a guard-page fault with buffers on pages)."""
        for det in self.mode.detectors:
            if det in scenario.detectors:
                reruns = UNITS[det].reruns(result)
                if reruns is not None:
                    return reruns
        return None

    def judge_probed(self, scenario: Scenario, case: Case, result: WorkerResult, probing: Reruns) -> CaseResult:
        """A result judged with its reruns (the runner ran them); the reruns, their times and what was not run stay
        in the details."""
        judged = self.judge_case(Evidence(scenario, case, result, self.mode, reruns=probing))
        judged.details[probing.details_key] = probing.to_json()
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
        if res.status == ERROR and res.message.startswith(STRAY_ACCESS):
            # the interpreter's fence kept a run without the trace from making stray accesses (detectors/trace.py)
            runs = [d if d.ran else DetectorRun(d.detector, False, "not judged: the interpreter's fence stopped the "
                                                "run over stray accesses (below), which the trace judges")
                    for d in runs]
            wild = self._wild_fault(scenario.expectation(case, res.arch))
            if wild:
                return self._result(scenario, case, Outcome.NOT_APPLICABLE, f"{res.message}; {wild}", [], runs, res)
            return self._result(scenario, case, Outcome.UNRESOLVED, res.message, [], runs, res)
        if res.status == ERROR:
            return self._result(scenario, case, Outcome.UNRESOLVED, f"{res.message}\n{res.traceback}", [], runs, res)
        used = [d for d in self.mode.detectors if d in scenario.detectors]
        void = {d: why for d in used if (why := UNITS[d].void(ev))}
        if void:       # a detector's evidence cannot be judged on this case, by the case's own expectation: no verdict of it
            runs = [DetectorRun(d.detector, False, void[d.detector]) if d.detector in void else d for d in runs]
            used = [d for d in used if d not in void]
        findings = [f for d in used for f in UNITS[d].findings(ev)]
        if res.status == FAULT and not any(UNITS[f.detector].explains_fault for f in findings if f.detector in UNITS):
            wild = self._wild_fault(scenario.expectation(case, res.arch))
            if wild:
                return self._result(scenario, case, Outcome.NOT_APPLICABLE, f"{self._died()}: {res.message}; {wild}",
                                    findings, runs, res)
            return self._result(scenario, case, Outcome.CRASHED, f"{self._died()}: {res.message}", findings, runs, res)
        problem = self._unchecked(ev, runs)
        if problem:
            return self._result(scenario, case, Outcome.UNRESOLVED, problem, findings, runs, res)
        pages = layout.guard_page_offsets(res.buffers) if ON_PAGES.intersection(used) else None
        expectation = scenario.expectation(case, res.arch)
        assessed = assess(expectation, findings, runs, pages=pages, placements=layout.placements(res.buffers))
        self.assessed[case.id] = assessed          # a staged mode adds the stages' assessments up (judge.combine)
        self.buffer_maps[case.id] = list(res.buffers)
        checked = {d: n for d in used if (n := UNITS[d].checked_whole(ev))}
        if checked:
            self.checked[case.id] = checked       # what a later stage may leave to them (Unit.left_out)
        verdict = conclude(expectation, [assessed])
        outcome, message = verdict.outcome, verdict.message
        missing = [d for d in runs if d.missing and not d.ran]
        partial: dict[str, str] = {}
        if missing and outcome in (Outcome.CLEAN, Outcome.EXPECTED_FINDING, Outcome.UNSUPPORTED):
            why = "; ".join(f"{d.detector} could not run: {d.detail}" for d in missing)
            if (self.machine.gpu and not self.machine.allow_unsupported) or not any(d.ran for d in runs):
                seen = f" (what ran: {message})" if outcome is not Outcome.UNSUPPORTED else ""
                return self.cannot_run(scenario, case, why + seen, res, runs, findings)
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
        result = self._result(scenario, case, outcome, message, findings, runs, res)
        if verdict.missing:
            result.details["missing_expected"] = list(verdict.missing)   # a baseline never hides these
        if partial:
            result.details["partial"] = partial
        return result

    def _died(self) -> str:
        """What a worker that died in a launch lost: its CUDA context on a GPU; without one (Triton's interpreter
        on the host) a stray access hits host memory and the process itself dies."""
        return "CUDA context lost" if self.machine.gpu else "the worker process died (no GPU: a stray access hit host memory)"

    def _wild_fault(self, expectation: Expectation) -> str:
        """Why a lost context is not this case's failure in a mode without memcheck ("" when it is): the case is
        expected to access memory that is no buffer of ours (an UNATTRIBUTED expectation, e.g. triton#8327's
        scratchpad writes), and such an access ends the kernel wherever it meets an unmapped address, which
        depends on where the allocator put things. No detector here can tell that fault from another; memcheck
        places the access and is the mode that judges it."""
        wild = wild_accesses(expectation)
        if any(UNITS[d].places_strays for d in self.mode.detectors) or not wild:
            return ""
        return (f"not judged here: the expected {wild} reaches memory outside every "
                f"buffer of the case and can end the kernel at an unmapped address; {self.mode.name} mode cannot "
                f"tell that fault from another one (memcheck places it: run mode complete or memcheck)")

    def _unchecked(self, ev: Evidence, runs: list[DetectorRun]) -> str:
        """Why the case checked nothing, or cannot be trusted; "" when its evidence stands."""
        res = ev.result
        ran = {d.detector for d in runs if d.ran}
        distrust = next((why for d in runs if d.ran and d.detector in UNITS and (why := UNITS[d.detector].distrust(ev))), "")
        if distrust:
            return distrust
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
            elif UNITS[det].sanitizer and ev.sanitizer is None:
                runs.append(DetectorRun(det, False, self.sanitizer_missing or "not sanitized", missing=True))
            else:
                runs.append(UNITS[det].ran(ev))
        return runs

    # -- results that are not a verdict ----------------------------------------------------------------
    def cannot_run(self, scenario: Scenario, case: Case, why: str, res: WorkerResult | None = None,
                   runs: list[DetectorRun] | None = None, findings: list[Finding] | None = None) -> CaseResult:
        """A case that should have run here and could not: a failure on a GPU machine, unless allowed."""
        if self.machine.gpu and not self.machine.allow_unsupported:
            outcome, why = Outcome.COULD_NOT_RUN, f"{why}\n(on a machine with a GPU this fails; --gpu-memsafety-allow-unsupported accepts it)"
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
                                         ("seconds", res.seconds),
                                         ("stress_iterations", (res.evidence.get("stress") or {}).get("iterations")),
                                         *((d, res.evidence.get(d)) for d in UNITS if UNITS[d].keeps_evidence),
                                         ("device", res.device), ("memory", res.memory),
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


def unreproduced(claimed: Sequence[Finding], found: Sequence[Finding]) -> list[Finding]:
    """The stray records a case was sent to run alone for (their kernel has its name) that its own run did not
    repeat: no access of their kernel. Their owner is then not known (a batch mate whose kernel label is not its
    kernel's name may have made them), so they stay findings of this case, saying so: never dropped."""
    kernels = {f.kernel for f in found}
    note = ("seen in its batch's run and not when this case ran alone: which case of the batch made it is not known "
            "(a kernel label that is not the launched kernel's name?)")
    return [replace(f, note=f"{f.note}; {note}" if f.note else note) for f in claimed if f.kernel not in kernels]
