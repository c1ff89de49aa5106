"""GPU calibration of uninit, racecheck and synccheck (issue 20 items 2-3; run on the H200 by
ci/gpu/detect_check.sh). Each planted bug must be found with the right kind, buffer, bytes or source
line, and each fixed twin must stay clean, through the engine's own runner and batching (the buggy variants
and their twins share a batch, so racecheck's rerun-alone path is exercised too). Skipped, with the reason,
where torch sees no CUDA device or no compute-sanitizer is found."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gpu_memsafety.sanitizer import tool as sanitizer
from gpu_memsafety.sanitizer.hazards import BARRIER_BUFFER
from gpu_memsafety.model import BARRIER, RACE, SHARED, UNINIT_READ, UNWRITTEN, Outcome
from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
from gpu_memsafety.kernels.planted.race import source_line
from gpu_memsafety.scenarios.planted_barrier import SCENARIO as BARRIER_SCENARIO
from gpu_memsafety.scenarios.planted_race import SCENARIO as RACE_SCENARIO
from gpu_memsafety.scenarios.planted_uninit import SCENARIO as UNINIT_SCENARIO

NO_GPU = "needs a CUDA GPU; found none (torch.cuda.is_available() is False)"
pytestmark = [pytest.mark.e2e, pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU)]


def _run(mode: str, scenario, workdir: Path) -> dict:
    lookup = sanitizer.locate() if MODES[mode].sanitizer else None
    if lookup is not None and lookup.found is None:
        pytest.skip(f"needs compute-sanitizer: {lookup.describe()}")
    runner = Runner(RunOptions(mode=MODES[mode], workdir=workdir, gpu_available=True, sanitizer=lookup))
    return {r.variant + "-" + r.params.get("impl", "cuda"): r for r in runner.run([(scenario, c) for c in scenario.build()])}


def test_racecheck_names_the_reduction_race_and_keeps_the_twin_clean(tmp_path: Path) -> None:
    results = _run("racecheck", RACE_SCENARIO, tmp_path)
    race, fixed = results["race-cuda"], results["race_fixed-cuda"]
    assert race.outcome is Outcome.EXPECTED_FINDING, race.message
    line = f"race.cu:{source_line('RACE')}"
    assert any(f.kind == RACE and f.buffer == SHARED and f.kernel == "planted_reduce_race" and line in f.source
               for f in race.findings), race.findings
    assert fixed.outcome is Outcome.CLEAN, fixed.message


def test_synccheck_names_the_divergent_barrier_and_keeps_the_twin_clean(tmp_path: Path) -> None:
    results = _run("synccheck", BARRIER_SCENARIO, tmp_path)
    bad, fixed = results["divergent_barrier-cuda"], results["barrier_fixed-cuda"]
    assert bad.outcome is Outcome.EXPECTED_FINDING, bad.message
    lines = {f"race.cu:{source_line('BARRIER A')}", f"race.cu:{source_line('BARRIER B')}"}
    assert any(f.kind == BARRIER and f.buffer == BARRIER_BUFFER and f.source in lines for f in bad.findings), bad.findings
    assert fixed.outcome is Outcome.CLEAN, fixed.message


def test_uninit_finds_both_planted_bugs_in_cuda_and_triton(tmp_path: Path) -> None:
    results = _run("uninit", UNINIT_SCENARIO, tmp_path)
    for impl in ("triton", "cuda"):
        empty, short = results[f"accumulate_empty-{impl}"], results[f"grid_short-{impl}"]
        assert empty.outcome is Outcome.EXPECTED_FINDING, empty.message
        assert [(f.kind, f.buffer, f.bytes) for f in empty.findings] == [(UNINIT_READ, "out", 16000)]
        assert short.outcome is Outcome.EXPECTED_FINDING, short.message
        assert [(f.kind, f.buffer) for f in short.findings] == [(UNWRITTEN, "out")]
        for twin in ("accumulate_zeroed", "grid_full"):
            assert results[f"{twin}-{impl}"].outcome is Outcome.CLEAN, results[f"{twin}-{impl}"].message
