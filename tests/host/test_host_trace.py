"""Issue 42 (host-suite mode on a CPU) and 41 (one flag sees everything it can): `pytest --gpu-memsafety` on a machine
without a GPU traces the suite's own Triton launches that Triton's interpreter runs (host/trace.py): each
tensor argument's storage is copied, for that launch, between guard bytes, and every load, store and atomic is
placed against it. Reads and writes past either end are found at their exact bytes and named by the kernel's
parameter and the test's variable; a wild access is a finding, never a crash; the suite's results are its own
(the copies go back into its tensors). The bare flag says memcheck and the markers did not run (a partial run).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typing import Any

import pytest

from gpu_memsafety.detectors import suite_modes as modes
from gpu_memsafety.host.evidence import Evidence
from gpu_memsafety.host.judge import suite_evidence
from gpu_memsafety.judge.decide import decide
from gpu_memsafety.judge.suite import OwnResult, TestMarker as Marker
from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, TRACE, TRACE_RACE, CaseResult, Finding, Outcome
from gpu_memsafety.scenario import registry
from repo_paths import ROOT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

def judge(ev: Evidence, own: OwnResult, marker: Any = None) -> CaseResult:
    """One test's verdict, as the host path asks for it: its evidence through the one decision."""
    return decide(suite_evidence(ev, own, marker))


CONFTEST = '''
import os
os.environ["TRITON_INTERPRET"] = "1"          # the suite's own choice, before it imports triton
'''

SUITE = '''
import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def add_reads_two_past(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n + 2)             # 2 elements past x's end: 8 B
    y = tl.load(y_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, tl.where(offs < n, x, 0.0) + y, mask=offs < n)


@triton.jit
def shift_writes_before(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs - 1, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)   # out[-1]: 4 B before


@triton.jit
def wild_write(out_ptr, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs.to(tl.float32))
    tl.store(out_ptr + far + offs, offs.to(tl.float32), mask=offs < 1)           # 4 B, 64 MiB away


@triton.jit
def far_read(x_ptr, out_ptr, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    extra = tl.load(x_ptr + far + offs, mask=offs < 1)                           # 4 B, 256 KiB past x's end
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + extra * 0)


@triton.jit
def scale_in_place(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def test_overread():
    a = torch.arange(10, dtype=torch.float32)
    b = torch.ones(10)
    c = torch.empty(10)
    add_reads_two_past[(1,)](a, b, c, 10, BLOCK=16)
    assert torch.equal(c, a + b)


def test_overwrite_before_start():
    src = torch.arange(8, dtype=torch.float32)
    dst = torch.zeros(8)
    shift_writes_before[(1,)](src, dst, 8, BLOCK=8)
    assert torch.equal(dst[:7], src[1:])


def test_wild_write_is_found_not_a_crash():
    out = torch.zeros(16)
    wild_write[(1,)](out, 1 << 24, BLOCK=16)
    assert torch.equal(out, torch.arange(16, dtype=torch.float32))


def test_far_read():
    x = torch.ones(16)
    out = torch.empty(16)
    far_read[(1,)](x, out, 16 + 65536, BLOCK=16)
    assert torch.equal(out, x)


def test_views_of_one_storage_stay_one_and_results_come_back():
    base = torch.arange(32, dtype=torch.float32)
    view = base[8:24]                                      # a view with an offset into a larger storage
    scale_in_place[(1,)](view, 16, BLOCK=16)
    expected = torch.arange(32, dtype=torch.float32)
    expected[8:24] *= 2
    assert torch.equal(base, expected)


@pytest.mark.gpu_memsafety(expect="overread", bytes=8, issue="example#1")
def test_known_overread():
    a = torch.arange(10, dtype=torch.float32)
    c = torch.empty(10)
    add_reads_two_past[(1,)](a, torch.ones(10), c, 10, BLOCK=16)


@triton.jit
def asm_copy(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(x_ptr + offs, y, mask=offs < n)     # NotImplementedError in the interpreter: the launch ends


def test_a_kernel_the_interpreter_cannot_finish():
    x = torch.zeros(8)
    with pytest.raises(Exception):
        asm_copy[(1,)](x, 8, BLOCK=8)


@triton.jit
def scaled_rows(x_ptr, out_ptr, eps, rows, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for r in range(rows):                       # r: an int32 scalar in compiled Triton, a Python int in the interpreter
        row = r.to(tl.int64) * n
        x = tl.load(x_ptr + row + offs, mask=offs < n + 1)          # one element past each row: past x's end at the last
        tl.store(out_ptr + row + offs, x * eps.to(tl.float32), mask=offs < n)   # eps: fp32 compiled, a float here


def test_a_float_argument_and_a_loop_variable_as_compiled_triton_has_them():
    x = torch.ones(3, 4)
    out = torch.empty(3, 4)
    scaled_rows[(1,)](x, out, 0.5, 3, 4, BLOCK=8)
    assert torch.equal(out, torch.full((3, 4), 0.5))


@triton.jit
def read_one_past(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs + 1, mask=offs < n))      # src[n]: 4 B past a guarded tensor


def test_a_read_past_a_guarded_fixture_tensor(gpu_memsafety_guarded):
    src = gpu_memsafety_guarded.zeros("src", (16,), torch.float32, device="cpu")
    dst = torch.empty(16)
    read_one_past[(1,)](src, dst, 16, BLOCK=16)


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def tuned_reads_a_block(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs), mask=offs < n)      # unmasked: BLOCK elements of n


def test_autotuned_overread():
    x = torch.ones(10)
    out = torch.empty(10)
    tuned_reads_a_block[(1,)](x, out, 10)
    assert torch.equal(out, x)


@triton.jit
def tuple_reads_past_the_second(ptrs, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(ptrs[0] + offs, mask=offs < n)
    b = tl.load(ptrs[1] + offs, mask=offs < n + 1)                    # 4 B past the tuple's second tensor
    tl.store(ptrs[0] + offs, a + b, mask=offs < n)


def test_a_tuple_argument_names_each_tensor():
    first, second = torch.ones(8), torch.ones(8)
    tuple_reads_past_the_second[(1,)]((first, second), 8, BLOCK=16)
    assert torch.equal(first, torch.full((8,), 2.0))


def test_no_kernel():
    assert torch.ones(3).sum() == 3
'''


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "GITHUB_", "TRITON_")) and k not in ("PYTHONPATH", registry.ENV_VAR)}
    out.update(CUDA_VISIBLE_DEVICES="", **extra)
    return out


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=str(cwd),
                          env=env(), capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("suite")
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_kernels.py").write_text(SUITE)
    return root


