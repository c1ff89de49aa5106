"""The interpreter's trace (gpu_memsafety.detectors.trace): every address of an interpreted Triton kernel against
the arena, exact bytes outside logical bytes; end to end on a read whose value never matters (poison blind)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from gpu_memsafety.detectors import trace as T
from gpu_memsafety.detectors.base import Evidence
from gpu_memsafety.detectors.modes import MODES
from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, OVERWRITE, POISON, TRACE, UNINIT, ExpectedFinding
from gpu_memsafety.placement import layout as L

from tests.judge.test_judge import CASE, scenario, worker
from repo_paths import DATA as TEST_DATA

DATA = TEST_DATA / "trace"
ROWS = L.Rows(rows=4, row_bytes=20, row_stride=32, used_rows=3)


def arena(*bufs: tuple[str, int, L.GuardLayout]) -> SimpleNamespace:
    """Buffers (name, tensor address, layout) laid out as the arena does: the tensor `front` bytes into its
    allocation."""
    return SimpleNamespace(buffers={n: SimpleNamespace(name=n, tensor_addr=a, alloc_base=a - lay.front,
                                                       alloc_size=lay.front + lay.nbytes + lay.back, layout=lay)
                                    for n, a, lay in bufs})


def test_outside_counts_guards_row_padding_and_unused_rows_never_logical_bytes() -> None:
    lay = L.plan(ROWS.nbytes, guard=64, rows=ROWS)
    off = np.array([-1, 0, 19, 20, 31, 32, 51, 52, 96, 127, 128, 200])
    assert T._outside(off, lay).tolist() == [-1, 20, 31, 52, 96, 127, 128, 200]


def test_runs_of_consecutive_offsets() -> None:
    assert T._runs(np.array([-4, -3, -2, -1, 8, 9, 20])) == [(-4, 0), (8, 10), (20, 21)]
    assert T._runs(np.array([], dtype=np.int64)) == []


def test_a_masked_access_counts_only_where_the_mask_lets_it_through_and_only_in_the_arena() -> None:
    lay = L.plan(4000, guard=1024)
    tr = T.Tracer(arena(("src", 1 << 20, lay)))
    base = 1 << 20
    addrs = np.array([base + 3996, base + 4000, base + 4004, base - 4, (1 << 30)], dtype=np.uint64)
    stray = tr.record(T.READ, addrs, np.array([True, True, False, True, True]), 4)   # 4004 masked off
    assert stray.tolist() == [False, False, False, False, True]      # 1 << 30: in no allocation, near no argument
    assert tr.record(T.WRITE, np.array([base + 4000], dtype=np.uint64), None, 2) is None
    ev = tr.evidence()
    assert ev["accesses"] == 5
    assert ev["strays"] == {T.READ: [{"start": 1 << 30, "end": (1 << 30) + 4,
                                      "logical": "address 0x40000000, near no tensor argument"}]}
    assert ev["outside"]["src"][T.READ] == [{"region": "before_start", "start": -4, "end": 0, "logical": ""},
                                            {"region": "past_end", "start": 4000, "end": 4004, "logical": ""}]
    assert ev["outside"]["src"][T.WRITE] == [{"region": "past_end", "start": 4000, "end": 4002, "logical": ""}]


def test_a_buffer_allocated_during_the_run_is_seen() -> None:
    ar = arena()
    tr = T.Tracer(ar)
    tr.record(T.READ, np.array([5000], dtype=np.uint64), None, 4)        # no buffer yet: nothing
    lay = L.plan(ROWS.nbytes, guard=64, rows=ROWS)
    ar.buffers["scale"] = arena(("scale", 4096, lay)).buffers["scale"]
    tr.record(T.READ, np.array([4096 + 20, 4096 + 96], dtype=np.uint64), None, 4)
    runs = tr.evidence()["outside"]["scale"][T.READ]
    assert [(r["start"], r["end"], L.region_class(r["region"])) for r in runs] == [(20, 24, "row_padding"),
                                                                                   (96, 100, "unused_row")]


def test_findings_are_exact_per_direction_and_region() -> None:
    lay = L.plan(4000, guard=1024)
    buf = {"name": "src", "tensor_addr": 1 << 20, "nbytes": 4000, "alloc_base": (1 << 20) - 1024,
           "alloc_size": 6048, "backend": "torch", "layout": lay.to_json(), "dtype": "float32", "itemsize": 4,
           "shape": [1000], "stride": [1]}
    evidence = {TRACE: {"accesses": 10, "launches": 1, "outside": {"src": {
        T.READ: [{"region": "past_end", "start": 4000, "end": 4004, "logical": ""}],
        T.WRITE: [{"region": "before_start", "start": -8, "end": 0, "logical": ""}]}}}}
    res = replace(worker(buffers=[buf]), evidence=evidence)
    ev = Evidence(scenario(), CASE, res, MODES["both"])
    run = T.DETECTOR.ran(ev)
    assert run.ran and "10 accesses of 1 interpreted Triton launches" in run.detail
    got = sorted((f.detector, f.kind, f.region, f.bytes, f.exact, f.detail("access")) for f in T.DETECTOR.findings(ev))
    assert got == [(TRACE, OVERREAD, "past_end", 4, True, "read"), (TRACE, OVERWRITE, "before_start", 8, True, "write")]


def test_on_a_gpu_it_did_not_run_and_is_not_missing() -> None:
    ev = Evidence(scenario(), CASE, worker(), MODES["both"])
    run = T.DETECTOR.ran(ev)
    assert not run.ran and not run.missing and "no Triton interpreter" in run.detail


def test_without_the_interpreter_nothing_is_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with T.tracing(arena()) as tracer:
        assert tracer is None


def test_an_expectation_for_memcheck_the_markers_or_poison_is_also_the_traces() -> None:
    assert TRACE in ExpectedFinding(OVERREAD, "x", (MEMCHECK,), region="past_end").detectors
    assert TRACE in ExpectedFinding(OVERWRITE, "x", (GUARD,), region="row_padding").detectors
    assert TRACE in ExpectedFinding(OVERREAD, "x", (POISON,), region="unused_row").detectors
    assert TRACE in ExpectedFinding(OVERREAD, "x").detectors                           # SIGHT
    assert TRACE not in ExpectedFinding(OVERREAD, "__shared__", (MEMCHECK,), region="shared").detectors
    assert TRACE not in ExpectedFinding(OVERREAD, "x", (MEMCHECK,), region="past_end",
                                        blind=((TRACE, "the read is made by a torch op"),)).detectors


@pytest.fixture(scope="module")
def data_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, dict[str, dict]]:
    """tests/data/trace in the default mode on a CPU, one pytest run: (the process, its report's cases by id)."""
    tmp = tmp_path_factory.mktemp("trace")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--gpu-memsafety-scenario-path",
                           str(DATA), "--gpu-memsafety-report-dir", str(tmp / "r")], cwd=str(tmp), env=env,
                          capture_output=True, text=True, timeout=600)
    return proc, {c["id"]: c for c in json.loads((tmp / "r" / "report.json").read_text())["cases"]}


