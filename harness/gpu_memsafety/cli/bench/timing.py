"""Timing for the bench's measuring child: CUDA events around calls, interleaved variants, CUPTI GPU time."""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable


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
    return {**stats(samples, device), "samples": samples}


def stats(samples: list[float], device: Any) -> dict[str, Any]:
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
    return {name: {**stats(v, device), "interleaved_with": sorted(set(fns) - {name})} for name, v in samples.items()}


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
