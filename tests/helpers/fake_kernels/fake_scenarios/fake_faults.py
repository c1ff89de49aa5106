"""`fake_faults`: a scenario whose adapter (tests/helpers/fake_kernels/fake_adapters.py) fails in chosen ways.

Loaded from this file by the tests (and by the worker, which imports a case's scenario from the file the
parent found it in). Every case runs on the CPU (needs_gpu is False); its deadline is 10 s, which
the tests scale down with RunOptions.timeout_scale.
"""
from __future__ import annotations

import os

from gpu_memsafety.model import DETECTORS, GUARD, MEMCHECK, OVERREAD, OVERWRITE, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case, Param, Scenario

NAME = "fake_faults"
N = 4000
VARIANTS = ("clean", "overwrite", "overread", "hang", "kill", "raise", "unsupported", "oom", "kill_pytest_worker",
            "illegal_address", "far_write", "refused", "no_launch", "slow", "stuck_exit")
FAR = 2_147_450_881   # far_write: the fake sanitizer reports a 4-byte write this many bytes before dst


def far_offset() -> int:
    """Where the fake sanitizer's far write lands, from dst's first byte: -FAR, or FAKE_FAR_OFFSET where a test sets
    another (tests/engine/test_fault_injection.py, for a python whose heap lies below 2 GiB). Read at each call: the
    scenario module may be loaded before the test sets it."""
    return int(os.environ.get("FAKE_FAR_OFFSET", -FAR))
TIMEOUT_S = 10.0


def _cases() -> list[Case]:
    cases = [Case(NAME, variant, {"n": N}, f"n{N}") for variant in VARIANTS]
    cases.append(Case(NAME, "clean", {"n": 64}, "n64"))
    return cases


def _expect(case: Case) -> Expectation:
    n = case.params["n"]
    if case.variant == "overwrite":
        return Expectation((ExpectedFinding(OVERWRITE, "dst", (GUARD,), region="past_end", bytes=1,
                                            ranges=((n, n + 1),)),), "1 byte written past dst's end")
    if case.variant == "overread":
        # Only a (fake) sanitizer can report it: the fake compute-sanitizer writes one 4-byte read record.
        return Expectation((ExpectedFinding(OVERREAD, "src", (MEMCHECK,), region="past_end", bytes=4,
                                            ranges=((n, n + 4),)),), "4 bytes read past src's end")
    if case.variant == "far_write":
        # A wrapped int32 offset: outside every allocation, seen only by a (fake) sanitizer.
        far = far_offset()
        return Expectation((ExpectedFinding(OVERWRITE, "dst", (MEMCHECK,), region="before_start" if far < 0 else "past_end",
                                            bytes=4, ranges=((far, far + 4),)),), f"a write at dst{far:+,}")
    return Expectation()


SCENARIO = Scenario(
    name=NAME,
    summary="adapters that hang, die, raise or refuse (fault injection; tests only)",
    adapter="fake_adapters:run_case",
    params=(Param("n", int, low=1, high=1 << 20),),
    variants=VARIANTS,
    cases=_cases,
    expect=_expect,
    kernel=lambda case: "fake_copy",
    needs_gpu=lambda case: False,
    detectors=DETECTORS,     # racecheck and synccheck too: the hazard-mode tests run its cases under them
    timeout_s=TIMEOUT_S,
)
