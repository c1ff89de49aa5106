"""Reports of one run: report.json round-trip and validation, terminal table, JUnit XML, Markdown."""
from __future__ import annotations

import json
import os
from pathlib import Path

import junitparser
import pytest

from gpu_memsafety.model import (
    GUARD,
    MEMCHECK,
    OVERREAD,
    OVERWRITE,
    ByteRange,
    CaseResult,
    DetectorRun,
    Finding,
    Outcome,
)
from gpu_memsafety.report import (
    EMPTY,
    FAILED,
    FAILURE,
    KNOWN_BUG,
    MAX_REPORT_BYTES,
    OK,
    REPORT_SCHEMA,
    UNSUPPORTED,
    ReportError,
    TerminalRenderer,
    build_report,
    cases_from_report,
    describe_finding,
    load_report,
    matrix,
    render_junit,
    render_markdown,
    render_terminal,
    row_verdict,
    worst_verdict,
    write_reports,
)

UPSTREAM = "triton-lang/triton#10772"
EXPECTED_OOB = f"overread of w_scale/past_end, any bytes, seen by memcheck (upstream {UPSTREAM})"
ENVIRONMENT = {
    "hostname": "h100-runner-3",
    "gpus": ["NVIDIA H100 80GB HBM3"],
    "archs": ["sm_90"],
    "driver": "580.159.04",
    "compute_sanitizer": {"path": "/usr/local/cuda/bin/compute-sanitizer", "version": "2025.3.1"},
    "torch": "2.11.0+cu130",
    "triton": "3.6.0",
    "triton_kernels": "sgl-kernel 0.3.21",
}


def w_scale_overread() -> Finding:
    return Finding(
        detector=MEMCHECK, kind=OVERREAD, buffer="w_scale", region="past_end", bytes=1024, count=512,
        kernel="_matmul_ogs", arch="sm_90",
        ranges=(ByteRange("past_end", 0, 1024, "expert 31, K groups 90..91"),),
        first_thread="(3,0,0)", first_block="(7,0,0)", source="kernel.py:210",
    )


def scale_padding_overwrite() -> Finding:
    rows = tuple(ByteRange(f"padding[row {r}]", r * 80 + 72, r * 80 + 80, f"token {r}, scale bytes 72..79")
                 for r in range(4))
    return Finding(detector=GUARD, kind=OVERWRITE, buffer="scale", region="padding", bytes=32, count=4,
                   kernel="pre_dispatch_packed", arch="sm_90", ranges=rows)


def case(case_id: str, outcome: Outcome, *, kernel: str = "_matmul_ogs", arch: str = "sm_90",
         findings: tuple[Finding, ...] = (), message: str = "", expected: str = "clean",
         duration_s: float = 1.25) -> CaseResult:
    scenario, _, rest = case_id.partition("[")
    return CaseResult(
        case_id=case_id, scenario=scenario, variant=rest.split("-")[0], params={"K": 2880, "E": 4},
        kernel=kernel, arch=arch, mode="memcheck+guard", outcome=outcome, expected=expected,
        findings=list(findings), detectors=[DetectorRun(MEMCHECK, True), DetectorRun(GUARD, True)],
        message=message, duration_s=duration_s,
    )


def sample_results() -> list[CaseResult]:
    """One H100 run: a known bug, a clean fix, a regression, an unsupported case, a miss, a timeout."""
    return [
        case("last_expert_oob_read[unpadded-K2880-E4-N256]", Outcome.EXPECTED_FINDING,
             findings=(w_scale_overread(),), expected=EXPECTED_OOB),
        case("last_expert_oob_read[padded-K2880-E4-N256]", Outcome.CLEAN),
        case("padded_stride_scale_write[packed-H2304-T5]", Outcome.FINDING, kernel="pre_dispatch_packed",
             findings=(scale_padding_overwrite(),),
             message="unexpected finding: guard overwrite of scale/padding, 32 B; expected clean"),
        case("guard_page_probe[vector-add]", Outcome.UNSUPPORTED, kernel="add_kernel",
             message="Missing required feature(s): cuda-bindings virtual memory (cuMemAddressReserve)"),
        case("last_expert_oob_read[unpadded-K2880-E32-N5760]", Outcome.UNEXPECTEDLY_CLEAN, expected=EXPECTED_OOB,
             message="expected memcheck overread of w_scale/past_end; memcheck ran and recorded 0 accesses"),
        case("last_expert_oob_read[batched-K2880-E4-N256]", Outcome.TIMEOUT, duration_s=600.0,
             message="no result after 600 s under compute-sanitizer memcheck\n--- tail ---\nlaunching _matmul_ogs"),
    ]


