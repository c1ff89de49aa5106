"""Every command that judges a report reads its status (report.unchecked_reasons): a report that was interrupted,
checked nothing or failed through a crashed case never reads as nothing to report."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_memsafety.cli import baseline as baseline_cli
from gpu_memsafety.cli import history as history_cli
from gpu_memsafety.cli import render as render_cli
from gpu_memsafety.judge.baseline import BASELINE_SCHEMA
from gpu_memsafety.model import MEMCHECK, CaseResult, DetectorRun, Outcome
from gpu_memsafety.report import build_report, report_json_text
from gpu_memsafety.report.merge import main as merge_main

CLEAN_ID = "planted_oob[clean-triton]"


def result(case_id: str, outcome: Outcome) -> CaseResult:
    return CaseResult(case_id=case_id, scenario=case_id.partition("[")[0], variant="", params={}, kernel="k",
                      arch="sm_90", mode="memcheck", outcome=outcome, expected="clean", findings=[],
                      detectors=[DetectorRun(MEMCHECK, outcome is not Outcome.UNSUPPORTED, "")])


def write(path: Path, results: list[CaseResult], **kwargs) -> Path:
    path.write_text(report_json_text(build_report(results, {"hostname": path.stem, "archs": ["sm_90"]},
                                                  started="2026-12-01T00:00:00", finished="2026-12-01T00:01:00",
                                                  argv=[], run_id=path.stem, **kwargs)))
    return path


def empty_baseline(tmp: Path) -> Path:
    path = tmp / "baseline.json"
    path.write_text(json.dumps({"schema": BASELINE_SCHEMA, "accepted": []}))
    return path


HOSTILE = {
    "interrupted": ([result(CLEAN_ID, Outcome.CLEAN)], {"interrupted": "SIGTERM", "not_run": ["other[x]"]},
                    "interrupted"),
    "empty": ([result(CLEAN_ID, Outcome.UNSUPPORTED)], {}, "checked nothing"),
    "crashed": ([result(CLEAN_ID, Outcome.CLEAN), result("other[x]", Outcome.CRASHED)], {}, "other[x] (crashed)"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_baseline_check_fails_a_report_that_did_not_check_everything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    results, kwargs, why = HOSTILE[name]
    report = write(tmp_path / "report.json", results, **kwargs)
    assert baseline_cli.main(["check", str(report), "--baseline", str(empty_baseline(tmp_path))]) == 1
    err = capsys.readouterr().err
    assert why in err and "the baseline check fails" in err


def test_baseline_check_passes_a_complete_clean_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = write(tmp_path / "report.json", [result(CLEAN_ID, Outcome.CLEAN)])
    assert baseline_cli.main(["check", str(report), "--baseline", str(empty_baseline(tmp_path))]) == 0
    assert "nothing to report" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["interrupted", "empty"])
def test_baseline_write_refuses_a_report_that_did_not_check_everything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    results, kwargs, why = HOSTILE[name]
    report = write(tmp_path / "report.json", results, **kwargs)
    out = tmp_path / "new-baseline.json"
    assert baseline_cli.main(["write", str(report), "-o", str(out)]) == 1
    assert not out.exists() and why in capsys.readouterr().err


@pytest.mark.parametrize("name", ["interrupted", "empty"])
def test_merge_render_and_history_say_the_status(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 name: str) -> None:
    results, kwargs, why = HOSTILE[name]
    report = write(tmp_path / "report.json", results, **kwargs)
    assert merge_main([str(report), "-o", str(tmp_path / "merged")]) == 1
    assert {"interrupted": "interrupted: 1 case(s) never started",
            "empty": "checked nothing"}[name] in capsys.readouterr().err
    assert render_cli.main([str(report), "-o", str(tmp_path / "rendered")]) == 1
    assert why in capsys.readouterr().err
    assert history_cli.main([str(report), "--no-plot"]) == 0
    assert why in capsys.readouterr().out
