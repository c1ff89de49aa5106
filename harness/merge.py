"""Merge report.json files from several runners (H100, B200, ...) into one kernel x architecture matrix.

Nightly CI runs the same cases on machines of different architectures; each writes its own report.json as
an artifact. People want one table: a row per kernel, a column per architecture, each cell the worst verdict
any runner gave there. The inputs are artifacts from other machines, so each is validated by load_report
(size, JSON, schema, fields) and only ever opened: no path from the command line or inside a file reaches a
shell, and nothing inside a file is followed.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence, TypedDict

from harness.fsutil import atomic_write_text
from harness.report import (
    EMPTY,
    FAILED,
    PASSED,
    KindTotals,
    ReportError,
    env_text,
    load_report,
    md_cell,
    md_table,
    plural,
    report_json_text,
    verdict_badge,
    worst_verdict,
)

MERGED_SCHEMA = "gpu-memsafety-merged/1"
MERGED_FILES = {"json": "merged.json", "markdown": "merged.md"}
# Failing cases listed in merged.md before pointing at merged.json (GitHub's 1 MiB summary cap).
MARKDOWN_FAILURES_SHOWN = 50


class Cell(TypedDict):
    kernel: str
    arch: str
    verdict: str
    cases: int
    failed: int
    overreads: KindTotals
    overwrites: KindTotals
    runners: list[str]


def merge_reports(paths: Sequence[str | os.PathLike[str]]) -> dict[str, Any]:
    """Load and validate every report, then merge; raises ReportError naming the first bad file."""
    if not paths:
        raise ReportError("<arguments>", "no report files to merge")
    _reject_repeats(paths)
    loaded = [(Path(p), load_report(p)) for p in paths]
    labels = _runner_labels(loaded)
    cells = merge_cells([(label, report) for label, (_, report) in zip(labels, loaded)])
    return {
        "schema": MERGED_SCHEMA,
        "runners": [_runner(label, path, report) for label, (path, report) in zip(labels, loaded)],
        "kernels": sorted({c["kernel"] for c in cells}),
        "archs": sorted({c["arch"] for c in cells}),
        "cells": cells,
        "failures": [f for label, (_, report) in zip(labels, loaded) for f in _failures(label, report)],
        "summary": _summary([report for _, report in loaded]),
    }


def _reject_repeats(paths: Sequence[str | os.PathLike[str]]) -> None:
    seen: set[str] = set()
    for path in paths:
        key = os.path.realpath(path)
        if key in seen:
            raise ReportError(path, "given more than once; its cases would be counted twice")
        seen.add(key)


def _runner_labels(loaded: Sequence[tuple[Path, Mapping[str, Any]]]) -> list[str]:
    """hostname, else the file name; repeated labels get '#2', '#3' so every runner stays distinct."""
    labels: list[str] = []
    for path, report in loaded:
        base = str(report["environment"].get("hostname") or path.name)
        label, n = base, 1
        while label in labels:
            n += 1
            label = f"{base}#{n}"
        labels.append(label)
    return labels


def _runner(label: str, path: Path, report: Mapping[str, Any]) -> dict[str, Any]:
    return {"label": label, "file": str(path), "environment": report["environment"],
            "run": report["run"], "summary": report["summary"]}


def merge_cells(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Cell]:
    """Matrix rows of all reports folded into one cell per (kernel, arch), sorted."""
    cells: dict[tuple[str, str], Cell] = {}
    for label, report in reports:
        for row in report["matrix"]:
            key = (row["kernel"], row["arch"])
            cells[key] = _fold(cells[key], row, label) if key in cells else _cell(row, label)
    return [cells[key] for key in sorted(cells)]


def _cell(row: Mapping[str, Any], label: str) -> Cell:
    return {"kernel": row["kernel"], "arch": row["arch"], "verdict": row["verdict"], "cases": row["cases"],
            "failed": row["failed"], "overreads": _totals(row["overreads"]),
            "overwrites": _totals(row["overwrites"]), "runners": [label]}


def _totals(totals: Mapping[str, Any]) -> KindTotals:
    return {"findings": totals["findings"], "bytes": totals["bytes"], "accesses": totals["accesses"]}


def _fold(cell: Cell, row: Mapping[str, Any], label: str) -> Cell:
    return {
        "kernel": cell["kernel"], "arch": cell["arch"],
        "verdict": worst_verdict([cell["verdict"], row["verdict"]]),
        "cases": cell["cases"] + row["cases"], "failed": cell["failed"] + row["failed"],
        "overreads": _add(cell["overreads"], row["overreads"]),
        "overwrites": _add(cell["overwrites"], row["overwrites"]),
        "runners": [*cell["runners"], label] if label not in cell["runners"] else cell["runners"],
    }


def _add(a: KindTotals, b: Mapping[str, Any]) -> KindTotals:
    return {"findings": a["findings"] + b["findings"], "bytes": a["bytes"] + b["bytes"],
            "accesses": a["accesses"] + b["accesses"]}


def _failures(label: str, report: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{"runner": label, "id": c["id"], "kernel": c["kernel"], "arch": c["arch"],
             "outcome": c["outcome"], "message": c["message"]} for c in report["cases"] if c["failed"]]


def _summary(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    statuses = [r["summary"]["status"] for r in reports]
    status = FAILED if FAILED in statuses else (PASSED if PASSED in statuses else EMPTY)
    return {"runners": len(reports), "total": sum(r["summary"]["total"] for r in reports),
            "failed": sum(r["summary"]["failed"] for r in reports), "status": status}


# ---------------------------------------------------------------------------------------- markdown


def render_merge_markdown(merged: Mapping[str, Any]) -> str:
    """Kernel rows x architecture columns, then the runners and the failing cases."""
    sections = [_headline(merged["summary"]), _pivot(merged), _runners(merged["runners"]),
                _failure_list(merged["failures"])]
    return "\n\n".join(s for s in sections if s) + "\n"


def _headline(summary: Mapping[str, Any]) -> str:
    icon, word = {PASSED: ("✅", "passed"), FAILED: ("❌", "FAILED"), EMPTY: ("⚠️", "checked nothing")}[
        summary["status"]]
    return (f"## {icon} GPU memory safety across {summary['runners']} runners: {word}\n\n"
            f"{summary['total']} cases, {summary['failed']} failed.")


def _pivot(merged: Mapping[str, Any]) -> str:
    cells = {(c["kernel"], c["arch"]): c for c in merged["cells"]}
    archs = merged["archs"]
    rows = [(md_cell(kernel or "-"), *(_cell_text(cells.get((kernel, arch))) for arch in archs))
            for kernel in merged["kernels"]]
    head = ("kernel", *(md_cell(a or "-") for a in archs))
    return "### Kernel × architecture\n\n" + md_table(head, rows)


def _cell_text(cell: Mapping[str, Any] | None) -> str:
    if cell is None:
        return "not run"
    text = f"{verdict_badge(cell['verdict'])} ({plural(cell['cases'], 'case')}"
    text += f", {cell['failed']} failed)" if cell["failed"] else ")"
    for kind, word in (("overreads", "overread"), ("overwrites", "overwrite")):
        if cell[kind]["findings"]:
            text += f"<br>{plural(cell[kind]['findings'], word)}, {cell[kind]['bytes']:,} B"
    return text


_RUNNER_HEAD = ("runner", "GPUs", "arch", "driver", "compute-sanitizer", "torch", "triton", "triton_kernels",
                "cases", "failed")


def _runners(runners: Sequence[Mapping[str, Any]]) -> str:
    rows = [_runner_row(r) for r in runners]
    return "### Runners\n\n" + md_table(_RUNNER_HEAD, rows)


def _runner_row(runner: Mapping[str, Any]) -> tuple[str, ...]:
    env = runner["environment"]
    values = [env.get("gpus"), env.get("archs"), env.get("driver"), env.get("compute_sanitizer"),
              env.get("torch"), env.get("triton"), env.get("triton_kernels")]
    return (md_cell(runner["label"]), *(md_cell(env_text(v)) or "-" for v in values),
            str(runner["summary"]["total"]), str(runner["summary"]["failed"]))


def _failure_list(failures: Sequence[Mapping[str, str]]) -> str:
    if not failures:
        return ""
    lines = [f"- **{md_cell(f['id'])}** on {md_cell(f['runner'])} ({md_cell(f['arch'] or '-')}): "
             f"{f['outcome']}: {md_cell(_first_line(f['message']))}"
             for f in failures[:MARKDOWN_FAILURES_SHOWN]]
    hidden = len(failures) - MARKDOWN_FAILURES_SHOWN
    if hidden > 0:
        lines.append(f"- ... and {hidden} more in merged.json")
    return f"### Failing cases ({len(failures)})\n\n" + "\n".join(lines)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "(no message)"


# -------------------------------------------------------------------------------------------- main


def write_merged(merged: Mapping[str, Any], directory: str | os.PathLike[str]) -> dict[str, Path]:
    texts = {"json": report_json_text(merged), "markdown": render_merge_markdown(merged)}
    return {key: atomic_write_text(Path(directory) / MERGED_FILES[key], text) for key, text in texts.items()}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness merge",
        description="Merge report.json files from several runners into one kernel x architecture matrix.")
    parser.add_argument("reports", nargs="+", metavar="REPORT", help="report.json files, one per runner")
    parser.add_argument("-o", "--output", required=True, metavar="DIR",
                        help="directory for merged.json and merged.md")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m harness merge A.json B.json ... -o DIR`: 0 written, 2 on a bad file or usage."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage error (or --help)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        written = write_merged(merge_reports(args.reports), args.output)
    except ReportError as exc:
        print(f"harness merge: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"harness merge: error: cannot write to {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for path in written.values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
