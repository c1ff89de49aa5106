"""Guard-page reruns (harness/gpu_memsafety/detectors/pageprobe.py, issue 20 items 1 and 4): which buffer faulted, and on which side.

The planning and naming are pure and tested with fake rerun results (no process, no GPU); the runner's side (a
worker process per round, a fresh one after each fault, placements per job entry) runs real worker processes on
the CPU with a tests-only adapter that faults the way a guard page would, by where its buffers were placed
(tests/helpers/fake_kernels/fake_page_adapters.py). The real VMM placements are checked on a GPU in tests/gpu/test_pages.py.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from gpu_memsafety.util.paths import CHECKOUT
from gpu_memsafety import job as J
from gpu_memsafety.placement import layout as L
from gpu_memsafety.detectors import pageprobe as P
from gpu_memsafety.scenario import registry
from gpu_memsafety.model import BEFORE_START, GUARD_PAGE, OVERREAD, OVERWRITE, PAST_END, ExpectedFinding, Finding, Outcome

BASE = 1 << 40


def paged(name: str, side: str = P.BACK, n: int = 4000) -> dict[str, Any]:
    lay = L.plan(n, placement=P.PLACEMENT[side])
    return {"name": name, "backend": "vmm", "layout": lay.to_json(), "alloc_base": BASE, "alloc_size": 2 << 20,
            "tensor_addr": BASE + (2 << 20) - lay.total + lay.front if side == P.BACK else BASE}


def drive(probing: P.Probing, worker: Callable[[P.Probe], str], written: tuple[str, ...] = ()) -> list[list[str]]:
    """Run the plan to its end with a fake worker (probe -> status), as the runner does; the rounds' labels."""
    rounds = []
    while probes := probing.next_round():
        rounds.append([p.label for p in probes])
        probing.record(P.ProbeRun(p, worker(p), 2.0, written=written if worker(p) == P.CLEAN else ()) for p in probes)
    return rounds


def faults_when(*pages: tuple[str, str]) -> Callable[[P.Probe], str]:
    """A kernel that faults whenever one of these (buffer, side) pages is in the rerun."""
    return lambda probe: P.FAULTED if set(probe.pages) & set(pages) else P.CLEAN


# ------------------------------------------------------------------------------------------------- planning

def test_watched_candidates_are_probed_first_and_only_buffers_on_a_page_are_candidates() -> None:
    buffers = [paged("x"), paged("w"), dict(paged("t"), backend="torch"), paged("y")]
    probing = P.start(buffers, watched=["w"])
    assert probing is not None and (probing.side, probing.candidates) == (P.BACK, ("w", "x", "y"))
    assert P.start([dict(paged("t"), backend="torch")]) is None


def test_one_buffer_past_its_end_is_named_with_the_back_page_only() -> None:
    probing = P.start([paged("a"), paged("b"), paged("c")], watched=["a"])
    rounds = drive(probing, faults_when(("b", P.BACK)))
    assert rounds == [["a back page", "b back page", "c back page"], ["b front page"]]
    [named] = probing.conclude()
    assert (named.buffer, named.region, named.named) == ("b", PAST_END, True)
    assert "not with its front page" in named.how


def test_a_read_before_the_start_is_named_from_the_front_pass_and_told_by_the_back_page() -> None:
    probing = P.start([paged("a", P.FRONT), paged("b", P.FRONT)])
    assert probing is not None and probing.side == P.FRONT
    drive(probing, faults_when(("a", P.FRONT)))
    [named] = probing.conclude()
    assert (named.buffer, named.region) == ("a", BEFORE_START)


def test_a_single_candidate_needs_only_the_other_side() -> None:
    probing = P.start([paged("a")])
    assert drive(probing, faults_when(("a", P.BACK))) == [["a front page"]]
    assert [(n.buffer, n.region) for n in probing.conclude()] == [("a", PAST_END)]


def test_no_solo_fault_names_nobody_and_says_why() -> None:
    probing = P.start([paged("a"), paged("b")])
    drive(probing, lambda probe: P.CLEAN)
    [unnamed] = probing.conclude()
    assert (unnamed.buffer, unnamed.named, unnamed.region) == ("a|b", False, P.UNTOLD)
    assert "needs several buffers on pages at once, or is intermittent" in unnamed.how


