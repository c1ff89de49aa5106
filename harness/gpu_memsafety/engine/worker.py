"""The child process: runs cases, checks markers, writes one result file per case, atomically.

`python -m gpu_memsafety.engine.worker JOB.json` (a gpu_memsafety.job.Job). The parent may wrap it in compute-sanitizer. For
each case the worker first writes `<n>.started`, then `<n>.json` (a gpu_memsafety.job.WorkerResult); a case with a
start mark and no result was running when the process died. Any exception becomes an `error` result with its
traceback (lit's UNRESOLVED); an `Unsupported` becomes `unsupported`, a `NotApplicable` `not_applicable`; a
CUDA error that leaves the context unusable ends the process (exit code CONTEXT_LOST) so that the parent
reruns the remaining cases in a fresh one. How a case runs are the mode's worker actions (gpu_memsafety.detectors.actions: the
plain launch, or a detector's own), called in turn; the worker never branches on the mode. It records evidence only;
the judge (gpu_memsafety.judge.decide) decides.
"""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from gpu_memsafety.detectors import actions
from gpu_memsafety import job as J
from gpu_memsafety.errors import NotApplicable, Unsupported
from gpu_memsafety.util import procs
from gpu_memsafety.cover import COVER_ALL, resolve_cover
from gpu_memsafety.detectors.modes import MODES
from gpu_memsafety.util import jsonio

# Exit code meaning "the CUDA context is gone; rerun what is left in a fresh process".
CONTEXT_LOST = 75
# How a worker leaves after a fault (a diagnostic switch for the lost-memcheck-record investigation of issue 26, used
# by ci/gpu/complete_check.sh PART=flake16; unset in normal runs): "" os._exit at once (the default); "sleep"
# the same after 1 s; "libc" libc's exit(), which runs the C atexit handlers of the loaded libraries (a sanitizer's
# in-process part among them) but not Python's finalisation (no tensor destructor meets the dead context).
# Hypothesis under test: os._exit right after the launch failure can cut off the sanitizer's delivery of the record.
FAULT_EXIT_ENV = "GPU_MEMSAFETY_FAULT_EXIT"


def leave_after_fault(how: str) -> None:
    """End the process with CONTEXT_LOST, the way FAULT_EXIT_ENV says (an unknown value: the default)."""
    if how == "sleep":
        time.sleep(1.0)
    elif how == "libc":
        import ctypes
        ctypes.CDLL(None).exit(CONTEXT_LOST)
    os._exit(CONTEXT_LOST)


def _scenario_of(entry: J.JobCase) -> Any:
    """The case's scenario, imported from the file the parent found it in (never guessed from its name)."""
    from gpu_memsafety.scenario import registry
    if entry.source:
        return registry.load_source(registry.Source.from_json(entry.source))
    return registry.get(entry.case.scenario)


def _out_of_memory(exc: BaseException) -> bool:
    """torch's OutOfMemoryError (CUDA caching allocator), or an allocator message saying the same."""
    if any(cls.__name__ == "OutOfMemoryError" for cls in type(exc).__mro__):
        return True
    text = str(exc)
    return "out of memory" in text.lower() or "can't allocate memory" in text


def classify(exc: BaseException) -> str:
    """What an exception from a case means: not applicable, unsupported, oom, fault (the CUDA context is gone)
    or error. Out of memory comes before fault: cudaMalloc's "CUDA error: out of memory" leaves the context usable."""
    if isinstance(exc, NotApplicable):
        return J.NOT_APPLICABLE
    if isinstance(exc, Unsupported):
        return J.UNSUPPORTED
    if _out_of_memory(exc):
        return J.OOM
    return J.FAULT if _context_lost(exc) else J.ERROR


