"""The child process: runs cases, checks markers, writes one result file per case, atomically.

`python -m gpu_memsafety.engine.worker JOB.json` (a gpu_memsafety.engine.job.Job). The parent may wrap it in compute-sanitizer. For
each case the worker first writes `<n>.started`, then `<n>.json` (a gpu_memsafety.engine.job.WorkerResult); a case with a
start mark and no result was running when the process died. Any exception becomes an `error` result with its
traceback (lit's UNRESOLVED); an `Unsupported` becomes `unsupported`, a `NotApplicable` `not_applicable`; a
CUDA error that leaves the context unusable ends the process (exit code CONTEXT_LOST) so that the parent
reruns the remaining cases in a fresh one. What to do with a case comes from the mode table (harness/engine/modes.py).
The worker records evidence only; the judge (harness/judge/rules.py) decides.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from gpu_memsafety.engine import job as J
from gpu_memsafety.errors import NotApplicable, Unsupported
from gpu_memsafety.util import procs
from gpu_memsafety.engine.modes import COVER_ALL, MODES, REPEAT_FILL, REPEAT_POISON, REPEAT_STRESS, resolve_cover
from gpu_memsafety.detectors.poison import PATTERNS as POISON_ORDER

# Exit code meaning "the CUDA context is gone; rerun what is left in a fresh process".
CONTEXT_LOST = 75
# Markers for poison mode: the baseline, then the poison patterns in the order they are tried (harness/detectors/poison.py).
# 0xA5 as E8M0 is 2^38 and as fp32 a tiny number; 0xFF is NaN as E8M0, as fp32 and as bf16; 0x7B a large finite
# positive number. A kernel that reads guard bytes into its result changes its output between them.
POISON_PATTERNS = (0xA5, *POISON_ORDER)


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
    def __init__(self, job: J.Job) -> None:
        import torch

        from gpu_memsafety.placement import layout as L

        self.torch = torch
        self.L = L
        self.job = job
        self.out = Path(job.out_dir)
        self.mode = MODES[job.mode]
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.keep: list[Any] = []          # arenas of finished cases: addresses are never reused in one process
        self._current: Any = None          # the RunContext of the run in progress
        self._index = 0
        self._entry: J.JobCase | None = None
        self._cover = COVER_ALL            # which buffers the case in progress covers (resolve_cover)
        self._placement = job.watch_placement   # where they go (Mode.case_placement)
        self.page_allocators = self._page_allocators(job.flush_backend)

    def _page_allocators(self, backend: str) -> dict[str, Any]:
        if self.device.type != "cuda" or backend == "torch":
            return {}
        from gpu_memsafety.placement import vmm
        return dict(vmm.ALLOCATORS)

    def run(self) -> int:
        procs.subreaper()      # a daemon an adapter starts (forked twice, its own session) stays our child
        for index, entry in enumerate(self.job.cases):
            self.begin(index, entry)
            before = procs.children()
            result = self._run_case(entry.case, index)
            result.stray_processes = procs.reap(procs.stray_children(before))   # nothing outlives its case
            self._write(index, result)
        return 0

    def begin(self, index: int, entry: J.JobCase | None = None) -> None:
        """Case `index` starts: its start mark goes to disk (a start mark without a result means the process
        died in it), and the buffer maps of the contexts made from now on are written under its number."""
        (self.out / f"{index}.started").write_text(str(time.time()))
        self._index = index
        self._entry = entry

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
            scenario = _scenario_of(self._entry)
            self._cover = resolve_cover(self.job.cover, scenario.cover)
            self._placement = self.mode.case_placement(self.job.watch_placement, tuple(scenario.detectors))
            adapter = checked(scenario.resolve_adapter(), scenario.name)
            body = self._dispatch(adapter, case)
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
                        "arch": self._arch()}
                self._write(index, J.WorkerResult(**base, **status, **body, cover=self._cover,
                                                  seconds=time.perf_counter() - start))
                sys.stdout.flush()
                os._exit(CONTEXT_LOST)
            if kind == J.OOM:
                # Release this case's buffers so that the cases after it get the memory back; its own result
                # says how much there was.
                body = {"memory": self._release(kept)}
            if self.job.debug and kind == J.ERROR:
                raise
        return J.WorkerResult(**base, **status, **body, cover=self._cover, seconds=time.perf_counter() - start)

    def _dispatch(self, adapter: Any, case: Any) -> dict[str, Any]:
        if self.mode.worker_mode == REPEAT_POISON:
            return self._poison(adapter, case)
        if self.mode.worker_mode == REPEAT_STRESS:
            return self._stress(adapter, case)
        if self.mode.worker_mode == REPEAT_FILL:
            from gpu_memsafety.detectors import fillcheck
            return fillcheck.run(self, adapter, case)
        entry = self._entry
        if entry is not None and entry.placements is not None:     # a guard-page rerun: its placements, one pass
            return self._once(adapter, case, watch_placement=self._placement, placements=dict(entry.placements))
        first = self._once(adapter, case, watch_placement=self._placement)
        then = self.mode.then_placement
        if then is None or self._placement != self.mode.watch_placement or not first["passes"][0]["pages"]:
            return first      # one pass: none asked for, or no buffer sat on a page (nothing covered, no VMM here)
        # guard_page: the same buffers again, on front pages (a fault here ends the process like the first pass's)
        return _merge_passes(first, self._once(adapter, case, watch_placement=then))

    def _release(self, kept: int) -> dict[str, int]:
        del self.keep[kept:]
        self._current = None
        if self.device.type != "cuda":
            return {}
        import gc
        gc.collect()
        self.torch.cuda.empty_cache()
        free, total = self.torch.cuda.mem_get_info(self.device)
        return {"free_bytes_after_release": int(free), "total_bytes": int(total)}

    def context(self, case: Any = None, *, marker: int = 0xA5, watch_placement: str | None = None,
                 production: bool = False, marker_for: dict[str, int] | None = None, fill: int | None = None,
                 fill_for: dict[str, int] | None = None, poison_spans: dict[str, list[tuple[int, int]]] | None = None,
                 poison_marker: int = 0xFF, placements: dict[str, str] | None = None) -> Any:
        """A RunContext on a fresh guarded arena for the case in progress (see begin); the arena is kept for
        the life of the process, and its buffer map goes to disk before any launch."""
        from gpu_memsafety.scenario.context import RunContext
        from gpu_memsafety.placement.guard import Arena
        arena = Arena(self.device, marker=marker, guard=self.job.guard,
                      page_allocators=self.page_allocators, marker_for=dict(marker_for or {}), fill=fill,
                      fill_for=dict(fill_for or {}), poison_spans=dict(poison_spans or {}), poison_marker=poison_marker)
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

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def _once(self, adapter: Any, case: Any, *, watch_placement: str,
              placements: dict[str, str] | None = None) -> dict[str, Any]:
        ctx = self.context(case, watch_placement=watch_placement, placements=placements)
        t0 = time.perf_counter()
        info = adapter(case, ctx)
        self._sync()
        kernel_s = time.perf_counter() - t0
        checked = self.mode.check_markers
        guard = {name: [r.__dict__ for r in runs] for name, runs in ctx.arena.verify().items()} if checked else None
        return {"kernel": info.kernel, "launches": info.launches, "arch": ctx.arch(), "notes": _jsonable(info.notes),
                "buffers": ctx.arena.buffer_map(), "watched": sorted(ctx.watched), "guard": guard,
                "markers_checked": checked, "kernel_seconds": kernel_s,
                "passes": [{"placement": watch_placement if placements is None else "rerun",
                            "pages": {b["name"]: b["layout"]["placement"] for b in ctx.arena.buffer_map()
                                      if b["backend"] == "vmm"},
                            "kernel_seconds": round(kernel_s, 6)}]}

    def _poison(self, adapter: Any, case: Any) -> dict[str, Any]:
        """A baseline run with every marker byte in one pattern, then one run per buffer and region of its
        marker bytes with only that region in the other pattern (harness/detectors/poison.py: every buffer, watched
        ones first; before and after the tensor apart; bytes bounded by bisection when something changed)."""
        from gpu_memsafety.detectors import poison
        base_marker = POISON_PATTERNS[0]
        ctx = self.context(case, marker=base_marker)
        info = adapter(case, ctx)
        self._sync()
        baseline = _host_outputs(info.outputs)
        result = {"kernel": info.kernel, "launches": info.launches, "arch": ctx.arch(),
                  "buffers": ctx.arena.buffer_map(), "watched": sorted(ctx.watched),
                  "guard": {n: [r.__dict__ for r in rs] for n, rs in ctx.arena.verify().items()},
                  "markers_checked": True}

        # Besides the declared outputs, every buffer that holds none of them is compared too: an adapter that
        # declares no output (or not all of them) must not make poison mode compare nothing.
        compared = _undeclared_buffers(ctx, info.outputs)

        def run(name: str, spans: list[tuple[int, int]], pattern: int) -> dict[str, Any]:
            kept = len(self.keep)
            pctx = self.context(case, marker=base_marker, poison_spans={name: spans}, poison_marker=pattern)
            pinfo = adapter(case, pctx)
            self._sync()
            diff = _changed_outputs(baseline, _host_outputs(pinfo.outputs))
            diff.update(_changed_buffers(ctx, pctx, [n for n in compared if n != name]))
            del self.keep[kept:]      # no sanitizer watches these runs: their addresses may be reused
            self._current = ctx
            return diff

        layouts = {name: buf.layout for name, buf in ctx.arena.buffers.items()}
        order = sorted(ctx.watched) + sorted(set(layouts) - ctx.watched)
        itemsizes = {name: buf.tensor.element_size() for name, buf in ctx.arena.buffers.items()}
        regions, runs = poison.survey(layouts, order, run, itemsizes, patterns=POISON_PATTERNS[1:])
        changed: dict[str, Any] = {}
        for entry in regions:
            changed.setdefault(entry["buffer"], {}).update(entry["outputs"])
        result["poison"] = {"patterns": list(POISON_PATTERNS), "changed": changed, "regions": regions,
                            "outputs": sorted(baseline), "compared_buffers": compared, "runs": 1 + runs,
                            "buffers": order}
        return result

    def _stress(self, adapter: Any, case: Any) -> dict[str, Any]:
        """Production conditions: caching allocator on, no guards, no placement; count clean iterations."""
        iterations = self.job.iterations
        done = launches = 0
        info = None
        for _ in range(iterations):
            ctx = self.context(case, production=True)
            info = adapter(case, ctx)
            self._sync()
            done += 1
            launches += info.launches
            (self.out / "stress.progress").write_text(str(done))
        return {"kernel": info.kernel if info else "", "arch": self._arch(), "stress_iterations": done,
                "launches": launches, "buffers": [], "guard": None, "markers_checked": False}

    def _arch(self) -> str:
        if self.device.type != "cuda":
            return "cpu"
        major, minor = self.torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"


def _merge_passes(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two placement passes of one case as one result: the first pass's buffer map (its pages are what the verdict
    reads), launches and kernel time added, the guard markers changed in either pass (offsets are relative to each
    tensor's start, the same in both), both passes listed."""
    merged = dict(first)
    merged["launches"] = first["launches"] + second["launches"]
    merged["kernel_seconds"] = first["kernel_seconds"] + second["kernel_seconds"]
    merged["watched"] = sorted(set(first["watched"]) | set(second["watched"]))
    merged["markers_checked"] = first["markers_checked"] and second["markers_checked"]
    merged["passes"] = first["passes"] + second["passes"]
    if first["guard"] is not None and second["guard"] is not None:
        from gpu_memsafety.placement.layout import merge_runs
        guard: dict[str, list[dict[str, Any]]] = {}
        for name in {**first["guard"], **second["guard"]}:
            by_region: dict[str, list[tuple[int, int]]] = {}
            for r in first["guard"].get(name, []) + second["guard"].get(name, []):
                by_region.setdefault(r["region"], []).append((r["start"], r["end"]))
            guard[name] = sorted(({"region": region, "start": lo, "end": hi, "logical": ""}
                                  for region, spans in by_region.items() for lo, hi in merge_runs(spans)),
                                 key=lambda r: (r["start"], r["end"]))
        merged["guard"] = guard
    return merged


