"""Merge report.json files from several runners (H100, B200, ...) or shards into one kernel x architecture matrix.

Nightly CI runs the same cases on machines of different architectures, or one matrix split into shards;
each writes its own report.json as an artifact. People want one table: a row per kernel, a column per
architecture, each cell the worst verdict any runner gave there.

The inputs are artifacts from other machines, so each is validated by load_report (structure, JSON, schema,
fields, stored summary against its cases) and only ever opened: no path from the command line or inside a
file reaches a shell, and nothing inside a file is followed. Every number in the merge is recomputed from the
cases, never taken from a file's summary or matrix. One file given twice (under another name, a hard or
symbolic link, or a copy: the run id tells) is refused, since its cases would count twice; so is a case id in two
reports of one architecture (a full run with its own shards: `_reject_repeated_cases`), a file that lists one case
twice (load_report), or one whose case contradicts itself (a `clean` case with findings). Shards
carry `run.shard` with the manifest of their run (gpu_memsafety.report.manifest): a group of shards is merged as
complete only when their manifests agree (mode, cover, matrix, harness version and commit, cost data, count) and
every case of the matrix ran in exactly one of them; otherwise the merge is "incomplete" (a shard or a case
missing) or "inconsistent" (a case twice, a disagreement, a shard without a manifest), every problem is named,
the table says so, and the exit status is 1. The outputs are written as one set (merged.json, merged.md), never
half.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence, TypedDict

from gpu_memsafety.util.pathargs import arg_type, output_dir
from gpu_memsafety.util.fsutil import atomic_write_set
from gpu_memsafety.report import manifest
from gpu_memsafety.report import (
    EMPTY,
    FAILED,
    INTERRUPTED,
    PASSED,
    KindTotals,
    ReportError,
    cases_from_report,
    environment_pairs,
    gpus_text,
    join_reasons,
    load_report,
    matrix,
    md_details,
    md_table,
    md_text,
    plural,
    report_json_text,
    runner_arch,
    sanitizer_searched,
    sanitizer_text,
    summarize,
    verdict_badge,
    visible,
    worst_verdict,
)
from gpu_memsafety.report.render import first_line, kind_count, matrix_kinds

MERGED_SCHEMA = "gpu-memsafety-merged/1"
MERGED_FILES = {"json": "merged.json", "markdown": "merged.md"}
INCOMPLETE, INCONSISTENT = "incomplete", "inconsistent"
# Failing cases listed in merged.md before pointing at merged.json (GitHub's 1 MiB summary cap).
MARKDOWN_FAILURES_SHOWN = 50


class Cell(TypedDict):
    kernel: str
    arch: str
    verdict: str
    reason: str          # why nothing of the cell ran on any runner ("" when something did)
    cases: int
    failed: int
    overreads: KindTotals
    overwrites: KindTotals
    kinds: dict[str, KindTotals]
    runners: list[str]


@dataclass(frozen=True)
class Loaded:
    path: Path
    report: dict[str, Any]
    label: str = ""


def merge_reports(paths: Sequence[str | os.PathLike[str]]) -> dict[str, Any]:
    """Load and validate every report, then merge; raises ReportError naming the first bad file."""
    if not paths:
        raise ReportError("<arguments>", "no report files to merge")
    _reject_same_file(paths)
    loaded = [Loaded(Path(p), load_report(p)) for p in paths]
    _reject_same_run(loaded)
    _reject_repeated_shards(loaded)
    _reject_repeated_cases(loaded)
    loaded = _labelled(loaded)
    cells = merge_cells([(item.label, item.report) for item in loaded])
    shards = manifest.check([(str(item.path), item.report) for item in loaded])
    return {
        "schema": MERGED_SCHEMA,
        "runners": [_runner(item) for item in loaded],
        "kernels": sorted({c["kernel"] for c in cells}),
        "archs": sorted({c["arch"] for c in cells}),
        "cells": cells,
        "failures": [f for item in loaded for f in _failures(item.label, item.report)],
        "cases": sorted(({"id": c["id"], "outcome": c["outcome"], "kernel": c["kernel"], "arch": c["arch"],
                          "runner": item.label} for item in loaded for c in item.report["cases"]),
                        key=lambda c: (c["id"], c["runner"])),
        "missing_shards": shards.missing_shards,
        "shards": shards.to_json(),
        "summary": _summary([item.report for item in loaded], shards),
    }


def _reject_same_file(paths: Sequence[str | os.PathLike[str]]) -> None:
    """One file under two names (the same path twice, a symbolic or a hard link) would count its cases twice."""
    seen: dict[tuple[int, int], str | os.PathLike[str]] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue  # load_report names the problem
        key = (info.st_dev, info.st_ino)
        if key in seen:
            raise ReportError(path, f"is the same file as {os.fspath(seen[key])} (given twice, or a link to it); "
                                    "its cases would be counted twice")
        seen[key] = path


def _reject_same_run(loaded: Sequence[Loaded]) -> None:
    """A copy of a report has the same run id (and shard): refuse it too."""
    seen: dict[tuple[str, Any], Path] = {}
    for item in loaded:
        run = item.report["run"]
        if not run.get("id"):
            continue  # reports from before run ids
        shard = run.get("shard") or {}
        key = (run["id"], (shard_group(shard), shard.get("index")) if shard else None)
        if key in seen:
            raise ReportError(item.path, f"is the same run as {seen[key]} (run id {run['id']}"
                                         f"{_shard_text(shard)}); its cases would be counted twice")
        seen[key] = item.path


def _reject_repeated_shards(loaded: Sequence[Loaded]) -> None:
    """Two reports claiming the same shard of one group (a rerun beside the first run) would count it twice."""
    seen: dict[tuple[str, int], Path] = {}
    for item in loaded:
        shard = item.report["run"].get("shard")
        if not shard:
            continue
        key = (shard_group(shard), shard["index"])
        if key in seen:
            raise ReportError(item.path, f"is shard {shard['index']}/{shard['count']}{_group_text(key[0])} again "
                                         f"(so is {seen[key]}); give one report per shard")
        seen[key] = item.path


# Case ids a repeated-case error names before "and N more".
REPEATED_SHOWN = 5


def _reject_repeated_cases(loaded: Sequence[Loaded]) -> None:
    """One record per case and architecture: a case id in two reports of one architecture (a full run merged with
    its own shards, one shard cut twice, two runs of one machine) would count twice, or keep a crash beside a pass.
    Refused even when both records agree: which of the two stands is not the merge's to choose."""
    seen: dict[tuple[str, str], Path] = {}
    repeated: dict[tuple[Path, Path], list[str]] = {}
    for item in loaded:
        fallback = runner_arch(item.report["environment"])
        records = [(c["id"], c["arch"] or fallback) for c in item.report["cases"]]
        records += [(cid, fallback) for cid in item.report.get("not_run", [])]
        for case_id, arch in records:
            first = seen.setdefault((case_id, arch), item.path)
            if first != item.path:
                repeated.setdefault((first, item.path), []).append(f"{case_id} ({arch or 'no architecture'})")
    if repeated:
        (first, second) = next(iter(repeated))
        ids = [case for cases in repeated.values() for case in cases]
        total = len(ids)
        more = f" and {total - REPEATED_SHOWN} more" if total > REPEATED_SHOWN else ""
        raise ReportError(second, f"{total} case(s) appear in two reports for the same architecture (also in "
                                  f"{first}): {', '.join(ids[:REPEATED_SHOWN])}{more}; merge either a full run or "
                                  "its shards, one report per shard, never both: each case once")


