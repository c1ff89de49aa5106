"""`gpu-memsafety baseline write|check`: a baseline from a run's report in one command, and checked against one.

    gpu-memsafety baseline write reports/report.json -o memsafety-baseline.json
    gpu-memsafety baseline check reports/report.json --baseline memsafety-baseline.json

`write` accepts every finding of the report that no scenario expects (with `--include-expected`, the known
bugs too), each entry with the finding in words (`seen`) and an empty `reason`: a run refuses the file
(`--baseline`) until every reason says why its finding is accepted. Rewriting an existing file keeps the
reasons and upstream issues of the entries that are still there. `check` splits the report's findings against
a baseline: new ones (exit 1), accepted ones, and stale entries (the case ran and the finding is gone, or the
case no longer exists) and unchecked ones, which never fail. A report that was interrupted, checked nothing or
has a case that failed without a finding (crashed, timed out, ...) fails `check` whatever its findings, and
`write` refuses it: findings alone never say such a run passed (report.unchecked_reasons).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpu_memsafety.judge.baseline import (BaselineError, baseline_from_results, compare, load_baseline, render_diff,
                                          write_baseline)
from gpu_memsafety.model import CaseResult
from gpu_memsafety.report import ReportError, cases_from_report, load_report, unchecked_reasons, visible
from gpu_memsafety.scenario import registry


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="gpu-memsafety baseline", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="action", required=True, metavar="ACTION")
    write = sub.add_parser("write", help="write a baseline accepting the report's findings (reasons left to fill in)")
    write.add_argument("report", type=Path)
    write.add_argument("-o", "--output", type=Path, required=True, help="the baseline file (kept reasons if it exists)")
    write.add_argument("--include-expected", action="store_true",
                       help="also accept the findings of known bugs (cases whose scenario expects them)")
    check = sub.add_parser("check", help="compare a report's findings with a baseline")
    check.add_argument("report", type=Path)
    check.add_argument("--baseline", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        report = load_report(args.report)
        results = cases_from_report(report)
        if args.action == "write":
            unchecked = unchecked_reasons(report)
            if unchecked:   # entries for what was never seen would be missing, and nothing would say so
                _say_unchecked(args.report, unchecked, "no baseline written: rerun to the end and write from that report")
                return 1
            return _write(results, args.output, args.include_expected)
        diff = compare(results, load_baseline(args.baseline), known_cases=known_case_ids())
    except (ReportError, BaselineError) as exc:   # BaselineError is a ReportError: both name the file
        print(f"error: {visible(str(exc))}", file=sys.stderr)
        return 2
    sys.stdout.write(render_diff(diff))
    unchecked = unchecked_reasons(report, findings_judged=True)
    if unchecked:   # findings alone never pass a run that was cut short, checked nothing or crashed
        _say_unchecked(args.report, unchecked, "the baseline check fails")
    return 1 if diff.failed or unchecked else 0


def _say_unchecked(path: Path, reasons: list[str], verdict: str) -> None:
    print(visible(f"error: {path}: " + "; ".join(reasons) + f": {verdict}"), file=sys.stderr)


def _write(results: list[CaseResult], output: Path, include_expected: bool) -> int:
    previous = load_baseline(output, require_reasons=False) if output.exists() else None
    baseline = baseline_from_results(results, previous=previous, include_expected=include_expected)
    write_baseline(results, output, previous=previous, include_expected=include_expected)
    empty = sum(1 for a in baseline.accepted if not a.reason.strip())
    print(f"wrote {output}: {len(baseline.accepted)} accepted finding(s), {empty} reason(s) to fill in")
    if not baseline.accepted:
        print("  the report has no finding outside its scenarios' expectations"
              + ("" if include_expected else " (--include-expected also accepts known bugs)"))
    elif empty:
        print(f"  fill in each empty \"reason\": `--baseline {output}` is refused until every reason says why")
    return 0


def known_case_ids() -> set[str]:
    """Every case id of the scenarios this process sees (the repository's, --scenario-path, entry points): an
    entry whose case is not among them names a case that no longer exists."""
    return {case.id for scenario in registry.all_scenarios().values() for case in scenario.build()}