def test_faults_on_both_sides_are_not_told_and_a_fault_without_any_page_names_nobody() -> None:
    both = P.start([paged("a"), paged("b")])
    rounds = drive(both, faults_when(("a", P.BACK), ("a", P.FRONT)))
    assert rounds[-1] == ["no page"]                     # the control: nothing paged
    [named] = both.conclude()
    assert (named.buffer, named.region) == ("a", P.UNTOLD) and "cannot be told" in named.how
    wild = P.start([paged("a"), paged("b")])
    drive(wild, lambda probe: P.FAULTED)                # faults whatever is paged, and with nothing paged
    [unnamed] = wild.conclude()
    assert not unnamed.named and "no guard page at all" in unnamed.how


def test_the_cap_bounds_the_reruns_and_says_what_was_not_run() -> None:
    buffers = [paged(f"b{i}") for i in range(10)]
    probing = P.start(buffers, cap=8)
    drive(probing, faults_when(("b9", P.BACK)))
    assert len(probing.runs) == 8 and probing.not_run == ["b8 back page", "b9 back page"]
    assert probing.stopped == "rerun cap of 8 per case reached"
    [unnamed] = probing.conclude()
    assert not unnamed.named and "b8, b9" in unnamed.how and "rerun cap of 8" in unnamed.how
    # the cap can leave the direction unknown: named, but not told
    probing = P.start([paged("a"), paged("b")], cap=2)
    drive(probing, faults_when(("a", P.BACK)))
    [named] = probing.conclude()
    assert (named.buffer, named.region) == ("a", P.UNTOLD) and "did not run (rerun cap of 2" in named.how
    assert probing.to_json()["not_run"] == ["a front page"]


def test_a_budget_stop_lists_the_probes_left() -> None:
    probing = P.start([paged("a"), paged("b")])
    first = probing.next_round()
    probing.record([P.ProbeRun(first[0], P.CLEAN, 50.0)])
    probing.stop("rerun budget of 80 s for this case spent", first[1:])
    assert probing.next_round() == [] and probing.not_run == ["b back page"]
    assert "rerun budget" in probing.conclude()[0].how


def test_a_write_seen_by_the_guard_markers_in_a_rerun_that_ran_through_makes_it_an_overwrite() -> None:
    probing = P.start([paged("a"), paged("b")])
    drive(probing, faults_when(("a", P.BACK)), written=("a",))
    assert probing.conclude()[0].written
    from gpu_memsafety.detectors.guard_page import GuardPageDetector
    from tests.judge.test_judge import CASE, scenario
    from gpu_memsafety.detectors.base import Evidence
    from gpu_memsafety.detectors.modes import MODES
    res = J.WorkerResult(case_id=CASE.id, status=J.FAULT, message="illegal address", buffers=[paged("a"), paged("b")])
    [f] = GuardPageDetector().findings(Evidence(scenario(), CASE, res, MODES["guard_page"], reruns=probing))
    assert (f.kind, f.buffer, f.region, f.detail("access")) == (OVERWRITE, "a", PAST_END, "write (the guard markers saw it)")
    assert "a back page: fault in 2.0 s" in f.detail("reruns")


def test_halving_narrows_a_window_one_probe_at_a_time_after_the_unit_alone_faults() -> None:
    """The host path's way (host/guard_page.py): confirm alone, then halves, then the other side."""
    names = tuple(f"n{i}" for i in range(6))
    probing = P.Probing(P.BACK, names, narrowing=P.HALVING, confirmed=False)
    rounds = drive(probing, faults_when(("n4", P.BACK)))
    assert rounds == [["every candidate on its back page, alone"], ["back page on n0 .. n2"], ["back page on n3"],
                      ["back page on n4"], ["n4 front page"]]
    [named] = probing.conclude()
    assert (named.buffer, named.region, named.named) == ("n4", PAST_END, True)
    assert "halved the 6 candidates" in named.how and probing.to_json()["narrowing"] == P.HALVING


