"""pages mode after a fault (gpu_memsafety.detectors.guard_page_host): the reruns name the allocation and its side, a control run
that faults too names nothing, and what cannot be narrowed is named as candidates. Children are scripted here."""
from __future__ import annotations

from gpu_memsafety.detectors import guard_page_host as pages
from gpu_memsafety.host import children
from gpu_memsafety.placement.allocator import EXACT, PAGE_AFTER, PAGE_BEFORE, Allocation, Frame

TEST = "t.py::test_k"
ALLOCS = [Allocation(i + 1, 1000 * (i + 1), 0, TEST, (Frame("/s/t.py", 10 + i, "test_k"),)) for i in range(5)]


def scripted(culprit: int | None, sides: set[str], control_faults: bool = False):
    calls: list[children.Plan] = []

    def run(plan: children.Plan) -> children.Output:
        calls.append(plan)
        window = plan.page_window or (0, len(ALLOCS))
        paged = plan.placement in (PAGE_AFTER, PAGE_BEFORE) and culprit is not None and window[0] <= culprit < window[1]
        fault = (plan.placement == EXACT and control_faults) or (paged and plan.placement in sides)
        out = children.Output(started=[TEST])
        out.ended[TEST] = {"allocations": [a.to_json() for a in ALLOCS], "context_lost": "illegal address" if fault else ""}
        return out
    return run, calls


def test_the_reruns_name_the_allocation_and_the_side() -> None:
    run, calls = scripted(3, {PAGE_AFTER})
    (f,) = pages.probe(run, TEST, ALLOCS, "sm_90")
    assert (f.detector, f.buffer, f.region, f.exact) == ("guard_page", "alloc 4000 B at t.py line 13", "past_end", False)
    assert "t.py:13 in test_k" in f.detail("stack") and len(calls) <= pages.MAX_PROBES


def test_a_fault_only_with_the_front_page_is_before_start() -> None:
    run, _ = scripted(0, {PAGE_BEFORE})
    (f,) = pages.probe(run, TEST, ALLOCS, "sm_90")
    assert f.region == "before_start" and f.buffer == "alloc 1000 B at t.py line 10"


def test_a_control_run_that_faults_names_nothing() -> None:
    run, calls = scripted(2, {PAGE_AFTER}, control_faults=True)
    assert pages.probe(run, TEST, ALLOCS, "sm_90") == [] and len(calls) == 1


def test_a_fault_that_does_not_come_back_names_the_candidates() -> None:
    run, _ = scripted(None, set())
    (f,) = pages.probe(run, TEST, ALLOCS, "sm_90")
    assert f.region == pages.UNTOLD and f.buffer.count("|") == 4 and "did not come back" in f.note
