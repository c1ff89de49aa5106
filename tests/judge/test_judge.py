"""gpu_memsafety.judge.rules, rule by rule, with small fakes: a scenario, worker results and sanitizer records built by hand,
plus the real H200 sanitizer output in tests/data/sanitizer/. No process runs here.

Each rule of the judge's docstring is reached by the smallest input that should reach it, and its neighbour
is checked too, so a rule that silently changes shows up. The holes of issue 15 each have a test here:
unplaceable records, count mismatches, API errors, nothing guarded, a detector that could not run.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import pytest

from gpu_memsafety import job as J
from gpu_memsafety.placement import layout as L
from gpu_memsafety.detectors import pageprobe
from gpu_memsafety.detectors.base import Evidence
from gpu_memsafety.engine.batches import Batch, Batches
from gpu_memsafety.judge.rules import Machine, Standing, apply_baseline
from gpu_memsafety.sanitizer.records import SanitizerRun, api_error_class, place_sanitizer_records, read_sanitizer
from gpu_memsafety.model import (GUARD, GUARD_PAGE, MEMCHECK, OVERREAD, OVERWRITE, PAST_END, POISON, UNATTRIBUTED, CaseResult,
                           DetectorRun, Expectation,
                           ExpectedFinding, Finding, Outcome)
from gpu_memsafety.detectors.modes import MODES
from gpu_memsafety.sanitizer.parse import API_ERROR, MEMORY_ACCESS, OTHER, SanitizerRecord, parse_xml
from gpu_memsafety.scenario.definition import Case, Param, Scenario
from repo_paths import SANITIZER_DATA as DATA

BASE = 0x7F00_0000_0000
N = 4000

GPU = Machine(gpu=True)
GPU_ALLOWED = Machine(gpu=True, allow_unsupported=True)
CPU = Machine(gpu=False)

READ_PAST_SRC = ExpectedFinding(OVERREAD, "src", (MEMCHECK,), region="past_end", bytes=4, ranges=((N, N + 4),))


def scenario(expect: Expectation = Expectation(), *, detectors: tuple[str, ...] | None = None,
             needs_gpu: bool = False) -> Scenario:
    extra = {"detectors": detectors} if detectors is not None else {}
    return Scenario(name="fake", summary="fake", adapter="x:y", params=(Param("n", int),), variants=("v",),
                    cases=lambda: [Case("fake", "v", {"n": N}, "n4000")], expect=lambda case: expect,
                    kernel=lambda case: "k", needs_gpu=lambda case: needs_gpu, **extra)


CASE = Case("fake", "v", {"n": N}, "n4000")


def buffer(name: str, addr: int, nbytes: int = N, placement: str = L.FLUSH_END) -> dict[str, Any]:
    lay = L.plan(nbytes, placement=placement)
    return {"name": name, "tensor_addr": addr, "nbytes": nbytes, "alloc_base": addr - lay.front,
            "alloc_size": lay.total, "layout": lay.to_json()}


SRC = buffer("src", BASE)


def worker(status: str = J.OK, **fields: Any) -> J.WorkerResult:
    """A worker result; the detectors' evidence may be given by detector name (guard=..., poison=...; None: the
    detector recorded nothing). By default the guard markers were checked and found nothing."""
    base: dict[str, Any] = {"case_id": CASE.id, "status": status, "kernel": "k", "arch": "sm_90", "launches": 1,
                            "buffers": [SRC], "watched": ["src"]}
    evidence: dict[str, Any] = {GUARD: {"src": []}}
    for name in ("guard", "poison", "uninit", "stress"):
        if name in fields:
            evidence[name] = fields.pop(name)
    base.update(fields)
    return J.WorkerResult(**base, evidence={k: v for k, v in evidence.items() if v is not None})


def access(address: int | None = BASE + N, size: int = 4, direction: str = "read", kernel: str = "k",
           unplaceable: str = "") -> SanitizerRecord:
    return SanitizerRecord(MEMORY_ACCESS, "Invalid __global__ read", kind="Precise", direction=direction, size=size,
                           address=address, kernel=kernel, unplaceable=unplaceable)


def api(api_name: str, error: str, result: int) -> SanitizerRecord:
    return SanitizerRecord(API_ERROR, f"Program hit {error}", kind="Api", api=api_name, error=error, result=result)


PROBE = api("cuGetProcAddress_v2", "CUDA_ERROR_INVALID_VALUE", 1)
LAUNCH_FAILED = api("cudaLaunchKernel", "cudaErrorLaunchFailure", 719)
IMPRECISE = SanitizerRecord(OTHER, "", kind="Imprecise", kernel="k", details=(("exception", "Illegal instruction"),))


def memcheck_run(*records: SanitizerRecord, summary: int | None = None, exit_code: int | None = None,
                 problem: str = "") -> SanitizerRun:
    count = len(records) if summary is None else summary
    code = (86 if count else 0) if exit_code is None else exit_code
    return SanitizerRun("memcheck", tuple(records), problem, count, code, "compute-sanitizer 2025.3.1 (fake)")


def judge_one(res: J.WorkerResult, *, mode: str = "memcheck", machine: Machine = GPU,
              sc: Scenario | None = None, run: SanitizerRun | None = None, sanitized: bool = True,
              sanitizer_missing: str = "", reruns: Callable[[pageprobe.Probe], str] | None = None) -> CaseResult:
    """`reruns`: a fake worker for guard-page reruns, the status of each probe (none given: no rerun runs)."""
    sc = sc or scenario()
    mode_ = MODES[mode]
    if mode_.sanitizer and sanitized and run is None:
        run = memcheck_run()
    judge = Batches(Standing(mode_, machine, sanitizer_missing=sanitizer_missing))
    judged = judge.judge_batch([(sc, CASE)], Batch(results={0: res}, sanitizer=run if sanitized else None))
    assert judged.rest == [] and judged.alone == []
    if judged.probe:
        [(first, probing)] = judged.probe.values()
        assert not judged.done and first is res
        while reruns is not None and (probes := probing.next_round()):
            probing.record(pageprobe.ProbeRun(p, reruns(p), 1.5) for p in probes)
        return judge.probed(sc, CASE, res, probing)
    [result] = judged.done
    return result


# --------------------------------------------------------------------------------- 1. what the worker said

def test_adapter_unsupported_on_a_gpu_machine_could_not_run_and_fails() -> None:
    result = judge_one(worker(J.UNSUPPORTED, message="Unsupported: needs a flux capacitor"))
    assert result.outcome is Outcome.COULD_NOT_RUN and result.failed
    assert "needs a flux capacitor" in result.message and "--gpu-memsafety-allow-unsupported" in result.message


def test_adapter_unsupported_is_a_skip_with_allow_unsupported_or_without_a_gpu() -> None:
    for machine in (GPU_ALLOWED, CPU):
        result = judge_one(worker(J.UNSUPPORTED, message="needs a flux capacitor"), machine=machine)
        assert result.outcome is Outcome.UNSUPPORTED and not result.failed


def test_not_applicable_never_fails_even_on_a_gpu_machine() -> None:
    result = judge_one(worker(J.NOT_APPLICABLE, message="needs compute capability 9.0; found sm_100"))
    assert result.outcome is Outcome.NOT_APPLICABLE and not result.failed and result.outcome.skipped
    assert "sm_100" in result.message


def test_out_of_memory_and_errors_are_unresolved_nothing_checked() -> None:
    oom = judge_one(worker(J.OOM, message="OutOfMemoryError", memory={"free_bytes_after_release": 2**30,
                                                                       "total_bytes": 2**31}))
    assert oom.outcome is Outcome.UNRESOLVED and "1.0 GiB of 2.0 GiB free" in oom.message
    error = judge_one(worker(J.ERROR, message="RuntimeError: boom", traceback="Traceback ..."))
    assert error.outcome is Outcome.UNRESOLVED and "RuntimeError: boom" in error.message


# ---------------------------------------------------------------------------------------------- 2. faults

def test_a_fault_no_detector_explains_is_crashed() -> None:
    result = judge_one(worker(J.FAULT, message="illegal memory access", launches=0), mode="guard", sanitized=False)
    assert result.outcome is Outcome.CRASHED and "CUDA context lost: illegal memory access" in result.message
    # without a GPU (Triton's interpreter) there is no CUDA context: the process died
    died = judge_one(worker(J.FAULT, message="worker exited with code -11", launches=0), mode="guard",
                     sanitized=False, machine=Machine(gpu=False))
    assert died.outcome is Outcome.CRASHED and died.message.startswith("the worker process died"), died.message
    # only a StrayAccess says the fence stopped the run: a crash's detectors that did not run say their own reason
    lost = judge_one(worker(J.FAULT, message="worker exited with code -11", launches=0), mode="poison",
                     sanitized=False, machine=Machine(gpu=False), sc=scenario(detectors=(GUARD, POISON)))
    assert lost.outcome is Outcome.CRASHED and not any("fence" in d.detail for d in lost.detectors), lost.detectors


WILD_WRITE = ExpectedFinding(OVERWRITE, "unattributed", upstream="triton-lang/triton#8327")


@pytest.mark.parametrize("mode", ["poison", "guard", "uninit", "values"])
def test_a_fault_where_an_access_outside_every_buffer_is_expected_is_not_judged_without_memcheck(mode: str) -> None:
    """H200 session 8, MODE=poison: last_expert_oob_read[batched_padded-...] (the batched split-k scratchpad of
    triton#8327 writes past its allocation) lost its context. Without memcheck that fault cannot be told from
    another: not applicable, saying why and which mode judges it; never crashed, never clean."""
    sc = scenario(Expectation((WILD_WRITE,)), detectors=(GUARD, MEMCHECK, POISON))
    res = worker(J.FAULT, message="worker exited with code -6 while running this case", launches=0)
    result = judge_one(res, mode=mode, sc=sc, sanitized=False)
    assert result.outcome is Outcome.NOT_APPLICABLE and not result.failed, result.message
    assert "CUDA context lost" in result.message and "memcheck places it" in result.message
    # with memcheck in the mode, a fault it did not place stays a crash; and without the expectation, too
    assert judge_one(res, mode="both", sc=sc, run=memcheck_run()).outcome is Outcome.CRASHED
    assert judge_one(res, mode=mode, sanitized=False).outcome is Outcome.CRASHED


def test_a_fault_memcheck_placed_is_judged_from_the_records() -> None:
    sc = scenario(Expectation((READ_PAST_SRC,)))
    result = judge_one(worker(J.FAULT, message="died in the launch", launches=0), sc=sc, run=memcheck_run(access()))
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message


def test_a_guard_page_fault_is_an_overread_of_the_watched_buffers() -> None:
    sc = scenario(Expectation((ExpectedFinding(OVERREAD, "src", ("guard_page",)),)))
    res = worker(J.FAULT, message="illegal address", buffers=[dict(SRC, backend="vmm")])
    result = judge_one(res, mode="guard_page", sc=sc, sanitized=False)
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message


def test_a_guard_page_fault_with_nothing_watched_is_crashed_not_clean() -> None:
    res = worker(J.FAULT, message="illegal address", buffers=[], watched=[])
    assert judge_one(res, mode="guard_page", sanitized=False).outcome is Outcome.CRASHED


# --------------------------------------------------------------------------------------- 3. nothing guarded

def test_no_guarded_buffer_is_unresolved_nothing_was_guarded() -> None:
    for mode in ("guard", "memcheck", "both", "poison"):
        result = judge_one(worker(buffers=[], watched=[], guard={}), mode=mode, sanitized=True)
        assert result.outcome is Outcome.UNRESOLVED, (mode, result.outcome, result.message)
        assert "nothing was guarded" in result.message


def test_no_covered_buffer_in_a_mode_that_needs_one_is_unresolved() -> None:
    """The rule follows what the buffer map says was covered (a layout placed for memcheck), not watch=True."""
    guarded = buffer("src", BASE, placement=L.GUARDED)
    result = judge_one(worker(watched=[], buffers=[guarded], cover="watched"), mode="memcheck")
    assert result.outcome is Outcome.UNRESOLVED
    assert ("nothing was guarded for memcheck: no buffer was covered (cover was narrowed to watched buffers "
            "('watched') and none was allocated with watch=True)") in result.message, result.message
    result = judge_one(worker(watched=["src"], buffers=[guarded], cover="all"), mode="memcheck")
    assert result.outcome is Outcome.UNRESOLVED and "no buffer got this mode's placement" in result.message


def test_an_unwatched_buffer_covered_by_default_is_enough_for_memcheck() -> None:
    """Every buffer is covered by default: no watch=True at all, yet memcheck had a flush-ended buffer to see."""
    result = judge_one(worker(watched=[], cover="all"), mode="memcheck")
    assert result.outcome is Outcome.CLEAN, result.message
    assert result.details["cover"] == {"cover": "all", "covered": ["src"], "watched": []}


def test_no_watched_buffer_is_fine_for_guard_markers_alone() -> None:
    assert judge_one(worker(watched=[]), mode="guard", sanitized=False).outcome is Outcome.CLEAN


def test_a_kernel_never_launched_checked_nothing() -> None:
    result = judge_one(worker(launches=0), mode="guard", sanitized=False)
    assert result.outcome is Outcome.UNRESOLVED and "never launched" in result.message


def test_a_host_side_refusal_contract_launches_nothing_by_design() -> None:
    res = worker(launches=0, notes={"refused": "H % 128 != 0: the wrapper refuses before any launch"})
    assert judge_one(res, mode="guard", sanitized=False).outcome is Outcome.CLEAN


# ---------------------------------------------------------------------------------- 4. the sanitizer's word

def test_a_sanitizer_that_did_not_finish_is_unresolved() -> None:
    result = judge_one(worker(), run=memcheck_run(problem="sanitizer XML incomplete: cut"))
    assert result.outcome is Outcome.UNRESOLVED and "memcheck did not run properly" in result.message


def test_error_summary_count_that_disagrees_with_the_records_is_unresolved() -> None:
    result = judge_one(worker(), run=memcheck_run(summary=3))
    assert result.outcome is Outcome.UNRESOLVED
    assert "counted 3 errors (ERROR SUMMARY) but its XML holds 0 records" in result.message


def test_exit_code_that_disagrees_with_the_records_is_unresolved() -> None:
    silent = judge_one(worker(), run=memcheck_run(summary=0, exit_code=86))
    assert silent.outcome is Outcome.UNRESOLVED and "exited with its error code 86" in silent.message
    sc = scenario(Expectation((READ_PAST_SRC,)))
    zero = judge_one(worker(), sc=sc, run=memcheck_run(access(), exit_code=0))
    assert zero.outcome is Outcome.UNRESOLVED and "exited with code 0" in zero.message


def test_agreeing_count_and_exit_code_are_clean() -> None:
    result = judge_one(worker(), run=memcheck_run())
    assert result.outcome is Outcome.CLEAN and result.message == "clean under memcheck"


# ---------------------------------------------------------------------------------- 5. unplaceable records

@pytest.mark.parametrize("record, why", [
    (access(address=None, unplaceable="no address"), "no address"),
    (access(unplaceable="address '0xZZ' is not a number"), "is not a number"),
    (access(unplaceable="address -16 is negative"), "negative"),
    (access(unplaceable="size 'four' is not a number"), "size 'four'"),
    (IMPRECISE, "a Imprecise record, which names no address"),
    (SanitizerRecord(OTHER, "unexpected element <mystery> in <ComputeSanitizerOutput>", details=(("x", "1"),)),
     "a record the parser does not know"),
])
def test_a_record_the_harness_cannot_place_fails_the_case_showing_the_raw_record(record: SanitizerRecord,
                                                                                 why: str) -> None:
    result = judge_one(worker(), run=memcheck_run(record))
    assert result.outcome is Outcome.FINDING, result.message
    [finding] = result.findings
    assert (finding.detector, finding.buffer, finding.region) == (MEMCHECK, "(unplaced)", "unplaced")
    assert why in finding.note and "raw:" in finding.note


def test_an_unplaceable_record_is_not_absorbed_by_an_expected_finding() -> None:
    sc = scenario(Expectation((READ_PAST_SRC,)))
    result = judge_one(worker(), sc=sc, run=memcheck_run(access(), access(address=None, unplaceable="no address")))
    assert result.outcome is Outcome.FINDING and "(unplaced)" in result.message


def test_imprecise_records_of_a_kernel_memcheck_ended_are_explained_and_kept() -> None:
    """--destroy-on-device-error kernel: the placed error's kernel gets 'Illegal instruction' in its other warps."""
    sc = scenario(Expectation((READ_PAST_SRC,)))
    result = judge_one(worker(), sc=sc, run=memcheck_run(access(), IMPRECISE, IMPRECISE))
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    [explained] = result.details["sanitizer_records"]["explained_records"]
    assert (explained["kind"], explained["kernel"], explained["count"]) == ("Imprecise", "k", 2)


def test_imprecise_records_of_another_kernel_are_not_explained() -> None:
    sc = scenario(Expectation((READ_PAST_SRC,)))
    other = replace(IMPRECISE, kernel="other_kernel")
    assert judge_one(worker(), sc=sc, run=memcheck_run(access(), other)).outcome is Outcome.FINDING


# --------------------------------------------------------------------------------------------- API errors

def test_api_errors_are_classified() -> None:
    assert api_error_class(PROBE) == "benign"
    assert api_error_class(LAUNCH_FAILED) == "kernel"
    assert api_error_class(api("cudaFree", "cudaErrorIllegalAddress", 700)) == "kernel"
    assert api_error_class(api("cuModuleLoadData", "CUDA_ERROR_ILLEGAL_INSTRUCTION", 715)) == "kernel"
    assert api_error_class(api("cudaMemcpy", "cudaErrorInvalidValue", 1)) == "other"


def test_benign_api_probes_do_not_fail_a_case_and_are_kept_in_its_details() -> None:
    result = judge_one(worker(), run=memcheck_run(*[PROBE] * 34))
    assert result.outcome is Outcome.CLEAN, result.message
    [kept] = result.details["sanitizer_records"]["api_errors"]
    assert (kept["api"], kept["class"], kept["count"]) == ("cuGetProcAddress_v2", "benign", 34)


def test_other_api_errors_do_not_fail_but_are_kept() -> None:
    result = judge_one(worker(), run=memcheck_run(api("cudaMemcpy", "cudaErrorInvalidValue", 1)))
    assert result.outcome is Outcome.CLEAN
    assert result.details["sanitizer_records"]["api_errors"][0]["class"] == "other"


def test_an_api_error_saying_the_kernel_failed_fails_the_case() -> None:
    result = judge_one(worker(), run=memcheck_run(PROBE, LAUNCH_FAILED))
    assert result.outcome is Outcome.FINDING
    [finding] = result.findings
    assert finding.buffer == "(unplaced)" and "cudaErrorLaunchFailure" in finding.note


def test_a_kernel_failure_after_a_placed_error_is_explained() -> None:
    sc = scenario(Expectation((READ_PAST_SRC,)))
    result = judge_one(worker(), sc=sc, run=memcheck_run(access(), LAUNCH_FAILED))
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message


def test_unplaced_records_blame_the_case_that_died_not_its_batch_mates() -> None:
    died, fine = Case("fake", "v", {"n": N}, "died"), Case("fake", "v", {"n": N}, "fine")
    sc = scenario()
    results = {0: replace(worker(J.FAULT, message="launch failed"), case_id=died.id), 1: replace(worker(), case_id=fine.id)}
    placed = place_sanitizer_records([(sc, died), (sc, fine)], results, memcheck_run(LAUNCH_FAILED))
    assert list(placed.findings) == [died.id]


def test_a_stray_access_in_a_batch_reruns_its_cases_one_per_process_blaming_none() -> None:
    a, b = Case("fake", "v", {"n": N}, "a"), Case("fake", "v", {"n": N}, "b")
    sc = scenario()
    results = {0: replace(worker(), case_id=a.id), 1: replace(worker(), case_id=b.id, buffers=[buffer("src", BASE + (1 << 30))])}
    far = access(address=BASE - (1 << 31), direction="write")
    judged = Batches(Standing(MODES["memcheck"], GPU)).judge_batch([(sc, a), (sc, b)], Batch(results=results, sanitizer=memcheck_run(far)))
    assert judged.done == [] and judged.rest == [0, 1] and judged.alone == [a.id, b.id]
    assert "1 sanitizer records map to no buffer; rerunning 2 cases" in judged.note
    alone = Batches(Standing(MODES["memcheck"], GPU)).judge_batch([(sc, a)], Batch(results={0: results[0]}, sanitizer=memcheck_run(far)))
    [result] = alone.done
    assert result.outcome is Outcome.FINDING and result.findings[0].kind == OVERWRITE


def far_write_batch(**labels: str) -> tuple[list[Case], dict[int, J.WorkerResult]]:
    """Cases named by the keywords, launching the kernels their values name, in batch order: the first with the
    default `src` (its far write lands 2 GiB before it, in no buffer), each later one with an `src` 1 GiB beyond
    the one before."""
    cases = [Case("fake", "v", {"n": N}, name) for name in labels]
    results = {i: replace(worker(), case_id=case.id, kernel=label,
                          **({"buffers": [buffer("src", BASE + (i << 30))]} if i else {}))
               for i, (case, label) in enumerate(zip(cases, labels.values()))}
    return cases, results


def test_a_stray_access_reruns_alone_only_the_cases_whose_kernel_made_it() -> None:
    """planted_oob's far write in a batch of nine: the record names the far-write kernel, which one case launched;
    that case reruns alone and its batch mates are judged on the batch's run (before: all nine reran, one
    process each)."""
    (far_case, mate, other), results = far_write_batch(far="planted_far_write", mate="planted_copy_sum",
                                                       other="planted_copy_sum")
    sc = scenario()
    far = access(address=BASE - (1 << 31), direction="write", kernel="planted_far_write")
    read_past_mate = access(address=BASE + (1 << 30) + N, kernel="planted_copy_sum")
    items = [(sc, far_case), (sc, mate), (sc, other)]
    judged = Batches(Standing(MODES["memcheck"], GPU)).judge_batch(items, Batch(results=results, sanitizer=memcheck_run(far, read_past_mate)))
    assert judged.alone == [far_case.id] and judged.rest == [0]
    done = {r.case_id: r for r in judged.done}
    assert set(done) == {mate.id, other.id}
    assert done[mate.id].outcome is Outcome.FINDING and done[mate.id].findings[0].buffer == "src"
    assert done[other.id].outcome is Outcome.CLEAN
    # a record that names no kernel of the batch (or a case that died without a result) still reruns them all
    nameless = access(address=BASE - (1 << 31), direction="write", kernel="somebody_else")
    judged = Batches(Standing(MODES["memcheck"], GPU)).judge_batch(items, Batch(results=results, sanitizer=memcheck_run(nameless)))
    assert judged.done == [] and judged.alone == [far_case.id, mate.id, other.id]
    died = {0: results[0], 1: results[1]}
    judged = Batches(Standing(MODES["memcheck"], GPU)).judge_batch(items, Batch(results=died, crashed={2: "died"}, sanitizer=memcheck_run(far)))
    assert judged.done == [] and set(judged.alone) == {far_case.id, mate.id, other.id}


def test_a_stray_its_claimed_owner_does_not_repeat_alone_stays_a_finding_never_dropped() -> None:
    """A batch mate whose kernel label is not its kernel's name made the stray, whose kernel name holds another
    case's label: that case reruns alone and makes no such access. The record is not dropped with the mate's
    pass: it stays on the case that claimed it, a finding that says its owner is not known."""
    claimer, mislabelled = Case("fake", "v", {"n": N}, "claimer"), Case("fake", "v", {"n": N}, "mislabelled")
    sc = scenario()
    results = {0: replace(worker(), case_id=claimer.id, kernel="planted_copy_sum"),
               1: replace(worker(), case_id=mislabelled.id, kernel="my_label", buffers=[buffer("src", BASE + (1 << 30))])}
    stray = access(address=BASE - (1 << 31), direction="write", kernel="planted_copy_sum_cuda")
    judge = Batches(Standing(MODES["memcheck"], GPU))
    judged = judge.judge_batch([(sc, claimer), (sc, mislabelled)], Batch(results=results, sanitizer=memcheck_run(stray)))
    assert judged.alone == [claimer.id]
    [mate] = judged.done
    assert mate.case_id == mislabelled.id and mate.outcome is Outcome.CLEAN    # judged on the batch, as narrowed
    alone = judge.judge_batch([(sc, claimer)], Batch(results={0: results[0]}, sanitizer=memcheck_run()))
    [result] = alone.done
    assert result.outcome is Outcome.FINDING, result.message
    [finding] = result.findings
    assert finding.kernel == "planted_copy_sum_cuda" and "not when this case ran alone" in finding.note
    # repeated alone: the case's own finding, nothing added
    judge = Batches(Standing(MODES["memcheck"], GPU))
    judge.judge_batch([(sc, claimer), (sc, mislabelled)], Batch(results=results, sanitizer=memcheck_run(stray)))
    alone = judge.judge_batch([(sc, claimer)], Batch(results={0: results[0]}, sanitizer=memcheck_run(stray)))
    [result] = alone.done
    assert [f.kernel for f in result.findings] == ["planted_copy_sum_cuda"]
    assert "not when this case ran alone" not in result.findings[0].note


def test_two_strays_of_two_kernels_whose_names_nest_each_go_to_their_own_case_only() -> None:
    """H200, after the planner put planted_oob's Triton and CUDA far writes in one batch: records of
    `planted_far_write` and `planted_far_write_cuda`. The Triton case's label is in both names; it claims only its
    own (the longer label is the CUDA case's), and each case claims only the records of its kernel. Alone, each
    repeats its own far write: one finding each, no record of the other left on it as of unknown owner (before:
    both cases `finding`, each carrying the other's record)."""
    (tri, cu, mate), results = far_write_batch(tri="planted_far_write", cu="planted_far_write_cuda",
                                               mate="planted_copy_sum")
    sc = scenario()
    tri_write = access(address=BASE - (1 << 31), direction="write", kernel="planted_far_write")
    cu_write = access(address=BASE + (1 << 30) - (1 << 31), direction="write", kernel="_Z22planted_far_write_cudaPfi")
    judge = Batches(Standing(MODES["memcheck"], GPU))
    items = [(sc, tri), (sc, cu), (sc, mate)]
    judged = judge.judge_batch(items, Batch(results=results, sanitizer=memcheck_run(tri_write, cu_write)))
    assert judged.alone == [tri.id, cu.id] and [r.case_id for r in judged.done] == [mate.id]
    for index, (own, case) in enumerate([(tri_write, tri), (cu_write, cu)]):
        alone = judge.judge_batch([(sc, case)], Batch(results={0: results[index]}, sanitizer=memcheck_run(own)))
        [result] = alone.done
        assert [f.kernel for f in result.findings] == [own.kernel], (case.id, result.findings)
        assert "not when this case ran alone" not in result.findings[0].note


def test_kernel_owners_keeps_the_most_specific_label() -> None:
    from gpu_memsafety.sanitizer.hazards import kernel_owners
    labels = {"a": "planted_far_write", "b": "planted_far_write_cuda", "c": "planted_far_write_cuda", "d": "x"}
    assert kernel_owners("planted_far_write_cuda", labels) == ["b", "c"]
    assert kernel_owners("_Z22planted_far_write_cudaPfi", labels) == ["b", "c"]
    assert kernel_owners("planted_far_write", labels) == ["a"]
    assert kernel_owners("nobody", labels) == ["a", "b", "c", "d"]


# ------------------------------------------------------------------ real H200 output: the 34 probes, 64 Imprecise

def test_real_h200_mxfp4_run_is_an_expected_finding_with_its_api_errors_kept(tmp_path: Path) -> None:
    """memcheck-mxfp4-overread-target-aborted: 32 placed reads of w_scale past its end, 64 Imprecise 'Illegal
    instruction' records of the same kernel, 34 cuGetProcAddress probes, 3 illegal-instruction API errors after
    memcheck ended the kernel; ERROR SUMMARY 133 = the XML's 133 records."""
    run = read_sanitizer("memcheck", (DATA / "memcheck-mxfp4-overread-target-aborted.txt").read_text(),
                         (DATA / "memcheck-mxfp4-overread-target-aborted.xml").read_bytes(), exit_code=86,
                         timed_out=False)
    assert run.ran and run.summary_errors == len(run.records) == 133 and not run.disagreement()
    w_scale = buffer("w_scale", 0x7F859CA00000 - 4096, 4096)
    expect = Expectation((ExpectedFinding(OVERREAD, "w_scale", (MEMCHECK,), region="past_end", bytes=64),))
    res = worker(J.FAULT, message="worker exited with code -6 while running this case", buffers=[w_scale],
                 watched=["w_scale"], launches=0)
    result = judge_one(res, sc=scenario(expect), run=run)
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    kept = {(a["api"], a["class"]): a["count"] for a in result.details["sanitizer_records"]["api_errors"]}
    assert kept[("cuGetProcAddress_v2", "benign")] == 34
    assert kept[("cudaFree", "kernel")] == 1
    assert sum(g["count"] for g in result.details["sanitizer_records"]["explained_records"]) == 64 + 3


def test_real_h200_xml_with_a_dropped_record_is_unresolved() -> None:
    data = (DATA / "memcheck-triton-read.xml").read_bytes()
    parsed = parse_xml(data)
    run = SanitizerRun("memcheck", parsed.records[:-1], "", len(parsed.records), 86)
    assert "counted 3 errors" in run.disagreement()


# ----------------------------------------------------------------------- 6. detectors that could not run

def test_both_without_a_sanitizer_on_a_gpu_machine_is_not_clean_under_guard() -> None:
    result = judge_one(worker(), mode="both", sanitized=False, sanitizer_missing="compute-sanitizer not found")
    assert result.outcome is Outcome.COULD_NOT_RUN and result.failed
    assert "memcheck could not run: compute-sanitizer not found" in result.message
    assert "what ran: clean under guard" in result.message


def test_both_without_a_sanitizer_allowed_keeps_the_guards_verdict_and_is_partial() -> None:
    """As a staged mode (judge.combine rule 4): what ran decides, the missing detector is named in details.partial,
    and the headline counts the case as ran ('memcheck did not run on N'), never as not run."""
    result = judge_one(worker(), mode="both", machine=GPU_ALLOWED, sanitized=False, sanitizer_missing="not found")
    assert result.outcome is Outcome.CLEAN and not result.failed
    assert result.details["partial"] == {"memcheck": "not found"} and "partial: memcheck could not run" in result.message


def test_both_without_a_sanitizer_still_fails_on_an_unexpected_guard_finding() -> None:
    res = worker(guard={"src": [{"region": "back_guard", "start": N, "end": N + 1}]})
    result = judge_one(res, mode="both", sanitized=False, sanitizer_missing="not found")
    assert result.outcome is Outcome.FINDING


def test_guard_page_without_a_vmm_guard_page_could_not_run() -> None:
    result = judge_one(worker(), mode="guard_page", sanitized=False)
    assert result.outcome is Outcome.COULD_NOT_RUN and "no VMM guard page was placed" in result.message


# ----------------------------------------------------------------------------------- 7. not applicable

def test_a_mode_the_scenario_does_not_use_is_not_applicable() -> None:
    result = judge_one(worker(), mode="guard", sc=scenario(detectors=(MEMCHECK,)), sanitized=False)
    assert result.outcome is Outcome.NOT_APPLICABLE and "no detector ran" in result.message


def test_a_bug_the_mode_cannot_see_is_not_applicable() -> None:
    result = judge_one(worker(), mode="guard", sc=scenario(Expectation((READ_PAST_SRC,))), sanitized=False)
    assert result.outcome is Outcome.NOT_APPLICABLE and "visible only to memcheck" in result.message


def test_stress_counts_iterations_and_is_no_verdict() -> None:
    res = worker(buffers=[], watched=[], guard=None, stress={"iterations": 20}, launches=20)
    result = judge_one(res, mode="stress", sanitized=False)
    assert result.outcome is Outcome.NOT_APPLICABLE and "20 iterations ran without a crash" in result.message


# ------------------------------------------------------------------------------------------------ gating

def test_gate_without_a_gpu_skips_with_the_reason() -> None:
    result = Batches(Standing(MODES["guard"], CPU)).gate(scenario(needs_gpu=True), CASE)
    assert result is not None and result.outcome is Outcome.UNSUPPORTED and "needs a CUDA GPU" in result.message


def test_gate_memcheck_without_its_sanitizer_on_a_gpu_machine_fails() -> None:
    result = Batches(Standing(MODES["memcheck"], GPU, sanitizer_missing="compute-sanitizer not found")).gate(scenario(), CASE)
    assert result is not None and result.outcome is Outcome.COULD_NOT_RUN


def test_gate_lets_both_run_its_guard_part() -> None:
    assert Batches(Standing(MODES["both"], GPU, sanitizer_missing="not found")).gate(scenario(), CASE) is None


# ----------------------------------------------------------------------------------- lost cases, batches

def test_timed_out_crashed_and_never_started_cases() -> None:
    sc = scenario()
    cases = [Case("fake", "v", {"n": N}, f"c{i}") for i in range(4)]
    batch = Batch(results={0: replace(worker(), case_id=cases[0].id)}, timed_out={1: 2.0}, crashed={2: "died"},
                  log="last words")
    judged = Batches(Standing(MODES["guard"], CPU)).judge_batch([(sc, c) for c in cases], batch)
    done, rest = judged.done, judged.rest
    assert [r.outcome for r in done] == [Outcome.CLEAN, Outcome.TIMEOUT, Outcome.CRASHED]
    assert "no result after 2 s" in done[1].message and "last words" in done[2].message
    assert rest == [3]


def test_a_process_that_died_before_any_case_is_unresolved_for_all() -> None:
    sc = scenario()
    judged = Batches(Standing(MODES["guard"], CPU)).judge_batch([(sc, CASE)], Batch(returncode=1, log="ImportError"))
    done, rest = judged.done, judged.rest
    assert rest == [] and done[0].outcome is Outcome.UNRESOLVED and "before running any case" in done[0].message


# --------------------------------------------------------------------------------------------- records

def test_worker_result_round_trips_and_refuses_unknown_fields() -> None:
    res = worker(poison={"changed": {}}, stress={"iterations": 3})
    assert J.WorkerResult.from_json(res.to_json()) == res
    with pytest.raises(J.RecordError, match="unknown field"):
        J.WorkerResult.from_json({**res.to_json(), "surprise": 1})
    with pytest.raises(J.RecordError, match="status"):
        J.WorkerResult(case_id="x", status="fine")


def test_job_round_trips_its_cases() -> None:
    source = {"file": "/somewhere/fake.py", "module": None, "origin": "--scenario-path"}
    job = J.Job(cases=(J.JobCase(CASE, source), J.JobCase(CASE)), out_dir="/tmp/x", mode="both",
                watch_placement=L.FLUSH_END)
    assert J.Job.from_json(job.to_json()) == job
    assert job.to_json()["cases"][0] == {**CASE.to_json(), "source": source}   # as registry.case_job writes it
    with pytest.raises(J.RecordError, match="check_markers"):
        J.Job.from_json({**job.to_json(), "check_markers": True})


def test_a_job_case_carries_the_buffers_poison_recounts_and_refuses_a_bad_list() -> None:
    entry = J.JobCase(CASE, None, recount=("w_scale", "x"))
    assert entry.to_json()["recount"] == ["w_scale", "x"] and J.JobCase.from_json(entry.to_json()) == entry
    assert "recount" not in J.JobCase(CASE).to_json()                   # none: the case as registry.case_job writes it
    with pytest.raises(J.RecordError, match="recount"):
        J.JobCase.from_json({**CASE.to_json(), "source": None, "recount": "w_scale"})


def test_the_memcheck_stage_names_for_recount_only_overreads_no_expectation_accepts() -> None:
    """PoisonDetector.recount: an unexpected memcheck overread past either end names its buffer (poison surveys its
    guards next stage); an expected one (any bytes) does not, nor a write, nor an overread of an unused row."""
    from gpu_memsafety.detectors.base import Earlier
    from gpu_memsafety.detectors.poison import DETECTOR as POISON_UNIT
    from gpu_memsafety.model import BEFORE_START, ByteRange, Expectation, ExpectedFinding, Finding
    expected = ExpectedFinding(OVERREAD, "w_scale", region=PAST_END)
    sc = replace(scenario(), expect=lambda case: Expectation((expected,)))

    def mc(buffer: str, kind: str = OVERREAD, region: str = PAST_END) -> Finding:
        return Finding(MEMCHECK, kind, buffer, region, 4, ranges=(ByteRange(region, 0, 4),), kernel="k")
    result = CaseResult(CASE.id, "fake", "v", {}, "k", "sm_90", "complete", Outcome.FINDING, "",
                        findings=[mc("w_scale"), mc("x"), mc("x", region=BEFORE_START), mc("y", OVERWRITE),
                                  replace(mc("z"), detector=POISON)])
    assert POISON_UNIT.recount(Earlier(sc, CASE, result.arch, tuple(result.findings))) == ("x",)


# ---------------------------------------------------------------------------------------------- evidence

def test_evidence_describe_uses_the_scenarios_words() -> None:
    sc = replace(scenario(), describe=lambda case, name, s, e: f"{name}[{s}:{e}]")
    ev = Evidence(sc, CASE, worker(), MODES["guard"])
    assert ev.describe("src", 1, 2) == "src[1:2]"


def test_detector_runs_say_missing_only_for_a_tool_that_could_not_run() -> None:
    result = judge_one(worker(), mode="both", sanitized=False, sanitizer_missing="not found",
                       machine=GPU_ALLOWED)
    runs = {d.detector: d for d in result.detectors}
    assert runs[GUARD] == DetectorRun(GUARD, True, "markers verified")
    assert runs[MEMCHECK].missing and not runs[MEMCHECK].ran


# ------------------------------------------------------------------------------------------------ baseline

def test_apply_baseline_changes_only_a_finding_whose_findings_are_all_accepted() -> None:
    from gpu_memsafety.judge.baseline import AcceptedFinding, Baseline
    f = Finding(GUARD, OVERWRITE, "dst", "back_guard", 1, kernel="k")
    result = CaseResult(CASE.id, "fake", "v", {}, "k", "", "guard", Outcome.FINDING, "clean", findings=[f])
    accepted = Baseline((AcceptedFinding(CASE.id, f.key(), "known"),))
    assert apply_baseline(replace(result), accepted).outcome is Outcome.EXPECTED_FINDING
    gone = replace(result, outcome=Outcome.UNEXPECTEDLY_CLEAN, findings=[])
    assert apply_baseline(gone, accepted).outcome is Outcome.UNEXPECTEDLY_CLEAN
    assert apply_baseline(replace(result), None).outcome is Outcome.FINDING


def test_a_baseline_never_hides_a_known_bug_that_vanished() -> None:
    """FINDING because of an unexpected overwrite while the expected overread went missing: the baseline accepts
    the overwrite, and the case is 'unexpectedly clean', not 'expected finding'."""
    from gpu_memsafety.judge.baseline import AcceptedFinding, Baseline
    sc = scenario(Expectation((READ_PAST_SRC,)))
    res = worker(guard={"src": [{"region": "back_guard", "start": N, "end": N + 1}]})
    result = judge_one(res, mode="both", sc=sc, run=memcheck_run())
    assert result.outcome is Outcome.FINDING and result.details["missing_expected"]
    [f] = result.findings
    accepted = Baseline((AcceptedFinding(CASE.id, f.key(), "known overwrite"),))
    judged = apply_baseline(result, accepted)
    assert judged.outcome is Outcome.UNEXPECTEDLY_CLEAN and "expected but not seen" in judged.message


def test_a_baseline_entry_matches_field_by_field_not_as_a_string() -> None:
    """A kernel name with ':' cannot make an entry for one buffer accept a finding on another."""
    from gpu_memsafety.judge.baseline import AcceptedFinding
    real = Finding(GUARD, OVERWRITE, "b:c", "past_end", 1, kernel="a")
    lookalike = Finding(GUARD, OVERWRITE, "c", "past_end", 1, kernel="a:b")
    assert real.key() == lookalike.key()
    entry = AcceptedFinding(CASE.id, lookalike.key(), "accepted")
    assert entry.accepts(CASE.id, lookalike) and not entry.accepts(CASE.id, real)
    for other in (replace(lookalike, detector=MEMCHECK), replace(lookalike, kind=OVERREAD),
                  replace(lookalike, region="before_start"), replace(lookalike, buffer="d")):
        assert not entry.accepts(CASE.id, other)
    assert not entry.accepts("other[case]", lookalike)


# ------------------------------------------------------------------- guard page: where the page really starts

def paged(name: str, addr: int, nbytes: int = N) -> dict[str, Any]:
    """A buffer on a guard page: its alignment tail, then the unmapped page (the mapping ends there)."""
    lay = L.plan(nbytes, placement=L.GUARD_PAGE_BACK)
    return {"name": name, "tensor_addr": addr, "nbytes": nbytes, "alloc_base": addr - lay.front,
            "alloc_size": lay.total, "layout": lay.to_json(), "backend": "vmm"}


TWO_PAGED = [paged("src", BASE), paged("dst", BASE + (1 << 21))]


def test_a_guard_page_read_in_the_alignment_tail_is_not_applicable_saying_why() -> None:
    """H200 regression (planted_oob[overread-*-n4000-x1] under guard_page): the 1-byte read at 4000 lands in the
    96-byte tail before the page at 4096. Not clean, not a failure: not visible to guard_page here."""
    sc = scenario(Expectation((ExpectedFinding(OVERREAD, "src", (MEMCHECK, POISON, GUARD_PAGE), bytes=1,
                                               ranges=((N, N + 1),)),)))
    res = worker(buffers=TWO_PAGED, watched=["src", "dst"], guard={"src": [], "dst": []})
    result = judge_one(res, mode="guard_page", sc=sc, sanitized=False)
    assert result.outcome is Outcome.NOT_APPLICABLE, result.message
    assert "alignment tail" in result.message and "not visible to guard_page" in result.message, result.message


def test_a_guard_page_fault_names_the_one_buffer_that_sat_on_a_guard_page() -> None:
    res = worker(J.FAULT, message="illegal address", buffers=[paged("src", BASE), buffer("dst", BASE + (1 << 21))],
                 watched=["src", "dst"])
    sc = scenario(Expectation((ExpectedFinding(OVERWRITE, "src", (GUARD, GUARD_PAGE), ranges=((N, N + 200),)),)))
    result = judge_one(res, mode="guard_page", sc=sc, sanitized=False)
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message     # a fault matches a write as well as a read
    [f] = result.findings
    assert f.buffer == "src" and f.detail("candidates") == "src" and f.detail("access") == "read or write"
    both = judge_one(worker(J.FAULT, message="illegal address", buffers=TWO_PAGED, watched=["src", "dst"]),
                     mode="guard_page", sc=sc, sanitized=False)
    # without reruns two candidates are not told apart: named in the finding, matching neither (a non-pass)
    assert both.findings[0].buffer == "src|dst" and "not told apart" in both.findings[0].note
    assert both.outcome is Outcome.FINDING and both.findings[0].detail("named") == "no", both.message


# ------------------------------------------------------------- guard page: naming the buffer and the side by reruns

def test_a_guard_page_fault_with_two_candidates_is_probed_and_names_the_buffer_past_its_end() -> None:
    """The judge hands the fault to the runner with its reruns to plan (judged.probe), then names the buffer whose
    solo rerun faults and tells its side from the other page; every rerun and its time stays in the details."""
    def kernel(probe: pageprobe.Probe) -> str:      # faults only when src's back page is there
        return J.FAULT if ("src", pageprobe.BACK) in probe.pages else J.OK
    res = worker(J.FAULT, message="illegal address", buffers=TWO_PAGED, watched=["dst"])
    past = scenario(Expectation((ExpectedFinding(OVERREAD, "src", (GUARD_PAGE,), region="past_end"),)))
    result = judge_one(res, mode="guard_page", sc=past, sanitized=False, reruns=kernel)
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    [f] = result.findings
    assert (f.buffer, f.region, f.detail("named"), f.detail("candidates")) == ("src", "past_end", "yes", "dst|src")
    reruns = result.details["guard_page_reruns"]
    assert [(r["pages"], r["status"]) for r in reruns["runs"]] == [
        ("dst back page", "ok"), ("src back page", "fault"), ("src front page", "ok")]
    assert result.duration_s >= 3 * 1.5 and reruns["seconds"] == 4.5
    # the same fault against an expectation on the other side is a failure, not a match
    before = scenario(Expectation((ExpectedFinding(OVERREAD, "src", (GUARD_PAGE,), region="before_start"),)))
    wrong = judge_one(res, mode="guard_page", sc=before, sanitized=False, reruns=kernel)
    assert wrong.outcome is Outcome.FINDING and wrong.failed, wrong.message


def test_a_fault_only_with_the_front_page_is_before_start() -> None:
    front = [dict(b, layout=L.plan(N, placement=L.GUARD_PAGE_FRONT).to_json()) for b in TWO_PAGED]
    res = worker(J.FAULT, message="illegal address", buffers=front, watched=[])
    sc = scenario(Expectation((ExpectedFinding(OVERREAD, "dst", (GUARD_PAGE,), region="before_start"),)))
    result = judge_one(res, mode="guard_page", sc=sc, sanitized=False,
                       reruns=lambda p: J.FAULT if ("dst", pageprobe.FRONT) in p.pages else J.OK)
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    assert [(f.buffer, f.region) for f in result.findings] == [("dst", "before_start")]


def test_a_guard_page_fault_in_a_mode_or_scenario_without_the_guard_page_is_not_probed() -> None:
    res = worker(J.FAULT, message="illegal address", buffers=TWO_PAGED, watched=["src", "dst"])
    judge = Batches(Standing(MODES["guard"], GPU))
    assert judge.reruns(scenario(), res) is None
    assert Batches(Standing(MODES["guard_page"], GPU)).reruns(scenario(detectors=(GUARD,)), res) is None
    assert Batches(Standing(MODES["guard_page"], GPU)).reruns(scenario(), worker(buffers=TWO_PAGED)) is None   # no fault
    assert Batches(Standing(MODES["guard_page"], GPU)).reruns(scenario(), res) is not None


def test_poison_evidence_that_varies_with_nothing_poisoned_is_unresolved_never_clean_or_an_overread() -> None:
    unstable = {"regions": [{"buffer": "src", "region": "past_end", "outputs": {"out": {"elements": 3, "of": 8}},
                             "unstable": {"out": {"elements": 2, "of": 8}}, "ranges": [], "pattern": 255,
                             "bounds": None}], "runs": 4}
    result = judge_one(worker(poison=unstable), mode="poison", sanitized=False,
                       sc=scenario(detectors=(GUARD, POISON)))
    assert result.outcome is Outcome.UNRESOLVED and result.failed, result.message
    assert "differ between identical runs" in result.message and not result.findings


def test_poison_that_varies_because_of_an_expected_wild_access_is_not_applicable_and_the_rest_is_judged() -> None:
    """H200 run 34, MODE=values, the two triton#8327 batched cases: unresolved, "results differ between identical runs
    with nothing poisoned". Their expected scratchpad writes reach memory of no buffer of ours, which is exactly
    what makes identical runs differ: poison cannot judge them, not applicable there; guard's evidence stands."""
    unstable = {"regions": [{"buffer": "src", "region": "before_start", "outputs": {"y": {"elements": 62795, "of": 65536}},
                             "unstable": {"y": {"elements": 61221, "of": 65536}}, "ranges": [], "pattern": 255,
                             "bounds": None}], "runs": 4}
    wild = Expectation((ExpectedFinding(OVERWRITE, UNATTRIBUTED, upstream="triton-lang/triton#8327"),))
    result = judge_one(worker(poison=unstable), mode="poison", sanitized=False, sc=scenario(wild, detectors=(GUARD, POISON)))
    assert result.outcome is Outcome.NOT_APPLICABLE and not result.failed, result.message
    [run] = [d for d in result.detectors if d.detector == POISON]
    assert not run.ran and "differ between identical runs" in run.detail and "triton#8327" in run.detail
    assert "poison ran and poison cannot judge this case" in result.message     # the headline says why, not "did not run"
    assert not result.findings
    # guard's evidence still counts: a guard finding on such a case is judged, never hidden by poison's
    dirty = {"src": [{"region": "back_guard", "start": N, "end": N + 4}]}
    result = judge_one(worker(poison=unstable, guard=dirty), mode="poison", sanitized=False,
                       sc=scenario(wild, detectors=(GUARD, POISON)))
    assert result.outcome is Outcome.FINDING and result.failed, result.message
    # with no wild expectation the same evidence stays unresolved
    plain = Expectation((ExpectedFinding(OVERREAD, "src", region=PAST_END),))
    result = judge_one(worker(poison=unstable), mode="poison", sanitized=False, sc=scenario(plain, detectors=(GUARD, POISON)))
    assert result.outcome is Outcome.UNRESOLVED, result.message


def test_a_run_the_fence_stopped_over_stray_accesses_is_unresolved_unless_a_wild_access_is_expected() -> None:
    """Under Triton's interpreter a run without the trace ends with StrayAccess instead of touching memory the process
    does not own (detectors/trace.fence): unresolved, the message what the accesses were, no traceback, the detectors
    that did not run saying why. A case expected to reach memory of no buffer of ours (triton#8327's scratchpad) is not
    judged by such a mode, as for a fault; memcheck or the trace places the access."""
    stray = worker(J.ERROR, message="StrayAccess: k wrote 4 B (first: 4 B at 16..19 of kernel argument `ws`, past its "
                                    "end (a 16 B tensor)): ...", traceback="Traceback ...")
    result = judge_one(stray, mode="poison", sanitized=False, machine=CPU, sc=scenario(detectors=(GUARD, POISON)))
    assert result.outcome is Outcome.UNRESOLVED and result.message.startswith("StrayAccess: k wrote 4 B")
    assert "Traceback" not in result.message
    [run] = [d for d in result.detectors if d.detector == POISON]
    assert not run.ran and "fence stopped the run" in run.detail
    wild = Expectation((ExpectedFinding(OVERWRITE, UNATTRIBUTED, upstream="triton-lang/triton#8327"),))
    result = judge_one(stray, mode="poison", sanitized=False, machine=CPU, sc=scenario(wild, detectors=(GUARD, POISON)))
    assert result.outcome is Outcome.NOT_APPLICABLE and "not judged here" in result.message, result.message


def test_a_run_the_fence_stopped_over_stray_accesses_judges_nothing_and_says_the_trace_does() -> None:
    """A run without the trace that the interpreter's fence stopped (StrayAccess) is unresolved, and each detector
    that did not run says the trace judges those accesses: the trace's unit explains the error (Unit.explains),
    the judge names no detector. Another error is an error, with its traceback."""
    from gpu_memsafety.detectors.registry import UNITS, explained
    stray = "StrayAccess: k wrote 16 B (first: address 0x7f00, near no tensor argument)"
    result = judge_one(worker(J.ERROR, message=stray, traceback="tb", poison=None), mode="poison", machine=CPU,
                       sanitized=False)
    assert result.outcome is Outcome.UNRESOLVED and result.message == stray
    assert [d.detail for d in result.detectors if not d.ran] == [
        "not judged: the interpreter's fence stopped the run over stray accesses (below), which the trace judges"]
    assert [name for name, unit in UNITS.items() if unit.explains(stray)] == ["trace"]
    other = judge_one(worker(J.ERROR, message="ValueError: bad", traceback="tb", poison=None), mode="poison",
                      machine=CPU, sanitized=False)
    assert other.outcome is Outcome.UNRESOLVED and other.message == "ValueError: bad\ntb"
    assert not explained("ValueError: bad")


def test_a_detectors_batch_rule_decides_which_cases_rerun_alone_and_the_engine_names_none(monkeypatch) -> None:
    """The engine's batches ask every unit's batch rule (Unit.batch_rule) and name no detector: a rule of a
    synthetic unit that sends the case to run alone is obeyed; one that gives up on it makes it unresolved with
    the rule's words and details; without a rule the case is judged on its run."""
    from gpu_memsafety.detectors.base import Sorting
    from gpu_memsafety.detectors.registry import UNITS

    class Rule:
        def __init__(self, sorting: Sorting) -> None:
            self.sorting = sorting

        def sort(self, items: Any, batch: Any, placed: Any) -> Sorting:
            return self.sorting

        def gpu_alone(self, case_id: str) -> bool:
            return case_id == CASE.id

        def evidence(self, case_id: str, found: list, single: bool) -> tuple[list, dict]:
            return found, {"rule_saw": case_id}

    sc = scenario()
    guard = UNITS[GUARD]
    batch = lambda: Batch(results={0: worker()}, sanitizer=memcheck_run())   # noqa: E731
    monkeypatch.setattr(guard, "batch_rule", lambda: Rule(Sorting(alone=[CASE.id], note="the rule says so")),
                        raising=False)
    batches = Batches(Standing(MODES["memcheck"], GPU))
    judged = batches.judge_batch([(sc, CASE)], batch())
    assert judged.done == [] and judged.rest == [0] and judged.alone == [CASE.id] and "the rule says so" in judged.note
    assert batches.wants_gpu_alone([(sc, CASE)])
    monkeypatch.setattr(guard, "batch_rule", lambda: Rule(Sorting(given_up={CASE.id: ("gave up", {"why": 1})})),
                        raising=False)
    [result] = Batches(Standing(MODES["memcheck"], GPU)).judge_batch([(sc, CASE)], batch()).done
    assert result.outcome is Outcome.UNRESOLVED and result.message == "gave up" and result.details["why"] == 1
    monkeypatch.setattr(guard, "batch_rule", lambda: Rule(Sorting()), raising=False)
    [result] = Batches(Standing(MODES["memcheck"], GPU)).judge_batch([(sc, CASE)], batch()).done
    assert result.outcome is Outcome.CLEAN and result.details["rule_saw"] == CASE.id
