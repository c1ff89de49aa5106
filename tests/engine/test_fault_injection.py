"""Fault injection (issue 9): every way a case can go wrong ends as a visible outcome, never as a pass.

These tests run real worker processes on the CPU through gpu_memsafety.engine.runner.Runner. The cases come from a
tests-only scenario, `fake_faults` (tests/helpers/fake_kernels/fake_scenarios/fake_faults.py), whose adapter
(tests/helpers/fake_kernels/fake_adapters.py) hangs, kills its own process, raises, or refuses on purpose. The worker
imports a case's scenario from the file it was found in (harness/gpu_memsafety/scenario/registry.py), as it does for a user's
scenario directory; the adapter module is found through the PYTHONPATH these tests give the worker. compute-sanitizer is replaced by small Python scripts generated here that
run the worker (or not) and then fail in the ways a real sanitizer fails.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import pytest

from gpu_memsafety.util import fsutil
from gpu_memsafety.scenario import registry
from gpu_memsafety.model import MEMCHECK, CaseResult, Outcome
from gpu_memsafety.util.paths import CHECKOUT as ROOT
from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
from gpu_memsafety.sanitizer.tool import SanitizerLookup
from gpu_memsafety.scenario.definition import Case, Scenario

from fake_sanitizer import PARSE_ARGS, install
from repo_paths import FAKE_DIR, SANITIZER_DATA

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

# Scenario deadline 10 s x 0.2 = 2 s per case; worker start-up (torch import) is allowed 120 s x 0.2 = 24 s,
# and under the (fake) sanitizer 300 s x 0.2 = 60 s.
TIMEOUT_SCALE = 0.2


def _load_fake_scenario() -> Scenario:
    """The definition, loaded from its file as a scenario path would load it; the worker imports the same file."""
    return registry.load_source(registry.Source(str(FAKE_DIR / "fake_scenarios" / "fake_faults.py"), None, "tests"))


FAKE = _load_fake_scenario()
CASES = {case.id: case for case in FAKE.build()}


def item(variant: str, label: str = "n4000") -> tuple[Scenario, Case]:
    return FAKE, CASES[f"fake_faults[{variant}-{label}]"]


def by_id(results: Sequence[CaseResult]) -> dict[str, CaseResult]:
    return {r.case_id: r for r in results}


def make_runner(workdir: Path, mode: str = "guard", **options: Any) -> Runner:
    return Runner(RunOptions(mode=MODES[mode], workdir=workdir, timeout_scale=TIMEOUT_SCALE, **options))


def _process_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"   # a zombie has been killed, only not reaped yet


# ----------------------------------------------------------------------- (a), (c), (d): one batch, two processes

@pytest.fixture(scope="module")
def hang_batch(worker_env: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """raise, unsupported, hang, then two cases after the hang: the hang is killed, the rest rerun."""
    workdir = tmp_path_factory.mktemp("hang-batch")
    runner = make_runner(workdir)
    items = [item("raise"), item("unsupported"), item("hang"), item("clean"), item("overwrite")]
    results = runner.run(items)
    return {"results": by_id(results), "order": [r.case_id for r in results], "workdir": workdir,
            "pid_dir": worker_env}


def test_every_case_of_the_batch_gets_exactly_one_result(hang_batch: dict[str, Any]) -> None:
    assert sorted(hang_batch["order"]) == sorted(
        f"fake_faults[{v}-n4000]" for v in ("raise", "unsupported", "hang", "clean", "overwrite"))


def test_hanging_kernel_is_a_timeout_at_the_scaled_deadline(hang_batch: dict[str, Any]) -> None:
    result = hang_batch["results"]["fake_faults[hang-n4000]"]
    assert result.outcome is Outcome.TIMEOUT
    assert result.failed
    assert "no result after 2 s" in result.message
    started = float((hang_batch["workdir"] / "batch-001" / "2.started").read_text())
    judged = (hang_batch["workdir"] / "batch-001" / "argv.json").stat().st_mtime   # written once the worker is gone
    assert 2.0 <= judged - started < 6.0, "killed at the scaled 2 s deadline, not the scenario's 10 s"
    # where it hung: the worker's Python stack, dumped on the runner's SIGUSR1 before the kill, quoted in the message
    assert "most recent call first" in result.message and "in _hang" in result.message, result.message


def test_hung_workers_whole_process_group_is_killed(hang_batch: dict[str, Any]) -> None:
    pid = int((hang_batch["pid_dir"] / "sleeper.pid").read_text())
    deadline = time.monotonic() + 5
    while not _process_gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _process_gone(pid), f"the hung adapter's child {pid} survived the kill"


def test_cases_after_the_hang_run_in_a_fresh_process_and_pass(hang_batch: dict[str, Any]) -> None:
    results = hang_batch["results"]
    assert results["fake_faults[clean-n4000]"].outcome is Outcome.CLEAN
    overwrite = results["fake_faults[overwrite-n4000]"]
    assert overwrite.outcome is Outcome.EXPECTED_FINDING
    assert [(f.region, f.bytes, f.detail("zone")) for f in overwrite.findings] == [("past_end", 1, "back_guard")]
    batches = sorted(p.name for p in hang_batch["workdir"].iterdir())
    assert batches == ["batch-001", "batch-002"]


def test_adapter_exception_is_unresolved_with_its_traceback(hang_batch: dict[str, Any]) -> None:
    result = hang_batch["results"]["fake_faults[raise-n4000]"]
    assert result.outcome is Outcome.UNRESOLVED
    assert "RuntimeError: planted adapter failure" in result.message
    assert "Traceback (most recent call last)" in result.message
    assert "fake_adapters.py" in result.message


def test_adapter_unsupported_is_unsupported_with_its_message(hang_batch: dict[str, Any]) -> None:
    result = hang_batch["results"]["fake_faults[unsupported-n4000]"]
    assert result.outcome is Outcome.UNSUPPORTED
    assert not result.failed
    assert "needs a flux capacitor; found none" in result.message


# ------------------------------------------------------------------------------------- (b) killed worker process

@pytest.fixture(scope="module")
def kill_batch(worker_env: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("kill-batch")
    items = [item("clean"), item("kill"), item("clean", "n64"), item("overwrite")]
    return {"results": by_id(make_runner(workdir).run(items)), "workdir": workdir}


def test_worker_killed_by_sigkill_is_crashed_for_that_case(kill_batch: dict[str, Any]) -> None:
    result = kill_batch["results"]["fake_faults[kill-n4000]"]
    assert result.outcome is Outcome.CRASHED
    assert f"worker exited with code {-signal.SIGKILL}" in result.message


def test_case_before_the_kill_keeps_its_result(kill_batch: dict[str, Any]) -> None:
    assert kill_batch["results"]["fake_faults[clean-n4000]"].outcome is Outcome.CLEAN


def test_cases_after_the_kill_rerun_in_a_fresh_process_and_pass(kill_batch: dict[str, Any]) -> None:
    results = kill_batch["results"]
    assert results["fake_faults[clean-n64]"].outcome is Outcome.CLEAN
    assert results["fake_faults[overwrite-n4000]"].outcome is Outcome.EXPECTED_FINDING
    first = json.loads((kill_batch["workdir"] / "batch-001" / "0.json").read_text())
    rerun = json.loads((kill_batch["workdir"] / "batch-002" / "0.json").read_text())
    assert rerun["case_id"] == "fake_faults[clean-n64]"
    assert rerun["pid"] != first["pid"]


# ----------------------------------------------------------------------------------- (e) compute-sanitizer missing

SEARCHED = ["/nowhere/bin/compute-sanitizer", "/usr/local/cuda-99.9/bin/compute-sanitizer"]


def test_memcheck_without_a_sanitizer_on_a_gpu_machine_could_not_run_naming_the_paths_searched(tmp_path: Path) -> None:
    runner = make_runner(tmp_path, "memcheck", gpu_available=True,
                         sanitizer=SanitizerLookup(found=None, searched=list(SEARCHED)))
    results = runner.run([item("clean"), item("overread")])
    assert [r.outcome for r in results] == [Outcome.COULD_NOT_RUN, Outcome.COULD_NOT_RUN]
    assert all(r.failed for r in results)
    for result in results:
        assert "compute-sanitizer not found" in result.message and "--gpu-memsafety-allow-unsupported" in result.message
        assert all(path in result.message for path in SEARCHED)
    assert not any(tmp_path.iterdir()), "no worker may start when the only detector cannot run"


def test_memcheck_without_a_sanitizer_is_a_skip_with_allow_unsupported(tmp_path: Path) -> None:
    runner = make_runner(tmp_path, "memcheck", gpu_available=True, allow_unsupported=True,
                         sanitizer=SanitizerLookup(found=None, searched=list(SEARCHED)))
    [result] = runner.run([item("clean")])
    assert result.outcome is Outcome.UNSUPPORTED and not result.failed
    assert SEARCHED[0] in result.message


def test_memcheck_on_a_machine_without_a_gpu_is_a_skip_with_the_reason(tmp_path: Path) -> None:
    [result] = make_runner(tmp_path, "memcheck", gpu_available=False).run([item("clean")])
    assert result.outcome is Outcome.UNSUPPORTED and "needs a CUDA GPU; found none" in result.message


def test_both_mode_without_a_sanitizer_is_never_clean_under_guard(worker_env: Path, tmp_path: Path) -> None:
    """The guard part runs and is clean, but memcheck could not: on a GPU machine that fails, naming both."""
    runner = make_runner(tmp_path, "both", gpu_available=True,
                         sanitizer=SanitizerLookup(found=None, searched=list(SEARCHED)))
    clean, overread = runner.run([item("clean"), item("overread")])
    for result in (clean, overread):
        assert result.outcome is Outcome.COULD_NOT_RUN, f"{result.outcome.label}: {result.message}"
        memcheck = next(d for d in result.detectors if d.detector == MEMCHECK)
        assert not memcheck.ran and memcheck.missing and SEARCHED[0] in memcheck.detail
    assert "memcheck could not run" in clean.message and "what ran: clean under guard" in clean.message


def test_both_mode_without_a_sanitizer_allowed_keeps_what_guard_found(worker_env: Path, tmp_path: Path) -> None:
    """With --gpu-memsafety-allow-unsupported the guard's verdict stands (the finding it saw, expected), partial:
    memcheck is named as not run, as a staged mode does."""
    from gpu_memsafety.model import GUARD
    runner = make_runner(tmp_path, "both", gpu_available=True, allow_unsupported=True,
                         sanitizer=SanitizerLookup(found=None, searched=list(SEARCHED)))
    [result] = runner.run([item("overwrite")])
    assert result.outcome is Outcome.EXPECTED_FINDING and not result.failed, result.message
    assert [(f.detector, f.region) for f in result.findings] == [(GUARD, "past_end")]
    assert "memcheck" in result.details["partial"]


# ------------------------------------------------------------------------------------ (f) a misbehaving sanitizer

FAKE_SANITIZER = '''\
import json, subprocess, sys
from pathlib import Path

BEHAVIOR = {behavior!r}
''' + PARSE_ARGS + '''

def say(line):
    print("========= " + line, flush=True)


HEAD = '<?xml version="1.0" encoding="utf-8"?>\\n<ComputeSanitizerOutput>\\n'
API_RECORD = ("<record><kind>Api</kind><level>Error</level><what><text>Program hit cudaErrorLaunchFailure</text>"
              "<api>cudaLaunchKernel</api><result>719</result></what></record>\\n")
BOMB = ('<?xml version="1.0"?>\\n<!DOCTYPE bomb [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>\\n'
        "<ComputeSanitizerOutput>&c;</ComputeSanitizerOutput>\\n")


def read_record(name, extra):
    job = json.loads(Path(target[-1]).read_text())
    result = json.loads(Path(job["out_dir"], "0.json").read_text())
    buf = next(b for b in result["buffers"] if b["name"] == name)
    address = buf["tensor_addr"] + buf["nbytes"] + extra
    return ("<record><kind>Precise</kind><level>Error</level><who><threadIdx><x>3</x><y>0</y><z>0</z></threadIdx>"
            "<blockIdx><x>1</x><y>0</y><z>0</z></blockIdx></who><what>"
            "<text>Invalid __global__ read of size 4 bytes is out of bounds</text><space>__global__</space>"
            "<size>4</size><direction>read</direction><error>out of bounds</error>"
            f"<address>{{address:#x}}</address></what><where><func>fake_copy</func><path>/tmp/fake.py</path>"
            "<line>7</line><pc>0x100</pc></where></record>\\n")


def stray_records():
    """A 4-byte write at dst + FAKE_FAR_OFFSET (-2,147,450,881) for every far_write case that ran: outside every
    buffer."""
    import os
    far = int(os.environ.get("FAKE_FAR_OFFSET", -2147450881))
    job = json.loads(Path(target[-1]).read_text())
    out = []
    for index, case in enumerate(job["cases"]):
        result_path = Path(job["out_dir"], f"{{index}}.json")
        if case["variant"] != "far_write" or not result_path.exists():
            continue
        dst = next(b for b in json.loads(result_path.read_text())["buffers"] if b["name"] == "dst")
        out.append("<record><kind>Precise</kind><level>Error</level><what>"
                   "<text>Invalid __global__ write of size 4 bytes is out of bounds</text><space>__global__</space>"
                   "<size>4</size><direction>write</direction><error>out of bounds</error>"
                   f"<address>{{dst['tensor_addr'] + far:#x}}</address></what><where><func>far_k</func>"
                   "<path>/tmp/far.py</path><line>3</line><pc>0x80</pc></where></record>\\n")
    return "".join(out)


say("COMPUTE-SANITIZER")
if BEHAVIOR == "crash":
    say("Error: Internal Sanitizer Error: the fake sanitizer crashed on purpose")
    sys.exit(255)
code = subprocess.call(target)
if BEHAVIOR == "never_attached":
    say("Error: Target application terminated before first instrumented API call")
    say("Error: couldn't find exit code.")
    sys.exit(255)
if BEHAVIOR == "overread":
    xml_path.write_text(HEAD + read_record("src", 0) + "</ComputeSanitizerOutput>\\n")
elif BEHAVIOR == "truncated":
    xml_path.write_text(HEAD + read_record("src", 0)[:150])
elif BEHAVIOR == "truncated_after_api_record":
    xml_path.write_text(HEAD + API_RECORD + "<record><kind>Api</kind><level>Err")
elif BEHAVIOR == "hostile":
    xml_path.write_text(BOMB)
elif BEHAVIOR == "empty":
    xml_path.write_text("")
elif BEHAVIOR == "stray":
    strays = stray_records()
    xml_path.write_text(HEAD + strays + "</ComputeSanitizerOutput>\\n")
errors = 1 if BEHAVIOR in ("overread", "truncated_after_api_record") or (BEHAVIOR == "stray" and strays) else 0
say(f"ERROR SUMMARY: {{errors}} error{{'' if errors == 1 else 's'}}")
sys.exit(86 if errors else code)
'''


def fake_sanitizer(tmp_path: Path, behavior: str) -> SanitizerLookup:
    return install(tmp_path, "fake-compute-sanitizer", FAKE_SANITIZER.format(behavior=behavior))


def run_sanitized(tmp_path: Path, behavior: str, variant: str = "clean", mode: str = "memcheck") -> CaseResult:
    runner = make_runner(tmp_path / "runs", mode, gpu_available=True, sanitizer=fake_sanitizer(tmp_path, behavior))
    [result] = runner.run([item(variant)])
    return result


def test_fake_sanitizer_round_trip_attributes_its_record(worker_env: Path, tmp_path: Path) -> None:
    """Control for the failure cases below: the fake sanitizer does reach the runner's XML path."""
    result = run_sanitized(tmp_path, "overread", "overread")
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    [finding] = result.findings
    assert (finding.detector, finding.kind, finding.buffer, finding.region) == (MEMCHECK, "overread", "src", "past_end")
    assert [(r.start, r.end) for r in finding.ranges] == [(4000, 4004)]
    assert (finding.first_thread, finding.first_block, finding.source) == ("(3,0,0)", "(1,0,0)", "fake.py:7")
    assert next(d for d in result.detectors if d.detector == MEMCHECK).ran


