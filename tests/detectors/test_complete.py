"""The complete mode (issue 26 item 1): one default run sees every class of bug, one judgement per case.

Through the real runner and worker on the CPU (Triton under TRITON_INTERPRET=1): memcheck through the fake
compute-sanitizer of tests/helpers/fake_sanitizer.py (it reports a case's expected accesses only outside their buffer's
allocation, as memcheck does), poison and uninit as they are. The GPU run of the whole matrix in this mode is
ci/gpu/complete_check.sh. The rules that add the stages up (gpu_memsafety.judge.combine) are tested with
small fakes at the end.
"""
from __future__ import annotations

import json

import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.detectors.modes import DEFAULT_MODE, MODES, QUICK_MODE
from gpu_memsafety.engine.runner import RunOptions, Runner
from gpu_memsafety.judge.combine import StageResult, combine, stops
from gpu_memsafety.judge.verdict import assess
from gpu_memsafety.model import (TRACE, TRACE_RACE, GUARD, MEMCHECK, OVERREAD, OVERWRITE, POISON, RACECHECK, SYNCCHECK, UNINIT, UNINIT_READ,
                                 ByteRange, CaseResult, DetectorRun, Expectation, ExpectedFinding, Finding, Outcome)
from gpu_memsafety.scenario import registry
from gpu_memsafety.scenario.definition import Case, Param, Scenario
from gpu_memsafety.util.paths import CHECKOUT

from fake_sanitizer import memcheck as fake_memcheck
from repo_paths import FAKE_DIR

OVERREAD_X = "planted_unwatched[input_overread-triton-n4096]"
CLEAN_X = "planted_unwatched[clean-triton-n4096]"
UNINIT_READ_OUT = "planted_uninit[accumulate_empty-triton-n4000]"


def run(workdir: Path, ids: list[str], **options: Any) -> dict[str, CaseResult]:
    runner = Runner(RunOptions(mode=MODES["complete"], workdir=workdir, **options))
    return {r.case_id: r for r in runner.run([registry.find_case(i) for i in ids])}


@pytest.fixture()
def interpreter(tmp_path: Path) -> str:
    """A python that runs the worker under the Triton interpreter although the runner is told there is a GPU (the
    fake sanitizer needs that)."""
    script = tmp_path / "python-interpret"
    script.write_text(f"#!/bin/sh\nexport TRITON_INTERPRET=1\nexec {sys.executable} \"$@\"\n")
    script.chmod(0o755)
    return str(script)


# ----------------------------------------------------------------------------------------- the mode table

def test_complete_is_the_default_everywhere_and_both_the_quick_gate() -> None:
    assert DEFAULT_MODE == "complete" and QUICK_MODE == "both"
    complete = MODES["complete"]
    assert complete.stages == ("both", "values", "racecheck", "synccheck")
    assert set(complete.detectors) == {GUARD, MEMCHECK, POISON, UNINIT, TRACE, TRACE_RACE, RACECHECK, SYNCCHECK}
    assert complete.tools == ("memcheck", "racecheck", "synccheck") and complete.sanitizer is None
    assert MODES["values"].actions_for(MODES["values"].detectors) == ("poison", "fill") and MODES["values"].sanitizer is None
    makefile = (CHECKOUT / "Makefile").read_text()
    assert "MODE ?= complete" in makefile and "sanitize-quick:" in makefile and "MODE=both" in makefile
    from gpu_memsafety.fixtures import options
    assert "default=DEFAULT_MODE" in Path(options.__file__).read_text()


def test_racecheck_and_synccheck_run_only_where_a_scenario_declares_them() -> None:
    used = {name: s.detectors for name, s in registry.all_scenarios().items()}
    declared = sorted(name for name, detectors in used.items() if RACECHECK in detectors or SYNCCHECK in detectors)
    assert declared == ["planted_barrier", "planted_race"]


# ------------------------------------------------------------------------------- one run, every detector

