"""The plain launch of a case and the result fields every detector's action reports (the worker calls the
actions through gpu_memsafety.detectors.actions; a detector's own action builds on these). Sits with the detectors,
below the mode table and the actions that name them (docs/architecture.md, Layers)."""
from __future__ import annotations

import contextlib
import json
import time
from typing import Any

from gpu_memsafety.model import GUARD, TRACE, TRACE_RACE


def launched(ctx: Any, info: Any, **extra: Any) -> dict[str, Any]:
    """The result fields every action reports for a launch on `ctx`: what the adapter said (kernel, launches,
    notes: a host-side refusal says so there) and the context's buffer map, plus `extra`."""
    return {"kernel": info.kernel, "launches": info.launches, "arch": ctx.arch(), "notes": jsonable(info.notes),
            "buffers": ctx.arena.buffer_map(), "watched": sorted(ctx.watched), **extra}


def marker_check(worker: Any, ctx: Any) -> dict[str, Any]:
    """The guard detector's evidence for a launch on `ctx` when the mode runs it ({} otherwise): the changed
    marker runs per buffer."""
    if not worker.mode.check_markers:
        return {}
    return {GUARD: {name: [r.__dict__ for r in runs] for name, runs in ctx.arena.verify().items()}}


def once(worker: Any, adapter: Any, case: Any, *, watch_placement: str | None = None,
         placements: dict[str, str] | None = None) -> dict[str, Any]:
    """One launch on buffers in the case's placement (or `watch_placement`, or a rerun's `placements`), then the
    marker check when the mode runs the guard detector."""
    where = watch_placement or worker.placement
    ctx = worker.context(case, watch_placement=where, placements=placements)
    t0 = time.perf_counter()
    with _traced(worker, ctx) as tracer:
        info = adapter(case, ctx)
    worker.sync()
    kernel_s = time.perf_counter() - t0
    pages = {b["name"]: b["layout"]["placement"] for b in ctx.arena.buffer_map() if b["backend"] == "vmm"}
    evidence = marker_check(worker, ctx)
    if tracer is not None:
        evidence[TRACE] = tracer.evidence()
        if tracer.races is not None:
            evidence[TRACE_RACE] = tracer.races.evidence()
    return launched(ctx, info, evidence=evidence, kernel_seconds=kernel_s,
                    passes=[{"placement": where if placements is None else "rerun", "pages": pages,
                             "kernel_seconds": round(kernel_s, 6)}])


def _traced(worker: Any, ctx: Any) -> Any:
    """The interpreter's trace of the launch when the mode runs that detector (detectors/trace.py: it yields None
    where Triton is not interpreted, a GPU run); otherwise nothing is wrapped."""
    if TRACE not in worker.mode.detectors:
        return contextlib.nullcontext(None)
    from gpu_memsafety.detectors.trace import tracing
    races = None
    if TRACE_RACE in worker.mode.detectors:
        from gpu_memsafety.detectors.trace_race import Races
        races = Races()
    return tracing(ctx.arena, races)


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
