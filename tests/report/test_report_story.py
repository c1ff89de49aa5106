"""What a report tells and how it is written: the headline (what ran, what did not), interrupted runs, known
bugs grouped per kernel, escaping of foreign text, the JSON Schema, the report directory (checked up front,
"did not finish" set at start, run id in every file), atomic report sets and file modes."""
from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gpu_memsafety.util import fsutil
from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, ByteRange, CaseResult, DetectorRun, Finding, Outcome
from gpu_memsafety.report import (
    INTERRUPTED,
    MAX_JSON_DEPTH,
    MAX_REPORT_BYTES,
    NOT_RUN_LABELS,
    ReportDirError,
    ReportError,
    build_report,
    check_report_dir,
    headline,
    load_report,
    outcome_ran,
    render_junit,
    render_markdown,
    render_terminal,
    report_json_text,
    shard_record,
    start_report_dir,
    validate_report,
    write_reports,
)
from gpu_memsafety.report.write import NOT_FINISHED
from repo_paths import ROOT

SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())
NO_GPU = "needs a CUDA GPU; found none (NVML reports no device)"
UPSTREAM = "triton-lang/triton#10772"


def result(case_id: str, outcome: Outcome, *, kernel: str = "_matmul_ogs", arch: str = "sm_90",
           findings: tuple[Finding, ...] = (), message: str = "", expected: str = "clean") -> CaseResult:
    scenario, _, rest = case_id.partition("[")
    return CaseResult(case_id=case_id, scenario=scenario, variant=rest.split("-")[0], params={}, kernel=kernel,
                      arch=arch, mode="memcheck+guard", outcome=outcome, expected=expected, findings=list(findings),
                      detectors=[DetectorRun(MEMCHECK, True)], message=message, duration_s=1.0)


def overread(nbytes: int = 64) -> Finding:
    return Finding(MEMCHECK, OVERREAD, "w_scale", "past_end", bytes=nbytes, count=2, kernel="_matmul_ogs",
                   arch="sm_90", ranges=(ByteRange("past_end", 0, nbytes, "expert 31"),))


def known_bug(i: int, kernel: str = "_matmul_ogs") -> CaseResult:
    return result(f"last_expert_oob_read[unpadded-K2880-N{i}]", Outcome.EXPECTED_FINDING, kernel=kernel,
                  findings=(overread(),), expected=f"overread of w_scale/past_end (upstream {UPSTREAM})")


def report(results: list[CaseResult], **kwargs: Any) -> dict[str, Any]:
    env = kwargs.pop("environment", {"hostname": "runner-1", "archs": ["sm_90"]})
    return build_report(results, env, started="2026-11-30T06:00:00Z", finished="2026-11-30T06:10:00Z",
                        argv=["make", "sanitize"], **kwargs)


def cpu_run() -> list[CaseResult]:
    """A CPU machine: 57 cases ran on Triton's interpreter, 95 need a GPU."""
    ran = [result(f"s[ran-{i}]", Outcome.CLEAN, arch="cpu") for i in range(57)]
    return ran + [result(f"s[gpu-{i}]", Outcome.UNSUPPORTED, arch="", message=NO_GPU) for i in range(95)]


# -------------------------------------------------------------------------------------------- headline


def test_cpu_run_headline_states_the_not_run_count_on_the_first_line() -> None:
    doc = report(cpu_run())
    first = render_markdown(doc).splitlines()[0]
    # most of the matrix did not run: never a plain pass (issue 26 item 7)
    assert first == f"## ⚠️ GPU memory safety — passed, partial: 57 ran, 95 not run ({md(NO_GPU)})"
    assert render_terminal(doc).splitlines()[-2] == f"PASSED, PARTIAL: 57 ran, 95 not run ({NO_GPU})"
    assert doc["summary"]["ran"] == 57 and doc["summary"]["skipped"] == 95


def md(text: str) -> str:
    from gpu_memsafety.report import md_text
    return md_text(text)


