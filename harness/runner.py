"""The parent side: run cases in worker processes, optionally under compute-sanitizer, and judge them.

One batch of cases runs in one worker process (addresses stay unique, attribution stays exact). The runner
watches per-case start marks to enforce per-case deadlines, kills a hung worker's whole process group,
reruns the cases after a lost CUDA context in a fresh process, and turns every way of failing (sanitizer
missing, not attached, crashed, truncated XML; worker crashed, hung, raised) into a visible outcome.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from harness import attribute, layout as L, registry
from harness.model import (GUARD, GUARD_PAGE, MEMCHECK, OVERREAD, POISON, CaseResult, DetectorRun, Finding,
                           Outcome)
from harness.registry import ROOT
from harness.scenario import Case, Scenario
from harness.verdict import decide


@dataclass(frozen=True)
class Mode:
    name: str
    sanitizer: str | None          # compute-sanitizer tool, or None
    watch_placement: str
    check_markers: bool
    worker_mode: str               # what the worker does: once, poison, stress
    detectors: tuple[str, ...]
    summary: str


MODES: dict[str, Mode] = {m.name: m for m in (
    Mode("guard", None, L.GUARDED, True, "once", (GUARD,), "guard markers only, no sanitizer (near-native speed; overwrites only)"),
    Mode("memcheck", "memcheck", L.FLUSH_END, False, "once", (MEMCHECK,), "compute-sanitizer memcheck only"),
    Mode("both", "memcheck", L.FLUSH_END, True, "once", (GUARD, MEMCHECK), "guard markers and memcheck in one run"),
    Mode("guard_page", None, L.GUARD_PAGE, True, "once", (GUARD, GUARD_PAGE), "watched tensors flush against an unmapped page: overreads fault in hardware, no sanitizer"),
    Mode("poison", None, L.GUARDED, True, "poison", (GUARD, POISON), "guards in two poison patterns; an output that changes is an overread"),
    Mode("stress", None, L.GUARDED, False, "stress", (), "production conditions (caching allocator on, no guards), repeated: how often does it crash?"),
)}

# memcheck slows kernels 16-30x (measured on the H200) and a sanitized process starts slower.
SANITIZER_SLOWDOWN = 30.0
# Python + torch import, CUDA init, and under a sanitizer its attach: the time allowed before the first case starts.
STARTUP_S = 120.0
SANITIZER_STARTUP_S = 300.0
# Relaunch budget after lost contexts or crashes, so a kernel that always kills its process cannot loop forever.
MAX_RELAUNCHES = 64


@dataclass
class RunOptions:
    mode: Mode
    workdir: Path
    cuda_visible_devices: str | None = None
    gpu_available: bool = False
    sanitizer: Any = None              # harness.sanitizer lookup result
    seed: int = 0
    guard: int = L.DEFAULT_GUARD
    flush_backend: str = "auto"        # "auto" (VMM where available) or "torch"
    iterations: int = 10               # stress mode
    timeout_scale: float = 1.0
    keep_going_after_fault: bool = True
    debug: bool = False
    python: str = sys.executable
    on_result: Callable[[CaseResult], None] | None = None
    gpu_missing_reason: str = ""       # why gpu_available is False, e.g. "CUDA_VISIBLE_DEVICES is set and empty"


@dataclass
class _Attempt:
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    crashed: dict[int, str] = field(default_factory=dict)
    timed_out: dict[int, float] = field(default_factory=dict)
    returncode: int | None = None
    log: str = ""
    sanitizer_problem: str = ""
    records: list[Any] = field(default_factory=list)
    sanitizer_ran: bool = False


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _head(text: str, lines: int = 10) -> str:
    return "\n".join(text.splitlines()[:lines])


class Runner:
    def __init__(self, options: RunOptions) -> None:
        self.o = options
        self.o.workdir.mkdir(parents=True, exist_ok=True)
        self._batch = 0
        # Cases to rerun one per process: their batch had sanitizer records that map to no buffer, and only
        # a process of their own can say which case made them.
        self._alone: set[str] = set()
        # One entry per worker process: where its time went (start-up before the first case, the cases,
        # the exit after the last one: the sanitizer writing its report).
        self.processes: list[dict[str, Any]] = []

    # -- public -------------------------------------------------------------------------------------
    def run(self, items: Sequence[tuple[Scenario, Case]]) -> list[CaseResult]:
        """Run the cases in as few processes as possible; every case gets exactly one CaseResult."""
        pending = list(items)
        results: list[CaseResult] = []
        relaunches = 0
        while pending:
            runnable, gated = self._gate(pending)
            results.extend(self._emit(r) for r in gated)
            if not runnable:
                break
            alone = [x for x in runnable if x[1].id in self._alone]
            batch = alone[:1] or runnable
            done, rest = self._run_batch(batch)
            results.extend(self._emit(r) for r in done)
            pending = rest + [x for x in runnable if not any(x is b for b in batch)]
            relaunches += 0 if alone else 1
            if relaunches > MAX_RELAUNCHES and pending:
                results.extend(self._emit(self._unresolved(s, c, "not run: relaunch budget exhausted")) for s, c in pending)
                break
        return results

    # -- gating -------------------------------------------------------------------------------------
    def _gate(self, items: Sequence[tuple[Scenario, Case]]) -> tuple[list[tuple[Scenario, Case]], list[CaseResult]]:
        runnable, gated = [], []
        for scenario, case in items:
            reason = self._unsupported_reason(scenario, case)
            if reason:
                gated.append(self._result(scenario, case, Outcome.UNSUPPORTED, reason, [], self._detector_runs(scenario, None)))
            else:
                runnable.append((scenario, case))
        return runnable, gated

    def _unsupported_reason(self, scenario: Scenario, case: Case) -> str:
        if scenario.needs_gpu(case) and not self.o.gpu_available:
            return f"needs a CUDA GPU; found none ({self.o.gpu_missing_reason or 'NVML reports no device'})"
        mode = self.o.mode
        if mode.name == "memcheck" and not self._sanitizer_usable():
            return self._sanitizer_missing()
        if mode.name == "guard_page" and not self.o.gpu_available:
            return "guard-page mode needs a CUDA GPU with virtual memory management; found none"
        return ""

    def _sanitizer_usable(self) -> bool:
        return self.o.gpu_available and self.o.sanitizer is not None and self.o.sanitizer.found is not None

    def _sanitizer_missing(self) -> str:
        if not self.o.gpu_available:
            return "memcheck needs a CUDA GPU; found none"
        searched = ", ".join(str(p) for p in getattr(self.o.sanitizer, "searched", [])) or "nothing"
        return f"compute-sanitizer not found (searched: {searched})"

    # -- one process --------------------------------------------------------------------------------
    def _run_batch(self, items: list[tuple[Scenario, Case]]) -> tuple[list[CaseResult], list[tuple[Scenario, Case]]]:
        self._batch += 1
        out = self.o.workdir / f"batch-{self._batch:03d}"
        out.mkdir(parents=True, exist_ok=True)
        use_sanitizer = self.o.mode.sanitizer is not None and self._sanitizer_usable()
        job = self._job(items, out, use_sanitizer)
        job_path = out / "job.json"
        job_path.write_text(json.dumps(job, indent=1))
        argv = [self.o.python, "-m", "harness.worker", str(job_path)]
        xml_path = out / "sanitizer.xml"
        if use_sanitizer:
            from harness import sanitizer as san
            argv = san.memcheck_command(self.o.sanitizer.found, tool=self.o.mode.sanitizer, xml_path=xml_path,
                                        target_argv=argv)
        spawned = time.time()
        attempt = self._supervise(argv, items, out, use_sanitizer)
        self.processes.append(_process_times(out, len(items), use_sanitizer, spawned, time.time(), attempt.returncode))
        if use_sanitizer:
            self._read_sanitizer(attempt, xml_path)
        (out / "argv.json").write_text(json.dumps(argv))
        return self._judge(items, attempt, use_sanitizer, out)

    def _job(self, items: list[tuple[Scenario, Case]], out: Path, use_sanitizer: bool) -> dict[str, Any]:
        mode = self.o.mode
        watch = self._job_placement(use_sanitizer)   # no sanitizer: a flush end would only cost the back guard
        return {"cases": [registry.case_job(s, c) for s, c in items], "out_dir": str(out), "mode": mode.worker_mode,
                "watch_placement": watch, "check_markers": mode.check_markers, "seed": self.o.seed,
                "guard": self.o.guard, "flush_backend": self.o.flush_backend, "iterations": self.o.iterations,
                "debug": self.o.debug}

    def _env(self, use_sanitizer: bool) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
        env["PYTHONUNBUFFERED"] = "1"
        if self.o.cuda_visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.o.cuda_visible_devices
        if not self.o.gpu_available:
            env["TRITON_INTERPRET"] = "1"
        else:
            env.pop("TRITON_INTERPRET", None)    # a user's interpreter setting would run the GPU cases on the CPU
        env[SUPERVISOR_ENV] = str(os.getpid())  # the worker leaves when this process is gone (no orphans)
        if use_sanitizer or self.o.mode.name in ("guard_page", "guard", "both", "memcheck", "poison"):
            # The caching allocator hides out-of-bounds accesses from memcheck and reuses addresses.
            env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        if self.o.mode.name == "stress":
            env.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)
        if use_sanitizer:
            env.update(getattr(self.o.sanitizer.found, "env", {}) or {})
        return env

    def _deadline(self, scenario: Scenario, sanitized: bool) -> float:
        scale = SANITIZER_SLOWDOWN if sanitized else 1.0
        if self.o.mode.name == "stress":
            scale *= max(1, self.o.iterations)
        if self.o.mode.name == "poison":
            scale *= 2
        return scenario.timeout_s * scale * self.o.timeout_scale

    def _supervise(self, argv: list[str], items: list[tuple[Scenario, Case]], out: Path, sanitized: bool) -> _Attempt:
        attempt = _Attempt()
        log_path = out / "worker.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(argv, cwd=str(ROOT), env=self._env(sanitized), stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                    preexec_fn=_die_with_parent)
            try:
                attempt.returncode = self._watch(proc, items, out, sanitized, attempt)
            except BaseException:
                # Ctrl-C, SIGTERM (raised as KeyboardInterrupt by the plugin), anything: the worker's whole
                # process group (the sanitizer and its target) goes with us, never left running.
                self._kill(proc)
                proc.wait()
                raise
        attempt.log = log_path.read_text(errors="replace")
        for index in range(len(items)):
            result_path = out / f"{index}.json"
            if result_path.exists():
                attempt.results[index] = json.loads(result_path.read_text())
            elif (out / f"{index}.started").exists() and index not in attempt.timed_out:
                why = f"worker exited with code {attempt.returncode} while running this case"
                buffers = out / f"{index}.buffers.json"
                if buffers.exists():
                    # Died in the launch with its buffers known: judged like a fault (memcheck may explain it).
                    attempt.results[index] = {"status": "fault", "message": why, **json.loads(buffers.read_text())}
                else:
                    attempt.crashed[index] = why
        return attempt

    def _watch(self, proc: subprocess.Popen[bytes], items: list[tuple[Scenario, Case]], out: Path, sanitized: bool,
               attempt: _Attempt) -> int:
        started_at = time.monotonic()
        startup = (SANITIZER_STARTUP_S if sanitized else STARTUP_S) * self.o.timeout_scale
        while True:
            code = proc.poll()
            if code is not None:
                return code
            current = self._current(items, out)
            now = time.monotonic()
            if current is None:
                if now - started_at > startup and not any((out / f"{i}.started").exists() for i in range(len(items))):
                    self._kill(proc)
                    attempt.timed_out[0] = now - started_at
                    return proc.wait()
            else:
                index, t_start = current
                limit = self._deadline(items[index][0], sanitized)
                if time.time() - t_start > limit:
                    self._kill(proc)
                    attempt.timed_out[index] = limit
                    return proc.wait()
            time.sleep(0.05)

    @staticmethod
    def _current(items: list[tuple[Scenario, Case]], out: Path) -> tuple[int, float] | None:
        for index in range(len(items) - 1, -1, -1):
            started = out / f"{index}.started"
            if started.exists():
                if (out / f"{index}.json").exists():
                    return None
                try:
                    return index, float(started.read_text() or time.time())
                except ValueError:
                    return index, time.time()
        return None

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _read_sanitizer(self, attempt: _Attempt, xml_path: Path) -> None:
        from harness import parse
        text = parse.parse_text(attempt.log)
        problems = []
        if text.attached is False:
            problems.append("compute-sanitizer never attached to the worker (" + (text.problem or "target terminated before first instrumented API call") + ")")
        internal = [r for r in text.records if r.category == "internal_error"]
        if text.attached and text.summary_errors is not None:
            # After a full sanitized run, "process didn't terminate successfully" only says the target died
            # (a destructor aborting on the context memcheck ended, say); the worker's exit judges that.
            internal = [r for r in internal if not _target_died(r.text)]
        if internal:
            problems.append("compute-sanitizer internal error: " + internal[0].text)
        if not xml_path.exists():
            problems.append(f"compute-sanitizer wrote no XML ({xml_path.name} missing)")
        else:
            try:
                parsed = parse.parse_xml(xml_path.read_bytes())
            except Exception as exc:  # noqa: BLE001 - hostile or broken XML is a non-pass, with the reason
                problems.append(f"sanitizer XML unreadable: {exc}")
            else:
                attempt.records = list(parsed.records)
                if not parsed.complete:
                    problems.append(f"sanitizer XML incomplete: {parsed.problem}")
        if text.summary_errors is None and not attempt.timed_out:
            problems.append("compute-sanitizer printed no ERROR SUMMARY (it did not finish)")
        attempt.sanitizer_problem = "; ".join(problems)
        attempt.sanitizer_ran = not problems

    # -- judging ------------------------------------------------------------------------------------
    def _judge(self, items: list[tuple[Scenario, Case]], attempt: _Attempt, sanitized: bool,
               out: Path) -> tuple[list[CaseResult], list[tuple[Scenario, Case]]]:
        memcheck = self._memcheck_findings(items, attempt) if sanitized else {}
        strays = memcheck.pop("", [])
        if strays:
            # Records that map to no buffer, from a batch of several cases: rerun every case that ran here one
            # per process, so that each stray is its own case's and no other case is blamed.
            ran = [x for i, x in enumerate(items) if i in attempt.results or i in attempt.crashed or i in attempt.timed_out]
            self._alone.update(c.id for _, c in ran)
            (out / "rerun-alone.txt").write_text(f"{sum(f.count for f in strays)} sanitizer records map to no buffer; "
                                                 f"rerunning {len(ran)} cases one per process\n")
            return [], items
        done: list[CaseResult] = []
        rest: list[tuple[Scenario, Case]] = []
        for index, (scenario, case) in enumerate(items):
            if index in attempt.results:
                done.append(self._from_worker(scenario, case, attempt.results[index], memcheck, attempt, sanitized, out))
            elif index in attempt.timed_out:
                done.append(self._result(scenario, case, Outcome.TIMEOUT,
                                         f"no result after {attempt.timed_out[index]:.0f} s; worker killed\n{_tail(attempt.log)}",
                                         [], self._detector_runs(scenario, None)))
            elif index in attempt.crashed:
                msg = f"{attempt.crashed[index]}\n{_tail(attempt.log)}"
                done.append(self._result(scenario, case, Outcome.CRASHED, msg, [], self._detector_runs(scenario, None)))
            else:
                rest.append((scenario, case))
        if rest and not done:
            # The process died before any case started: report all rather than loop.
            msg = f"worker process exited with code {attempt.returncode} before running any case\n{_tail(attempt.log)}"
            done = [self._unresolved(s, c, msg) for s, c in rest]
            rest = []
        return done, rest

    def _memcheck_findings(self, items: list[tuple[Scenario, Case]], attempt: _Attempt) -> dict[str, list[Finding]]:
        buffers = []
        for index, result in attempt.results.items():
            for rec in result.get("buffers", []):
                buffers.append(attribute.BufferRef.from_record(items[index][1].id, rec))
        by_id = {c.id: (s, c) for s, c in items}

        def describe(case_id: str, name: str, start: int, end: int) -> str:
            sc = by_id.get(case_id)
            if not sc or sc[0].describe is None:
                return ""
            return sc[0].describe(sc[1], name, start, end)

        accesses = [_access(r) for r in attempt.records if r.category == "memory_access" and r.address is not None]
        arch = next((r.get("arch", "") for r in attempt.results.values()), "")
        # A process that ran one case: what maps to no buffer is that case's. Otherwise strays come back
        # under "" and the batch is rerun one case per process (_judge).
        alone = items[0][1].id if len(items) == 1 else None
        return attribute.aggregate(accesses, buffers, arch=arch, describe=describe, stray_case=alone)

    def _from_worker(self, scenario: Scenario, case: Case, res: dict[str, Any], memcheck: dict[str, list[Finding]],
                     attempt: _Attempt, sanitized: bool, out: Path) -> CaseResult:
        status = res.get("status")
        runs = self._detector_runs(scenario, res, attempt, sanitized)
        if status == "unsupported":
            return self._result(scenario, case, Outcome.UNSUPPORTED, res.get("message", ""), [], runs, res)
        if status == "oom":
            mem = res.get("memory") or {}
            where = (f" ({mem['free_bytes_after_release'] / 2**30:.1f} GiB of {mem['total_bytes'] / 2**30:.1f} GiB free after "
                     f"releasing the case)") if mem else ""
            return self._result(scenario, case, Outcome.UNRESOLVED, f"out of memory{where}: the case did not run to the end; "
                                f"nothing was checked\n{res.get('message')}\n{res.get('traceback', '')}", [], runs, res)
        if status == "error":
            return self._result(scenario, case, Outcome.UNRESOLVED, f"{res.get('message')}\n{res.get('traceback', '')}", [], runs, res)
        findings: list[Finding] = []
        kernel, arch = res.get("kernel", ""), res.get("arch", "")
        describe = (lambda _cid, name, s, e: scenario.describe(case, name, s, e)) if scenario.describe else None
        if res.get("guard"):
            findings += attribute.guard_findings(res["guard"], kernel=kernel, arch=arch, case_id=case.id, describe=describe,
                                                 buffers=res.get("buffers", []))
        if sanitized:
            findings += [_with(f, arch=arch) for f in memcheck.get(case.id, [])]
        if status == "fault" and self.o.mode.name == "guard_page":
            findings += self._fault_findings(res, kernel, arch)
        if res.get("poison", {}).get("changed"):
            findings += self._poison_findings(res, kernel, arch)
        explained = sanitized and any(f.detector == MEMCHECK for f in findings)
        if status == "fault" and self.o.mode.name != "guard_page" and not explained:
            return self._result(scenario, case, Outcome.CRASHED, f"CUDA context lost: {res.get('message')}", findings, runs, res)
        if self.o.mode.name == "memcheck" or self.o.mode.name == "both":
            if sanitized and not attempt.sanitizer_ran:
                return self._result(scenario, case, Outcome.UNRESOLVED, f"memcheck did not run properly: {attempt.sanitizer_problem}", findings, runs, res)
            refused = bool((res.get("notes") or {}).get("refused"))   # a host-side refusal contract: no launch by design
            if sanitized and not res.get("launches") and status != "fault" and not refused:
                return self._result(scenario, case, Outcome.UNRESOLVED, "the kernel was never launched: memcheck checked nothing", findings, runs, res)
        verdict = decide(scenario.expectation(case, arch), findings, runs, placement=self._job_placement(sanitized))
        message = verdict.message
        if sanitized and attempt.sanitizer_problem:
            message += f"\n(sanitizer: {attempt.sanitizer_problem})"
        if self.o.mode.name == "stress":
            message = f"{res.get('stress_iterations', 0)} of {self.o.iterations} iterations ran without a crash"
        return self._result(scenario, case, verdict.outcome, message, findings, runs, res)

    def _job_placement(self, sanitized: bool) -> str:
        if self.o.mode.sanitizer and not sanitized:
            return L.GUARDED
        return self.o.mode.watch_placement

    def _fault_findings(self, res: dict[str, Any], kernel: str, arch: str) -> list[Finding]:
        watched = res.get("watched") or [b["name"] for b in res.get("buffers", [])]
        note = (f"hardware fault on the unmapped page after the tensor (a read or a write: the fault does not say "
                f"which), no sanitizer: {res.get('message', '')}")
        # The fault does not say which watched buffer was hit: one finding names them all ("src|dst").
        return [Finding(detector=GUARD_PAGE, kind=OVERREAD, buffer="|".join(watched), region="past_end", bytes=0,
                        kernel=kernel, arch=arch, note=note, exact=False)] if watched else []

    def _poison_findings(self, res: dict[str, Any], kernel: str, arch: str) -> list[Finding]:
        from harness import poison
        return poison.findings(res.get("poison"), kernel=kernel, arch=arch)

    def _detector_runs(self, scenario: Scenario, res: dict[str, Any] | None, attempt: _Attempt | None = None,
                       sanitized: bool = False) -> list[DetectorRun]:
        runs = []
        for det in self.o.mode.detectors:
            if det not in scenario.detectors:
                runs.append(DetectorRun(det, False, f"scenario {scenario.name} does not use {det}"))
            elif res is None:
                runs.append(DetectorRun(det, False, "case did not run"))
            elif det == MEMCHECK:
                runs.append(self._memcheck_run(attempt, sanitized))
            elif det == GUARD:
                ok = bool(res.get("markers_checked")) and res.get("guard") is not None
                runs.append(DetectorRun(det, ok, "markers verified" if ok else "markers not checked"))
            elif det == GUARD_PAGE:
                ok = any(b.get("backend") == "vmm" for b in res.get("buffers", []))
                runs.append(DetectorRun(det, ok or res.get("status") == "fault", "VMM guard page" if ok else "no VMM guard page was placed"))
            elif det == POISON:
                runs.append(DetectorRun(det, "poison" in res, "two patterns compared" if "poison" in res else "not run"))
        return runs

    def _memcheck_run(self, attempt: _Attempt | None, sanitized: bool) -> DetectorRun:
        if not sanitized:
            return DetectorRun(MEMCHECK, False, self._sanitizer_missing())
        if attempt is None or not attempt.sanitizer_ran:
            return DetectorRun(MEMCHECK, False, attempt.sanitizer_problem if attempt else "not run")
        found = self.o.sanitizer.found
        return DetectorRun(MEMCHECK, True, f"compute-sanitizer {found.version} ({found.path})")

    def _unresolved(self, scenario: Scenario, case: Case, msg: str) -> CaseResult:
        return self._result(scenario, case, Outcome.UNRESOLVED, msg, [], self._detector_runs(scenario, None))

    def _result(self, scenario: Scenario, case: Case, outcome: Outcome, message: str, findings: list[Finding],
                runs: list[DetectorRun], res: dict[str, Any] | None = None) -> CaseResult:
        res = res or {}
        details = {k: res[k] for k in ("notes", "kernel_seconds", "seconds", "stress_iterations", "poison", "device", "memory") if k in res}
        return CaseResult(case_id=case.id, scenario=scenario.name, variant=case.variant, params=dict(case.params),
                          kernel=res.get("kernel") or scenario.kernel(case), arch=res.get("arch", ""),
                          mode=self.o.mode.name, outcome=outcome,
                          expected=scenario.expectation(case, res.get("arch", "")).describe(),
                          findings=findings, detectors=runs, message=message.strip(),
                          duration_s=float(res.get("seconds", 0.0)), details=details)

    def _emit(self, result: CaseResult) -> CaseResult:
        if self.o.on_result:
            self.o.on_result(result)
        return result


# Environment variable naming the process that supervises a worker; the worker exits when it is gone.
SUPERVISOR_ENV = "GPU_MEMSAFETY_SUPERVISOR_PID"


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
    jobs = sorted(Path(workdir).glob("**/batch-*/job.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    if not jobs:
        return []
    try:
        cases = json.loads(jobs[0].read_text())["cases"]
    except (OSError, ValueError, KeyError):
        return []
    out = jobs[0].parent
    return [Case.from_json(case).id for index, case in enumerate(cases)
            if (out / f"{index}.started").exists() and not (out / f"{index}.json").exists()]


def _target_died(text: str) -> bool:
    return text.strip().startswith("Error: process didn't terminate successfully")


def _with(f: Finding, **changes: Any) -> Finding:
    from dataclasses import replace
    return replace(f, **{k: v for k, v in changes.items() if v and not getattr(f, k)})


def _access(record: Any) -> attribute.Access:
    from harness import parse
    source = f"{Path(record.file).name}:{record.line}" if getattr(record, "file", "") else ""
    kind = parse.classify(record)
    direction = record.direction or (kind if kind in (parse.READ, parse.WRITE, parse.ATOMIC) else "read")
    return attribute.Access(address=int(record.address), size=int(record.size or 1), direction=direction,
                            kernel=record.kernel or "", thread=record.thread, block=record.block, source=source,
                            misaligned=kind == parse.MISALIGNED, text=record.text)
