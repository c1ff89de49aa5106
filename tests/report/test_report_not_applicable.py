"""Matrix rows whose cases all did not run (issue 20 leftover): a row whose every case does not apply here reads
`not applicable`, not `unsupported`, and every row that ran nothing carries its cases' reasons, shown by the
terminal, the Markdown summary and the merged matrix; a report written before (such a row saying `unsupported`)
is still read; a case judged before any process ran (no arch of its own) counts on the runner's arch, so no
row reads arch "-" where the runner has one."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_memsafety.report.merge import merge_cells
from gpu_memsafety.model import GUARD, DetectorRun, CaseResult, Outcome
from gpu_memsafety.report import (NOT_APPLICABLE, OK, UNSUPPORTED, ReportError, build_report, load_report, matrix,
                            render_markdown, render_terminal, worst_verdict, write_reports)

ENV = {"hostname": "h200", "gpus": ["NVIDIA H200"], "archs": ["sm_90"], "driver": "580", "torch": "2.11",
       "triton": "3.6.0"}
COPY_D = "NotApplicable: triton_kernels from sglang-kernel 0.4.10: needs triton >= 3.8, found 3.6.0"
MODE = "both mode runs guard, memcheck; scenario planted_race uses racecheck"


def case(cid: str, outcome: Outcome, kernel: str, message: str = "", arch: str = "") -> CaseResult:
    scenario, _, rest = cid.partition("[")
    return CaseResult(case_id=cid, scenario=scenario, variant=rest.split("-")[0], params={}, kernel=kernel, arch=arch,
                      mode="both", outcome=outcome, expected="clean", message=message,
                      detectors=[DetectorRun(GUARD, outcome is Outcome.CLEAN, "")])


def results() -> list[CaseResult]:
    return [case("last_expert_oob_read[unpadded-tkD-a]", Outcome.NOT_APPLICABLE, "_matmul [copy D]", COPY_D + "\nmore"),
            case("last_expert_oob_read[padded-tkD-b]", Outcome.NOT_APPLICABLE, "_matmul [copy D]", COPY_D),
            case("planted_race[race-cuda]", Outcome.NOT_APPLICABLE, "planted_reduce_race", MODE),
            case("planted_race[race_fixed-cuda]", Outcome.UNSUPPORTED, "planted_reduce_race", "needs a CUDA GPU"),
            case("planted_oob[clean-triton]", Outcome.CLEAN, "planted_copy_sum", "clean under guard", "sm_90"),
            case("planted_oob[x-triton]", Outcome.NOT_APPLICABLE, "planted_copy_sum", "only memcheck", "sm_90")]


def rows() -> dict[str, dict]:
    return {r["kernel"]: r for r in matrix(results())}


def test_a_row_whose_cases_all_do_not_apply_reads_not_applicable_with_the_reason() -> None:
    row = rows()["_matmul [copy D]"]
    assert (row["verdict"], row["reason"]) == (NOT_APPLICABLE, COPY_D)      # first lines, each reason once


def test_a_row_with_an_accepted_could_not_run_stays_unsupported_with_every_reason() -> None:
    row = rows()["planted_reduce_race"]
    assert (row["verdict"], row["reason"]) == (UNSUPPORTED, f"{MODE}; needs a CUDA GPU")


def test_a_row_where_something_ran_is_judged_by_it_and_has_no_reason() -> None:
    row = rows()["planted_copy_sum"]
    assert (row["verdict"], row["reason"]) == (OK, "")
    assert worst_verdict([NOT_APPLICABLE, UNSUPPORTED]) == UNSUPPORTED and worst_verdict([NOT_APPLICABLE, OK]) == OK


def test_terminal_and_markdown_show_the_verdict_and_the_reason() -> None:
    report = build_report(results(), ENV, started="s", finished="f", argv=["make", "sanitize"])
    terminal = render_terminal(report)
    [line] = [ln for ln in terminal.splitlines() if ln.startswith("_matmul [copy D]")]
    assert line.endswith(f"not applicable  ({COPY_D})")
    [line] = [ln for ln in terminal.splitlines() if ln.startswith("planted_copy_sum")]
    assert line.endswith("ok")
    markdown = render_markdown(report)
    assert "| ➖ not applicable: NotApplicable: triton_kernels from sglang-kernel 0.4.10: needs triton &gt;= 3.8" in markdown


def test_merged_cells_keep_the_reason_only_where_no_runner_ran_anything(tmp_path: Path) -> None:
    report = build_report(results(), ENV, started="s", finished="f", argv=["make", "sanitize"])
    other = build_report([case("last_expert_oob_read[unpadded-tkD-a]", Outcome.CLEAN, "_matmul [copy D]", "", "sm_90")],
                         ENV, started="s", finished="f", argv=["make", "sanitize"])
    cells = {c["kernel"]: c for c in merge_cells([("a", report), ("b", other)])}
    assert (cells["_matmul [copy D]"]["verdict"], cells["_matmul [copy D]"]["reason"]) == (OK, "")
    alone = {c["kernel"]: c for c in merge_cells([("a", report)])}
    assert (alone["_matmul [copy D]"]["verdict"], alone["_matmul [copy D]"]["reason"]) == (NOT_APPLICABLE, COPY_D)


def test_cases_decided_before_any_process_count_on_the_runners_arch() -> None:
    """No "-" rows: a case judged before a process ran has no arch of its own and counts on the runner's; a kernel
    with a case that ran and one that did not is one row."""
    report = build_report(results(), ENV, started="s", finished="f", argv=["make", "sanitize"])
    assert {(r["kernel"], r["arch"], r["cases"]) for r in report["matrix"]} == {
        ("_matmul [copy D]", "sm_90", 2), ("planted_reduce_race", "sm_90", 2), ("planted_copy_sum", "sm_90", 2)}
    several = build_report(results(), {**ENV, "archs": ["sm_90", "sm_100"]}, started="s", finished="f", argv=[])
    assert ("_matmul [copy D]", "") in {(r["kernel"], r["arch"]) for r in several["matrix"]}   # whose? not known


def test_a_report_written_before_not_applicable_rows_is_still_read(tmp_path: Path) -> None:
    """An older writer: no reason, 'unsupported' for rows nothing of which applies, and cases without an arch in
    rows of their own. Read as it is; a matrix edited beyond that is still refused."""
    report = build_report(results(), ENV, started="s", finished="f", argv=["make", "sanitize"])
    path = write_reports(report, tmp_path / "new")["json"]
    old = json.loads(path.read_text())
    old["matrix"] = [{k: v for k, v in row.items() if k != "reason"} for row in matrix(results())]
    for row in old["matrix"]:
        if row["verdict"] == NOT_APPLICABLE:
            row["verdict"] = UNSUPPORTED
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert {(r["kernel"], r["arch"], r["verdict"]) for r in load_report(tmp_path / "old.json")["matrix"]} == {
        ("_matmul [copy D]", "", UNSUPPORTED), ("planted_reduce_race", "", UNSUPPORTED), ("planted_copy_sum", "sm_90", OK)}
    assert load_report(path) == report
    old["matrix"][0]["cases"] = 3
    (tmp_path / "edited.json").write_text(json.dumps(old))
    with pytest.raises(ReportError, match=r"matrix\[0\]\.cases: says 3 but the cases give 2"):
        load_report(tmp_path / "edited.json")