def sample_report(results: list[CaseResult] | None = None) -> dict:
    return build_report(sample_results() if results is None else results, ENVIRONMENT,
                        started="2025-11-29T12:00:00Z", finished="2025-11-29T12:14:03Z",
                        argv=["make", "sanitize"])


# ------------------------------------------------------------------------------------------ findings


def test_describe_finding_reads_like_the_spec() -> None:
    assert describe_finding(w_scale_overread()) == (
        "memcheck overread of w_scale past_end: 1,024 B in 512 accesses by _matmul_ogs (kernel.py:210), "
        "thread (3,0,0) block (7,0,0); ranges: +0..+1024 (expert 31, K groups 90..91)"
    )


def test_describe_guard_finding_counts_ranges_and_elides_the_rest() -> None:
    rows = tuple(ByteRange(f"padding[row {r}]", r * 80 + 72, r * 80 + 80) for r in range(6))
    finding = Finding(GUARD, OVERWRITE, "scale", "padding", bytes=48, count=6, kernel="pre_dispatch_packed",
                      ranges=rows)
    text = describe_finding(finding)
    assert text.startswith("guard overwrite of scale padding: 48 B in 6 changed ranges by pre_dispatch_packed")
    assert "+72..+80 padding[row 0]" in text
    assert "+312..+320 padding[row 3], and 2 more" in text
    assert "row 4" not in text


def test_describe_finding_single_access_and_bare_coordinates() -> None:
    finding = Finding(MEMCHECK, OVERWRITE, "out", "past_end", bytes=4, count=1, first_thread="0,0,0")
    assert describe_finding(finding) == "memcheck overwrite of out past_end: 4 B in 1 access, thread (0,0,0)"


# ------------------------------------------------------------------------------------- summary, matrix


def test_summary_counts_every_outcome_and_fails() -> None:
    summary = sample_report()["summary"]
    assert summary["total"] == 6
    assert summary["failed"] == 3
    assert summary["status"] == FAILED
    assert summary["counts"]["expected finding"] == 1
    assert summary["counts"]["unsupported"] == 1
    assert summary["counts"]["crashed"] == 0
    assert set(summary["counts"]) == {o.label for o in Outcome}


def test_run_that_checked_nothing_is_not_a_pass() -> None:
    only_skips = [case("guard_page_probe[vector-add]", Outcome.UNSUPPORTED, message="no GPU")]
    assert sample_report(only_skips)["summary"]["status"] == EMPTY
    assert sample_report([])["summary"]["status"] == EMPTY


def test_matrix_has_one_row_per_kernel_and_arch() -> None:
    rows = {(r["kernel"], r["arch"]): r for r in matrix(sample_results())}
    assert set(rows) == {("_matmul_ogs", "sm_90"), ("pre_dispatch_packed", "sm_90"), ("add_kernel", "sm_90")}
    matmul = rows[("_matmul_ogs", "sm_90")]
    assert (matmul["cases"], matmul["failed"], matmul["verdict"]) == (4, 2, FAILURE)
    assert matmul["overreads"] == {"findings": 1, "bytes": 1024, "accesses": 512}
    assert matmul["overwrites"] == {"findings": 0, "bytes": 0, "accesses": 0}
    assert rows[("pre_dispatch_packed", "sm_90")]["overwrites"]["bytes"] == 32
    assert rows[("add_kernel", "sm_90")]["verdict"] == UNSUPPORTED


@pytest.mark.parametrize(("outcomes", "verdict"), [
    ([Outcome.CLEAN, Outcome.UNSUPPORTED], OK),
    ([Outcome.CLEAN, Outcome.EXPECTED_FINDING], KNOWN_BUG),
    ([Outcome.UNSUPPORTED, Outcome.UNSUPPORTED], UNSUPPORTED),
    ([Outcome.EXPECTED_FINDING, Outcome.CRASHED], FAILURE),
])
def test_row_verdict_is_the_worst_outcome(outcomes: list[Outcome], verdict: str) -> None:
    assert row_verdict(outcomes) == verdict


