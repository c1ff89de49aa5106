"""Sanitizer records that no buffer address places (issue 26 items 3 and 5), with small fakes: the helpers of
tests/judge/test_judge.py build scenarios, worker results and records.

- shared memory: a memcheck record whose space is shared is a finding of region `shared` on the case whose kernel
  made it, naming the kernel, the access, its size and its line; never `unattributed`, never a buffer of ours;
- a lost record: memcheck ended a kernel (cudaErrorLaunchFailure) and wrote no record of the access: the case is
  rerun alone in its process, then alone on the GPU, judged on the first rerun that keeps the record (which keeps
  the lost runs in its details), and unresolved when the record is lost in all three; never passed or failed on a
  lost record.
"""
from __future__ import annotations

from dataclasses import replace

from gpu_memsafety import job as J
from gpu_memsafety.detectors.modes import MODES
from gpu_memsafety.engine.batches import Batch, Batches
from gpu_memsafety.judge.rules import Standing
from gpu_memsafety.model import MEMCHECK, OVERREAD, SHARED, SHARED_MEMORY, Expectation, ExpectedFinding, Outcome
from gpu_memsafety.sanitizer.parse import MEMORY_ACCESS, SanitizerRecord
from gpu_memsafety.sanitizer.records import lost_record, place_sanitizer_records
from gpu_memsafety.scenario.definition import Case

from tests.judge.test_judge import CASE, GPU, LAUNCH_FAILED, N, PROBE, READ_PAST_SRC, access, memcheck_run, scenario, worker
from repo_paths import SANITIZER_DATA


def shared_read(kernel: str = "k", size: int = 4) -> SanitizerRecord:
    return SanitizerRecord(MEMORY_ACCESS, f"Invalid __shared__ read of size {size} bytes", kind="Precise",
                           direction="read", space="shared", size=size, address=0x7E8, kernel=kernel,
                           file="/src/shared.cu", line=22, thread=(249, 0, 0), block=(3, 0, 0))


# -------------------------------------------------------------------------------------------- shared memory

def test_a_shared_memory_record_is_a_finding_of_region_shared_on_the_case_whose_kernel_made_it() -> None:
    mine, other = Case("fake", "v", {"n": N}, "mine"), Case("fake", "v", {"n": N}, "other")
    sc = scenario()
    results = {0: replace(worker(kernel="planted_shared_overread"), case_id=mine.id),
               1: replace(worker(kernel="another_kernel"), case_id=other.id)}
    placed = place_sanitizer_records([(sc, mine), (sc, other)], results, memcheck_run(shared_read("planted_shared_overread")))
    assert placed.strays == [] and placed.alone == [] and list(placed.findings) == [mine.id]
    [f] = placed.findings[mine.id]
    assert (f.detector, f.kind, f.buffer, f.region, f.bytes) == (MEMCHECK, OVERREAD, SHARED, SHARED_MEMORY, 4)
    assert (f.kernel, f.source, f.first_thread, f.first_block) == ("planted_shared_overread", "shared.cu:22",
                                                                    "(249,0,0)", "(3,0,0)")
    assert f.detail("access") == "read" and f.detail("space") == "shared"
    # H200 run 43: window offset 0x7e8 is byte 1000 of the block's own shared memory, past the 1 KiB reserved on sm_90
    assert [(r.start, r.end) for r in f.ranges] == [(1000, 1004)]
    assert f.ranges[0].logical == "shared offset 1,000 (window offset 0x7e8, past the 1,024 B the driver reserves)"


def test_a_shared_record_of_a_case_that_died_in_the_launch_goes_to_it_by_the_scenarios_kernel_label() -> None:
    sc = scenario(Expectation((ExpectedFinding(OVERREAD, SHARED, region=SHARED_MEMORY),)))   # its label is "k"
    died = replace(worker(J.FAULT, message="unspecified launch failure"), kernel="")
    judged = Batches(Standing(MODES["memcheck"], GPU)).judge_batch([(sc, CASE)], Batch(
        results={0: died}, sanitizer=memcheck_run(shared_read("k"), LAUNCH_FAILED)))
    [result] = judged.done
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    assert [f.region for f in result.findings] == [SHARED_MEMORY]
    assert result.details["sanitizer_records"]["explained_records"] or result.details["sanitizer_records"]["api_errors"]


# ------------------------------------------------------------------------------------------ a lost record

def died() -> J.WorkerResult:
    return replace(worker(J.FAULT, message="worker exited with code 86 while running this case"), kernel="")


def test_a_kernel_failure_with_no_access_record_is_a_lost_record() -> None:
    assert lost_record(memcheck_run(LAUNCH_FAILED), set(), [LAUNCH_FAILED])
    assert not lost_record(memcheck_run(LAUNCH_FAILED), {"k"}, [LAUNCH_FAILED])        # a placed access explains it
    placed = place_sanitizer_records([(scenario(), CASE)], {0: died()}, memcheck_run(PROBE, LAUNCH_FAILED))
    assert placed.lost == [CASE.id]
    fine = place_sanitizer_records([(scenario(), CASE)], {0: worker()}, memcheck_run(LAUNCH_FAILED))
    assert fine.lost == []                                  # the case did not die in the launch: a finding, as before


