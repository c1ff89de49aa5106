"""`gpu-memsafety simulate REPORT --gpus 1,2,4,8`: what a measured run would take on N GPUs, from its own costs.

Machines with several GPUs are lent only at times; the question "how much faster on 2, 4, 8" must be answerable
from a run on one. The model replays the run's planning (engine/schedule.plan, the same planner `make
sanitize` uses) for N GPUs x W workers each, with what the report measured:

- each case's cost is its measured `duration_s` (under the sanitizer where the mode has one);
- each worker process costs the run's median measured start-up plus exit (`run.batches[].processes[]`);
- a batch starts one process per stage its cases need in a staged mode (mode complete: the sanitized stage, then
  the unsanitized one where poison or uninit still have something to see): per scenario, the mean number of
  stages among its measured batches' processes;
- a case that ends its worker process (a finding that aborts the sanitizer's target, a fault) costs one more
  process: per scenario, the run's measured restarts per case (processes beyond its batches' stage processes);
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

from gpu_memsafety.engine import schedule
from gpu_memsafety.util import bounds
from gpu_memsafety.util.neutral import visible


@dataclass(frozen=True)
class Prediction:
    gpus: int
    workers: int
    batches: int
    wall_s: float
    longest_batch_s: float


@dataclass(frozen=True)
class Costs:
    jobs: list[schedule.Job]
    per_process: float                  # median measured start-up plus exit of one worker process
    restarts: dict[str, float]          # scenario -> processes per case beyond its batches' stage processes
    stage_processes: dict[str, float]   # scenario -> processes a batch of it starts (one per stage of a staged mode)

    @property
    def group_startup(self) -> dict[str, float]:
        return {s: n * self.per_process for s, n in self.stage_processes.items()}


def costs_of(doc: dict[str, Any]) -> Costs:
    """Jobs with measured costs, what a worker process costs, and per scenario its restarts per case and the
    processes each of its batches starts."""
    batches = doc.get("run", {}).get("batches") or []
    fixed = [p["startup_s"] + float(p.get("exit_s") or 0.0) for b in batches for p in b.get("processes", [])
             if p.get("startup_s")]
    per_process = statistics.median(fixed) if fixed else schedule.STARTUP_S
    restarts: dict[str, float] = defaultdict(float)
    stages: dict[str, list[int]] = defaultdict(list)
    cases_of: dict[str, int] = defaultdict(int)
    for batch in batches:
        scenario = str(batch.get("name", "")).split(".", 1)[0]
        processes = batch.get("processes", [])
        kinds = max(1, len({p.get("stage") for p in processes}))     # a staged mode: one process per stage
        stages[scenario].append(kinds)
        restarts[scenario] += max(0, len(processes) - kinds)
        cases_of[scenario] += int(batch.get("cases", 0))
    per_case = {s: restarts[s] / cases_of[s] for s in cases_of if cases_of[s]}
    jobs = []
    for case in doc.get("cases", []):
        if case.get("outcome") in ("not applicable",) and not case.get("duration_s"):
            continue                         # judged before any process ran: no cost anywhere
        scenario = case.get("scenario", case["id"].split("[", 1)[0])
        cost = float(case.get("duration_s") or 0.0) + per_case.get(scenario, 0.0) * per_process
        jobs.append(schedule.Job(case["id"], scenario, cost, False))
    return Costs(jobs, per_process, per_case, {s: statistics.mean(k) for s, k in stages.items()})


def predict(costs: Costs, gpus: int, per_gpu: int, max_batch: int = 32) -> Prediction:
    workers = gpus * per_gpu
    batches = schedule.plan(costs.jobs, workers, max_batch, costs.per_process, costs.group_startup)
    return Prediction(gpus, workers, len(batches), schedule.makespan(batches, workers),
                      max((b.cost for b in batches), default=0.0))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu-memsafety simulate", description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path, help="report.json of a measured run")
    ap.add_argument("--gpus", default=[1, 2, 4, 8], type=bounds.arg_type("--gpus", bounds.numbers),
                    help="comma-separated GPU counts (default 1,2,4,8)")
    ap.add_argument("--workers-per-gpu", type=bounds.arg_type("--workers-per-gpu"), default=0,
                    help="workers on each GPU (default: what the measured run used per GPU)")
    args = ap.parse_args(argv)
    from gpu_memsafety.report import ReportError, load_report
    try:
        doc = load_report(args.report)
    except ReportError as exc:
        print(f"error: {visible(str(exc))}", file=sys.stderr)
        return 2
    counts = args.gpus
    run = doc.get("run", {})
    gpus_used = len({(b.get("gpu") or {}).get("uuid") for b in run.get("batches") or []} - {None}) or 1
    per_gpu = args.workers_per_gpu or max(1, int(run.get("workers") or 1) // gpus_used)
    costs = costs_of(doc)
    if not any(job.cost > 0 for job in costs.jobs):
        print(f"error: {args.report}: no case with a measured duration (the report lists {len(doc['cases'])} "
              "case(s)): nothing to simulate; give the report.json of a run that ran cases", file=sys.stderr)
        return 2
    measured = run.get("wall_s")
    print(f"{len(costs.jobs)} cases with a cost, {sum(j.cost for j in costs.jobs):.1f} s of cases and restarts in all; "
          f"{costs.per_process:.2f} s a worker process (median measured start-up and exit); {per_gpu} worker(s) per GPU")
    staged = {s: n for s, n in costs.stage_processes.items() if n > 1}
    if staged:
        print("processes a batch starts (one per stage): " + ", ".join(f"{s} {n:.1f}" for s, n in sorted(staged.items())))
    if costs.restarts:
        top = sorted(costs.restarts.items(), key=lambda kv: -kv[1])[:4]
        print("restarts per case (measured): " + ", ".join(f"{s} {r:.2f}" for s, r in top))
    base = predict(costs, 1, per_gpu)
    for n in counts:
        p = predict(costs, n, per_gpu)
        print(f"{n} GPU(s), {p.workers} workers: {p.batches} batches, predicted {p.wall_s:.1f} s "
              f"({base.wall_s / p.wall_s:.2f}x of 1 GPU), longest batch {p.longest_batch_s:.1f} s")
    if measured:
        print(f"measured on {gpus_used} GPU(s): {measured} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
