"""CI surfaces: GitHub Actions annotations and job summary (gpu_memsafety.report.annotations), GitLab's code-quality
report (gpu_memsafety.report.codequality)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from gpu_memsafety.report import render_markdown
from gpu_memsafety.report.annotations import command, emit_github, github_annotations
from gpu_memsafety.report.codequality import render_codequality
from report_samples import HOSTILE, sample_report

# ::level props::message, the props as key=value pairs: the shape GitHub parses.
WORKFLOW_COMMAND = re.compile(r"^::(error|warning)( (?P<props>[^:]*))?::(?P<message>.*)$")


def parse(line: str) -> tuple[str, dict[str, str], str]:
    match = WORKFLOW_COMMAND.match(line)
    assert match, line
    props = dict(p.split("=", 1) for p in (match["props"] or "").split(",") if p)
    return match.group(1), props, match["message"]


def test_one_error_per_failing_case_at_the_kernels_line_or_the_scenarios_and_a_warning_per_stale_entry() -> None:
    lines = github_annotations(sample_report())
    parsed = [parse(line) for line in lines]
    errors = [p for p in parsed if p[0] == "error"]
    assert len(errors) == 3                                   # two findings and an unexpectedly clean case
    by_title = {props["title"]: (props, message) for _, props, message in errors}
    kernel = next(v for k, v in by_title.items() if "oob_read[tail-K2880]" in k)
    assert (kernel[0]["file"], kernel[0]["line"]) == ("kernels/matmul.py", "371")
    assert "memcheck overread of w_scale past_end" in kernel[1]
    scenario = next(v for k, v in by_title.items() if "stray_store[bad-n4]" in k)
    assert (scenario[0]["file"], scenario[0]["line"]) == ("scenarios/stray_store.py", "40")
    clean = next(v for k, v in by_title.items() if "unexpectedly clean" in k)
    assert clean[0]["file"] == "scenarios/oob_read.py"
    [(_, props, message)] = [p for p in parsed if p[0] == "warning"]
    assert props["file"] == "memsafety-baseline.json" and "stray_store[removed-n4]" in message


def test_a_hostile_message_cannot_end_the_command_or_start_another() -> None:
    lines = github_annotations(sample_report(hostile=True))
    for line in lines:
        assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\u202e" not in line
        parse(line)
    text = "\n".join(lines)
    # the kernel name's literal '%0A::error::x': its '%' escaped, so GitHub shows it as text, never a new line
    assert "%250A::error::x" in text and "%0A::error::x" not in text.replace("%250A", "")
    assert command("error", "50%\nnext", title="a:b,c") == "::error title=a%3Ab%2Cc::50%25%0Anext"


def test_on_github_the_summary_is_appended_to_the_step_summary_and_elsewhere_nothing_happens(tmp_path: Path) -> None:
    report = sample_report()
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    printed: list[str] = []
    assert emit_github(report, printed.append, {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert printed == github_annotations(report)
    assert summary.read_text() == "earlier step\n" + render_markdown(report) + "\n"
    printed.clear()
    assert not emit_github(report, printed.append, {"GITHUB_STEP_SUMMARY": str(summary)})
    assert printed == [] and summary.read_text().count("GPU memory safety") == 1
    assert emit_github(report, printed.append, {"GITHUB_ACTIONS": "true"})     # no summary file: said, not silent
    assert printed[-1].startswith("::warning") and "GITHUB_STEP_SUMMARY is not set" in printed[-1]


def test_a_run_that_did_not_finish_or_checked_nothing_is_annotated_as_such() -> None:
    from gpu_memsafety.report import build_report
    started = build_report([], {}, started="2026-12-01T03:00:00Z", finished="", argv=["make"], run_id="r-1",
                           interrupted="the run has not finished")
    [line] = github_annotations(started)
    level, props, message = parse(line)
    assert level == "error" and props["title"] == "gpu-memsafety%3A did not finish" and message.startswith("did not finish: run r-1")
    nothing = build_report([], {}, started="2026-12-01T03:00:00Z", finished="2026-12-01T03:01:00Z", argv=["make"])
    [line] = github_annotations(nothing)
    assert parse(line)[0] == "warning" and "checked nothing" in line
    assert json.loads(render_codequality(nothing))[0]["check_name"] == "run/empty"


def test_gitlab_code_quality_lists_failures_known_bugs_and_stale_entries_with_stable_fingerprints() -> None:
    issues = json.loads(render_codequality(sample_report(hostile=True)))
    for issue in issues:
        assert set(issue) == {"description", "check_name", "fingerprint", "severity", "location", "content"}
        assert issue["content"]["body"] == "gpu-memsafety run 20261201T030000Z-0a1b2c3d"
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        assert issue["location"]["path"] and issue["location"]["lines"]["begin"] >= 1
        assert "\x1b" not in issue["description"]
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    by = {(i["check_name"], i["severity"]): i for i in issues}
    assert by[("memcheck/overread", "critical")]["location"] == {"path": "kernels/matmul.py", "lines": {"begin": 371}}
    assert by[("outcome/unexpectedly-clean", "major")]["location"]["path"] == "scenarios/oob_read.py"
    assert by[("baseline/stale", "minor")]["location"]["path"] == "memsafety-baseline.json"
    infos = [i for i in issues if i["severity"] == "info"]
    assert len(infos) == 2 and any("accepted: fix pending" in i["description"] for i in infos)
    assert any("known bug" in i["description"] for i in infos)
    again = json.loads(render_codequality(sample_report(hostile=True)))
    assert [i["fingerprint"] for i in again] == [i["fingerprint"] for i in issues]
    assert HOSTILE not in json.dumps(issues)
