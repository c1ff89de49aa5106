"""Planted reads of never-written memory and unwritten outputs: calibration for uninit mode.

`kernels/planted/uninit.py` (Triton, and a CUDA C++ twin): accumulating into an output the host never wrote
must be an `uninit_read` of every byte of `out`; a launch grid one block short must leave exactly the last
block's bytes of `out` `unwritten`; both fixed twins must be clean. Only uninit mode sees these bugs: no byte
goes out of bounds, so guard markers and memcheck stay clean, and in their modes the buggy variants are
reported as needing uninit.
"""
from __future__ import annotations

from gpu_memsafety.model import GUARD, UNINIT, UNINIT_READ, UNWRITTEN, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case, Param, Scenario
from gpu_memsafety.kernels.planted.uninit import VARIANTS, block_elements

N = 4000        # elements: not a multiple of either block size, so the last block is a partial one
ITEM = 4        # float32


def _cases() -> list[Case]:
    return [Case("planted_uninit", variant, {"impl": impl, "n": N}, f"{impl}-n{N}")
            for impl in ("triton", "cuda") for variant in VARIANTS]


def _expect(case: Case) -> Expectation:
    n = case.params["n"]
    if case.variant == "accumulate_empty":
        return Expectation((ExpectedFinding(UNINIT_READ, "out", (UNINIT,), region="inside", bytes=n * ITEM,
                                            ranges=((0, n * ITEM),)),), "accumulates into an output nobody wrote")
    if case.variant == "grid_short":
        block = block_elements(case.params["impl"])
        first = ((n + block - 1) // block - 1) * block
        return Expectation((ExpectedFinding(UNWRITTEN, "out", (UNINIT,), region="inside", bytes=(n - first) * ITEM,
                                            ranges=((first * ITEM, n * ITEM),)),), "launch grid one block short")
    return Expectation()


def _describe(case: Case, buffer: str, start: int, end: int) -> str:
    return f"{buffer}[{start // ITEM}..{(end - 1) // ITEM}] (elements)"


SCENARIO = Scenario(
    name="planted_uninit",
    summary="planted read of never-written memory (accumulate into torch.empty) and unwritten output (grid one block short)",
    adapter="gpu_memsafety.kernels.planted.uninit:run_case",
    params=(Param("impl", str, choices=("triton", "cuda")), Param("n", int, low=1, high=1 << 28)),
    variants=VARIANTS,
    cases=_cases,
    expect=_expect,
    kernel=lambda case: "planted_accumulate" if case.params["impl"] == "triton" else "planted_accumulate_cuda",
    needs_gpu=lambda case: case.params["impl"] == "cuda",
    describe=_describe,
    detectors=(GUARD, UNINIT),
    timeout_s=120.0,
)
