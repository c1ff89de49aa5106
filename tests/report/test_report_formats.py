"""What issue 28 added to every format: JUnit's file, line and properties, the finding keys in report.json, the
baseline's accepted findings ("accepted: <reason>") and stale entries in each rendering, the full report set."""
from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import junitparser
import pytest

from gpu_memsafety.report import (REPORT_FILES, ReportError, build_report, render_junit, render_markdown,
                                  render_terminal, validate_report, write_reports)
from gpu_memsafety.report.html import render_html
from report_samples import padding_overwrite, past_end_overread, sample_report
from repo_paths import ROOT


def junit_cases(xml: str) -> dict[str, ET.Element]:
    return {c.get("name", ""): c for c in ET.fromstring(xml).iter("testcase")}


def props(case: ET.Element) -> dict[str, str]:
    return {p.get("name", ""): p.get("value", "") for p in case.iter("property")}


def test_every_junit_testcase_has_file_line_and_its_kernel_arch_and_upstream() -> None:
    xml = render_junit(sample_report())
    cases = junit_cases(xml)
    scenario_cases = {k: v for k, v in cases.items() if not k.startswith("stale: ")}
    assert len(scenario_cases) == 6
    for name, case in scenario_cases.items():
        assert case.get("file") and int(case.get("line", "0")) >= 1, name
    assert (cases["oob_read[tail-K2880]"].get("file"), cases["oob_read[tail-K2880]"].get("line")) == ("kernels/matmul.py", "371")
    assert (cases["stray_store[bad-n4]"].get("file"), cases["stray_store[bad-n4]"].get("line")) == ("scenarios/stray_store.py", "40")
    known = props(cases["oob_read[known-K2880]"])
    assert known == {"kernel": "matmul_k", "arch": "sm_90", "upstream.source": "triton_kernels from sgl-kernel 0.3.21",
                     "upstream.version": "0.3.21", "upstream.issue": "triton-lang/triton#10772"}
    assert props(cases["stray_store[accepted-n4]"])["baseline"] == "accepted: fix pending (upstream sgl-project/sglang#1)"
    # the bytes junit.xml holds: lxml, which junitparser uses where installed, refuses a str declaring an encoding
    parsed = junitparser.JUnitXml.fromstring(xml.encode("utf-8"))
    assert sum(1 for suite in parsed for _ in suite) == 7


def test_junit_lists_stale_baseline_entries_as_skipped_tests_and_counts_them() -> None:
    root = ET.fromstring(render_junit(sample_report()))
    [suite] = [s for s in root.iter("testsuite") if s.get("name") == "baseline"]
    [case] = list(suite.iter("testcase"))
    assert case.get("name", "").startswith("stale: stray_store[removed-n4]") and case.get("file") == "memsafety-baseline.json"
    assert "no such case any more" in case.find("skipped").get("message", "")
    assert root.get("tests") == str(sum(int(s.get("tests", "0")) for s in root.iter("testsuite")))
    assert root.get("skipped") == str(sum(int(s.get("skipped", "0")) for s in root.iter("testsuite")))


@pytest.mark.parametrize("render", [render_terminal, render_markdown, render_html], ids=["terminal", "markdown", "html"])
def test_accepted_findings_read_accepted_with_their_reason_and_stale_entries_are_listed(render) -> None:
    text = render(sample_report())
    assert "accepted: fix pending" in text
    assert "removed-n4" in text and "stale" in text    # (Markdown escapes the brackets)
    assert "known bug: clean" not in text


def test_an_accepted_case_is_not_listed_among_the_known_bugs() -> None:
    terminal = render_terminal(sample_report())
    known = terminal.split("Known bugs", 1)[1].split("\n\n", 1)[0]
    assert "matmul_k" in known and "store_k" not in known
    assert "Accepted by the baseline, 1 case:\n  stray_store[accepted-n4] (sm_90): accepted: fix pending" in terminal


def test_each_finding_in_report_json_carries_its_baseline_key_and_an_edited_key_is_refused() -> None:
    report = sample_report()
    keys = [f["key"] for c in report["cases"] for f in c["findings"]]
    assert padding_overwrite().key() in keys and past_end_overread().key() in keys
    edited = copy.deepcopy(report)
    edited["cases"][0]["findings"][0]["key"] = "guard:overwrite:store_k:scale:row_padding:999"
    with pytest.raises(ReportError, match=r"cases\[0\].findings\[0\].key: is .* but the finding's fields give"):
        validate_report(edited)


@pytest.mark.parametrize("path,value,problem", [
    (("run", "baseline", "stale"), "x", "expected array"),
    (("run", "baseline", "entries"), -1, "negative count"),
    (("run", "scenarios", "oob_read", "line"), "12", "expected integer"),
    (("run", "root"), 1, "expected string"),
])
def test_the_new_run_records_are_type_checked(path: tuple[str, ...], value: object, problem: str) -> None:
    report = copy.deepcopy(sample_report())
    target = report
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ReportError, match=problem):
        validate_report(report)


def test_the_set_has_every_format_even_for_a_run_that_has_not_finished(tmp_path: Path) -> None:
    written = write_reports(sample_report(), tmp_path / "done")
    assert set(written) == set(REPORT_FILES) == {"json", "junit", "markdown", "sarif", "html", "codequality"}
    assert all(p.is_file() and p.stat().st_size > 0 for p in written.values())
    started = build_report([], {}, started="2026-12-01T03:00:00Z", finished="", argv=["make", "sanitize"],
                           interrupted="the run has not finished")
    placeholder = write_reports(started, tmp_path / "started")
    assert "did not finish" in placeholder["html"].read_text()
    [issue] = json.loads(placeholder["codequality"].read_text())          # never an empty, green list
    assert (issue["check_name"], issue["severity"]) == ("run/interrupted", "blocker")
    assert issue["description"].startswith("did not finish: run ")
    invocation = json.loads(placeholder["sarif"].read_text())["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert invocation["toolExecutionNotifications"][0]["level"] == "error"


def test_the_published_json_schema_accepts_the_new_fields() -> None:
    import jsonschema
    schema = json.loads((ROOT / "docs" / "report.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    report = sample_report()
    jsonschema.validate(report, schema)
    report["run"]["baseline"]["stale"][0].pop("why")
    with pytest.raises(jsonschema.ValidationError, match="'why' is a required property"):
        jsonschema.validate(report, schema)
