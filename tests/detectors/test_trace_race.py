"""Issue 50, item 2: races between the program instances of one interpreted launch (detectors/trace_race.py).

The bookkeeping on plain memory (numpy, no Triton): write-write and read-write in either order, found at their exact
bytes with a pair of programs; a program's own reads and writes, masked-off lanes, atomics and accesses under a lock
are no race; identical values are a note; the cap on tracked bytes is said, never silent. End to end: the planted
scenario on a CPU (found at the bytes its kernels' addressing gives, clean twins clean), and a host suite under the
bare flag (each race named by kernel argument and test variable; its clean twin clean).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from gpu_memsafety.detectors import trace as T
from gpu_memsafety.detectors import trace_race as R
from gpu_memsafety.detectors.registry import UNITS
from gpu_memsafety.model import INSIDE, RACE, TRACE, TRACE_RACE, ExpectedFinding

from tests.judge.test_judge import CASE, scenario, worker
from repo_paths import ROOT

GRID = (4, 1, 1)


class Memory:
    """A tensor argument's storage on plain memory, and the interpreter's part: each store is made after the race
    check saw it (as detectors/trace.py's wrapper hands it over before the store)."""

    def __init__(self, nbytes: int = 64, cap: int | None = None, name: str = "out") -> None:
        self.mem = np.zeros(nbytes, dtype=np.uint8)
        self.lo = self.mem.ctypes.data
        self.races = R.Races(cap=cap)
        self.races.begin("k", [T.Arg(name, self.lo, self.lo + nbytes)], SimpleNamespace(buffers={}))

    def addrs(self, elems: list[int]) -> np.ndarray:
        return np.array([self.lo + 4 * e for e in elems], dtype=np.uint64)

    def store(self, program: int, elems: list[int], values: list[float], mask: list[bool] | None = None) -> None:
        vals = np.array(values, dtype=np.float32)
        self.races.access(T.WRITE, self.addrs(elems), None if mask is None else np.array(mask), 4, (program, 0, 0),
                          GRID, vals)
        view = self.mem.view(np.float32)
        for i, (e, v) in enumerate(zip(elems, vals)):
            if mask is None or mask[i]:
                view[e] = v

    def load(self, program: int, elems: list[int], mask: list[bool] | None = None) -> None:
        self.races.access(T.READ, self.addrs(elems), None if mask is None else np.array(mask), 4, (program, 0, 0), GRID)

    def done(self) -> dict:
        self.races.end()
        return self.races.evidence()


def kinds(doc: dict) -> dict[str, tuple[int, list[list[int]], list[int]]]:
    (rec,) = doc["races"]
    return {k: (v["bytes"], v["runs"], v["programs"]) for k, v in rec["kinds"].items()}


def test_two_programs_writing_one_element_is_a_write_write_race_at_its_bytes() -> None:
    m = Memory()
    m.store(0, [0, 1, 2, 3], [1, 2, 3, 4])
    m.store(1, [3, 4, 5], [9, 5, 6])            # element 3 is program 0's, with another value
    assert kinds(m.done()) == {R.WW: (4, [[12, 16]], [0, 1])}


def test_read_write_in_either_order_and_a_programs_own_bytes_are_no_race() -> None:
    m = Memory()
    m.load(0, [0, 1, 2])            # program 0 reads element 2 ...
    m.store(0, [0, 1], [1, 1])      # ... and writes its own elements, read by itself: no race
    m.store(1, [2], [7])            # ... which program 1 then writes
    m.store(2, [5], [3])
    m.load(3, [5])                  # program 3 reads what program 2 wrote
    assert kinds(m.done()) == {R.RW: (8, [[8, 12], [20, 24]], [0, 1])}


def test_identical_values_are_a_note_not_a_race() -> None:
    m = Memory()
    m.store(0, [0, 1], [5, 5])
    m.store(1, [1], [5])                        # the same value program 0 wrote
    m.store(2, [4], [0])                        # a write that leaves the byte as it was (zero) ...
    m.load(3, [4])                              # ... read by another program: the same value either way
    doc = m.done()
    assert set(kinds(doc)) == {R.SAME_WW, R.SAME_RW}
    assert R.findings_of(doc) == []
    notes = R.notes(doc)
    assert "programs (0, 0, 0) and (1, 0, 0) of k wrote identical values into 4 B of `out` (a note, not a race)" in notes


def test_masked_off_lanes_atomics_and_a_lock_make_no_race() -> None:
    m = Memory()
    m.store(0, [0, 1], [1, 2], mask=[True, False])
    m.store(1, [1], [3])                        # program 0's lane for element 1 was masked off
    m.races.atomic(m.addrs([8]), None, (2, 0, 0), GRID)          # an atomic add by two programs: no race
    m.races.atomic(m.addrs([8]), None, (3, 0, 0), GRID)
    lock = m.addrs([15])
    for program in (2, 3):                      # a read-modify-write of element 9 under a spin lock, twice
        m.races.atomic(lock, None, (program, 0, 0), GRID, acquire=True)
        m.load(program, [9])
        m.store(program, [9], [program])
        m.races.atomic(lock, None, (program, 0, 0), GRID, release=True)
        m.store(program, [10 + program], [1])   # after the release: checked again (its own element)
    doc = m.done()
    assert doc["races"] == [] and doc["locked"] == 4
    assert any("under a lock" in n for n in R.notes(doc))


def test_the_cap_on_tracked_bytes_is_said_never_silent() -> None:
    m = Memory(nbytes=64, cap=32)
    m.store(0, [0], [1])
    m.store(1, [0], [2])
    doc = m.done()
    assert doc["races"] == [] and doc["tracked"] == 0
    assert doc["partial"] == ["`out` of k (64 B) not checked: the launch's tracked bytes would pass 32 B "
                              "(GPU_MEMSAFETY_RACE_BYTES)"]
    run = UNITS[TRACE_RACE].ran(SimpleNamespace(of=lambda d: doc if d == TRACE_RACE else None))
    assert run.ran and "race check partial: `out` of k (64 B) not checked" in run.detail


def test_a_cap_of_zero_turns_the_check_off_and_says_so() -> None:
    m = Memory(cap=0)
    m.store(0, [0], [1])
    m.store(1, [0], [2])
    doc = m.done()
    assert doc["races"] == [] and doc["off"] and R.notes(doc) == [R.OFF]
    run = UNITS[TRACE_RACE].ran(SimpleNamespace(of=lambda d: doc if d == TRACE_RACE else None))
    assert not run.ran and "race check off (GPU_MEMSAFETY_RACE_BYTES=0)" in run.detail


def test_an_error_of_the_check_itself_stops_it_for_the_launch_said_never_raised() -> None:
    m = Memory()
    m.store(0, [0], [1])
    m.races.access(T.WRITE, m.addrs([1]), None, 4, None, GRID, np.zeros(1, np.float32))    # no program: TypeError
    m.store(1, [0], [2])                                  # the rest of the launch is not checked
    doc = m.done()
    assert doc["races"] == [] and len(doc["partial"]) == 1
    assert doc["partial"][0].startswith("the check of k stopped at an error of its own (TypeError")


def test_the_cap_comes_from_the_environment_and_a_bad_value_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(R.CAP_ENV, "1024")
    assert R.cap_from_env() == 1024
    monkeypatch.setenv(R.CAP_ENV, "lots")
    with pytest.raises(ValueError, match="GPU_MEMSAFETY_RACE_BYTES='lots': expected a number of bytes"):
        R.cap_from_env()
    monkeypatch.delenv(R.CAP_ENV)
    assert R.cap_from_env() == R.DEFAULT_CAP


def test_one_finding_per_tensor_its_bytes_the_union_each_kind_in_its_details() -> None:
    m = Memory()
    m.store(0, [0, 1], [1, 2])
    m.load(0, [4])
    m.store(1, [1], [7])          # write-write on element 1
    m.store(1, [4], [7])          # read-write on element 4
    m.done()
    m.races.begin("k", [T.Arg("out", m.lo, m.lo + 64)], SimpleNamespace(buffers={}))
    m.store(0, [6], [1])          # a second launch: write-write on element 6
    m.store(1, [6], [2])
    (f,) = R.findings_of(m.done(), arch="cpu")
    assert (f.detector, f.kind, f.buffer, f.region, f.bytes, f.kernel) == (TRACE_RACE, RACE, "out", INSIDE, 12, "k")
    assert [(r.start, r.end) for r in f.ranges] == [(4, 8), (16, 20), (24, 28)]
    assert f.detail("race") == "write-write and read-write"
    assert f.detail("write-write") == "8 B, programs (0, 0, 0) and (1, 0, 0)"
    assert f.detail("read-write") == "4 B, programs (0, 0, 0) and (1, 0, 0)"


def test_on_a_gpu_it_did_not_run_and_is_not_missing() -> None:
    run = UNITS[TRACE_RACE].ran(SimpleNamespace(of=lambda d: None))
    assert not run.ran and not run.missing and "no Triton interpreter" in run.detail


def test_a_scenario_that_names_the_trace_uses_its_race_check_and_race_expectations_are_its() -> None:
    s = scenario(detectors=(TRACE,))
    assert TRACE_RACE in s.detectors
    assert TRACE_RACE in ExpectedFinding(RACE, "out", region=INSIDE).detectors
    assert TRACE_RACE not in ExpectedFinding(RACE, "__shared__").detectors      # racecheck's: shared memory


def test_a_race_in_the_evidence_is_the_detectors_finding() -> None:
    doc = {"launches": 1, "tracked": 64, "races": [{"kernel": "k", "buffer": "out", "params": ["out_ptr"], "size": 64,
                                                    "grid": [4, 1, 1],
                                                    "kinds": {R.WW: {"bytes": 4, "runs": [[12, 16]], "left_out": 0,
                                                                     "programs": [0, 1]}}}]}
    from dataclasses import replace

    from gpu_memsafety.detectors.base import Evidence
    ev = Evidence(scenario(), CASE, replace(worker(), evidence={TRACE_RACE: doc}),
                  mode=SimpleNamespace(name="both", detectors=(TRACE_RACE,)))
    (f,) = UNITS[TRACE_RACE].findings(ev)
    assert (f.buffer, f.bytes, f.detail("arguments")) == ("out", 4, "out_ptr")


# ------------------------------------------------------------------------------------------ end to end, on a CPU

def clean_env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "GITHUB_", "TRITON_")) and k not in ("PYTHONPATH", "GPU_MEMSAFETY_SCENARIO_PATH")}
    out.update(CUDA_VISIBLE_DEVICES="")
    return out


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, dict[str, dict]]:
    """scenarios/planted_program_race.py in mode both on a CPU (the trace's stage of the default mode)."""
    tmp = tmp_path_factory.mktemp("planted")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(ROOT / "scenarios" / "planted_program_race.py"),
                           "-k", "planted_program_race", "--gpu-memsafety-mode", "both",
                           "--gpu-memsafety-report-dir", str(tmp / "r")], cwd=str(tmp), env=clean_env(),
                          capture_output=True, text=True, timeout=600)
    return proc, {c["variant"]: c for c in json.loads((tmp / "r" / "report.json").read_text())["cases"]}