def cases(report_dir: Path) -> tuple[dict, dict[str, dict]]:
    doc = json.loads((report_dir / "report.json").read_text())
    return doc, {c["id"].split("::")[-1]: c for c in doc["cases"]}


def only(case: dict) -> dict:
    assert len(case["findings"]) == 1, case["findings"]
    return case["findings"][0]


def test_the_bare_flag_without_a_gpu_traces_the_suites_triton_launches(suite: Path) -> None:
    proc = run(suite, "--gpu-memsafety", "--gpu-memsafety-report-dir", "r", "-rA")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-5000:]
    doc, by = cases(suite / "r")
    read = only(by["test_overread"])
    assert (read["detector"], read["kind"], read["buffer"], read["region"], read["bytes"]) == \
        ("trace", "overread", "x_ptr", "past_end", 8), read
    assert [(r["start"], r["end"]) for r in read["ranges"]] == [(40, 48)]
    assert read["kernel"] == "add_reads_two_past"
    assert dict(read["details"])["tensor"] == "kernel argument `x_ptr` of add_reads_two_past; test variable `a`"
    write = only(by["test_overwrite_before_start"])
    assert (write["kind"], write["buffer"], write["region"], write["bytes"]) == \
        ("overwrite", "out_ptr", "before_start", 4), write
    assert [(r["start"], r["end"]) for r in write["ranges"]] == [(-4, 0)]
    far = only(by["test_far_read"])          # far past the end, whatever the heap holds there: the copy's own guard
    assert (far["kind"], far["buffer"], far["region"], far["bytes"]) == ("overread", "x_ptr", "past_end", 4), far
    assert [(r["start"], r["end"]) for r in far["ranges"]] == [(262208, 262212)]
    # the fixture's tensor is placed with its own guards (not copied): the read its markers cannot see is found
    fixture = only(by["test_a_read_past_a_guarded_fixture_tensor"])
    assert (fixture["kind"], fixture["buffer"], fixture["region"], fixture["bytes"]) == \
        ("overread", "src", "past_end", 4), fixture
    assert "gpu_memsafety_guarded tensor" in fixture["note"]
    # an autotuned kernel runs without a GPU (its configs untimed, each once): one finding, the union of their bytes
    tuned = only(by["test_autotuned_overread"])
    assert (tuned["kind"], tuned["buffer"], tuned["bytes"]) == ("overread", "x_ptr", 88), tuned
    assert [(r["start"], r["end"]) for r in tuned["ranges"]] == [(40, 128)]
    assert "autotuner cannot time configs without a GPU" in by["test_autotuned_overread"]["message"]
    pair = only(by["test_a_tuple_argument_names_each_tensor"])       # by index and by the test's own variable
    assert (pair["buffer"], pair["bytes"]) == ("ptrs[1]", 4), pair
    assert dict(pair["details"])["tensor"] == ("kernel argument `ptrs[1]` of tuple_reads_past_the_second; "
                                               "test variable `second`")
    wild = only(by["test_wild_write_is_found_not_a_crash"])
    assert (wild["kind"], wild["bytes"]) == ("overwrite", 4) and by["test_wild_write_is_found_not_a_crash"][
        "details"]["test"]["outcome"] == "passed", wild
    # the suite's own results: every test passed as without the flag (copies went back, views kept)
    assert all(c["details"]["test"]["outcome"] == "passed" for c in doc["cases"]), \
        [(k, c["details"]["test"]) for k, c in by.items()]
    assert by["test_views_of_one_storage_stay_one_and_results_come_back"]["outcome"] == "clean"
    assert by["test_known_overread"]["outcome"] == "expected finding"
    assert by["test_no_kernel"]["outcome"] == "not applicable"
    assert "ran no Triton kernel" in by["test_no_kernel"]["message"]
    # a launch the interpreter could not finish was not checked to its end: never clean
    unfinished = by["test_a_kernel_the_interpreter_cannot_finish"]
    assert unfinished["outcome"] == "not applicable", unfinished
    assert "did not finish (first: asm_copy raised NotImplementedError" in unfinished["message"]
    # .to() on a float argument and on a loop variable, as compiled Triton allows: checked to the end
    scaled = only(by["test_a_float_argument_and_a_loop_variable_as_compiled_triton_has_them"])
    assert (scaled["kind"], scaled["buffer"], scaled["bytes"], scaled["exact"]) == ("overread", "x_ptr", 4, True), scaled
    # a partial run: memcheck and the markers did not run, and every report says so
    clean = by["test_views_of_one_storage_stay_one_and_results_come_back"]
    ran = {d["detector"]: d["ran"] for d in clean["detectors"]}
    assert ran == {TRACE: True, TRACE_RACE: True, MEMCHECK: False, GUARD: False}, clean["detectors"]
    assert set(clean["details"]["partial"]) == {MEMCHECK, GUARD}
    assert doc["run"]["mode"] == "complete" and clean["mode"] == "trace"
    assert "memcheck did not run on" in out and "CHECKED NOTHING" not in out


