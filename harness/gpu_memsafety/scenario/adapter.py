"""The adapter API: the function a scenario names to run its kernel on the harness's buffers.

    def run_case(case: Case, ctx: RunContext) -> RunInfo:
        dst = ctx.tensor("dst", (n,), torch.uint8, watch=True)   # guarded buffers, by name
        my_kernel[grid](dst, n)
        return RunInfo(kernel="my_kernel", outputs={"dst": dst})

    SCENARIO = Scenario(..., adapter=run_case)

A scenario gives the function itself (`adapter=run_case`); the older "module:function" string still works
and is imported in the worker. An adapter raises `Unsupported("needs ...; found ...")` when this machine
cannot run the case: the case is reported unsupported with that message, never as a failure or a pass.
This module imports no torch: scenario files can import it in the parent process for free.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gpu_memsafety.errors import Unsupported

if TYPE_CHECKING:
    from gpu_memsafety.scenario.context import RunContext, RunInfo

__all__ = ["Adapter", "Unsupported", "checked"]


@runtime_checkable
class Adapter(Protocol):
    """Runs one case: allocate buffers through `ctx`, launch the kernel, return a RunInfo."""

    # case: a gpu_memsafety.scenario.definition.Case (its params, variant and id; definition imports this module)
    def __call__(self, case: Any, ctx: "RunContext") -> "RunInfo": ...


class AdapterError(TypeError):
    """An adapter broke the contract (returned something other than a RunInfo)."""


def checked(adapter: Adapter, scenario: str) -> Adapter:
    """`adapter`, with its return value checked: anything but a RunInfo is an error saying what to return."""
    def run(case: Any, ctx: Any) -> Any:
        from gpu_memsafety.scenario.context import RunInfo
        info = adapter(case, ctx)
        if not isinstance(info, RunInfo):
            name = getattr(adapter, "__qualname__", repr(adapter))
            raise AdapterError(f"scenario {scenario!r}: adapter {name} returned {type(info).__name__}; it must return "
                               f"gpu_memsafety.api.RunInfo(kernel=..., outputs={{...}}) after launching the kernel")
        return info
    return run
