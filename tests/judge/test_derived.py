"""Expectations per detector, derived (issue 26 item 2), and the failing cases of each mode on our own matrix fixed
at their cause:
- an expectation that names no detectors is checked by every detector that can see its kind and region; one
  that names a detector blind (with the reason) is not applicable where only that detector ran, saying why;
- poison on the gpt-oss `down` shapes: the bytes read past w_scale stand for output rows n >= N, which the kernel
  never stores (derived from the layout model): poison is blind there, and says so;
- a host-side refusal (nothing launched, by contract) is judged like in guard mode in uninit and poison mode too,
  never "the kernel was never launched";
- another allocation's overrun landing in a buffer's guard (w_scale's, from the batched split-k scratchpad of
  triton#8327) is that overrun's finding, naming the victim, never the victim's own;
- a correct kernel whose declared output is a `ctx.rows(..., used_rows=T)` buffer handed back whole gets no poison
  false alarm on its own unused rows.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.detectors.base import Evidence
from gpu_memsafety.detectors.guard import DETECTOR as GUARD_DETECTOR, spills
from gpu_memsafety import job as J
from gpu_memsafety.detectors.modes import MODES
from gpu_memsafety.engine.runner import RunOptions, Runner
from gpu_memsafety.judge.verdict import decide
from gpu_memsafety.kernels.mxfp4 import layout as ML
from gpu_memsafety.model import (TRACE, BEFORE_START, GUARD, GUARD_PAGE, MEMCHECK, OVERREAD, OVERWRITE, PAST_END, POISON,
                                 UNATTRIBUTED, UNUSED_ROW, DetectorRun, Expectation, ExpectedFinding, Finding, Outcome,
                                 ByteRange)
from gpu_memsafety.placement import layout as L
from gpu_memsafety.scenario import registry
from gpu_memsafety.scenario.definition import Case, Param, Scenario
from gpu_memsafety.scenarios.last_expert_oob_read import SCENARIO as LAST_EXPERT
from repo_paths import FAKE_DIR

FAKE = FAKE_DIR / "fake_scenarios"


# ------------------------------------------------------------------------------------ derived detectors

def test_an_expectation_without_detectors_gets_every_detector_that_sees_its_kind_and_region() -> None:
    assert ExpectedFinding(OVERREAD, "x", region=PAST_END).detectors == (MEMCHECK, GUARD_PAGE, POISON, TRACE)
    assert ExpectedFinding(OVERWRITE, "x", region=PAST_END).detectors == (GUARD, MEMCHECK, GUARD_PAGE, TRACE)
    assert ExpectedFinding(OVERREAD, "x", region=UNUSED_ROW).detectors == (POISON, TRACE)
    assert ExpectedFinding(OVERWRITE, UNATTRIBUTED).detectors == (MEMCHECK,)     # memory that is no buffer of ours
    named = ExpectedFinding(OVERREAD, "x", (MEMCHECK,), region=PAST_END)
    assert named.detectors == (MEMCHECK, TRACE)     # named: as named, and the trace, memcheck's stand-in on a CPU


def test_a_blind_detector_makes_the_case_not_applicable_with_its_reason() -> None:
    e = ExpectedFinding(OVERREAD, "x", region=PAST_END, blind=((POISON, "the output does not depend on them"),))
    assert e.detectors == (MEMCHECK, GUARD_PAGE, TRACE)
    verdict = decide(Expectation((e,)), [], [DetectorRun(GUARD, True), DetectorRun(POISON, True)])
    assert verdict.outcome is Outcome.UNSUPPORTED            # the judge reports it as not applicable
    assert "poison cannot see it here: the output does not depend on them" in verdict.message
    with pytest.raises(ValueError, match="unknown detector"):
        ExpectedFinding(OVERREAD, "x", blind=(("telepathy", "no"),))


def test_poison_is_blind_exactly_on_the_last_expert_shapes_whose_overread_feeds_no_stored_output() -> None:
    blind, seen = [], []
    for case in LAST_EXPERT.build():
        for e in LAST_EXPERT.expect(case).findings:
            if e.buffer == "w_scale":
                (seen if POISON in e.detectors else blind).append(case.id)
                assert MEMCHECK in e.detectors and GUARD_PAGE in e.detectors
    down = [c for c in blind if "-tkD-" not in c]
    assert sorted(down) == sorted(f"last_expert_oob_read[unpadded-tk{tk}-gptoss{m}-down-K2880-E{E}-N2880]"
                                  for tk in "AC" for m, E in (("20b", 32), ("120b", 128)))
    assert all("-tkD-" not in c for c in seen) and len(seen) == 16
    assert ML.overread_outputs(32, 2880, 2880, False) == ()                  # n 2928..3071, all >= N
    assert ML.overread_outputs(4, 256, 2880, False)[:2] == (112, 113)
    [why] = [e.blind for e in LAST_EXPERT.expect(registry.find_case(down[0])[1]).findings]
    assert "2928..3071, all >= N=2880" in why[0][1]


# ----------------------------------------------------------------------------- a neighbour's overrun

def buffer(name: str, base: int, nbytes: int = 4096, guard: int = 1024) -> dict[str, Any]:
    lay = L.plan(nbytes, guard=guard)
    return {"name": name, "tensor_addr": base + lay.front, "nbytes": nbytes, "alloc_base": base,
            "alloc_size": lay.total, "layout": lay.to_json()}


def run(region: str, start: int, end: int) -> dict[str, Any]:
    return {"region": region, "start": start, "end": end, "logical": ""}


def test_a_front_guard_written_from_the_allocation_edge_is_a_neighbours_overrun_naming_the_victim() -> None:
    victim = buffer("w_scale", 0x10000)
    guard = {"w_scale": [run(BEFORE_START, -1024, -512)]}          # the outer half: reached from below
    [spill] = spills(guard, [victim])
    assert (spill.victim, spill.side, spill.culprit) == ("w_scale", BEFORE_START, UNATTRIBUTED)
    f = spill.finding("k", "sm_90")
    assert (f.detector, f.kind, f.buffer, f.region, f.bytes) == (GUARD, OVERWRITE, UNATTRIBUTED, PAST_END, 512)
    assert f.detail("victim") == "w_scale" and "not accessed out of bounds" in f.note
    # The batched scratchpad expectation covers it (never unexpected), without claiming the markers must see it.
    expected = ExpectedFinding(OVERWRITE, UNATTRIBUTED)
    assert expected.matches_spill(f) and not expected.matches(f)
    verdict = decide(Expectation((expected,)), [f], [DetectorRun(GUARD, True)])
    assert verdict.outcome is Outcome.UNSUPPORTED and "visible only to memcheck" in verdict.message


def test_an_underrun_by_the_buffers_own_kernel_stays_its_own_finding() -> None:
    victim = buffer("dst", 0x10000)
    assert spills({"dst": [run(BEFORE_START, -4, 0)]}, [victim]) == []           # next to the tensor: its own
    assert spills({"dst": [run(BEFORE_START, -1024, 0)]}, [victim]) == []        # the whole guard: not told apart
    # both guards, each from the tensor outward but short of the outer edge: still its own
    assert spills({"dst": [run(BEFORE_START, -1000, 0), run(PAST_END, 4096, 5000)]}, [victim]) == []


def test_both_guards_written_across_from_their_outer_edges_are_a_write_across_the_allocation() -> None:
    """H200 session 8, MODE=guard: the batched split-k scratchpad (triton#8327) wrote 4 KiB blocks over all of
    w_scale's allocation; both guards changed edge to edge (bytes the write happened to leave at 0xA5 split the
    runs). Not w_scale's own underrun and overrun: a spill on both sides, matched by the scratchpad expectation."""
    victim = buffer("w_scale", 0x10000, nbytes=94208)
    guard = {"w_scale": [run(BEFORE_START, -1024, -1010), run(BEFORE_START, -1009, -754), run(BEFORE_START, -753, 0),
                         run(PAST_END, 94208, 94978), run(PAST_END, 94979, 95232)]}
    found = spills(guard, [victim])
    assert [(s.victim, s.side, s.culprit, len(s.runs)) for s in found] == [
        ("w_scale", BEFORE_START, UNATTRIBUTED, 3), ("w_scale", PAST_END, UNATTRIBUTED, 2)]
    findings = [s.finding("k", "sm_90") for s in found]
    expected = ExpectedFinding(OVERWRITE, UNATTRIBUTED)
    assert all(expected.matches_spill(f) for f in findings)
    verdict = decide(Expectation((expected,)), findings, [DetectorRun(GUARD, True)])
    assert verdict.outcome is Outcome.UNSUPPORTED and "visible only to memcheck" in verdict.message
    # one side only reached from its outer edge through to the tensor: not told apart, the buffer's own
    assert spills({"w_scale": guard["w_scale"][:3]}, [victim]) == []