def _context_lost(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return any(s in text for s in ("illegal memory access", "unspecified launch failure", "AcceleratorError",
                                    "misaligned address", "CUDA error", "device-side assert"))


class Worker:
    """One process's cases, run in order. The actions use its public side: `context` (a fresh guarded arena for the
    case in progress), `sync`, `release`, `keep` (arenas kept alive), `entry` (the job entry of the case), `placement`
    (where the case's covered buffers go), `mode`, `job`, `out` and `arch`."""

    def __init__(self, job: J.Job) -> None:
        import torch

        from gpu_memsafety.placement import layout as L

        self.torch = torch
        self.L = L
        self.job = job
        self.out = Path(job.out_dir)
        self.mode = MODES[job.mode]
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        # Under Triton's interpreter every launch of every run is fenced: no stray access touches host memory
        # (detectors/trace.py: a traced run reports it; any other run ends the case with StrayAccess, unless a
        # detector of the mode places such accesses itself: Unit.places_strays)
        from gpu_memsafety.detectors import registry
        registry.fence(self.mode.detectors)
        self.keep: list[Any] = []          # arenas of finished cases: addresses are never reused in one process
        self._current: Any = None          # the RunContext of the run in progress
        self._index = 0
        self.entry: J.JobCase | None = None
        self.scenario: Any = None          # the Scenario of the case in progress (None until it is imported)
        self._cover = COVER_ALL            # which buffers the case in progress covers (resolve_cover)
        self.placement = job.watch_placement   # where they go (Mode.case_placement)
        self.page_allocators = self._page_allocators(job.flush_backend)

    def _page_allocators(self, backend: str) -> dict[str, Any]:
        if self.device.type != "cuda" or backend == "torch":
            return {}
        from gpu_memsafety.placement import vmm
        return dict(vmm.ALLOCATORS)

    def run(self) -> int:
        procs.subreaper()      # a daemon an adapter starts (forked twice, its own session) stays our child
        # The runner asks for every thread's Python stack (SIGUSR1, into worker.log) before it kills a case past its
        # deadline: a `timeout` then says where the case hung (a launch, a synchronize, a lock, the adapter).
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        (self.out / J.PID_FILE).write_text(str(os.getpid()))
        for index, entry in enumerate(self.job.cases):
            self.begin(index, entry)
            before = procs.snapshot()
            result = self._run_case(entry.case, index)
            result.stray_processes = procs.reap(procs.stray_children(before))   # nothing outlives its case
            self._write(index, result)
        return 0

    def begin(self, index: int, entry: J.JobCase | None = None) -> None:
        """Case `index` starts: its start mark goes to disk (a start mark without a result means the process
        died in it), and the buffer maps of the contexts made from now on are written under its number."""
        (self.out / f"{index}.started").write_text(str(time.time()))
        self._index = index
        self.entry = entry

    def _write(self, index: int, result: J.WorkerResult) -> None:
        from gpu_memsafety.util.fsutil import atomic_write_json
        atomic_write_json(self.out / f"{index}.json", result.to_json())

    def _run_case(self, case: Any, index: int) -> J.WorkerResult:
        base = {"case_id": case.id, "pid": os.getpid(), "device": str(self.device), "mode": self.mode.name}
        start = time.perf_counter()
        kept = len(self.keep)
        self._cover = ""
        try:
            from gpu_memsafety.scenario.adapter import checked
            scenario = self.scenario = _scenario_of(self.entry)
            self._cover = resolve_cover(self.job.cover, scenario.cover)
            self.placement = self.mode.case_placement(self.job.watch_placement, tuple(scenario.detectors))
            adapter = checked(scenario.resolve_adapter(), scenario.name)
            run = [actions.resolve(name) for name in self.mode.actions_for(tuple(scenario.detectors))]
            body = actions.combine([action(self, adapter, case) for action in run])
            status = {"status": J.OK}
        except Exception as exc:  # noqa: BLE001 - every failure becomes a result, never a lost case
            body = {}
            kind = classify(exc)
            status = {"status": kind, "message": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc(limit=20)}
            if kind == J.FAULT:
                # The context is gone: write the result and leave at once, still inside this block, before the
                # traceback is released and torch's tensor destructors abort on the dead context.
                ctx = self._current
                body = {"watched": sorted(ctx.watched) if ctx else [], "buffers": ctx.arena.buffer_map() if ctx else [],
                        "arch": self.arch()}
                self._write(index, J.WorkerResult(**base, **status, **body, cover=self._cover,
                                                  seconds=time.perf_counter() - start))
                sys.stdout.flush()
                leave_after_fault(os.environ.get(FAULT_EXIT_ENV, ""))
            if kind == J.OOM:
                # Release this case's buffers so that the cases after it get the memory back; its own result
                # says how much there was.
                body = {"memory": self._free(kept)}
            if self.job.debug and kind == J.ERROR:
                raise
        return J.WorkerResult(**base, **status, **body, cover=self._cover, seconds=time.perf_counter() - start)

    def release(self, kept: int, current: Any = None) -> None:
        """Give back the arenas made since `kept` arenas were kept (runs no sanitizer watches: their addresses may be
        reused); `current` becomes the context in progress again."""
        del self.keep[kept:]
        self._current = current

    def _free(self, kept: int) -> dict[str, int]:
        self.release(kept)
        if self.device.type != "cuda":
            return {}
        import gc
        gc.collect()
        self.torch.cuda.empty_cache()
        free, total = self.torch.cuda.mem_get_info(self.device)
        return {"free_bytes_after_release": int(free), "total_bytes": int(total)}

    def context(self, case: Any = None, *, paint: Any = None, watch_placement: str | None = None,
                production: bool = False, placements: dict[str, str] | None = None) -> Any:
        """A RunContext on a fresh guarded arena for the case in progress (see begin), its buffers painted as
        `paint` says (placement/guard.Paint: the markers by default); the arena is kept for the life of the
        process, and its buffer map goes to disk before any launch."""
        from gpu_memsafety.scenario.context import RunContext
        from gpu_memsafety.placement.guard import Arena, Paint
        arena = Arena(self.device, paint=paint if paint is not None else Paint(), guard=self.job.guard,
                      page_allocators=self.page_allocators)
        self.keep.append(arena)
        ctx = RunContext(self.device, arena, seed=self.job.seed, watch_placement=watch_placement or self.L.GUARDED,
                         production=production, cover=self._cover or COVER_ALL, placements=placements)
        # The buffer map goes to disk before any kernel runs: if the process dies in the launch (a sanitizer
        # ending the kernel, a guard-page fault, an abort in a destructor), the parent can still attribute.
        arena.on_change = lambda: self._save_buffers(ctx)
        self._current = ctx
        return ctx

    def _save_buffers(self, ctx: Any) -> None:
        from gpu_memsafety.util.fsutil import atomic_write_json
        atomic_write_json(self.out / f"{self._index}.buffers.json",
                          {"buffers": ctx.arena.buffer_map(), "watched": sorted(ctx.watched), "cover": ctx.cover,
                           "arch": ctx.arch()})

    @property
    def cover(self) -> str:
        """Which buffers the case in progress covers (gpu_memsafety.cover.resolve_cover)."""
        return self._cover or COVER_ALL

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def arch(self) -> str:
        if self.device.type != "cuda":
            return "cpu"
        major, minor = self.torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"


def _leave_when_supervisor_dies() -> None:
    """The process that started this worker (named in J.SUPERVISOR_ENV; under a sanitizer it is
    not our parent) may be killed; then this worker takes its whole process group (the sanitizer, anything an
    adapter started) with it instead of running on as an orphan. SIGTERM (sent by the kernel when the parent
    dies, see runner._die_with_parent) does the same."""
    pid = int(os.environ.get(J.SUPERVISOR_ENV, "0") or 0)
    if pid <= 0:
        return
    import signal
    import threading
    from gpu_memsafety.util.child import leave_with_own_group

    def leave(*_: Any) -> None:
        leave_with_own_group()      # our own session, as the runner starts us (util.child): take the group along
        os._exit(SUPERVISOR_GONE)

    def watch() -> None:
        while process_alive(pid):
            time.sleep(0.5)
        leave()

    signal.signal(signal.SIGTERM, leave)
    threading.Thread(target=watch, name="supervisor-watch", daemon=True).start()


# Exit code when the supervising process is gone.
SUPERVISOR_GONE = 76


def process_alive(pid: int) -> bool:
    """Running, and not a zombie (a killed parent nobody has reaped yet is gone for our purpose)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    _leave_when_supervisor_dies()
    if len(args) != 1:
        print("usage: python -m gpu_memsafety.engine.worker JOB.json", file=sys.stderr)
        return 2
    job = J.Job.from_json(jsonio.loads(Path(args[0]).read_text()))
    return Worker(job).run()


if __name__ == "__main__":
    sys.exit(main())
