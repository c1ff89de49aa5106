"""gpu_memsafety.judge.verdict: each rule of the module docstring, one test each, and the matching it relies on.

The verdict is where "the harness never passes silently" is decided: a detector that did not run, a known
bug that went missing, a finding nobody expected. Each outcome below is reached by the smallest input that
should reach it, and the neighbouring outcome is checked too, so a rule that silently changes shows up.
"""
from __future__ import annotations

import pytest

from gpu_memsafety.placement import layout as L
from gpu_memsafety.model import (TRACE, TRACE_RACE, DETECTORS, GUARD, GUARD_PAGE, MEMCHECK, OVERREAD, OVERWRITE, POISON, RACECHECK, SYNCCHECK, UNINIT, ByteRange,
                           DetectorRun, Expectation, ExpectedFinding, Finding, Outcome)
from gpu_memsafety.judge.verdict import decide
from repo_paths import DATA

GUARD_RAN = [DetectorRun(GUARD, True, "markers verified")]
MEMCHECK_RAN = [DetectorRun(MEMCHECK, True, "compute-sanitizer 2025.3.1")]
BOTH_RAN = GUARD_RAN + MEMCHECK_RAN
MEMCHECK_MISSING = DetectorRun(MEMCHECK, False, "compute-sanitizer not found (searched: /usr/local/cuda/bin)")

OVERWRITE_PAST_END = ExpectedFinding(OVERWRITE, "dst", (GUARD, MEMCHECK), bytes=1, ranges=((4000, 4001),))
OVERREAD_PAST_END = ExpectedFinding(OVERREAD, "src", (MEMCHECK, POISON, GUARD_PAGE), bytes=4, ranges=((4000, 4004),))
BACK_GUARD_ONLY = ExpectedFinding(OVERWRITE, "scale", (GUARD,), region="past_end", bytes=56, ranges=((576, 632),))


def guard_finding(buffer: str = "dst", region: str = "past_end", start: int = 4000, end: int = 4001,
                  kind: str = OVERWRITE) -> Finding:
    return Finding(GUARD, kind, buffer, region, end - start, ranges=(ByteRange(region, start, end),), kernel="k")


def memcheck_finding(buffer: str = "src", start: int = 4000, end: int = 4004, kind: str = OVERREAD) -> Finding:
    return Finding(MEMCHECK, kind, buffer, "past_end", end - start, ranges=(ByteRange("past_end", start, end),), kernel="k")


# ------------------------------------------------------------------------------------------- the rules

def test_no_detector_ran_is_unsupported_with_each_reason() -> None:
    v = decide(Expectation(), [], [MEMCHECK_MISSING])
    assert v.outcome is Outcome.UNSUPPORTED
    assert "no detector ran" in v.message and "searched: /usr/local/cuda/bin" in v.message


def test_no_detector_requested_is_unsupported_not_clean() -> None:
    v = decide(Expectation(), [], [])
    assert v.outcome is Outcome.UNSUPPORTED
    assert "no detector was requested" in v.message


def test_nothing_expected_nothing_seen_is_clean_naming_the_detectors() -> None:
    v = decide(Expectation(), [], BOTH_RAN)
    assert v.outcome is Outcome.CLEAN
    assert v.message == "clean under guard, memcheck"


def test_clean_names_only_detectors_that_ran() -> None:
    v = decide(Expectation(), [], GUARD_RAN + [MEMCHECK_MISSING])
    assert v.outcome is Outcome.CLEAN
    assert v.message == "clean under guard"


def test_every_expected_finding_matched_is_expected_finding() -> None:
    v = decide(Expectation((OVERWRITE_PAST_END,)), [guard_finding()], GUARD_RAN)
    assert v.outcome is Outcome.EXPECTED_FINDING
    assert not v.outcome.is_failure
    assert "overwrite of dst, 1 B" in v.message


def test_expected_finding_not_seen_by_a_detector_that_ran_is_unexpectedly_clean() -> None:
    v = decide(Expectation((OVERWRITE_PAST_END,)), [], GUARD_RAN)
    assert v.outcome is Outcome.UNEXPECTEDLY_CLEAN
    assert v.outcome.is_failure
    assert v.missing == (OVERWRITE_PAST_END.describe(),)
    assert "may be fixed" not in v.message


def test_unexpectedly_clean_known_upstream_bug_says_the_workaround_may_be_retired() -> None:
    upstream = ExpectedFinding(OVERREAD, "w_scale", (MEMCHECK,), upstream="triton-lang/triton#10772")
    v = decide(Expectation((upstream,)), [], MEMCHECK_RAN)
    assert v.outcome is Outcome.UNEXPECTEDLY_CLEAN
    assert "upstream triton-lang/triton#10772 may be fixed" in v.message


