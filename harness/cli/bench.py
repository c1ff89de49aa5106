"""`python -m gpu_memsafety bench`: what each detector costs, measured, with the issue's targets checked.

    python -m gpu_memsafety bench --out reports/bench [--parts bandwidth,cases,cache,batching,matrix]

Parts (each one's results are written to bench.json as soon as it ends, so a crash loses nothing done):

- bandwidth: device-to-device copy bandwidth and guard-verification throughput on the same buffers.
- cases: per case, the bare kernel (production allocations, caching allocator on), the kernel with guard
  markers (launch, then one pass that counts changed marker words on the device and re-arms them; elapsed
  time and CUPTI GPU time), allocation and fill,
  guard-page mode, poison mode (1 + one launch per buffer) and the kernel under memcheck. Timings are
  CUDA events around relaunches of the same kernel on the same buffers (RunInfo.relaunch), median of reps.
  Each mode runs in its own child process; a child that dies is restarted after the case that killed it.
- cache: one case per scenario in a fresh process with empty Triton and CUDA-extension caches, then again
  with the caches warm (what a second run or a second xdist worker pays).
- batching: the same cases under `make sanitize`'s mode (memcheck + guards) batched in one sanitized
  process per scenario, then one sanitized process per case; wall times and whether the outcomes agree.
- matrix: the wall time of `pytest scenarios -n auto --dist loadgroup --mode both` (what `make sanitize` runs).
- scaling: the same matrix on one GPU and on all the machine's GPUs in one bench run, after a warm-up pass
  (guard mode, every GPU) that fills the Triton and CUDA-extension caches; the speedup, and whether both runs
  gave every case the same outcome. Then the matrix as 2 shards run at once on one machine (one GPU each,
  `--shard k/2`), merged with `harness merge`, against the single run on all GPUs. Needs 2 GPUs or more,
  else "not run" (`--scaling-workers N` runs it with N CPU workers instead, to test the plumbing).

Results: bench.json (schema: this docstring and the keys written below) and bench.md (tables).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

from gpu_memsafety.util.fsutil import atomic_write_json, atomic_write_text
from gpu_memsafety.util.progress import track, watch
from gpu_memsafety.scenario.registry import all_scenarios
from gpu_memsafety.util.paths import SCENARIO_DIR, inherited_pythonpath
from gpu_memsafety.scenario.definition import Case, Scenario

PARTS = ("bandwidth", "cases", "cache", "batching", "matrix", "scaling")
MIB = 1 << 20
# Targets from the performance issue, as ratios measured in one run.
TARGETS = {
    "guard_overhead_gpt_oss": 0.05,     # guard markers add at most 5% to the bare kernel on gpt-oss-sized cases
    "check_vs_copy": 0.50,              # verification reaches at least 50% of copy bandwidth, buffers >= 64 MiB
    "batched_speedup": 3.0,             # batched memcheck at least 3x faster than one process per case
    "guard_page_ratio": 1.2,            # guard-page mode within 1.2x the bare kernel
    "scaling_per_gpu": 0.9,             # N GPUs run the matrix at least 0.9 x N times faster than one (1.8x on 2)
}


# ------------------------------------------------------------------------------------------- selection

def default_cases(scenarios: dict[str, Scenario]) -> list[tuple[Scenario, Case]]:
    """gpt-oss-sized and smoke cases of every scenario (isolated variants excluded: they cannot batch)."""
    return [(s, c) for s in scenarios.values() for c in s.build()
            if {"gpt-oss", "smoke"} & set(c.tags) and not s.isolated(c)]


def matrix_cases(scenarios: dict[str, Scenario]) -> list[tuple[Scenario, Case]]:
    return [(s, c) for s in scenarios.values() for c in s.build()]


def spread_sample(items: list[tuple[Scenario, Case]], n: int) -> list[tuple[Scenario, Case]]:
    """n non-isolated cases spread evenly over the matrix, every scenario represented when n allows."""
    pool = [(s, c) for s, c in items if not s.isolated(c)]
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


# --------------------------------------------------------------------------------------------- timing

def time_calls(fn: Callable[[], Any], *, reps: int, warmup: int, device: Any) -> dict[str, Any]:
    """Median and min per call: CUDA events around each call (no sync between calls) on a GPU, else wall."""
    import torch
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for start, end in events:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize(device)
        samples = [start.elapsed_time(end) for start, end in events]
    else:
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
    return {**_stats(samples, device), "samples": samples}


def _stats(samples: list[float], device: Any) -> dict[str, Any]:
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "reps": len(samples),
            "clock": "cuda events" if device.type == "cuda" else "wall"}


def time_interleaved(fns: dict[str, Callable[[], Any]], *, reps: int, warmup: int, device: Any,
                     rounds: int = 4) -> dict[str, dict[str, Any]]:
    """Time several variants in alternating rounds (A B C A B C ...) so that clock and load drift hits them
    alike; each variant's median and min over all its calls."""
    per_round = max(1, reps // rounds)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
    for _ in range(rounds):
        for name, fn in fns.items():
            t = time_calls(fn, reps=per_round, warmup=0, device=device)
            samples[name].extend(t.pop("samples"))
    return {name: {**_stats(v, device), "interleaved_with": sorted(set(fns) - {name})} for name, v in samples.items()}


def gpu_busy(fn: Callable[[], Any], *, reps: int, device: Any) -> dict[str, Any] | None:
    """GPU time per call: the summed durations of every kernel, memcpy and memset the calls put on the
    device (CUPTI, through torch.profiler), divided by the calls. None off the GPU."""
    import torch
    if device.type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize(device)
    device_events = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    total_us = sum(e.time_range.elapsed_us() for e in device_events)
    names = sorted({e.name for e in device_events})
    return {"gpu_us": total_us / reps, "device_ops_per_call": len(device_events) / reps, "reps": reps,
            "ops": names[:12], "clock": "CUPTI device durations"}


def wall(fn: Callable[[], Any], device: Any) -> float:
    """Seconds for fn including a device sync."""
    import torch
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------------ child: measuring

class Child:
    """`python -m gpu_memsafety.cli.bench child JOB.json`: measures one part for each case, one result file per case.

    Built on the engine's own worker (gpu_memsafety.engine.worker.Worker, guard mode): its start marks, its contexts and
    arenas (kept for the life of the process, buffer map on disk before a launch), its device, its exception
    classes and its exit code for a lost CUDA context."""

    def __init__(self, job: dict[str, Any]) -> None:
        import torch

        from gpu_memsafety.engine import job as J
        from gpu_memsafety.placement import layout as L
        from gpu_memsafety.engine.worker import Worker
        self.torch = torch
        self.job = job
        self.out = Path(job["out_dir"])
        self.worker = Worker(J.Job(cases=(), out_dir=str(self.out), mode="guard", watch_placement=L.GUARDED,
                                   seed=int(job.get("seed", 0))))
        self.device = self.worker.device
        self.reps = int(job.get("reps", 20))
        self.warmup = int(job.get("warmup", 3))
        self.keep = self.worker.keep
        self._index, self._case_id = 0, str(job["what"])

    def run(self) -> int:
        what = self.job["what"]
        if what == "bandwidth":
            atomic_write_json(self.out / "0.json", self._guarded(lambda: self.bandwidth(self.job["sizes_mib"])))
            return 0
        from gpu_memsafety.scenario.registry import find_case
        for index, case_id in enumerate(self.job["cases"]):
            if (self.out / f"{index}.json").exists():
                continue                         # done by an earlier child of this part
            self.worker.begin(index)
            self._index, self._case_id = index, case_id
            scenario, case = find_case(case_id)
            measure = {"inproc": self.inproc, "guard_page": self.guard_page, "memcheck": self.memcheck}[what]
            atomic_write_json(self.out / f"{index}.json", {"case_id": case_id, **self._guarded(lambda: measure(scenario, case))})
        return 0

    def _guarded(self, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return {"status": "ok", **fn()}
        except Exception as exc:  # noqa: BLE001 - a case that cannot be measured says why
            from gpu_memsafety.engine.worker import CONTEXT_LOST, classify
            result = {"status": classify(exc), "message": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc(limit=8)}
            if result["status"] == "fault":
                # The CUDA context is gone: record this case and leave; the parent restarts after it.
                atomic_write_json(self.out / f"{self._index}.json", {"case_id": self._case_id, **result})
                sys.stdout.flush()
                os._exit(CONTEXT_LOST)
            return result

    # -- contexts -----------------------------------------------------------------------------------
    def _ctx(self, *, production: bool = False, placement: str | None = None) -> Any:
        return self.worker.context(None, production=production, watch_placement=placement)

    def _adapter(self, scenario: Scenario) -> Callable[..., Any]:
        return scenario.resolve_adapter()

    def _time(self, fn: Callable[[], Any], reps: int | None = None, warmup: int | None = None) -> dict[str, Any]:
        return time_calls(fn, reps=reps or self.reps, warmup=self.warmup if warmup is None else warmup, device=self.device)

    @staticmethod
    def _relaunch(info: Any) -> Callable[[], Any]:
        if info.relaunch is None:
            raise RuntimeError(f"adapter for {info.kernel} gives no relaunch hook: its kernel cannot be timed alone")
        return info.relaunch

    # -- parts --------------------------------------------------------------------------------------
    def inproc(self, scenario: Scenario, case: Case) -> dict[str, Any]:
        """Bare kernel, guard markers (kernel alone, and kernel + on-device check-and-rearm), poison cycle."""
        torch = self.torch
        adapter = self._adapter(scenario)
        bare_info = adapter(case, self._ctx(production=True))
        ctx = self._ctx()
        info = adapter(case, ctx)
        arena, relaunch = ctx.arena, self._relaunch(info)
        counts: list[Any] = []

        def guarded_launch() -> None:
            # Markers armed at allocation; each launch is followed by one pass that checks and re-arms them.
            relaunch()
            counts.append(arena.check_and_rearm())

        graphed, graph_problem = _graphed(arena)         # the same pass, replayed from a CUDA graph

        def guarded_launch_graph() -> None:
            relaunch()
            counts.append(graphed())

        variants = {"bare": self._relaunch(bare_info), "guard_kernel": relaunch, "guard_launch": guarded_launch}
        if self.device.type == "cuda" and graphed is not None:   # off the GPU: no graph, the same call as guard_launch
            variants["guard_launch_graph"] = guarded_launch_graph
        timed = time_interleaved(variants, reps=self.reps, warmup=self.warmup, device=self.device)
        bare, kernel, launch = timed["bare"], timed["guard_kernel"], timed["guard_launch"]
        gpu = {"bare": gpu_busy(self._relaunch(bare_info), reps=self.reps, device=self.device),
               "guard_launch": gpu_busy(guarded_launch, reps=self.reps, device=self.device),
               "guard_launch_graph": gpu_busy(guarded_launch_graph, reps=self.reps, device=self.device) if graphed else None}
        del bare_info
        changed = sum(int(c.sum()) for c in counts if c is not None)
        alloc_fill = self._alloc_cost(arena)
        poison = self._poison_cycle(ctx, info)
        return {"kernel": info.kernel, "arch": ctx.arch(), "buffers": len(arena.buffers),
                "guarded_bytes": sum(b.layout.total for b in arena.buffers.values()),
                "watched": sorted(ctx.watched), "bare": bare, "guard_kernel": kernel, "guard_launch": launch,
                "guard_launch_graph": timed.get("guard_launch_graph") or {"status": graph_problem or "not run"},
                "marker_spans": _span_count(arena),
                "guard_changed_words": changed, **alloc_fill, "poison": poison, "gpu_time": gpu,
                "torch_cuda_caching_allocator": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") != "1",
                "device": str(self.device), "torch": torch.__version__}

    def _alloc_cost(self, arena: Any) -> dict[str, Any]:
        """Allocating (and filling) the case's guarded buffers again, against plain allocations of the tensors."""
        from gpu_memsafety.placement.guard import Arena
        layouts = [(b.name, b.layout) for b in arena.buffers.values()]
        fresh: list[Any] = []

        def guarded() -> None:
            a = Arena(self.device)
            for name, lay in layouts:
                a.allocate(name, lay)       # exactly the case's layouts
            fresh.append(a)

        def plain() -> None:
            fresh.append([self.torch.empty(lay.nbytes, dtype=self.torch.uint8, device=self.device) for _, lay in layouts])

        samples_g = [wall(guarded, self.device) * 1e3 for _ in range(5)]
        fresh.clear()
        samples_p = [wall(plain, self.device) * 1e3 for _ in range(5)]
        fresh.clear()
        return {"alloc_fill_ms": statistics.median(samples_g), "plain_alloc_ms": statistics.median(samples_p)}

    def _poison_cycle(self, ctx: Any, info: Any) -> dict[str, Any]:
        """One poison-mode case on the same buffers: baseline pattern, then each buffer's guards in the other
        pattern (every buffer, watched ones first, as poison mode does), each followed by the launch and an
        on-device comparison of the outputs."""
        from gpu_memsafety.engine.worker import POISON_PATTERNS
        torch = self.torch
        arena, relaunch = ctx.arena, self._relaunch(info)
        base, poison = POISON_PATTERNS[:2]
        order = sorted(ctx.watched) + sorted(set(arena.buffers) - ctx.watched)

        def outputs(returned: Any) -> dict[str, Any]:
            if returned is None:
                return info.outputs
            if isinstance(returned, dict):
                return returned
            return {next(iter(info.outputs), "out"): returned}

        def set_markers(poisoned: str | None) -> None:
            for name, buf in arena.buffers.items():
                buf.marker = poison if name == poisoned else base
            arena.fill_markers()

        def cycle() -> None:
            set_markers(None)
            baseline = {k: v.clone() for k, v in outputs(relaunch()).items()}
            for name in order:
                set_markers(name)
                after = outputs(relaunch())
                for key, ref in baseline.items():
                    torch.ne(after[key].float(), ref.float()).any()

        timing = self._time(cycle, reps=max(3, self.reps // 4), warmup=1)
        set_markers(None)
        return {**timing, "launches": 1 + len(order)}

    def guard_page(self, scenario: Scenario, case: Case) -> dict[str, Any]:
        from gpu_memsafety.placement import layout as L
        if self.device.type != "cuda":
            raise _unsupported("guard-page mode needs a CUDA GPU")
        adapter = self._adapter(scenario)
        bare_info = adapter(case, self._ctx(production=True))
        ctx = self._ctx(placement=L.GUARD_PAGE_BACK)
        info = adapter(case, ctx)
        backends = sorted({b.backend for b in ctx.arena.buffers.values() if b.name in ctx.covered})
        timed = time_interleaved({"bare": self._relaunch(bare_info), "guard_page": self._relaunch(info)},
                                 reps=self.reps, warmup=self.warmup, device=self.device)
        return {"kernel": info.kernel, "guard_page": timed["guard_page"], "guard_page_bare": timed["bare"],
                "covered_backends": backends}

    def memcheck(self, scenario: Scenario, case: Case) -> dict[str, Any]:
        from gpu_memsafety.placement import layout as L
        ctx = self._ctx(placement=L.EXACT)
        info = self._adapter(scenario)(case, ctx)
        return {"kernel": info.kernel, "memcheck": self._time(self._relaunch(info), reps=max(3, self.reps // 5), warmup=1)}

    def bandwidth(self, sizes_mib: Iterable[int]) -> dict[str, Any]:
        """Copy bandwidth (bytes read + written per second) and verification throughput (checked bytes per
        second) on the same sizes: a buffer whose every byte holds markers (unused rows), and row padding."""
        rows_out = []
        for mib in sizes_mib:
            rows_out.append(self._bandwidth_at(int(mib)))
            if self.device.type == "cuda":
                self.torch.cuda.empty_cache()
        return {"device": str(self.device), "sizes": rows_out,
                "checker": "triton span table" if self.device.type == "cuda" else "torch ops",
                "note": "copy GB/s counts bytes read + written; check/verify/fill count the marker bytes (each read or "
                        "written once). check = Arena.changed_counts (on the device, no sync); verify = Arena.verify on a "
                        "clean buffer (check + one host sync); torch ops = the CPU path's word compares, for comparison"}

    def _copy_time(self, size: int) -> dict[str, Any]:
        src = self.torch.empty(size, dtype=self.torch.uint8, device=self.device).fill_(1)
        dst = self.torch.empty_like(src)
        return self._time(lambda: dst.copy_(src))

    def _marker_times(self, size: int) -> dict[str, Any]:
        from gpu_memsafety.placement.guard import Arena
        full = Arena(self.device, guard=1024)
        full.rows("all_markers", rows=size // 4096, row_bytes=4096, row_stride=4096, used_rows=0)
        times = {"check_all_markers": self._time(full.changed_counts),
                 "verify_all_markers": self._time(full.verify, reps=max(3, self.reps // 2)),
                 "fill_all_markers": self._time(full.fill_markers)}
        graphed, _ = _graphed(full)
        if self.device.type == "cuda" and graphed is not None:
            times["check_all_markers_graph"] = self._time(graphed)
        full.checker = "torch"
        times["check_all_markers_torch_ops"] = self._time(full.changed_counts)
        padded = Arena(self.device, guard=1024)
        padded.rows("padded", rows=size // 80, row_bytes=72, row_stride=80, used_rows=size // 80)
        times["check_padded_rows"] = self._time(padded.changed_counts)
        return times

    def _bandwidth_at(self, mib: int) -> dict[str, Any]:
        size = mib * MIB
        copy = self._copy_time(size)
        t = self._marker_times(size)

        def gbps(nbytes: int, timing: dict[str, Any]) -> float:
            return nbytes / (timing["median_ms"] * 1e-3) / 1e9

        row: dict[str, Any] = {"size_mib": mib, "copy": copy, "copy_GBps": gbps(2 * size, copy), **t}
        for key in ("check_all_markers", "check_all_markers_graph", "verify_all_markers", "fill_all_markers",
                    "check_all_markers_torch_ops"):
            if key in t:
                row[f"{key}_GBps"] = gbps(size, t[key])
        row["check_padded_rows_buffer_GBps"] = gbps(size, t["check_padded_rows"])
        row["verify_vs_copy"] = row["verify_all_markers_GBps"] / row["copy_GBps"]
        row["check_vs_copy"] = row["check_all_markers_GBps"] / row["copy_GBps"]
        if "check_all_markers_graph_GBps" in row:
            row["check_graph_vs_copy"] = row["check_all_markers_graph_GBps"] / row["copy_GBps"]
        return row


def _graphed(arena: Any) -> tuple[Callable[[], Any] | None, str]:
    """The arena's check-and-rearm captured in a CUDA graph, or None and why capture failed (the other
    measurements go on without it)."""
    try:
        return arena.graphed_check_and_rearm(), ""
    except Exception as exc:  # noqa: BLE001 - a graph that cannot be captured is reported, not fatal
        return None, f"CUDA graph capture failed: {type(exc).__name__}: {exc}"


def _span_count(arena: Any) -> int:
    """Marker spans the check covers (one launch checks them all)."""
    return sum(len(list(buf.marker_views())) for buf in arena.buffers.values())


def _unsupported(message: str) -> Exception:
    from gpu_memsafety.errors import Unsupported
    return Unsupported(message)


def child_main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gpu_memsafety.cli.bench child JOB.json", file=sys.stderr)
        return 2
    return Child(json.loads(Path(argv[0]).read_text())).run()


# ------------------------------------------------------------------------------------ parent: the parts

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
        atomic_write_text(self.out / "bench.md", render_markdown(self.doc))

    def run(self) -> int:
        from gpu_memsafety.cli.env import discover, environment
        disc = discover()
        self.gpu = bool(disc.gpus)
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
        print(render_markdown(self.doc))
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
            env["TRITON_INTERPRET"] = "1"
        if sanitized:
            argv, env = self._sanitized(argv, env, out)
        expected = max(1, len(case_ids))
        with watch(f"bench {what}", expected, lambda: sum((out / f"{i}.json").exists() for i in range(expected)),
                   unit="cases"):
            self._attempts(argv, env, out, what, case_ids, expected)
        return [json.loads((out / f"{i}.json").read_text()) for i in range(expected)]

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
            for start in range(0, len(group), self.args.batch_size):   # as the plugin batches: per file, --batch-size
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
                "--dist", "loadgroup", "--mode", mode, "--report-dir", str(out), *extra, *shlex.split(self.args.scaling_args)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
        if gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        return argv, env, out

    def _timed(self, runs: dict[str, tuple[list[str], dict[str, str], Path]]) -> dict[str, dict[str, Any]]:
        """Start the runs at once, wait for all; each one's wall time, exit code, outcomes and batch timing."""
        t0 = time.perf_counter()
        procs = {}
        for name, (argv, env, out) in runs.items():
            self.log(f"scaling {name}: " + " ".join(argv[3:]) + (f" (CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']})"
                                                                    if "CUDA_VISIBLE_DEVICES" in env else ""))
            log = open(self.out / "scaling" / f"{name}.log", "wb")
            procs[name] = (subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL), log, out, argv)
        done: dict[str, dict[str, Any]] = {}
        for name, (proc, log, out, argv) in procs.items():
            code = proc.wait()
            log.close()
            done[name] = {"argv": argv[3:], "exit_code": code, "wall_s": time.perf_counter() - t0,
                          **_report_facts(out / "report.json")}
        wall = time.perf_counter() - t0
        for facts in done.values():
            facts["together_wall_s"] = wall
        return done

    def part_scaling(self) -> dict[str, Any]:
        from gpu_memsafety.cli.env import discover
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
        shard_runs = {f"shard{k}": self._matrix_run(f"shard{k}", workers=1, gpus=None if forced else [devices[(k - 1) % n]],
                                                    mode=mode, extra=["--shard", f"{k}/2"]) for k in (1, 2)}
        shards = self._timed(shard_runs)
        reports = [self.out / "scaling" / name / "report.json" for name in shard_runs]
        merged: dict[str, Any] = {}
        try:
            doc = merge_reports(reports)
            merged = {"outcomes": {c["id"]: c["outcome"] for c in doc["cases"]}, "missing_shards": doc["missing_shards"]}
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
                "--mode", self.args.batch_mode, "--report-dir", str(out), "-q"]
        self.log("matrix: " + " ".join(argv[1:]))
        t0 = time.perf_counter()
        with open(self.out / "matrix.log", "wb") as log:
            code = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
        seconds = time.perf_counter() - t0
        counts: dict[str, int] = {}
        report = out / "report.json"
        cases = 0
        if report.exists():
            doc = json.loads(report.read_text())
            for r in doc.get("cases", []):
                counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
                cases += 1
        return {"argv": argv[1:], "exit_code": code, "wall_s": seconds, "cases": cases, "outcomes": counts}


def _report_facts(path: Path) -> dict[str, Any]:
    """Outcomes per case and where the time went (batch start-up vs cases) from one run's report.json."""
    if not path.exists():
        return {"outcomes": {}, "problem": f"{path} was not written"}
    doc = json.loads(path.read_text())
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


# ------------------------------------------------------------------------------------------- targets

def evaluate_targets(parts: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target: measured value and met / missed, or 'not measured' with the reason. Never a silent pass."""
    targets = []
    cases = (parts.get("cases") or {}).get("cases") or []
    gpt = [r for r in cases if "gpt-oss" in r.get("tags", []) and "guard_launch_gpu" in r.get("ratios", {})]
    targets.append(_target("guard markers (kernel + check-and-rearm) vs bare kernel, GPU time, gpt-oss-sized cases, worst case",
                           "<= 1.05x", max((r["ratios"]["guard_launch_gpu"] for r in gpt), default=None),
                           lambda v: v <= 1 + TARGETS["guard_overhead_gpt_oss"], "no gpt-oss case was timed on a GPU"))
    gpt_wall = [r for r in cases if "gpt-oss" in r.get("tags", []) and "guard_launch" in r.get("ratios", {})]
    targets.append(_target("the same, elapsed per launch (CUDA events: includes the CPU cost of launching)",
                           "<= 1.05x", max((r["ratios"]["guard_launch"] for r in gpt_wall), default=None),
                           lambda v: v <= 1 + TARGETS["guard_overhead_gpt_oss"], "no gpt-oss case was timed"))
    for key, how in (("guard_launch_graph_gpu", "GPU time"), ("guard_launch_graph", "elapsed per launch")):
        rows = [r["ratios"][key] for r in cases if "gpt-oss" in r.get("tags", []) and key in r.get("ratios", {})]
        targets.append(_target(f"the same with the check-and-rearm replayed from a CUDA graph, {how}", "<= 1.05x",
                               max(rows, default=None), lambda v: v <= 1 + TARGETS["guard_overhead_gpt_oss"],
                               "no gpt-oss case was timed on a GPU"))
    bw = [s for s in (parts.get("bandwidth") or {}).get("sizes", []) if s["size_mib"] >= 64]
    targets.append(_target("guard verification (device check, pipelined like the copy) vs copy bandwidth, buffers >= 64 MiB, worst size", ">= 0.50",
                           min((s["check_vs_copy"] for s in bw), default=None),
                           lambda v: v >= TARGETS["check_vs_copy"], "no buffer of 64 MiB or more was measured"))
    targets.append(_target("the same, the check replayed from a CUDA graph", ">= 0.50",
                           min((s["check_graph_vs_copy"] for s in bw if "check_graph_vs_copy" in s), default=None),
                           lambda v: v >= TARGETS["check_vs_copy"], "no buffer of 64 MiB or more was measured"))
    batching = parts.get("batching") or {}
    targets.append(_target("batched sanitized run vs one sanitized process per case (same cases, same run)", ">= 3.0x",
                           batching.get("speedup"), lambda v: v >= TARGETS["batched_speedup"],
                           batching.get("message", "batching part not run")))
    scaling = parts.get("scaling") or {}
    n = scaling.get("gpus") or 0
    speedup = scaling.get("speedup") if n >= 2 and scaling.get("same_outcomes") else None
    why = scaling.get("message") or ("the runs on 1 and on all GPUs gave different outcomes" if scaling.get("speedup") else
                                     "scaling part not run on 2 GPUs or more")
    targets.append(_target(f"default matrix on all GPUs vs 1 GPU, warm caches, same outcomes ({n or '-'} GPUs)",
                           f">= {TARGETS['scaling_per_gpu'] * max(n, 2):.1f}x", speedup,
                           lambda v: v >= TARGETS["scaling_per_gpu"] * max(n, 2), why))
    gp = [r["ratios"]["guard_page"] for r in cases if "guard_page" in r.get("ratios", {})]
    targets.append(_target("guard-page mode vs bare kernel, worst case timed", "<= 1.2x", max(gp, default=None),
                           lambda v: v <= TARGETS["guard_page_ratio"], "no case was timed in guard-page mode"))
    return targets


def _target(name: str, goal: str, value: float | None, ok: Callable[[float], bool], why_missing: str) -> dict[str, Any]:
    if value is None:
        return {"target": name, "goal": goal, "measured": None, "status": "not measured", "why": why_missing}
    return {"target": name, "goal": goal, "measured": value, "status": "met" if ok(value) else "missed"}


# ------------------------------------------------------------------------------------------- markdown

def _ms(t: Any) -> str:
    if isinstance(t, dict) and t.get("median_ms") is not None:
        v = t["median_ms"]
        return f"{v * 1e3:.1f} us" if v < 1 else f"{v:.2f} ms"
    if isinstance(t, dict) and t.get("status"):
        return str(t["status"])
    return "-"


def _gpu(row: dict[str, Any], key: str = "guard_launch") -> str:
    gpu = row.get("gpu_time") or {}
    bare, guarded = (gpu.get("bare") or {}).get("gpu_us"), (gpu.get(key) or {}).get("gpu_us")
    return f"{bare:.1f} / {guarded:.1f} us" if bare and guarded else "-"


def _x(v: Any) -> str:
    return f"{v:.2f}x" if isinstance(v, (int, float)) else "-"


def render_markdown(doc: dict[str, Any]) -> str:
    env = doc.get("environment", {})
    gpus = ", ".join(f"{g['name']} ({g['arch']})" for g in env.get("gpus", [])) or "no GPU"
    lines = [f"# Benchmark ({doc.get('started', '')})", "", f"GPU: {gpus}; torch {env.get('torch')}, triton {env.get('triton')}, "
             f"compute-sanitizer {env.get('compute_sanitizer', {}).get('version', 'none')}", "", "## Targets", "",
             "| target | goal | measured | status |", "|---|---|---|---|"]
    for t in doc.get("targets", []):
        measured = "-" if t["measured"] is None else f"{t['measured']:.3f}"
        lines.append(f"| {t['target']} | {t['goal']} | {measured} | {t['status']}{': ' + t['why'] if t.get('why') else ''} |")
    parts = doc.get("parts", {})
    for name, part in parts.items():
        if part.get("status") in ("error", "not run"):
            lines += ["", f"## {name}: {part['status']}", "", "```", part.get("message", ""), "```"]
    bw = parts.get("bandwidth", {})
    if bw.get("sizes"):
        lines += ["", "## Guard verification vs copy bandwidth", "", bw.get("note", ""), "",
                  "| MiB | copy GB/s | check (device) GB/s | check, CUDA graph GB/s | verify (with sync) GB/s | fill GB/s | check, torch ops GB/s | padded rows 72/80, buffer GB/s | check / copy | graph / copy | verify / copy |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for s in bw["sizes"]:
            lines.append(f"| {s['size_mib']} | {s['copy_GBps']:.0f} | {s['check_all_markers_GBps']:.0f} | "
                         f"{s.get('check_all_markers_graph_GBps', 0):.0f} | "
                         f"{s['verify_all_markers_GBps']:.0f} | {s.get('fill_all_markers_GBps', 0):.0f} | "
                         f"{s.get('check_all_markers_torch_ops_GBps', 0):.0f} | {s['check_padded_rows_buffer_GBps']:.0f} | {s.get('check_vs_copy', 0):.2f} | {s.get('check_graph_vs_copy', 0):.2f} | {s['verify_vs_copy']:.2f} |")
    cases = parts.get("cases", {}).get("cases", [])
    if cases:
        lines += ["", "## Per case (median per launch; ratios to the bare kernel)", "",
                  "| case | bare | guard kernel | guard kernel + check-and-rearm | the same, check from a CUDA graph | GPU time: bare / guarded | GPU time, graph | alloc+fill (plain alloc) | guard-page | poison cycle | memcheck |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in cases:
            if r.get("status") != "ok":
                lines.append(f"| {r['case_id']} | {r.get('status')}: {r.get('message', '')[:80]} | | | | | | | | | |")
                continue
            q = r.get("ratios", {})
            lines.append(f"| {r['case_id']} | {_ms(r.get('bare'))} | {_ms(r.get('guard_kernel'))} ({_x(q.get('guard_kernel'))}) | "
                         f"{_ms(r.get('guard_launch'))} ({_x(q.get('guard_launch'))}) | "
                         f"{_ms(r.get('guard_launch_graph'))} ({_x(q.get('guard_launch_graph'))}) | {_gpu(r)} ({_x(q.get('guard_launch_gpu'))}) | "
                         f"{_gpu(r, 'guard_launch_graph')} ({_x(q.get('guard_launch_graph_gpu'))}) | "
                         f"{r.get('alloc_fill_ms', 0):.2f} ms "
                         f"({r.get('plain_alloc_ms', 0):.2f} ms) | {_ms(r.get('guard_page'))} ({_x(q.get('guard_page'))}) | "
                         f"{_ms(r.get('poison'))} ({_x(q.get('poison'))}) | {_ms(r.get('memcheck'))} ({_x(q.get('memcheck'))}) |")
    cache = parts.get("cache", {}).get("cases", [])
    if cache:
        lines += ["", "## Compiled-kernel caches (one case, fresh process)", "", "| case | cold | warm |", "|---|---|---|"]
        for r in cache:
            lines.append(f"| {r['case_id']} | {r['cold']['wall_s']:.1f} s | {r['warm']['wall_s']:.1f} s |")
    b = parts.get("batching", {})
    if b.get("speedup"):
        lines += ["", f"## Batched vs one process per case ({b['mode']}, {len(b['cases'])} cases)", "",
                  f"batched ({b['batched_processes']} processes): {b['batched_s']:.1f} s; one process per case: "
                  f"{b['single_s']:.1f} s ({statistics.mean(b['single_per_case_s']):.1f} s per case); speedup {b['speedup']:.2f}x; "
                  f"outcome disagreements: {len(b['disagreements'])}"]
    sc = parts.get("scaling", {})
    if sc.get("one"):
        lines += ["", f"## Scaling: the matrix on 1 and on {sc['workers']} {'GPUs' if sc['gpus'] else 'CPU workers'} "
                  f"(mode {sc['mode']}, warm caches)", "",
                  "| run | wall | batches | worker processes | start-up (sum) | cases (sum) | exit (sum) | slowest batch | status |",
                  "|---|---|---|---|---|---|---|---|---|"]
        rows = [("warm-up (guard)", sc.get("warmup") or {}), ("1 GPU", sc["one"]), (f"{sc['workers']} GPUs", sc["all"])]
        rows += [(f"shard {k}/2 (1 GPU each, at once)", r) for k, r in enumerate((sc.get("shards") or {}).get("runs", {}).values(), 1)]
        for label, r in rows:
            lines.append(f"| {label} | {r.get('wall_s', 0):.1f} s | {r.get('batches', '-')} | {r.get('processes', '-')} | "
                         f"{r.get('startup_s', 0):.1f} s | {r.get('cases_s', 0):.1f} s | {r.get('exit_s', 0):.1f} s | "
                         f"{(r.get('slowest_batch_s') or 0):.1f} s | {r.get('status')} (exit {r.get('exit_code')}) |")
        sh = sc.get("shards") or {}
        lines += ["", f"Speedup {sc['workers']} vs 1: {_x(sc.get('speedup'))}, same outcomes: {sc.get('same_outcomes')}. "
                  f"2 shards at once vs one run on all GPUs: {_x(sh.get('vs_one_run'))} ({(sh.get('wall_s') or 0):.1f} s vs "
                  f"{sc['all'].get('wall_s', 0):.1f} s), merged outcomes equal the one run: {sh.get('same_outcomes')}"
                  + (f", missing shards: {sh['merged']['missing_shards']}" if (sh.get('merged') or {}).get('missing_shards') else "")]
    m = parts.get("matrix", {})
    if m.get("wall_s"):
        lines += ["", "## make sanitize matrix", "", f"`{' '.join(m['argv'])}`: {m['cases']} cases in {m['wall_s']:.1f} s "
                  f"(exit {m['exit_code']}); outcomes {m['outcomes']}"]
    return "\n".join(lines) + "\n"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["child"]:
        return child_main(args_list[1:])
    ap = argparse.ArgumentParser(prog="gpu-memsafety bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for bench.json, bench.md and the work files")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    ap.add_argument("--case", action="append", default=[], help="time these case ids (default: gpt-oss and smoke cases)")
    ap.add_argument("--scenario", action="append", default=[], help="only cases of these scenarios")
    ap.add_argument("--reps", type=_positive, default=20, help="timed launches per measurement (default 20)")
    ap.add_argument("--sizes-mib", default="64,256,1024", help="buffer sizes for the bandwidth part (MiB)")
    ap.add_argument("--sample", type=_positive, default=36, help="cases in the batched vs per-process comparison")
    ap.add_argument("--batch-size", type=_positive, default=16, help="cases per sanitized process when batched (as make sanitize)")
    ap.add_argument("--batch-mode", default="both", choices=("both", "memcheck"), help="mode of the batching and matrix parts")
    ap.add_argument("--child-timeout", type=_positive, default=1800, help="seconds before a measuring child is killed")
    ap.add_argument("--case-modes", default="guard_page,memcheck",
                    help="cases part: the modes timed in their own child besides bare/guard/poison (guard_page, memcheck)")
    ap.add_argument("--scaling-budget-s", type=_positive, default=None,
                    help="scaling part: skip the shards comparison when the part has run longer than this")
    ap.add_argument("--scaling-args", default="", help="extra pytest arguments for the scaling part's runs (e.g. --scenario X)")
    ap.add_argument("--scaling-workers", type=_positive, default=None,
                    help="run the scaling part with this many workers without GPUs (tests the plumbing on a CPU machine)")
    args = ap.parse_args(args_list)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        ap.error(f"--parts: unknown {', '.join(unknown) or '(empty)'}; choose from {', '.join(PARTS)}")
    try:
        args.sizes_mib = [int(x) for x in args.sizes_mib.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--sizes-mib: expected comma-separated integers, got {args.sizes_mib!r}")
    if not args.sizes_mib or any(x <= 0 for x in args.sizes_mib):
        ap.error("--sizes-mib: sizes must be positive")
    args.parts = parts
    args.case_modes = [m.strip() for m in args.case_modes.split(",") if m.strip()]
    if set(args.case_modes) - {"guard_page", "memcheck"}:
        ap.error(f"--case-modes: choose from guard_page, memcheck; got {','.join(args.case_modes)}")
    if args.case:
        from gpu_memsafety.scenario.registry import find_case
        from gpu_memsafety.scenario.definition import ScenarioError
        for cid in args.case:
            try:
                find_case(cid)
            except ScenarioError as exc:
                ap.error(f"--case: {exc}")
    return Bench(args).run()


def _positive(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return number


if __name__ == "__main__":
    sys.exit(main())
