"""Baselines: accepted findings, new ones that fail the run, and entries that no longer show up."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpu_memsafety.judge.baseline import (
    BASELINE_SCHEMA,
    DEFAULT_REASON,
    AcceptedFinding,
    Baseline,
    BaselineError,
    compare,
    load_baseline,
    render_diff,
    write_baseline,
)
from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, OVERWRITE, CaseResult, Finding, Outcome
from gpu_memsafety.report import ReportError

UPSTREAM = "triton-lang/triton#10772"
PACKED = "padded_stride_scale_write[packed-H2304-T5]"
REVERSE = "padded_stride_scale_write[reverse-H2304-T8]"
OOB = "last_expert_oob_read[unpadded-K2880-E4-N256]"
BATCHED = "last_expert_oob_read[batched-K2880-E4-N256]"

PADDING_OVERWRITE = Finding(GUARD, OVERWRITE, "scale", "padding", bytes=32, count=4, kernel="pre_dispatch_packed")
PAST_END_WRITE = Finding(MEMCHECK, OVERWRITE, "scale", "past_end", bytes=56, count=8, kernel="pre_dispatch_padded")
W_SCALE_OVERREAD = Finding(MEMCHECK, OVERREAD, "w_scale", "past_end", bytes=1024, count=512, kernel="_matmul_ogs")


def case(case_id: str, outcome: Outcome, *findings: Finding, expected: str = "clean") -> CaseResult:
    return CaseResult(case_id=case_id, scenario=case_id.partition("[")[0], variant="", params={},
                      kernel=findings[0].kernel if findings else "_matmul_ogs", arch="sm_90", mode="memcheck+guard",
                      outcome=outcome, expected=expected, findings=list(findings))


def run_results() -> list[CaseResult]:
    return [
        case(PACKED, Outcome.FINDING, PADDING_OVERWRITE),
        case(REVERSE, Outcome.FINDING, PAST_END_WRITE),
        case(OOB, Outcome.EXPECTED_FINDING, W_SCALE_OVERREAD,
             expected=f"overread of w_scale/past_end, any bytes, seen by memcheck (upstream {UPSTREAM})"),
        case(BATCHED, Outcome.TIMEOUT),
        case("last_expert_oob_read[padded-K2880-E4-N256]", Outcome.CLEAN),
    ]


def accepted(case_id: str, finding: Finding | str, reason: str = "packed layout is the shipped kernel; fix pending",
             upstream: str = "") -> AcceptedFinding:
    key = finding if isinstance(finding, str) else finding.key()
    return AcceptedFinding(case_id, key, reason, upstream)


def test_compare_splits_new_accepted_expected_disappeared_unchecked() -> None:
    gone = accepted("last_expert_oob_read[padded-K2880-E4-N256]", W_SCALE_OVERREAD, "fixed by padding")
    timed_out = accepted(BATCHED, W_SCALE_OVERREAD, "batched mode reads past the end; under study")
    never_ran = accepted("old_scenario[x]", PAST_END_WRITE, "scenario removed")
    baseline = Baseline((accepted(PACKED, PADDING_OVERWRITE), gone, timed_out, never_ran))
    diff = compare(run_results(), baseline)
    assert [(s.case, s.key) for s in diff.new] == [(REVERSE, PAST_END_WRITE.key())]
    assert [(s.case, a.reason) for s, a in diff.accepted] == [(PACKED, baseline.accepted[0].reason)]
    assert [(s.case, s.key) for s in diff.expected] == [(OOB, W_SCALE_OVERREAD.key())]
    assert diff.disappeared == [gone]
    assert diff.unchecked == [timed_out, never_ran]
    assert diff.failed


def test_a_fully_accepted_run_does_not_fail() -> None:
    baseline = Baseline((accepted(PACKED, PADDING_OVERWRITE), accepted(REVERSE, PAST_END_WRITE)))
    diff = compare(run_results(), baseline)
    assert not diff.failed
    assert diff.new == [] and len(diff.accepted) == 2


def test_a_finding_with_other_bytes_is_new() -> None:
    grown = Finding(GUARD, OVERWRITE, "scale", "padding", bytes=40, count=5, kernel="pre_dispatch_packed")
    diff = compare([case(PACKED, Outcome.FINDING, grown)], Baseline((accepted(PACKED, PADDING_OVERWRITE),)))
    assert [s.key for s in diff.new] == ["guard:overwrite:pre_dispatch_packed:scale:padding:40"]
    assert diff.disappeared == [accepted(PACKED, PADDING_OVERWRITE)]


def test_render_diff_names_the_new_finding_and_stale_entries() -> None:
    gone = accepted("last_expert_oob_read[padded-K2880-E4-N256]", W_SCALE_OVERREAD, "fixed by padding")
    text = render_diff(compare(run_results(), Baseline((gone,))))
    assert "NEW findings (not in the baseline; these fail the run):" in text
    assert f"{REVERSE}: memcheck overwrite of scale past_end: 56 B in 8 accesses" in text
    assert f"key = {PAST_END_WRITE.key()}" in text
    assert f"remove them from the baseline):\n  {gone.case}: {gone.finding}" in text
    assert render_diff(compare([], Baseline())) == "baseline: nothing to report\n"


def test_write_then_load_accepts_the_whole_run(tmp_path: Path) -> None:
    path = write_baseline(run_results(), tmp_path / "baseline.json")
    data = json.loads(path.read_text())
    assert data["schema"] == BASELINE_SCHEMA
    assert [e["case"] for e in data["accepted"]] == sorted([PACKED, REVERSE])
    assert DEFAULT_REASON == "" and all(e["reason"] == "" and e["seen"] for e in data["accepted"])
    with pytest.raises(BaselineError, match=r"accepted\[0\]\.reason: is empty; say why this finding is accepted"):
        load_baseline(path)                      # refused until every reason is filled in
    baseline = load_baseline(path, require_reasons=False)
    diff = compare(run_results(), baseline)
    assert (diff.new, diff.disappeared, len(diff.accepted)) == ([], [], 2)


def test_rewriting_keeps_reasons_and_can_include_expected_findings(tmp_path: Path) -> None:
    previous = Baseline((accepted(PACKED, PADDING_OVERWRITE, "sglang ships the packed kernel", "sgl-project/sglang#1"),))
    path = write_baseline(run_results(), tmp_path / "b.json", previous=previous, include_expected=True)
    entries = {a.case: a for a in load_baseline(path, require_reasons=False).accepted}
    assert entries[PACKED].reason == "sglang ships the packed kernel"
    assert entries[PACKED].upstream == "sgl-project/sglang#1"
    assert entries[OOB].upstream == UPSTREAM
    assert entries[REVERSE].reason == DEFAULT_REASON


def _entry(**overrides: object) -> dict:
    return {"case": PACKED, "finding": PADDING_OVERWRITE.key(), "reason": "known", "upstream": "", **overrides}


BAD_BASELINES = {
    "not-json": ("accepted:\n  - case: x\n", "not valid JSON"),
    "foreign": (json.dumps({"accepted": []}), "no 'schema' field"),
    "report-not-baseline": (json.dumps({"schema": "gpu-memsafety-report/1", "cases": []}),
                            "schema is 'gpu-memsafety-report/1'; expected 'gpu-memsafety-baseline/1'"),
    "accepted-not-list": (json.dumps({"schema": BASELINE_SCHEMA, "accepted": {}}), "accepted: expected array"),
    "missing-reason": (json.dumps({"schema": BASELINE_SCHEMA, "accepted": [{"case": PACKED, "finding": "k"}]}),
                       "accepted[0]: missing field 'reason'"),
    "empty-reason": (json.dumps({"schema": BASELINE_SCHEMA, "accepted": [_entry(reason=" ")]}),
                     "accepted[0].reason: is empty; say why"),
    "wrong-type": (json.dumps({"schema": BASELINE_SCHEMA, "accepted": [_entry(upstream=10772)]}),
                   "accepted[0].upstream: expected string, got integer"),
    "duplicate": (json.dumps({"schema": BASELINE_SCHEMA, "accepted": [_entry(), _entry(reason="again")]}),
                  "accepted[1]: repeats case"),
    "empty-file": ("", "empty file"),
}


@pytest.mark.parametrize("name", sorted(BAD_BASELINES))
def test_bad_baseline_names_the_file_and_the_problem(tmp_path: Path, name: str) -> None:
    text, fragment = BAD_BASELINES[name]
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    with pytest.raises(BaselineError) as caught:
        load_baseline(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert fragment in str(caught.value)
    assert isinstance(caught.value, ReportError)


def test_upstream_is_optional_in_a_hand_written_baseline(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"schema": BASELINE_SCHEMA,
                                "accepted": [{"case": PACKED, "finding": PADDING_OVERWRITE.key(), "reason": "r"}]}))
    assert load_baseline(path).accepted == (AcceptedFinding(PACKED, PADDING_OVERWRITE.key(), "r", ""),)



def test_an_inexact_finding_is_accepted_by_its_identity_whatever_its_count(tmp_path: Path) -> None:
    """A wild write's count moves between identical runs (memory layout): its key reads `~` for bytes, a baseline
    written from it loads, and an older entry that names one run's count still accepts the next run's. An exact
    finding with another count is not accepted (a bug that grew is news)."""
    wild = Finding(MEMCHECK, OVERWRITE, "unattributed", "unattributed", bytes=49152, count=5056, kernel="_matmul_ogs",
                   exact=False)
    moved = Finding(MEMCHECK, OVERWRITE, "unattributed", "unattributed", bytes=48640, count=4992, kernel="_matmul_ogs",
                    exact=False)
    assert wild.key() == moved.key() == "memcheck:overwrite:_matmul_ogs:unattributed:unattributed:~"
    path = write_baseline([case(BATCHED, Outcome.FINDING, wild)], tmp_path / "baseline.json", reason="triton#8327")
    again = compare([case(BATCHED, Outcome.FINDING, moved)], load_baseline(path))
    assert (again.new, again.disappeared, len(again.accepted)) == ([], [], 1)
    older = Baseline((accepted(BATCHED, "memcheck:overwrite:_matmul_ogs:unattributed:unattributed:49152"),))
    again = compare([case(BATCHED, Outcome.FINDING, moved)], older)
    assert (again.new, again.disappeared, len(again.accepted)) == ([], [], 1)
    grown = Finding(MEMCHECK, OVERREAD, "w_scale", "past_end", bytes=2048, count=512, kernel="_matmul_ogs")
    diff = compare([case(OOB, Outcome.FINDING, grown)], Baseline((accepted(OOB, W_SCALE_OVERREAD),)))
    assert [seen.finding for seen in diff.new] == [grown] and len(diff.disappeared) == 1


@pytest.mark.parametrize("key, words", [
    ("guard:overwrite:k:dst", "is not detector:kind:kernel:buffer:region:bytes"),
    ("sonar:overwrite:k:dst:past_end:1", "detector 'sonar' is not one of"),
    ("guard:overwrite:k::past_end:1", "names no buffer"),
    ("guard:overwrite:k:dst::1", "names no region"),
    ("guard:overwrite:k:dst:past_end:many", "bytes 'many' is not a count"),
])
def test_a_malformed_accepted_finding_is_refused_with_the_reason(tmp_path: Path, key: str, words: str) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"schema": "gpu-memsafety-baseline/1",
                                "accepted": [{"case": "s[c]", "finding": key, "reason": "known"}]}))
    with pytest.raises(BaselineError, match=re.escape(words)):
        load_baseline(path)


@pytest.mark.e2e
def test_a_malformed_baseline_stops_pytest_before_any_case_runs(tmp_path: Path) -> None:
    import subprocess
    import sys
    from gpu_memsafety.util.paths import CHECKOUT as ROOT
    path = tmp_path / "baseline.json"
    path.write_text('{"schema": "gpu-memsafety-baseline/1", "accepted": [{"case": "x"}]}')
    proc = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "--gpu-memsafety-mode", "guard",
                           "--gpu-memsafety-scenario", "planted_oob", "--gpu-memsafety-baseline", str(path)], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]      # pytest's usage error
    assert "--gpu-memsafety-baseline:" in proc.stderr and str(path) in proc.stderr and "accepted[0]" in proc.stderr
    assert " passed" not in proc.stdout and " failed" not in proc.stdout
