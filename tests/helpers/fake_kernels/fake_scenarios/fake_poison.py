"""`fake_poison`: CPU stand-ins for kernels whose adapter declares no output (tests/detectors/test_poison.py only)."""
from __future__ import annotations

from gpu_memsafety.model import GUARD, OVERREAD, POISON, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case

from _fake import fake_scenario

NAME = "fake_poison"
N = 1000
VARIANTS = ("undeclared_overread", "undeclared_clean", "foreign_undeclared", "foreign_declared", "foreign_kept")


def _expect(case: Case) -> Expectation:
    if case.variant == "undeclared_overread" or case.variant in ("foreign_declared", "foreign_kept"):
        return Expectation((ExpectedFinding(OVERREAD, "x", (POISON,), region="past_end"),))
    return Expectation()


SCENARIO = fake_scenario(NAME, "CPU stand-ins whose adapter declares no output (poison-mode tests only)",
                         "fake_poison_adapters:run_case", VARIANTS, _expect, n=N, n_low=2, detectors=(GUARD, POISON))