def test_anything_seen_that_nothing_expects_is_a_finding() -> None:
    stray = guard_finding(buffer="q")
    v = decide(Expectation(), [stray], GUARD_RAN)
    assert v.outcome is Outcome.FINDING
    assert v.outcome.is_failure
    assert v.unexpected == (stray,)
    assert "guard overwrite of q/past_end 1 B by k" in v.message


def test_a_finding_of_the_wrong_size_is_unexpected_and_the_expected_one_missing() -> None:
    v = decide(Expectation((OVERWRITE_PAST_END,)), [guard_finding(end=4002)], GUARD_RAN)
    assert v.outcome is Outcome.FINDING
    assert v.missing == (OVERWRITE_PAST_END.describe(),)
    assert "also missing" in v.message


def test_only_detector_that_could_see_it_did_not_run_is_unsupported() -> None:
    """The planted overread in guard mode: only memcheck/poison/guard_page see reads."""
    v = decide(Expectation((OVERREAD_PAST_END,)), [], GUARD_RAN + [MEMCHECK_MISSING])
    assert v.outcome is Outcome.UNSUPPORTED
    assert not v.outcome.is_failure
    assert "guard_page/memcheck/poison" in v.message and "ran: guard" in v.message


def test_a_detector_that_did_not_run_is_never_counted_as_seeing_nothing() -> None:
    v = decide(Expectation((OVERREAD_PAST_END,)), [], [DetectorRun(GUARD, True), DetectorRun(MEMCHECK, False, "x")])
    assert v.outcome is not Outcome.UNEXPECTEDLY_CLEAN


def test_unexpected_finding_beats_an_uncheckable_expectation() -> None:
    v = decide(Expectation((OVERREAD_PAST_END,)), [guard_finding(buffer="other")], GUARD_RAN)
    assert v.outcome is Outcome.FINDING


def test_back_guard_expectation_is_checked_where_there_is_a_back_guard() -> None:
    v = decide(Expectation((BACK_GUARD_ONLY,)), [], GUARD_RAN, placement=L.GUARDED)
    assert v.outcome is Outcome.UNEXPECTEDLY_CLEAN


def test_back_guard_expectation_under_flush_end_is_unsupported_not_unexpectedly_clean() -> None:
    v = decide(Expectation((BACK_GUARD_ONLY,)), [], GUARD_RAN, placement=L.FLUSH_END)
    assert v.outcome is Outcome.UNSUPPORTED


def test_back_guard_unsupported_message_gives_the_real_reason() -> None:
    """guard ran; what is missing is a back guard (flush-end placement), and the message must say so
    instead of claiming that guard did not run."""
    v = decide(Expectation((BACK_GUARD_ONLY,)), [], GUARD_RAN, placement=L.FLUSH_END)
    assert "did not run" not in v.message, v.message
    assert "no back guard" in v.message and "alignment tail" in v.message, v.message


def test_front_guard_expectation_under_exact_is_not_checked_and_says_there_is_no_front_guard() -> None:
    """memcheck's exact placement keeps no front guard: a before_start write only the markers would see is
    not checked there (never unexpectedly clean), and the message names the missing front guard."""
    front_only = ExpectedFinding(OVERWRITE, "dst", (GUARD,), region="before_start", bytes=1, ranges=((-1, 0),))
    v = decide(Expectation((front_only,)), [], GUARD_RAN, placement=L.EXACT)
    assert v.outcome is Outcome.UNSUPPORTED and "no front guard" in v.message, v.message
    assert decide(Expectation((front_only,)), [], GUARD_RAN, placement=L.FLUSH_END).outcome is Outcome.UNEXPECTEDLY_CLEAN


def test_old_region_words_in_an_expectation_fail_with_the_word_to_use() -> None:
    with pytest.raises(ValueError, match=r"region 'back_guard' is a detector's word, not a region: use 'past_end'"):
        ExpectedFinding(OVERWRITE, "dst", (GUARD,), region="back_guard")
    with pytest.raises(ValueError, match=r"region 'padding' .* use 'row_padding'"):
        ExpectedFinding(OVERWRITE, "dst", (GUARD,), region="padding")
    with pytest.raises(ValueError, match=r"kinds are overread, overwrite, misaligned"):
        ExpectedFinding("atomic", "dst", (GUARD,))


