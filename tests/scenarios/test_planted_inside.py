"""Issue 20 item 4: reads inside the allocation are overreads of their region, with their bytes. The planted
scenario (scenarios/planted_inside.py) runs here on the CPU, its Triton kernels under TRITON_INTERPRET=1, through
the real runner and worker: in poison mode a packed-stride walk over padded rows is an overread of exactly the
padding it covers, a sum over every physical row an overread of exactly the logical-width bytes of each unused
row, and both fixed twins are clean; in guard mode, and in mode both (guard and memcheck; memcheck needs a GPU,
so its verdict is checked from what it would see) the buggy variants are not applicable, saying only poison
sees them. The CUDA twin runs on the GPU
(ci/gpu/calib_check.sh)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.scenario import registry
from gpu_memsafety.model import TRACE, GUARD, MEMCHECK, POISON, DetectorRun, Outcome
from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
from gpu_memsafety.judge.verdict import decide
from gpu_memsafety.scenarios.planted_inside import SCENARIO, read, read_outside

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

IDS = {v: f"planted_inside[{v}-triton-T5of8-W18-S20]"
       for v in ("packed_stride_read", "strided_read", "unused_rows_read", "used_rows_read")}


def run(mode: str, workdir: Path) -> dict[str, Any]:
    items = [registry.find_case(i) for i in IDS.values()]
    return {r.case_id: r for r in Runner(RunOptions(mode=MODES[mode], workdir=workdir)).run(items)}


@pytest.fixture(scope="module")
def poison_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run("poison", tmp_path_factory.mktemp("inside-poison"))


def test_expected_bytes_follow_from_the_kernels_addressing() -> None:
    cases = {c.id: c for c in SCENARIO.build()}
    packed = cases[IDS["packed_stride_read"]]
    assert read(packed) == [(0, 5 * 72)]             # 5 rows of 72 B walked 72 B apart
    assert read_outside(packed) == {"row_padding": [(r * 80 + 72, r * 80 + 80) for r in range(4)]}
    unused = cases[IDS["unused_rows_read"]]
    assert read_outside(unused) == {"unused_row": [(r * 80, r * 80 + 72) for r in (5, 6, 7)]}
    [e] = SCENARIO.expect(unused).findings
    assert (e.kind, e.buffer, e.region, e.bytes, e.detectors) == ("overread", "scale", "unused_row", 216, (POISON, TRACE))
    assert "memcheck cannot see reads inside an allocation" in SCENARIO.expect(unused).reason
    assert SCENARIO.expect(cases[IDS["strided_read"]]).clean and SCENARIO.expect(cases[IDS["used_rows_read"]]).clean


@pytest.mark.parametrize("variant,region,ranges", [
    ("packed_stride_read", "row_padding", [(r * 80 + 72, r * 80 + 80, f"row_padding[row {r}]") for r in range(4)]),
    ("unused_rows_read", "unused_row", [(r * 80, r * 80 + 72, f"unused_row[{r}]") for r in (5, 6, 7)]),
])
def test_poison_names_the_region_inside_the_allocation_and_bounds_its_bytes(
        poison_run: dict[str, Any], variant: str, region: str, ranges: list[tuple[int, int, str]]) -> None:
    result = poison_run[IDS[variant]]
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    [f] = result.findings
    assert (f.detector, f.kind, f.buffer, f.region) == (POISON, "overread", "scale", region)
    assert [(r.start, r.end, r.region) for r in f.ranges] == ranges
    assert f.bytes == sum(hi - lo for lo, hi, _ in ranges) and f.detail("access") == "read"


@pytest.mark.parametrize("variant", ["strided_read", "used_rows_read"])
def test_fixed_twins_are_clean_under_poison(poison_run: dict[str, Any], variant: str) -> None:
    result = poison_run[IDS[variant]]
    assert result.outcome is Outcome.CLEAN, result.message
    assert result.findings == []


def test_guard_mode_cannot_see_reads_inside_and_says_so(tmp_path: Path) -> None:
    results = run("guard", tmp_path)
    for variant in ("packed_stride_read", "unused_rows_read"):
        result = results[IDS[variant]]
        assert result.outcome is Outcome.NOT_APPLICABLE, result.message
        assert "visible only to poison" in result.message and "memcheck cannot see reads inside" in result.message
        assert result.findings == []
    for variant in ("strided_read", "used_rows_read"):
        result = results[IDS[variant]]
        assert result.outcome is Outcome.CLEAN, result.message


def test_memcheck_that_ran_and_saw_nothing_leaves_the_buggy_variants_not_applicable() -> None:
    """Mode both on a GPU: guard and memcheck ran and, as they must, saw nothing (here no memcheck can run, so the
    verdict is decided from what the GPU run would hand it)."""
    case = registry.find_case(IDS["unused_rows_read"])[1]
    ran = [DetectorRun(GUARD, True), DetectorRun(MEMCHECK, True)]
    verdict = decide(SCENARIO.expect(case), [], ran)
    assert verdict.outcome is Outcome.UNSUPPORTED        # the judge reports it as not applicable
    assert "visible only to poison" in verdict.message and "memcheck cannot see" in verdict.message