@pytest.mark.e2e
def test_one_run_judges_memcheck_poison_and_uninit_once_per_case(tmp_path: Path, interpreter: str) -> None:
    ids = [OVERREAD_X, CLEAN_X, UNINIT_READ_OUT]
    results = run(tmp_path, ids, gpu_available=True, sanitizer=fake_memcheck(tmp_path, "expected"),
                  python=interpreter, timeout_scale=0.5)
    assert sorted(results) == sorted(ids)
    read = results[OVERREAD_X]
    assert read.mode == "complete" and read.outcome is Outcome.EXPECTED_FINDING, read.message
    # the trace ran too (Triton interpreted here): under memcheck each tensor is its whole allocation, so the read
    # lands outside every allocation the launch can reach, a stray access, blamed on x as memcheck blames it
    assert sorted((f.detector, f.kind, f.buffer, f.region) for f in read.findings) == [
        (MEMCHECK, OVERREAD, "x", "past_end"), (TRACE, OVERREAD, "x", "past_end")]
    # Every buffer covered and none with rows: memcheck watched both ends of each, poison would only repeat it.
    assert [s["mode"] for s in read.details["stages"]] == ["both"]
    ran = {d.detector for d in read.detectors if d.ran}
    assert ran == {GUARD, MEMCHECK, TRACE, TRACE_RACE}, read.detectors
    poison = next(d for d in read.detectors if d.detector == POISON)
    assert "poison had nothing memcheck did not see" in poison.detail and not poison.missing
    clean = results[CLEAN_X]
    assert clean.outcome is Outcome.CLEAN and clean.findings == [], clean.message
    uninit = results[UNINIT_READ_OUT]
    assert uninit.outcome is Outcome.EXPECTED_FINDING, uninit.message
    assert [(f.detector, f.kind, f.buffer) for f in uninit.findings] == [(UNINIT, UNINIT_READ, "out")]
    assert [s["mode"] for s in uninit.details["stages"]] == ["both", "values"]


@pytest.mark.e2e
def test_without_a_gpu_the_interpreter_runs_guard_poison_and_uninit_and_the_case_says_partial(tmp_path: Path) -> None:
    """No GPU, no sanitizer: what can run does (the markers and the interpreter's trace, then uninit; poison is left
    to the trace, which checked every access of the case's Triton launches), memcheck is reported as not run, and
    the case is judged by what ran: partial, never 'unsupported' for all of it."""
    results = run(tmp_path, [OVERREAD_X, CLEAN_X], gpu_available=False, timeout_scale=0.5)
    read = results[OVERREAD_X]
    assert read.outcome is Outcome.EXPECTED_FINDING, read.message
    assert [(f.detector, f.buffer, f.region, f.bytes) for f in read.findings] == [(TRACE, "x", "past_end", 4)]
    poison = next(d for d in read.detectors if d.detector == POISON)
    assert not poison.ran and not poison.missing and "the interpreter's trace checked every access" in poison.detail
    assert [st["mode"] for st in read.details["stages"]] == ["both"]      # the scenario uses no uninit: no values stage
    assert set(read.details["partial"]) == {MEMCHECK}
    assert "partial" in read.message
    clean = results[CLEAN_X]
    assert clean.outcome is Outcome.CLEAN and MEMCHECK in clean.details["partial"], clean.message
    # the report the run writes is one every reader accepts, and says partial (it refused itself before)
    from gpu_memsafety.report import build_report, report_json_text, validate_report
    from gpu_memsafety.report.render import headline
    doc = validate_report(json.loads(report_json_text(build_report(list(results.values()), {"gpus": [], "python": "3"},
                                                                   started="s", finished="f", argv=[]))))
    assert headline(doc).word == "passed, partial"


# --------------------------------------------------------------------------------- adding the stages up

def scenario(expect: Expectation = Expectation()) -> Scenario:
    return Scenario(name="fake", summary="fake", adapter="x:y", params=(Param("n", int),), variants=("v",),
                    cases=lambda: [CASE], expect=lambda case: expect, kernel=lambda case: "k",
                    needs_gpu=lambda case: False)


CASE = Case("fake", "v", {"n": 1}, "n1")
READ = ExpectedFinding(OVERREAD, "x", region="past_end")          # memcheck, guard page, poison (derived)
SEEN_BY_MEMCHECK = Finding(MEMCHECK, OVERREAD, "x", "past_end", 4)


def stage(name: str, outcome: Outcome, expect: Expectation, findings: list[Finding], runs: list[DetectorRun],
          judged: bool = True) -> StageResult:
    result = CaseResult(CASE.id, "fake", "v", {}, "k", "sm_90", name, outcome, "", findings, runs, message=f"{name} said so")
    return StageResult(name, result, assess(expect, findings, runs) if judged else None)


def decide(stages: list[StageResult], expect: Expectation, *, gpu: bool = True) -> CaseResult:
    return combine("complete", MODES["complete"].detectors, scenario(expect), CASE, stages, gpu=gpu,
                   allow_unsupported=False)