def test_halving_stops_at_a_rerun_that_ended_otherwise_and_names_the_window_left() -> None:
    probing = P.Probing(P.BACK, tuple(f"n{i}" for i in range(8)), narrowing=P.HALVING, confirmed=False)
    drive(probing, lambda probe: "timeout" if probe.why == P.NAME and len(probe.pages) == 2 else P.FAULTED)
    [unnamed] = probing.conclude()
    assert (unnamed.buffer, unnamed.named) == ("n0|n1|n2|n3", False) and "ended timeout" in unnamed.how
    with pytest.raises(ValueError, match="before the name round"):
        probing.widen(["n9"])
    with pytest.raises(ValueError, match="narrowing 'thirds'"):
        P.Probing(P.BACK, ("a",), narrowing="thirds")


def test_a_unit_that_does_not_fault_alone_is_not_narrowed() -> None:
    probing = P.Probing(P.BACK, ("a", "b"), confirmed=False)
    assert drive(probing, lambda probe: P.CLEAN) == [["every candidate on its back page, alone"]]
    [unnamed] = probing.conclude()
    assert unnamed.buffer == "a|b" and "did not come back when the unit ran alone (it ran through)" in unnamed.how


def test_probe_placements_travel_in_the_job_and_bad_ones_are_refused() -> None:
    case = registry.get("planted_oob").build()[0]
    entry = J.JobCase(case, None, P.Probe((("src", P.FRONT),), P.DIRECTION).placements())
    back = J.JobCase.from_json(entry.to_json())
    assert back.placements == {"src": L.GUARD_PAGE_FRONT} and back.case == case
    assert J.JobCase.from_json(J.JobCase(case).to_json()).placements is None
    with pytest.raises(J.RecordError, match="placements {'src': 'sideways'} are not among"):
        J.JobCase.from_json({**case.to_json(), "placements": {"src": "sideways"}})


# ------------------------------------------------------------------------------------------------- verdict

def test_only_a_named_finding_matches_and_it_is_held_to_its_region_unless_untold() -> None:
    expected = ExpectedFinding(OVERREAD, "b", (GUARD_PAGE,), region=PAST_END)
    fault = Finding(GUARD_PAGE, OVERREAD, "b", PAST_END, 0, exact=False)
    assert expected.matches(fault)
    assert expected.matches(Finding(GUARD_PAGE, OVERWRITE, "b", PAST_END, 0, exact=False))     # access-blind
    assert expected.matches(Finding(GUARD_PAGE, OVERREAD, "b", P.UNTOLD, 0, exact=False))       # not told
    assert not expected.matches(Finding(GUARD_PAGE, OVERREAD, "b", BEFORE_START, 0, exact=False))
    assert not expected.matches(Finding(GUARD_PAGE, OVERREAD, "a|b", P.UNTOLD, 0, exact=False))  # not named


# ------------------------------------------------------------------------------------ the runner, on the CPU

from repo_paths import FAKE_DIR  # noqa: E402