def test_headline_with_several_reasons_points_below_and_failures_come_first() -> None:
    results = [*cpu_run()[:3], result("s[odd]", Outcome.UNSUPPORTED, message="no VMM"),
               result("s[bad]", Outcome.CRASHED, message="boom")]
    head = headline(report(results))
    assert head.text == "FAILED: 4 ran, 1 failed, 1 not run (no VMM)"
    results.append(result("s[gpu]", Outcome.UNSUPPORTED, message=NO_GPU))
    assert headline(report(results)).text == "FAILED: 4 ran, 1 failed, 2 not run (2 reasons, listed below)"


def test_cases_that_could_not_run_are_named_as_such_not_counted_twice() -> None:
    """A not-run outcome that fails (judge's "could not run" on a GPU machine) is named by its label."""
    results = [result("s[ok]", Outcome.CLEAN), *(result(f"s[m{i}]", Outcome.UNSUPPORTED, message="memcheck needs "
                                                          "compute-sanitizer; none found") for i in range(3)),
               result("s[arch]", Outcome.UNSUPPORTED, message="needs sm_100")]
    doc = report(results)
    for case in doc["cases"][1:4]:
        case.update(outcome="could not run", failed=True)
    assert headline(doc).text == ("passed, partial: 1 ran, 3 could not run (memcheck needs compute-sanitizer; none "
                                  "found), 1 not run (needs sm_100)")


def test_a_run_that_checked_nothing_says_so() -> None:
    doc = report([result("s[gpu]", Outcome.UNSUPPORTED, message=NO_GPU)])
    assert headline(doc).text == f"checked nothing: 0 ran, 1 not run ({NO_GPU})"
    assert render_markdown(doc).startswith("## ⚠️ GPU memory safety — checked nothing")


@pytest.mark.parametrize("label", sorted(NOT_RUN_LABELS))
def test_not_run_outcomes_are_read_from_labels(label: str) -> None:
    assert not outcome_ran(label)
    assert outcome_ran(Outcome.CRASHED) and outcome_ran("expected finding")


# ------------------------------------------------------------------------------------------- interrupted


def interrupted_report() -> dict[str, Any]:
    done = [result(f"s[c{i}]", Outcome.CLEAN) for i in range(123)]
    running = result("s[c123]", Outcome.CRASHED, message="the run was interrupted while this case was running")
    return report([*done, running], interrupted="interrupted (SIGTERM)", not_run=[f"s[c{i}]" for i in range(124, 152)],
                  run_id="20261130T060000Z-abcd0123")


def test_interrupted_run_headline_counts_and_lists_what_did_not_run(tmp_path: Path) -> None:
    doc = interrupted_report()
    assert doc["summary"]["status"] == INTERRUPTED
    assert headline(doc).text == "interrupted: 124 of 152 cases ran, 1 failed, 28 never started"
    md_text = render_markdown(doc)
    assert md_text.startswith("## ❌ GPU memory safety — interrupted: 124 of 152 cases ran")
    assert "**Why:** interrupted (SIGTERM)" in md_text
    assert "### Never started: the run was interrupted (28)" in md_text and "s\\[c151\\]" in md_text
    terminal = render_terminal(doc)
    assert "Never started (the run was interrupted), 28 cases:" in terminal
    assert "[crashed] s[c123]" in terminal
    assert "  why: interrupted (SIGTERM)" in terminal
    paths = write_reports(doc, tmp_path)
    assert load_report(paths["json"])["not_run"][0] == "s[c124]"


def test_junit_marks_cases_never_started_as_errors(tmp_path: Path) -> None:
    import junitparser
    path = tmp_path / "junit.xml"
    path.write_text(render_junit(interrupted_report()))
    xml = junitparser.JUnitXml.fromfile(str(path))
    errors = [c for s in xml for c in s if c.result and isinstance(c.result[0], junitparser.Error)]
    assert len(errors) == 28 and errors[0].result[0].type == "not started"
    assert sum(s.tests for s in xml) == 152