def shard_group(shard: Mapping[str, Any]) -> str:
    """What the shards of one run share: `group`, else `selection` (a digest of the case list that was cut)."""
    return str(shard.get("group") or shard.get("selection") or "")


def _group_text(group: str) -> str:
    return f" of group {group}" if group else ""


def _shard_text(shard: Mapping[str, Any]) -> str:
    if not shard:
        return ""
    return f", shard {shard['index']}/{shard['count']}{_group_text(shard_group(shard))}"


def _labelled(loaded: Sequence[Loaded]) -> list[Loaded]:
    """hostname (and shard), else the file name; repeated labels get '#2', '#3' so every runner stays distinct."""
    labels: list[str] = []
    for item in loaded:
        shard = item.report["run"].get("shard")
        base = str(item.report["environment"].get("hostname") or item.path.name)
        if shard:
            base += f" shard {shard['index']}/{shard['count']}"
        label, n = base, 1
        while label in labels:
            n += 1
            label = f"{base}#{n}"
        labels.append(label)
    return [Loaded(item.path, item.report, label) for item, label in zip(loaded, labels)]


def _runner(item: Loaded) -> dict[str, Any]:
    report = item.report
    return {"label": item.label, "file": str(item.path), "environment": report["environment"],
            "run": report["run"], "summary": _recomputed_summary(report)}


