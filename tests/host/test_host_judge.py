"""The host-suite rules (gpu_memsafety.judge.suite, asked through gpu_memsafety.judge.decide): one test per rule, and the marker's arguments."""
from __future__ import annotations

import pytest

from gpu_memsafety.host.breaks import Seen
from typing import Any

from gpu_memsafety.host.evidence import Evidence, own_result
from gpu_memsafety.host.judge import suite_evidence
from gpu_memsafety.judge.decide import decide
from gpu_memsafety.judge.suite import OwnResult, MarkerError, marker_from
from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, PAST_END, CaseResult, Finding, Outcome
from gpu_memsafety.host.allocator import MARKER, Allocation, Frame, GuardHit

TEST = "tests/test_k.py::test_copy[n1000]"
PASSED = OwnResult("passed")


def judge(ev: Evidence, own: OwnResult, marker: Any = None) -> CaseResult:
    """One test's verdict, as the host path asks for it: its evidence through the one decision."""
    return decide(suite_evidence(ev, own, marker))


def alloc(size: int = 4000, test: str = TEST) -> Allocation:
    return Allocation(7, size, 0, test, (Frame("/suite/tests/test_k.py", 12, "test_copy"),), 0x7F00)


def hit(size: int = 4000, past: bytes = b"\x00\x00\x00\x00", before: int = 0) -> GuardHit:
    back_len = -size % 256 + 256
    back = bytearray([MARKER]) * back_len
    back[: len(past)] = past
    front = bytearray([MARKER]) * 256
    if before:
        front[256 - before:] = b"\x01" * before
    return GuardHit(alloc(size), bytes(front), bytes(back), True)


def ev(**kw: object) -> Evidence:
    base = {"test": TEST, "mode": "markers", "arch": "sm_90", "guarded_blocks": 2, "allocated": 2}
    base.update(kw)
    return Evidence(**base)    # type: ignore[arg-type]


def test_rule1_mode_unavailable_is_not_applicable_with_the_reason() -> None:
    r = judge(ev(unavailable="needs a CUDA GPU; found none (NVML: no device)"), PASSED)
    assert r.outcome is Outcome.NOT_APPLICABLE and "found none" in r.message and r.details["test"]["outcome"] == "passed"
    # a reason many tests share is grouped by: the test's own result stays in details.test (issue 51)
    assert "the test itself" not in r.message
    assert r.details["test"]["outcome"] == "passed"


def test_rule1_missing_on_a_gpu_machine_could_not_run() -> None:
    r = judge(ev(unavailable="building the guard allocator shim failed", missing=True), PASSED)
    assert r.outcome is Outcome.COULD_NOT_RUN and r.failed


def test_rule2_guard_off_marker() -> None:
    r = judge(ev(hits=[hit()]), PASSED, marker_from({"guard": False, "reason": "uses IPC"}))
    assert r.outcome is Outcome.NOT_APPLICABLE and "uses IPC" in r.message and not r.findings


def test_rule3_context_lost_earlier() -> None:
    r = judge(ev(earlier_loss="the CUDA context was lost in t::a"), PASSED)
    assert r.outcome is Outcome.NOT_APPLICABLE and "t::a" in r.message


def test_rule4_context_lost_in_the_test_is_crashed() -> None:
    r = judge(ev(context_lost="the CUDA context was lost during this test (illegal address)"), OwnResult("failed", "RuntimeError"))
    assert r.outcome is Outcome.CRASHED and r.failed and "the test itself failed" in r.message


def test_rule4_a_memcheck_finding_explains_the_lost_context() -> None:
    f = Finding(MEMCHECK, OVERREAD, "alloc 64 B at t.py line 3", PAST_END, 4, 1)
    r = judge(ev(mode="memcheck", findings=[f], context_lost="unspecified launch failure"), OwnResult("failed"))
    assert r.outcome is Outcome.FINDING


def test_rule5_break_without_findings_is_not_applicable() -> None:
    r = judge(ev(breaks=[Seen("memory_stats", "call to torch.cuda.memory.memory_stats")]), PASSED)
    assert r.outcome is Outcome.NOT_APPLICABLE and "pytorch/pytorch#133281" in r.message and "unguarded" in r.message


def test_rule5_a_break_never_hides_a_finding() -> None:
    r = judge(ev(hits=[hit()], breaks=[Seen("memory_stats", "x")]), PASSED)
    assert r.outcome is Outcome.FINDING


def test_rule6_untrusted_detector_is_unresolved() -> None:
    r = judge(ev(mode="memcheck", detector_problem="sanitizer XML incomplete"), PASSED)
    assert r.outcome is Outcome.UNRESOLVED and r.failed


def test_rule7_nothing_allocated_is_not_applicable() -> None:
    r = judge(ev(guarded_blocks=0, allocated=0), OwnResult("skipped", "needs Hopper"))
    assert r.outcome is Outcome.NOT_APPLICABLE and "nothing to guard" in r.message and "needs Hopper" in r.message
    r = judge(ev(guarded_blocks=3, allocated=0), PASSED)
    assert r.outcome is Outcome.NOT_APPLICABLE and "3 allocation(s) of earlier tests" in r.message


def test_rule7_a_change_in_an_earlier_tests_block_is_this_tests_finding() -> None:
    r = judge(ev(guarded_blocks=3, allocated=0, hits=[hit()]), PASSED)
    assert r.outcome is Outcome.FINDING and "allocated_in" in dict(r.findings[0].details)


