"""scenarios/planted_unwatched.py on the CPU: bugs in buffers the adapter does not watch (issue 20 item 1).

The Triton kernel runs under TRITON_INTERPRET=1 through the real runner and worker: guard markers and poison
as they are; memcheck through a fake compute-sanitizer (tests/model/test_cover.py's) that reports the case's expected
accesses only where they fall outside their buffer's allocation, which is what memcheck does. Every buffer being
covered, the overread of the unwatched input x is outside x's exact allocation and found; narrowed to watched
buffers (`--cover watched`), the same read lands in x's back guard and memcheck misses it. The GPU run of the same
cases (Triton and CUDA, memcheck for real) is ci/gpu/cover_check.sh.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.scenario import registry
from gpu_memsafety.model import TRACE, GUARD, MEMCHECK, OVERREAD, OVERWRITE, POISON, Outcome
from gpu_memsafety.cover import COVER_SCENARIO, COVER_WATCHED
from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
from gpu_memsafety.kernels.planted.unwatched import GROUP, ITEM, groups
from gpu_memsafety.scenarios.planted_unwatched import SCENARIO

from fake_sanitizer import memcheck as fake_memcheck

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

CASES = {c.id: c for c in SCENARIO.build()}


def cid(variant: str, impl: str = "triton", n: int = 4096) -> str:
    return f"planted_unwatched[{variant}-{impl}-n{n}]"


def run(mode: str, workdir: Path, ids: list[str], **options: Any) -> dict[str, Any]:
    runner = Runner(RunOptions(mode=MODES[mode], workdir=workdir, **options))
    return {r.case_id: r for r in runner.run([registry.find_case(i) for i in ids])}


def triples(result: Any) -> list[tuple[Any, ...]]:
    return [(f.detector, f.kind, f.buffer, f.region, f.bytes, [(r.start, r.end) for r in f.ranges]) for f in result.findings]


# ------------------------------------------------------------------------------------------ definitions

def test_cases_cover_both_kernels_sizes_and_variants_and_only_cuda_needs_a_gpu() -> None:
    assert len(CASES) == 2 * 2 * 3
    assert all("calibration" in c.tags for c in CASES.values())
    assert SCENARIO.needs_gpu(CASES[cid("clean", "cuda")]) and not SCENARIO.needs_gpu(CASES[cid("clean")])
    assert SCENARIO.cover == "all"


@pytest.mark.parametrize("n", [4096, 4000])
def test_expectations_name_kind_buffer_region_bytes_and_detectors(n: int) -> None:
    [read] = SCENARIO.expect(CASES[cid("input_overread", n=n)]).findings
    assert (read.kind, read.buffer, read.region, read.bytes, read.ranges) == (OVERREAD, "x", "past_end", 4,
                                                                              ((n * ITEM, n * ITEM + 4),))
    assert set(read.detectors) == {MEMCHECK, POISON, "guard_page", TRACE}
    [write] = SCENARIO.expect(CASES[cid("input_overwrite", n=n)]).findings
    end = groups(n) * ITEM
    assert (write.kind, write.buffer, write.region, write.bytes, write.ranges) == (OVERWRITE, "scratch", "past_end", 4,
                                                                                   ((end, end + 4),))
    assert set(write.detectors) == {GUARD, MEMCHECK, "guard_page", TRACE}
    assert SCENARIO.expect(CASES[cid("clean", n=n)]).clean
    assert groups(n) == 16 and GROUP == 256


def test_describe_names_the_element_past_the_end() -> None:
    case = CASES[cid("input_overread")]
    assert SCENARIO.describe(case, "x", 16384, 16388) == "x[4096]: 1..1 element(s) past the end (4096 elements)"
    assert SCENARIO.describe(case, "scratch", 64, 68) == "scratch[16]: 1..1 element(s) past the end (16 elements)"


# --------------------------------------------------------------------- guard markers and poison, as they are

@pytest.fixture(scope="module")
def guard_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run("guard", tmp_path_factory.mktemp("unwatched-guard"),
               [cid(v) for v in ("clean", "input_overread", "input_overwrite")])


def test_guard_markers_see_the_write_past_the_unwatched_scratch(guard_run: dict[str, Any]) -> None:
    result = guard_run[cid("input_overwrite")]
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    assert triples(result) == [(GUARD, OVERWRITE, "scratch", "past_end", 4, [(64, 68)])]
    assert result.findings[0].detail("zone") == "back_guard"


def test_guard_markers_do_not_claim_the_read_and_the_twin_is_clean(guard_run: dict[str, Any]) -> None:
    read = guard_run[cid("input_overread")]
    assert read.outcome is Outcome.NOT_APPLICABLE and read.findings == [], read.message
    clean = guard_run[cid("clean")]
    assert clean.outcome is Outcome.CLEAN and clean.findings == [], clean.message


def test_poison_finds_the_overread_of_the_unwatched_input(tmp_path: Path) -> None:
    results = run("poison", tmp_path, [cid("input_overread"), cid("clean")])
    bad = results[cid("input_overread")]
    assert bad.outcome is Outcome.EXPECTED_FINDING, bad.message
    assert triples(bad) == [(POISON, OVERREAD, "x", "past_end", 4, [(16384, 16388)])]
    assert results[cid("clean")].outcome is Outcome.CLEAN, results[cid("clean")].message


# --------------------------------------------------------------------------- memcheck (fake), every buffer

@pytest.fixture()
def interpreter(tmp_path: Path) -> str:
    """A python that runs the worker under the Triton interpreter (the runner clears TRITON_INTERPRET for a
    machine it is told has a GPU, which the fake sanitizer needs)."""
    script = tmp_path / "python-interpret"
    script.write_text(f"#!/bin/sh\nexport TRITON_INTERPRET=1\nexec {sys.executable} \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def test_memcheck_sees_the_unwatched_overread_only_when_every_buffer_is_covered(tmp_path: Path, interpreter: str) -> None:
    sanitizer = fake_memcheck(tmp_path, "expected")
    ids = [cid("input_overread"), cid("clean")]
    common = {"gpu_available": True, "sanitizer": sanitizer, "python": interpreter, "timeout_scale": 0.5}
    covered = run("memcheck", tmp_path / "all", ids, cover=COVER_SCENARIO, **common)
    found = covered[cid("input_overread")]
    assert found.outcome is Outcome.EXPECTED_FINDING, found.message
    assert triples(found) == [(MEMCHECK, OVERREAD, "x", "past_end", 4, [(16384, 16388)])]
    assert found.details["cover"]["covered"] == ["x", "w", "scratch", "out"]
    assert covered[cid("clean")].outcome is Outcome.CLEAN, covered[cid("clean")].message
    narrowed = run("memcheck", tmp_path / "watched", ids, cover=COVER_WATCHED, **common)
    missed = narrowed[cid("input_overread")]
    assert missed.outcome is Outcome.UNEXPECTEDLY_CLEAN, missed.message
    assert "x was not covered" in missed.message and missed.findings == []
    assert missed.details["cover"] == {"cover": COVER_WATCHED, "covered": ["out"], "watched": ["out"]}


def test_both_mode_narrowed_judges_the_scratch_write_by_its_own_back_guard(tmp_path: Path, interpreter: str) -> None:
    """Narrowed to watched buffers, scratch keeps its back guard while out is an exact allocation: the guard-only part of
    the expectation is judged on scratch's own placement (seen by the markers), not on the mode's."""
    results = run("both", tmp_path, [cid("input_overwrite")], cover=COVER_WATCHED, gpu_available=True,
                  sanitizer=fake_memcheck(tmp_path, "expected"), python=interpreter, timeout_scale=0.5)
    result = results[cid("input_overwrite")]
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    # the trace (Triton interpreted here) sees the same 4 bytes in scratch's back guard
    assert triples(result) == [(GUARD, OVERWRITE, "scratch", "past_end", 4, [(64, 68)]),
                               (TRACE, OVERWRITE, "scratch", "past_end", 4, [(64, 68)])]


def test_a_scenario_whose_detectors_need_no_covered_buffer_keeps_every_guard_in_both_mode(tmp_path: Path,
                                                                                      interpreter: str) -> None:
    """planted_uninit uses the guard markers and uninit, not memcheck: in `both` mode nothing of it is placed for
    memcheck (the exact placement would only strip the markers' guards), and that is no 'nothing was guarded'."""
    results = run("both", tmp_path, ["planted_uninit[accumulate_zeroed-triton-n4000]"], gpu_available=True,
                  sanitizer=fake_memcheck(tmp_path, "expected"), python=interpreter, timeout_scale=0.5)
    [result] = results.values()
    assert result.outcome is Outcome.CLEAN, result.message
    assert result.details["cover"] == {"cover": "all", "covered": [], "watched": ["out"]}
