"""`fake_uninit`: CPU stand-ins for kernels that read never-written bytes (tests/detectors/test_uninit.py only).

Loaded from this file by the tests and by the worker (the job names the file; see harness/gpu_memsafety/scenario/registry.py)."""
from __future__ import annotations

from gpu_memsafety.model import GUARD, OVERWRITE, UNINIT, UNINIT_READ, UNWRITTEN, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case

from _fake import fake_scenario

NAME = "fake_uninit"
N = 1000
VARIANTS = ("clean", "input_half_written", "external_output", "nondeterministic", "sparse_noise",
            "sparse_noise_accumulate", "lut_partly_written", "tail_unwritten", "marker_valued_overrun",
            "read_then_written", "input_partly_read", "guard_copy_overrun", "flags_unwritten", "min_unreset", "times_zero")
# read_then_written: the element slots of x read before a later "launch" writes them (held-out hs_f)
SLOTS = ((100, 108), (300, 308), (620, 628), (900, 908))


def _expect(case: Case) -> Expectation:
    n = case.params["n"]
    if case.variant == "input_half_written":
        return Expectation((ExpectedFinding(UNINIT_READ, "x", (UNINIT,), region="inside", bytes=n // 2 * 4,
                                            ranges=((n // 2 * 4, n * 4),)),))
    if case.variant == "lut_partly_written":
        return Expectation((ExpectedFinding(UNINIT_READ, "x", (UNINIT,), region="inside", bytes=n // 2 * 4,
                                            ranges=((n // 2 * 4, n * 4),)),))
    if case.variant == "tail_unwritten":
        return Expectation((ExpectedFinding(UNWRITTEN, "out", (UNINIT,), region="inside", bytes=n // 2 * 4,
                                            ranges=((n // 2 * 4, n * 4),)),))
    if case.variant == "guard_copy_overrun":
        return Expectation((ExpectedFinding(OVERWRITE, "out", (GUARD,), region="past_end", bytes=20,
                                            ranges=((n * 4, n * 4 + 20),)),))
    if case.variant == "marker_valued_overrun":
        return Expectation((ExpectedFinding(OVERWRITE, "out", (GUARD,), region="past_end", bytes=16,
                                            ranges=((n * 4, n * 4 + 16),)),))
    if case.variant == "flags_unwritten":
        return Expectation((ExpectedFinding(UNINIT_READ, "flags", (UNINIT,), region="inside", bytes=n - n // 2,
                                            ranges=((n // 2, n),)),))
    if case.variant == "min_unreset":
        return Expectation((ExpectedFinding(UNINIT_READ, "running", (UNINIT,), region="inside"),))
    if case.variant == "times_zero":
        return Expectation((ExpectedFinding(UNINIT_READ, "out", (UNINIT,), region="inside"),))
    if case.variant in ("read_then_written", "input_partly_read"):
        return Expectation((ExpectedFinding(UNINIT_READ, "x", (UNINIT,), region="inside"),))
    if case.variant in ("external_output", "sparse_noise_accumulate"):
        return Expectation((ExpectedFinding(UNINIT_READ, "out", (UNINIT,), region="inside"),))
    return Expectation()


SCENARIO = fake_scenario(NAME, "CPU stand-ins for reads of never-written memory (uninit-mode tests only)",
                         "fake_uninit_adapters:run_case", VARIANTS, _expect, n=N, n_low=2, detectors=(GUARD, UNINIT))
