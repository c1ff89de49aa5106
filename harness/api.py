"""Everything a scenario and its adapter need, in one import (docs/writing-a-scenario.md):

    from harness.api import (Case, Expectation, ExpectedFinding, OVERWRITE, GUARD, MEMCHECK, Param,
                             RunContext, RunInfo, Scenario, Unsupported, Variant)

`RunContext` and `RunInfo` live in harness.context, which imports torch; they are loaded on first use, so
that a scenario file importing this module stays cheap in the parent process.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.adapter import Adapter, Unsupported
from harness.model import (BEFORE_START, DETECTORS, GUARD, GUARD_PAGE, INSIDE, MEMCHECK, OVERREAD, OVERWRITE,
                           PAST_END, POISON, ROW_PADDING, UNUSED_ROW, Expectation, ExpectedFinding)
from harness.scenario import Case, Param, Scenario, ScenarioError, Variant, grid

if TYPE_CHECKING:
    from harness.context import RunContext, RunInfo

__all__ = ["Adapter", "BEFORE_START", "Case", "DETECTORS", "Expectation", "ExpectedFinding", "GUARD", "GUARD_PAGE",
           "INSIDE", "MEMCHECK", "OVERREAD", "OVERWRITE", "PAST_END", "POISON", "Param", "ROW_PADDING", "RunContext",
           "RunInfo", "Scenario", "ScenarioError", "UNUSED_ROW", "Unsupported", "Variant", "grid"]


def __getattr__(name: str) -> Any:
    if name in ("RunContext", "RunInfo"):
        from harness import context
        return getattr(context, name)
    raise AttributeError(f"module 'harness.api' has no attribute {name!r}")
