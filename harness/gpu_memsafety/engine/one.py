"""Run one case from Python and get its typed result: what `gpu-memsafety repro` does, without a shell.

    from gpu_memsafety.api import run_case
    result = run_case("my_kernel[buggy-n1000]", mode="guard", scenario_path=["gpu_scenarios"])

The case runs exactly as in a scenario run (a worker process, the sanitizer when the mode needs one, the same
judge); the result is a `CaseResult` (outcome, findings, message, details).
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from gpu_memsafety.cover import COVER_OPTIONS, COVER_SCENARIO
from gpu_memsafety.detectors.modes import DEFAULT_MODE, MODES
from gpu_memsafety.model import CaseResult
from gpu_memsafety.scenario import registry
from gpu_memsafety.scenario.definition import ScenarioError


def run_case(case_id: str, *, mode: str = DEFAULT_MODE, scenario_path: Sequence[str | Path] = (),
             cover: str = COVER_SCENARIO, workdir: str | Path | None = None) -> CaseResult:
    """Run the case `case_id` (as `gpu-memsafety list` prints it) in `mode`. Scenario directories in
    `scenario_path` are searched besides the built-in ones. Raises ScenarioError for an unknown case, mode
    or cover; everything the run itself meets (a crash, a missing sanitizer) is the result's outcome."""
    if mode not in MODES or mode == "stress":
        raise ScenarioError(case_id, "mode", f"{mode!r} is not one of {', '.join(m for m in MODES if m != 'stress')}")
    if cover not in COVER_OPTIONS:
        raise ScenarioError(case_id, "cover", f"{cover!r} is not one of {', '.join(COVER_OPTIONS)}")
    from gpu_memsafety.util.gpus import visible_gpus
    from gpu_memsafety.engine.runner import RunOptions, Runner
    from gpu_memsafety.sanitizer import tool as sanitizer
    registry.configure(scenario_path)
    scenario, case = registry.find_case(case_id)
    temporary = workdir is None
    root = Path(tempfile.mkdtemp(prefix="gpu-memsafety-case-")) if workdir is None else Path(workdir)
    try:
        devices, no_gpu = visible_gpus()
        options = RunOptions(mode=MODES[mode], workdir=root / mode, gpu_available=bool(devices), gpu_missing_reason=no_gpu,
                             sanitizer=sanitizer.locate(), cover=cover)
        (result,) = Runner(options).run([(scenario, case)])
        return result
    finally:
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