def test_an_expected_finding_seen_by_any_stage_is_seen() -> None:
    expect = Expectation((READ,))
    first = stage("both", Outcome.EXPECTED_FINDING, expect, [SEEN_BY_MEMCHECK],
                  [DetectorRun(GUARD, True), DetectorRun(MEMCHECK, True)])
    second = stage("values", Outcome.UNEXPECTEDLY_CLEAN, expect, [], [DetectorRun(POISON, True), DetectorRun(UNINIT, True)])
    result = decide([first, second], expect)
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    assert [s["mode"] for s in result.details["stages"]] == ["both", "values"]


def test_a_bug_no_stage_saw_is_unexpectedly_clean_and_a_finding_of_any_stage_fails() -> None:
    expect = Expectation((READ,))
    runs = [DetectorRun(GUARD, True), DetectorRun(MEMCHECK, True)]
    missed = decide([stage("both", Outcome.UNEXPECTEDLY_CLEAN, expect, [], runs),
                     stage("values", Outcome.UNEXPECTEDLY_CLEAN, expect, [], [DetectorRun(POISON, True)])], expect)
    assert missed.outcome is Outcome.UNEXPECTEDLY_CLEAN, missed.message
    stray = Finding(UNINIT, UNINIT_READ, "out", "inside", 16)
    found = decide([stage("both", Outcome.CLEAN, Expectation(), [], runs),
                    stage("values", Outcome.FINDING, Expectation(), [stray], [DetectorRun(UNINIT, True)])], Expectation())
    assert found.outcome is Outcome.FINDING and found.findings == [stray]


def test_the_same_finding_seen_by_two_stages_is_reported_once_and_a_failure_without_memcheck_says_partial() -> None:
    """A CPU held-out run (session 8): the guard markers, checked after both stages' launches, reported each
    overwrite twice (the kernel table then said 24 B for 12 B), and the headline's "memcheck did not run on N"
    left out the cases that failed."""
    over = Finding(GUARD, OVERWRITE, "out", "past_end", 12, ranges=(ByteRange("past_end", 4004, 4016),))
    wider = Finding(GUARD, OVERWRITE, "out", "past_end", 16, ranges=(ByteRange("past_end", 4004, 4020),))
    no_memcheck = DetectorRun(MEMCHECK, False, "needs a CUDA GPU; found none", missing=True)
    runs = [DetectorRun(GUARD, True), no_memcheck]
    result = decide([stage("both", Outcome.FINDING, Expectation(), [over], runs),
                     stage("values", Outcome.FINDING, Expectation(), [over, wider], [DetectorRun(GUARD, True)])],
                    Expectation(), gpu=False)
    # each observation once, and one that another of the same detector saw more of is part of it (held-out hr_a,
    # session 9: 4 B of a marker-valued overrun in the memcheck stage, all 16 B in the values stage)
    assert result.outcome is Outcome.FINDING and result.findings == [wider]
    beside = Finding(GUARD, OVERWRITE, "out", "past_end", 4, ranges=(ByteRange("past_end", 4100, 4104),))
    other = Finding(GUARD, OVERWRITE, "x", "past_end", 4, ranges=(ByteRange("past_end", 4004, 4008),))
    kept = decide([stage("both", Outcome.FINDING, Expectation(), [over, beside, other], runs),
                   stage("values", Outcome.FINDING, Expectation(), [wider], [DetectorRun(GUARD, True)])],
                  Expectation(), gpu=False)
    assert kept.findings == [beside, other, wider]      # not inside wider's bytes, or another buffer: both stay
    assert result.details["partial"] == {MEMCHECK: "needs a CUDA GPU; found none"}
    crashed = decide([stage("both", Outcome.CLEAN, Expectation(), [], runs),
                      stage("values", Outcome.CRASHED, Expectation(), [], [DetectorRun(GUARD, True)], judged=False)],
                     Expectation(), gpu=False)
    assert crashed.outcome is Outcome.CRASHED and crashed.details["partial"] == {MEMCHECK: "needs a CUDA GPU; found none"}