@pytest.mark.e2e
def test_planted_races_are_found_at_their_bytes_and_their_twins_are_clean(planted) -> None:
    from gpu_memsafety.kernels.planted.program_race import VARIANTS, raced_bytes
    proc, cases = planted
    assert set(cases) == set(VARIANTS), proc.stdout[-3000:]
    for variant, case in cases.items():
        buffer, runs = raced_bytes(variant, case["params"]["n"])
        races = [f for f in case["findings"] if f["detector"] == TRACE_RACE]
        if runs:
            assert case["outcome"] == "expected finding", (variant, case["message"])
            (f,) = races
            assert (f["buffer"], f["region"], [(r["start"], r["end"]) for r in f["ranges"]]) == \
                (buffer, INSIDE, list(runs)), variant
        else:
            assert case["outcome"] == "clean" and races == [], (variant, case["message"])
    assert {f["detector"] for c in cases.values() for f in c["findings"]} == {TRACE_RACE}
    kinds = {v: dict(cases[v]["findings"][0]["details"])["race"] for v in ("slot_overlap", "inplace_smooth",
                                                                           "unlocked_accumulate")}
    assert kinds == {"slot_overlap": R.WW, "inplace_smooth": R.RW, "unlocked_accumulate": f"{R.WW} and {R.RW}"}
    same = next(d for d in cases["slot_same_value"]["detectors"] if d["detector"] == TRACE_RACE)
    assert "wrote identical values into 28 B of `out` (a note, not a race)" in same["detail"]
    locked = next(d for d in cases["locked_accumulate"]["detectors"] if d["detector"] == TRACE_RACE)
    assert "under a lock" in locked["detail"]