def test_a_writer_that_knew_fewer_outcomes_is_read_but_an_edited_count_is_not() -> None:
    doc = json.loads(report_json_text(report([known_bug(0), result("s[b]", Outcome.CLEAN)])))
    del doc["summary"]["counts"]["timeout"]      # an older writer, before that outcome existed
    validate_report(doc)
    doc["summary"]["counts"]["clean"] = 2
    with pytest.raises(ReportError, match="summary.counts: says"):
        validate_report(doc)


def test_an_interrupted_summary_cannot_be_edited_into_a_pass(tmp_path: Path) -> None:
    doc = interrupted_report()
    doc["summary"]["status"] = "passed"
    with pytest.raises(ReportError, match="summary.status: says 'passed' but the cases give 'interrupted'"):
        validate_report(doc)


# ------------------------------------------------------------------------------------------ known bugs


def test_known_bugs_are_one_terminal_line_per_kernel_and_collapsed_in_markdown() -> None:
    results = [known_bug(i) for i in range(44)] + [known_bug(i, "pre_dispatch") for i in range(3)]
    doc = report(results)
    terminal = render_terminal(doc).splitlines()
    start = terminal.index("Known bugs (expected findings), 47 cases:")
    assert terminal[start + 1] == (f"  _matmul_ogs (sm_90): 44 cases, memcheck overread of w_scale past_end (44x, 64 B each); "
                                   f"upstream {UPSTREAM}")
    assert terminal[start + 2].startswith("  pre_dispatch (sm_90): 3 cases")
    assert terminal[start + 3] == ""
    assert len(render_terminal(doc).splitlines()) < 20
    text = render_markdown(doc)
    visible_part, collapsed = text.split("<details><summary>Every known-bug finding, case by case (47)</summary>")
    assert visible_part.count("last\\_expert") == 0
    assert collapsed.count("last\\_expert\\_oob\\_read") == 47 or collapsed.count("last_expert_oob_read") == 47


# ------------------------------------------------------------------------------------ data-driven renderers


def test_a_new_finding_kind_gets_its_own_matrix_column() -> None:
    uninit = Finding(GUARD, "uninit_read", "out", "inside", bytes=16, count=1, kernel="k")
    doc = report([result("s[a]", Outcome.FINDING, kernel="k", findings=(uninit,), message="new")])
    assert doc["matrix"][0]["kinds"] == {"uninit_read": {"findings": 1, "bytes": 16, "accesses": 1}}
    head = render_terminal(doc).splitlines()[0].split()
    assert head == ["kernel", "arch", "cases", "failed", "overreads", "overwrites", "uninit_read", "bytes", "verdict"]
    assert "| k | sm_90 | 1 | 1 | 0 | 0 | 1 | 16 | ❌ failure |" in render_markdown(doc)


# -------------------------------------------------------------------------------------------- escaping


HOSTILE = "see [docs](https://evil.example/x) ![px](https://evil.example/p.png) <img src=x> www.evil.example a@evil.example \x1b[2J\x1b]0;t\x07 \u202egnp.exe\r"


def hostile_report() -> dict[str, Any]:
    finding = Finding(MEMCHECK, OVERREAD, "w[x](y)", "past_end", bytes=4, kernel="k<T>\x1b[31m")
    return report([result(f"s[{HOSTILE}]", Outcome.FINDING, kernel=f"kern{HOSTILE}", findings=(finding,),
                          message=HOSTILE), result("s[u]", Outcome.UNSUPPORTED, message=HOSTILE)],
                  environment={"hostname": HOSTILE, "archs": ["sm_90"]})


def test_markdown_cannot_form_links_images_html_or_control_sequences() -> None:
    text = render_markdown(hostile_report())
    outside_code = "".join(part for i, part in enumerate(text.split("```")) if i % 2 == 0)
    assert "](" not in outside_code.replace("\\](", "")
    assert "![" not in outside_code and "<img" not in outside_code
    import re
    assert not re.search(r"(?<!\\)://|(?<!\\)@evil|www\.evil", outside_code)  # no bare URL or e-mail to autolink
    assert "\x1b" not in text and "\u202e" not in text and "\r" not in text and "\x07" not in text
    assert "\\\\x1b\\[2J" in outside_code and "\\\\u202egnp.exe" in outside_code
    assert "\\x1b[2J" in text  # inside the fenced message, shown as an escape


