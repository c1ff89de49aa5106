"""Scenario definitions: every real one loads and builds, and a bad one fails loudly, naming itself and the field.

A scenario that silently builds fewer cases, or a typo that makes a case skip, would hide a regression, so
definitions are validated when loaded. This module checks every scenario in scenarios/ and each validation
rule, the layout errors an adapter can hit, and the expectation arithmetic of padded_stride_scale_write
against numbers worked out by hand (H=2304, 5 tokens in 8 rows of 72 of 80 bytes).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import pytest
import torch

from gpu_memsafety.placement import layout as L
from gpu_memsafety.scenario import registry
from gpu_memsafety.placement.guard import Arena
from gpu_memsafety.model import GUARD, MEMCHECK, OVERWRITE, UNINIT, UNWRITTEN, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case, Param, Scenario, ScenarioError, grid

# ---------------------------------------------------------------------------------------- real scenarios

ALL = registry.all_scenarios()


def test_scenarios_directory_holds_the_known_scenarios() -> None:
    assert {"planted_oob", "padded_stride_scale_write"} <= set(ALL)
    assert set(ALL) == {m.rsplit(".", 1)[1] for m in registry.scenario_modules()}


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_scenario_builds_and_describes_each_case(name: str) -> None:
    scenario = ALL[name]
    cases = scenario.build()
    assert cases
    for case in cases:
        assert case.scenario == name and case.variant in scenario.variants
        assert isinstance(scenario.expect(case), Expectation)
        assert isinstance(scenario.needs_gpu(case), bool)
        assert scenario.kernel(case)
        for e in scenario.expect(case).findings:
            assert set(e.detectors) <= set(scenario.detectors), f"{case.id}: expects a detector the scenario does not use"


def test_case_ids_are_unique_across_all_scenarios() -> None:
    ids = [case.id for scenario in ALL.values() for case in scenario.build()]
    assert len(ids) == len(set(ids))


def test_find_case_by_id() -> None:
    scenario, case = registry.find_case("planted_oob[overread-triton-n4000-x1]")
    assert (scenario.name, case.variant, dict(case.params)) == ("planted_oob", "overread",
                                                               {"impl": "triton", "n": 4000, "extra": 1})


def test_unknown_scenario_and_unknown_case_name_what_is_known() -> None:
    with pytest.raises(ScenarioError, match=r"scenario 'nope', field 'name': no such scenario; known: .*planted_oob"):
        registry.get("nope")
    with pytest.raises(ScenarioError, match=r"field 'cases': no case with id planted_oob\[bogus\]"):
        registry.find_case("planted_oob[bogus]")


def test_module_without_scenario_is_an_error() -> None:
    with pytest.raises(ScenarioError, match=r"scenario 'gpu_memsafety.placement.layout', field 'SCENARIO'"):
        registry.load("gpu_memsafety.placement.layout")


# ------------------------------------------------------------------------------------- bad definitions

def make(cases: Callable[[], list[Case]] | None = None, **overrides: Any) -> Scenario:
    """A small valid scenario; overrides make it invalid in one way."""
    fields: dict[str, Any] = dict(
        name="toy", summary="toy", adapter="kernels.toy:run_case",
        params=(Param("n", int, low=1, high=100), Param("impl", str, choices=("a", "b")), Param("scale", float, low=0.0)),
        variants=("clean", "buggy"),
        cases=cases or (lambda: [Case("toy", "clean", {"n": 4, "impl": "a", "scale": 1.0}, "n4")]),
        expect=lambda case: Expectation(), kernel=lambda case: "toy", needs_gpu=lambda case: False,
    )
    fields.update(overrides)
    return Scenario(**fields)


def case(variant: str = "clean", label: str = "n4", scenario: str = "toy", **params: Any) -> Case:
    return Case(scenario, variant, {"n": 4, "impl": "a", "scale": 1.0, **params}, label)


def build_error(*cases: Case) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        make(cases=lambda: list(cases)).build()
    return info.value


def test_valid_toy_builds() -> None:
    assert [c.id for c in make().build()] == ["toy[clean-n4]"]


def test_unknown_variant() -> None:
    err = build_error(case("nonsense"))
    assert (err.scenario, err.field) == ("toy", "variant")
    assert "'nonsense' is not one of ('clean', 'buggy')" in str(err) and "scenario 'toy'" in str(err)


def test_duplicate_case_ids() -> None:
    err = build_error(case(), case())
    assert err.field == "cases" and "duplicate case id toy[clean-n4]" in str(err)


@pytest.mark.parametrize("params, field_name, words", [
    ({"n": 0}, "n", "0 is below the minimum 1"),
    ({"n": 101}, "n", "101 is above the maximum 100"),
    ({"n": "4"}, "n", "expected int, got '4'"),
    ({"n": True}, "n", "expected int, got True"),
    ({"n": 4.0}, "n", "expected int, got 4.0"),
    ({"impl": "c"}, "impl", "'c' is not one of ('a', 'b')"),
    ({"impl": 1}, "impl", "expected str, got 1"),
    ({"scale": -0.5}, "scale", "-0.5 is below the minimum 0.0"),
])
def test_bad_parameter_value(params: dict[str, Any], field_name: str, words: str) -> None:
    err = build_error(case(**params))
    assert (err.scenario, err.field) == ("toy", field_name)
    assert words in str(err)


def test_missing_and_unknown_parameters() -> None:
    err = build_error(Case("toy", "clean", {"n": 4, "impl": "a", "colour": "red"}, "n4"))
    assert err.field == "params"
    assert "missing ['scale'], unknown ['colour']" in str(err)


def test_label_unsafe_in_an_id() -> None:
    err = build_error(case(label="n 4/x"))
    assert err.field == "label"


def test_case_of_another_scenario() -> None:
    err = build_error(case(scenario="other"))
    assert err.field == "cases" and "belongs to scenario 'other'" in str(err)


def test_no_cases() -> None:
    err = build_error()
    assert err.field == "cases" and "returned no cases" in str(err)


@pytest.mark.parametrize("overrides, field_name, words", [
    ({"detectors": ("guard", "valgrind")}, "detectors", "unknown detector(s) ['valgrind']"),
    ({"adapter": "kernels.toy.run_case"}, "adapter", "'kernels.toy.run_case' is not 'module:function'"),
    ({"name": "Toy-Scenario"}, "name", "must be lower_snake_case"),
    ({"variants": ()}, "variants", "at least one variant is required"),
    ({"timeout_s": 0}, "timeout_s", "must be positive, got 0"),
])
def test_bad_definition_field(overrides: dict[str, Any], field_name: str, words: str) -> None:
    with pytest.raises(ScenarioError) as info:
        make(**overrides)
    assert info.value.field == field_name
    assert words in str(info.value)
    assert f"field {field_name!r}" in str(info.value)


def test_build_validates_once_and_returns_copies() -> None:
    calls = []

    def cases() -> list[Case]:
        calls.append(1)
        return [case()]

    toy = make(cases=cases)
    first = toy.build()
    first.clear()
    assert [c.id for c in toy.build()] == ["toy[clean-n4]"]
    assert calls == [1]


def test_grid_is_the_cartesian_product_in_order() -> None:
    assert grid(a=(1, 2), b=("x", "y")) == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]


def test_case_round_trips_through_json() -> None:
    c = Case("toy", "clean", {"n": 4}, "n4", ("smoke",))
    assert Case.from_json(c.to_json()) == c


# ----------------------------------------------------------------------------- layouts an adapter can ask for

def test_row_stride_smaller_than_the_row_is_a_layout_error() -> None:
    with pytest.raises(L.LayoutError, match=r"row_stride 64 is smaller than row_bytes 72"):
        Arena(torch.device("cpu")).rows("scale", rows=8, row_bytes=72, row_stride=64, used_rows=5)


def test_negative_guard_is_a_layout_error() -> None:
    with pytest.raises(L.LayoutError, match=r"guard must be >= 0, got -1"):
        Arena(torch.device("cpu"), guard=-1).tensor("x", (4,), torch.uint8)


def test_back_guard_on_a_flush_end_layout_is_a_layout_error() -> None:
    with pytest.raises(L.LayoutError, match=r"flush_end has no back guard"):
        replace(L.plan(640, placement=L.FLUSH_END), back=1024)


def test_unknown_dtype_in_an_adapter_raises_a_type_error_that_says_dtype() -> None:
    """What an adapter typo produces today (see also tests/placement/test_guard.py for what the message lacks)."""
    with pytest.raises(TypeError, match=r"dtype"):
        Arena(torch.device("cpu")).tensor("x", (4,), "float8")  # type: ignore[arg-type]


# -------------------------------------------------------------------- padded_stride_scale_write arithmetic

PSW = ALL["padded_stride_scale_write"]


def expect(case_id: str) -> Expectation:
    _, c = registry.find_case(f"padded_stride_scale_write[{case_id}]")
    return PSW.expect(c)


@pytest.mark.parametrize("impl", ["triton", "cuda"])
def test_packed_h2304_5_of_8_overwrites_32_padding_bytes_of_rows_0_to_3(impl: str) -> None:
    # G = 2304/32 = 72 bytes per token, rows 80 bytes apart: token t writes t*72 .. t*72+72, the last byte
    # written is 359; row r's padding is r*80+72 .. r*80+80, hit for rows 0..3 (row 4's starts at 392).
    assert expect(f"packed-{impl}-H2304-T5of8").findings == (
        ExpectedFinding(OVERWRITE, "scale", (GUARD,), region="row_padding", bytes=32,
                        ranges=((72, 80), (152, 160), (232, 240), (312, 320))),
        # token 4's row is 320..392: the packed writes stop at 360, so its bytes 40..71 are never written
        ExpectedFinding(UNWRITTEN, "scale", (UNINIT,), region="inside", bytes=32, ranges=((360, 392),)))


@pytest.mark.parametrize("impl", ["triton", "cuda"])
def test_strided_h2304_is_clean(impl: str) -> None:
    assert expect(f"strided-{impl}-H2304-T5of8").clean


@pytest.mark.parametrize("case_id", ["packed-triton-H2560-T5of8", "strided-triton-H2560-T5of8",
                                     "packed-cuda-H2560-T8of8", "strided-cuda-H2560-T8of8"])
def test_h2560_has_no_padding_and_is_clean_both_ways(case_id: str) -> None:
    assert expect(case_id).clean


def test_strided_on_packed_8_of_8_writes_56_bytes_past_the_end() -> None:
    # Packed allocation: 8 rows x 72 = 576 bytes. Token 7 at stride 80 writes 560..632: 576..632 is past the end
    # (the last byte written is 631): the back guard's bytes when guarded, past the exact allocation for memcheck.
    assert expect("strided_on_packed-triton-H2304-T8of8").findings == (
        ExpectedFinding(OVERWRITE, "scale", (GUARD,), region="past_end", bytes=56, ranges=((576, 632),)),
        ExpectedFinding(OVERWRITE, "scale", (MEMCHECK,), region="past_end"),
        # rows 72 B apart, token t written at t*80: the 8 B at 72t + 8(t-1) of rows 1..7 are skipped
        ExpectedFinding(UNWRITTEN, "scale", (UNINIT,), region="inside", bytes=56,
                        ranges=((72, 80), (152, 160), (232, 240), (312, 320), (392, 400), (472, 480), (552, 560))),
    )


def test_strided_on_packed_5_of_8_lands_in_unused_rows_only() -> None:
    # Token 4 writes 320..392; rows 5..7 (360..576) are unused: 360..392 is 32 bytes of unused_row[5].
    assert expect("strided_on_packed-triton-H2304-T5of8").findings == (
        ExpectedFinding(OVERWRITE, "scale", (GUARD,), region="unused_row", bytes=32, ranges=((360, 392),)),
        ExpectedFinding(UNWRITTEN, "scale", (UNINIT,), region="inside", bytes=32,
                        ranges=((72, 80), (152, 160), (232, 240), (312, 320))))


def test_padded_hidden_sizes_all_expect_a_finding_when_packed() -> None:
    for hidden in (2176, 2304, 2432):
        assert not expect(f"packed-triton-H{hidden}-T5of8").clean, hidden
    for hidden in (2560, 4096, 7168):
        assert expect(f"packed-triton-H{hidden}-T5of8").clean, hidden


def test_padded_stride_describe_names_the_token_and_row() -> None:
    _, c = registry.find_case("padded_stride_scale_write[packed-triton-H2304-T5of8]")
    assert PSW.describe is not None
    text = PSW.describe(c, "scale", 232, 240)
    assert "row 2: padding bytes 72..79" in text and "token 3" in text