def test_a_stage_that_crashed_or_timed_out_decides_whatever_the_others_saw() -> None:
    expect = Expectation((READ,))
    first = stage("both", Outcome.EXPECTED_FINDING, expect, [SEEN_BY_MEMCHECK], [DetectorRun(MEMCHECK, True)])
    crashed = stage("values", Outcome.CRASHED, expect, [], [DetectorRun(POISON, False, "case did not run")], judged=False)
    result = decide([first, crashed], expect)
    assert result.outcome is Outcome.CRASHED and "[values]" in result.message, result.message
    assert stops(crashed) and not stops(first)


def test_a_stage_the_fence_stopped_over_stray_accesses_decides_only_where_no_stage_traced_them() -> None:
    """Under the interpreter a run without the trace (poison's, uninit's) ends with StrayAccess rather than touch
    memory the process does not own. Where another stage ran the trace, its findings say what the accesses were: the
    stopped stage decides nothing. Where none did, it decides (unresolved): never a pass over them."""
    wild = Finding(TRACE, OVERWRITE, "unattributed", "unattributed", 16)
    traced = stage("both", Outcome.FINDING, Expectation(), [wild], [DetectorRun(GUARD, True), DetectorRun(TRACE, True)])
    def stopped() -> StageResult:
        result = CaseResult(CASE.id, "fake", "v", {}, "k", "", "values", Outcome.UNRESOLVED, "", [],
                            [DetectorRun(POISON, False, "not judged: the interpreter's fence stopped the run")],
                            message="StrayAccess: k wrote 16 B (first: address 0x7f00, near no tensor argument): ...")
        return StageResult("values", result, None)
    result = decide([traced, stopped()], Expectation(), gpu=False)
    assert result.outcome is Outcome.FINDING and result.findings == [wild], result.message
    assert [(s["mode"], s["outcome"]) for s in result.details["stages"]] == [("both", "finding"), ("values", "unresolved")]
    untraced = stage("both", Outcome.CLEAN, Expectation(), [], [DetectorRun(GUARD, True), DetectorRun(TRACE, False, "x")])
    alone = decide([untraced, stopped()], Expectation(), gpu=False)
    assert alone.outcome is Outcome.UNRESOLVED and "StrayAccess" in alone.message
    crashed = stage("values", Outcome.CRASHED, Expectation(), [], [DetectorRun(POISON, False, "x")], judged=False)
    assert decide([traced, crashed], Expectation(), gpu=False).outcome is Outcome.CRASHED     # only StrayAccess


def test_a_first_stage_that_skipped_the_case_decides_and_a_later_skip_adds_nothing() -> None:
    expect = Expectation((READ,))
    skipped = stage("both", Outcome.NOT_APPLICABLE, expect, [], [], judged=False)
    assert decide([skipped], expect).outcome is Outcome.NOT_APPLICABLE and stops(skipped)
    first = stage("both", Outcome.EXPECTED_FINDING, expect, [SEEN_BY_MEMCHECK], [DetectorRun(MEMCHECK, True)])
    later = stage("values", Outcome.NOT_APPLICABLE, expect, [], [], judged=False)
    result = decide([first, later], expect)
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    assert result.details["stages"][1] == {"mode": "values", "outcome": "not applicable", "seconds": 0.0,
                                           "message": "values said so"}


def test_a_detector_that_could_not_run_fails_a_pass_on_a_gpu_machine_and_marks_it_partial_without_one() -> None:
    runs = [DetectorRun(GUARD, True), DetectorRun(MEMCHECK, False, "compute-sanitizer not found", missing=True)]
    stages = [stage("both", Outcome.CLEAN, Expectation(), [], runs)]
    on_gpu = decide(stages, Expectation(), gpu=True)
    assert on_gpu.outcome is Outcome.COULD_NOT_RUN and "memcheck could not run" in on_gpu.message
    without = decide(stages, Expectation(), gpu=False)
    assert without.outcome is Outcome.CLEAN and without.details["partial"] == {MEMCHECK: "compute-sanitizer not found"}


def test_no_stage_for_the_scenario_is_not_applicable_with_the_reason() -> None:
    result = decide([], Expectation())
    assert result.outcome is Outcome.NOT_APPLICABLE and "no stage of complete" in result.message


# -------------------------------------------------------------------------------------- workers, headline

