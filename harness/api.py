"""Everything a scenario and its adapter need, in one import (docs/writing-a-scenario.md):

    from harness.api import (Case, Expectation, ExpectedFinding, OVERWRITE, GUARD, MEMCHECK, Param,
                             RunContext, RunInfo, Scenario, Unsupported, Variant)

`RunContext` and `RunInfo` live in harness.context, which imports torch; they are loaded on first use, so
that a scenario file importing this module stays cheap in the parent process.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.adapter import Adapter, Unsupported
from harness.model import (DETECTORS, GUARD, GUARD_PAGE, MEMCHECK, OVERREAD, OVERWRITE, POISON, Expectation,
                           ExpectedFinding)
from harness.scenario import Case, Param, Scenario, ScenarioError, Variant, grid

if TYPE_CHECKING:
    from harness.context import RunContext, RunInfo

__all__ = ["Adapter", "Case", "DETECTORS", "Expectation", "ExpectedFinding", "GUARD", "GUARD_PAGE",
           "MEMCHECK", "OVERREAD", "OVERWRITE", "POISON", "Param", "RunContext",
           "RunInfo", "Scenario", "ScenarioError", "Unsupported", "Variant", "grid"]


def __getattr__(name: str) -> Any:
    if name in ("RunContext", "RunInfo"):
        from harness import context
        return getattr(context, name)
    raise AttributeError(f"module 'harness.api' has no attribute {name!r}")