def test_terminal_and_junit_show_control_characters_as_escapes() -> None:
    doc = hostile_report()
    for text in (render_terminal(doc), render_junit(doc)):
        assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text and "\r" not in text
        assert "\\x1b[2J" in text and "\\u202e" in text


def test_failure_text_for_pytest_shows_control_characters_as_escapes() -> None:
    from gpu_memsafety.report.failure_text import failure_text
    text = failure_text(result("s[a]", Outcome.CRASHED, message=HOSTILE))
    assert "\x1b" not in text and "\\x1b[2J" in text


def test_repro_output_shows_control_characters_as_escapes() -> None:
    from gpu_memsafety.cli.repro import answer
    text = answer(result("s[a]", Outcome.CRASHED, message=HOSTILE), 1.0)
    assert "\x1b" not in text and "\\x1b[2J" in text


def test_baseline_diff_shows_control_characters_from_the_baseline_file_as_escapes() -> None:
    from gpu_memsafety.judge.baseline import AcceptedFinding, Baseline, compare, render_diff
    found = result("s[a]", Outcome.FINDING, findings=(overread(),), message="m")
    key = overread().key()
    text = render_diff(compare([found], Baseline((AcceptedFinding("s[a]", key, HOSTILE),))))
    assert "Accepted by the baseline" in text
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b[2J" in text


def test_sanitizer_search_list_is_collapsed_once_and_not_in_the_list() -> None:
    env = {"hostname": "h", "compute_sanitizer": {"path": None, "searched": ["/a/cs", "/b/cs", "/a/cs"]}}
    text = render_markdown(report([result("s[a]", Outcome.CLEAN)], environment=env))
    assert "- compute_sanitizer: not found" in text
    details = text.split("Where compute-sanitizer was searched (2 places)</summary>")[1]
    assert details.count("/a/cs") == 1 and "/b/cs" in details
    assert text.count("/a/cs") == 1


def test_gpus_read_as_names_not_records() -> None:
    gpus = [{"index": i, "name": "NVIDIA H200", "uuid": f"GPU-{i}", "capability": [9, 0], "memory_mib": 143771,
             "arch": "sm_90"} for i in range(8)]
    text = render_markdown(report([result("s[a]", Outcome.CLEAN)], environment={"gpus": gpus}))
    assert "- gpus: 8x NVIDIA H200 (sm\\_90, 140 GiB)" in text or "- gpus: 8x NVIDIA H200 (sm_90, 140 GiB)" in text
    assert "uuid" not in text


# ---------------------------------------------------------------------------------------------- schema


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("name", ["plain", "cpu", "interrupted", "shard", "hostile", "empty"])
def test_every_report_the_harness_builds_matches_the_schema(name: str) -> None:
    docs = {"plain": lambda: report([known_bug(0), result("s[x]", Outcome.TIMEOUT, message="t")]),
            "cpu": lambda: report(cpu_run()), "interrupted": interrupted_report,
            "shard": lambda: report([result("s[a]", Outcome.CLEAN)], shard=shard_record(2, 4, "nightly-17")),
            "hostile": hostile_report, "empty": lambda: report([])}
    doc = json.loads(report_json_text(docs[name]()))
    jsonschema.validate(doc, SCHEMA)
    validate_report(doc)


def test_the_placeholder_set_matches_the_schema(tmp_path: Path) -> None:
    start_report_dir(tmp_path, run_id="r-1", started="t0", argv=["x"], environment={})
    jsonschema.validate(json.loads((tmp_path / "report.json").read_text()), SCHEMA)


@pytest.mark.parametrize(("edit", "where"), [
    (lambda d: d["cases"][0].pop("outcome"), "outcome"),
    (lambda d: d["cases"][0].update(outcome="passed"), "outcome"),
    (lambda d: d["cases"][0]["findings"][0].update(bytes="64"), "bytes"),
    (lambda d: d["summary"].update(failed=-1), "failed"),
    (lambda d: d["summary"].update(status="green"), "status"),
    (lambda d: d["run"].update(shard={"index": "2", "count": 4}), "index"),
    (lambda d: d["matrix"][0].update(verdict="fine"), "verdict"),
    (lambda d: d.update(not_run=[1]), "not_run"),
    (lambda d: d.update(schema="gpu-memsafety-report/2"), "schema"),
])
def test_schema_and_loader_refuse_the_same_bad_documents(edit: Any, where: str) -> None:
    doc = json.loads(report_json_text(report([known_bug(0)])))
    edit(doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)
    with pytest.raises(ReportError):
        validate_report(doc)


def test_schema_knows_every_outcome_of_the_model() -> None:
    assert {o.label for o in Outcome} <= set(SCHEMA["$defs"]["outcome"]["enum"])


# ------------------------------------------------------------------------------------- loading limits


def test_a_report_larger_than_the_old_64_mib_limit_loads(tmp_path: Path) -> None:
    assert MAX_REPORT_BYTES >= 256 << 20
    doc = report([result("s[a]", Outcome.FINDING, message="x" * (72 << 20))])
    path = tmp_path / "report.json"
    path.write_text(report_json_text(doc))
    assert path.stat().st_size > 72 << 20
    assert len(load_report(path)["cases"][0]["message"]) == 72 << 20


def test_deep_nesting_and_lone_surrogates_are_refused_with_the_file_name(tmp_path: Path) -> None:
    doc = json.loads(report_json_text(report([result("s[a]", Outcome.CLEAN)])))
    deep: Any = "bottom"
    for _ in range(MAX_JSON_DEPTH + 5):
        deep = [deep]
    doc["cases"][0]["details"]["deep"] = deep
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ReportError, match="nested too deeply") as caught:
        load_report(path)
    assert caught.value.path == str(path)
    bad = tmp_path / "surrogate.json"
    bad.write_text(report_json_text(report([result("s[a]", Outcome.CLEAN)])).replace('"message": ""',
                                                                                       '"message": "\\udc80"', 1))
    with pytest.raises(ReportError, match="lone surrogate") as caught:
        load_report(bad)
    assert caught.value.path == str(bad)