def test_worst_verdict_lets_any_run_outweigh_unsupported() -> None:
    assert worst_verdict([UNSUPPORTED, OK]) == OK
    assert worst_verdict([KNOWN_BUG, FAILURE, OK]) == FAILURE
    assert worst_verdict([UNSUPPORTED]) == UNSUPPORTED


# -------------------------------------------------------------------------------------- round trip


def test_report_round_trips_through_disk(tmp_path: Path) -> None:
    results = sample_results()
    report = sample_report(results)
    paths = write_reports(report, tmp_path / "out")
    assert {p.name for p in paths.values()} == {"report.json", "junit.xml", "summary.md", "report.sarif", "report.html",
                                               "gl-code-quality-report.json"}
    loaded = load_report(paths["json"])
    assert loaded == report
    assert loaded["schema"] == REPORT_SCHEMA
    assert loaded["environment"]["compute_sanitizer"]["version"] == "2025.3.1"
    assert loaded["run"]["mode"] == "memcheck+guard"
    assert cases_from_report(loaded) == results
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]


def test_an_inexact_findings_key_round_trips_and_an_older_reports_counted_key_still_loads(tmp_path: Path) -> None:
    """A wild write's count is at least (its key reads `~`: model.key_bytes); the report keeps that key, and a
    report written before, whose key carried the count, still loads. A key that matches neither is refused."""
    wild = Finding(MEMCHECK, OVERWRITE, "unattributed", "unattributed", bytes=49152, count=5056,
                   kernel="_matmul_ogs", exact=False, note="at least")
    report = sample_report([case("last_expert_oob_read[batched-K2880-E4-N256]", Outcome.FINDING, findings=[wild])])
    [finding] = report["cases"][0]["findings"]
    assert finding["key"] == "memcheck:overwrite:_matmul_ogs:unattributed:unattributed:~"
    assert cases_from_report(load_report(write_reports(report, tmp_path / "new")["json"]))[0].findings == [wild]
    finding["key"] = "memcheck:overwrite:_matmul_ogs:unattributed:unattributed:49152"
    load_report(write_reports(report, tmp_path / "older")["json"])
    finding["key"] = "memcheck:overwrite:_matmul_ogs:unattributed:unattributed:512"
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(report))
    with pytest.raises(ReportError, match=r"findings\[0\]\.key: is .*:512' but the finding's fields give .*:~'"):
        load_report(path)


