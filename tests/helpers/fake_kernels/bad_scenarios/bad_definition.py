"""A scenario whose definition is wrong (a parameter out of its declared range): collecting it must fail
the run, under xdist too, never read as passed (tests/engine/test_scaleout.py, which names this file on pytest's
command line)."""
from __future__ import annotations

from gpu_memsafety.model import Expectation
from gpu_memsafety.scenario.definition import Case, Param, Scenario

SCENARIO = Scenario(
    name="bad_definition",
    summary="a case whose parameter is out of range (tests only)",
    adapter="fake_adapters:run_case",
    params=(Param("n", int, low=1, high=1 << 20),),
    variants=("clean",),
    cases=lambda: [Case("bad_definition", "clean", {"n": 0}, "n0")],
    expect=lambda case: Expectation(),
    kernel=lambda case: "fake_copy",
    needs_gpu=lambda case: False,
    timeout_s=10.0,
)
