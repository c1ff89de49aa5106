"""The parent side: run cases in worker processes, optionally under compute-sanitizer. It only runs processes.

One batch of cases runs in one worker process (addresses stay unique, attribution stays exact). The runner
watches per-case start marks to enforce per-case deadlines, kills a hung worker's whole process group,
reruns the cases after a lost CUDA context in a fresh process, and hands what each process left behind (a
`Batch`: typed worker results, cases that timed out or died, the sanitizer's output) to engine/batches.py, which
asks the one decision (gpu_memsafety.judge.decide) for every outcome. What each mode runs is the policy table in harness/gpu_memsafety/detectors/modes.py.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from gpu_memsafety.placement import layout as L
from gpu_memsafety.detectors.base import Rerun, Reruns
from gpu_memsafety.detectors.registry import UNITS
from gpu_memsafety.scenario import registry
from gpu_memsafety.engine import gpu_use
from gpu_memsafety import job as J
from gpu_memsafety.job import FAULT, SUPERVISOR_ENV, Job, JobCase, WorkerResult
from gpu_memsafety.engine.batches import Batch, Batches
from gpu_memsafety.judge.rules import Machine, Standing
from gpu_memsafety.sanitizer.records import read_sanitizer
from gpu_memsafety.model import CaseResult
from gpu_memsafety.cover import COVER_OPTIONS, COVER_SCENARIO
from gpu_memsafety.detectors.modes import MODES, SANITIZER_SLOWDOWN, Mode  # noqa: F401  (re-exported: the mode table's users)
from gpu_memsafety.util.child import Child
from gpu_memsafety.util.paths import inherited_pythonpath
from gpu_memsafety.scenario.definition import Case, Scenario
from gpu_memsafety.util import jsonio

# Python + torch import, CUDA init, and under a sanitizer its attach: the time allowed before the first case starts.
STARTUP_S = 120.0
SANITIZER_STARTUP_S = 300.0
# After a case's result, the time allowed before the process starts the next case or ends: the worker starts the next
# one at once, and its end (the sanitizer writing its report) took at most 11.8 s in 2,257 processes on the H200
# (runs 23-38). Unbounded until now: a process hung in its exit held its xdist worker for good.
EXIT_GRACE_S = 120.0
# Relaunch budget after lost contexts or crashes, so a kernel that always kills its process cannot loop forever.
MAX_RELAUNCHES = 64


@dataclass
class RunOptions:
    mode: Mode
    workdir: Path
    cuda_visible_devices: str | None = None
    gpu_available: bool = False
    sanitizer: Any = None              # gpu_memsafety.sanitizer.tool lookup result
    seed: int = 0
    guard: int = L.DEFAULT_GUARD
    flush_backend: str = "auto"        # "auto" (VMM where available) or "torch"
    cover: str = COVER_SCENARIO        # which buffers are covered: each scenario's `cover`, or "all" / "watched"
    iterations: int = 10               # stress mode
    covered_seen: bool = False         # an earlier stage's memcheck saw past the ends of the covered buffers (Job)
    recount: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # case id -> JobCase.recount
    timeout_scale: float = 1.0
    debug: bool = False
    allow_unsupported: bool = False    # a case that could not run on a GPU machine is a skip, not a failure
    python: str = sys.executable
    on_result: Callable[[CaseResult], None] | None = None
    gpu_missing_reason: str = ""       # why gpu_available is False, e.g. "CUDA_VISIBLE_DEVICES is set and empty"


# torch's CPU thread pool in a worker (intra-op threads; torch reads it at import). A worker's own CPU work is small
# (copies, comparisons of outputs between runs), and every xdist worker runs one worker process at a time: left at
# torch's default, each of 8 workers' processes on a 16-core H200 host ran 16 spinning threads, and poison mode's
# comparisons of outputs past torch's parallel grain (32,768 elements) went 30 times slower than alone (run 32:
# GPU idle, each worker at 230-260 % CPU). A user's own setting is kept.
THREADS_ENV = "OMP_NUM_THREADS"


def cpu_threads(env: Mapping[str, str], cores: int) -> int:
    """Threads for one worker process: the cores shared out between the run's concurrent workers (xdist's worker
    count where this runs in an xdist worker, else one), at least one."""
    try:
        workers = max(1, int(env.get("PYTEST_XDIST_WORKER_COUNT") or 1))
    except ValueError:
        workers = 1
    return max(1, cores // workers)


class Runner:
    def __init__(self, options: RunOptions) -> None:
        if options.cover not in COVER_OPTIONS:
            raise ValueError(f"cover {options.cover!r} is not one of {', '.join(COVER_OPTIONS)}")
        self.o = options
        self.o.workdir.mkdir(parents=True, exist_ok=True)
        self._batch = 0
        # Cases to rerun one per process: their batch had sanitizer records that map to no buffer, and only
        # a process of their own can say which case made them (a detector's batch rule asks for it).
        self._alone: set[str] = set()
        # One entry per worker process: where its time went (start-up before the first case, the cases,
        # the exit after the last one: the sanitizer writing its report).
        self.processes: list[dict[str, Any]] = []
        found = getattr(self.o.sanitizer, "found", None)
        self.standing = Standing(options.mode, Machine(gpu=options.gpu_available,
                                                       allow_unsupported=options.allow_unsupported,
                                                       gpu_missing_reason=options.gpu_missing_reason),
                                 sanitizer_missing=self._sanitizer_missing() if options.mode.sanitizer else "")
        self.sanitizer_describe = f"compute-sanitizer {found.version} ({found.path})" if found else ""
        self.sanitizer_caveat = _caveat(found, options.mode.sanitizer) if found else ""   # what a ran line adds
        self.batches = Batches(self.standing)

    # -- public -------------------------------------------------------------------------------------
    def run(self, items: Sequence[tuple[Scenario, Case]]) -> list[CaseResult]:
        """Run the cases in as few processes as possible; every case gets exactly one CaseResult. A staged mode
        runs each of its stages in turn (gpu_memsafety.engine.staged) and judges each case once."""
        if self.o.mode.stages:
            from gpu_memsafety.engine import staged
            return staged.run(self, items)
        # A case whose expected finding ends its process (memcheck ends the kernel) goes last, so that the cases
        # after it in the batch need no second process.
        pending = sorted(items, key=lambda item: ends_process(self.o.mode, *item))
        results: list[CaseResult] = []
        relaunches = 0
        registry.vet(list({s.source.file: s.source for s, _ in items if s.source is not None}.values()))
        while pending:
            runnable = []
            for scenario, case in pending:
                gated = self.batches.gate(scenario, case)
                if gated is not None:
                    results.append(self._emit(gated))
                else:
                    runnable.append((scenario, case))
            if not runnable:
                break
            alone = [x for x in runnable if x[1].id in self._alone]
            batch = alone[:1] or runnable
            done, rest = self._run_batch(batch)
            results.extend(self._emit(r) for r in done)
            pending = rest + [x for x in runnable if not any(x is b for b in batch)]
            relaunches += 0 if alone else 1
            if relaunches > MAX_RELAUNCHES and pending:
                results.extend(self._emit(self.batches.lost(s, c, "not run: relaunch budget exhausted"))
                               for s, c in pending)
                break
        return results

    def _sanitizer_missing(self) -> str:
        """Why the mode's sanitizer cannot run here; "" when it can."""
        if not self.o.gpu_available:
            return f"{self.o.mode.sanitizer} needs a CUDA GPU; found none"
        if self.o.sanitizer is not None and self.o.sanitizer.found is not None:
            return ""
        rejected = getattr(self.o.sanitizer, "rejected", None) or []
        if rejected:        # it exists: say why it cannot be used, never "not found"
            return "compute-sanitizer found but rejected: " + "; ".join(
                f"{info.path} ({info.source}): {info.problem or info.version_error or 'unusable'}" for info in rejected)
        searched = ", ".join(str(p) for p in getattr(self.o.sanitizer, "searched", [])) or "nothing"
        return f"compute-sanitizer not found (searched: {searched})"

    # -- one process --------------------------------------------------------------------------------
    def _run_batch(self, items: list[tuple[Scenario, Case]]) -> tuple[list[CaseResult], list[tuple[Scenario, Case]]]:
        self._batch += 1
        out = self.o.workdir / f"batch-{self._batch:03d}"
        out.mkdir(parents=True, exist_ok=True)
        sanitized = self.standing.sanitize()
        job = self._job(items, out, sanitized)
        job_path = out / "job.json"
        job_path.write_text(json.dumps(job.to_json(), indent=1))
        argv = [self.o.python, "-m", "gpu_memsafety.engine.worker", str(job_path)]
        xml_path = out / "sanitizer.xml"
        if sanitized:
            from gpu_memsafety.sanitizer import tool as san
            argv = san.memcheck_command(self.o.sanitizer.found, tool=self.o.mode.sanitizer, xml_path=xml_path,
                                        target_argv=argv)
        spawned = time.time()
        batch = self._supervise(argv, items, out, sanitized, alone=self.batches.wants_gpu_alone(items))
        self.processes.append({**_process_times(out, len(items), sanitized, spawned, time.time(), batch.returncode),
                               **({"left_behind": batch.left_behind} if batch.left_behind else {}),
                               **({"exit_hung_s": batch.exit_hung} if batch.exit_hung else {}),
                               **({"gpu_use": batch.gpu_use} if batch.gpu_use else {})})
        if sanitized:
            batch.sanitizer = read_sanitizer(self.o.mode.sanitizer or "", batch.log,
                                             xml_path.read_bytes() if xml_path.exists() else None,
                                             exit_code=batch.returncode, timed_out=bool(batch.timed_out),
                                             describe=self.sanitizer_describe, caveat=self.sanitizer_caveat)
            if batch.exit_hung:
                # its report was cut off with the process: nothing it did or did not record can be trusted
                hung = (f"the process did not end within {batch.exit_hung:.0f} s after its last case and was killed "
                        f"(its threads' stacks are at the end of {out / 'worker.log'})")
                batch.sanitizer = replace(batch.sanitizer, problem="; ".join(
                    x for x in (hung, batch.sanitizer.problem) if x))
        (out / "argv.json").write_text(json.dumps(argv))
        judged = self.batches.judge_batch(items, batch)
        if judged.alone:
            self._alone.update(judged.alone)
            (out / "rerun-alone.txt").write_text(judged.note + "\n")
        done = list(judged.done)
        for index, (result, probing) in sorted(judged.probe.items()):
            scenario, case = items[index]
            self._probe_pages(scenario, case, probing)
            done.append(self.batches.probed(scenario, case, result, probing))
        return done, [items[i] for i in judged.rest]

    def _probe_pages(self, scenario: Scenario, case: Case, probing: Reruns) -> None:
        """Run a detector's reruns of a case (Unit.reruns; a guard-page fault's: detectors/pageprobe.py plans them,
        round by round): each round's probes as entries of one worker process, a fresh process after each fault (the
        context is lost), until the plan has nothing left or the case's rerun budget (budget_factor x its deadline)
        is spent."""
        budget = self._deadline(scenario, False) * probing.budget_factor
        began = time.monotonic()
        while probes := probing.next_round():
            pending = list(probes)
            while pending:
                if time.monotonic() - began > budget:
                    probing.stop(f"rerun budget of {budget:.0f} s for this case spent", pending)
                    return
                runs, pending = self._run_probes(scenario, case, probing, pending)
                probing.record(runs)

    def _run_probes(self, scenario: Scenario, case: Case, probing: Reruns,
                    probes: list[Rerun]) -> tuple[list[Any], list[Rerun]]:
        """One worker process for `probes` of one case (the same case once per probe, each with its placements):
        what ran, and the probes the process never started (it ended in an earlier one's fault)."""
        self._batch += 1
        out = self.o.workdir / f"batch-{self._batch:03d}-pages"
        out.mkdir(parents=True, exist_ok=True)
        items = [(scenario, case)] * len(probes)
        job = self._job(items, out, False, placements=[p.placements() for p in probes])
        job_path = out / "job.json"
        job_path.write_text(json.dumps(job.to_json(), indent=1))
        argv = [self.o.python, "-m", "gpu_memsafety.engine.worker", str(job_path)]
        spawned = time.time()
        batch = self._supervise(argv, items, out, False)
        self.processes.append({**_process_times(out, len(items), False, spawned, time.time(), batch.returncode),
                               "guard_page_reruns": [p.label for p in probes]})
        (out / "argv.json").write_text(json.dumps(argv))
        runs: list[Any] = []
        for index, probe in enumerate(probes):
            res = batch.results.get(index)
            if res is not None:
                runs.append(probing.ran(probe, res.status, res.seconds, res.message, res.evidence))
            elif index in batch.timed_out:
                runs.append(probing.ran(probe, "timeout", batch.timed_out[index], "no result; worker killed"))
            elif index in batch.crashed:
                runs.append(probing.ran(probe, "crashed", 0.0, batch.crashed[index]))
        rest = probes[len(runs):]       # entries run in order: those after a fault never started
        if not runs and rest:
            # the process ended before any rerun started: say so for each rather than start it again forever
            why = f"worker exited with code {batch.returncode} before this rerun started"
            return [probing.ran(p, "crashed", 0.0, why) for p in rest], []
        return runs, rest

    def _job(self, items: list[tuple[Scenario, Case]], out: Path, sanitized: bool,
             placements: Sequence[dict[str, str] | None] | None = None) -> Job:
        entries = [JobCase.from_json(registry.case_job(s, c)) for s, c in items]
        if placements is not None:
            entries = [replace(e, placements=p) for e, p in zip(entries, placements)]
        entries = [replace(e, recount=tuple(self.o.recount.get(c.id, ()))) for e, (_, c) in zip(entries, items)]
        return Job(cases=tuple(entries), out_dir=str(out), mode=self.o.mode.name,
                   watch_placement=self.o.mode.placement(sanitized), cover=self.o.cover, seed=self.o.seed, guard=self.o.guard,
                   flush_backend=self.o.flush_backend, iterations=self.o.iterations, debug=self.o.debug,
                   covered_seen=self.o.covered_seen)

    def _env(self, sanitized: bool) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = inherited_pythonpath(env, self.o.python)   # the invoking run's import path (a host repository's too)
        env["PYTHONUNBUFFERED"] = "1"
        if self.o.cuda_visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.o.cuda_visible_devices
        if not self.o.gpu_available:
            # A run told it has no GPU hides every one from its workers: the worker picks its device from torch,
            # and Triton's interpreter on a CUDA tensor reads device addresses as host memory (SIGSEGV).
            env["CUDA_VISIBLE_DEVICES"] = ""
            env["TRITON_INTERPRET"] = "1"
        else:
            env.pop("TRITON_INTERPRET", None)    # a user's interpreter setting would run the GPU cases on the CPU
        env[SUPERVISOR_ENV] = str(os.getpid())  # the worker leaves when this process is gone (no orphans)
        env.setdefault(THREADS_ENV, str(cpu_threads(env, os.cpu_count() or 1)))
        for key, value in self.o.mode.env().items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        if sanitized:
            env.update(getattr(self.o.sanitizer.found, "env", {}) or {})
        return env

    def _deadline(self, scenario: Scenario, sanitized: bool) -> float:
        return self.o.mode.deadline(scenario.timeout_s, sanitized=sanitized, iterations=self.o.iterations,
                                    scale=self.o.timeout_scale)

    def _supervise(self, argv: list[str], items: list[tuple[Scenario, Case]], out: Path, sanitized: bool, *,
                   alone: bool = False) -> Batch:
        """Run one worker process to its end (or its deadline). Every process holds its GPU shared while it runs;
        `alone`: this one has it to itself (gpu_use), waiting at most its case's deadline for that."""
        gpu = self.o.cuda_visible_devices if self.o.gpu_available else None
        wait_s = self._deadline(items[0][0], sanitized) if alone else gpu_use.SHARED_WAIT_S
        with gpu_use.using(gpu, exclusive=alone, wait_s=wait_s) as held:
            batch = self._supervise_held(argv, items, out, sanitized)
        batch.gpu_use = held.to_json() if alone else None
        return batch

    def _supervise_held(self, argv: list[str], items: list[tuple[Scenario, Case]], out: Path, sanitized: bool) -> Batch:
        batch = Batch()
        log_path = out / "worker.log"
        # SUPERVISOR_ENV (this process's pid): what the worker and everything it starts inherit; after the worker
        # ended, what is left in its group and every orphan carrying it is killed and named (util.child).
        with Child(argv, env=self._env(sanitized), log=log_path, mark=(SUPERVISOR_ENV, str(os.getpid())),
                   before_exec=_die_with_parent) as child:
            try:
                batch.returncode = self._watch(child, items, out, sanitized, batch)
            except KeyboardInterrupt:
                # Ctrl-C, SIGTERM (raised as KeyboardInterrupt by the plugin): the worker's whole process group (the
                # sanitizer and its target) goes with us, never left running (the Child's exit kills it). First the
                # worker is asked for its threads' stacks (into worker.log): where a run that hung was stopped from
                # outside (a CI step's time limit), they say where the case was.
                if child.poll() is None:
                    _ask_for_stacks(out)
                raise
        batch.left_behind = [dict(record) for record in child.left_behind]
        batch.log = log_path.read_text(errors="replace")
        batch.load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
        for index in range(len(items)):
            result_path = out / f"{index}.json"
            if result_path.exists():
                batch.results[index] = WorkerResult.from_json(jsonio.loads(result_path.read_text()))
            elif (out / f"{index}.started").exists() and index not in batch.timed_out:
                why = f"worker exited with code {batch.returncode} while running this case"
                buffers = out / f"{index}.buffers.json"
                if buffers.exists():
                    # Died in the launch with its buffers known: judged like a fault (memcheck may explain it).
                    batch.results[index] = WorkerResult.from_json({"case_id": items[index][1].id, "status": FAULT,
                                                                   "message": why, **jsonio.loads(buffers.read_text())})
                else:
                    batch.crashed[index] = why
        return batch

    def _watch(self, child: Child, items: list[tuple[Scenario, Case]], out: Path, sanitized: bool,
               batch: Batch) -> int | None:
        started_at = time.monotonic()
        startup = (SANITIZER_STARTUP_S if sanitized else STARTUP_S) * self.o.timeout_scale
        while True:
            code = child.poll()
            if code is not None:
                return code
            current = self._current(items, out)
            now = time.monotonic()
            if current is None:
                if now - started_at > startup and not any((out / f"{i}.started").exists() for i in range(len(items))):
                    batch.timed_out[0] = now - started_at
                    return child.kill(timed_out=True)
                since = self._last_result(items, out)
                if since is not None and time.time() - since > EXIT_GRACE_S * self.o.timeout_scale:
                    # every case that started has its result, and the process neither went on nor ended
                    _ask_for_stacks(out)
                    batch.exit_hung = EXIT_GRACE_S * self.o.timeout_scale
                    return child.kill()
            else:
                index, t_start = current
                limit = self._deadline(items[index][0], sanitized)
                if time.time() - t_start > limit:
                    _ask_for_stacks(out)
                    batch.timed_out[index] = limit
                    return child.kill(timed_out=True)
            time.sleep(0.05)

    @staticmethod
    def _newest_started(items: list[tuple[Scenario, Case]], out: Path) -> int | None:
        """The index of the last case that wrote its start mark; None when none did."""
        return next((i for i in range(len(items) - 1, -1, -1) if (out / f"{i}.started").exists()), None)

    @classmethod
    def _last_result(cls, items: list[tuple[Scenario, Case]], out: Path) -> float | None:
        """When the newest started case wrote its result (its file's time); None when no case started or it has none."""
        index = cls._newest_started(items, out)
        if index is None:
            return None
        try:
            return (out / f"{index}.json").stat().st_mtime
        except OSError:
            return None

    @classmethod
    def _current(cls, items: list[tuple[Scenario, Case]], out: Path) -> tuple[int, float] | None:
        index = cls._newest_started(items, out)
        if index is None or (out / f"{index}.json").exists():
            return None
        try:
            return index, float((out / f"{index}.started").read_text() or time.time())
        except ValueError:
            return index, time.time()

    def _emit(self, result: CaseResult) -> CaseResult:
        if self.o.on_result:
            self.o.on_result(result)
        return result