@pytest.mark.e2e
def test_a_read_whose_value_never_matters_is_found_by_the_trace_alone(data_run) -> None:
    """Lane n-1 of the buggy kernel loads ids[n] and ignores it (held-out hx_f's class). In the default mode on a
    CPU, poison could not see it (nothing changes); the trace names its 4 bytes, and poison, which would only
    repeat what the trace saw, is left out. The fixed twin is clean, the trace having run on it."""
    proc, cases = data_run
    buggy, fixed = cases["seg_end[buggy-n36]"], cases["seg_end[fixed-n36]"]
    assert [(f["detector"], f["kind"], f["buffer"], f["region"], f["bytes"], f["exact"], f["ranges"][0]["start"])
            for f in buggy["findings"]] == [(TRACE, OVERREAD, "ids", "past_end", 4, True, 144)], proc.stdout[-3000:]
    assert buggy["outcome"] == "finding" and fixed["outcome"] == "clean" and fixed["findings"] == []
    for case in (buggy, fixed):
        ran = {d["detector"]: d["ran"] for d in case["detectors"]}
        assert ran[TRACE] and ran[UNINIT] and not ran[POISON] and not ran[MEMCHECK]
        poison = next(d for d in case["detectors"] if d["detector"] == POISON)
        assert not poison["missing"] and "the interpreter's trace checked every access" in poison["detail"]
    assert proc.returncode == 1          # the buggy case's finding fails the run


