"""What a detector is: one small interface, the same for every detector (gpu_memsafety.detectors.registry lists them).

A detector says
- what it needs: the compute-sanitizer tool its process runs under (`sanitizer`), where the buffers it watches
  go (`placement`: an exact allocation for memcheck, a guard page, or front and back guards), whether it sees
  nothing without a covered buffer (`needs_cover`), whether it needs a GPU (`needs_gpu`), and how much longer
  than one launch a case takes with it (`deadline_factor`);
- how a case runs for it: `action`, the name of a worker-side action (gpu_memsafety.detectors.actions.ACTIONS: a function
  `(worker, adapter, case) -> dict` that launches the case and returns the evidence), or None when it only
  watches the plain launch ("once": memcheck and the hazard tools watch it from the sanitizer, the guard markers
  are checked after it);
- what it found: `ran(evidence)`, whether it ran for the case and why not, and `findings(evidence)`.
And, for the judge and the scheduler: whether a finding of it explains a lost CUDA context (`explains_fault`),
whether its finding ends the worker process (`ends_process`: a sanitizer that ends the kernel, a hardware
fault).

What a detector knows of the others lives in the detector too (`Unit` gives each part a default that says
nothing), so that the judge, the engine and the host suites name no detector:
- what it sees: `sees` (the kinds of finding it can report), `places_strays` (it places an access to memory of no
  buffer, where the others see only a fault), `exact_accesses` (it reports each bad access at its exact bytes:
  a write the guard markers also saw is the same write), `watches_covered_ends` (when its sanitizer ran, it
  watched both ends of every covered buffer);
- what it explains of the others' findings: `reconcile` (memcheck marks its counts short where another detector
  saw more);
- what it leaves to others, and what makes its own evidence no evidence: `void` (its evidence cannot be judged on
  this case), `distrust` (the case's evidence cannot be trusted because of what it saw), `left_out` (a later stage
  of a staged mode need not run it: an earlier detector saw all it could), `recount` (what an earlier detector's
  findings ask it to look at again);
- what it reruns: `reruns` (a fault it must rerun the case over before it can be judged: the guard page's probes,
  run by the runner through the `Reruns` shape), and `batch_rule` (its rule over each sanitized process's placed
  records, before the batch's cases are judged: memcheck's stray accesses and lost records, through the
  `BatchRule` shape: which cases rerun one per process, which it gives up on, what a case's own run adds);
- what it explains: `explains` (why an error that ended a run without it is its to judge: the interpreter's fence
  stopping a run over the stray accesses the trace judges);
- what it keeps: `checked_whole` (launches it checked to the byte, which a later stage's `left_out` reads),
  `keeps_evidence` (its evidence goes into the case's details), `merge_evidence` (two actions' evidence of it for
  one case as one).

Adding a detector: one module with a class of this shape, one entry in gpu_memsafety.detectors.registry, and one row in
the mode table (gpu_memsafety.detectors.modes). Pure: nothing here imports torch.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

from gpu_memsafety.model import DetectorRun, Expectation, Finding

if TYPE_CHECKING:
    from gpu_memsafety.job import WorkerResult
    from gpu_memsafety.sanitizer.records import Placed
    from gpu_memsafety.scenario.definition import Case, Scenario


class ModeView(Protocol):
    """What evidence says of the process kind it came from: its name and the detectors it ran
    (gpu_memsafety.detectors.modes.Mode is one; the mode table sits above the detectors and is not imported here)."""

    @property
    def name(self) -> str: ...

    @property
    def detectors(self) -> tuple[str, ...]: ...


class SanitizerView(Protocol):
    """What a detector reads of one sanitized process (gpu_memsafety.sanitizer.records.SanitizerRun is one; records
    are read and placed there, in the layer above this module, which imports the hazard detectors)."""

    tool: str
    problem: str
    describe: str
    caveat: str

    @property
    def attached(self) -> bool: ...

    @property
    def ran(self) -> bool: ...

    def not_started(self, detector: str) -> DetectorRun | None: ...

    def disagreement(self) -> str: ...


@dataclass(frozen=True)
class Evidence:
    """Everything the judge knows about one case in one process kind (a mode, or one stage of a staged mode)."""

    scenario: "Scenario"
    case: "Case"
    result: "WorkerResult"
    mode: ModeView
    sanitizer: SanitizerView | None = None
    sanitizer_findings: tuple[Finding, ...] = ()   # this case's share of the batch's placed records
    reruns: "Reruns | None" = None                  # a detector's reruns after a fault (Unit.reruns: the guard page's)

    def describe(self, name: str, start: int, end: int) -> str:
        return self.scenario.describe(self.case, name, start, end) if self.scenario.describe else ""

    def of(self, detector: str) -> Any:
        """The worker's evidence for `detector` (WorkerResult.evidence), None when it recorded none."""
        return self.result.evidence.get(detector)

    def kernel_label(self) -> str:
        """The scenario's label for the case's kernel ("" when its label function fails: user code never breaks a
        report)."""
        try:
            return str(self.scenario.kernel(self.case))
        except Exception:   # noqa: BLE001
            return ""