def _ask_for_stacks(out: Path) -> None:
    """Before a case past its deadline is killed: SIGUSR1 to its worker, which writes every thread's Python stack
    into worker.log (the timeout's message quotes the log's tail), then a moment for it to be written. A worker
    that never wrote its pid, or is gone, is skipped: the kill comes either way."""
    try:
        pid = int((out / J.PID_FILE).read_text())
        os.kill(pid, signal.SIGUSR1)
    except (OSError, ValueError):
        return
    time.sleep(J.STACKS_SIGNAL_WAIT_S)


def _caveat(found: Any, tool: str | None) -> str:
    """What the detector line of a sanitized run adds to the tool's name: for memcheck, whether bulk tensor copies
    are checked (gpu_memsafety.sanitizer.tool.tensor_ops)."""
    from gpu_memsafety.sanitizer.tool import tensor_ops
    return tensor_ops(found, tool or "")[1] if getattr(found, "version", None) is not None else ""


def ends_process(mode: Mode, scenario: Scenario, case: Case) -> bool:
    """Whether the case is expected to end its worker process in this mode: an expected finding of a detector that
    ends it (memcheck ends the kernel and the context with it; a guard-page fault) among the mode's detectors."""
    try:
        expected = scenario.expect(case).findings
    except Exception:     # noqa: BLE001 - a scenario's expectation is user code: the order is only a hint
        return False
    return any(UNITS[d].ends_process for e in expected for d in e.detectors if d in mode.detectors)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the supervising thread's process dies (Linux prctl), so a
    killed pytest worker leaves no worker (or sanitizer) behind; the worker answers it by killing its process
    group. The worker also watches SUPERVISOR_ENV, which covers a sanitizer's target, a grandchild."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)    # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _process_times(out: Path, cases: int, sanitized: bool, spawned: float, ended: float, code: int | None) -> dict[str, Any]:
    """Start-up (spawn to the first case's start mark), run (to the last result), exit (to the process end)."""
    def mark(name: str) -> float | None:
        try:
            return float((out / name).read_text() or "nan") if name.endswith(".started") else (out / name).stat().st_mtime
        except (OSError, ValueError):
            return None
    first = mark("0.started")
    results = [t for t in (mark(f"{i}.json") for i in range(cases)) if t is not None]
    last = max(results) if results else None
    return {"dir": out.name, "cases": cases, "results": len(results), "sanitized": sanitized, "exit_code": code,
            "wall_s": round(ended - spawned, 3),
            "startup_s": round(first - spawned, 3) if first is not None else None,
            "run_s": round(last - first, 3) if first is not None and last is not None else None,
            "exit_s": round(ended - last, 3) if last is not None else None}


