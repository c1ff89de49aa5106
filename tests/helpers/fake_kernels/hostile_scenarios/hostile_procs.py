"""`hostile_procs`: a scenario whose adapter (hostile_adapters.py, beside it) leaves processes running, for
tests/scenario/test_scenario_isolation.py: a plain child, a daemon that forks twice into a session of its own, and one
that also ends the worker in the case. Every one must be gone when its case (or its worker) is, and be named."""
from __future__ import annotations

from gpu_memsafety.model import Expectation
from gpu_memsafety.scenario.definition import Case, Param, Scenario

NAME = "hostile_procs"
VARIANTS = ("clean", "child", "daemon", "daemon_then_die")

SCENARIO = Scenario(
    name=NAME,
    summary="adapters that leave processes behind (tests only)",
    adapter="hostile_adapters:run_case",
    params=(Param("n", int, low=1, high=1 << 20),),
    variants=VARIANTS,
    cases=lambda: [Case(NAME, v, {"n": 64}, "n64") for v in VARIANTS],
    expect=lambda case: Expectation(),
    kernel=lambda case: "fake_copy",
    needs_gpu=lambda case: False,
    timeout_s=10.0,
)
