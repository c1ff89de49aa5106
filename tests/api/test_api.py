"""The public API (gpu_memsafety.api): every name it promises resolves, and one case runs from Python."""
from __future__ import annotations

import pytest

import gpu_memsafety.api as api
from gpu_memsafety import model

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)


def test_every_public_name_resolves_and_names_have_one_spelling() -> None:
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert set(api.DETECTORS) == {api.GUARD, api.MEMCHECK, api.GUARD_PAGE, api.POISON, api.UNINIT, api.TRACE, api.TRACE_RACE,
                                  api.RACECHECK, api.SYNCCHECK}
    assert set(api.REGIONS) == {api.BEFORE_START, api.PAST_END, api.ROW_PADDING, api.UNUSED_ROW, api.INSIDE,
                                api.SHARED_MEMORY}
    assert api.Outcome is model.Outcome and api.CaseResult is model.CaseResult


def test_run_case_returns_the_typed_result_of_one_case(tmp_path) -> None:
    result = api.run_case("planted_oob[overwrite-triton-n4000-x1]", mode="guard", workdir=tmp_path)
    assert isinstance(result, api.CaseResult)
    assert result.outcome is api.Outcome.EXPECTED_FINDING, result.message
    [finding] = result.findings
    assert (finding.detector, finding.kind, finding.buffer) == (api.GUARD, api.OVERWRITE, "dst")


@pytest.mark.parametrize("kwargs, field", [({"mode": "valgrind"}, "mode"), ({"cover": "some"}, "cover")])
def test_run_case_refuses_what_it_does_not_know(kwargs, field) -> None:
    with pytest.raises(api.ScenarioError, match=field):
        api.run_case("planted_oob[overwrite-triton-n4000-x1]", **kwargs)
    with pytest.raises(api.ScenarioError):
        api.run_case("no_such_scenario[x]", mode="guard")