def unfinished_cases(workdir: Path) -> list[str]:
    """Case ids that the newest worker process under `workdir` started and never finished (a start mark, no
    result): what was running when that process, or the one supervising it, was killed."""
    return list(unfinished(workdir))


def unfinished(workdir: Path, *, lines: int = 40) -> dict[str, str]:
    """unfinished_cases, each with what is known of its end: how long it had been running by now (called as the
    run ends), and the last `lines` lines of its worker's log, where an interrupted run's worker wrote every
    thread's stack (_supervise_held asks for them before the kill)."""
    jobs = sorted(Path(workdir).glob("**/batch-*/job.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    if not jobs:
        return {}
    try:
        cases = jsonio.loads(jobs[0].read_text())["cases"]
    except (OSError, ValueError, KeyError):
        return {}
    out = jobs[0].parent
    log = out / "worker.log"
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""
    found = {}
    for index, case in enumerate(cases):
        started = out / f"{index}.started"
        if started.exists() and not (out / f"{index}.json").exists():
            try:
                when = f"it had been running for {time.time() - float(started.read_text()):.0f} s"
            except (OSError, ValueError):
                when = "its start time is unreadable"
            found[Case.from_json(case).id] = f"{when}; its worker's log ({log}) ends:\n{tail}" if tail else when
    return found
