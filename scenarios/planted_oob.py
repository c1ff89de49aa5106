"""Planted 1-byte bugs: calibration for every detector.

Each variant plants one known bug in a small copy-and-sum kernel (`kernels/planted/adapter.py`, Triton; and a CUDA
C++ twin in `kernels/planted/cuda.py`): the harness must report exactly those bytes, in the right buffer
and region, and nothing for the `clean` variant. If this scenario regresses, no other verdict can be trusted.
"""
from __future__ import annotations

from harness.model import GUARD, GUARD_PAGE, MEMCHECK, OVERREAD, OVERWRITE, POISON, Expectation, ExpectedFinding
from harness.scenario import Case, Param, Scenario

N = 4000  # a 4,000-byte tensor


def _cases() -> list[Case]:
    cases = []
    for impl in ("triton", "cuda"):
        for variant in ("clean", "overread", "overwrite", "underwrite"):
            cases.append(Case("planted_oob", variant, {"impl": impl, "n": N, "extra": 1}, f"{impl}-n{N}-x1", ("smoke",)))
    return cases


def _expect(case: Case) -> Expectation:
    n, extra = case.params["n"], case.params["extra"]
    if case.variant == "overread":
        return Expectation((ExpectedFinding(OVERREAD, "src", (MEMCHECK, POISON, GUARD_PAGE), bytes=extra,
                                            ranges=((n, n + extra),)),), "planted read past the end")
    if case.variant == "overwrite":
        return Expectation((ExpectedFinding(OVERWRITE, "dst", (GUARD, MEMCHECK), bytes=extra, ranges=((n, n + extra),)),
                            ExpectedFinding(OVERREAD, "dst", (GUARD_PAGE,))), "planted write past the end")
    if case.variant == "underwrite":
        return Expectation((ExpectedFinding(OVERWRITE, "dst", (GUARD,), region="before_start", bytes=extra,
                                            ranges=((-extra, 0),)),), "planted write before the start")
    return Expectation()


def _describe(case: Case, buffer: str, start: int, end: int) -> str:
    n = case.params["n"]
    if start >= n:
        return f"{buffer}[{start}..{end - 1}]: {start - n + 1}..{end - n} bytes past the end"
    if end <= 0:
        return f"{-start} bytes before {buffer}[0]"
    return f"{buffer}[{start}..{end - 1}]"


SCENARIO = Scenario(
    name="planted_oob",
    summary="planted 1-byte overread / overwrite / underwrite in a copy-and-sum kernel (detector calibration)",
    adapter="kernels.planted.adapter:run_case",
    params=(Param("impl", str, choices=("triton", "cuda")), Param("n", int, low=1, high=1 << 30),
            Param("extra", int, low=1, high=4096)),
    variants=("clean", "overread", "overwrite", "underwrite"),
    cases=_cases,
    expect=_expect,
    kernel=lambda case: "planted_copy_sum" if case.params["impl"] == "triton" else "planted_copy_sum_cuda",
    needs_gpu=lambda case: case.params["impl"] == "cuda",
    describe=_describe,
    timeout_s=120.0,
)