HOST_SUITE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def window_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr, WIDTH: tl.constexpr, SPAN: tl.constexpr):
    j = tl.arange(0, SPAN)
    offs = tl.program_id(0) * BLOCK + j
    mask = (j < WIDTH) & (offs < n)          # bounded by a constant, not by the program's slot
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.program_id(0), mask=mask)


@triton.jit
def shift_in_place(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    nxt = tl.load(x_ptr + offs + 1, mask=offs + 1 < n, other=0.0)     # the next program's first element
    tl.store(x_ptr + offs, nxt, mask=offs < n)


def test_neighbour_slot_written():
    src = torch.arange(64, dtype=torch.float32)
    dst = torch.zeros(64)
    window_copy[(4,)](src, dst, 64, BLOCK=16, WIDTH=17, SPAN=32)


def test_neighbour_slot_clean():
    src = torch.arange(64, dtype=torch.float32)
    dst = torch.zeros(64)
    window_copy[(4,)](src, dst, 64, BLOCK=16, WIDTH=16, SPAN=16)


def test_shift_in_place():
    values = torch.arange(64, dtype=torch.float32)
    shift_in_place[(4,)](values, 64, BLOCK=16)
'''


@pytest.mark.e2e
def test_a_host_suite_under_the_bare_flag_names_each_race_by_argument_and_variable(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text('import os\nos.environ["TRITON_INTERPRET"] = "1"\n')
    (tmp_path / "test_races.py").write_text(HOST_SUITE)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--gpu-memsafety",
                           "--gpu-memsafety-report-dir", "r"], cwd=str(tmp_path), env=clean_env(), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-4000:]
    by = {c["id"].split("::")[-1]: c for c in json.loads((tmp_path / "r" / "report.json").read_text())["cases"]}
    (ww,) = by["test_neighbour_slot_written"]["findings"]
    assert (ww["detector"], ww["kind"], ww["buffer"], ww["region"], ww["bytes"]) == \
        (TRACE_RACE, RACE, "out_ptr", INSIDE, 12), ww
    assert [(r["start"], r["end"]) for r in ww["ranges"]] == [(64, 68), (128, 132), (192, 196)]
    assert dict(ww["details"])["tensor"] == "kernel argument `out_ptr` of window_copy; test variable `dst`"
    assert dict(ww["details"])["write-write"] == "12 B, programs (0, 0, 0) and (1, 0, 0)"
    (rw,) = by["test_shift_in_place"]["findings"]
    assert (rw["buffer"], rw["bytes"], dict(rw["details"])["race"]) == ("x_ptr", 12, R.RW), rw
    assert dict(rw["details"])["tensor"] == "kernel argument `x_ptr` of shift_in_place; test variable `values`"
    clean = by["test_neighbour_slot_clean"]
    assert clean["outcome"] == "clean" and clean["findings"] == [], clean["message"]
    ran = {d["detector"]: d for d in clean["detectors"]}
    assert ran[TRACE_RACE]["ran"] and "races between the program instances of 1" in ran[TRACE_RACE]["detail"]
