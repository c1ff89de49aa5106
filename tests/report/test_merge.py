"""Merging reports from several runners into one kernel x architecture matrix, and its command line."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpu_memsafety.report.merge import MERGED_SCHEMA, main, merge_reports, render_merge_markdown
from gpu_memsafety.model import (GUARD, MEMCHECK, OVERREAD, OVERWRITE, ByteRange, CaseResult, DetectorRun, Finding,
                                 Outcome)
from gpu_memsafety.report import (
    FAILURE,
    KNOWN_BUG,
    MAX_REPORT_BYTES,
    OK,
    UNSUPPORTED,
    ReportError,
    build_report,
    report_json_text,
)
from repo_paths import ROOT

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
    """A case as the judge writes it: its detectors ran (none when it could not run), a clean case expected clean."""
    scenario = case_id.partition("[")[0]
    ran = not outcome.skipped
    return CaseResult(case_id=case_id, scenario=scenario, variant=case_id.split("[")[1].split("-")[0],
                      params={}, kernel=kernel, arch=arch, mode="memcheck+guard", outcome=outcome,
                      expected="clean" if outcome is Outcome.CLEAN else f"overread of w_scale/past_end (upstream {UPSTREAM})",
                      findings=list(findings), message=message, duration_s=2.0,
                      detectors=[DetectorRun(MEMCHECK, ran, ""), DetectorRun(GUARD, ran, "")])


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
    assert "| add_kernel | ➖ unsupported (1 case): Missing required feature(s): cuda-bindings | not run |" in text
    assert "❌ failure (1 case, 1 failed)<br>1 overwrite, 32 B" in text
    assert "| b200-1 | NVIDIA B200 | sm_100 | 580.159.04 |" in text
    assert "**padded_stride_scale_write\\[packed-H2304-T5\\]** on h100-3 (sm_90): finding" in text


def test_two_runners_of_one_arch_fold_into_one_cell(tmp_path: Path) -> None:
    clean = [case("padded_stride_scale_write[packed-H2304-T9]", Outcome.CLEAN, "pre_dispatch_packed", "sm_90")]
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


# ------------------------------------------------------------------------------- recomputed, not trusted


def test_numbers_come_from_the_cases_and_an_edited_summary_is_refused(two_runners: list[Path], tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(two_runners[0].read_text())
    doc["summary"].update(failed=0, status="passed")
    doc["summary"]["counts"]["finding"] = 0
    doc["summary"]["counts"]["clean"] += 1
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    assert main([str(edited), str(two_runners[1]), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{edited}: summary." in err and "but the cases give" in err
    assert not (tmp_path / "out").exists()


def test_an_edited_matrix_is_refused(two_runners: list[Path], tmp_path: Path) -> None:
    doc = json.loads(two_runners[0].read_text())
    row = next(r for r in doc["matrix"] if r["failed"])
    row["failed"], row["verdict"] = 0, "ok"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    with pytest.raises(ReportError, match=r"matrix\[\d\]\.failed: says 0 but the cases give 1"):
        merge_reports([edited])


def test_cells_are_rebuilt_from_cases_even_without_stored_rows_of_new_fields(two_runners: list[Path],
                                                                              tmp_path: Path) -> None:
    doc = json.loads(two_runners[0].read_text())
    for row in doc["matrix"]:
        row.pop("kinds")              # a report written before `kinds`: still merged, kinds from the cases
    for key in ("ran", "skipped", "not_run"):
        doc["summary"].pop(key)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    merged = merge_reports([old])
    assert cells_of(merged)[("_matmul_ogs", "sm_90")]["kinds"] == {
        "overread": {"findings": 1, "bytes": 1024, "accesses": 512}}
    assert merged["summary"]["ran"] == 3


# ------------------------------------------------------------------------------------ the same file twice


@pytest.mark.parametrize("how", ["hardlink", "symlink", "copy", "relative"])
def test_the_same_report_under_another_name_is_refused(two_runners: list[Path], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], how: str) -> None:
    first = two_runners[0]
    other = tmp_path / "again.json"
    if how == "hardlink":
        os.link(first, other)
    elif how == "symlink":
        other.symlink_to(first)
    elif how == "copy":
        other.write_bytes(first.read_bytes())
    else:
        monkeypatch.chdir(tmp_path)
        other = Path("./sub/../h100.json")
        (tmp_path / "sub").mkdir()
    assert main([str(first), str(other), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert str(other) in err
    assert ("same run" if how == "copy" else "same file") in err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------ shards


# Shards: tests/report/test_shards.py (the shard manifest, incomplete and inconsistent sets).


# ----------------------------------------------------------------------------------------- hostile files


def test_deep_nesting_and_bad_unicode_exit_2_with_the_file_name(two_runners: list[Path], tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"schema": "gpu-memsafety-report/1", "environment": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert main([str(two_runners[0]), str(deep), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{deep}: JSON nested too deeply" in err and "Traceback" not in err
    bad = tmp_path / "bad-unicode.json"
    bad.write_text(two_runners[1].read_text().replace('"hostname": "b200-1"', '"hostname": "b200-\\ud800"'))
    assert main([str(two_runners[0]), str(bad), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: environment.hostname: bad unicode: lone surrogate \\ud800" in err
    assert not (tmp_path / "out").exists()


def test_a_failed_write_leaves_the_previous_merged_set(two_runners: list[Path], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_memsafety.util import fsutil
    out = tmp_path / "out"
    assert main([str(two_runners[0]), "-o", str(out)]) == 0
    before = {p.name: p.read_text() for p in out.iterdir()}
    real = os.replace
    calls: list[object] = []

    def second_fails(src: object, dst: object) -> None:
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(src, dst)  # type: ignore[arg-type]
    monkeypatch.setattr(fsutil.os, "replace", second_fails)
    assert main([*map(str, two_runners), "-o", str(out)]) == 2
    monkeypatch.undo()
    assert {p.name: p.read_text() for p in out.iterdir()} == before


# ------------------------------------------------------------------------------------------- merged.md


def test_runner_table_is_readable_and_the_sanitizer_search_list_is_collapsed(tmp_path: Path) -> None:
    gpus = [{"index": i, "name": "NVIDIA H200", "uuid": f"GPU-{i}", "capability": [9, 0], "memory_mib": 143771,
             "arch": "sm_90"} for i in range(8)]
    env = {"hostname": "h200-1", "gpus": gpus, "archs": ["sm_90"], "driver": "580",
           "compute_sanitizer": {"path": None, "searched": ["/usr/local/cuda/bin/compute-sanitizer"] * 3 + ["/opt/cs"]}}
    report = build_report(h100_results(), env, started="s", finished="f", argv=[])
    path = tmp_path / "r.json"
    path.write_text(report_json_text(report))
    text = render_merge_markdown(merge_reports([path]))
    row = next(line for line in text.splitlines() if line.startswith("| h200-1 |"))
    assert row.startswith("| h200-1 | 8x NVIDIA H200 (sm_90, 140 GiB) | sm_90 | 580 | not found |")
    assert "uuid" not in text and "/opt/cs" not in row
    details = text.split("h200-1: where compute-sanitizer was searched (2 places)</summary>")[1]
    assert details.count("/usr/local/cuda/bin/compute-sanitizer") == 1


def test_cases_without_an_architecture_do_not_make_a_column(tmp_path: Path) -> None:
    results = [case("planted_oob[clean-triton]", Outcome.CLEAN, "planted", "cpu"),
               case("planted_oob[clean-cuda]", Outcome.UNSUPPORTED, "planted_cuda", "",
                    message="needs a CUDA GPU; found none")]
    cpu = tmp_path / "cpu.json"
    cpu.write_text(report_json_text(build_report(results, {"hostname": "laptop", "archs": ["cpu"]}, started="s",
                                                 finished="f", argv=[])))
    merged = merge_reports([cpu, write_report(tmp_path / "h.json", h100_results(), "h100", "H100", "sm_90")])
    assert merged["archs"] == ["cpu", "sm_90"]
    text = render_merge_markdown(merged)
    assert "| kernel | cpu | sm_90 |" in text
    assert "| planted\\_cuda | ➖ unsupported (1 case): needs a CUDA GPU; found none | not run |" in text or \
           "| planted_cuda | ➖ unsupported (1 case): needs a CUDA GPU; found none | not run |" in text


def test_error_text_from_a_file_cannot_drive_the_terminal(two_runners: list[Path], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(two_runners[0].read_text())
    doc["summary"]["counts"]["\x1b[2J\x1b]0;pwned\x07"] = 0   # a key: named raw in the JSON path
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert main([str(bad), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "unknown outcome" in err


def test_merged_output_matches_its_published_schema(two_runners: list[Path], tmp_path: Path) -> None:
    import jsonschema
    schema = json.loads((ROOT / "docs" / "merged.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    merged = json.loads(report_json_text(merge_reports(two_runners)))       # shards: tests/report/test_shards.py
    jsonschema.validate(merged, schema)
    merged["summary"]["status"] = "green"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(merged, schema)


def test_a_new_finding_kind_shows_in_the_merged_cell(tmp_path: Path) -> None:
    race = Finding("racecheck", "race", "__shared__", "shared", bytes=4, count=2, kernel="reduce", arch="sm_90")
    path = write_report(tmp_path / "r.json", [case("s[a]", Outcome.FINDING, "reduce", "sm_90", race, message="m")],
                        "h", "H200", "sm_90")
    text = render_merge_markdown(merge_reports([path]))
    assert "❌ failure (1 case, 1 failed)<br>1 race, 4 B" in text


def test_one_case_on_one_arch_in_two_reports_is_refused_even_when_they_agree(tmp_path: Path) -> None:
    first = write_report(tmp_path / "a.json", h100_results(), "h100", "NVIDIA H100", "sm_90")
    second = write_report(tmp_path / "b.json", h100_results(), "h100-2", "NVIDIA H100", "sm_90")
    with pytest.raises(ReportError, match="appear in two reports for the same architecture"):
        merge_reports([first, second])