def test_write_reports_refuses_an_invalid_report(tmp_path: Path) -> None:
    report = sample_report()
    report["summary"]["total"] = 7
    from gpu_memsafety.report.write import INVALID_JSON, ReportDirError
    with pytest.raises(ReportDirError, match="summary.total"):
        write_reports(report, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [INVALID_JSON]      # no report set, the document kept aside


# -------------------------------------------------------------------------------------- bad files


def _valid_text() -> str:
    return json.dumps(sample_report(), indent=2)


def _edited(edit) -> str:  # type: ignore[no-untyped-def]
    report = sample_report()
    edit(report)
    return json.dumps(report)


BAD_FILES = {
    "not-json": ("<html>502 Bad Gateway</html>", "not valid JSON"),
    "truncated": (_valid_text()[: len(_valid_text()) // 2], "truncated"),
    "empty": ("  \n", "empty file"),
    "foreign": (json.dumps({"name": "left-pad", "version": "1.3.0"}), "no 'schema' field"),
    "wrong-schema": (_edited(lambda r: r.update(schema="gpu-memsafety-report/2")), "gpu-memsafety-report/2"),
    "top-level-list": (json.dumps([1, 2]), "expected a JSON object, got array"),
    "missing-field": (_edited(lambda r: r["cases"][2].pop("outcome")), "cases[2]: missing field 'outcome'"),
    "wrong-type": (_edited(lambda r: r["cases"][0]["findings"][0].update(bytes="1024")),
                   "cases[0].findings[0].bytes: expected integer, got string"),
    "bool-as-int": (_edited(lambda r: r["summary"].update(failed=True)), "summary.failed: expected integer"),
    "unknown-outcome": (_edited(lambda r: r["cases"][1].update(outcome="passed")), "unknown outcome 'passed'"),
    "failed-flag-lies": (_edited(lambda r: r["cases"][2].update(failed=False)),
                         "cases[2].failed: is false but outcome 'finding' is a failure"),
    "cases-cut": (_edited(lambda r: r["cases"].pop()), "says 6 cases but the file holds 5"),
    "nan": (_valid_text().replace('"duration_s": 1.25', '"duration_s": NaN', 1), "NaN"),
    "not-utf8": ("\udcff", "not UTF-8"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_report_file_names_the_file_and_the_problem(tmp_path: Path, name: str) -> None:
    text, fragment = BAD_FILES[name]
    path = tmp_path / f"{name}.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(ReportError) as caught:
        load_report(path)
    assert str(path) in str(caught.value)
    assert fragment in str(caught.value)
    assert caught.value.path == str(path)


def test_huge_file_is_refused_by_its_size_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as handle:
        handle.truncate(MAX_REPORT_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(ReportError, match=f"too large: {MAX_REPORT_BYTES + 1:,} bytes, the limit is"):
        load_report(path)


@pytest.mark.parametrize(("kind", "fragment"), [
    ("missing", "cannot open: No such file"),
    ("directory", "is a directory"),
    ("fifo", "not a regular file"),
])
def test_unreadable_paths_give_report_errors(tmp_path: Path, kind: str, fragment: str) -> None:
    path = tmp_path / "report.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    with pytest.raises(ReportError, match=fragment) as caught:
        load_report(path)
    assert caught.value.path == str(path)


def test_loading_and_rendering_never_touch_paths_inside_the_file(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = tmp_path / "pwned"
    report = sample_report()
    report["run"]["argv"] = [f"$(touch {sentinel})", f"`touch {sentinel}`"]
    report["environment"]["compute_sanitizer"] = {"path": str(sentinel), "version": f"; touch {sentinel}"}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda p, *a, **k: opened.append(os.fspath(p)) or real_open(p, *a, **k))
    loaded = load_report(path)
    render_terminal(loaded), render_junit(loaded), render_markdown(loaded)
    assert opened == [str(path)]
    assert not sentinel.exists()


# ---------------------------------------------------------------------------------------- terminal


def test_terminal_shows_matrix_failures_and_why_unsupported() -> None:
    text = render_terminal(sample_report())
    lines = text.splitlines()
    assert lines[0].split() == ["kernel", "arch", "cases", "failed", "overreads", "overwrites", "bytes", "verdict"]
    matmul = next(line for line in lines if line.startswith("_matmul_ogs"))
    assert matmul.split() == ["_matmul_ogs", "sm_90", "4", "2", "1", "0", "1,024", "FAILURE"]
    assert "[timeout] last_expert_oob_read[batched-K2880-E4-N256]" in text
    assert "no result after 600 s under compute-sanitizer memcheck" in text
    assert "guard overwrite of scale padding: 32 B in 4 changed ranges" in text
    assert "Not run, 1 case:" in lines
    assert ("UNSUPPORTED guard_page_probe[vector-add] (sm_90): Missing required feature(s): "
            "cuda-bindings virtual memory") in text
    assert ("  _matmul_ogs (sm_90): 1 case, memcheck overread of w_scale past_end (1x, 1,024 B); "
            f"upstream {UPSTREAM}") in lines
    assert lines[-2] == ("FAILED: 5 ran, 3 failed, 1 not run (Missing required feature(s): cuda-bindings virtual "
                         "memory (cuMemAddressReserve))")
    assert lines[-1] == ("  outcomes: 1 clean, 1 expected finding, 1 finding, 1 unexpectedly clean, 1 timeout, "
                         "1 unsupported; as pytest counts them: 1 passed, 3 failed, 1 skipped, 1 xfailed")
    assert "\x1b" not in text


def test_terminal_for_an_empty_run() -> None:
    text = render_terminal(sample_report([]))
    assert "no cases ran" in text
    assert "CHECKED NOTHING: 0 ran" in text


# ------------------------------------------------------------------------------------------- junit


def _parse_junit(text: str, tmp_path: Path) -> junitparser.JUnitXml:
    path = tmp_path / "junit.xml"
    path.write_text(text, encoding="utf-8")
    return junitparser.JUnitXml.fromfile(str(path))


def test_junit_is_accepted_by_junitparser_with_the_right_counts(tmp_path: Path) -> None:
    xml = _parse_junit(render_junit(sample_report()), tmp_path)
    cases = [c for suite in xml for c in suite]
    assert len(cases) == 6
    failures = {c.name: c.result[0] for c in cases if c.result and isinstance(c.result[0], junitparser.Failure)}
    skipped = {c.name: c.result[0] for c in cases if c.result and isinstance(c.result[0], junitparser.Skipped)}
    assert sorted(f.type for f in failures.values()) == ["finding", "timeout", "unexpectedly clean"]
    assert list(skipped) == ["guard_page_probe[vector-add]"]
    assert "cuMemAddressReserve" in skipped["guard_page_probe[vector-add]"].message
    timeout = failures["last_expert_oob_read[batched-K2880-E4-N256]"]
    assert timeout.message == "no result after 600 s under compute-sanitizer memcheck"
    assert "--- tail ---" in timeout.text
    suites = {s.name: s for s in xml}
    assert suites["last_expert_oob_read"].failures == 2
    assert suites["padded_stride_scale_write"].failures == 1
    assert suites["guard_page_probe"].skipped == 1
    assert sum(s.tests for s in xml) == 6


def test_junit_system_out_lists_findings_as_key_value(tmp_path: Path) -> None:
    xml = _parse_junit(render_junit(sample_report()), tmp_path)
    known = next(c for s in xml for c in s if c.name == "last_expert_oob_read[unpadded-K2880-E4-N256]")
    assert known.is_passed
    out = known.system_out
    assert "buffer       = w_scale" in out
    assert "bytes        = 1024" in out
    assert "source       = kernel.py:210" in out
    assert "range        = +0..+1024 (expert 31, K groups 90..91)" in out


def test_junit_survives_control_characters_and_markup_in_messages(tmp_path: Path) -> None:
    results = [case("x[a]", Outcome.CRASHED, kernel="mega<int, 4>",
                    message="\x1b[31mCUDA error\x1b[0m\x00 </failure> & ]]>")]
    xml = _parse_junit(render_junit(sample_report(results)), tmp_path)
    (crashed,) = [c for s in xml for c in s]
    assert crashed.result[0].type == "crashed"
    assert "\\x1b[31mCUDA error" in crashed.result[0].message
    assert "</failure> & ]]>" in crashed.result[0].text


# ---------------------------------------------------------------------------------------- markdown


def test_markdown_has_headline_matrix_failures_known_bugs_and_unsupported() -> None:
    text = render_markdown(sample_report())
    assert text.startswith("## ❌ GPU memory safety — FAILED: 5 ran, 3 failed, 1 not run (Missing required")
    assert "| kernel | arch | cases | failed | overreads | overwrites | bytes | verdict |" in text
    assert "| \\_matmul_ogs | sm_90 | 4 | 2 | 1 | 0 | 1,024 | ❌ failure |" in text
    assert ("| add_kernel | sm_90 | 1 | 0 | 0 | 0 | 0 | ➖ unsupported: Missing required feature(s): cuda-bindings "
            "virtual memory (cuMemAddressReserve) |") in text
    assert "### Failing cases (3)" in text
    assert "  ```text\n  no result after 600 s under compute-sanitizer memcheck\n" in text
    assert "[triton-lang/triton#10772](https://github.com/triton-lang/triton/issues/10772)" in text
    assert "memcheck overread of w_scale past_end: 1,024 B" in text
    assert "<details><summary>Every known-bug finding, case by case (1)</summary>" in text
    assert "Missing required feature(s): cuda-bindings virtual memory (cuMemAddressReserve)" in text
    assert "h100-runner-3" in text


def test_markdown_escapes_table_breakers_and_fences() -> None:
    results = [
        case("s[a]", Outcome.UNSUPPORTED, kernel="mega<int, 4>", message="needs sm_100 | sm_103"),
        case("s[b]", Outcome.FINDING, message="tool said:\n```\nboom\n```"),
    ]
    text = render_markdown(sample_report(results))
    assert "mega&lt;int, 4&gt;" in text and "mega<int" not in text
    assert "needs sm\\_100 \\| sm\\_103" not in text and "needs sm_100 \\| sm_103" in text
    assert "  ````text\n  tool said:\n  ```\n  boom\n  ```\n  ````" in text


def test_markdown_for_a_passing_run() -> None:
    results = [case("last_expert_oob_read[padded-K2880-E4-N256]", Outcome.CLEAN)]
    text = render_markdown(sample_report(results))
    assert text.startswith("## ✅ GPU memory safety — passed: 1 ran\n")
    assert "Failing cases" not in text


def test_fields_added_by_a_newer_writer_are_ignored(tmp_path: Path) -> None:
    report = sample_report()
    report["cases"][0]["findings"][0]["space"] = "global"
    report["cases"][0]["findings"][0]["ranges"][0]["row"] = 31
    report["cases"][0]["detectors"][0]["seconds"] = 12.5
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    (known, *_) = cases_from_report(load_report(path))
    assert known.findings == [w_scale_overread()]
    assert "1,024 B in 512 accesses" in render_markdown(load_report(path))


def test_terminal_groups_unsupported_cases_by_reason() -> None:
    cases = [{"id": f"s[c{i}]", "arch": "", "outcome": Outcome.UNSUPPORTED.label, "message": "needs a CUDA GPU; found none"}
             for i in range(40)]
    cases.append({"id": "s[odd]", "arch": "sm_90", "outcome": Outcome.UNSUPPORTED.label, "message": "no VMM\nmore"})
    text = TerminalRenderer().not_run(cases)
    lines = text.splitlines()
    assert lines[0] == "Not run, 41 cases:"
    assert lines[1] == "  UNSUPPORTED 40 cases (-): needs a CUDA GPU; found none"
    assert lines[2].strip() == "s[c0], s[c1], s[c2], and 37 more"
    assert lines[3] == "  UNSUPPORTED s[odd] (sm_90): no VMM"
    assert len(lines) == 4


def test_each_detector_counts_in_its_own_unit() -> None:
    """uninit counts the byte ranges it names, not accesses (a CPU held-out run said "72 B in 9 accesses" of an
    output left unwritten); the sanitizers count accesses, guard and poison changed ranges."""
    from gpu_memsafety.model import GUARD, MEMCHECK, UNINIT, Finding
    from gpu_memsafety.report import describe_finding
    assert describe_finding(Finding(UNINIT, "unwritten", "out", "inside", 72, count=9)).endswith("72 B in 9 ranges")
    assert "4 B in 1 access" in describe_finding(Finding(MEMCHECK, "overread", "x", "past_end", 4))
    assert "12 B in 2 changed ranges" in describe_finding(Finding(GUARD, "overwrite", "x", "past_end", 12, count=2))


def test_a_document_that_fails_its_own_checks_is_kept_not_lost(tmp_path: Path) -> None:
    """A CPU held-out run (session 8): one finding with a negative byte count failed validation at the end of the
    run, and every result was lost (the folder kept only the start-of-run placeholder). Now the document is
    written as built to report.invalid.json, and the error names it and the failed check."""
    from gpu_memsafety.report.write import INVALID_JSON, ReportDirError
    report = sample_report(sample_results())
    case = next(c for c in report["cases"] if c["findings"])
    case["findings"][0]["bytes"] = -948
    with pytest.raises(ReportDirError) as err:
        write_reports(report, tmp_path / "out")
    kept = tmp_path / "out" / INVALID_JSON
    assert "failed its own checks" in str(err.value) and str(kept) in str(err.value)
    assert "bytes: negative count -948" in str(err.value)
    assert -948 in [f["bytes"] for c in json.loads(kept.read_text())["cases"] for f in c["findings"]]
    assert len(json.loads(kept.read_text())["cases"]) == len(report["cases"])


def test_a_host_suites_tests_are_counted_as_pytest_counts_them_each_once() -> None:
    """A host suite's test keeps its own result; a failing verdict fails it, once (issue 51: it was a pass and an
    error at its teardown). The headline said "1 skipped" for a test pytest had passed (a test with nothing to
    check is `not applicable`)."""
    from gpu_memsafety.report.render import pytest_counts

    def host(outcome: str, own: str, failed: bool) -> dict:
        return {"outcome": outcome, "failed": failed, "details": {"test": {"outcome": own, "message": ""}}}
    cases = [host("not applicable", "passed", False), host("finding", "passed", True), host("clean", "skipped", False),
             host("finding", "failed", True), host("clean", "xfailed", False)]
    assert pytest_counts(cases) == {"passed": 1, "failed": 2, "skipped": 1, "xfailed": 1}
    assert pytest_counts([host("finding", "error", True)]) == {"error": 1}
    scenario_case = {"outcome": "not applicable", "failed": False, "details": {}}
    assert pytest_counts([scenario_case]) == {"skipped": 1}