def test_trace_by_name_under_xdist_judges_the_same(suite: Path) -> None:
    proc = run(suite, "--gpu-memsafety=trace", "-n", "2", "--gpu-memsafety-report-dir", "x")
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-5000:]
    doc, by = cases(suite / "x")
    assert {k: c["outcome"] for k, c in by.items()} == {
        "test_overread": "finding", "test_overwrite_before_start": "finding",
        "test_wild_write_is_found_not_a_crash": "finding", "test_far_read": "finding",
        "test_views_of_one_storage_stay_one_and_results_come_back": "clean",
        "test_known_overread": "expected finding", "test_no_kernel": "not applicable",
        "test_a_kernel_the_interpreter_cannot_finish": "not applicable",
        "test_a_float_argument_and_a_loop_variable_as_compiled_triton_has_them": "finding",
        "test_a_read_past_a_guarded_fixture_tensor": "finding", "test_autotuned_overread": "finding",
        "test_a_tuple_argument_names_each_tensor": "finding"}
    assert not any("partial" in c["details"] for c in doc["cases"])      # asked for by name: nothing left out


def test_markers_by_name_without_a_gpu_still_says_it_could_not_run(suite: Path) -> None:
    proc = run(suite, "--gpu-memsafety=markers", "test_kernels.py::test_overread", "--gpu-memsafety-report-dir", "m")
    doc, by = cases(suite / "m")
    assert by["test_overread"]["outcome"] == "not applicable", by["test_overread"]
    assert "markers mode could not run here" in by["test_overread"]["message"]
    assert proc.returncode == 5, proc.stdout[-3000:]


# ------------------------------------------------------------------------------------------------ the judge

def trace_finding() -> Finding:
    return Finding(detector=TRACE, kind=OVERREAD, buffer="x_ptr", region="past_end", bytes=8, count=1, arch="cpu")