def test_guard_sees_part_of_a_past_end_write_in_the_alignment_tail_under_flush_end() -> None:
    """Under a flush placement the markers see the bytes of a past_end write that land in the alignment tail:
    that part is the expected bug (not unexpected), and a guard byte outside the expected ones is a finding."""
    tail_part = guard_finding(buffer="scale", start=576, end=600)
    v = decide(Expectation((BACK_GUARD_ONLY,)), [tail_part], GUARD_RAN, placement=L.FLUSH_END)
    assert v.outcome is Outcome.UNSUPPORTED, v.message     # seen in part; the full 56 B cannot be checked here
    stray = guard_finding(buffer="scale", start=640, end=641)
    assert decide(Expectation((BACK_GUARD_ONLY,)), [stray], GUARD_RAN, placement=L.FLUSH_END).outcome is Outcome.FINDING
    assert decide(Expectation((BACK_GUARD_ONLY,)), [tail_part], GUARD_RAN, placement=L.GUARDED).outcome is Outcome.FINDING


def test_strided_on_packed_under_both_checks_only_the_memcheck_part() -> None:
    """Guard past_end (56 B) is uncheckable under flush_end; memcheck's past_end is checked and matched."""
    expected = Expectation((BACK_GUARD_ONLY, ExpectedFinding(OVERWRITE, "scale", (MEMCHECK,), region="past_end")))
    seen = memcheck_finding(buffer="scale", start=576, end=580, kind=OVERWRITE)
    v = decide(expected, [seen], BOTH_RAN, placement=L.FLUSH_END)
    assert v.outcome is Outcome.EXPECTED_FINDING
    assert decide(expected, [], BOTH_RAN, placement=L.FLUSH_END).outcome is Outcome.UNEXPECTEDLY_CLEAN


def test_expectation_seen_by_one_of_several_detectors_is_enough() -> None:
    v = decide(Expectation((OVERREAD_PAST_END,)), [memcheck_finding()], MEMCHECK_RAN)
    assert v.outcome is Outcome.EXPECTED_FINDING


# ------------------------------------------------------------------------------------------------ matching

def test_match_needs_detector_kind_buffer() -> None:
    e = OVERREAD_PAST_END
    assert e.matches(memcheck_finding())
    assert not e.matches(memcheck_finding(kind=OVERWRITE))
    assert not e.matches(memcheck_finding(buffer="dst"))
    assert not e.matches(Finding(GUARD, OVERREAD, "src", "past_end", 4, ranges=(ByteRange("past_end", 4000, 4004),)))


def test_match_region_none_is_any_region_and_a_region_must_equal() -> None:
    anywhere = ExpectedFinding(OVERWRITE, "dst", (GUARD,))
    assert anywhere.matches(guard_finding(region="before_start", start=-1, end=0))
    assert not BACK_GUARD_ONLY.matches(guard_finding(buffer="scale", region="row_padding", start=576, end=632))


def test_match_ranges_in_any_order_but_all_of_them() -> None:
    e = ExpectedFinding(OVERWRITE, "scale", (GUARD,), region="row_padding", bytes=16, ranges=((232, 240), (72, 80)))
    both = Finding(GUARD, OVERWRITE, "scale", "row_padding", 16,
                   ranges=(ByteRange("row_padding[row 0]", 72, 80), ByteRange("row_padding[row 2]", 232, 240)))
    one = Finding(GUARD, OVERWRITE, "scale", "row_padding", 16, ranges=(ByteRange("row_padding[row 0]", 72, 88),))
    assert e.matches(both)
    assert not e.matches(one)


def test_inexact_detectors_match_whatever_their_byte_count() -> None:
    fault = Finding(GUARD_PAGE, OVERREAD, "src", "past_end", 0, exact=False)
    assert OVERREAD_PAST_END.matches(fault)
    assert not OVERREAD_PAST_END.matches(Finding(GUARD_PAGE, OVERREAD, "src", "past_end", 0))


def test_outcomes_are_a_closed_set_that_know_if_they_fail() -> None:
    failing = {o for o in Outcome if o.is_failure}
    assert failing == {Outcome.FINDING, Outcome.UNEXPECTEDLY_CLEAN, Outcome.UNRESOLVED, Outcome.TIMEOUT, Outcome.CRASHED,
                       Outcome.COULD_NOT_RUN}
    assert {o for o in Outcome if o.skipped} == {Outcome.UNSUPPORTED, Outcome.NOT_APPLICABLE}
    assert Outcome.from_label("unexpectedly clean") is Outcome.UNEXPECTEDLY_CLEAN
    assert set(DETECTORS) == {GUARD, MEMCHECK, GUARD_PAGE, POISON, UNINIT, TRACE, TRACE_RACE, RACECHECK, SYNCCHECK}


