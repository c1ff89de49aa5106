"""`fake_rows`: CPU stand-ins for a kernel whose declared output is a `ctx.rows(..., used_rows=T)` buffer handed back
whole, unused rows included (tests/judge/test_derived.py only): `correct` writes its used rows, `unused_read` also reads
the first unused row into each used row (an overread of unused rows, which poison sees)."""
from __future__ import annotations

from gpu_memsafety.model import GUARD, OVERREAD, POISON, UNINIT, UNUSED_ROW, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case

from _fake import fake_scenario

NAME = "fake_rows"
ROWS, USED, WIDTH = 8, 5, 4         # float32 elements per row, no padding
VARIANTS = ("correct", "unused_read")


def _expect(case: Case) -> Expectation:
    if case.variant == "unused_read":
        return Expectation((ExpectedFinding(OVERREAD, "y", region=UNUSED_ROW),), "reads the first unused row")
    return Expectation()


SCENARIO = fake_scenario(NAME, "a rows output handed back whole (poison-mode tests only)", "fake_poison_adapters:run_rows",
                         VARIANTS, _expect, n=ROWS, detectors=(GUARD, POISON, UNINIT))