@pytest.mark.e2e
def test_a_write_past_the_launchers_own_workspace_is_found_and_a_far_one_touches_nothing(data_run) -> None:
    """The adapter's workspace is torch.empty, no context buffer: one split too many writes 4 B past it. The trace
    names the argument and the bytes. A write 2^40 B away is found the same way. In neither does any run touch that
    memory: the traced run masks the lanes off, and poison's and uninit's runs (untraced) are stopped by the fence
    with StrayAccess, a stage that decides nothing here because the trace's stage reports the accesses."""
    proc, cases = data_run
    over, wild, fixed = (cases[f"split_total[{v}-n64]"] for v in ("ws_overrun", "wild", "ws_fixed"))
    assert [(f["detector"], f["kind"], f["buffer"], f["bytes"], f["ranges"][0]["start"]) for f in over["findings"]] == [
        (TRACE, OVERWRITE, "unattributed", 4, 16)], proc.stdout[-3000:]
    assert "kernel argument `ws`, past its end" in over["findings"][0]["ranges"][0]["logical"]
    assert over["outcome"] == "finding" and fixed["outcome"] == "clean" and fixed["findings"] == []
    assert [(f["detector"], f["buffer"], f["bytes"]) for f in wild["findings"]] == [(TRACE, "unattributed", 16)]
    assert "near no tensor argument" in wild["findings"][0]["ranges"][0]["logical"]
    assert wild["outcome"] == "finding"
    for case in (over, wild):
        values = next(s for s in case["details"]["stages"] if s["mode"] == "values")
        assert values["outcome"] == "unresolved" and values["message"].startswith("StrayAccess: _split_sums wrote")
        uninit = next(d for d in case["detectors"] if d["detector"] == UNINIT)
        assert not uninit["ran"] and "fence stopped the run" in uninit["detail"]


def fake_tensor(lo: int, nbytes: int, device: str = "cpu") -> SimpleNamespace:
    """What Tracer.begin reads of a torch tensor: its storage's address and size, its device."""
    storage = SimpleNamespace(data_ptr=lambda: lo, nbytes=lambda: nbytes)
    return SimpleNamespace(untyped_storage=lambda: storage, device=SimpleNamespace(type=device))


