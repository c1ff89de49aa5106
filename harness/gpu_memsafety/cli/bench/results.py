"""What a bench run concludes: each target of the performance issue met, missed or not measured (with why),
and bench.md, the tables a person reads."""
from __future__ import annotations

import statistics
from typing import Any, Callable

# Targets from the performance issue, as ratios measured in one run.
TARGETS = {
    "guard_overhead_gpt_oss": 0.05,     # guard markers add at most 5% to the bare kernel on gpt-oss-sized cases
    "check_vs_copy": 0.50,              # verification reaches at least 50% of copy bandwidth, buffers >= 64 MiB
    "batched_speedup": 3.0,             # batched memcheck at least 3x faster than one process per case
    "guard_page_ratio": 1.2,            # guard-page mode within 1.2x the bare kernel
    "scaling_per_gpu": 0.9,             # N GPUs run the matrix at least 0.9 x N times faster than one (1.8x on 2)
}


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


# ------------------------------------------------------------------------------------------- bench.md

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


def bench_markdown(doc: dict[str, Any]) -> str:
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
