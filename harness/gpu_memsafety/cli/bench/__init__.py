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
- matrix: the wall time of `pytest scenarios -n auto --dist loadgroup --gpu-memsafety-mode both` (what `make sanitize` runs).
- scaling: the same matrix on one GPU and on all the machine's GPUs in one bench run, after a warm-up pass
  (guard mode, every GPU) that fills the Triton and CUDA-extension caches; the speedup, and whether both runs
  gave every case the same outcome. Then the matrix as 2 shards run at once on one machine (one GPU each,
  `--shard k/2`), merged with `harness merge`, against the single run on all GPUs. Needs 2 GPUs or more,
  else "not run" (`--scaling-workers N` runs it with N CPU workers instead, to test the plumbing).

Results: bench.json (schema: this docstring and the keys written below) and bench.md (tables).
"""
from __future__ import annotations

import argparse
import sys

from gpu_memsafety.cli.bench.child import child_main
from gpu_memsafety.cli.bench.parts import Bench
from gpu_memsafety.util.pathargs import arg_type, output_dir
from gpu_memsafety.util import bounds

PARTS = ("bandwidth", "cases", "cache", "batching", "matrix", "scaling")


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["child"]:
        return child_main(args_list[1:])
    ap = argparse.ArgumentParser(prog="gpu-memsafety bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=arg_type(output_dir, "--out"),
                    help="directory for bench.json, bench.md and the work files")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    ap.add_argument("--case", action="append", default=[], help="time these case ids (default: gpt-oss and smoke cases)")
    ap.add_argument("--scenario", action="append", default=[], help="only cases of these scenarios")
    ap.add_argument("--reps", type=bounds.arg_type("--reps"), default=20, help="timed launches per measurement (default 20)")
    ap.add_argument("--sizes-mib", default="64,256,1024", help="buffer sizes for the bandwidth part (MiB)")
    ap.add_argument("--sample", type=bounds.arg_type("--sample"), default=36, help="cases in the batched vs per-process comparison")
    ap.add_argument("--batch-size", type=bounds.arg_type("--batch-size"), default=32, help="cases per sanitized process when batched (as make sanitize)")
    ap.add_argument("--batch-mode", default="both", choices=("both", "memcheck"), help="mode of the batching and matrix parts")
    ap.add_argument("--child-timeout", type=bounds.arg_type("--child-timeout"), default=1800, help="seconds before a measuring child is killed")
    ap.add_argument("--case-modes", default="guard_page,memcheck",
                    help="cases part: the modes timed in their own child besides bare/guard/poison (guard_page, memcheck)")
    ap.add_argument("--scaling-budget-s", type=bounds.arg_type("--scaling-budget-s"), default=None,
                    help="scaling part: skip the shards comparison when the part has run longer than this")
    ap.add_argument("--scaling-args", default="", help="extra pytest arguments for the scaling part's runs (e.g. --gpu-memsafety-scenario X)")
    ap.add_argument("--scaling-workers", type=bounds.arg_type("--scaling-workers"), default=None,
                    help="run the scaling part with this many workers without GPUs (tests the plumbing on a CPU machine)")
    args = ap.parse_args(args_list)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        ap.error(f"--parts: unknown {', '.join(unknown) or '(empty)'}; choose from {', '.join(PARTS)}")
    try:
        args.sizes_mib = bounds.numbers("--sizes-mib", args.sizes_mib)
    except bounds.BoundError as exc:
        ap.error(str(exc))
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
