"""Issue 50, explore: the pure variant generator (gpu_memsafety.host.explore): which boundary values a test's own
parameters and launches give, in which order, within which budget, and the variant's text that reads back."""
from __future__ import annotations

import pytest

from gpu_memsafety.host import explore as X


def values(cands: list[X.Candidate]) -> list:
    return [c.value for c in cands]


def test_an_integer_gets_one_block_edges_powers_of_two_and_its_neighbours() -> None:
    got = values(X.int_candidates(64, [16, 64]))
    assert got[0] == 1                                         # the smallest first
    assert got[1:3] == [15, 63] and got[3:5] == [17, 65]       # each block -1, then +1
    assert {31, 33, 127, 129}.issubset(got)                    # powers of two +-1 around it
    assert 64 not in got and 0 not in got                      # never the listed value, never 0
    assert max(got) <= X.max_value(64)                         # bounded: about twice the listed size
    assert len(got) == len(set(got))                           # each value once, at its best reason


def test_flags_and_huge_constexprs_are_not_blocks() -> None:
    assert X.blocks_of([0, 1, True, 2, 64, 64, 1 << 20, "x", 3.0]) == [2, 64]


def test_bools_floats_and_strings_are_not_explored() -> None:
    assert not X.explorable(True) and not X.explorable(1.5) and not X.explorable("64")
    assert X.explorable(7) and X.explorable((1, 64)) and X.explorable([0, 5])
    assert not X.explorable((True, 2)) and not X.explorable([])


def test_offsets_give_short_single_sequences_empty_and_short_segments() -> None:
    got = values(X.offsets_candidates([0, 256, 500, 1000], [64]))
    assert got[0] == [0, 1]                                    # one sequence of one token first
    assert [0, 63] in got and [0, 65] in got                   # shorter than a chunk, one past it
    assert [0, 0, 256, 500, 1000] in got                       # an empty first segment
    assert [0, 256, 500, 500, 1000] in got                     # an empty segment in the middle
    assert [0, 256, 500, 1000, 1000] in got                    # an empty last segment
    assert [0, 1, 245, 745] in got                             # a short first segment, the rest shifted
    assert [0, 256, 500, 999] in got                           # an offset -1
    for new in got:
        assert new[0] == 0 and all(a <= b for a, b in zip(new, new[1:])) and new != [0, 256, 500, 1000]


def test_a_list_that_is_not_offsets_is_a_shape_varied_one_dimension_at_a_time() -> None:
    got = values(X.candidates((2, 64, 128), [64]))
    assert all(isinstance(v, tuple) and len(v) == 3 for v in got)
    assert sum(1 for a, b in zip(got[0], (2, 64, 128)) if a != b) == 1
    assert (2, 63, 128) in got and (2, 64, 127) in got and (1, 64, 128) in got
    assert not X.is_offsets([1, 2, 3]) and not X.is_offsets([0, 3, 2]) and X.is_offsets([0, 0, 4])


def test_the_plan_takes_turns_offsets_first_then_pairs_and_keeps_the_budget() -> None:
    params = {"H": 4, "D": 64, "cu_seqlens": [0, 256, 500, 1000], "dtype": "float32"}
    p = X.plan(params, [64, 16], limit=6)
    assert len(p.variants) == 6 and p.more > 0
    assert p.variants[0].changes == {"cu_seqlens": [0, 1]}
    assert [set(v.changes) for v in p.variants[:3]] == [{"cu_seqlens"}, {"D"}, {"H"}]
    assert all("dtype" not in v.changes for v in p.variants)
    everything = X.plan(params, [64], limit=10_000)
    sizes = [len(v.changes) for v in everything.variants]
    assert sizes == sorted(sizes) and 2 in sizes               # singles first, then pairs
    assert all(len(v.changes) == 1 for v in X.plan(params, [64], limit=10_000, pairs=False).variants)
    assert X.plan(params, [], limit=0).variants == []


def test_the_listed_cases_are_not_explored_again() -> None:
    params = {"n": 64}
    p = X.plan(params, [], limit=100, listed=[{"n": 64}, {"n": 1}, {"n": 63}])
    got = [v.changes["n"] for v in p.variants]
    assert 1 not in got and 63 not in got and p.skipped_listed == 2


def test_a_test_with_nothing_to_vary_says_so() -> None:
    p = X.plan({"dtype": "float32", "flag": True}, [64], limit=8)
    assert not p.variants and "no integer parameter" in p.not_explored


def test_a_variant_id_reads_back_to_its_test_and_its_values() -> None:
    base = "tests/ops/test_x.py::test_chunk_varlen[H4-D64-cu_seqlens[0, 256]-torch.float32]"
    case = X.case_id(base, {"cu_seqlens": (0, 15), "H": 1})
    assert case == base + '@{"H": 1, "cu_seqlens": [0, 15]}'       # stable: keys sorted, tuples as lists
    assert X.is_case_id(case) and not X.is_case_id(base)
    assert X.parse_case_id(case) == (base, {"H": 1, "cu_seqlens": [0, 15]})
    assert X.base_of(case) == base and X.base_of(base) == base
    assert X.applied((0, 1), [0, 15]) == (0, 15) and X.applied([0, 1], [0, 15]) == [0, 15]
    for bad in (base, base + "@{}", base + "@{nope}", base + '@{"x": "a"}', base + '@{"x": [1.5]}'):
        with pytest.raises(X.ExploreError):
            X.parse_case_id(bad)


def test_the_rerun_command_runs_that_case_alone() -> None:
    cmd = X.rerun_command(["--gpu-memsafety", "tests/", "-k", "varlen", "-p", "fla_on_cpu", "--gpu-memsafety-explore",
                           "--gpu-memsafety-report-dir", "r", "--gpu-memsafety-explore-variants=3", "-kfoo"],
                          ["tests/"], 't.py::a[1]@{"n": 3}')
    assert cmd == "pytest --gpu-memsafety -p fla_on_cpu --gpu-memsafety-explore-case 't.py::a[1]@{\"n\": 3}'"


@pytest.mark.parametrize("bad", [{"variants": -1}, {"variants": 1.5}, {"seconds": -2}, {"run_seconds": float("nan")},
                                 {"run_variants": True}])
def test_a_bad_budget_is_refused_by_name(bad: dict) -> None:
    with pytest.raises(X.ExploreError, match=next(iter(bad))):
        X.Budget(**bad)


def test_budget_words_are_parsed_with_clear_errors() -> None:
    assert X.parse_count("--n", " 12 ") == 12 and X.parse_seconds("--s", "0") == 0.0
    assert X.parse_flag("k", "True") is True and X.parse_flag("k", "off") is False
    for fn, text in ((X.parse_count, "-1"), (X.parse_count, "many"), (X.parse_seconds, "inf"),
                     (X.parse_seconds, "soon"), (X.parse_flag, "maybe")):
        with pytest.raises(X.ExploreError, match="--opt"):
            fn("--opt", text)