def _recomputed_summary(report: Mapping[str, Any]) -> dict[str, Any]:
    return summarize(cases_from_report(report), not_run=report.get("not_run", []),
                     interrupted=str(report["run"].get("interrupted") or ""))


def merge_cells(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Cell]:
    """Matrix rows recomputed from every report's cases, folded into one cell per (kernel, arch), sorted.

    A case without an architecture (not run: no GPU, no sanitizer) is counted on its runner's architecture
    when the runner has one, so cases that did not run never make an architecture column of their own."""
    cells: dict[tuple[str, str], Cell] = {}
    for label, report in reports:
        results = cases_from_report(report)
        for row in matrix(results, runner_arch(report["environment"])):
            key = (row["kernel"], row["arch"])
            cell = _cell(row, label)
            cells[key] = _fold(cells[key], cell) if key in cells else cell
    return [cells[key] for key in sorted(cells)]


def _cell(row: Mapping[str, Any], label: str) -> Cell:
    return {"kernel": row["kernel"], "arch": row["arch"], "verdict": row["verdict"], "reason": row["reason"],
            "cases": row["cases"],
            "failed": row["failed"], "overreads": dict(row["overreads"]),  # type: ignore[typeddict-item]
            "overwrites": dict(row["overwrites"]),  # type: ignore[typeddict-item]
            "kinds": {k: dict(v) for k, v in row["kinds"].items()}, "runners": [label]}  # type: ignore[misc]


def _fold(cell: Cell, other: Cell) -> Cell:
    kinds = {k: _add(cell["kinds"].get(k), other["kinds"].get(k)) for k in {**cell["kinds"], **other["kinds"]}}
    return {
        "kernel": cell["kernel"], "arch": cell["arch"],
        "verdict": worst_verdict([cell["verdict"], other["verdict"]]),
        "reason": join_reasons([cell["reason"], other["reason"]]) if cell["reason"] and other["reason"] else "",
        "cases": cell["cases"] + other["cases"], "failed": cell["failed"] + other["failed"],
        "overreads": _add(cell["overreads"], other["overreads"]),
        "overwrites": _add(cell["overwrites"], other["overwrites"]),
        "kinds": kinds,
        "runners": cell["runners"] + [r for r in other["runners"] if r not in cell["runners"]],
    }


def _add(a: Mapping[str, int] | None, b: Mapping[str, int] | None) -> KindTotals:
    zero = {"findings": 0, "bytes": 0, "accesses": 0}
    a, b = a or zero, b or zero
    return {"findings": a["findings"] + b["findings"], "bytes": a["bytes"] + b["bytes"],
            "accesses": a["accesses"] + b["accesses"]}


def _failures(label: str, report: Mapping[str, Any]) -> list[dict[str, str]]:
    failures = [{"runner": label, "id": c["id"], "kernel": c["kernel"], "arch": c["arch"],
                 "outcome": c["outcome"], "message": c["message"]} for c in report["cases"] if c["failed"]]
    failures += [{"runner": label, "id": case_id, "kernel": "", "arch": "", "outcome": "not started",
                  "message": "the run was interrupted before this case started"}
                 for case_id in report.get("not_run", [])]
    return failures


