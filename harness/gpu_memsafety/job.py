"""The typed records that cross the process boundary between the runner and the worker.

`Job` is what the runner writes to `job.json` for one worker process; `WorkerResult` is what the worker
writes to `<n>.json` for each case (the detectors' evidence keyed by detector name) (and, as a partial result, to `<n>.buffers.json` before the kernel
runs, so that a process that dies in the launch can still be attributed). Both are plain dataclasses with
`to_json` / `from_json`; `from_json` refuses unknown fields, so a worker and a parent of different versions
fail loudly instead of losing a field. Pure: no torch.

Buffer records (`buffers`) and guard runs (`evidence["guard"]`) stay the JSON shapes that `gpu_memsafety.placement.guard` writes and
`gpu_memsafety.sanitizer.attribute` reads (`GuardedBuffer.record()`, `ByteRange` fields).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from gpu_memsafety.placement import layout as L
from gpu_memsafety.cover import COVER_SCENARIO
from gpu_memsafety.scenario.definition import Case

# Worker statuses: what happened to the case inside the worker process.
OK = "ok"                       # the adapter returned; the detectors' evidence is in the result
UNSUPPORTED = "unsupported"     # the adapter raised Unsupported: this machine should run it and cannot
NOT_APPLICABLE = "not_applicable"  # the adapter raised NotApplicable: the case does not apply to this machine
OOM = "oom"                     # out of memory: nothing was checked
FAULT = "fault"                 # the CUDA context is gone (or the process died in the launch)
ERROR = "error"                 # any other exception (with its traceback)
# An ERROR's message starts with this when Triton's interpreter fenced a run over stray accesses (the run was
# stopped, not judged: gpu_memsafety.detectors.trace.StrayAccess)
STRAY_ACCESS = "StrayAccess: "
STATUSES = (OK, UNSUPPORTED, NOT_APPLICABLE, OOM, FAULT, ERROR)

# Environment variable naming the process that supervises a worker (the runner sets it, the worker watches it):
# the worker exits, with its process group, when that process is gone.
SUPERVISOR_ENV = "GPU_MEMSAFETY_SUPERVISOR_PID"

# The worker's pid, in its out dir: at a case's deadline the runner sends it SIGUSR1 (the worker dumps every
# thread's Python stack into worker.log, faulthandler) before it kills the process group.
PID_FILE = "worker.pid"
STACKS_SIGNAL_WAIT_S = 1.5


class RecordError(ValueError):
    """A job or result file that does not have the fields this version writes."""


def _strict(cls: type, data: Mapping[str, Any], what: str) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise RecordError(f"{what}: unknown field(s) {unknown}; known: {sorted(names)}")
    return dict(data)


@dataclass(frozen=True)
class JobCase:
    """A case as a job lists it: the case, and the file its scenario was found in (gpu_memsafety.scenario.registry.Source as
    JSON; the worker imports that file, never a module guessed from the scenario's name). Written flat, as
    gpu_memsafety.scenario.registry.case_job writes it: the case's fields plus "source"."""

    case: Case
    source: Mapping[str, Any] | None = None
    # A guard-page rerun (harness/gpu_memsafety/detectors/pageprobe.py): exactly these buffers get these placements, every other buffer
    # is guarded, one pass. None: the mode's own placement of the buffers it covers.
    placements: Mapping[str, str] | None = None
    # Buffers whose guards poison surveys although an earlier memcheck stage watched their ends: memcheck saw an
    # overread there and its count may be short (it ends the kernel at the first bad access; gpu_memsafety.engine.staged).
    recount: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = {**self.case.to_json(), "source": dict(self.source) if self.source is not None else None}
        if self.placements is not None:
            data["placements"] = dict(self.placements)
        if self.recount:
            data["recount"] = list(self.recount)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "JobCase":
        fields_ = dict(data)
        source = fields_.pop("source", None)
        placements = fields_.pop("placements", None)
        recount = fields_.pop("recount", None) or ()
        if not isinstance(recount, (list, tuple)) or not all(isinstance(b, str) for b in recount):
            raise RecordError(f"job case {fields_.get('scenario', '?')}: recount {recount!r} is not a list of buffer names")
        if placements is not None:
            bad = {k: v for k, v in dict(placements).items() if v not in L.PLACEMENTS}
            if bad:
                raise RecordError(f"job case {fields_.get('scenario', '?')}: placements {bad} are not among {L.PLACEMENTS}")
        return cls(Case.from_json(fields_), source, dict(placements) if placements is not None else None,
                   tuple(recount))


@dataclass(frozen=True)
class Job:
    """One worker process's work: the cases, in order, and how to run them."""

    cases: tuple[JobCase, ...]
    out_dir: str
    mode: str                      # a gpu_memsafety.detectors.modes.MODES name
    watch_placement: str           # where covered buffers go (the mode's, or guarded when its sanitizer is absent)
    cover: str = COVER_SCENARIO    # which buffers are covered: "scenario" (each scenario's `cover`), "all", "watched"
    seed: int = 0
    guard: int = L.DEFAULT_GUARD   # guard bytes on each side of a guarded buffer
    flush_backend: str = "auto"
    iterations: int = 10           # stress mode
    debug: bool = False
    # A memcheck stage of this run saw past both ends of every covered buffer of the cases whose scenario uses
    # memcheck: poison leaves their guards to it and surveys only what memcheck cannot see (the complete mode's
    # second stage).
    covered_seen: bool = False

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["cases"] = [c.to_json() for c in self.cases]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Job":
        values = _strict(cls, data, "job")
        values["cases"] = tuple(JobCase.from_json(c) for c in values["cases"])
        return cls(**values)


@dataclass
class WorkerResult:
    """One case's result as the worker saw it: evidence for the judge, no verdict."""

    case_id: str
    status: str                                   # one of STATUSES
    message: str = ""
    traceback: str = ""
    pid: int = 0
    device: str = ""
    mode: str = ""
    kernel: str = ""
    arch: str = ""
    launches: int = 0
    notes: dict[str, Any] = field(default_factory=dict)
    buffers: list[dict[str, Any]] = field(default_factory=list)   # GuardedBuffer.record() of every guarded buffer
    watched: list[str] = field(default_factory=list)
    cover: str = ""                                               # "all" / "watched": what this case covered
    # What each detector recorded, by detector name (gpu_memsafety.detectors.registry): "guard" the changed marker runs
    # per buffer, "poison" and "uninit" their reports; "stress" its iterations. A detector without an entry
    # recorded nothing (its DetectorRun says it did not run).
    evidence: dict[str, Any] = field(default_factory=dict)
    passes: list[dict[str, Any]] = field(default_factory=list)    # each placement pass that ran (placement, pages, seconds)
    memory: dict[str, int] = field(default_factory=dict)          # out of memory: what was free after releasing
    stray_processes: list[dict[str, Any]] = field(default_factory=list)   # left running by the case: killed (pid, command)
    kernel_seconds: float = 0.0
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise RecordError(f"worker result for {self.case_id}: status {self.status!r} is not one of {STATUSES}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "WorkerResult":
        return cls(**_strict(cls, data, f"worker result {data.get('case_id', '?')}"))

    @property
    def guarded(self) -> int:
        """How many buffers the adapter allocated through the context's arena."""
        return len(self.buffers)

    @property
    def covered(self) -> list[str]:
        """The buffers that got the mode's watch placement (from the buffer map: each layout's placement)."""
        return L.covered_buffers(self.buffers)