def test_a_lost_record_reruns_the_case_alone_and_the_rerun_is_what_it_is_judged_on() -> None:
    sc = scenario(Expectation((READ_PAST_SRC,)))
    judge = Batches(Standing(MODES["memcheck"], GPU))
    first = judge.judge_batch([(sc, CASE)], Batch(results={0: died()}, sanitizer=memcheck_run(PROBE, LAUNCH_FAILED),
                                                  returncode=86, log="terminate called after throwing"))
    assert first.done == [] and first.rest == [0] and first.alone == [CASE.id]
    assert "lost the access record" in first.note
    rerun = judge.judge_batch([(sc, CASE)], Batch(results={0: worker()}, sanitizer=memcheck_run(access())))
    [result] = rerun.done
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    [loss] = result.details["memcheck_lost_record"]
    assert loss["exit_code"] == 86 and loss["api_errors"][-1]["error"] == "cudaErrorLaunchFailure"
    assert "terminate called" in loss["log_tail"]


def test_a_record_lost_in_every_run_up_to_one_alone_on_the_gpu_is_unresolved_never_a_pass_or_a_finding() -> None:
    """Lost in the batch, then alone in its process (run 38: at a load of 15 on 16 cores), then the third run has
    the GPU to itself (the judge asks for it: wants_gpu_alone); lost there too, the case is unresolved, and says
    how alone its last run was."""
    sc = scenario(Expectation((READ_PAST_SRC,)))
    judge = Batches(Standing(MODES["memcheck"], GPU))
    wanted = []
    for attempt in range(3):
        wanted.append(judge.wants_gpu_alone([(sc, CASE)]))
        use = {"gpu": "GPU-0", "exclusive": True, "alone": True, "waited_s": 12.5} if wanted[-1] else None
        judged = judge.judge_batch([(sc, CASE)], Batch(results={0: died()}, sanitizer=memcheck_run(LAUNCH_FAILED),
                                                       gpu_use=use))
        assert (judged.done == []) is (attempt < 2)
    assert wanted == [False, False, True]
    [result] = judged.done
    assert result.outcome is Outcome.UNRESOLVED and result.findings == []
    assert "in 3 runs, the last one alone on the GPU" in result.message and "cudaErrorLaunchFailure" in result.message
    assert len(result.details["memcheck_lost_record"]) == 3
    assert result.details["memcheck_lost_record"][-1]["gpu_use"]["alone"] is True
    assert not judge.wants_gpu_alone([(sc, CASE), (sc, CASE)])      # only ever a run of one case


def test_a_last_run_that_could_not_have_the_gpu_alone_says_so() -> None:
    sc = scenario(Expectation((READ_PAST_SRC,)))
    judge = Batches(Standing(MODES["memcheck"], GPU))
    for attempt in range(3):
        use = {"gpu": "GPU-0", "exclusive": True, "alone": False, "waited_s": 600.0} if attempt == 2 else None
        judged = judge.judge_batch([(sc, CASE)], Batch(results={0: died()}, sanitizer=memcheck_run(LAUNCH_FAILED),
                                                       gpu_use=use))
    [result] = judged.done
    assert "still sharing it after 600 s" in result.message and "alone on the GPU" not in result.message


def test_a_record_found_in_the_run_alone_on_the_gpu_is_judged_on_that_run() -> None:
    sc = scenario(Expectation((READ_PAST_SRC,)))
    judge = Batches(Standing(MODES["memcheck"], GPU))
    for attempt in range(2):
        judge.judge_batch([(sc, CASE)], Batch(results={0: died()}, sanitizer=memcheck_run(LAUNCH_FAILED)))
    assert judge.wants_gpu_alone([(sc, CASE)])
    judged = judge.judge_batch([(sc, CASE)], Batch(results={0: worker()}, sanitizer=memcheck_run(access()),
                                                   gpu_use={"gpu": "GPU-0", "exclusive": True, "alone": True,
                                                            "waited_s": 3.0}))
    [result] = judged.done
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    assert len(result.details["memcheck_lost_record"]) == 2


# ------------------------------------------------------------------------------ bulk tensor copies (TMA)

def test_check_tensor_ops_where_the_sanitizer_has_it_and_the_detector_line_says_when_it_does_not() -> None:
    from pathlib import Path

    from gpu_memsafety.detectors.base import Evidence, sanitizer_ran
    from gpu_memsafety.engine.runner import _caveat
    from gpu_memsafety.sanitizer.tool import SanitizerInfo, memcheck_command, tensor_ops
    data = SANITIZER_DATA
    assert "--check-tensor-ops" in (data / "help-2026.4.0.txt").read_text()
    assert "--check-tensor-ops" not in (data / "help-2025.3.1.txt").read_text()
    old, new = SanitizerInfo("/x/compute-sanitizer", "2025.3.1", "PATH"), SanitizerInfo("/y/compute-sanitizer", "2026.4.0", "wheel")
    argv = ["python", "-m", "gpu_memsafety.engine.worker", "job.json"]
    assert "--check-tensor-ops" not in memcheck_command(old, xml_path="/tmp/s.xml", target_argv=argv)
    command = memcheck_command(new, xml_path="/tmp/s.xml", target_argv=argv)
    assert command[command.index("--check-tensor-ops") + 1] == "yes" and command[-4:] == argv
    assert "--check-tensor-ops" not in memcheck_command(new, tool="racecheck", xml_path="/tmp/s.xml", target_argv=argv)
    assert "not checked" in tensor_ops(old)[1] and "2026.4" in tensor_ops(old)[1]
    assert "not checked: --check-tensor-ops needs compute-sanitizer 2026.4" in _caveat(old, "memcheck")
    assert _caveat(new, "memcheck") == "bulk tensor copies (cp.async.bulk.tensor) checked"
    assert _caveat(new, "racecheck") == ""
    run = replace(memcheck_run(), caveat=_caveat(old, "memcheck"))
    line = sanitizer_ran(Evidence(scenario(), CASE, worker(), MODES["memcheck"], run), MEMCHECK)
    assert line.ran and line.detail.startswith("compute-sanitizer 2025.3.1 (fake); bulk tensor copies")
