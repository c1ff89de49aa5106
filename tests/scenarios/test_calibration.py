"""Issue 19's calibration cases in the planted scenario, run on the CPU: the Triton kernels under
TRITON_INTERPRET=1, through the real runner and worker (guard markers and poison; memcheck needs the GPU, see
ci/gpu/findings_check.sh). Pins: the correct vectorized kernel with a scalar tail is clean; the atomic
one int32 past the end is an overwrite of exactly those 4 bytes; the vector tail overread is found by poison
and is not visible to the markers (reads); the far write does not run where no sanitizer watches.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.scenario import registry
from gpu_memsafety.model import GUARD, POISON, Outcome
from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
from gpu_memsafety.scenarios.planted_oob import SCENARIO as PLANTED

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

TRITON = {v: f"planted_oob[{v}-triton-n{n}-x1]" for v, n in
          (("vec16_overread", 4008), ("vec16_clean", 4008), ("atomic_past_end", 4000), ("far_write", 4000))}


def run(mode: str, workdir: Path, variants: tuple[str, ...]) -> dict[str, Any]:
    items = [registry.find_case(TRITON[v]) for v in variants]
    runner = Runner(RunOptions(mode=MODES[mode], workdir=workdir))
    return {r.case_id: r for r in runner.run(items)}


@pytest.fixture(scope="module")
def guard_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run("guard", tmp_path_factory.mktemp("cal-guard"), tuple(TRITON))


def test_vectorized_kernel_with_a_scalar_tail_is_clean(guard_run: dict[str, Any]) -> None:
    result = guard_run[TRITON["vec16_clean"]]
    assert result.outcome is Outcome.CLEAN, result.message
    assert result.findings == []


def test_atomic_one_element_past_the_end_is_a_4_byte_overwrite(guard_run: dict[str, Any]) -> None:
    result = guard_run[TRITON["atomic_past_end"]]
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    [f] = result.findings
    assert (f.detector, f.kind, f.buffer, f.region, f.bytes) == (GUARD, "overwrite", "dst", "past_end", 4)
    assert [(r.start, r.end) for r in f.ranges] == [(4000, 4004)]
    assert f.detail("zone") == "back_guard"


def test_vector_tail_overread_is_not_claimed_by_the_markers(guard_run: dict[str, Any]) -> None:
    result = guard_run[TRITON["vec16_overread"]]
    assert result.outcome is Outcome.NOT_APPLICABLE, result.message
    assert "memcheck/poison" in result.message and result.findings == []


def test_far_write_never_runs_without_a_gpu(guard_run: dict[str, Any]) -> None:
    result = guard_run[TRITON["far_write"]]
    assert result.outcome is Outcome.UNSUPPORTED
    assert "needs a CUDA GPU" in result.message


def test_poison_finds_the_vector_tail_overread_and_keeps_the_clean_twin_clean(tmp_path: Path) -> None:
    results = run("poison", tmp_path, ("vec16_overread", "vec16_clean"))
    bad, good = results[TRITON["vec16_overread"]], results[TRITON["vec16_clean"]]
    assert bad.outcome is Outcome.EXPECTED_FINDING, bad.message
    assert [(f.detector, f.kind, f.buffer, f.region) for f in bad.findings] == [(POISON, "overread", "src", "past_end")]
    assert [(r.start, r.end) for r in bad.findings[0].ranges] == [(4008, 4016)]   # bisected, whole floats
    assert good.outcome is Outcome.CLEAN, good.message


def test_calibration_expectations_name_kind_buffer_region_and_bytes() -> None:
    cases = {c.id: c for c in PLANTED.build()}
    [vec] = PLANTED.expect(cases[TRITON["vec16_overread"]]).findings
    assert (vec.kind, vec.buffer, vec.region, vec.bytes, vec.ranges) == ("overread", "src", "past_end", 8, ((4008, 4016),))
    [far] = PLANTED.expect(cases[TRITON["far_write"]]).findings
    assert (far.kind, far.buffer, far.region, far.bytes, far.ranges) == ("overwrite", "dst", "before_start", 4,
                                                                          ((-(1 << 31), -(1 << 31) + 4),))
    assert PLANTED.expect(cases[TRITON["vec16_clean"]]).clean
    assert PLANTED.needs_gpu(cases[TRITON["far_write"]]) and not PLANTED.needs_gpu(cases[TRITON["vec16_clean"]])


def test_far_write_outside_memcheck_is_not_applicable_never_a_failure() -> None:
    """On a GPU runner in guard, guard-page or poison mode the far write must not run (it would land in memory the
    process may own); it does not apply to those modes, so it is a skip, never 'could not run'."""
    from types import SimpleNamespace

    from gpu_memsafety.placement import layout as L
    from gpu_memsafety.errors import NotApplicable
    from gpu_memsafety.kernels.planted import calibration

    case = next(c for c in PLANTED.cases() if c.id == TRITON["far_write"])
    ctx = SimpleNamespace(watch_placement=L.GUARDED, device=SimpleNamespace(type="cuda"))
    with pytest.raises(NotApplicable, match="runs only under memcheck"):
        calibration.run_case(case, ctx)
