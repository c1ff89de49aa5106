"""What a detector is: one small interface, the same for every detector (gpu_memsafety.detectors.registry lists them).

A detector says
- what it needs: the compute-sanitizer tool its process runs under (`sanitizer`), where the buffers it watches
  go (`placement`: an exact allocation for memcheck, a guard page, or front and back guards), whether it sees
  nothing without a covered buffer (`needs_cover`), whether it needs a GPU (`needs_gpu`), and how much longer
  than one launch a case takes with it (`deadline_factor`);
- how a case runs for it: `action`, the name of a worker-side action (gpu_memsafety.engine.actions.ACTIONS: a function
  `(worker, adapter, case) -> dict` that launches the case and returns the evidence), or None when it only
  watches the plain launch ("once": memcheck and the hazard tools watch it from the sanitizer, the guard markers
  are checked after it);
- what it found: `ran(evidence)`, whether it ran for the case and why not, and `findings(evidence)`.
And, for the judge and the scheduler: whether a finding of it explains a lost CUDA context (`explains_fault`),
whether its finding ends the worker process (`ends_process`: a sanitizer that ends the kernel, a hardware
fault).

Adding a detector: one module with a class of this shape, one entry in gpu_memsafety.detectors.registry, and one row in
the mode table (gpu_memsafety.engine.modes). Pure: nothing here imports torch.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from gpu_memsafety.model import DetectorRun, Finding

if TYPE_CHECKING:
    from gpu_memsafety.detectors.pageprobe import Probing
    from gpu_memsafety.engine.job import WorkerResult
    from gpu_memsafety.sanitizer.records import SanitizerRun
    from gpu_memsafety.scenario.definition import Case, Scenario


class ModeView(Protocol):
    """What evidence says of the process kind it came from: its name and the detectors it ran
    (gpu_memsafety.engine.modes.Mode is one; the mode table sits above the detectors and is not imported here)."""

    @property
    def name(self) -> str: ...

    @property
    def detectors(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Evidence:
    """Everything the judge knows about one case in one process kind (a mode, or one stage of a staged mode)."""

    scenario: "Scenario"
    case: "Case"
    result: "WorkerResult"
    mode: ModeView
    sanitizer: "SanitizerRun | None" = None
    sanitizer_findings: tuple[Finding, ...] = ()   # this case's share of the batch's placed records
    pages: "Probing | None" = None                  # the guard-page reruns after a fault (guard_page)

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
    deadline_factor: float      # x the scenario's per-case deadline
    explains_fault: bool        # its finding explains a lost CUDA context
    ends_process: bool          # its finding ends the worker process (the rest of the batch reruns)

    def ran(self, ev: Evidence) -> DetectorRun: ...

    def findings(self, ev: Evidence) -> list[Finding]: ...


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