# ------------------------------------------------------------------- guard page: the alignment tail before it

PAGE_AT = {"src": 4096, "dst": 4096}     # 4,000-byte tensors: a 96-byte alignment tail, then the unmapped page
GUARD_PAGE_RAN = GUARD_RAN + [DetectorRun(GUARD_PAGE, True, "VMM guard page")]
OVERREAD_1B = ExpectedFinding(OVERREAD, "src", (MEMCHECK, POISON, GUARD_PAGE), bytes=1, ranges=((4000, 4001),))
OVERWRITE_1B = ExpectedFinding(OVERWRITE, "dst", (GUARD, MEMCHECK, GUARD_PAGE), bytes=1, ranges=((4000, 4001),))


def fault(buffer: str = "src") -> Finding:
    return Finding(GUARD_PAGE, OVERREAD, buffer, "past_end", 0, exact=False)


def test_a_read_in_the_alignment_tail_is_not_checked_by_the_guard_page_never_clean_never_failed() -> None:
    """H200 regression: a 1-byte read at 4000 of a 4,000-byte tensor lands in the tail (4000..4096)."""
    v = decide(Expectation((OVERREAD_1B,)), [], GUARD_PAGE_RAN, placement=L.GUARD_PAGE_BACK, pages=PAGE_AT)
    assert v.outcome is Outcome.UNSUPPORTED, v.message
    assert "alignment tail" in v.message and "not visible to guard_page" in v.message and "4096" in v.message
    # without the buffer map the old (failing) answer stands: the judge must pass the pages
    assert decide(Expectation((OVERREAD_1B,)), [], GUARD_PAGE_RAN, placement=L.GUARD_PAGE_BACK).outcome is Outcome.UNEXPECTEDLY_CLEAN


def test_a_read_that_reaches_the_page_is_still_checked_by_it() -> None:
    reaches = ExpectedFinding(OVERREAD, "src", (MEMCHECK, GUARD_PAGE), bytes=100, ranges=((4000, 4100),))
    assert decide(Expectation((reaches,)), [], GUARD_PAGE_RAN, placement=L.GUARD_PAGE_BACK, pages=PAGE_AT).outcome is Outcome.UNEXPECTEDLY_CLEAN
    assert decide(Expectation((reaches,)), [fault()], GUARD_PAGE_RAN, placement=L.GUARD_PAGE_BACK,
                  pages=PAGE_AT).outcome is Outcome.EXPECTED_FINDING
    # a tensor with no tail (4096 B): byte 4096 is on the page
    at_page = ExpectedFinding(OVERREAD, "src", (MEMCHECK, GUARD_PAGE), bytes=1, ranges=((4096, 4097),))
    assert decide(Expectation((at_page,)), [], GUARD_PAGE_RAN, placement=L.GUARD_PAGE_BACK,
                  pages={"src": 4096}).outcome is Outcome.UNEXPECTEDLY_CLEAN


def test_a_write_in_the_alignment_tail_is_judged_by_the_guard_markers() -> None:
    seen = guard_finding()
    v = decide(Expectation((OVERWRITE_1B,)), [seen], GUARD_PAGE_RAN, placement=L.GUARD_PAGE_BACK, pages=PAGE_AT)
    assert v.outcome is Outcome.EXPECTED_FINDING, v.message
    v = decide(Expectation((OVERWRITE_1B,)), [], GUARD_PAGE_RAN, placement=L.GUARD_PAGE_BACK, pages=PAGE_AT)
    assert v.outcome is Outcome.UNEXPECTEDLY_CLEAN, v.message      # the markers ran and saw nothing: the bug is gone
    # a fault although the expected bytes cannot reach the page: something else touched it, a finding
    v = decide(Expectation((OVERWRITE_1B,)), [seen, fault("dst")], GUARD_PAGE_RAN, placement=L.GUARD_PAGE_BACK, pages=PAGE_AT)
    assert v.outcome is Outcome.FINDING, v.message
    # a guard-only past_end write known to lie in the tail is checkable under a guard-page placement
    tail_only = ExpectedFinding(OVERWRITE, "dst", (GUARD,), region="past_end", bytes=1, ranges=((4000, 4001),))
    assert decide(Expectation((tail_only,)), [], GUARD_PAGE_RAN, placement=L.GUARD_PAGE_BACK,
                  pages=PAGE_AT).outcome is Outcome.UNEXPECTEDLY_CLEAN