def _position_independent(executable: str) -> bool:
    """The ELF header's e_type: ET_DYN (3), a position-independent executable, whose heap is mapped high."""
    with open(os.path.realpath(executable), "rb") as f:
        return int.from_bytes(f.read(18)[16:18], "little") == 3


def test_a_stray_record_is_traced_to_its_case_and_no_other_case_of_the_batch_is_blamed(
        worker_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 19: a far write (a wrapped int32 offset) from one case of a batch maps to no buffer. The case whose
    kernel the record names reruns in a process of its own; the write is that case's, named from its nearest
    buffer; the clean cases batched with it are judged on the batch's run and stay clean (issue 26: before, every
    case of the batch reran, one process each).

    The write is 2,147,450,881 B below dst, an address a GPU buffer always has below it. The CPU stand-in's dst
    comes from the worker's heap, which a python built without PIE (Debian's and Ubuntu's, the H200 image's) maps
    just above its binary, below 2 GiB: there the address would be negative, so the write is 2^31 + 8 B above dst's
    start instead, a signed int32 that wrapped the other way."""
    position_independent = _position_independent(sys.executable)
    offset = -2_147_450_881 if position_independent else (1 << 31) + 8
    monkeypatch.setenv("FAKE_FAR_OFFSET", str(offset))
    runner = make_runner(tmp_path / "runs", "memcheck", gpu_available=True, sanitizer=fake_sanitizer(tmp_path, "stray"))
    results = by_id(runner.run([item("clean"), item("far_write"), item("clean", "n64")]))
    far = results["fake_faults[far_write-n4000]"]
    assert far.outcome is Outcome.EXPECTED_FINDING, far.message
    [finding] = far.findings
    region, where = (("before_start", "2,147,450,881 B before dst") if position_independent
                     else ("past_end", f"{(1 << 31) + 8 - 4000 + 1:,} B after the end of dst"))
    assert (finding.kind, finding.buffer, finding.region, finding.bytes) == ("overwrite", "dst", region, 4)
    assert where in finding.note, finding.note
    assert finding.detail("access") == "write" and "out of bounds" in finding.detail("sanitizer")
    for clean in ("fake_faults[clean-n4000]", "fake_faults[clean-n64]"):
        assert results[clean].outcome is Outcome.CLEAN, results[clean].message
        assert results[clean].findings == []
    batches = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert batches == ["batch-001", "batch-002"]   # the batch, then the far write's case alone
    note = (tmp_path / "runs" / "batch-001" / "rerun-alone.txt").read_text()
    assert "map to no buffer and name the kernel of 1 of the 3 cases: rerunning fake_faults[far_write-n4000] one" in note


def test_a_host_side_refusal_is_judged_without_a_launch_and_a_silent_no_launch_is_not(worker_env: Path,
                                                                                       tmp_path: Path) -> None:
    """A refusal contract case (the real sglang kernel refusing the other version's layout) launches nothing by
    design: memcheck judges it from its (empty) records. A case that launches nothing without saying why stays
    unresolved: memcheck checked nothing."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    refused = run_sanitized(tmp_path / "a", "stray", "refused", mode="both")   # "stray": a valid XML, no record here
    assert refused.outcome is Outcome.CLEAN, refused.message
    silent = run_sanitized(tmp_path / "b", "stray", "no_launch", mode="both")
    assert silent.outcome is Outcome.UNRESOLVED and "never launched" in silent.message


# The exit grace under test, made short; startup and case deadlines keep their real values. At timeout_scale 0.05
# (the earlier way) the worker's startup window was 6 s and a case's deadline 0.5 s, which a loaded 2-core machine
# overran now and then (a `timeout` instead of `clean`): a verdict that changed between identical runs.
SHORT_GRACE_S = 6.0


def test_a_process_that_never_ends_after_its_last_result_is_killed_with_its_stacks(worker_env: Path, tmp_path: Path,
                                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Unbounded until now: a worker (or its sanitizer) hung in its exit held its xdist worker for good. It gets
    EXIT_GRACE_S after its last result, then its stacks are asked for and it is killed. Unsanitized, the results it
    wrote stand; its process record says it was killed."""
    from gpu_memsafety.engine import runner as runner_module
    monkeypatch.setattr(runner_module, "EXIT_GRACE_S", SHORT_GRACE_S)
    runner = Runner(RunOptions(mode=MODES["guard"], workdir=tmp_path / "runs"))
    start = time.monotonic()
    results = by_id(runner.run([item("clean"), item("stuck_exit")]))
    took = time.monotonic() - start
    assert results["fake_faults[stuck_exit-n4000]"].outcome is Outcome.CLEAN
    assert results["fake_faults[clean-n4000]"].outcome is Outcome.CLEAN
    assert SHORT_GRACE_S <= took < SHORT_GRACE_S + 60, took
    [process] = runner.processes
    assert process["exit_hung_s"] == SHORT_GRACE_S and process["results"] == 2
    assert "most recent call first" in (tmp_path / "runs" / "batch-001" / "worker.log").read_text()


def test_a_sanitized_process_that_never_ends_is_unresolved_never_judged_on_its_cut_off_report(
        worker_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the sanitizer, the report of a process killed in its exit is cut off with it: the case is unresolved,
    saying why, never clean on a report that may lack its records."""
    from gpu_memsafety.engine import runner as runner_module
    monkeypatch.setattr(runner_module, "EXIT_GRACE_S", SHORT_GRACE_S)
    runner = Runner(RunOptions(mode=MODES["memcheck"], workdir=tmp_path / "runs", gpu_available=True,
                               sanitizer=fake_sanitizer(tmp_path, "stray")))
    [result] = runner.run([item("stuck_exit")])
    assert result.outcome is Outcome.UNRESOLVED, f"{result.outcome.label}: {result.message}"
    assert "did not end within 6 s after its last case and was killed" in result.message


@pytest.mark.parametrize("behavior, mode, reason", [
    ("crash", "memcheck", "Internal Sanitizer Error: the fake sanitizer crashed on purpose"),
    ("truncated", "both", "sanitizer XML incomplete"),
    ("hostile", "memcheck", "DOCTYPE"),
    ("nothing", "both", "wrote no XML"),
    ("empty", "memcheck", "empty XML file"),
])
def test_broken_sanitizer_run_is_unresolved_with_the_reason(worker_env: Path, tmp_path: Path, behavior: str,
                                                            mode: str, reason: str) -> None:
    result = run_sanitized(tmp_path, behavior, mode=mode)
    assert result.outcome is Outcome.UNRESOLVED, f"{result.outcome.label}: {result.message}"
    assert reason in result.message


def test_a_sanitizer_that_never_attaches_could_not_run_naming_what_was_needed(worker_env: Path, tmp_path: Path) -> None:
    """compute-sanitizer that never instruments the worker ("terminated before first instrumented API call") did not
    start its detector: `could not run` (a failure on a GPU machine), naming the tool that was needed and the one
    found; --allow-unsupported accepts it as a skip. Not `unresolved`: nothing it ran is in doubt, it never ran."""
    result = run_sanitized(tmp_path, "never_attached", mode="memcheck")
    assert result.outcome is Outcome.COULD_NOT_RUN, f"{result.outcome.label}: {result.message}"
    assert "needed memcheck attached to the worker process" in result.message
    assert "fake-compute-sanitizer), which never attached: " in result.message and "first instrumented" in result.message
    memcheck = next(d for d in result.detectors if d.detector == MEMCHECK)
    assert not memcheck.ran and memcheck.missing
    runner = make_runner(tmp_path / "allowed", "memcheck", gpu_available=True, allow_unsupported=True,
                         sanitizer=fake_sanitizer(tmp_path, "never_attached"))
    [allowed] = runner.run([item("clean")])
    assert allowed.outcome is Outcome.UNSUPPORTED and "never attached" in allowed.message


def test_in_mode_both_a_sanitizer_that_never_attaches_keeps_what_the_markers_saw(worker_env: Path, tmp_path: Path) -> None:
    """The markers ran: what they said stays in the message (rule 6, as for a missing compute-sanitizer, whose
    guard-finding case test_judge covers)."""
    clean = run_sanitized(tmp_path, "never_attached", "clean", mode="both")
    assert clean.outcome is Outcome.COULD_NOT_RUN and "(what ran: clean under guard)" in clean.message, clean.message
    assert "memcheck could not run: needed memcheck attached" in clean.message
    assert [d.detector for d in clean.detectors if d.ran] == ["guard"]


def test_truncated_xml_with_only_non_access_records_is_not_clean(worker_env: Path, tmp_path: Path) -> None:
    """A file cut mid-record after one complete (API) record lost whatever came next: never 'clean'."""
    result = run_sanitized(tmp_path, "truncated_after_api_record")
    assert result.outcome is not Outcome.CLEAN, result.message
    assert result.outcome is Outcome.UNRESOLVED
    assert "incomplete" in result.message


# ------------------------------------------------------------------------------------------- (g) atomic writes

def test_failed_replace_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "0.json"
    fsutil.atomic_write_json(target, {"version": "old"})

    def refuse(src: str, dst: str) -> None:
        raise OSError("simulated crash between write and rename")

    monkeypatch.setattr(fsutil.os, "replace", refuse)
    with pytest.raises(OSError, match="simulated crash"):
        fsutil.atomic_write_json(target, {"version": "new", "pad": "x" * 100_000})
    assert json.loads(target.read_text()) == {"version": "old"}
    assert [p.name for p in tmp_path.iterdir()] == ["0.json"]


WRITER = """
import sys
from gpu_memsafety.util.fsutil import atomic_write_json
i = 0
while True:
    atomic_write_json(sys.argv[1], {"i": i, "pad": "x" * (200_000 + i % 4096)})
    i += 1
"""


def _next_file(target: Path, after: int | None, proc: subprocess.Popen, deadline_s: float = 120.0) -> int:
    """Wait until the writer has renamed a file other than inode `after` into place; its inode."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and proc.poll() is None:
        if target.exists() and target.stat().st_ino != after:
            return target.stat().st_ino
        time.sleep(0.005)
    raise AssertionError(f"the writer renamed no new file into place within {deadline_s:.0f} s (exit {proc.poll()})")


def test_writer_killed_mid_write_always_leaves_a_complete_file(tmp_path: Path) -> None:
    """SIGKILL lands in the writer's loop (after its second file is in place: past its start-up however slow a
    loaded machine makes it), at a different moment each round: the file a reader opens is always a whole one."""
    target = tmp_path / "result.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    seen = set()
    for round_ in range(4):
        before = target.stat().st_ino if target.exists() else None
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], env=env, cwd=str(ROOT))
        try:
            first = _next_file(target, before, proc)        # this writer's first file is in place
            _next_file(target, first, proc)                 # and its loop goes on: the kill lands mid-loop
            time.sleep(0.01 * round_)                       # at a different moment each time
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        data = json.loads(target.read_text())   # the only file a reader ever opens
        assert len(data["pad"]) == 200_000 + data["i"] % 4096
        seen.add(data["i"])
    leftovers = [p.name for p in tmp_path.iterdir() if p != target]
    assert all(name.startswith(".result.json.") and name.endswith(".tmp") for name in leftovers)
    assert min(seen) >= 1, "a kill landed before the writer's loop had written its second file"


# ------------------------------------------------------------------------------------- (h) merge of bad files

@pytest.mark.parametrize("content, words", [
    (b'{"schema": "gpu-memsafety-report/1", "cases": [', "not valid JSON"),
    (b'{"name": "some other tool", "results": []}', "no 'schema' field"),
    (b"\xff\xfe\x00garbage", "not UTF-8"),
])
def test_merge_of_a_corrupt_or_foreign_file_exits_2_with_a_clear_message(tmp_path: Path, content: bytes,
                                                                         words: str) -> None:
    bad = tmp_path / "report.json"
    bad.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "gpu_memsafety", "merge", str(bad), "-o", str(tmp_path / "out")],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert str(bad) in proc.stderr and words in proc.stderr
    assert not (tmp_path / "out").exists()


def test_merge_without_output_option_is_a_usage_error_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "gpu_memsafety", "merge", str(tmp_path / "a.json")],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "-o/--output" in proc.stderr


def test_fake_sanitizer_source_is_valid_python() -> None:
    """A typo in the generated script would make every sanitizer test above pass for the wrong reason."""
    compile(FAKE_SANITIZER.format(behavior="overread"), "fake-compute-sanitizer", "exec")


# ---------------------------------------------------------------------------------- (g) out of memory

@pytest.fixture(scope="module")
def oom_batch(worker_env: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("oom-batch")
    items = [item("oom"), item("clean"), item("overwrite")]
    return {"results": by_id(make_runner(workdir).run(items)), "workdir": workdir}


def test_out_of_memory_is_a_failing_unresolved_result_never_a_skip(oom_batch: dict[str, Any]) -> None:
    result = oom_batch["results"]["fake_faults[oom-n4000]"]
    assert result.outcome is Outcome.UNRESOLVED and result.failed
    assert result.message.startswith("out of memory") and "nothing was checked" in result.message
    assert "tried to allocate" in result.message.lower()       # the allocator's own words follow


def test_cases_after_an_out_of_memory_run_in_the_same_process_and_pass(oom_batch: dict[str, Any]) -> None:
    results = oom_batch["results"]
    assert results["fake_faults[clean-n4000]"].outcome is Outcome.CLEAN
    assert results["fake_faults[overwrite-n4000]"].outcome is Outcome.EXPECTED_FINDING
    assert not (oom_batch["workdir"] / "batch-002").exists()     # no relaunch: the process went on


# ---------------------------------------------------------------------------- (h) a pytest-xdist worker killed

def test_killed_xdist_worker_reports_its_case_as_crashed_and_the_others_run(worker_env: Path, tmp_path: Path) -> None:
    """The adapter SIGKILLs the pytest-xdist worker above the harness worker (once, as the OOM killer
    would); xdist restarts the worker; the report has every case once, the killed one crashed."""
    fake_file = FAKE_DIR / "fake_scenarios" / "fake_faults.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTEST_XDIST"))}  # not the outer run's
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), str(FAKE_DIR)]), FAKE_FAULTS_DIR=str(worker_env))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(fake_file), "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile",
         "--gpu-memsafety-batch-size", "1", "--gpu-memsafety-mode", "guard", "--gpu-memsafety-report-dir", str(tmp_path / "r"),
         "-k", "kill_pytest_worker or clean or overwrite"],
        cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (worker_env / "pytest-worker-killed").exists()
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    outcomes = {r["id"]: r["outcome"] for r in doc["cases"]}
    assert outcomes == {"fake_faults[kill_pytest_worker-n4000]": "crashed", "fake_faults[clean-n4000]": "clean",
                        "fake_faults[clean-n64]": "clean", "fake_faults[overwrite-n4000]": "expected finding"}
    crashed = next(r for r in doc["cases"] if r["outcome"] == "crashed")
    assert "the pytest worker running this case crashed" in crashed["message"]
    assert "crashed while running" in crashed["message"]      # xdist's own words


# --------------------------------------------------------------------- (i) on the GPU: real OOM, real illegal address

def _cuda_available() -> bool:
    import torch
    return torch.cuda.is_available()


NO_GPU = "needs a CUDA GPU; found none (torch.cuda.is_available() is False)"


@pytest.fixture(scope="module")
def gpu_batch(worker_env: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """On the GPU, one batch: clean, a 4 TiB allocation, clean, a Triton store 1 TiB out, clean, overwrite."""
    workdir = tmp_path_factory.mktemp("gpu-batch")
    runner = Runner(RunOptions(mode=MODES["guard"], workdir=workdir, gpu_available=True))
    items = [item("clean"), item("oom"), item("clean", "n64"), item("illegal_address"), item("overwrite")]
    return {"results": by_id(runner.run(items)), "workdir": workdir}


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason=NO_GPU)
def test_gpu_out_of_memory_is_reported_with_the_memory_left_and_the_batch_goes_on(gpu_batch: dict[str, Any]) -> None:
    results = gpu_batch["results"]
    oom = results["fake_faults[oom-n4000]"]
    assert oom.outcome is Outcome.UNRESOLVED and oom.message.startswith("out of memory (")
    assert "GiB free after releasing the case" in oom.message
    assert "out of memory" in oom.message.split("\n", 1)[1].lower()     # the allocator's own message follows
    assert results["fake_faults[clean-n64]"].outcome is Outcome.CLEAN
    first = [json.loads(p.read_text()) for p in sorted((gpu_batch["workdir"] / "batch-001").glob("[0-9].json"))]
    assert len({r["pid"] for r in first}) == 1 and len(first) >= 3     # oom and the case after it: one process


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason=NO_GPU)
def test_gpu_illegal_address_is_crashed_and_the_rest_rerun_in_a_fresh_process(gpu_batch: dict[str, Any]) -> None:
    results = gpu_batch["results"]
    bad = results["fake_faults[illegal_address-n4000]"]
    assert bad.outcome is Outcome.CRASHED and "CUDA context lost" in bad.message
    assert "illegal memory access" in bad.message
    assert results["fake_faults[overwrite-n4000]"].outcome is Outcome.EXPECTED_FINDING
    rerun = json.loads((gpu_batch["workdir"] / "batch-002" / "0.json").read_text())
    assert rerun["case_id"] == "fake_faults[overwrite-n4000]" and rerun["device"].startswith("cuda")


# ------------------------------------------------------- (j) the target aborts after memcheck ended its kernel

def test_target_aborting_after_a_complete_sanitized_run_is_not_a_sanitizer_failure() -> None:
    """Real H200 output: memcheck ends the mxfp4 kernel; a destructor's cudaFree then aborts the worker. The
    sanitizer's records are complete, so the case is judged from them (not 'memcheck did not run')."""
    from gpu_memsafety.sanitizer.records import read_sanitizer
    data = SANITIZER_DATA
    run = read_sanitizer("memcheck", (data / "memcheck-mxfp4-overread-target-aborted.txt").read_text(),
                         (data / "memcheck-mxfp4-overread-target-aborted.xml").read_bytes(), exit_code=86,
                         timed_out=False)
    assert run.problem == "" and run.ran
    assert sum(r.category == "memory_access" for r in run.records) == 32


def test_sanitizer_that_could_not_start_its_target_is_still_a_failure() -> None:
    from gpu_memsafety.sanitizer.records import read_sanitizer
    data = SANITIZER_DATA
    run = read_sanitizer("memcheck", (data / "cpu-wheel-13.5.25-no-gpu.txt").read_text(), None, exit_code=255,
                         timed_out=False)
    assert not run.ran and "internal error" in run.problem


# ------------------------------------------------------------------------------ repro --mode stress, not run

def test_repro_stress_on_a_case_that_cannot_run_says_so_never_crashed_in_0_runs(worker_env: Path, tmp_path: Path) -> None:
    from gpu_memsafety.cli.repro import stress, stress_answer
    options = RunOptions(mode=MODES["stress"], workdir=tmp_path / "unsupported", timeout_scale=TIMEOUT_SCALE)
    stats = stress(options, *item("unsupported"), runs=20)
    assert (stats["runs"], stats["crashes"], stats["outcome"]) == (0, 0, "unsupported")
    text = stress_answer("fake_faults[unsupported-n4000]", stats, 1.0)
    assert "fake_faults[unsupported-n4000]: unsupported: " in text and "needs a flux capacitor" in text
    assert "crashed in" not in text


def test_repro_stress_counts_the_runs_of_a_case_that_runs(worker_env: Path, tmp_path: Path) -> None:
    from gpu_memsafety.cli.repro import stress, stress_answer
    options = RunOptions(mode=MODES["stress"], workdir=tmp_path / "clean", timeout_scale=TIMEOUT_SCALE)
    stats = stress(options, *item("clean"), runs=3)
    assert (stats["runs"], stats["crashes"]) == (3, 0)
    assert "crashed in 0 of 3 runs" in stress_answer("fake_faults[clean-n4000]", stats, 1.0)


def test_a_sanitized_case_that_hangs_costs_minutes_not_hours() -> None:
    """Session 8 on the H200: a case that hung under memcheck in MODE=both held its worker past 250 s towards a
    deadline of 240 s x 30 = 2 hours. Every scenario's sanitized deadline (memcheck, both, the complete mode's
    first stage) is now at most a few minutes, and still far above its slowest case seen (30 s, a cold build)."""
    from gpu_memsafety.scenario import registry
    for mode in ("memcheck", "both"):
        for scenario in registry.all_scenarios().values():
            limit = MODES[mode].deadline(scenario.timeout_s, sanitized=True)
            assert 60.0 <= limit <= 600.0, (mode, scenario.name, limit)


@pytest.mark.parametrize("how", ["", "sleep", "libc", "unknown"])
def test_a_worker_leaves_after_a_fault_with_context_lost_however_it_is_told_to(how: str) -> None:
    """The lost-memcheck-record experiment's switch (GPU_MEMSAFETY_FAULT_EXIT): every way out exits CONTEXT_LOST, and
    none runs Python's finalisation (where torch's tensor destructors would meet the dead context)."""
    from gpu_memsafety.engine.worker import CONTEXT_LOST
    code = ("import atexit, sys; atexit.register(lambda: print('python finalised', flush=True)); "
            "from gpu_memsafety.engine.worker import leave_after_fault; "
            f"leave_after_fault({how!r})")
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == CONTEXT_LOST, done.stderr
    assert "python finalised" not in done.stdout
    if how == "sleep":
        assert time.monotonic() - t0 >= 1.0
