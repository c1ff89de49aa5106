"""racecheck and synccheck: text records (in the shape of real output, see tests/data/sanitizer/README.md)
parsed and turned into findings that name the kernel, the source line and the two accesses."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpu_memsafety.sanitizer import hazards
from gpu_memsafety.sanitizer import parse
from gpu_memsafety.model import BARRIER, RACE, RACECHECK, SHARED, SYNCCHECK, ExpectedFinding
from repo_paths import SANITIZER_DATA as DATA


def _parsed(name: str) -> parse.ParseResult:
    return parse.parse_text((DATA / name).read_text())


def test_racecheck_analysis_records_keep_both_accesses_and_their_counts() -> None:
    result = _parsed("racecheck-analysis-fabricated.txt")
    assert result.complete and result.attached and result.summary_errors == 3
    first, nolines, old = result.of(parse.HAZARD)
    assert first.kernel == "planted_reduce_race" and first.level == "Error"
    assert [(a.direction, a.source, a.hazards) for a in first.accesses] == [
        ("write", "race.cu:27", None), ("read", "race.cu:27", 248), ("read", "race.cu:27", 248)]
    assert [a.source for a in nolines.accesses] == ["planted_reduce_race+0x1a0", "planted_reduce_race+0x140"]
    assert nolines.level == "Warning"
    # the older "at 0xPC in file:line:function" shape
    assert [(a.direction, a.source, a.pc) for a in old.accesses] == [("read", "convolution.cu:123", "0x6360"),
                                                                      ("write", "convolution.cu:63", "0x1fe0")]
    assert old.kernel.startswith("convolution(pixel const*")


def test_a_race_reported_with_an_error_prefix_is_not_a_sanitizer_failure() -> None:
    result = _parsed("racecheck-analysis-fabricated.txt")
    assert not result.of(parse.INTERNAL_ERROR) and result.problem == ""


def test_racecheck_hazard_mode_records_have_threads_block_and_address() -> None:
    result = _parsed("racecheck-hazard-fabricated.txt")
    raw, war = result.of(parse.HAZARD)
    assert (raw.hazard, raw.address, raw.block, raw.space) == ("RAW", 0x10, (0, 0, 0), "shared")
    assert [(a.direction, a.thread, a.source) for a in raw.accesses] == [("write", (4, 0, 0), "race.cu:27"),
                                                                         ("read", (0, 0, 0), "race.cu:27")]
    assert (war.level, war.hazard, war.block, war.kernel) == ("WARN", "WAR", (1, 0, 0), "scan_kernel")
    assert [a.source for a in war.accesses] == ["warp_scan.cuh:146", "warp_scan.cuh:151"]


def test_racecheck_output_without_its_summary_is_incomplete() -> None:
    text = (DATA / "racecheck-analysis-fabricated.txt").read_text().split("========= RACECHECK SUMMARY")[0]
    result = parse.parse_text(text)
    assert not result.complete and "RACECHECK SUMMARY" in result.problem


def test_synccheck_records_name_kernel_line_and_thread() -> None:
    result = _parsed("synccheck-fabricated.txt")
    block, warp = result.of(parse.SYNC_ERROR)
    assert (block.kernel, block.line, block.error, block.thread) == (
        "planted_divergent_barrier", 52, "Divergent thread(s) in block", (0, 0, 0))
    assert (warp.kernel, warp.file, warp.line, warp.pc) == ("ptxcall_kernel_3", "/home/u/sync.jl", 12, "0x000046b8")
    assert result.complete and result.summary_errors == 2


def test_race_findings_name_kernel_lines_and_both_accesses() -> None:
    found = hazards.race_and_barrier_findings(_parsed("racecheck-analysis-fabricated.txt").records, arch="sm_90")
    planted = [f for f in found if f.kernel == "planted_reduce_race" and f.source == "race.cu:27 / race.cu:27"]
    assert len(planted) == 1, found  # two read pcs on one line race with one write: one pair of lines
    f = planted[0]
    assert (f.detector, f.kind, f.buffer, f.count, f.arch) == (RACECHECK, RACE, SHARED, 496, "sm_90")
    assert "write at race.cu:27 races with read at race.cu:27" in f.note
    conv = [f for f in found if f.kernel.startswith("convolution")]
    assert conv[0].source == "convolution.cu:63 / convolution.cu:123" and conv[0].count == 1088
    assert "write at convolution.cu:63 races with read at convolution.cu:123" in conv[0].note


def test_hazard_mode_pairs_group_like_analysis_pairs_and_count_addresses() -> None:
    found = hazards.race_and_barrier_findings(_parsed("racecheck-hazard-fabricated.txt").records)
    planted = [f for f in found if f.kernel == "planted_reduce_race"]
    assert len(planted) == 1
    assert (planted[0].bytes, planted[0].count, planted[0].first_thread, planted[0].first_block) == (1, 1, "(4,0,0)", "(0,0,0)")
    assert "(RAW)" in planted[0].note


def test_a_hazard_record_without_its_second_access_is_kept() -> None:
    rec = parse.SanitizerRecord(category=parse.HAZARD, text="Race reported between Write access at k+0x10",
                                kernel="k", accesses=(parse.HazardAccess("write", "k", "0x10"),))
    (f,) = hazards.race_and_barrier_findings([rec])
    assert f.kind == RACE and "without a second access" in f.note


def test_sync_findings_group_per_line_and_match_an_expectation() -> None:
    found = hazards.race_and_barrier_findings(_parsed("synccheck-fabricated.txt").records)
    assert {(f.detector, f.kind, f.kernel, f.source) for f in found} == {
        (SYNCCHECK, BARRIER, "planted_divergent_barrier", "race.cu:52"), (SYNCCHECK, BARRIER, "ptxcall_kernel_3", "sync.jl:12")}
    expected = ExpectedFinding(BARRIER, hazards.BARRIER_BUFFER, (SYNCCHECK,))
    assert sum(expected.matches(f) for f in found) == 2
    assert not ExpectedFinding(RACE, SHARED, (RACECHECK,)).matches(found[0])


def _race(kernel: str) -> parse.SanitizerRecord:
    return parse.SanitizerRecord(category=parse.HAZARD, text="Race reported", kernel=kernel, accesses=(
        parse.HazardAccess("write", kernel, "0x10", "race.cu", 27), parse.HazardAccess("read", kernel, "0x20", "race.cu", 27, hazards=3)))


def test_a_hazard_goes_to_the_one_case_that_launched_its_kernel() -> None:
    got = hazards.assign([_race("planted_reduce_race")], {"a": "planted_divergent_barrier", "b": "planted_reduce_race"})
    assert got.alone == [] and list(got.findings) == ["b"] and got.findings["b"][0].kind == RACE


def test_a_hazard_several_cases_could_have_made_sends_them_to_run_alone() -> None:
    kernels = {"race": "planted_reduce_race", "fixed": "planted_reduce_race", "other": "planted_divergent_barrier"}
    got = hazards.assign([_race("planted_reduce_race")], kernels)
    assert got.alone == ["race", "fixed"] and got.findings == {}


def test_a_hazard_no_case_names_sends_every_case_alone_but_one_case_owns_it() -> None:
    assert hazards.assign([_race("mystery")], {"a": "k_one", "b": "k_two"}).alone == ["a", "b"]
    single = hazards.assign([_race("mystery")], {"a": "k_one"})
    assert single.alone == [] and single.findings["a"][0].kernel == "mystery"


def test_a_triton_kernel_label_matches_its_specialised_name() -> None:
    got = hazards.assign([_race("_matmul_ogs_NNT_bf16xbf16")], {"a": "_matmul_ogs", "b": "planted_reduce_race"})
    assert list(got.findings) == ["a"]


@pytest.mark.e2e
def test_the_finding_builders_import_no_torch() -> None:
    import subprocess
    import sys
    code = ("import sys, gpu_memsafety.sanitizer.hazards, gpu_memsafety.detectors.uninit, gpu_memsafety.scenarios.planted_race, gpu_memsafety.scenarios.planted_barrier, gpu_memsafety.scenarios.planted_uninit; "
            "bad = [m for m in ('torch', 'triton') if m in sys.modules]; assert not bad, bad")
    from gpu_memsafety.util.paths import CHECKOUT as ROOT
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)


def test_tool_records_agree_with_the_tools_own_count() -> None:
    records, problem = hazards.tool_records("racecheck", _parsed("racecheck-analysis-fabricated.txt"))
    assert problem == "" and sum(r.category == parse.HAZARD for r in records) == 3
    records, problem = hazards.tool_records("synccheck", _parsed("synccheck-fabricated.txt"))
    assert problem == "" and len(records) == 2


def test_a_summary_that_counts_more_than_the_text_holds_is_a_problem() -> None:
    text = (DATA / "racecheck-analysis-fabricated.txt").read_text().replace(
        "RACECHECK SUMMARY: 3 hazards displayed", "RACECHECK SUMMARY: 4 hazards displayed")
    _, problem = hazards.tool_records("racecheck", parse.parse_text(text))
    assert "counted 4 hazards displayed" in problem and "holds 3" in problem
    text = (DATA / "synccheck-fabricated.txt").read_text().replace("ERROR SUMMARY: 2 errors", "ERROR SUMMARY: 5 errors")
    assert "counted 5 errors" in hazards.tool_records("synccheck", parse.parse_text(text))[1]


def test_a_race_finding_keeps_both_accesses_in_its_details() -> None:
    (f,) = [f for f in hazards.race_and_barrier_findings(_parsed("racecheck-hazard-fabricated.txt").records) if f.kernel == "scan_kernel"]
    assert (f.detail("access"), f.detail("other_access"), f.detail("hazard_kinds"), f.detail("level")) == (
        "write at warp_scan.cuh:151", "read at warp_scan.cuh:146", "WAR", "WARN")
    assert f.region == "shared"