def _summary(reports: Sequence[Mapping[str, Any]], shards: manifest.ShardCheck) -> dict[str, Any]:
    summaries = [_recomputed_summary(r) for r in reports]
    statuses = {s["status"] for s in summaries}
    status = (INCONSISTENT if shards.inconsistent else INCOMPLETE if shards.incomplete or shards.missing_shards
              else INTERRUPTED if INTERRUPTED in statuses else FAILED if FAILED in statuses
              else PASSED if PASSED in statuses else EMPTY)
    return {"runners": len(reports), "total": sum(s["total"] for s in summaries),
            "failed": sum(s["failed"] for s in summaries), "ran": sum(s["ran"] for s in summaries),
            "skipped": sum(s["skipped"] for s in summaries), "not_run": sum(s["not_run"] for s in summaries),
            "status": status}


# ---------------------------------------------------------------------------------------- markdown

_STATUS = {PASSED: ("✅", "passed"), FAILED: ("❌", "FAILED"), EMPTY: ("⚠️", "checked nothing"),
           INTERRUPTED: ("❌", "interrupted"), INCOMPLETE: ("❌", "incomplete"),
           INCONSISTENT: ("❌", "inconsistent")}


def render_merge_markdown(merged: Mapping[str, Any]) -> str:
    """Headline, kernel rows x architecture columns, then the runners and the failing cases."""
    sections = [_headline(merged), _pivot(merged), _runners(merged["runners"]),
                _failure_list(merged["failures"])]
    return "\n\n".join(s for s in sections if s) + "\n"


def _headline(merged: Mapping[str, Any]) -> str:
    summary = merged["summary"]
    icon, word = _STATUS[summary["status"]]
    parts = [f"{summary['ran']:,} ran"]
    if summary["failed"]:
        parts.append(f"{summary['failed']:,} failed")
    if summary["skipped"] + summary["not_run"]:
        parts.append(f"{summary['skipped'] + summary['not_run']:,} not run")
    lines = [f"## {icon} GPU memory safety across {plural(summary['runners'], 'runner')} — {word}: "
             f"{', '.join(parts)}"]
    shards = merged.get("shards") or {}
    lines += [f"\n**Inconsistent:** {md_text(text)}" for text in shards.get("inconsistent", [])]
    lines += [f"\n**Incomplete:** {md_text(text)}" for text in shards.get("incomplete", [])]
    return "\n".join(lines)


def _pivot(merged: Mapping[str, Any]) -> str:
    cells = {(c["kernel"], c["arch"]): c for c in merged["cells"]}
    archs = merged["archs"]
    kinds = matrix_kinds(merged["cells"])
    rows = [(md_text(kernel or "-"), *(_cell_text(cells.get((kernel, arch)), kinds) for arch in archs))
            for kernel in merged["kernels"]]
    head = ("kernel", *(md_text(a or "no architecture") for a in archs))
    return "### Kernel × architecture\n\n" + md_table(head, rows)


def _cell_text(cell: Mapping[str, Any] | None, kinds: Sequence[str]) -> str:
    if cell is None:
        return "not run"
    text = f"{verdict_badge(cell['verdict'])} ({plural(cell['cases'], 'case')}"
    text += f", {cell['failed']} failed)" if cell["failed"] else ")"
    if cell.get("reason"):
        text += f": {md_text(cell['reason'])}"
    totals = {"overread": cell["overreads"], "overwrite": cell["overwrites"], **cell.get("kinds", {})}
    for kind in kinds:
        if kind in totals and totals[kind]["findings"]:
            text += f"<br>{md_text(kind_count(kind, totals[kind]['findings']))}, {totals[kind]['bytes']:,} B"
    return text


_RUNNER_HEAD = ("runner", "GPUs", "arch", "driver", "compute-sanitizer", "torch", "triton", "triton_kernels",
                "ran", "failed", "not run")


def _runners(runners: Sequence[Mapping[str, Any]]) -> str:
    rows = [_runner_row(r) for r in runners]
    sections = ["### Runners\n\n" + md_table(_RUNNER_HEAD, rows)]
    for runner in runners:
        searched = sanitizer_searched(runner["environment"].get("compute_sanitizer"))
        if searched:
            sections.append(md_details(f"{md_text(runner['label'])}: where compute-sanitizer was searched "
                                       f"({len(searched)} places)", "\n".join(f"- {md_text(p)}" for p in searched)))
    for runner in runners:
        body = "\n".join(f"- {md_text(k)}: {md_text(v)}" for k, v in
                         [("file", runner["file"]), ("run id", str(runner["run"].get("id", ""))),
                          ("started", runner["run"]["started"]), ("finished", runner["run"]["finished"]),
                          *environment_pairs(runner["environment"])] if v)
        sections.append(md_details(f"{md_text(runner['label'])}: run and environment", body))
    return "\n\n".join(sections)