def test_workers_per_gpu_come_from_its_memory_the_cores_and_the_matrix() -> None:
    from gpu_memsafety.util.gpus import auto_workers, scenario_workers
    h200 = 143_771                                                  # MiB, as NVML reports an H200
    assert scenario_workers([h200], 16, 366) == 8                   # the cores decide: 16 // 2
    assert scenario_workers([h200, h200], 32, 366) == 16
    assert scenario_workers([h200], 64, 366) == 8                   # at most 8 per GPU
    assert scenario_workers([24_576], 16, 366) == 1                 # 24 GiB: one worker's worth
    assert scenario_workers([h200], 16, 10) == 2                    # a small matrix needs few
    assert scenario_workers([h200, h200], 2, 10) == 2               # never fewer than one per GPU
    assert scenario_workers([], 16, 366) == auto_workers(0, 16)


def test_the_headline_says_partial_when_part_of_the_matrix_or_of_its_detectors_did_not_run() -> None:
    from gpu_memsafety.report import build_report
    from gpu_memsafety.report.markdown import render_markdown
    from gpu_memsafety.report.render import headline
    ran = CaseResult("a[v-1]", "a", "v", {}, "k", "cpu", "complete", Outcome.CLEAN, "clean",
                     detectors=[DetectorRun(GUARD, True), DetectorRun(MEMCHECK, False, "needs a CUDA GPU", missing=True)],
                     details={"partial": {MEMCHECK: "needs a CUDA GPU; found none"}})
    skipped = CaseResult("a[v-2]", "a", "v", {}, "k", "", "complete", Outcome.UNSUPPORTED, "clean",
                         message="needs a CUDA GPU; found none")
    env = {"gpus": [], "python": "3"}
    doc = build_report([ran, skipped], env, started="2026-01-01T00:00:00Z", finished="2026-01-01T00:00:01Z", argv=[])
    head = headline(doc)
    assert head.partial and head.text.startswith("passed, partial: 1 ran, 1 not run (needs a CUDA GPU")
    assert "memcheck did not run on 1 (needs a CUDA GPU; found none)" in head.text
    assert "✅" not in render_markdown(doc).splitlines()[0]
    whole = build_report([CaseResult("a[v-1]", "a", "v", {}, "k", "sm_90", "complete", Outcome.CLEAN, "clean",
                                     detectors=[DetectorRun(MEMCHECK, True)])],
                         env, started="2026-01-01T00:00:00Z", finished="2026-01-01T00:00:01Z", argv=[])
    assert not headline(whole).partial and headline(whole).text == "passed: 1 ran"


def test_poisons_refinement_is_bounded_by_the_cases_own_run_time_unless_an_expectation_names_bytes() -> None:
    from gpu_memsafety.detectors.poison import MIN_REFINE_RUNS, REFINE_BUDGET, bound, refine_budget
    assert refine_budget(0.001) == REFINE_BUDGET                    # a small kernel: bisect to the byte
    assert refine_budget(2.0) == MIN_REFINE_RUNS                    # a gpt-oss shape: enough for a 1 KiB guard
    anywhere = ExpectedFinding(OVERREAD, "w_scale", region="past_end")
    exact = ExpectedFinding(OVERREAD, "src", region="past_end", bytes=1, ranges=((4000, 4001),))
    assert refine_budget(2.0, [anywhere, exact], "w_scale") == 0    # costly, and no bytes expected: none to bound
    assert refine_budget(2.0, [anywhere, exact], "src") == REFINE_BUDGET     # its bytes are judged: never by load
    assert refine_budget(0.5, [exact], "src") == refine_budget(0.0001, [exact], "src") == REFINE_BUDGET
    assert refine_budget(2.0, [exact], "w_scale") == MIN_REFINE_RUNS          # nothing expected there: by time
    assert refine_budget(0.01, [anywhere], "w_scale") == REFINE_BUDGET         # cheap: bounded to the byte anyway
    calls = []

    def changes(part: list[tuple[int, int]]) -> bool:
        calls.append(part)
        return any(lo <= 700 < hi for lo, hi in part)
    [(lo, hi)] = bound(changes, [(0, 1024)], 1, budget=4)
    assert lo <= 700 < hi and len(calls) <= 4                      # a bound: narrowed as far as 4 runs go, 700 kept
    calls.clear()
    assert bound(changes, [(0, 1024)], 1, budget=64) == [(700, 701)]


N_X = 1000