def test_the_culprit_is_our_buffer_below_whose_back_guard_was_written_to_its_end() -> None:
    below = buffer("a", 0x10000)
    above = buffer("b", 0x10000 + below["alloc_size"])
    lay = L.GuardLayout.from_json(below["layout"])
    guard = {"a": [run(PAST_END, 4096, lay.nbytes + lay.back)], "b": [run(BEFORE_START, -1024, -1000)]}
    [spill] = spills(guard, [below, above])
    assert (spill.victim, spill.culprit) == ("b", "a")
    sc = Scenario(name="fake", summary="", adapter="x:y", params=(Param("n", int),), variants=("v",),
                  cases=lambda: [], expect=lambda c: Expectation(), kernel=lambda c: "k", needs_gpu=lambda c: False)
    case = Case("fake", "v", {"n": 1}, "n1")
    res = J.WorkerResult(case_id=case.id, status=J.OK, buffers=[below, above], evidence={GUARD: guard})
    found = GUARD_DETECTOR.findings(Evidence(sc, case, res, MODES["guard"]))
    assert sorted((f.buffer, f.region, f.detail("victim")) for f in found) == [("a", PAST_END, ""),
                                                                              ("a", PAST_END, "b")]


def poison_read(region: str, start: int, end: int) -> Finding:
    return Finding(detector=POISON, kind=OVERREAD, buffer="w_scale", region=region, bytes=end - start, count=1,
                   kernel="_matmul_ogs", arch="sm_90", ranges=(ByteRange(region, start, end),), exact=False)


