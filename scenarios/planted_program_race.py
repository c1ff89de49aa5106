"""Planted races between the program instances of one Triton launch: calibration for the trace's race check.

`kernels/planted/program_race.py`: a program storing into its neighbour's slot (a window bounded by a constant,
not by the slot) must be a `trace_race` race on `out`, exactly the first element of every slot but the first; an
in-place 3-point smoothing must be a race on `x`, the two elements on either side of every slot edge; a shared row
accumulated without a lock must be a race on all of `acc`. Their twins are clean: the window bounded by the slot,
the smoothing into a second tensor, the row under a spin lock (tl.atomic_cas / tl.atomic_xchg), a total by
tl.atomic_add, and a neighbour's element written with the value the neighbour writes too (identical values: a
note, not a finding). The expected bytes come from the kernels' own addressing (`raced_bytes`).

No access leaves its tensor: only the race check sees these bugs, and it runs where the trace does (Triton's
interpreter, no GPU). On a GPU the buggy variants are `not applicable`, saying so, and the twins clean.
"""
from __future__ import annotations

from gpu_memsafety.kernels.planted.program_race import ITEM, KERNELS, VARIANTS, raced_bytes
from gpu_memsafety.model import GUARD, INSIDE, MEMCHECK, RACE, TRACE, TRACE_RACE, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case, Param, Scenario

NAME = "planted_program_race"
N = 1000          # 8 programs of 128 elements, the last one partial
WHY = {"slot_overlap": "each program also stores into the first element of its neighbour's slot",
       "inplace_smooth": "in-place smoothing reads the elements its neighbours write",
       "unlocked_accumulate": "every program adds into one shared row with a plain load and store"}


def _cases() -> list[Case]:
    return [Case(NAME, variant, {"n": N}, f"triton-n{N}", ("calibration",)) for variant in VARIANTS]


def _expect(case: Case) -> Expectation:
    buffer, runs = raced_bytes(case.variant, case.params["n"])
    if not runs:
        return Expectation()
    return Expectation((ExpectedFinding(RACE, buffer, (TRACE_RACE,), region=INSIDE, bytes=sum(e - s for s, e in runs),
                                        ranges=runs),), f"{WHY[case.variant]}; only the trace's race check sees it")


def _describe(case: Case, buffer: str, start: int, end: int) -> str:
    return f"{buffer}[{start // ITEM}..{(end - 1) // ITEM}] (elements)"


SCENARIO = Scenario(
    name=NAME,
    summary="planted races between program instances (a neighbour's slot written, in-place smoothing, an unlocked "
            "shared row) and their clean twins (lock, atomics, identical values)",
    adapter="gpu_memsafety.kernels.planted.program_race:run_case",
    params=(Param("n", int, low=1, high=1 << 24),),
    variants=VARIANTS,
    cases=_cases,
    expect=_expect,
    kernel=lambda case: KERNELS[case.variant],
    needs_gpu=lambda case: False,
    describe=_describe,
    detectors=(GUARD, MEMCHECK, TRACE, TRACE_RACE),
    timeout_s=120.0,
)