def _host_outputs(outputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v.detach().float().cpu() for k, v in outputs.items()}


def _undeclared_buffers(ctx: Any, outputs: dict[str, Any]) -> list[str]:
    """The case's buffers that hold none of the declared outputs (their bytes are compared as a whole)."""
    def holds(buf: Any) -> bool:
        lo, hi = buf.tensor_addr, buf.tensor_addr + buf.layout.nbytes
        return any(t.device == buf.storage.device and lo <= t.data_ptr() < hi for t in outputs.values())
    return [name for name, buf in ctx.arena.buffers.items() if not holds(buf)]


def _changed_buffers(base: Any, other: Any, names: list[str]) -> dict[str, Any]:
    """Buffers of `names` whose contents differ between two runs, as {"buffer NAME": {"elements", "of"}}."""
    changed = {}
    for name in names:
        a_buf, b_buf = base.arena.buffers.get(name), other.arena.buffers.get(name)
        if a_buf is None or b_buf is None or a_buf.layout != b_buf.layout:
            continue
        x, y = a_buf.float_values(), b_buf.float_values()
        if x is None or y is None:         # not floating point: the bytes, exactly
            x, y = a_buf.body(), b_buf.body()
        diff = _count_changed(x, y)
        if diff:
            changed[f"buffer {name}"] = {"elements": diff, "of": x.numel()}
    return changed


def _count_changed(x: Any, y: Any) -> int:
    """Elements that differ between two runs: floats beyond isclose's tolerance (NaN equals NaN), others exactly."""
    import torch
    same = torch.isclose(x, y, equal_nan=True) if x.dtype.is_floating_point else x == y
    return int((~same).sum())


def _changed_outputs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    import torch
    changed = {}
    for name in a:
        x, y = a[name], b[name]
        diff = _count_changed(x, y)
        if diff:
            changed[name] = {"elements": diff, "of": x.numel(),
                             "nan_b": int(torch.isnan(y).sum()), "nan_a": int(torch.isnan(x).sum())}
    return changed


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


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

    def leave(*_: Any) -> None:
        if os.getpgrp() == os.getsid(0):      # our own session, as the runner starts us: take the group along
            os.killpg(os.getpgrp(), signal.SIGKILL)
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
    job = J.Job.from_json(json.loads(Path(args[0]).read_text()))
    return Worker(job).run()


if __name__ == "__main__":
    sys.exit(main())