class Detector(Protocol):
    name: str
    sanitizer: str | None       # compute-sanitizer tool the process runs under for it, or None
    placement: str              # where covered buffers go for it (gpu_memsafety.placement.layout placements)
    needs_cover: bool           # it sees nothing unless some buffer got `placement` (memcheck, guard page)
    needs_gpu: bool             # it needs a CUDA GPU itself (not only the kernel)
    action: str | None          # worker action that runs a case for it; None: it watches the plain launch
    action_at: str              # "module:function" of that action (detectors.actions.ACTIONS reads it)
    deadline_factor: float      # x the scenario's per-case deadline
    explains_fault: bool        # its finding explains a lost CUDA context
    ends_process: bool          # its finding ends the worker process (the rest of the batch reruns)
    sees: tuple[str, ...]       # the kinds of finding it can report (gpu_memsafety.model KINDS)
    places_strays: bool         # it places an access to memory of no buffer (the others see a fault, or nothing)
    exact_accesses: bool        # it reports each bad access at its exact bytes (the markers' write is the same write)
    watches_covered_ends: bool  # when its sanitizer ran, it watched both ends of every covered buffer
    keeps_evidence: bool        # its evidence goes into the case's details under its name
    tells_read_from_write: bool  # its findings say which (a hardware fault does not)
    marks_writes: bool          # its findings are the bytes a write changed (an exact access inside them is that write)

    def ran(self, ev: Evidence) -> DetectorRun: ...

    def findings(self, ev: Evidence) -> list[Finding]: ...

    def reconcile(self, findings: list[Finding]) -> list[Finding]: ...

    def void(self, ev: Evidence) -> str: ...

    def distrust(self, ev: Evidence) -> str: ...

    def reruns(self, result: "WorkerResult") -> "Reruns | None": ...

    def batch_rule(self) -> "BatchRule | None": ...

    def explains(self, message: str) -> str: ...

    def checked_whole(self, ev: Evidence) -> int: ...

    def left_out(self, earlier: "Earlier") -> "Leave | None": ...

    def recount(self, earlier: "Earlier") -> tuple[str, ...]: ...

    def merge_evidence(self, before: Any, after: Any) -> Any: ...


class Unit:
    """The parts of a Detector that say what it knows of the others, each with the default that says nothing: a
    detector class derives from it and overrides what applies (see the module's docstring)."""

    sees: tuple[str, ...] = ()
    action_at = ""
    places_strays = False
    exact_accesses = False
    watches_covered_ends = False
    keeps_evidence = False
    tells_read_from_write = True
    marks_writes = False

    def reconcile(self, findings: list[Finding]) -> list[Finding]:
        """The case's findings (every detector's), with what this detector's own say of the others: unchanged."""
        return findings

    def void(self, ev: Evidence) -> str:
        """Why this detector's evidence on the case is no evidence, by the case's own expectation ("" when it is):
        its verdict is left out, the others' stands."""
        return ""

    def distrust(self, ev: Evidence) -> str:
        """Why, by what this detector saw, the case's evidence cannot be trusted ("" when it can): unresolved."""
        return ""

    def reruns(self, result: "WorkerResult") -> "Reruns | None":
        """The reruns a result of this detector's mode needs before it can be judged (None: none)."""
        return None

    def batch_rule(self) -> "BatchRule | None":
        """This detector's rule over each sanitized process's placed records, for one run (it may remember what
        earlier batches showed), applied before the batch's cases are judged (None: none)."""
        return None

    def explains(self, message: str) -> str:
        """Why an error that ended a run (its result's message) is this detector's to judge, the run itself judging
        nothing ("" when it is not)."""
        return ""

    def checked_whole(self, ev: Evidence) -> int:
        """How many launches of the case this detector checked to the byte, whatever the values (0: none)."""
        return 0

    def left_out(self, earlier: "Earlier") -> "Leave | None":
        """Whether a later stage of a staged mode need not run this detector on the case (None: it runs)."""
        return None

    def recount(self, earlier: "Earlier") -> tuple[str, ...]:
        """The buffers an earlier stage's findings ask this detector to look at again (() : none)."""
        return ()

    def merge_evidence(self, before: Any, after: Any) -> Any:
        """Two worker actions' evidence of this detector for one case as one: the later one."""
        return after


