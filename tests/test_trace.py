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
from gpu_memsafety.engine.modes import MODES
from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, OVERWRITE, POISON, TRACE, ExpectedFinding
from gpu_memsafety.placement import layout as L

from test_judge import CASE, scenario, worker

DATA = Path(__file__).parent / "data" / "trace"
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
    tr.record(T.READ, addrs, np.array([True, True, False, True, True]), 4)   # 4004 masked off; 1 << 30: not ours
    tr.record(T.WRITE, np.array([base + 4000], dtype=np.uint64), None, 2)
    ev = tr.evidence()
    assert ev["accesses"] == 5
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


def test_a_read_whose_value_never_matters_is_found_by_the_trace_alone(tmp_path: Path) -> None:
    """tests/data/trace: lane n-1 of the buggy kernel loads ids[n] and ignores it (held-out hx_f's class). In the
    default mode on a CPU, poison cannot see it (nothing changes); the trace names its 4 bytes. The fixed twin
    is clean, the trace having run on it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--scenario-path",
                           str(DATA), "--report-dir", str(tmp_path / "r")], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=600)
    cases = {c["id"]: c for c in json.loads((tmp_path / "r" / "report.json").read_text())["cases"]}
    buggy, fixed = cases["seg_end[buggy-n36]"], cases["seg_end[fixed-n36]"]
    assert [(f["detector"], f["kind"], f["buffer"], f["region"], f["bytes"], f["exact"], f["ranges"][0]["start"])
            for f in buggy["findings"]] == [(TRACE, OVERREAD, "ids", "past_end", 4, True, 144)], proc.stdout[-3000:]
    assert buggy["outcome"] == "finding" and fixed["outcome"] == "clean" and fixed["findings"] == []
    for case in (buggy, fixed):
        ran = {d["detector"]: d["ran"] for d in case["detectors"]}
        assert ran[TRACE] and ran[POISON] and not ran[MEMCHECK]
    assert proc.returncode == 1          # the buggy case's finding fails the run
