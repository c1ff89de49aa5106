"""Planted bugs in unwatched buffers: calibration for "every buffer covered by default" (issue 20 item 1).

A kernel with several inputs and one output (kernels/planted/unwatched.py, Triton; unwatched.cu, its CUDA C++
twin): out[i] = (x[i] + x[i+1]) * w[i // 256], and each group's valid-element count into a scratch workspace. Its
adapter marks only the output `out` with watch=True, as a user naturally would; the bugs are elsewhere:
- input_overread: the last element reads x[n], 4 bytes past the end of the input x;
- input_overwrite: each group's count lands one slot late, 4 bytes past the end of scratch;
- clean: the fixed twin.
Before issue 20 only watched buffers got memcheck's placement (an exact allocation): memcheck never saw the overread (it
stayed in x's back guard, inside x's own allocation). Every buffer is covered by default now, so memcheck sees both
bugs; a run with `--cover watched` shows the old blind spot (the overread expected but not seen). Two sizes: 4,096
floats (16,384 B, a whole number of 256 B: the guard page sits right after x) and 4,000 floats (16,000 B: the read
lands in x's alignment tail, which a guard page cannot see; memcheck and poison still do).
"""
from __future__ import annotations

from gpu_memsafety.model import TRACE, GUARD, GUARD_PAGE, MEMCHECK, OVERREAD, OVERWRITE, POISON, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case, Param, Scenario
from gpu_memsafety.kernels.planted.unwatched import ITEM, VARIANTS, groups

NAME = "planted_unwatched"
SIZES = (4096, 4000)


def _cases() -> list[Case]:
    return [Case(NAME, variant, {"impl": impl, "n": n}, f"{impl}-n{n}", ("calibration",))
            for impl in ("triton", "cuda") for n in SIZES for variant in VARIANTS]


def _expect(case: Case) -> Expectation:
    n = case.params["n"]
    if case.variant == "input_overread":
        end = n * ITEM
        return Expectation((ExpectedFinding(OVERREAD, "x", (MEMCHECK, POISON, GUARD_PAGE), region="past_end", bytes=ITEM,
                                            ranges=((end, end + ITEM),)),),
                           "the last element reads x[n]: 4 bytes past the end of an unwatched input")
    if case.variant == "input_overwrite":
        end = groups(n) * ITEM
        return Expectation((ExpectedFinding(OVERWRITE, "scratch", (GUARD, MEMCHECK, GUARD_PAGE), region="past_end",
                                            bytes=ITEM, ranges=((end, end + ITEM),)),),
                           "the last group's count lands one slot past the end of an unwatched scratch buffer")
    return Expectation((), "neighbour read masked at the end, counts in their own slots (the fixed twin)")


def _describe(case: Case, buffer: str, start: int, end: int) -> str:
    size = {"x": case.params["n"], "out": case.params["n"]}.get(buffer, groups(case.params["n"]))
    first, last = start // ITEM, (end - 1) // ITEM
    where = f"{buffer}[{first}]" if first == last else f"{buffer}[{first}..{last}]"
    if first >= size:
        return f"{where}: {first - size + 1}..{last - size + 1} element(s) past the end ({size} elements)"
    return where


SCENARIO = Scenario(
    name=NAME,
    summary="planted overread of an unwatched input and overwrite of an unwatched scratch buffer (only the output "
            "is watched): calibration for covering every buffer",
    adapter="gpu_memsafety.kernels.planted.unwatched:run_case",
    params=(Param("impl", str, choices=("triton", "cuda")), Param("n", int, low=2, high=1 << 24)),
    variants=VARIANTS,
    cases=_cases,
    expect=_expect,
    kernel=lambda case: "planted_unwatched" + ("_cuda" if case.params["impl"] == "cuda" else ""),
    needs_gpu=lambda case: case.params["impl"] == "cuda",
    describe=_describe,
    detectors=(GUARD, MEMCHECK, GUARD_PAGE, POISON, TRACE),
    timeout_s=120.0,
    cost_s=0.3,
)
