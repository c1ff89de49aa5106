"""Planted shared-memory overread (CUDA C++, kernels/planted/shared.cu): memcheck calibration for an access out of a
kernel's shared memory. Variants: `shared_overread` (the last staged element reads 4 bytes past the block's
1,000 B of dynamic shared memory, line "SHARED OVERREAD"), `shared_fixed` (its twin). The value read never reaches
the output, and the read stays inside the hardware's allocation unit: only memcheck sees it. Built with -lineinfo
(harness/gpu_memsafety/util/cuda_build.py) so memcheck names the line."""
from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType
from typing import Any

from gpu_memsafety.errors import Unsupported

USED = 250          # floats of shared memory a block stages (shared.cu)
KERNEL = "planted_shared_overread"
CU_PATH = Path(__file__).with_name("shared.cu")
BINDING = """
#include <torch/extension.h>
#include <cstdint>
void planted_shared_launch(uintptr_t, uintptr_t, long long, int, uintptr_t);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch", &planted_shared_launch); }
"""
VARIANTS = {"shared_overread": 1, "shared_fixed": 0}


def source_line(marker: str = "SHARED OVERREAD") -> int:
    """Line of shared.cu whose comment holds `marker`: what memcheck must name."""
    for number, text in enumerate(CU_PATH.read_text().splitlines(), start=1):
        if f"// {marker}" in text:
            return number
    raise ValueError(f"no line marked {marker!r} in {CU_PATH.name}")


@functools.cache
def _module(capability: tuple[int, int]) -> ModuleType:
    from gpu_memsafety.util.cuda_build import build_extension
    return build_extension("planted_shared", CU_PATH, BINDING, capability)


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo

    if case.variant not in VARIANTS:
        raise Unsupported(f"unknown variant {case.variant!r}; known: {', '.join(VARIANTS)}")
    if ctx.device.type != "cuda":
        raise Unsupported("needs a CUDA GPU; torch.cuda.is_available() is False")
    n = case.params["n"]
    x = ctx.tensor("x", (n,), torch.float32)
    out = ctx.tensor("out", (n,), torch.float32, watch=True)
    x.copy_((torch.arange(n, dtype=torch.float32) % 5 + 1).to(ctx.device))
    module = _module(torch.cuda.get_device_capability(ctx.device))

    def once() -> None:
        stream = torch.cuda.current_stream(ctx.device).cuda_stream
        module.launch(x.data_ptr(), out.data_ptr(), n, VARIANTS[case.variant], stream)

    once()
    return RunInfo(kernel=KERNEL, outputs={"out": out}, relaunch=once)
