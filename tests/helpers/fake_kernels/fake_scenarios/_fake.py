"""The shape every CPU stand-in scenario of tests/helpers/fake_kernels shares: one size parameter `n`, one case per
variant at a fixed n, no GPU, a short deadline. Not a scenario file itself (a leading underscore: not scanned)."""
from __future__ import annotations

from typing import Callable, Sequence

from gpu_memsafety.model import Expectation
from gpu_memsafety.scenario.definition import Case, Param, Scenario


def fake_scenario(name: str, summary: str, adapter: str, variants: Sequence[str], expect: Callable[[Case], Expectation],
                  *, n: int, kernel: str = "fake", n_low: int = 1, **extra: object) -> Scenario:
    return Scenario(
        name=name, summary=summary, adapter=adapter,
        params=(Param("n", int, low=n_low, high=1 << 20),),
        variants=tuple(variants),
        cases=lambda: [Case(name, v, {"n": n}, f"n{n}") for v in variants],
        expect=expect, kernel=lambda case: kernel, needs_gpu=lambda case: False, timeout_s=10.0,
        **extra,  # type: ignore[arg-type]
    )