@dataclass(frozen=True)
class Leave:
    """A detector a later stage does not run on a case (Unit.left_out): why, in its line's words, and whether the
    case then runs in the mode of that stage less it (`alone`), or in the whole stage, where it has nothing left
    to look at (an earlier sanitizer told the stage's processes what it watched: Job.covered_seen)."""

    why: str
    alone: bool = False


@dataclass(frozen=True)
class Earlier:
    """What the earlier stages of a staged mode learnt of one case (gpu_memsafety.engine.staged builds it; a
    detector's `left_out` and `recount` read it)."""

    scenario: "Scenario"
    case: "Case"
    arch: str = ""
    findings: tuple[Finding, ...] = ()         # every earlier stage's findings on the case
    # the case's buffer map from an earlier stage whose sanitizer watched both ends of every covered buffer
    # (Unit.watches_covered_ends), None when none did
    watched: "Sequence[Mapping[str, Any]] | None" = None
    checked: Mapping[str, int] = field(default_factory=dict)   # detector -> launches it checked whole

    def expected(self) -> tuple[Any, ...] | None:
        """The case's expected findings, None when its expectation cannot be read (the verdict reports that; what
        asks here then does the costlier safe thing)."""
        try:
            return tuple(self.scenario.expectation(self.case, self.arch).findings)
        except Exception:      # noqa: BLE001 - user code never breaks the plan
            return None


class Rerun(Protocol):
    """One rerun of a case: its label and the placements its buffers get."""

    label: str

    def placements(self) -> dict[str, str]: ...


class Reruns(Protocol):
    """A detector's reruns of one case (the guard page's probes: gpu_memsafety.detectors.pageprobe.Probing), run by
    the runner round by round in fresh processes until `next_round` is empty or `budget_factor` x the case's
    deadline is spent."""

    budget_factor: float
    details_key: str            # where the case's details keep `to_json()`
    runs: Sequence[Any]

    def next_round(self) -> Sequence[Rerun]: ...

    def ran(self, rerun: Any, status: str, seconds: float, message: str,
            evidence: Mapping[str, Any] | None = None) -> Any: ...

    def record(self, runs: Sequence[Any]) -> None: ...

    def stop(self, why: str, left: Sequence[Any] = ()) -> None: ...

    def to_json(self) -> dict[str, Any]: ...


class BatchView(Protocol):
    """What a detector's batch rule reads of one worker process (gpu_memsafety.engine.batches.Batch is one)."""

    results: "Mapping[int, WorkerResult]"
    crashed: Mapping[int, str]
    timed_out: Mapping[int, float]
    returncode: int | None
    log: str
    load: float | None
    gpu_use: "Mapping[str, Any] | None"
    sanitizer: SanitizerView | None


@dataclass
class Sorting:
    """A detector's batch rule on one process's batch (BatchRule.sort)."""

    restart: str = ""           # why every case that started reruns one per process, none judged on this run ("": not)
    restart_ids: list[str] = field(default_factory=list)     # ... those cases
    alone: list[str] = field(default_factory=list)           # cases that rerun one per process before they are judged
    note: str = ""              # why they do
    given_up: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # case -> why unresolved, its details


class BatchRule(Protocol):
    """A detector's rule over the placed records of each sanitized process of one run (Unit.batch_rule)."""

    def sort(self, items: "Sequence[tuple[Scenario, Case]]", batch: BatchView, placed: "Placed") -> Sorting: ...

    def gpu_alone(self, case_id: str) -> bool: ...

    def evidence(self, case_id: str, found: list[Finding], single: bool) -> tuple[list[Finding], dict[str, Any]]: ...


def wild_accesses(expectation: Expectation) -> str:
    """The expected accesses to memory of no buffer of ours (ExpectedFinding.wild), in words ("" if none)."""
    return "; ".join(e.describe() for e in expectation.findings if e.wild)


def sanitizer_ran(ev: Evidence, name: str) -> DetectorRun:
    """How a detector that lives in a compute-sanitizer tool ran: not sanitized, another tool, never attached,
    did not run to the end, or ran (named by the tool's description)."""
    run = ev.sanitizer
    if run is None:
        return DetectorRun(name, False, "not sanitized", missing=True)
    if run.tool != name:
        return DetectorRun(name, False, f"the process ran under {run.tool}, not {name}")
    if not run.attached:
        return run.not_started(name)  # type: ignore[return-value]
    if not run.ran:
        return DetectorRun(name, False, run.problem)
    said = run.describe or f"compute-sanitizer {name} ran"
    return DetectorRun(name, True, f"{said}; {run.caveat}" if run.caveat else said)


def with_defaults(f: Finding, **changes: Any) -> Finding:
    """`f` with the given fields filled in where it has none."""
    return replace(f, **{k: v for k, v in changes.items() if v and not getattr(f, k)})
