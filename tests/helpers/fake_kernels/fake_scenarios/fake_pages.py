"""`fake_pages`: a scenario whose adapter (tests/helpers/fake_kernels/fake_page_adapters.py) "faults" as a guard page would,
for tests/detectors/test_pageprobe.py's runner test on the CPU (no kernel, no GPU: the adapter looks at where each buffer was
placed and raises the CUDA error a fault leaves).

Buffers a (watched), b and c. Variants: past_end_b (b is read past its end), before_start_a (a is read before its
start), needs_two (faults only with a and b on back pages together), clean, no_vmm (its buffers stay torch
allocations, as without CUDA virtual memory: no page at all).
"""
from __future__ import annotations

from gpu_memsafety.model import BEFORE_START, GUARD_PAGE, OVERREAD, PAST_END, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case

from _fake import fake_scenario

NAME = "fake_pages"
N = 4000
VARIANTS = ("past_end_b", "before_start_a", "needs_two", "clean", "no_vmm")


def _expect(case: Case) -> Expectation:
    if case.variant == "past_end_b":
        return Expectation((ExpectedFinding(OVERREAD, "b", (GUARD_PAGE,), region=PAST_END),), "b read past its end")
    if case.variant in ("before_start_a", "needs_two"):
        return Expectation((ExpectedFinding(OVERREAD, "a", (GUARD_PAGE,), region=BEFORE_START),), "a read before its start")
    return Expectation()


SCENARIO = fake_scenario(NAME, "adapters that fault like a guard page by where their buffers sit (tests only)",
                         "fake_page_adapters:run_case", VARIANTS, _expect, n=N, kernel="fake_pages", cost_s=0.01)