def test_a_poison_read_in_a_guard_where_the_scratchpad_lands_is_covered_by_the_wild_access() -> None:
    """H200 session 8, MODE=poison, last_expert_oob_read[batched_unpadded-tkA-K2880-E4-N256-M64]: changing only
    w_scale's front guard changed 65,511 of 65,536 outputs (the triton#8327 scratchpad, allocated below w_scale,
    read back past its end), beside w_scale's own read past its end. The expected scratchpad access covers the
    front-guard read; the own read is the finding seen."""
    case = registry.find_case("last_expert_oob_read[batched_unpadded-tkA-K2880-E4-N256-M64]")[1]
    expectation = LAST_EXPERT.expect(case)
    front, back = poison_read(BEFORE_START, -1024, 0), poison_read(PAST_END, 92160, 93184)
    ran = [DetectorRun(GUARD, True), DetectorRun(POISON, True)]
    verdict = decide(expectation, [front, back], ran)
    assert verdict.outcome is Outcome.EXPECTED_FINDING, verdict.message
    # without the scratchpad bug (split-k 1) the same front-guard read is unexpected
    splitk1 = registry.find_case("last_expert_oob_read[batched_splitk1_unpadded-tkA-K2880-E4-N256-M64]")[1]
    assert decide(LAST_EXPERT.expect(splitk1), [front, back], ran).outcome is Outcome.FINDING
    # only poison's reads are covered so: a guard finding that is no spill, or a race, never
    wild = ExpectedFinding(OVERWRITE, UNATTRIBUTED)
    assert wild.matches_landing(front) and not wild.matches_landing(replace(front, detector=GUARD, kind=OVERWRITE))
    assert not ExpectedFinding(OVERREAD, "w_scale", region=PAST_END).matches_landing(front)


# --------------------------------------------------------------- refusals and rows outputs, end to end

def _runner(mode: str, tmp_path: Path) -> Runner:
    return Runner(RunOptions(mode=MODES[mode], workdir=tmp_path / mode, gpu_available=False, timeout_scale=0.5))


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["uninit", "poison"])
def test_a_host_side_refusal_is_judged_in_uninit_and_poison_mode_too(tmp_path: Path, mode: str, worker_env: Path) -> None:
    faults = registry.load_source(registry.Source(str(FAKE / "fake_faults.py"), None, "tests"))
    case = next(c for c in faults.build() if c.variant == "refused")
    [result] = _runner(mode, tmp_path).run([(faults, case)])
    assert result.outcome is Outcome.CLEAN, result.message
    assert result.details["notes"]["refused"]


@pytest.mark.e2e
def test_a_rows_output_handed_back_whole_gets_no_poison_false_alarm_on_its_unused_rows(tmp_path: Path,
                                                                                      worker_env: Path) -> None:
    rows = registry.load_source(registry.Source(str(FAKE / "fake_rows.py"), None, "tests"))
    results = {r.case_id: r for r in _runner("poison", tmp_path).run([(rows, c) for c in rows.build()])}
    correct = results["fake_rows[correct-n8]"]
    assert correct.outcome is Outcome.CLEAN and correct.findings == [], correct.message
    bad = results["fake_rows[unused_read-n8]"]
    assert bad.outcome is Outcome.EXPECTED_FINDING, bad.message
    assert [(f.detector, f.buffer, f.region) for f in bad.findings] == [(POISON, "y", UNUSED_ROW)]
