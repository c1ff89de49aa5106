"""Property-based tests (issue 44, item 7) over report files, baselines and scenario ids: whatever text a finding,
a message or a case id holds, no output format carries a raw control character or a line a CI reads as a
workflow command; JSON with a key twice is always refused; a merge never keeps a case twice.

Derandomized and without an example database, like tests/report/test_properties.py."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_memsafety.report.failure_text import failure_text
from gpu_memsafety.judge.baseline import BASELINE_SCHEMA, Baseline, BaselineError, compare, load_baseline, render_diff
from gpu_memsafety.model import MEMCHECK, OVERREAD, CaseResult, DetectorRun, Finding, Outcome
from gpu_memsafety.report import (ReportError, build_report, github_annotations, read_json_file, render_files,
                                  report_json_text)
from gpu_memsafety.report.history import History, read_runs
from gpu_memsafety.report.merge import merge_reports
from gpu_memsafety.util import jsonio
from hostile_text import ATTACKS, RUNNER_WHITESPACE, assert_neutral

PROPERTIES = settings(max_examples=60, derandomize=True, database=None, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                             HealthCheck.function_scoped_fixture])

# Text an attacker would choose: workflow commands, CR, ESC, bidi overrides, mixed with anything (no lone
# surrogate: no UTF-8 file can hold one, and the loader refuses the escape).
PIECES = st.sampled_from(["::add-mask::", "::stop-commands::", "\r::warning::", "\n::error::", "##[error]", "\n",
                          "\r", "\x1b[2J", "\x00", "\u202e", "\u2066", "section_start:1:s\r\x1b[0K", "  ::", "::",
                          "##vso[", "##teamcity[", *ATTACKS])
# Any run of the white space a runner trims before `::` (issue 53: a no-break space, U+3000), then a command.
LED = st.tuples(st.text(st.sampled_from(RUNNER_WHITESPACE), min_size=1, max_size=4),
                st.sampled_from(["::", "::add-mask::", "##[", "##[add-mask]"])).map("".join)
TEXT = st.lists(PIECES | LED | st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
                max_size=8).map("".join)


def neutral(text: str, where: str) -> None:
    assert_neutral(text, where)


def case(case_id: str, text: str, outcome: Outcome = Outcome.FINDING) -> CaseResult:
    findings = [Finding(MEMCHECK, OVERREAD, f"b{text}", "past_end", 4, 1, kernel=f"k{text}", arch="sm_90",
                        source=text)] if outcome is Outcome.FINDING else []
    return CaseResult(case_id=case_id, scenario="s", variant="v", params={"p": text}, kernel=f"k{text}", arch="sm_90",
                      mode="memcheck", outcome=outcome, expected="clean", findings=findings,
                      detectors=[DetectorRun(MEMCHECK, True, text)], message=text, duration_s=1.0)


def report_of(case_id: str, text: str) -> dict[str, Any]:
    return build_report([case(f"s[{case_id}]", text), case(f"s[{case_id}]-2", text, Outcome.CRASHED)],
                        {"hostname": text, "archs": ["sm_90"]}, started="2026-12-01T00:00:00",
                        finished="2026-12-01T00:01:00", argv=[text], run_id=f"r{case_id}")


@PROPERTIES
@given(case_id=TEXT, text=TEXT)
def test_no_format_carries_a_control_character_or_a_command(case_id: str, text: str) -> None:
    report = report_of(case_id, text)
    for name, rendered in render_files(report).items():
        if name != "report.json":      # the data itself: JSON escapes it, every reader shows it through visible
            neutral(rendered, name)
    for result in (case(f"s[{case_id}]", text), case(f"s[{case_id}]", text, Outcome.CRASHED)):
        neutral(failure_text(result), "failure_text")
    neutral(render_diff(compare([case(f"s[{case_id}]", text)], Baseline(), known_cases=set())), "baseline check")
    for line in github_annotations(report):
        assert "\n" not in line and "\r" not in line, line
        neutral(line.split("::", 2)[-1], "annotation message")


@PROPERTIES
@given(case_id=TEXT, text=TEXT)
def test_history_of_any_report_is_neutral(case_id: str, text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.json"
        path.write_text(report_json_text(report_of(case_id, text)))
        runs, problems = read_runs([path])
        assert not problems
        neutral(History(runs).render(), "history")


KEY = st.text(max_size=6)
VALUE = st.none() | st.booleans() | st.integers() | st.text(max_size=6)


@st.composite
def duplicated(draw: st.DrawFn) -> str:
    """JSON text of an object nested in objects and arrays, one object of which names a key twice."""
    key = draw(KEY)
    pairs = [(key, draw(VALUE)), *draw(st.lists(st.tuples(KEY, VALUE), max_size=3)), (key, draw(VALUE))]
    pairs = draw(st.permutations(pairs))
    text = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"
    for _ in range(draw(st.integers(0, 3))):
        text = draw(st.sampled_from([f"[{text}]", f'{{"x": {text}}}', f'{{"schema": 1, "accepted": {text}}}']))
    return text


@PROPERTIES
@given(text=duplicated())
def test_json_with_a_key_twice_is_always_refused(text: str) -> None:
    with pytest.raises(jsonio.DuplicateKeyError):
        jsonio.loads(text)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.json"
        path.write_text(text)
        with pytest.raises(ReportError, match="appears twice"):
            read_json_file(path)
        with pytest.raises(BaselineError, match="appears twice"):
            load_baseline(path)


@PROPERTIES
@given(runs=st.lists(st.tuples(st.sets(st.integers(0, 6), min_size=1, max_size=5), st.sampled_from(["sm_90", "sm_100"])),
                     min_size=1, max_size=4))
def test_a_merge_never_keeps_a_case_twice(runs: list[tuple[set[int], str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for n, (ids, arch) in enumerate(runs):
            results = [case(f"s[c{i}]", "", Outcome.CLEAN) for i in sorted(ids)]
            for result in results:
                result.arch, result.findings = arch, []
            path = Path(tmp) / f"{n}.json"
            path.write_text(report_json_text(build_report(results, {"hostname": f"h{n}", "archs": [arch]},
                                                          started="s", finished="f", argv=[], run_id=f"run{n}")))
            paths.append(path)
        repeated = any(ids & other_ids for i, (ids, arch) in enumerate(runs)
                       for other_ids, other_arch in runs[i + 1:] if arch == other_arch)
        if repeated:
            with pytest.raises(ReportError, match="appear in two reports for the same architecture"):
                merge_reports(paths)
            return
        merged = merge_reports(paths)
        keys = [(c["id"], c["arch"]) for c in merged["cases"]]
        assert len(keys) == len(set(keys))
        assert merged["summary"]["total"] == sum(len(ids) for ids, _ in runs)
