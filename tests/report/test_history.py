"""Trends across nightly runs (gpu_memsafety.report.history, `gpu-memsafety history`): which cases changed outcome
and since which run, shards of one run counted once, unreadable files named, a plot of findings per kernel."""
from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.model import GUARD, MEMCHECK, CaseResult, DetectorRun, Outcome
from gpu_memsafety.report import build_report, shard_record, write_reports
from gpu_memsafety.report.history import ABSENT, History, find_reports, read_runs
from report_samples import ROOT, padding_overwrite, unpacked

SVG = "{http://www.w3.org/2000/svg}"


def result(case_id: str, outcome: Outcome, findings: int = 0, kernel: str = "k") -> CaseResult:
    return CaseResult(case_id=case_id, scenario=case_id.partition("[")[0], variant="v", params={}, kernel=kernel,
                      arch="sm_90", mode="both", outcome=outcome,
                      expected="a known overwrite" if outcome is Outcome.EXPECTED_FINDING else "clean",
                      findings=[padding_overwrite()] * findings, message=outcome.label,
                      detectors=[DetectorRun(GUARD, True, ""), DetectorRun(MEMCHECK, True, "")])


def night(folder: Path, day: int, results: list[CaseResult], *, shard: dict[str, Any] | None = None) -> Path:
    report = build_report(results, {"archs": ["sm_90"]}, started=f"2026-11-{day:02d}T03:00:00Z",
                          finished=f"2026-11-{day:02d}T04:00:00Z", argv=["make", "sanitize"],
                          run_id=f"202611{day:02d}T030000Z-0000000{day % 10}", shard=shard)
    write_reports(report, folder)
    return folder / "report.json"


def nights(tmp_path: Path) -> Path:
    """Four nights: a case that regressed on night 3, a known bug that went clean on night 2, a case added on
    night 4, and night 4 run as two shards."""
    base = tmp_path / "nightly"
    night(base / "n1", 1, [result("a[x]", Outcome.CLEAN), result("b[x]", Outcome.EXPECTED_FINDING, 1, "kb")])
    night(base / "n2", 2, [result("a[x]", Outcome.CLEAN), result("b[x]", Outcome.UNEXPECTEDLY_CLEAN, 0, "kb")])
    night(base / "n3", 3, [result("a[x]", Outcome.FINDING, 2), result("b[x]", Outcome.UNEXPECTEDLY_CLEAN, 0, "kb")])
    night(base / "n4a", 4, [result("a[x]", Outcome.FINDING, 2)], shard=shard_record(1, 2, "night-4"))
    night(base / "n4b", 4, [result("b[x]", Outcome.UNEXPECTEDLY_CLEAN, 0, "kb"), result("c[x]", Outcome.CLEAN)],
          shard=shard_record(2, 2, "night-4"))
    return base


def test_changes_name_the_run_each_outcome_started_in_and_the_one_before(tmp_path: Path) -> None:
    runs, problems = read_runs(find_reports([nights(tmp_path)]))
    assert problems == [] and [r.key for r in runs][-1] == "night-4" and len(runs) == 4
    history = History(runs)
    assert history.timeline("c[x]") == [ABSENT, ABSENT, ABSENT, "clean"]
    changes = {c.case: c for c in history.changes()}
    assert set(changes) == {"a[x]", "b[x]", "c[x]"}
    a, b = changes["a[x]"], changes["b[x]"]
    assert (a.now, a.since.started[:10], a.before, a.before_since.started[:10], a.runs_ago) == (
        "finding", "2026-11-03", "clean", "2026-11-01", 2)
    assert (b.now, b.since.started[:10], b.before, b.runs_ago) == ("unexpectedly clean", "2026-11-02", "expected finding", 3)
    text = history.render()
    assert ("  clean -> finding since run 2026-11-03 03:00 (20261103T030000Z-00000003) (the last 2 runs; clean since run "
            "2026-11-01 03:00 (20261101T030000Z-00000001)), 1 case:\n      a[x]\n") in text
    assert "  absent -> clean since run 2026-11-04 03:00 (night-4) (the last run; absent since run" in text
    assert text.startswith("4 runs, 2026-11-01 03:00") and "3 cases changed outcome:" in text


def test_the_plot_has_a_line_per_kernel_over_the_runs(tmp_path: Path) -> None:
    runs, _ = read_runs(find_reports([nights(tmp_path)]))
    svg = History(runs).plot_svg()
    root = ET.fromstring(svg)
    lines = list(root.iter(f"{SVG}polyline"))
    assert len(lines) == 2                               # kernels k and kb
    texts = "".join(root.itertext())
    assert "Findings per kernel over 4 runs" in texts and "kb" in texts and "11-03 03:00" in texts


def test_unreadable_files_are_named_and_a_run_that_did_not_finish_is_said(tmp_path: Path) -> None:
    base = nights(tmp_path)
    (base / "broken").mkdir()
    (base / "broken" / "report.json").write_text("{not json")
    started = build_report([], {}, started="2026-11-05T03:00:00Z", finished="", argv=["make"], run_id="20261105T030000Z-5",
                           interrupted="the run has not finished")
    write_reports(started, base / "n5")
    runs, problems = read_runs(find_reports([base]))
    assert len(problems) == 1 and "broken/report.json" in problems[0]
    assert "run 2026-11-05 03:00 (20261105T030000Z-5) did not finish" in History(runs).render()


@pytest.mark.e2e
def test_the_command_prints_the_changes_writes_the_plot_and_fails_on_an_unreadable_file(tmp_path: Path) -> None:
    base = nights(tmp_path)
    plot = tmp_path / "trend.svg"
    run = [sys.executable, "-m", "gpu_memsafety", "history", str(base), "--plot", str(plot)]
    proc = subprocess.run(run, capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "3 cases changed outcome:" in proc.stdout and f"plot: {plot}" in proc.stdout
    ET.fromstring(plot.read_text())
    (base / "junk.json").write_text("[]")
    proc = subprocess.run(run[:4] + [str(base / "junk.json"), str(base / "n1" / "report.json"), "--no-plot"],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert proc.returncode == 1 and "junk.json" in proc.stderr and proc.stdout.startswith("1 run, ")


def test_the_committed_h200_reports_read_as_a_history() -> None:
    reports = [unpacked("run10-matrix-x2-midsession-matrix"), unpacked("run12-make-sanitize-final-matrix"),
               unpacked("run15-cover-matrix-matrix-all")]
    runs, problems = read_runs(reports)
    assert problems == [] and len(runs) == 3
    history = History(runs)
    changes = {c.case: c for c in history.changes()}
    # run 12 saw a finding in this sweep case that run 15 expects (the expectation was calibrated in between)
    swept = changes["last_expert_oob_read[unpadded-tkA-sweep-K2752-E4-N256]"]
    assert (swept.before, swept.now, swept.since.key) == ("finding", "expected finding", runs[-1].key)
    root = ET.fromstring(history.plot_svg())
    legend = "".join(root.itertext())
    assert len(history.kernels()) > 5 and all(k in legend for k in history.kernels())   # a legend line per kernel
    assert list(root.iter(f"{SVG}polyline"))      # kernels seen in several runs are lines