def test_the_judge_in_trace_mode_needs_a_launch_and_says_what_did_not_run() -> None:
    partial = {MEMCHECK: "needs a CUDA GPU; found none", GUARD: "needs a CUDA GPU; found none"}
    nothing = judge(Evidence("t.py::a", modes.TRACE, "cpu", partial=partial), OwnResult("passed"))
    assert nothing.outcome is Outcome.NOT_APPLICABLE and "ran no Triton kernel" in nothing.message
    clean = judge(Evidence("t.py::a", modes.TRACE, "cpu", launches=2, accesses=64, partial=partial),
                  OwnResult("passed"))
    assert clean.outcome is Outcome.CLEAN and "64 accesses of 2" in clean.message
    # what every test shares (no GPU) is said once per run, in the headline, not in each test's message (issue 51)
    assert "did not run" not in clean.message and clean.details["partial"] == partial
    found = judge(Evidence("t.py::a", modes.TRACE, "cpu", launches=1, findings=[trace_finding()]),
                  OwnResult("passed"), Marker())
    assert found.outcome is Outcome.FINDING and "partial" not in found.details
    cut = judge(Evidence("t.py::a", modes.TRACE, "cpu", launches=2, accesses=9, unfinished=["k raised ValueError"]),
                OwnResult("failed"))
    assert cut.outcome is Outcome.NOT_APPLICABLE and "1 of 2 interpreted launch(es) did not finish" in cut.message
    cut_found = judge(Evidence("t.py::a", modes.TRACE, "cpu", launches=2, findings=[trace_finding()],
                               unfinished=["k raised ValueError"]), OwnResult("failed"))
    assert cut_found.outcome is Outcome.FINDING and "checked only up to there" in cut_found.message
    # an overread is checkable in trace mode: expected and not seen is unexpectedly clean
    from gpu_memsafety.judge.suite import marker_from
    gone = judge(Evidence("t.py::a", modes.TRACE, "cpu", launches=1), OwnResult("passed"),
                 marker_from({"expect": "overread"}))
    assert gone.outcome is Outcome.UNEXPECTEDLY_CLEAN


def test_the_launches_of_one_test_merge_into_one_finding_per_place() -> None:
    from gpu_memsafety.host.trace import merged
    from gpu_memsafety.model import ByteRange
    def one(lo: int, hi: int) -> Finding:
        return Finding(detector=TRACE, kind=OVERREAD, buffer="x_ptr", region="past_end", bytes=hi - lo, count=1,
                       kernel="k", ranges=(ByteRange("past_end", lo, hi),), note=f"{hi - lo} B past",
                       details=(("tensor", "kernel argument `x_ptr` of k"), ("size", "40")))
    other = Finding(detector=TRACE, kind=OVERREAD, buffer="y_ptr", region="past_end", bytes=4, count=1, kernel="k")
    out = merged([one(40, 48), one(40, 104), one(200, 204), other])
    assert len(out) == 2 and out[1] == other
    assert [(r.start, r.end) for r in out[0].ranges] == [(40, 104), (200, 204)]
    assert (out[0].bytes, out[0].count) == (68, 3) and out[0].note.startswith("68 B past")


def test_trace_evidence_round_trips() -> None:
    ev = Evidence("t.py::a", modes.TRACE, "cpu", findings=[trace_finding()], launches=3, accesses=7,
                  partial={MEMCHECK: "no GPU"}, unfinished=["k raised ValueError: x"])
    assert Evidence.from_json(json.loads(json.dumps(ev.to_json()))) == ev


def test_the_calibration_suite_is_exact_on_a_cpu(tmp_path: Path) -> None:
    """Issue 41's calibration (ci/gpu/field/calib: planted reads and writes of known width, each declaring the bytes
    the bare flag must report) on this machine: every planted access found at its bytes by the trace, the clean
    test clean."""
    calib = ROOT / "ci" / "gpu" / "field" / "calib"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--gpu-memsafety",
                           "--gpu-memsafety-report-dir", str(tmp_path / "r"), "-q"], cwd=str(calib), env=env(),
                          capture_output=True, text=True, timeout=600)
    doc, by = cases(tmp_path / "r")
    outcomes = {k: c["outcome"] for k, c in by.items()}
    clean = [k for k in outcomes if k == "test_clean" or k.endswith("_clean")]      # test_races.py's twins too
    assert len(clean) == 3 and {outcomes.pop(k) for k in clean} == {"clean"}, proc.stdout[-3000:]
    assert len(outcomes) == 10 and set(outcomes.values()) == {"expected finding"}, \
        {k: (v, by[k]["message"]) for k, v in outcomes.items() if v != "expected finding"}
    assert proc.returncode == 0, proc.stdout[-3000:]
