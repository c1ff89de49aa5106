"""`fake_recount`: a CPU stand-in for a kernel whose warps stop at memcheck's first error, so memcheck's overread
count is short (held-out hu_a on the H200: 64 of 128 B). The adapter reads 32 B past x's end into its declared
output; the fake memcheck of tests/detectors/test_complete.py reports only the last 16 of them. "short_count" expects nothing
(its count judges the report); "any_bytes" expects the overread with any bytes (its count judges nothing)."""
from __future__ import annotations

from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, POISON, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case

from _fake import fake_scenario

NAME = "fake_recount"
N = 1000
VARIANTS = ("short_count", "any_bytes")


def _expect(case: Case) -> Expectation:
    if case.variant == "any_bytes":
        return Expectation((ExpectedFinding(OVERREAD, "x", (MEMCHECK, POISON), region="past_end"),))
    return Expectation()


SCENARIO = fake_scenario(NAME, "CPU stand-in for a memcheck overread count cut short by the kernel's end",
                         "fake_poison_adapters:run_recount", VARIANTS, _expect, n=N, n_low=2,
                         detectors=(GUARD, MEMCHECK, POISON))
