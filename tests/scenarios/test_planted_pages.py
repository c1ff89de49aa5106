"""The planted guard-page calibration (scenarios/planted_pages.py) on the CPU: the Triton kernels under
TRITON_INTERPRET=1, through the real runner, in poison mode (the mode that runs here and tells the sides apart):
b read 64 B past its end and a read 64 B before its start are found on their side, the fixed twins are clean, and
the guard markers (reads only) stay clean. Guard-page mode needs a GPU: tests/gpu/test_pages.py and
ci/gpu/guardpage_check.sh."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.model import BEFORE_START, OVERREAD, PAST_END, POISON, Outcome
from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
from gpu_memsafety.kernels.planted.pages import BY_NAME, SHIFT
from gpu_memsafety.scenarios.planted_pages import SCENARIO

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)


def run(mode: str, workdir: Path) -> dict[str, Any]:
    items = [(SCENARIO, c) for c in SCENARIO.build() if c.params["impl"] == "triton"]
    return {r.variant: r for r in Runner(RunOptions(mode=MODES[mode], workdir=workdir)).run(items)}


@pytest.fixture(scope="module")
def poison_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run("poison", tmp_path_factory.mktemp("pages-poison"))


def test_variants_plant_exactly_one_read_outside_and_their_twins_mask_it() -> None:
    got = {name: (v.a_shift, v.b_extra, v.fixed) for name, v in BY_NAME.items()}
    assert got == {"read_past_end": (0, SHIFT, False), "read_past_end_fixed": (0, SHIFT, True),
                   "read_before_start": (SHIFT, 0, False), "read_before_start_fixed": (SHIFT, 0, True)}
    assert SCENARIO.variants == tuple(BY_NAME)


def test_poison_finds_b_past_its_end_and_a_before_its_start(poison_run: dict[str, Any]) -> None:
    for variant, buffer, region in (("read_past_end", "b", PAST_END), ("read_before_start", "a", BEFORE_START)):
        result = poison_run[variant]
        assert result.outcome is Outcome.EXPECTED_FINDING, (variant, result.message)
        assert [(f.detector, f.kind, f.buffer, f.region) for f in result.findings] == [(POISON, OVERREAD, buffer, region)]


def test_poison_keeps_the_fixed_twins_clean(poison_run: dict[str, Any]) -> None:
    for variant in ("read_past_end_fixed", "read_before_start_fixed"):
        assert poison_run[variant].outcome is Outcome.CLEAN, poison_run[variant].message


def test_guard_markers_see_no_read(tmp_path: Path) -> None:
    results = run("guard", tmp_path)
    for variant, result in results.items():
        assert result.outcome in (Outcome.CLEAN, Outcome.NOT_APPLICABLE), (variant, result.outcome, result.message)
        assert result.findings == [], variant
