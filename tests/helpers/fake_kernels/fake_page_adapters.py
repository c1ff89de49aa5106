"""An adapter that faults like a guard page, by where the harness placed its buffers (CPU only, no kernel).

On the CPU the worker has no CUDA virtual memory, so the arena gives every placement the torch allocator; this
adapter marks its page-placed buffers as VMM ones (what the buffer map says on a GPU) and raises the CUDA error a
fault leaves when the planted access would cross a page: the worker then ends its process as after a real fault.
"""
from __future__ import annotations

from typing import Any

from gpu_memsafety.placement import layout as L

FAULT = "CUDA error: an illegal memory access was encountered"


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo

    n = case.params["n"]
    for name in ("a", "b", "c"):
        ctx.tensor(name, (n,), torch.uint8, watch=name == "a")   # every buffer covered (the default), a watched
    where = {name: buf.layout.placement for name, buf in ctx.arena.buffers.items()}
    for name, buf in ctx.arena.buffers.items():
        if where[name] in (L.GUARD_PAGE_BACK, L.GUARD_PAGE_FRONT) and case.variant != "no_vmm":
            buf.backend = "vmm"
    ctx.arena.on_change()                  # the buffer map on disk says so before the "launch"
    variant = case.variant
    if ((variant == "past_end_b" and where["b"] == L.GUARD_PAGE_BACK)
            or (variant == "before_start_a" and where["a"] == L.GUARD_PAGE_FRONT)
            or (variant == "needs_two" and where["a"] == where["b"] == L.GUARD_PAGE_BACK)):
        raise RuntimeError(FAULT)
    return RunInfo(kernel="fake_pages", launches=1)
