"""The bench's parent side: each part (bandwidth, cases, cache, batching, matrix, scaling) runs its measuring
children or its pytest runs, and its results go to bench.json as soon as it ends."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from gpu_memsafety.cli.bench.results import bench_markdown, evaluate_targets
from gpu_memsafety.scenario.definition import Case, Scenario
from gpu_memsafety.scenario.registry import all_scenarios
from gpu_memsafety.util.fsutil import atomic_write_json, atomic_write_text
from gpu_memsafety.util.paths import SCENARIO_DIR, inherited_pythonpath
from gpu_memsafety.util.progress import track, watch
from gpu_memsafety.util import jsonio


# ------------------------------------------------------------------------------------------- selection

def default_cases(scenarios: dict[str, Scenario]) -> list[tuple[Scenario, Case]]:
    """gpt-oss-sized and smoke cases of every scenario (isolated variants excluded: they cannot batch)."""
    return [(s, c) for s in scenarios.values() for c in s.build()
            if {"gpt-oss", "smoke"} & set(c.tags) and not s.runs_alone(c)]


def matrix_cases(scenarios: dict[str, Scenario]) -> list[tuple[Scenario, Case]]:
    return [(s, c) for s in scenarios.values() for c in s.build()]


def spread_sample(items: list[tuple[Scenario, Case]], n: int) -> list[tuple[Scenario, Case]]:
    """n non-isolated cases spread evenly over the matrix, every scenario represented when n allows."""
    pool = [(s, c) for s, c in items if not s.runs_alone(c)]
    by_scenario: dict[str, list[tuple[Scenario, Case]]] = {}
    for s, c in pool:
        by_scenario.setdefault(s.name, []).append((s, c))
    picked: list[tuple[Scenario, Case]] = []
    names = sorted(by_scenario)
    share = {name: min(len(by_scenario[name]), max(1, round(n * len(by_scenario[name]) / max(1, len(pool))))) for name in names}
    while sum(share.values()) > max(n, len(names)):
        largest = max(names, key=lambda name: share[name])
        share[largest] -= 1
    for name in names:
        group, k = by_scenario[name], min(share[name], len(by_scenario[name]))
        step = len(group) / k
        picked.extend(group[int(i * step)] for i in range(k))
    return picked


# ------------------------------------------------------------------------------------------- the parts

class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.doc: dict[str, Any] = {"started": _now(), "argv": sys.argv[1:], "parts": {}, "targets": []}
        self.scenarios = all_scenarios()

    def log(self, message: str) -> None:
        print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)

    def save(self) -> None:
        self.doc["targets"] = evaluate_targets(self.doc["parts"])
        self.doc["finished"] = _now()
        atomic_write_json(self.out / "bench.json", self.doc)
        atomic_write_text(self.out / "bench.md", bench_markdown(self.doc))

    def run(self) -> int:
        from gpu_memsafety.cli.env import environment
        from gpu_memsafety.util.gpus import discover, visible_gpus
        disc = discover()
        self.gpu = bool(visible_gpus(disc)[0])
        self.doc["environment"] = environment(disc)
        for part in self.args.parts:
            self.log(f"part {part} ...")
            t0 = time.perf_counter()
            try:
                result = getattr(self, f"part_{part}")()
            except Exception as exc:  # noqa: BLE001 - one broken part must not lose the others
                result = {"status": "error", "message": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
            result["part_seconds"] = time.perf_counter() - t0
            self.doc["parts"][part] = result
            self.save()
            self.log(f"part {part} done in {result['part_seconds']:.1f} s")
        self.save()
        print(bench_markdown(self.doc))
        return 0

    # -- children -----------------------------------------------------------------------------------
    def _child(self, what: str, case_ids: list[str], *, sanitized: bool = False, **job: Any) -> list[dict[str, Any]]:
        """Run a child over the cases; restart it after the case that killed it; one result per case."""
        out = self.out / "work" / what
        if out.exists():
            import shutil
            shutil.rmtree(out)
        out.mkdir(parents=True)
        job = {"what": what, "cases": case_ids, "out_dir": str(out), "reps": self.args.reps, "seed": 0, **job}
        job_path = out / "job.json"
        job_path.write_text(json.dumps(job, indent=1))
        argv = [sys.executable, "-m", "gpu_memsafety.cli.bench", "child", str(job_path)]
        env = dict(os.environ, PYTHONPATH=inherited_pythonpath(),
                   PYTHONUNBUFFERED="1")
        if not self.gpu:
            env.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")    # as the runner's workers: no GPU, none seen
        if sanitized:
            argv, env = self._sanitized(argv, env, out)
        expected = max(1, len(case_ids))
        with watch(f"bench {what}", expected, lambda: sum((out / f"{i}.json").exists() for i in range(expected)),
                   unit="cases"):
            self._attempts(argv, env, out, what, case_ids, expected)
        return [jsonio.loads((out / f"{i}.json").read_text()) for i in range(expected)]

    def _attempts(self, argv: list[str], env: dict[str, str], out: Path, what: str, case_ids: list[str],
                  expected: int) -> None:
        for attempt in range(expected + 1):
            with open(out / f"child-{attempt}.log", "wb") as log:
                try:
                    code: int | str = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                     stdin=subprocess.DEVNULL, timeout=self.args.child_timeout).returncode
                except subprocess.TimeoutExpired:     # killed by run(): the case it was in is recorded, the rest go on
                    code = f"none: killed after {self.args.child_timeout} s"
            missing = [i for i in range(expected) if not (out / f"{i}.json").exists()]
            if not missing:
                break
            for i in missing:
                if (out / f"{i}.started").exists():   # died in this case: record it, go on after it
                    tail = (out / f"child-{attempt}.log").read_text(errors="replace")[-1500:]
                    atomic_write_json(out / f"{i}.json", {"case_id": case_ids[i] if case_ids else what, "status": "crashed",
                                                          "message": f"child exited with code {code}\n{tail}"})
                    break
            else:
                tail = (out / f"child-{attempt}.log").read_text(errors="replace")[-1500:]
                for i in missing:
                    atomic_write_json(out / f"{i}.json", {"case_id": case_ids[i] if case_ids else what, "status": "error",
                                                          "message": f"child exited with code {code} before the case\n{tail}"})
                break

    def _sanitized(self, argv: list[str], env: dict[str, str], out: Path) -> tuple[list[str], dict[str, str]]:
        from gpu_memsafety.sanitizer import tool as sanitizer
        found = sanitizer.locate().found
        if found is None:
            raise RuntimeError("compute-sanitizer not found")
        env = {**env, **(getattr(found, "env", {}) or {}), "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
        return sanitizer.memcheck_command(found, tool="memcheck", xml_path=out / "sanitizer.xml", target_argv=argv), env

    # -- parts --------------------------------------------------------------------------------------
    def part_bandwidth(self) -> dict[str, Any]:
        sizes = self.args.sizes_mib
        return self._child("bandwidth", [], sizes_mib=sizes)[0]

    def _selected(self) -> list[tuple[Scenario, Case]]:
        if self.args.case:
            from gpu_memsafety.scenario.registry import find_case
            return [find_case(cid) for cid in self.args.case]
        items = default_cases(self.scenarios)
        if self.args.scenario:
            items = [(s, c) for s, c in items if s.name in self.args.scenario]
        return items

    def part_cases(self) -> dict[str, Any]:
        items = self._selected()
        ids = [c.id for _, c in items]
        self.log(f"{len(ids)} cases: bare, guard, poison")
        inproc = self._child("inproc", ids)
        rows = {r["case_id"]: {"case_id": r["case_id"], "tags": list(c.tags), **_strip(r)} for r, (_, c) in zip(inproc, items)}
        for mode in ("guard_page", "memcheck"):      # each is also the name of its detector
            if mode not in self.args.case_modes:
                for row in rows.values():
                    row[mode] = {"status": "not run", "message": f"--case-modes left out {mode}"}
                continue
            if not self.gpu:
                for row in rows.values():
                    row[mode] = {"status": "not run", "message": f"{mode} needs a CUDA GPU; none found"}
                continue
            timed, skipped = [], []
            for s, c in items:
                (skipped if _expects(s, c, mode) else timed).append(c.id)
            for cid in skipped:
                rows[cid][mode] = {"status": "not timed",
                                   "message": f"{mode} stops this kernel at its out-of-bounds access (its expected finding)"}
            self.log(f"{len(timed)} cases: {mode}")
            try:
                results = self._child(mode, timed, sanitized=(mode == "memcheck")) if timed else []
            except Exception as exc:  # noqa: BLE001
                results = [{"case_id": cid, "status": "error", "message": str(exc)} for cid in timed]
            for r in results:
                rows[r["case_id"]][mode] = r.get(mode) or {"status": r.get("status"), "message": r.get("message", "")}
                if r.get(f"{mode}_bare"):
                    rows[r["case_id"]][f"{mode}_bare"] = r[f"{mode}_bare"]
        for row in rows.values():
            row["ratios"] = _ratios(row)
        return {"cases": list(rows.values()), "reps": self.args.reps}

    def part_cache(self) -> dict[str, Any]:
        """One case per scenario, fresh process each time: empty Triton and CUDA-extension caches, then warm."""
        from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
        picks = []
        for s, c in default_cases(self.scenarios):
            if s.name not in {p[0].name for p in picks} and "smoke" in c.tags:
                if s.name == "planted_oob" and c.params.get("impl") != "cuda" and self.gpu:
                    continue      # the CUDA planted case also exercises the extension build cache
                picks.append((s, c))
        rows = []
        with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp:
            saved = {k: os.environ.get(k) for k in ("TRITON_CACHE_DIR", "GPU_MEMSAFETY_CACHE")}
            os.environ["TRITON_CACHE_DIR"] = str(Path(tmp, "triton"))
            os.environ["GPU_MEMSAFETY_CACHE"] = str(Path(tmp, "ext"))
            try:
                for s, c in track(picks, "bench cache: cold and warm start", unit="cases"):
                    row: dict[str, Any] = {"case_id": c.id}
                    for label in ("cold", "warm"):
                        runner = Runner(RunOptions(mode=MODES["guard"], workdir=self.out / "work" / "cache" / f"{s.name}-{label}",
                                                   gpu_available=self.gpu))
                        t0 = time.perf_counter()
                        result = runner.run([(s, c)])[0]
                        row[label] = {"wall_s": time.perf_counter() - t0, "outcome": result.outcome.label}
                    rows.append(row)
                    self.log(f"cache {c.id}: cold {row['cold']['wall_s']:.1f} s, warm {row['warm']['wall_s']:.1f} s")
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        return {"cases": rows, "note": "wall time of one case in a fresh worker process (guard mode): Python and torch start, "
                                       "kernel compile or cache load, the case. Cold: empty TRITON_CACHE_DIR and GPU_MEMSAFETY_CACHE."}

    def part_batching(self) -> dict[str, Any]:
        from gpu_memsafety.sanitizer import tool as sanitizer
        from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
        mode = MODES[self.args.batch_mode]
        san = sanitizer.locate() if mode.sanitizer else None
        if mode.sanitizer and (not self.gpu or san is None or san.found is None):
            return {"status": "not run", "message": "batched vs per-process memcheck needs a GPU and compute-sanitizer"}
        items = spread_sample(matrix_cases(self.scenarios), self.args.sample)
        opts = dict(mode=mode, gpu_available=self.gpu, sanitizer=san)
        self.log(f"batching: {len(items)} cases, mode {mode.name}, batched per scenario")
        t0 = time.perf_counter()
        batched: dict[str, str] = {}
        groups: dict[str, list[tuple[Scenario, Case]]] = {}
        for s, c in items:
            groups.setdefault(s.name, []).append((s, c))
        processes = 0
        for name, group in groups.items():
            for start in range(0, len(group), self.args.batch_size):   # as the plugin batches: per file, --gpu-memsafety-batch-size
                runner = Runner(RunOptions(workdir=self.out / "work" / "batching" / f"batched-{name}-{start}", **opts))
                batched.update({r.case_id: r.outcome.label for r in runner.run(group[start : start + self.args.batch_size])})
                processes += 1
        batched_s = time.perf_counter() - t0
        self.log(f"batching: batched {batched_s:.1f} s; now one process per case")
        t0 = time.perf_counter()
        single: dict[str, str] = {}
        per_case_s = []
        for i, (s, c) in enumerate(track(items, "bench batching: one process per case", unit="cases")):
            t1 = time.perf_counter()
            runner = Runner(RunOptions(workdir=self.out / "work" / "batching" / f"single-{i:03d}", **opts))
            single.update({r.case_id: r.outcome.label for r in runner.run([(s, c)])})
            per_case_s.append(time.perf_counter() - t1)
        single_s = time.perf_counter() - t0
        disagree = {cid: {"batched": batched.get(cid), "single": single.get(cid)} for cid in single if single[cid] != batched.get(cid)}
        return {"mode": mode.name, "cases": [c.id for _, c in items], "batched_s": batched_s, "single_s": single_s,
                "single_per_case_s": per_case_s, "speedup": single_s / batched_s if batched_s else None,
                "outcomes_batched": batched, "outcomes_single": single, "disagreements": disagree,
                "batched_processes": processes, "batch_size": self.args.batch_size, "single_processes": len(items)}

    # -- scaling --------------------------------------------------------------------------------------
    def _matrix_run(self, name: str, *, workers: int, gpus: list[str] | None, mode: str,
                    extra: list[str] = ()) -> tuple[list[str], dict[str, str], Path]:
        """argv and environment of one `pytest scenarios` run for the scaling part."""
        out = self.out / "scaling" / name
        argv = [sys.executable, "-m", "pytest", str(SCENARIO_DIR), "-p", "gpu_memsafety", "-p", "no:cacheprovider", "-q", "-n", str(workers),
                "--dist", "loadgroup", "--gpu-memsafety-mode", mode, "--gpu-memsafety-report-dir", str(out), *extra, *shlex.split(self.args.scaling_args)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
        if gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        return argv, env, out

    def _timed(self, runs: dict[str, tuple[list[str], dict[str, str], Path]]) -> dict[str, dict[str, Any]]:
        """Start the runs at once, wait for all; each one's wall time, exit code, outcomes and batch timing."""
        from gpu_memsafety.util.child import Child
        t0 = time.perf_counter()
        done: dict[str, dict[str, Any]] = {}
        with contextlib.ExitStack() as stack:
            started = {}
            for name, (argv, env, out) in runs.items():
                self.log(f"scaling {name}: " + " ".join(argv[3:]) + (f" (CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']})"
                                                                        if "CUDA_VISIBLE_DEVICES" in env else ""))
                started[name] = (stack.enter_context(Child(argv, env=env, log=self.out / "scaling" / f"{name}.log")),
                                 out, argv)
            try:
                for name, (child, out, argv) in started.items():
                    child.wait(None)
                    done[name] = {"argv": argv[3:], "exit_code": child.proc.returncode,
                                  "wall_s": time.perf_counter() - t0, **_report_facts(out / "report.json")}
            except BaseException:
                # Ctrl-C, SIGTERM, SIGHUP (util.signals): each run ends like an interrupted `make sanitize` (SIGTERM:
                # it kills its workers and writes its reports), then is killed with its group; none outlives the bench
                for child, _, _ in started.values():
                    child.stop()
                raise
        wall = time.perf_counter() - t0
        for facts in done.values():
            facts["together_wall_s"] = wall
        return done

    def part_scaling(self) -> dict[str, Any]:
        from gpu_memsafety.util.gpus import discover
        from gpu_memsafety.report.merge import merge_reports
        (self.out / "scaling").mkdir(parents=True, exist_ok=True)
        t_part = time.perf_counter()
        forced = self.args.scaling_workers
        devices = [str(g.index) for g in discover().gpus]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            devices = [d.strip() for d in visible.split(",") if d.strip()]
        if not forced and len(devices) < 2:
            return {"status": "not run", "message": f"scaling needs 2 GPUs or more; found {len(devices)}"}
        n = forced or len(devices)
        one = None if forced else devices[:1]
        every = None if forced else devices
        mode = self.args.batch_mode
        result: dict[str, Any] = {"gpus": 0 if forced else n, "workers": n, "mode": mode}
        result["warmup"] = self._timed({"warmup": self._matrix_run("warmup", workers=n, gpus=every, mode="guard")})["warmup"]
        single = self._timed({"one": self._matrix_run("one", workers=1, gpus=one, mode=mode)})["one"]
        many = self._timed({"all": self._matrix_run("all", workers=n, gpus=every, mode=mode)})["all"]
        result.update(one=single, all=many, speedup=_ratio(single["wall_s"], many["wall_s"]),
                      same_outcomes=_same(single, many))
        spent = time.perf_counter() - t_part
        if self.args.scaling_budget_s and spent > self.args.scaling_budget_s:
            result["shards"] = {"status": "not run", "message": f"--scaling-budget-s {self.args.scaling_budget_s} s spent "
                                                                f"({spent:.0f} s) before the shards comparison"}
            return result
        group = f"bench-{os.getpid()}-{int(time.time())}"      # the two shards are one run (the merge checks it)
        shard_runs = {f"shard{k}": self._matrix_run(f"shard{k}", workers=1, gpus=None if forced else [devices[(k - 1) % n]],
                                                    mode=mode, extra=["--gpu-memsafety-shard", f"{k}/2", "--gpu-memsafety-run-group", group])
                      for k in (1, 2)}
        shards = self._timed(shard_runs)
        reports = [self.out / "scaling" / name / "report.json" for name in shard_runs]
        merged: dict[str, Any] = {}
        try:
            doc = merge_reports(reports)
            merged = {"outcomes": {c["id"]: c["outcome"] for c in doc["cases"]}, "missing_shards": doc["missing_shards"],
                      "status": doc["summary"]["status"], "shards": doc["shards"]}
        except Exception as exc:  # noqa: BLE001 - a shard that wrote no report: say so
            merged = {"error": f"{type(exc).__name__}: {exc}"}
        together = max((r["together_wall_s"] for r in shards.values()), default=None)
        result["shards"] = {"count": 2, "runs": shards, "wall_s": together, "merged": merged,
                            "vs_one_run": _ratio(many["wall_s"], together),
                            "same_outcomes": merged.get("outcomes") == many.get("outcomes") and bool(many.get("outcomes"))}
        return result

    def part_matrix(self) -> dict[str, Any]:
        out = self.out / "matrix"
        argv = [sys.executable, "-m", "pytest", str(SCENARIO_DIR), "-p", "gpu_memsafety", "-p", "no:cacheprovider", "-n", "auto", "--dist", "loadgroup",
                "--gpu-memsafety-mode", self.args.batch_mode, "--gpu-memsafety-report-dir", str(out), "-q"]
        self.log("matrix: " + " ".join(argv[1:]))
        t0 = time.perf_counter()
        with open(self.out / "matrix.log", "wb") as log:
            code = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
        seconds = time.perf_counter() - t0
        counts: dict[str, int] = {}
        report = out / "report.json"
        cases = 0
        if report.exists():
            doc = jsonio.loads(report.read_text())
            for r in doc.get("cases", []):
                counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
                cases += 1
        return {"argv": argv[1:], "exit_code": code, "wall_s": seconds, "cases": cases, "outcomes": counts}


