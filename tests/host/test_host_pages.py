"""pages mode after a fault (gpu_memsafety.host.guard_page): the reruns, planned by the scenario path's
planner (detectors/pageprobe.py, halving), name the allocation and its side, a control run that faults too names
nothing, and what cannot be narrowed is named as candidates. Children are scripted here."""
from __future__ import annotations

import pytest

from gpu_memsafety.host import guard_page as pages
from gpu_memsafety.detectors import pageprobe as P
from gpu_memsafety.host import children
from gpu_memsafety.host.allocator import EXACT, PAGE_AFTER, PAGE_BEFORE, Allocation, Frame

TEST = "t.py::test_k"


def allocs(n: int) -> list[Allocation]:
    return [Allocation(i + 1, 1000 * (i + 1), 0, TEST, (Frame("/s/t.py", 10 + i, "test_k"),)) for i in range(n)]


ALLOCS = allocs(5)


def scripted(culprit: int | None, sides: set[str], wild: bool = False, alone: list[Allocation] | None = None):
    """A child whose test faults when the culprit's page is on one of these sides (or always: wild); each run alone
    reports `alone` as the test's allocations."""
    calls: list[children.Plan] = []
    made = alone if alone is not None else ALLOCS

    def run(plan: children.Plan) -> children.Output:
        calls.append(plan)
        window = plan.page_window or (0, len(made))
        paged = plan.placement in (PAGE_AFTER, PAGE_BEFORE) and culprit is not None and window[0] <= culprit < window[1]
        fault = wild or (paged and plan.placement in sides)
        out = children.Output(started=[TEST])
        out.ended[TEST] = {"allocations": [a.to_json() for a in made], "context_lost": "illegal address" if fault else ""}
        return out
    return run, calls


@pytest.mark.parametrize("culprit", range(5))
def test_the_reruns_name_the_allocation_and_the_side(culprit: int) -> None:
    run, calls = scripted(culprit, {PAGE_AFTER})
    (f,) = pages.probe(run, TEST, ALLOCS, "sm_90")
    line = 10 + culprit
    assert (f.detector, f.buffer, f.region, f.exact) == ("guard_page", f"alloc {1000 * (culprit + 1)} B at t.py line {line}",
                                                         "past_end", False)
    assert f"t.py:{line} in test_k" in f.detail("stack") and "not with its front page" in f.detail("direction")
    # confirm alone, halve 5 -> 1 (2 or 3 runs), the other side; a control only when every halving rerun faulted
    # (the first allocation): nothing else showed that the fault needs a page
    assert calls[0] == children.Plan("pages", (TEST,), PAGE_AFTER, None)
    assert children.Plan("pages", (TEST,), PAGE_BEFORE, (culprit, culprit + 1)) in calls
    assert (calls[-1].placement == EXACT) == (culprit == 0) and len(calls) <= 6


def test_a_fault_on_both_sides_is_not_told_and_a_control_runs() -> None:
    run, calls = scripted(0, {PAGE_AFTER, PAGE_BEFORE})
    (f,) = pages.probe(run, TEST, ALLOCS, "sm_90")
    assert f.region == pages.UNTOLD and f.buffer == "alloc 1000 B at t.py line 10" and "cannot be told" in f.note
    assert calls[-1].placement == EXACT      # every halving rerun faulted: the control shows the page matters


def test_a_test_that_faults_whatever_is_paged_names_nothing() -> None:
    run, calls = scripted(None, set(), wild=True)
    assert pages.probe(run, TEST, ALLOCS, "sm_90") == [] and calls[-1].placement == EXACT
    assert len(calls) <= pages.MAX_PROBES


def test_a_fault_that_does_not_come_back_names_the_candidates() -> None:
    run, calls = scripted(None, set())
    (f,) = pages.probe(run, TEST, ALLOCS, "sm_90")
    assert f.region == pages.UNTOLD and f.buffer.count("|") == 4 and "did not come back" in f.note
    assert len(calls) == 1
    # the same when the test faults alone only with front pages: the suite's fault was with back pages
    run, calls = scripted(0, {PAGE_BEFORE})
    (f,) = pages.probe(run, TEST, ALLOCS, "sm_90")
    assert "did not come back" in f.note and len(calls) == 1


def test_allocations_the_run_alone_reaches_are_candidates_too() -> None:
    """In the suite's child a cache served some of the test's allocations; alone it makes all eight."""
    run, _ = scripted(6, {PAGE_AFTER}, alone=allocs(8))
    (f,) = pages.probe(run, TEST, ALLOCS, "sm_90")
    assert f.buffer == "alloc 7000 B at t.py line 16" and f.region == "past_end"


def test_the_cap_leaves_the_window_it_narrowed_to_as_candidates() -> None:
    many = allocs(4000)
    run, calls = scripted(3999, {PAGE_AFTER}, alone=many)
    (f,) = pages.probe(run, TEST, many, "sm_90")
    assert len(calls) == pages.MAX_PROBES and f.region == pages.UNTOLD
    left = f.buffer.split("|")
    assert 1 < len(left) < 20 and "alloc 4000000 B at t.py line 4009" in left
    assert "narrowed it to" in f.note and "rerun cap of 10" in f.note


def test_a_probe_that_is_not_a_window_is_refused() -> None:
    names = tuple(pages.name(i) for i in range(4))
    gap = P.Probe(((names[0], P.BACK), (names[2], P.BACK)), P.NAME)
    with pytest.raises(ValueError, match="not a window"):
        pages.plan_of(gap, TEST, names)
    assert pages.plan_of(P.Probe(((names[2], P.FRONT),), P.DIRECTION), TEST, names).page_window == (2, 3)
