"""The public API: everything a scenario, its adapter and a test in a host repository need, in one import.

    from gpu_memsafety.api import (Case, Expectation, ExpectedFinding, OVERWRITE, GUARD, MEMCHECK, Param,
                                   RunContext, RunInfo, Scenario, Unsupported, Variant)

- Scenario definition: Scenario, Case, Param, Variant, grid, ScenarioError; the adapter contract (Adapter,
  RunContext, RunInfo, Unsupported); expectations (Expectation, ExpectedFinding).
- Names, one spelling each: every detector (GUARD, MEMCHECK, GUARD_PAGE, POISON, UNINIT, TRACE, TRACE_RACE, RACECHECK,
  SYNCCHECK;
  DETECTORS), kind (OVERREAD, OVERWRITE, UNINIT_READ, UNWRITTEN, RACE, BARRIER, MISALIGNED) and region
  (BEFORE_START, PAST_END, ROW_PADDING, UNUSED_ROW, INSIDE, SHARED_MEMORY, UNATTRIBUTED; REGIONS).
- Running: run_case(case_id, mode=..., scenario_path=...) -> CaseResult (outcome: an Outcome).
- CUDA C++ kernels: build_extension(name, cu_path, binding, capability) builds once per source and device,
  cached and locked across processes, compile errors readable (what `gpu-memsafety new --cuda` uses);
  arch_flags(capability).

`RunContext`, `RunInfo`, `run_case` and the CUDA helpers import torch (or start processes): they are loaded
on first use, so that a scenario file importing this module stays cheap in the parent process.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpu_memsafety.model import (BARRIER, BEFORE_START, DETECTORS, GUARD, GUARD_PAGE, INSIDE, MEMCHECK, MISALIGNED,
                                 OVERREAD, OVERWRITE, PAST_END, POISON, RACE, RACECHECK, REGIONS, ROW_PADDING,
                                 SHARED_MEMORY, SYNCCHECK, TRACE, TRACE_RACE, UNATTRIBUTED, UNINIT, UNINIT_READ, UNUSED_ROW, UNWRITTEN,
                                 CaseResult, Expectation, ExpectedFinding, Outcome)
from gpu_memsafety.scenario.adapter import Adapter, Unsupported
from gpu_memsafety.scenario.definition import Case, Param, Scenario, ScenarioError, Variant, grid

if TYPE_CHECKING:
    from gpu_memsafety.engine.one import run_case
    from gpu_memsafety.util.cuda_build import arch_flags, build_extension
    from gpu_memsafety.scenario.context import RunContext, RunInfo

__all__ = ["Adapter", "BARRIER", "BEFORE_START", "Case", "CaseResult", "DETECTORS", "Expectation", "ExpectedFinding",
           "GUARD", "GUARD_PAGE", "INSIDE", "MEMCHECK", "MISALIGNED", "OVERREAD", "OVERWRITE", "Outcome", "PAST_END",
           "POISON", "Param", "RACE", "RACECHECK", "REGIONS", "ROW_PADDING", "RunContext", "RunInfo", "SHARED_MEMORY",
           "SYNCCHECK", "Scenario", "ScenarioError", "TRACE", "TRACE_RACE", "UNATTRIBUTED", "UNINIT", "UNINIT_READ", "UNUSED_ROW",
           "UNWRITTEN", "Unsupported", "Variant", "arch_flags", "build_extension", "grid", "run_case"]

_LAZY = {"RunContext": "gpu_memsafety.scenario.context", "RunInfo": "gpu_memsafety.scenario.context",
         "run_case": "gpu_memsafety.engine.one", "build_extension": "gpu_memsafety.util.cuda_build",
         "arch_flags": "gpu_memsafety.util.cuda_build"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gpu_memsafety.api' has no attribute {name!r}")
