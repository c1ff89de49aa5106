"""`gpu-memsafety history REPORT|DIR ...`: which cases changed outcome across runs, and since which run.

    gpu-memsafety history nightly/            # every report.json under nightly/, oldest run first
    gpu-memsafety history a.json b.json --plot trend.svg

Prints the runs compared and every case whose outcome in the last run differs from an earlier run's, with
the run its current outcome started in and the one before; writes the findings of each kernel per run as an
SVG plot (default history.svg). A file that cannot be read is named on stderr with the reason and the exit
status is 1 (the history of the others is still printed); no readable report at all is 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpu_memsafety.report.history import History, find_reports, read_runs
from gpu_memsafety.util.fsutil import atomic_write_text
from gpu_memsafety.util.neutral import visible


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="gpu-memsafety history", description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", type=Path, help="report.json files, or folders holding them (searched)")
    ap.add_argument("--plot", type=Path, default=Path("history.svg"), help="where to write the plot (SVG)")
    ap.add_argument("--no-plot", action="store_true", help="print the changes only")
    args = ap.parse_args(argv)
    missing = [p for p in args.reports if not p.exists()]
    if missing:
        print(f"error: no such file or folder: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    runs, problems = read_runs(find_reports(args.reports))
    for problem in problems:
        print(visible(f"skipped {problem}", newlines=False), file=sys.stderr)
    if not runs:
        print("error: no readable report.json among " + ", ".join(map(str, args.reports)), file=sys.stderr)
        return 2
    history = History(runs)
    sys.stdout.write(history.render())
    if not args.no_plot:
        atomic_write_text(args.plot, history.plot_svg())
        print(f"plot: {args.plot}")
    return 1 if problems else 0
