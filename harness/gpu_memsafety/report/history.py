"""Trends across runs: which cases changed outcome and since which run, and findings per kernel over time.

A nightly job leaves one report a night (or one per shard: shards of one run, told apart by `run.shard.group`,
count as one run). `read_runs` loads them (files, or folders searched for report.json), refusing none
silently: a file that cannot be read is listed with the reason, a run that did not finish is a run with no
results. `History` orders the runs by start time and, for each case, finds where its outcome last changed:
"unexpectedly clean since run R (date); before: expected finding (since run Q)". `plot_svg` draws the
findings of each kernel per run (gpu_memsafety.report.svg.line_plot).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from gpu_memsafety.report.document import unchecked_reasons
from gpu_memsafety.report.load import ReportError, load_report
from gpu_memsafety.report.render import plural, visible
from gpu_memsafety.report.svg import line_plot

REPORT_NAME = "report.json"
ABSENT = "absent"      # the case was not in that run


@dataclass
class Run:
    key: str                                   # run id, or the shard group of a sharded run
    started: str
    files: list[str] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)        # case id -> outcome label
    findings: dict[str, int] = field(default_factory=dict)        # kernel -> findings
    finished: bool = True
    shards: set[int] = field(default_factory=set)
    shard_count: int = 0
    unchecked: list[str] = field(default_factory=list)           # report.unchecked_reasons of its files

    @property
    def label(self) -> str:
        """'2026-11-30 03:00 (20261130T030000Z-1a2b3c4d)': when, then which."""
        when = self.started.replace("T", " ")[:16] if self.started else "?"
        return f"{when} ({self.key})"

    @property
    def missing_shards(self) -> list[int]:
        return [i for i in range(1, self.shard_count + 1) if i not in self.shards]


@dataclass(frozen=True)
class Change:
    case: str
    now: str            # outcome label, or ABSENT
    since: Run          # the first run of the current streak
    before: str
    before_since: Run
    runs_ago: int       # how many runs the current streak has lasted


def find_reports(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given; folders searched (recursively) for report.json, in sorted order; each file once."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        found += sorted(path.rglob(REPORT_NAME)) if path.is_dir() else [path]
    return list(dict.fromkeys(found))


def read_runs(paths: Sequence[Path]) -> tuple[list[Run], list[str]]:
    """The runs of these reports, oldest first, and one line per file that could not be read."""
    runs: dict[str, Run] = {}
    problems: list[str] = []
    for path in paths:
        try:
            report = load_report(path)
        except ReportError as exc:
            problems.append(str(exc))
            continue
        _add(runs, report, str(path))
    return sorted(runs.values(), key=lambda r: (r.started, r.key)), problems


def _add(runs: dict[str, Run], report: Mapping[str, Any], file: str) -> None:
    meta = report["run"]
    shard = meta.get("shard") if isinstance(meta.get("shard"), Mapping) else None
    key = str((shard or {}).get("group") or meta.get("id") or file)
    run = runs.setdefault(key, Run(key, str(meta.get("started") or "")))
    run.files.append(file)
    run.started = min(filter(None, [run.started, str(meta.get("started") or "")]), default="")
    run.finished = run.finished and bool(meta.get("finished"))
    run.unchecked += unchecked_reasons(report)
    if shard:
        run.shards.add(int(shard["index"]))
        run.shard_count = max(run.shard_count, int(shard["count"]))
    for case in report["cases"]:
        run.outcomes[case["id"]] = case["outcome"]
        run.findings[case["kernel"]] = run.findings.get(case["kernel"], 0) + len(case["findings"])
    for case_id in report.get("not_run", []):
        run.outcomes.setdefault(case_id, "not started")


class History:
    def __init__(self, runs: Sequence[Run]) -> None:
        self.runs = list(runs)

    @property
    def cases(self) -> list[str]:
        return sorted({c for r in self.runs for c in r.outcomes})

    def timeline(self, case: str) -> list[str]:
        return [r.outcomes.get(case, ABSENT) for r in self.runs]

    def changes(self) -> list[Change]:
        """Cases whose outcome in the last run differs from an earlier run's, most recent change first."""
        out = []
        for case in self.cases:
            line = self.timeline(case)
            start = _streak_start(line, len(line) - 1)
            if start == 0:
                continue
            before_start = _streak_start(line, start - 1)
            out.append(Change(case, line[-1], self.runs[start], line[start - 1], self.runs[before_start],
                              len(line) - start))
        return sorted(out, key=lambda c: (c.runs_ago, c.case))

    def kernels(self) -> list[str]:
        return sorted({k for r in self.runs for k in r.findings})

    def plot_svg(self) -> str:
        series = {k: [r.findings.get(k) for r in self.runs] for k in self.kernels()}   # None: no case of it ran
        labels = [r.started[5:16].replace("T", " ") or r.key for r in self.runs]   # "11-30 03:00"
        return line_plot(f"Findings per kernel over {len(self.runs)} runs", labels, series)

    def render(self) -> str:
        """The runs compared, runs that did not finish or miss shards, then the changes grouped by what changed
        (from which outcome to which, since which run), each group's cases one a line."""
        if not self.runs:
            return "no run to compare\n"
        first, last = self.runs[0], self.runs[-1]
        lines = [f"{plural(len(self.runs), 'run')}, {first.label} .. {last.label}; {plural(len(self.cases), 'case')}"]
        for run in self.runs:
            if not run.finished:
                lines.append(f"  run {run.label} did not finish: its cases have no result there")
            lines += [f"  run {run.label}: {why}" for why in dict.fromkeys(run.unchecked)]
            if run.missing_shards:
                lines.append(f"  run {run.label}: shard(s) {', '.join(map(str, run.missing_shards))} of "
                             f"{run.shard_count} missing: their cases read as absent")
        changes = self.changes()
        if not changes:
            lines.append(f"no case changed outcome over these runs (last run: {last.label})")
            return _shown(lines)
        groups: dict[tuple[str, str, str, str], list[Change]] = {}
        for change in changes:
            groups.setdefault((change.before, change.now, change.since.key, change.before_since.key), []).append(change)
        lines.append(f"{plural(len(changes), 'case')} changed outcome:")
        for members in groups.values():
            c = members[0]
            lasted = "the last run" if c.runs_ago == 1 else f"the last {c.runs_ago} runs"
            lines.append(f"  {c.before} -> {c.now} since run {c.since.label} ({lasted}; {c.before} since run "
                         f"{c.before_since.label}), {plural(len(members), 'case')}:")
            lines += [f"      {m.case}" for m in members]
        return _shown(lines)


def _shown(lines: Sequence[str]) -> str:
    """Every line from a report's own text (run ids, case ids, outcomes of a forged file) made one visible line."""
    return "".join(visible(line, newlines=False) + "\n" for line in lines)


def _streak_start(line: Sequence[str], end: int) -> int:
    """The first index of the run of equal values that ends at `end`."""
    start = end
    while start > 0 and line[start - 1] == line[end]:
        start -= 1
    return start
