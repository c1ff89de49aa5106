"""CUDA C++ twin of the planted Triton kernel: the same planted bugs through nvcc-built code, so that the
harness's attribution is checked on SASS from nvcc as well as from Triton (source file and line included:
built with -lineinfo)."""
from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType
from typing import Any

from gpu_memsafety.errors import Unsupported

CU_PATH = Path(__file__).with_name("planted_cuda.cu")
BINDING = """
#include <torch/extension.h>
#include <cstdint>
void planted_launch(uintptr_t, uintptr_t, uintptr_t, long long, int, int, int, int, uintptr_t);
void planted_calibration_launch(int, uintptr_t, uintptr_t, long long, long long, uintptr_t);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("launch", &planted_launch);
  m.def("calibration", &planted_calibration_launch);
}
"""


@functools.cache
def build(capability: tuple[int, int]) -> ModuleType:
    from gpu_memsafety.util.cuda_build import build_extension
    return build_extension("planted", CU_PATH, BINDING, capability)


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo

    if ctx.device.type != "cuda":
        raise Unsupported("needs a CUDA GPU; torch.cuda.is_available() is False")
    n, extra = case.params["n"], case.params["extra"]
    src = ctx.tensor("src", (n,), torch.uint8, watch=True)
    dst = ctx.tensor("dst", (n,), torch.uint8, watch=True)
    src.copy_((torch.arange(n, dtype=torch.int64) % 7 + 1).to(torch.uint8).to(ctx.device))
    total = torch.zeros(1, dtype=torch.int32, device=ctx.device)
    module = build(torch.cuda.get_device_capability(ctx.device))
    r = extra if case.variant == "overread" else 0
    w = extra if case.variant == "overwrite" else 0
    lo = extra if case.variant == "underwrite" else 0
    rlo = extra if case.variant == "underread" else 0

    def once() -> None:
        stream = torch.cuda.current_stream(ctx.device).cuda_stream
        module.launch(src.data_ptr(), dst.data_ptr(), total.data_ptr(), n, r, lo, w, rlo, stream)

    once()
    return RunInfo(kernel="planted_copy_sum_cuda", outputs={"total": total}, relaunch=once)
