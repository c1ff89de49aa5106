"""The bench's measuring child: `python -m gpu_memsafety.cli.bench child JOB.json` measures one part for each
case of the job and writes one result file per case (the parent, parts.py, starts it and restarts it after a
case that killed it)."""
from __future__ import annotations

import json
import os
import statistics
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

from gpu_memsafety.cli.bench.timing import gpu_busy, time_calls, time_interleaved, wall
from gpu_memsafety.scenario.definition import Case, Scenario
from gpu_memsafety.util.fsutil import atomic_write_json
from gpu_memsafety.util import jsonio

MIB = 1 << 20


class Child:
    """Built on the engine's own worker (gpu_memsafety.engine.worker.Worker, guard mode): its start marks, its contexts and
    arenas (kept for the life of the process, buffer map on disk before a launch), its device, its exception
    classes and its exit code for a lost CUDA context."""

    def __init__(self, job: dict[str, Any]) -> None:
        import torch

        from gpu_memsafety import job as J
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
        from gpu_memsafety.detectors.poison import BASELINE, PATTERNS
        torch = self.torch
        arena, relaunch = ctx.arena, self._relaunch(info)
        base, poison = BASELINE, PATTERNS[0]
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
    return Child(jsonio.loads(Path(argv[0]).read_text())).run()