def test_a_guard_page_fault_matches_a_read_or_a_write_alike() -> None:
    """The fault cannot tell which: an expected overwrite is matched by it, and other detectors stay strict."""
    write_far = ExpectedFinding(OVERWRITE, "dst", (GUARD, GUARD_PAGE), ranges=((4000, 8000),))
    assert write_far.matches(fault("dst"))
    assert decide(Expectation((write_far,)), [fault("dst")], GUARD_PAGE_RAN, placement=L.GUARD_PAGE_BACK,
                  pages=PAGE_AT).outcome is Outcome.EXPECTED_FINDING
    assert not OVERWRITE_1B.matches(memcheck_finding(buffer="dst", start=4000, end=4001, kind=OVERREAD))
    assert not ExpectedFinding("misaligned", "dst", (GUARD_PAGE,)).matches(fault("dst"))


def test_a_before_start_expectation_is_never_dropped_for_lying_before_a_back_page() -> None:
    """The guard-page mode's second pass puts a page right before the start: a before_start expectation stays
    the guard page's even where the buffer map shows a back page (its bytes are 'before' that page too)."""
    expected = ExpectedFinding(OVERREAD, "src", (MEMCHECK, POISON, GUARD_PAGE), region="before_start", bytes=1,
                               ranges=((-1, 0),))
    fault = Finding(detector=GUARD_PAGE, kind=OVERREAD, buffer="src", region="before_start", bytes=0, exact=False)
    ran = [DetectorRun(GUARD, True), DetectorRun(GUARD_PAGE, True)]
    v = decide(Expectation((expected,)), [fault], ran, placement=L.GUARD_PAGE_BACK, pages={"src": 4096})
    assert v.outcome is Outcome.EXPECTED_FINDING, v.message


def test_h200_guard_page_findings_of_the_planted_underruns_match_planted_oob() -> None:
    """Run 16 on the H200: guard_page's front-page pass found the planted underread and underwrite, named
    src/dst and before_start; planted_oob's expectations must accept exactly those findings."""
    import gzip
    import json
    from pathlib import Path

    from gpu_memsafety.scenarios.planted_oob import SCENARIO
    report = DATA / "reports/run16-issue20-oob-guard_page.report.json.gz"
    cases = {c["id"]: c for c in json.loads(gzip.decompress(report.read_bytes()))["cases"]}
    ran = [DetectorRun(GUARD, True), DetectorRun(GUARD_PAGE, True)]
    checked = 0
    for case in SCENARIO.build():
        data = cases.get(case.id)
        if data is None or case.variant not in ("underread", "underwrite"):
            continue
        found = [Finding(**{k: v for k, v in f.items() if k in Finding.__dataclass_fields__ and k != "ranges"})
                 for f in data["findings"]]
        assert found and {f.detector for f in found} == {GUARD_PAGE}
        v = decide(SCENARIO.expectation(case, "sm_90"), found, ran, placement=L.GUARD_PAGE_BACK)
        assert v.outcome is Outcome.EXPECTED_FINDING, (case.id, v.message)
        checked += 1
    assert checked == 4


def test_a_detector_called_blind_that_sees_the_bug_anyway_is_covered_not_unexpected() -> None:
    """gpt-oss `down` shapes: poison is blind to the last-expert scale read (the output does not depend on it under
    0xFF, 0x7B, 0xFA). A new pattern that makes it see the same read must not turn the expected finding into an
    unexpected one; another buffer, or another kind, stays unexpected."""
    from gpu_memsafety.model import Finding as F
    expected = ExpectedFinding(OVERREAD, "w_scale", region="past_end", blind=((POISON, "the output does not depend on it"),))
    assert POISON not in expected.detectors
    ran = MEMCHECK_RAN + [DetectorRun(POISON, True, "6 patterns compared")]
    seen = memcheck_finding(buffer="w_scale")
    bound = F(POISON, OVERREAD, "w_scale", "past_end", 64, ranges=(ByteRange("past_end", 4000, 4064),), kernel="k",
              exact=False)
    v = decide(Expectation((expected,)), [seen, bound], ran)
    assert v.outcome is Outcome.EXPECTED_FINDING and v.unexpected == (), v.message
    other = F(POISON, OVERREAD, "w", "past_end", 64, ranges=(ByteRange("past_end", 4000, 4064),), kernel="k", exact=False)
    assert decide(Expectation((expected,)), [seen, other], ran).outcome is Outcome.FINDING
    # seen only by the blind detector: covered, yet not counted as seen (memcheck ran and missed it)
    alone = decide(Expectation((expected,)), [bound], ran)
    assert alone.outcome is Outcome.UNEXPECTEDLY_CLEAN and alone.unexpected == (), alone.message
