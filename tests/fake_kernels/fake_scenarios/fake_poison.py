"""`fake_poison`: CPU stand-ins for kernels whose adapter declares no output (tests/test_poison.py only)."""
from __future__ import annotations

from harness.model import GUARD, OVERREAD, POISON, Expectation, ExpectedFinding
from harness.scenario import Case, Param, Scenario

NAME = "fake_poison"
N = 1000
VARIANTS = ("undeclared_overread", "undeclared_clean")


def _expect(case: Case) -> Expectation:
    if case.variant == "undeclared_overread":
        return Expectation((ExpectedFinding(OVERREAD, "x", (POISON,), region="past_end"),))
    return Expectation()


SCENARIO = Scenario(
    name=NAME,
    summary="CPU stand-ins whose adapter declares no output (poison-mode tests only)",
    adapter="fake_poison_adapters:run_case",
    params=(Param("n", int, low=2, high=1 << 20),),
    variants=VARIANTS,
    cases=lambda: [Case(NAME, v, {"n": N}, f"n{N}") for v in VARIANTS],
    expect=_expect,
    kernel=lambda case: "fake",
    needs_gpu=lambda case: False,
    detectors=(GUARD, POISON),
    timeout_s=10.0,
)
