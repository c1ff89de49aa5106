"""Planted shared-memory race and invalid barrier (CUDA C++, kernels/planted/race.cu): racecheck and
synccheck calibration. Variants: `race` (tree reduction without its __syncthreads), `race_fixed`,
`divergent_barrier` (two halves of a block at two different __syncthreads), `barrier_fixed`.
Built with -lineinfo (harness/gpu_memsafety/util/cuda_build.py) so the tools name the source lines."""
from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType
from typing import Any

from gpu_memsafety.errors import Unsupported

CU_PATH = Path(__file__).with_name("race.cu")
BINDING = """
#include <torch/extension.h>
#include <cstdint>
void planted_race_launch(int, uintptr_t, uintptr_t, long long, int, uintptr_t);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch", &planted_race_launch); }
"""
# variant -> (kernel index in planted_race_launch, flag, kernel name); flag is sync / divergent
VARIANTS = {
    "race": (0, 0, "planted_reduce_race"),
    "race_fixed": (0, 1, "planted_reduce_race"),
    "divergent_barrier": (1, 1, "planted_divergent_barrier"),
    "barrier_fixed": (1, 0, "planted_divergent_barrier"),
}


def source_line(marker: str) -> int:
    """Line of race.cu whose comment holds `marker` ("RACE", "BARRIER A"): what the tools must name."""
    for number, text in enumerate(CU_PATH.read_text().splitlines(), start=1):
        if f"// {marker}" in text:
            return number
    raise ValueError(f"no line marked {marker!r} in {CU_PATH.name}")


@functools.cache
def _module(capability: tuple[int, int]) -> ModuleType:
    from gpu_memsafety.util.cuda_build import build_extension
    return build_extension("planted_race", CU_PATH, BINDING, capability)


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo

    if case.variant not in VARIANTS:
        raise Unsupported(f"unknown variant {case.variant!r}; known: {', '.join(VARIANTS)}")
    if ctx.device.type != "cuda":
        raise Unsupported("needs a CUDA GPU; torch.cuda.is_available() is False")
    which, flag, kernel = VARIANTS[case.variant]
    n = case.params["n"]
    x = ctx.tensor("x", (n,), torch.float32)
    out = ctx.tensor("out", (n,), torch.float32, watch=True)
    x.copy_((torch.arange(n, dtype=torch.float32) % 7 + 1).to(ctx.device))
    out.zero_()
    module = _module(torch.cuda.get_device_capability(ctx.device))

    def once() -> None:
        stream = torch.cuda.current_stream(ctx.device).cuda_stream
        module.launch(which, x.data_ptr(), out.data_ptr(), n, flag, stream)

    once()
    return RunInfo(kernel=kernel, outputs={"out": out}, relaunch=once)


N = 4096   # 16 blocks of 256 threads


def scenario(name: str, bug: str, fixed: str, finding: Any, why: str, summary: str) -> Any:
    """The calibration scenario of one planted hazard (planted_race, planted_barrier): its buggy variant expects
    `finding` (an ExpectedFinding of the one detector that sees it) with reason `why`, its fixed twin is clean.
    CUDA only (needs a GPU and nvcc); each scenario uses only its own detector, so each mode judges only the bug it
    can see."""
    from gpu_memsafety.model import Expectation
    from gpu_memsafety.scenario.definition import Case, Param, Scenario

    own = (bug, fixed)
    return Scenario(
        name=name,
        summary=summary,
        adapter="gpu_memsafety.kernels.planted.race:run_case",
        params=(Param("n", int, low=1, high=1 << 28),),
        variants=own,
        cases=lambda: [Case(name, v, {"n": N}, f"cuda-n{N}") for v in own],
        expect=lambda case: Expectation((finding,), why) if case.variant == bug else Expectation(),
        kernel=lambda case: VARIANTS[case.variant][2],
        needs_gpu=lambda case: True,
        detectors=finding.detectors,
        timeout_s=120.0,
    )