@pytest.mark.e2e
def test_poison_recounts_an_unexpected_memcheck_overread_and_leaves_an_expected_one(
        tmp_path: Path, interpreter: str, worker_env: Path) -> None:
    """Memcheck ends a kernel at its first bad access, so its overread count can be short (held-out hu_a on the
    H200: 64 of 128 B). fake_recount reads 32 B past x's end; the fake memcheck reports only the last 16. Where no
    expectation accepts the finding, poison surveys x's guard in the values stage although memcheck watched it, and
    its bound (0..32 past the end) makes memcheck's 16 B "at least". An expected one is left to memcheck."""
    fake = registry.load_source(registry.Source(str(FAKE_DIR / "fake_scenarios" / "fake_recount.py"),
                                                None, "tests"))
    cases = {c.variant: c for c in fake.build()}
    runner = Runner(RunOptions(mode=MODES["complete"], workdir=tmp_path / "w", gpu_available=True,
                               sanitizer=fake_memcheck(tmp_path, [("x", 16, 16, "read")]), python=interpreter,
                               timeout_scale=0.5))
    results = {r.case_id: r for r in runner.run([(fake, cases["short_count"]), (fake, cases["any_bytes"])])}
    short = results[cases["short_count"].id]
    assert short.outcome is Outcome.FINDING, short.message
    found = {f.detector: f for f in short.findings}
    assert set(found) == {MEMCHECK, POISON}, short.findings
    mc, po = found[MEMCHECK], found[POISON]
    assert (mc.buffer, mc.region, mc.bytes, mc.exact) == ("x", "past_end", 16, False), mc
    assert "poison saw 32 B here" in mc.note
    assert (po.buffer, po.region, po.bytes) == ("x", "past_end", 32) and po.ranges[0].start == N_X * 4, po
    assert [s["mode"] for s in short.details["stages"]] == ["both", "values"]
    known = results[cases["any_bytes"].id]
    assert known.outcome is Outcome.EXPECTED_FINDING, known.message
    assert [(f.detector, f.bytes, f.exact) for f in known.findings] == [(MEMCHECK, 16, True)]
    assert [s["mode"] for s in known.details["stages"]] == ["both"]      # poison had nothing memcheck did not see


@pytest.mark.e2e
def test_a_scenario_without_memcheck_gets_the_whole_poison_survey_after_a_memcheck_stage(
        tmp_path: Path, interpreter: str, worker_env: Path) -> None:
    """fake_poison uses the markers and poison only: no memcheck watched its buffers' ends in the first stage,
    so poison surveys them in the second (it leaves guards only to a memcheck that watched them)."""
    fake = registry.load_source(registry.Source(str(FAKE_DIR / "fake_scenarios" / "fake_poison.py"),
                                                None, "tests"))
    case = next(c for c in fake.build() if c.variant == "undeclared_overread")
    runner = Runner(RunOptions(mode=MODES["complete"], workdir=tmp_path / "w", gpu_available=True,
                               sanitizer=fake_memcheck(tmp_path, []), python=interpreter, timeout_scale=0.5))
    [result] = runner.run([(fake, case)])
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    assert [(f.detector, f.buffer, f.region) for f in result.findings] == [(POISON, "x", "past_end")]
    assert [s["mode"] for s in result.details["stages"]] == ["both", "values"]


def test_poison_is_left_to_the_trace_unless_an_expectation_needs_poison_where_the_trace_is_blind() -> None:
    """After a stage whose interpreter trace checked the case's launches, poison repeats the trace's bytes (its
    regions are marker bytes, every read of which the trace saw exactly): left out. Not where an expected poison
    finding is a read the trace cannot see (a torch op's), nor where the expectation cannot be read."""
    from gpu_memsafety.detectors.base import Earlier
    from gpu_memsafety.detectors.poison import trace_covers as covers

    def trace_covers(sc: Scenario, case: Case, arch: str) -> bool:
        return covers(Earlier(sc, case, arch))
    plain = Expectation((ExpectedFinding(OVERREAD, "x", (POISON,), region="row_padding"),))
    torch_op = Expectation((ExpectedFinding(OVERREAD, "x", (POISON,), region="row_padding",
                                            blind=((TRACE, "the read is made by a torch op"),)),))
    assert trace_covers(scenario(plain), CASE, "") and trace_covers(scenario(Expectation()), CASE, "")
    assert not trace_covers(scenario(torch_op), CASE, "")

    def broken(case: Case) -> Expectation:
        raise ValueError("no such variant")
    bad = Scenario(name="fake", summary="fake", adapter="x:y", params=(Param("n", int),), variants=("v",),
                   cases=lambda: [CASE], expect=broken, kernel=lambda case: "k", needs_gpu=lambda case: False)
    assert not trace_covers(bad, CASE, "")