def _report_facts(path: Path) -> dict[str, Any]:
    """Outcomes per case and where the time went (batch start-up vs cases) from one run's report.json."""
    if not path.exists():
        return {"outcomes": {}, "problem": f"{path} was not written"}
    doc = jsonio.loads(path.read_text())
    batches = doc.get("run", {}).get("batches") or []
    procs = [p for b in batches for p in b.get("processes", [])]
    total = lambda key: round(sum(p.get(key) or 0.0 for p in procs), 3)  # noqa: E731
    return {"outcomes": {c["id"]: c["outcome"] for c in doc.get("cases", [])}, "status": doc.get("summary", {}).get("status"),
            "cases": len(doc.get("cases", [])), "batches": len(batches), "processes": len(procs),
            "startup_s": total("startup_s"), "cases_s": total("run_s"), "exit_s": total("exit_s"),
            "slowest_batch_s": max((b.get("wall_s") or 0.0 for b in batches), default=None)}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a.get("outcomes")) and a.get("outcomes") == b.get("outcomes")


def _expects(scenario: Scenario, case: Case, detector: str) -> bool:
    return any(detector in f.detectors for f in scenario.expect(case).findings)


def _strip(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in ("case_id",)}


def _ratios(row: dict[str, Any]) -> dict[str, Any]:
    bare = (row.get("bare") or {}).get("median_ms")
    out: dict[str, Any] = {}
    if not bare:
        return out
    for key in ("guard_kernel", "guard_launch", "guard_launch_graph", "poison", "guard_page", "memcheck"):
        ms = (row.get(key) or {}).get("median_ms")
        # guard-page is timed against a bare run interleaved with it in its own process
        base = (row.get(f"{key}_bare") or {}).get("median_ms") or bare
        if ms:
            out[key] = ms / base
    gpu = row.get("gpu_time") or {}
    for key in ("guard_launch", "guard_launch_graph"):
        if (gpu.get("bare") or {}).get("gpu_us") and (gpu.get(key) or {}).get("gpu_us"):
            out[f"{key}_gpu"] = gpu[key]["gpu_us"] / gpu["bare"]["gpu_us"]
    return out


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
