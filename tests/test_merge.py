"""Merging reports from several runners into one kernel x architecture matrix, and its command line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.merge import MERGED_SCHEMA, main, merge_reports, render_merge_markdown
from harness.model import GUARD, MEMCHECK, OVERREAD, OVERWRITE, ByteRange, CaseResult, Finding, Outcome
from harness.report import (
    FAILURE,
    KNOWN_BUG,
    MAX_REPORT_BYTES,
    OK,
    UNSUPPORTED,
    ReportError,
    build_report,
    report_json_text,
)

UPSTREAM = "triton-lang/triton#10772"


def overread(arch: str) -> Finding:
    return Finding(MEMCHECK, OVERREAD, "w_scale", "past_end", bytes=1024, count=512, kernel="_matmul_ogs",
                   arch=arch, ranges=(ByteRange("past_end", 0, 1024, "expert 31, K groups 90..91"),),
                   source="kernel.py:210")


def padding_overwrite(arch: str) -> Finding:
    return Finding(GUARD, OVERWRITE, "scale", "padding", bytes=32, count=4, kernel="pre_dispatch_packed",
                   arch=arch)


def case(case_id: str, outcome: Outcome, kernel: str, arch: str, *findings: Finding,
         message: str = "") -> CaseResult:
    scenario = case_id.partition("[")[0]
    return CaseResult(case_id=case_id, scenario=scenario, variant=case_id.split("[")[1].split("-")[0],
                      params={}, kernel=kernel, arch=arch, mode="memcheck+guard", outcome=outcome,
                      expected=f"overread of w_scale/past_end (upstream {UPSTREAM})", findings=list(findings),
                      message=message, duration_s=2.0)


def h100_results() -> list[CaseResult]:
    return [
        case("last_expert_oob_read[unpadded-K2880-E4-N256]", Outcome.EXPECTED_FINDING, "_matmul_ogs", "sm_90",
             overread("sm_90")),
        case("last_expert_oob_read[padded-K2880-E4-N256]", Outcome.CLEAN, "_matmul_ogs", "sm_90"),
        case("padded_stride_scale_write[packed-H2304-T5]", Outcome.FINDING, "pre_dispatch_packed", "sm_90",
             padding_overwrite("sm_90"), message="unexpected finding: guard overwrite of scale/padding, 32 B"),
    ]


def b200_results() -> list[CaseResult]:
    return [
        case("last_expert_oob_read[unpadded-K2880-E4-N256]", Outcome.CLEAN, "_matmul_ogs", "sm_100"),
        case("padded_stride_scale_write[strided-H2304-T5]", Outcome.CLEAN, "pre_dispatch_packed", "sm_100"),
        case("guard_page_probe[vector-add]", Outcome.UNSUPPORTED, "add_kernel", "sm_100",
             message="Missing required feature(s): cuda-bindings"),
    ]


def write_report(path: Path, results: list[CaseResult], hostname: str, gpu: str, arch: str) -> Path:
    environment = {"hostname": hostname, "gpus": [gpu], "archs": [arch], "driver": "580.159.04",
                   "compute_sanitizer": {"path": "/usr/local/cuda/bin/compute-sanitizer", "version": "2025.3.1"},
                   "torch": "2.11.0+cu130", "triton": "3.6.0", "triton_kernels": "sgl-kernel 0.3.21"}
    report = build_report(results, environment, started="2025-11-29T02:00:00Z", finished="2025-11-29T02:30:00Z",
                          argv=["make", "sanitize"])
    path.write_text(report_json_text(report))
    return path


@pytest.fixture
def two_runners(tmp_path: Path) -> list[Path]:
    return [write_report(tmp_path / "h100.json", h100_results(), "h100-3", "NVIDIA H100 80GB HBM3", "sm_90"),
            write_report(tmp_path / "b200.json", b200_results(), "b200-1", "NVIDIA B200", "sm_100")]


def cells_of(merged: dict) -> dict[tuple[str, str], dict]:
    return {(c["kernel"], c["arch"]): c for c in merged["cells"]}


def test_h100_and_b200_give_both_arch_columns(two_runners: list[Path]) -> None:
    merged = merge_reports(two_runners)
    assert merged["schema"] == MERGED_SCHEMA
    assert merged["archs"] == ["sm_100", "sm_90"]
    assert merged["kernels"] == ["_matmul_ogs", "add_kernel", "pre_dispatch_packed"]
    cells = cells_of(merged)
    assert cells[("_matmul_ogs", "sm_90")]["verdict"] == KNOWN_BUG
    assert cells[("_matmul_ogs", "sm_90")]["overreads"] == {"findings": 1, "bytes": 1024, "accesses": 512}
    assert cells[("_matmul_ogs", "sm_100")]["verdict"] == OK
    assert cells[("pre_dispatch_packed", "sm_90")]["verdict"] == FAILURE
    assert cells[("add_kernel", "sm_100")]["verdict"] == UNSUPPORTED
    assert ("add_kernel", "sm_90") not in cells
    assert [r["label"] for r in merged["runners"]] == ["h100-3", "b200-1"]
    assert merged["runners"][1]["environment"]["gpus"] == ["NVIDIA B200"]
    assert merged["summary"] == {"runners": 2, "total": 6, "failed": 1, "ran": 5, "skipped": 1, "not_run": 0,
                                 "status": "failed"}
    assert merged["failures"] == [{"runner": "h100-3", "id": "padded_stride_scale_write[packed-H2304-T5]",
                                   "kernel": "pre_dispatch_packed", "arch": "sm_90", "outcome": "finding",
                                   "message": "unexpected finding: guard overwrite of scale/padding, 32 B"}]


def test_merged_markdown_pivots_kernels_by_arch(two_runners: list[Path]) -> None:
    text = render_merge_markdown(merge_reports(two_runners))
    assert text.startswith("## ❌ GPU memory safety across 2 runners — FAILED: 5 ran, 1 failed, 1 not run\n")
    assert "| kernel | sm_100 | sm_90 |" in text
    assert ("| \\_matmul_ogs | ✅ ok (1 case) | ⚠️ known bug (2 cases)<br>1 overread, 1,024 B |") in text
    assert "| add_kernel | ➖ unsupported (1 case) | not run |" in text
    assert "❌ failure (1 case, 1 failed)<br>1 overwrite, 32 B" in text
    assert "| b200-1 | NVIDIA B200 | sm_100 | 580.159.04 |" in text
    assert "**padded_stride_scale_write\\[packed-H2304-T5\\]** on h100-3 (sm_90): finding" in text


def test_two_runners_of_one_arch_fold_into_one_cell(tmp_path: Path) -> None:
    clean = [case("padded_stride_scale_write[packed-H2304-T5]", Outcome.CLEAN, "pre_dispatch_packed", "sm_90")]
    first = write_report(tmp_path / "a.json", clean, "h100", "NVIDIA H100", "sm_90")
    second = write_report(tmp_path / "b.json", h100_results(), "h100", "NVIDIA H100", "sm_90")
    merged = merge_reports([first, second])
    cell = cells_of(merged)[("pre_dispatch_packed", "sm_90")]
    assert (cell["cases"], cell["failed"], cell["verdict"]) == (2, 1, FAILURE)
    assert cell["runners"] == ["h100", "h100#2"]
    assert merged["archs"] == ["sm_90"]


def test_main_writes_merged_json_and_markdown(two_runners: list[Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "merged"
    assert main([*map(str, two_runners), "-o", str(out)]) == 0
    merged = json.loads((out / "merged.json").read_text())
    assert merged["archs"] == ["sm_100", "sm_90"]
    assert "| kernel | sm_100 | sm_90 |" in (out / "merged.md").read_text()
    assert capsys.readouterr().out.split() == [str(out / "merged.json"), str(out / "merged.md")]


BAD = {
    "not-json": b"PK\x03\x04 this is a zip",
    "truncated": b'{"schema": "gpu-memsafety-report/1", "environment": {',
    "foreign": json.dumps({"version": 2, "results": []}).encode(),
    "wrong-schema": json.dumps({"schema": "gpu-memsafety-baseline/1", "accepted": []}).encode(),
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_main_reports_bad_files_with_exit_2_and_no_traceback(two_runners: list[Path], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str], name: str) -> None:
    bad = tmp_path / f"{name}.json"
    bad.write_bytes(BAD[name])
    assert main([str(two_runners[0]), str(bad), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"harness merge: error: {bad}: ")
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_main_refuses_a_huge_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    huge = tmp_path / "huge.json"
    with huge.open("wb") as handle:
        handle.truncate(MAX_REPORT_BYTES + 1)
    assert main([str(huge), "-o", str(tmp_path / "out")]) == 2
    assert f"{huge}: too large" in capsys.readouterr().err


def test_main_refuses_a_missing_file_and_a_repeated_one(two_runners: list[Path], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.json"
    assert main([str(missing), "-o", str(tmp_path / "out")]) == 2
    assert f"{missing}: cannot open" in capsys.readouterr().err
    assert main([str(two_runners[0]), str(two_runners[0]), "-o", str(tmp_path / "out")]) == 2
    assert "is the same file as" in capsys.readouterr().err


def test_main_usage_errors_exit_2(two_runners: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(two_runners[0])]) == 2
    assert "-o/--output" in capsys.readouterr().err
    assert main(["-o", "x"]) == 2


def test_paths_with_shell_metacharacters_are_only_opened(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sentinel = tmp_path / "pwned"
    odd = write_report(tmp_path / f"$(touch {sentinel.name});`touch {sentinel.name}`.json", b200_results(),
                       "", "NVIDIA B200", "sm_100")
    merged = merge_reports([odd])
    assert merged["runners"][0]["label"] == odd.name
    assert not sentinel.exists()


def test_merge_of_nothing_is_an_error() -> None:
    with pytest.raises(ReportError, match="no report files"):
        merge_reports([])
