"""Foreign text (kernels, adapters, tests, tools' output, report files) is neutralised by one function,
gpu_memsafety.util.neutral.visible, before it reaches a terminal, a CI log or a file format: no control character
left raw, and no line that a CI reads as a workflow command (`::add-mask::`, `::stop-commands::`, `\\r::warning::`,
`##[error]`; GitLab's section markers need the CR and ESC that are escaped)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpu_memsafety.report.failure_text import CaseFailure, failure_text, known_bug_reason
from gpu_memsafety.judge.baseline import BASELINE_SCHEMA, Baseline, compare, render_diff
from gpu_memsafety.model import MEMCHECK, OVERREAD, CaseResult, DetectorRun, Finding, Outcome
from gpu_memsafety.report import build_report, render_files, report_json_text
from gpu_memsafety.report.history import History, read_runs
from gpu_memsafety.util.neutral import visible
from hostile_text import ATTACKS, RAW_CONTROL, RUNNER_WHITESPACE, assert_neutral

ATTACK = ("\n".join(ATTACKS) + "\nadapter says\n::add-mask::secret\n::stop-commands::tok\n\r::warning::forged\n  ::error::x\n##[error]y\n"
          "section_start:1:s\r\x1b[0Kx\x00\x07\x9b\u202e\u2066\ufffe end")


def test_visible_escapes_controls_and_breaks_every_command_line() -> None:
    shown = visible(ATTACK)
    assert_neutral(shown)
    assert "\\x3a:add-mask::secret" in shown and "\\x23#[error]y" in shown and "\\x1b[0K" in shown
    assert visible("a::b :: c\n# title\n#[x]\n:[y") == "a::b :: c\n# title\n#[x]\n:[y"  # ordinary text unchanged
    assert visible("a\ud800b") == "a\\ud800b"
    assert "\n" not in visible(ATTACK, newlines=False)
    assert_neutral(visible(ATTACK, newlines=False))


def test_a_command_led_by_any_white_space_a_runner_trims_or_in_mid_line_is_broken() -> None:
    """Issue 53: `::stop-commands::` after a no-break space or U+3000, `##[add-mask]` in mid-line."""
    for space in RUNNER_WHITESPACE:
        for command in ("::stop-commands::t", "::add-mask::s"):
            assert_neutral(visible(f"{space}{command}"), repr(space))
            assert_neutral(visible(f"a\n{space * 3}{command}\nb"), repr(space))
    for text in ATTACKS + ("a ##[group]b", "###[x]", "a##VSO[x]", "x ##[", "####[[[##[", "\u180e::x"):
        assert_neutral(visible(text), repr(text))
        assert_neutral(visible(text, newlines=False), repr(text))
    assert visible("issue #12 ## notes [x]: a##b") == "issue #12 ## notes [x]: a##b"   # no command: unchanged


def hostile_result(outcome: Outcome = Outcome.FINDING) -> CaseResult:
    finding = Finding(MEMCHECK, OVERREAD, "out", "past_end", 4, 1, kernel=f"k{ATTACK}", arch="sm_90")
    return CaseResult(case_id="planted_oob[x]", scenario="planted_oob", variant="x", params={}, kernel=f"k{ATTACK}",
                      arch="sm_90", mode="memcheck", outcome=outcome, expected="clean",
                      findings=[finding] if outcome is Outcome.FINDING else [],
                      detectors=[DetectorRun(MEMCHECK, True, ATTACK)], message=ATTACK)


def test_pytest_failure_text_and_skip_reasons_are_neutral() -> None:
    result = hostile_result()
    assert_neutral(failure_text(result), "failure_text")
    assert_neutral(str(CaseFailure(result)), "CaseFailure")
    assert_neutral(known_bug_reason(result), "known_bug_reason")


def test_host_suite_texts_are_neutral() -> None:
    from gpu_memsafety.report.failure_text import failure_text as host_failure, summary_line
    result = hostile_result()
    result.details = {"test": {"outcome": ATTACK}}
    assert_neutral(host_failure(result), "host failure_text")
    assert_neutral(summary_line(result), "host summary_line")


def hostile_report() -> dict:
    return build_report([hostile_result(), hostile_result(Outcome.CRASHED).__class__(
        **{**hostile_result(Outcome.CRASHED).__dict__, "case_id": f"planted_oob[{ATTACK}]"})],
        {"hostname": ATTACK, "archs": ["sm_90"]}, started="2026-12-01T00:00:00", finished="2026-12-01T00:01:00",
        argv=[ATTACK], run_id=f"r{ATTACK}")


def test_every_file_format_is_neutral() -> None:
    for name, text in render_files(hostile_report()).items():
        if name != "report.json":
            assert_neutral(text, name)


def test_baseline_check_prints_keys_and_reasons_as_one_visible_line_each() -> None:
    report = hostile_report()
    results = [hostile_result()]
    diff = compare(results, Baseline(), known_cases=set())
    text = render_diff(diff)
    assert_neutral(text, "render_diff")
    assert "\\x0a" in text   # the newline inside the key is shown, not followed


def test_history_of_a_forged_report_is_neutral(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(report_json_text(hostile_report()))
    runs, problems = read_runs([path])
    assert not problems
    assert_neutral(History(runs).render(), "history")


def test_github_annotations_carry_no_command_of_their_own() -> None:
    from gpu_memsafety.report import github_annotations
    for line in github_annotations(hostile_report()):
        assert line.startswith("::error") or line.startswith("::warning") or line.startswith("::notice")
        assert "\n" not in line and "\r" not in line
        assert not RAW_CONTROL.search(line)