def test_a_stray_access_is_blamed_on_the_nearest_tensor_argument_and_masked_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside every allocation the launch can reach: past the end of the adapter's own workspace (not a context
    buffer: unattributed, its text naming the argument), past an arena buffer's allocation (that buffer's past_end
    at its offset), far from everything (its address). Inside an argument or any live torch storage: not judged."""
    monkeypatch.setattr(T, "_live_storages", lambda: (np.array([1 << 34], dtype=np.uint64),
                                                      np.array([(1 << 34) + 64], dtype=np.uint64)))
    lay = L.plan(4000, guard=1024)
    src = 1 << 20
    ar = arena(("src", src, lay))
    tr = T.Tracer(ar)
    ws = 1 << 32
    alloc_end = src - lay.front + lay.front + lay.nbytes + lay.back
    tr.begin([("x", fake_tensor(src - lay.front, lay.front + lay.nbytes + lay.back)), ("ws", fake_tensor(ws, 16)),
                   ("n", 7), ("BLOCK", 16)])
    assert [(a.name, a.buffer) for a in tr._args] == [("x", "src"), ("ws", "")]
    addrs = np.array([ws + 12, ws + 16, ws - 8, alloc_end + 8, (1 << 34) + 8, 1 << 40], dtype=np.uint64)
    stray = tr.record(T.WRITE, addrs, None, 4)
    assert stray.tolist() == [False, True, True, True, False, True]
    tr.end()
    ev = tr.evidence()
    assert [(r["start"], r["end"], r["logical"]) for r in ev["strays"][T.WRITE]] == [
        (-8, -4, "4 B at -8..-5 of kernel argument `ws`, before its start (a 16 B tensor not made through the context)"),
        (16, 20, "4 B at 16..19 of kernel argument `ws`, past its end (a 16 B tensor not made through the context)"),
        (1 << 40, (1 << 40) + 4, f"address {1 << 40:#x}, near no tensor argument")]
    past = alloc_end + 8 - src
    assert ev["outside"]["src"][T.WRITE] == [{"region": "past_end", "start": past, "end": past + 4, "logical": ""}]


def test_strays_become_one_unattributed_finding_per_direction() -> None:
    evidence = {TRACE: {"accesses": 3, "launches": 1, "outside": {}, "strays": {T.WRITE: [
        {"start": 16, "end": 20, "logical": "0..3 B past the end of kernel argument `ws` (a 16 B tensor ...)"}]}}}
    ev = Evidence(scenario(), CASE, replace(worker(), evidence=evidence), MODES["both"])
    (f,) = T.DETECTOR.findings(ev)
    assert (f.detector, f.kind, f.buffer, f.region, f.bytes, f.exact) == (TRACE, OVERWRITE, "unattributed",
                                                                          "unattributed", 4, True)
    assert "kernel argument `ws`" in f.ranges[0].logical


def test_a_launch_on_device_tensors_judges_no_strays() -> None:
    """The interpreter on a GPU's tensors works on host copies: no address it touches is an argument's."""
    tr = T.Tracer(arena())
    tr.begin([("x", fake_tensor(1 << 20, 64, device="cuda"))])
    assert tr.record(T.READ, np.array([1 << 40], dtype=np.uint64), None, 4) is None
    assert "strays" not in tr.evidence()


def test_the_fence_outside_a_traced_run_says_what_it_stopped_and_forgets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch outside the trace (poison's, uninit's runs) is fenced the same way; its strays become the StrayAccess
    message, then are forgotten for the next launch. An access inside any live torch storage is no stray there."""
    monkeypatch.setattr(T, "_live_storages", lambda: (np.array([1 << 34], dtype=np.uint64),
                                                      np.array([(1 << 34) + 64], dtype=np.uint64)))
    f = T._Fence()
    f.begin([("ws", fake_tensor(1 << 32, 16))])
    assert f.record(T.READ, np.array([(1 << 34) + 8, (1 << 32) + 4], dtype=np.uint64), None, 4) is None
    assert f.record(T.WRITE, np.array([(1 << 32) + 16], dtype=np.uint64), None, 4).tolist() == [True]
    f.end()
    assert f.has_strays()
    text = f.take("k")
    assert text.startswith("k wrote 4 B (first: 4 B at 16..19 of kernel argument `ws`, past its end (a 16 B tensor))")
    assert "the interpreter's trace does" in text and not f.has_strays()


def test_without_the_interpreter_there_is_no_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert T.fence() is False


def test_a_traced_run_leaves_the_fences_strictness_as_the_worker_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker whose mode runs memcheck fences without StrayAccess (memcheck judges those accesses); the trace of
    one run must not turn that back on for the rest of the process."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(T, "_install", lambda: None)       # no interpreter patched in the test process
    monkeypatch.setattr(T, "_STRICT", [True])
    assert T.fence(strict=False) and T._STRICT == [False]
    with T.tracing(arena()) as tracer:
        assert tracer is not None
    assert T._STRICT == [False]