# ----------------------------------------------------------------------------------- report directory


def test_report_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "reports").write_text("not a directory")
    with pytest.raises(ReportDirError, match="is not a directory"):
        check_report_dir(tmp_path / "reports")


def test_report_dir_that_cannot_be_written_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr("gpu_memsafety.report.write.tempfile.mkstemp", refuse)
    with pytest.raises(ReportDirError, match="cannot write there: Permission denied"):
        check_report_dir(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory anyway")
def test_report_dir_without_write_permission_is_refused(tmp_path: Path) -> None:
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(ReportDirError, match="cannot write there"):
            check_report_dir(tmp_path)
    finally:
        tmp_path.chmod(0o755)


def test_report_dir_on_a_full_disk_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.statvfs(tmp_path)
    fields = {k: getattr(real, k) for k in dir(real) if k.startswith("f_")}

    class Full:
        def __getattr__(self, name: str) -> int:
            return 0 if name == "f_bavail" else fields[name]
    monkeypatch.setattr("gpu_memsafety.report.write.os.statvfs", lambda path: Full())
    with pytest.raises(ReportDirError, match="the disk is full or nearly: 0 bytes free"):
        check_report_dir(tmp_path)


def test_start_replaces_the_previous_reports_with_this_runs_did_not_finish_set(tmp_path: Path) -> None:
    write_reports(report([result("s[a]", Outcome.CLEAN)], run_id="old-run"), tmp_path)
    start_report_dir(tmp_path, run_id="new-run", started="2026-11-30T07:00:00Z", argv=["make", "sanitize"],
                     environment={"hostname": "h"})
    doc = load_report(tmp_path / "report.json")
    assert doc["run"]["id"] == "new-run" and doc["run"]["interrupted"] == NOT_FINISHED
    assert doc["summary"]["status"] == INTERRUPTED
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## ❌ GPU memory safety — did not finish: run new-run started 2026-11-30T07:00:00Z")
    for name in ("report.json", "junit.xml", "summary.md", "report.sarif", "report.html", "gl-code-quality-report.json"):
        text = (tmp_path / name).read_text()
        assert "new-run" in text and "old-run" not in text, name


def test_run_id_is_in_every_file(tmp_path: Path) -> None:
    paths = write_reports(report([known_bug(0)], run_id="20261130T070000Z-feedbeef"), tmp_path)
    for path in paths.values():
        assert "20261130T070000Z-feedbeef" in path.read_text(), path.name


@pytest.mark.e2e
def test_collect_only_leaves_the_previous_reports_alone(tmp_path: Path) -> None:
    import subprocess
    import sys
    write_reports(report([result("s[a]", Outcome.CLEAN)], run_id="previous-run"), tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "--collect-only",
                           "-q", "--gpu-memsafety-scenario", "planted_oob", "--gpu-memsafety-report-dir", str(tmp_path)], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert load_report(tmp_path / "report.json")["run"]["id"] == "previous-run"


@pytest.mark.e2e
def test_plugin_refuses_a_report_dir_that_is_a_file_before_running_anything(tmp_path: Path) -> None:
    import subprocess
    import sys
    blocker = tmp_path / "reports"
    blocker.write_text("x")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "--gpu-memsafety-scenario",
                           "planted_oob", "--gpu-memsafety-report-dir", str(blocker)], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"--gpu-memsafety-report-dir: {blocker}: is not a directory" in proc.stderr
    assert "collected" not in proc.stdout


