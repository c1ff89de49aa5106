"""Planning that spares predictable reruns (issue 26, item 4: far fewer process start-ups).

- A case expected to leave records that name no buffer (a shared-memory access, racecheck's race, synccheck's
  barrier) runs alone from the start: only its kernel's name ties such a record to a case, so beside a twin of
  the same kernel (planted_race's fixed twin) both were sent to run again one per process after a batch run that
  judged nothing (run 24: 3 processes for 2 cases in planted_race, planted_barrier and planted_shared).
- A last-expert case of a triton_kernels copy the installed triton cannot import costs next to nothing (it is
  `not applicable` at once): the planner no longer fills whole batches with them.
"""
from __future__ import annotations

import pytest

from gpu_memsafety.engine import schedule
from gpu_memsafety.model import (BARRIER, OVERREAD, PAST_END, RACE, SHARED, SHARED_MEMORY, Expectation,
                                 ExpectedFinding)
from gpu_memsafety.scenario import registry
from gpu_memsafety.scenario.definition import Case, Scenario


def _scenario(findings: tuple[ExpectedFinding, ...], *, isolated: bool = False) -> tuple[Scenario, Case]:
    scenario = Scenario(name="toy", summary="toy", adapter="m:f", params=(), variants=("v",),
                        cases=lambda: [Case("toy", "v", {}, "v")], expect=lambda case: Expectation(findings),
                        kernel=lambda case: "k", needs_gpu=lambda case: False, isolated=lambda case: isolated)
    return scenario, scenario.build()[0]


@pytest.mark.parametrize("finding", [
    ExpectedFinding(RACE, SHARED),
    ExpectedFinding(BARRIER, "barrier"),
    ExpectedFinding(OVERREAD, SHARED, region=SHARED_MEMORY),
    ExpectedFinding(OVERREAD, SHARED),
])
def test_a_case_whose_records_name_only_a_kernel_runs_alone(finding: ExpectedFinding) -> None:
    scenario, case = _scenario((finding,))
    assert scenario.runs_alone(case)


def test_a_buffer_finding_or_a_clean_case_is_batched_unless_the_scenario_isolates_it() -> None:
    for findings in [(), (ExpectedFinding(OVERREAD, "w_scale", region=PAST_END),)]:
        scenario, case = _scenario(findings)
        assert not scenario.runs_alone(case)
        scenario, case = _scenario(findings, isolated=True)
        assert scenario.runs_alone(case)


def test_an_expectation_that_raises_is_left_to_the_judge_not_the_planner() -> None:
    def broken(case: Case) -> Expectation:
        raise KeyError("a scenario bug")
    scenario = Scenario(name="toy", summary="toy", adapter="m:f", params=(), variants=("v",),
                        cases=lambda: [Case("toy", "v", {}, "v")], expect=broken, kernel=lambda case: "k",
                        needs_gpu=lambda case: False)
    assert scenario.runs_alone(scenario.build()[0]) is False


def test_the_planted_hazard_twins_plan_as_one_process_each() -> None:
    """The default matrix: each buggy twin of race, barrier and shared is a batch of one, its fixed twin another;
    no batch holds a case that runs alone beside another."""
    scenarios = registry.all_scenarios()
    for name in ("planted_race", "planted_barrier", "planted_shared"):
        scenario = scenarios[name]
        cases = scenario.build()
        jobs = [schedule.Job(c.id, name, scenario.cost(c), scenario.runs_alone(c)) for c in cases]
        assert sum(j.alone for j in jobs) == sum(not scenario.expect(c).clean for c in cases) >= 1, name
        batches = schedule.plan(jobs, workers=8, max_batch=32)
        alone = {j.id for j in jobs if j.alone}
        for batch in batches:
            assert len(batch.ids) == 1 or not alone & set(batch.ids), (name, batch)


def test_a_copy_the_installed_triton_cannot_import_costs_almost_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpu_memsafety.scenarios.last_expert_oob_read as module
    scenario = module.SCENARIO
    case = next(c for c in scenario.build() if "gpt-oss" in c.tags and not scenario.variant(c).batched)
    monkeypatch.setattr(module, "copy_problem", lambda tk: "")
    applies = scenario.cost(case)
    monkeypatch.setattr(module, "copy_problem", lambda tk: "needs triton >= 3.8, found 3.6.0")
    assert scenario.cost(case) < 0.1 < 1.0 <= applies
