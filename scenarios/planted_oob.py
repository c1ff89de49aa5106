"""Planted bugs: calibration for every detector.

Each variant plants one known bug in a small copy-and-sum kernel (`kernels/planted/adapter.py`, Triton; and a CUDA
C++ twin in `kernels/planted/cuda.py`): the harness must report exactly those bytes, in the right buffer
and region, and nothing for the `clean` variant. If this scenario regresses, no other verdict can be trusted.

Findings that must be right (issue 19; kernels/planted/calibration.py): a 16-byte vector load whose tail runs
8 bytes past a 4,008-byte tensor (an overread of those 8 bytes, never a "misaligned" record) next to a correct
vectorized sum with a scalar tail (clean: the tensor must start aligned); an atomic add one int32 past the end
(an overwrite of 4 bytes); a write 2 GiB before dst from a wrapped int32 offset, batched with the clean cases
(it is traced to its own case, and they stay clean).
"""
from __future__ import annotations

from gpu_memsafety.model import GUARD, GUARD_PAGE, MEMCHECK, OVERREAD, OVERWRITE, POISON, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case, Param, Scenario
from gpu_memsafety.kernels.planted.calibration import FAR_BYTES, FAR_OFFSET

N = 4000  # a 4,000-byte tensor
N_VEC = 4008  # fp32 bytes that are not a multiple of 16: the last 16-byte vector reads 8 bytes past the end
SMOKE = ("clean", "overread", "overwrite", "underwrite", "underread")
CALIBRATION = {"vec16_overread": N_VEC, "vec16_clean": N_VEC, "atomic_past_end": N, "far_write": N}


def _cases() -> list[Case]:
    cases = []
    for impl in ("triton", "cuda"):
        for variant in SMOKE:
            cases.append(Case("planted_oob", variant, {"impl": impl, "n": N, "extra": 1}, f"{impl}-n{N}-x1", ("smoke",)))
        for variant, n in CALIBRATION.items():
            cases.append(Case("planted_oob", variant, {"impl": impl, "n": n, "extra": 1}, f"{impl}-n{n}-x1", ("calibration",)))
    return cases


def _expect(case: Case) -> Expectation:
    n, extra = case.params["n"], case.params["extra"]
    if case.variant == "overread":
        return Expectation((ExpectedFinding(OVERREAD, "src", (MEMCHECK, POISON, GUARD_PAGE), bytes=extra,
                                            ranges=((n, n + extra),)),), "planted read past the end")
    if case.variant == "overwrite":
        # A guard-page fault cannot tell a read from a write: it matches this overwrite (model.ACCESS_BLIND); where
        # the bytes land in the alignment tail before the page, only the guard markers see it (verdict.decide).
        return Expectation((ExpectedFinding(OVERWRITE, "dst", (GUARD, MEMCHECK, GUARD_PAGE), bytes=extra,
                                            ranges=((n, n + extra),)),), "planted write past the end")
    if case.variant == "underwrite":
        # memcheck sees it where the tensor is its whole allocation (layout.EXACT), the front guard's markers
        # where it has one, guard_page's front-page pass as a fault named dst/before_start (H200 run 16).
        return Expectation((ExpectedFinding(OVERWRITE, "dst", (GUARD, MEMCHECK, GUARD_PAGE), region="before_start",
                                            bytes=extra, ranges=((-extra, 0),)),), "planted write before the start")
    if case.variant == "underread":
        # Reads are invisible to the markers; guard_page sees it in its front-page pass (H200 run 16).
        return Expectation((ExpectedFinding(OVERREAD, "src", (MEMCHECK, POISON, GUARD_PAGE), region="before_start",
                                            bytes=extra, ranges=((-extra, 0),)),), "planted read before the start")
    if case.variant == "vec16_overread":
        past = -n % 16          # the last 16-byte vector's bytes beyond the end
        return Expectation((ExpectedFinding(OVERREAD, "src", (MEMCHECK, POISON), region="past_end", bytes=past,
                                            ranges=((n, n + past),)),), "16-byte vector loads, the last one past the end")
    if case.variant == "atomic_past_end":
        return Expectation((ExpectedFinding(OVERWRITE, "dst", (GUARD, MEMCHECK), region="past_end", bytes=4 * extra,
                                            ranges=((n, n + 4 * extra),)),), "atomic add one int32 past the end")
    if case.variant == "far_write":
        return Expectation((ExpectedFinding(OVERWRITE, "dst", (MEMCHECK,), region="before_start", bytes=FAR_BYTES,
                                            ranges=((FAR_OFFSET, FAR_OFFSET + FAR_BYTES),)),),
                           "a wrapped int32 row offset writes 2 GiB before dst")
    return Expectation()


def describe_bytes(case: Case, buffer: str, start: int, end: int) -> str:
    """A buffer's bytes in the words of a 1-D byte tensor of case.params["n"] bytes (other planted scenarios use it too)."""
    n = case.params["n"]
    if start >= n:
        return f"{buffer}[{start}..{end - 1}]: {start - n + 1}..{end - n} bytes past the end"
    if end <= 0:
        return f"{-start:,} bytes before {buffer}[0]"
    return f"{buffer}[{start}..{end - 1}]"


def _kernel_name(case: Case) -> str:
    base = {"vec16_overread": "planted_vec16_sum", "vec16_clean": "planted_vec16_tail_sum",
            "atomic_past_end": "planted_atomic_past_end", "far_write": "planted_far_write"}.get(case.variant, "planted_copy_sum")
    return base if case.params["impl"] == "triton" else base + "_cuda"


SCENARIO = Scenario(
    name="planted_oob",
    summary="planted 1-byte overread / overwrite / underwrite / underread in a copy-and-sum kernel (detector calibration)",
    adapter="gpu_memsafety.kernels.planted.adapter:run_case",
    params=(Param("impl", str, choices=("triton", "cuda")), Param("n", int, low=1, high=1 << 30),
            Param("extra", int, low=1, high=4096)),
    variants=(*SMOKE, *CALIBRATION),
    cases=_cases,
    expect=_expect,
    kernel=lambda case: _kernel_name(case),
    needs_gpu=lambda case: case.params["impl"] == "cuda" or case.variant == "far_write",
    describe=describe_bytes,
    timeout_s=120.0,
    cost_s=0.3,            # seconds per case in a warm worker, measured on the H200 (run 7): 0.01-1.5
)