# ------------------------------------------------------------------------------------ writing the set


def fail_nth_replace(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """os.replace (as fsutil calls it) raises EIO on its n-th call; the others go through."""
    real = os.replace
    calls: list[Any] = []

    def replace(src: Any, dst: Any) -> None:
        calls.append(dst)
        if len(calls) == n:
            raise OSError(errno.EIO, "simulated I/O error")
        real(src, dst)
    monkeypatch.setattr(fsutil.os, "replace", replace)


def previous_set(folder: Path) -> dict[str, str]:
    write_reports(report([result("s[old]", Outcome.CLEAN)], run_id="old"), folder)
    return {p.name: p.read_text() for p in folder.iterdir()}


def test_a_failed_rename_leaves_the_previous_complete_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = previous_set(tmp_path)
    fail_nth_replace(monkeypatch, 2)
    with pytest.raises(ReportDirError, match="simulated"):
        write_reports(report([result("s[new]", Outcome.CRASHED, message="m")], run_id="new"), tmp_path)
    monkeypatch.undo()
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before


def test_a_full_disk_while_staging_leaves_the_previous_set_and_no_temporaries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = previous_set(tmp_path)
    real = fsutil._write_temp
    staged = []

    def full_on_third(target: Path, text: str) -> Path:
        staged.append(target)
        if len(staged) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(target, text)
    monkeypatch.setattr(fsutil, "_write_temp", full_on_third)
    with pytest.raises(ReportDirError, match="No space left on device.*the directory holds the previous complete"):
        write_reports(report([result("s[new]", Outcome.CLEAN)], run_id="new"), tmp_path)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before


def test_without_hard_links_a_failure_leaves_no_set_rather_than_a_mix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    previous_set(tmp_path)

    def no_link(src: Any, dst: Any) -> None:
        raise OSError(errno.EPERM, "links not supported")
    monkeypatch.setattr(fsutil.os, "link", no_link)
    fail_nth_replace(monkeypatch, 2)
    with pytest.raises(ReportDirError):
        write_reports(report([result("s[new]", Outcome.CLEAN)], run_id="new"), tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_reports_get_the_usual_mode_under_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        paths = write_reports(report([result("s[a]", Outcome.CLEAN)]), tmp_path)
    finally:
        os.umask(old)
    assert {stat.S_IMODE(p.stat().st_mode) for p in paths.values()} == {mode}


# ------------------------------------------------------------------------- reports written before this version


# Reports of earlier runs (one of each kind: a matrix, a run interrupted, a run that checked nothing, a failed run,
# host suites, a complete-mode matrix), committed gzip-compressed under tests/data/reports; each is read as written.
EARLIER = sorted((ROOT / "tests" / "data" / "reports").glob("*.report.json.gz"))


@pytest.mark.parametrize("path", EARLIER, ids=[p.name.removesuffix(".report.json.gz") for p in EARLIER])
def test_reports_from_earlier_runs_still_load_render_and_match_the_schema(path: Path, tmp_path: Path) -> None:
    import gzip
    plain = tmp_path / "report.json"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    doc = load_report(plain)
    jsonschema.validate(doc, SCHEMA)
    assert headline(doc).text.split(":")[0] in ("passed", "passed, partial", "FAILED", "checked nothing", "interrupted")
    for text in (render_terminal(doc), render_markdown(doc), render_junit(doc)):
        assert text


def test_earlier_runs_merge(tmp_path: Path) -> None:
    from gpu_memsafety.report.merge import main
    import json
    # runs that went to the end and checked something (run 20 keeps two that did not), and no case twice: each
    # earlier run reran cases of another, and a case twice on one architecture is refused (issue 44)
    import gzip
    whole, seen = [], set()
    for path in EARLIER:
        doc = json.loads(gzip.decompress(path.read_bytes()))
        ids = {c["id"] for c in doc["cases"]} | set(doc.get("not_run", []))
        if doc["summary"]["status"] not in ("interrupted", "empty") and doc["cases"] and not ids & seen:
            whole.append(tmp_path / "in" / path.name.removesuffix(".gz"))
            whole[-1].parent.mkdir(exist_ok=True)
            whole[-1].write_text(json.dumps(doc))
            seen |= ids
    assert len(whole) >= 2
    assert main([*map(str, whole), "-o", str(tmp_path)]) == 0
    assert "| kernel | sm_90 |" in (tmp_path / "merged.md").read_text()


@pytest.mark.e2e
def test_a_run_whose_final_reports_cannot_be_written_says_so_and_fails(tmp_path: Path) -> None:
    """The report directory turns into a file before the final write: the run ends non-zero, naming why."""
    import subprocess
    import sys
    plugin = tmp_path / "break_reports.py"
    plugin.write_text(
        "import shutil, pytest\n"
        "@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_sessionfinish(session):\n"
        f"    shutil.rmtree({str(tmp_path / 'reports')!r}); open({str(tmp_path / 'reports')!r}, 'w').close()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "-p", "break_reports",
                           "--gpu-memsafety-scenario", "planted_oob", "-k", "clean-triton and not vec16", "--gpu-memsafety-mode", "guard",
                           "--gpu-memsafety-report-dir", str(tmp_path / "reports")], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"reports NOT written: {tmp_path / 'reports'}: the reports could not be written" in proc.stdout
    assert "1 passed" in proc.stdout


@pytest.mark.e2e
def test_the_set_written_at_the_start_and_the_final_set_carry_one_run_id(tmp_path: Path) -> None:
    import subprocess
    import sys
    reports = tmp_path / "reports"
    write_reports(report([result("s[a]", Outcome.CLEAN)], run_id="previous-run"), reports)
    plugin = tmp_path / "peek_reports.py"
    plugin.write_text(
        "import json, pathlib\n"
        "def pytest_collection_finish(session):\n"
        f"    doc = json.loads(pathlib.Path({str(reports / 'report.json')!r}).read_text())\n"
        f"    pathlib.Path({str(tmp_path / 'seen.json')!r}).write_text(json.dumps(doc['run']))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "-p", "peek_reports",
                           "--gpu-memsafety-scenario", "planted_oob", "-k", "clean-triton and not vec16", "--gpu-memsafety-mode", "guard",
                           "--gpu-memsafety-report-dir", str(reports)], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    seen = json.loads((tmp_path / "seen.json").read_text())
    final = load_report(reports / "report.json")["run"]
    assert seen["interrupted"] == NOT_FINISHED and seen["id"] != "previous-run"
    assert final["id"] == seen["id"] and not final["interrupted"]