def _runner_row(runner: Mapping[str, Any]) -> tuple[str, ...]:
    env, summary = runner["environment"], runner["summary"]
    values = [gpus_text(env.get("gpus")), _joined(env.get("archs")), env.get("driver"),
              sanitizer_text(env.get("compute_sanitizer")), env.get("torch"), env.get("triton"),
              env.get("triton_kernels")]
    return (md_text(runner["label"]), *(md_text(str(v)) if v else "-" for v in values),
            f"{summary['ran']:,}", f"{summary['failed']:,}", f"{summary['skipped'] + summary['not_run']:,}")


def _joined(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value or "")


def _failure_list(failures: Sequence[Mapping[str, str]]) -> str:
    if not failures:
        return ""
    lines = [f"- **{md_text(f['id'])}** on {md_text(f['runner'])} ({md_text(f['arch'] or '-')}): "
             f"{md_text(f['outcome'])}: {md_text(first_line(f['message']) or '(no message)')}"
             for f in failures[:MARKDOWN_FAILURES_SHOWN]]
    hidden = len(failures) - MARKDOWN_FAILURES_SHOWN
    if hidden > 0:
        lines.append(f"- ... and {hidden:,} more in merged.json")
    return f"### Failing cases ({len(failures):,})\n\n" + "\n".join(lines)


# -------------------------------------------------------------------------------------------- main


def write_merged(merged: Mapping[str, Any], directory: str | os.PathLike[str]) -> dict[str, Path]:
    """Render both files first, then write them as one set."""
    texts = {MERGED_FILES["json"]: report_json_text(merged), MERGED_FILES["markdown"]: render_merge_markdown(merged)}
    written = atomic_write_set(directory, texts)
    return {key: written[name] for key, name in MERGED_FILES.items()}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-memsafety merge",
        description="Merge report.json files from several runners or shards into one kernel x architecture "
                    "matrix. Exit status: 0 merged, 1 merged but incomplete or inconsistent (a shard or a case missing, "
                    "a case twice, shards of different runs, modes or matrices: each is named), a runner's report was "
                    "interrupted or no runner checked anything, 2 a bad file or usage.")
    parser.add_argument("reports", nargs="+", metavar="REPORT", help="report.json files, one per runner or shard")
    parser.add_argument("-o", "--output", required=True, metavar="DIR", type=arg_type(output_dir, "-o/--output"),
                        help="directory for merged.json and merged.md")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m gpu_memsafety merge A.json B.json ... -o DIR`: 0 written, 1 written but incomplete or inconsistent,
    2 on a bad file or usage."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage error (or --help)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        merged = merge_reports(args.reports)
        written = write_merged(merged, args.output)
    except ReportError as exc:
        print(f"harness merge: error: {visible(str(exc))}", file=sys.stderr)  # keys and values from the file
        return 2
    except OSError as exc:
        print(f"harness merge: error: cannot write to {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for path in written.values():
        print(path)
    for kind in (INCONSISTENT, INCOMPLETE):
        for text in merged["shards"][kind]:
            print(f"harness merge: {kind}: {visible(text)}", file=sys.stderr)
    # a runner cut short, or a merge that checked nothing, is no complete merge (one runner may check nothing:
    # every case of its architecture not applicable, say)
    unchecked = [f"{r['file']}: interrupted: {r['summary']['not_run']} case(s) never started" for r in merged["runners"]
                 if r["summary"]["status"] == INTERRUPTED]
    if merged["summary"]["status"] == EMPTY:
        unchecked.append("the merged runs checked nothing: no case ran on any runner")
    for why in unchecked:
        print(f"harness merge: not checked: {visible(why)}", file=sys.stderr)
    return 1 if merged["summary"]["status"] in (INCOMPLETE, INCONSISTENT) or unchecked else 0


if __name__ == "__main__":
    sys.exit(main())
