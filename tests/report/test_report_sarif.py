"""report.sarif (gpu_memsafety.report.sarif): valid SARIF 2.1.0 (checked against the schema in tests/data/sarif),
a rule per detector and kind, a result per finding at the kernel's line or the scenario's, known bugs and
accepted findings left out (counted in the run's properties: code scanning reads no suppressions), stale baseline
entries as notifications; SARIF 2.1.0 §3.27.23's rule that `suppressions` is on every result or on none, and the same
for `baselineState`, checked on every log."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gpu_memsafety.report import build_report, load_report
from gpu_memsafety.report.sarif import FINGERPRINT, ROOT_ID, render_sarif
from report_samples import EVIDENCE_REPORTS, MATRIX, RUN_ROOT, past_end_overread, sample_report
from repo_paths import DATA

SCHEMA = json.loads((DATA / "sarif" / "sarif-2.1.0.json").read_text())
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


def sarif(report: dict[str, Any]) -> dict[str, Any]:
    log = json.loads(render_sarif(report))
    errors = sorted(VALIDATOR.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    for run in log["runs"]:
        for prop in ("suppressions", "baselineState"):   # §3.27.23: on every result of a run, or on none
            having = {prop in result for result in run["results"]}
            assert len(having) <= 1, f"some results have {prop} and some do not"
    return log


def placeholder() -> dict[str, Any]:
    return build_report([], {}, started="2026-12-01T03:00:00Z", finished="", argv=["make", "sanitize"],
                        interrupted="the run has not finished")


@pytest.mark.parametrize("make", [lambda: sample_report(), lambda: sample_report(hostile=True), placeholder,
                                  *[(lambda p=p: load_report(p)) for p in EVIDENCE_REPORTS]],
                         ids=["sample", "hostile", "did-not-finish", *[p.parent.name for p in EVIDENCE_REPORTS]])
def test_every_report_gives_a_log_the_sarif_schema_accepts(make: Any) -> None:
    log = sarif(make())
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1


def test_rules_per_detector_and_kind_and_one_result_per_finding_or_failing_case() -> None:
    report = sample_report()
    run = sarif(report)["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rules == sorted(["guard/overwrite", "memcheck/overread", "outcome/unexpectedly-clean"])
    findings = sum(len(c["findings"]) for c in report["cases"] if c["failed"])     # known ones are left out
    assert len(run["results"]) == findings + 1          # + the unexpectedly clean case, which has no finding
    for result in run["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]


def _result(run: dict[str, Any], case: str, rule: str) -> dict[str, Any]:
    return next(r for r in run["results"] if r["properties"]["case"] == case and r["ruleId"] == rule)


def test_a_failing_finding_is_an_error_at_the_kernels_line_or_else_at_the_scenario() -> None:
    run = sarif(sample_report())["runs"][0]
    kernel = _result(run, "oob_read[tail-K2880]", "memcheck/overread")
    assert kernel["level"] == "error" and "suppressions" not in kernel
    place = kernel["locations"][0]
    assert place["physicalLocation"] == {"artifactLocation": {"uri": "kernels/matmul.py", "uriBaseId": ROOT_ID},
                                         "region": {"startLine": 371}}
    assert place["logicalLocations"][0]["name"] == "w_scale"
    assert kernel["partialFingerprints"][FINGERPRINT] == f"oob_read[tail-K2880]|{past_end_overread().key()}"
    assert kernel["properties"]["ranges"][0]["logical"] == "expert 3, k group 90..91"
    guard = _result(run, "stray_store[bad-n4]", "guard/overwrite")    # no source line: the scenario's definition
    assert guard["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "scenarios/stray_store.py"
    assert guard["locations"][0]["physicalLocation"]["region"] == {"startLine": 40}
    clean = _result(run, "oob_read[gone-K2880]", "outcome/unexpectedly-clean")
    assert clean["level"] == "error" and "expected but not seen" in clean["message"]["text"]
    assert run["originalUriBaseIds"][ROOT_ID]["uri"] == f"file://{RUN_ROOT}/"


def test_known_bugs_and_accepted_findings_are_left_out_and_counted() -> None:
    """Code scanning ignores `suppressions` (and `baselineState`): a known bug in the results would be an open
    alert. None is there; the run's properties count them and name their cases."""
    run = sarif(sample_report())["runs"][0]
    cases = {r["properties"]["case"] for r in run["results"]}
    assert "oob_read[known-K2880]" not in cases and "stray_store[accepted-n4]" not in cases
    assert not any("suppressions" in r or "baselineState" in r for r in run["results"])
    known = run["properties"]["knownFindings"]
    assert known["count"] >= 2 and {"oob_read[known-K2880]", "stray_store[accepted-n4]"} <= set(known["cases"])
    assert all(r["level"] == "error" for r in run["results"])


def test_stale_baseline_entries_are_tool_notifications_at_the_baseline_file() -> None:
    invocation = sarif(sample_report())["runs"][0]["invocations"][0]
    [note] = invocation["toolExecutionNotifications"]
    assert note["level"] == "warning" and "stale baseline entry: stray_store[removed-n4]" in note["message"]["text"]
    assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "memsafety-baseline.json"
    assert invocation["executionSuccessful"] is True


def test_the_h200_matrix_of_known_bugs_opens_no_alert() -> None:
    report = load_report(MATRIX)
    run = sarif(report)["runs"][0]
    assert run["results"] == []                               # a passing run: nothing new
    assert run["properties"]["knownFindings"]["count"] == sum(len(c["findings"]) for c in report["cases"]) > 50


def test_hostile_text_stays_text() -> None:
    text = render_sarif(sample_report(hostile=True))
    assert "\x1b" not in text and "\u202e" not in text and "\\\\x1b" in text   # control characters shown as escapes
