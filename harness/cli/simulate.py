"""`gpu-memsafety simulate REPORT --gpus 1,2,4,8`: what a measured run would take on N GPUs, from its own costs.

Machines with several GPUs are lent only at times; the question "how much faster on 2, 4, 8" must be answerable
from a run on one. The model replays the run's planning (fixtures/schedule.plan, the same planner `make
sanitize` uses) for N GPUs x W workers each, with what the report measured:

- each case's cost is its measured `duration_s` (under the sanitizer where the mode has one);
- each worker process start costs the run's median measured start-up (`run.batches[].processes[].startup_s`);
- a case that ends its worker process (a finding that aborts the sanitizer's target, a fault) costs one more
  start: per scenario, the run's measured restarts per case (processes beyond the first in its batches);
- free workers take the batches longest first (xdist's loadgroup as the plugin orders it), so the wall time is
  the list-scheduling makespan, and no run can be shorter than its longest batch.

Costs measured with several workers sharing one GPU include that sharing; a model that ignores contention on a
GPU (one more GPU is taken to add W workers' worth of throughput) is an upper bound on the speed-up, and the
longest batch bounds it too: both are printed, with the 1-GPU prediction beside the measured wall time as a
check of the model itself.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from gpu_memsafety.fixtures import schedule


@dataclass(frozen=True)
class Prediction:
    gpus: int
    workers: int
    batches: int
    wall_s: float
    longest_batch_s: float


def costs_of(doc: dict[str, Any]) -> tuple[list[schedule.Job], float, dict[str, float]]:
    """Jobs with measured costs, the median start-up, and each scenario's restarts per case."""
    batches = doc.get("run", {}).get("batches") or []
    startups = [p["startup_s"] for b in batches for p in b.get("processes", []) if p.get("startup_s")]
    startup = statistics.median(startups) if startups else schedule.STARTUP_S
    restarts: dict[str, float] = defaultdict(float)
    cases_of: dict[str, int] = defaultdict(int)
    for batch in batches:
        scenario = str(batch.get("name", "")).split(".", 1)[0]
        restarts[scenario] += max(0, len(batch.get("processes", [])) - 1)
        cases_of[scenario] += int(batch.get("cases", 0))
    per_case = {s: restarts[s] / cases_of[s] for s in cases_of if cases_of[s]}
    jobs = []
    for case in doc.get("cases", []):
        if case.get("outcome") in ("not applicable",) and not case.get("duration_s"):
            continue                         # judged before any process ran: no cost anywhere
        scenario = case.get("scenario", case["id"].split("[", 1)[0])
        cost = float(case.get("duration_s") or 0.0) + per_case.get(scenario, 0.0) * startup
        jobs.append(schedule.Job(case["id"], scenario, cost, False))
    return jobs, startup, per_case


def predict(jobs: Sequence[schedule.Job], gpus: int, per_gpu: int, startup: float, max_batch: int = 32) -> Prediction:
    workers = gpus * per_gpu
    batches = schedule.plan(jobs, workers, max_batch, startup)
    return Prediction(gpus, workers, len(batches), schedule.makespan(batches, workers),
                      max((b.cost for b in batches), default=0.0))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu-memsafety simulate", description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path, help="report.json of a measured run")
    ap.add_argument("--gpus", default="1,2,4,8", help="comma-separated GPU counts (default 1,2,4,8)")
    ap.add_argument("--workers-per-gpu", type=int, default=0,
                    help="workers on each GPU (default: what the measured run used per GPU)")
    args = ap.parse_args(argv)
    from gpu_memsafety.report import ReportError, load_report
    try:
        doc = load_report(args.report)
        counts = [int(x) for x in args.gpus.split(",") if x.strip()]
    except (ReportError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not counts or min(counts) < 1 or args.workers_per_gpu < 0:
        print("error: --gpus takes positive counts, --workers-per-gpu a positive number", file=sys.stderr)
        return 2
    run = doc.get("run", {})
    gpus_used = len({(b.get("gpu") or {}).get("uuid") for b in run.get("batches") or []} - {None}) or 1
    per_gpu = args.workers_per_gpu or max(1, int(run.get("workers") or 1) // gpus_used)
    jobs, startup, restarts = costs_of(doc)
    measured = run.get("wall_s")
    print(f"{len(jobs)} cases with a cost, {sum(j.cost for j in jobs):.1f} s of cases and restarts in all; "
          f"start-up {startup:.2f} s (median measured); {per_gpu} worker(s) per GPU")
    if restarts:
        top = sorted(restarts.items(), key=lambda kv: -kv[1])[:4]
        print("restarts per case (measured): " + ", ".join(f"{s} {r:.2f}" for s, r in top))
    base = predict(jobs, 1, per_gpu, startup)
    for n in counts:
        p = predict(jobs, n, per_gpu, startup)
        print(f"{n} GPU(s), {p.workers} workers: {p.batches} batches, predicted {p.wall_s:.1f} s "
              f"({base.wall_s / p.wall_s:.2f}x of 1 GPU), longest batch {p.longest_batch_s:.1f} s")
    if measured:
        print(f"measured on {gpus_used} GPU(s): {measured} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