def test_rule8_guard_hit_is_a_finding_naming_allocation_stack_and_bytes() -> None:
    r = judge(ev(hits=[hit()]), PASSED)
    assert r.outcome is Outcome.FINDING and r.failed
    (f,) = r.findings
    assert (f.detector, f.kind, f.region, f.bytes) == (GUARD, "overwrite", PAST_END, 4)
    assert f.buffer == "alloc 4000 B at test_k.py line 12"
    assert [(x.start, x.end) for x in f.ranges] == [(4000, 4004)]
    assert "test_k.py:12 in test_copy" in f.detail("stack") and f.detail("size") == "4000"
    assert r.details["test"]["outcome"] == "passed"


def test_rule8_front_guard_is_before_start() -> None:
    r = judge(ev(hits=[hit(past=b"", before=2)]), PASSED)
    (f,) = r.findings
    assert f.region == "before_start" and [(x.start, x.end) for x in f.ranges] == [(-2, 0)]


def test_rule8_expected_finding_with_the_issue() -> None:
    marker = marker_from({"expect": "overwrite", "bytes": 4, "region": "past_end", "issue": "org/repo#1"})
    r = judge(ev(hits=[hit()]), PASSED, marker)
    assert r.outcome is Outcome.EXPECTED_FINDING and not r.failed and "org/repo#1" in r.message


def test_rule8_expected_but_not_seen_is_unexpectedly_clean() -> None:
    r = judge(ev(), PASSED, marker_from({"expect": "overwrite", "issue": "org/repo#1"}))
    assert r.outcome is Outcome.UNEXPECTEDLY_CLEAN and r.failed and "may be fixed" in r.message


def test_rule8_an_overread_is_not_checkable_by_markers() -> None:
    r = judge(ev(), PASSED, marker_from({"expect": "overread", "bytes": 64}))
    assert r.outcome is Outcome.CLEAN and "not checkable in markers mode" in r.message


def test_rule8_memcheck_finding_matched_on_size_and_site() -> None:
    f = Finding(MEMCHECK, OVERREAD, "alloc 92160 B at mxfp.py line 142", PAST_END, 64, 32,
                details=(("size", "92160"), ("stack", "/x/mxfp.py:142 in downcast_to_mxfp")))
    marker = marker_from({"expect": "overread", "bytes": 64, "size": 92160, "site": "mxfp.py"})
    r = judge(ev(mode="memcheck", findings=[f]), PASSED, marker)
    assert r.outcome is Outcome.EXPECTED_FINDING
    wrong = marker_from({"expect": "overread", "bytes": 64, "size": 92161})
    assert judge(ev(mode="memcheck", findings=[f]), PASSED, wrong).outcome is Outcome.FINDING


def test_sites_narrow_what_counts() -> None:
    r = judge(ev(hits=[hit()]), PASSED, marker_from({"sites": ["other_module.py"]}))
    assert r.outcome is Outcome.CLEAN and "not counted" in r.message


@pytest.mark.parametrize("kwargs, words", [
    ({"expect": "overwritten"}, "not one of"),
    ({"expect": "overread", "region": "guard"}, "region"),
    ({"expect": "overread", "bytes": -1}, "non-negative"),
    ({"guard": "no"}, "True or False"),
    ({"expectation": "overread"}, "unknown argument"),
    ({"expect": ["overread", "overwrite"], "bytes": 4}, "single expect"),
])
def test_bad_marker_arguments_say_what_is_allowed(kwargs: dict, words: str) -> None:
    with pytest.raises(MarkerError, match=words):
        marker_from(kwargs)


@pytest.mark.parametrize("phases, expected", [
    ({"setup": ("passed", "", False), "call": ("passed", "", False), "teardown": ("passed", "", False)}, "passed"),
    ({"setup": ("passed", "", False), "call": ("failed", "AssertionError", False)}, "failed"),
    ({"setup": ("failed", "fixture", False)}, "error"),
    ({"setup": ("skipped", "no GPU", False)}, "skipped"),
    ({"setup": ("passed", "", False), "call": ("skipped", "bug", True)}, "xfailed"),
    ({"setup": ("passed", "", False), "call": ("passed", "bug", True)}, "xpassed"),
    ({"setup": ("passed", "", False), "call": ("passed", "", False), "teardown": ("failed", "x", False)}, "error"),
])
def test_own_result_counts_as_pytest_does(phases: dict, expected: str) -> None:
    assert own_result(phases).outcome == expected


def test_evidence_round_trips_through_json() -> None:
    e = ev(hits=[hit()], breaks=[Seen("ipc", "call")], context_lost="x")
    assert Evidence.from_json(e.to_json()).to_json() == e.to_json()


def test_a_harness_error_while_judging_is_that_tests_unresolved_verdict_not_an_internal_error() -> None:
    """Seen in the field: an AttributeError of ours while gathering a test's evidence became pytest's INTERNALERROR,
    which ends the whole run with no report. It is now that test's `unresolved` verdict, naming the error."""
    from gpu_memsafety.host.judge import judge_safely

    def broken() -> Evidence:
        raise AttributeError("'TestTrace' object has no attribute 'notes'\x1b[31m")
    result = judge_safely(broken, OwnResult("passed"), lambda: None, "t.py::a", "trace", "cpu")
    assert result.outcome is Outcome.UNRESOLVED and result.failed
    assert "could not judge this test: AttributeError" in result.message and "\x1b" not in result.message
    assert "AttributeError" in result.details["harness_error"]
    assert all(not d.ran for d in result.detectors)

    def bad_marker() -> None:
        raise MarkerError("gpu_memsafety marker: unknown argument(s) x")
    with pytest.raises(MarkerError):
        judge_safely(lambda: Evidence("t.py::a", "trace"), OwnResult("passed"), bad_marker, "t.py::a", "trace")