@pytest.fixture(scope="module")
def page_results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The fake_pages cases through the real runner in guard_page mode (worker processes on the CPU; the machine
    says it has a GPU so that the mode is not refused: the fake adapter needs none)."""
    from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", str(FAKE_DIR))
    try:
        scenario = registry.load_source(registry.Source(str(FAKE_DIR / "fake_scenarios" / "fake_pages.py"), None, "tests"))
        workdir = tmp_path_factory.mktemp("pages")
        runner = Runner(RunOptions(mode=MODES["guard_page"], workdir=workdir, gpu_available=True, timeout_scale=3.0))
        results = runner.run([(scenario, case) for case in scenario.build()])
        yield {"results": {r.variant: r for r in results}, "runner": runner, "workdir": workdir}
    finally:
        mp.undo()


@pytest.mark.e2e
def test_runner_names_the_buffer_read_past_its_end(page_results: dict[str, Any]) -> None:
    r = page_results["results"]["past_end_b"]
    assert r.outcome is Outcome.EXPECTED_FINDING, r.message
    [f] = r.findings
    assert (f.buffer, f.region, f.detail("named"), f.detail("candidates")) == ("b", PAST_END, "yes", "a|b|c")
    reruns = r.details["guard_page_reruns"]
    assert [(x["pages"], x["status"]) for x in reruns["runs"]] == [
        ("a back page", "ok"), ("b back page", "fault"), ("c back page", "ok"), ("b front page", "ok")]
    assert all(x["seconds"] > 0 for x in reruns["runs"]) and reruns["stopped"] == ""


@pytest.mark.e2e
def test_runner_tells_a_read_before_the_start_from_the_front_pass(page_results: dict[str, Any]) -> None:
    r = page_results["results"]["before_start_a"]
    assert r.outcome is Outcome.EXPECTED_FINDING, r.message
    [f] = r.findings
    assert (f.buffer, f.region) == ("a", BEFORE_START)
    assert r.details["guard_page_reruns"]["side"] == P.FRONT


@pytest.mark.e2e
def test_runner_keeps_the_candidates_of_a_fault_no_solo_rerun_repeats_as_a_failure(page_results: dict[str, Any]) -> None:
    r = page_results["results"]["needs_two"]
    assert r.outcome is Outcome.FINDING and r.failed, r.message
    [f] = r.findings
    assert f.buffer == "a|b|c" and f.detail("named") == "no" and "intermittent" in f.note


@pytest.mark.e2e
def test_runner_runs_a_clean_case_twice_back_then_front_pages_without_reruns(page_results: dict[str, Any]) -> None:
    r = page_results["results"]["clean"]
    assert r.outcome is Outcome.CLEAN, r.message
    assert "guard_page_reruns" not in r.details
    reruns = [p for p in page_results["runner"].processes if "guard_page_reruns" in p]
    assert [p["placement"] for p in r.details["passes"]] == [L.GUARD_PAGE_BACK, L.GUARD_PAGE_FRONT]
    # without a page (no VMM) there is no second pass, and the guard page could not run: never clean
    no_vmm = page_results["results"]["no_vmm"]
    assert [p["placement"] for p in no_vmm.details["passes"]] == [L.GUARD_PAGE_BACK]
    assert no_vmm.outcome is Outcome.COULD_NOT_RUN and no_vmm.failed, no_vmm.message
    # past_end_b: 3 processes (b's fault ends the first; then c; then b's front page), before_start_a: 3, needs_two: 1
    assert len(reruns) == 7, reruns


@pytest.mark.e2e
def test_pageprobe_the_judge_and_the_planted_scenario_import_no_torch() -> None:
    import subprocess
    import sys
    code = ("import sys, gpu_memsafety.detectors.pageprobe, gpu_memsafety.judge.rules, gpu_memsafety.scenarios.planted_pages; "
            "bad = [m for m in ('torch', 'triton') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=CHECKOUT, check=True, timeout=120)


def test_two_passes_merge_into_one_result_with_markers_changed_in_either() -> None:
    from gpu_memsafety.detectors.guard_page import merge_passes
    run = lambda lo, hi: {"region": "past_end", "start": lo, "end": hi, "logical": ""}   # noqa: E731
    first = {"launches": 1, "kernel_seconds": 0.5, "watched": ["a"], "buffers": ["first map"],
             "passes": [{"placement": L.GUARD_PAGE_BACK}], "evidence": {"guard": {"a": [run(4000, 4002)], "b": []}}}
    second = {"launches": 2, "kernel_seconds": 0.25, "watched": ["a"], "buffers": ["second"],
              "passes": [{"placement": L.GUARD_PAGE_FRONT}], "evidence": {"guard": {"a": [run(4001, 4004)], "b": [run(10, 11)]}}}
    merged = merge_passes(first, second)
    assert (merged["launches"], merged["kernel_seconds"], merged["buffers"]) == (3, 0.75, ["first map"])
    assert [p["placement"] for p in merged["passes"]] == [L.GUARD_PAGE_BACK, L.GUARD_PAGE_FRONT]
    assert merged["evidence"]["guard"] == {"a": [run(4000, 4004)], "b": [run(10, 11)]}     # bytes counted once
    assert "guard" not in merge_passes(first, dict(second, evidence={}))["evidence"]    # checked in one pass only
