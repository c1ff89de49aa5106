"""Shards and merge (issue 27, item 1): the shard manifest, and a merge that reads complete only when it is.

Every attack class of the review, on report files built here: shards cut from different cost data (cases in no
shard or in two), shards of different modes, matrices, harness versions, commits or runs, a shard without a
manifest, a case outside the matrix, an edited manifest; and `--shard K/N` with a huge N (checked up front,
planning memory proportional to the matrix). A bad set never gives a passed table: the merge says "incomplete"
or "inconsistent", names every problem, and exits 1.
"""
from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.engine import schedule
from gpu_memsafety.model import GUARD, CaseResult, DetectorRun, Outcome
from gpu_memsafety.report import ReportError, build_report, manifest, report_json_text, shard_record
from gpu_memsafety.report.merge import main, merge_reports
from repo_paths import ROOT

MATRIX = [f"planted_oob[v{i}-n{100 + i}]" for i in range(12)]
COSTS = {cid: 1.0 + (i % 5) for i, cid in enumerate(MATRIX)}


def result(case_id: str, outcome: Outcome = Outcome.CLEAN) -> CaseResult:
    return CaseResult(case_id=case_id, scenario="planted_oob", variant="v", params={}, kernel="copy", arch="sm_90",
                      mode="guard", outcome=outcome, expected="clean", detectors=[DetectorRun(GUARD, True, "")],
                      message="" if outcome is Outcome.CLEAN else "boom", duration_s=1.0)


def jobs(costs: dict[str, float]) -> list[schedule.Job]:
    return [schedule.Job(cid, "planted_oob", cost) for cid, cost in costs.items()]


def shard_doc(index: int, count: int, ids: list[str], *, matrix: list[str] = MATRIX, group: str = "nightly-17",
              costs: dict[str, float] = COSTS, failed: tuple[str, ...] = (), **override: Any) -> dict[str, Any]:
    found = manifest.build(ids=matrix, cost_hash=manifest.costs_hash((j.id, j.cost, j.alone) for j in jobs(costs)),
                           mode="guard", cover="scenario", group=group, group_source="--run-group",
                           harness_version="0.1.0", commit="abc123")
    found.update(override)       # type: ignore[typeddict-item]
    results = [result(cid, Outcome.CRASHED if cid in failed else Outcome.CLEAN) for cid in ids]
    return build_report(results, {"hostname": f"h200-{index}", "archs": ["sm_90"]}, started="s", finished="f",
                        argv=["make", "sanitize"], mode="guard",
                        shard={**shard_record(index, count, group), "manifest": found})


def cut(costs: dict[str, float], count: int) -> dict[int, list[str]]:
    owner = schedule.shard_of(jobs(costs), count)
    return {k: [cid for cid in MATRIX if owner[cid] == k] for k in range(1, count + 1)}


def write(tmp: Path, docs: list[dict[str, Any]]) -> list[str]:
    tmp.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, doc in enumerate(docs):
        path = tmp / f"shard-{n}.json"
        path.write_text(report_json_text(doc))
        paths.append(str(path))
    return paths


def merged_of(tmp: Path, docs: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    code = main([*write(tmp, docs), "-o", str(tmp / "out")])
    err = capsys.readouterr().err
    return code, json.loads((tmp / "out" / "merged.json").read_text()), err


def test_a_whole_run_merges_passed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parts = cut(COSTS, 3)
    code, merged, err = merged_of(tmp_path, [shard_doc(k, 3, ids) for k, ids in parts.items()], capsys)
    assert code == 0, err
    assert merged["summary"]["status"] == "passed" and merged["summary"]["total"] == len(MATRIX)
    assert merged["shards"] == {"incomplete": [], "inconsistent": [], "ran_nowhere": {}, "ran_twice": {}}


def test_shards_cut_from_different_cost_data_are_inconsistent_and_name_every_case(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The review's attack: shard 1 cut with one cost file, shard 2 with another; some cases ran nowhere, some
    twice, and the merge said passed."""
    other = {cid: 10.0 - cost for cid, cost in COSTS.items()}
    first, second = cut(COSTS, 2)[1], cut(other, 2)[2]
    nowhere = sorted(set(MATRIX) - set(first) - set(second))
    twice = sorted(set(first) & set(second))
    assert nowhere and twice, "the two cost tables must cut the matrix differently"
    code = main([*write(tmp_path, [shard_doc(1, 2, first), shard_doc(2, 2, second, costs=other)]),
                 "-o", str(tmp_path / "out")])
    assert code == 2 and "appear in two reports for the same architecture" in capsys.readouterr().err
    # the cost data alone, without a case twice
    code, merged, err = merged_of(tmp_path / "costs", [shard_doc(1, 2, first),
                                                       shard_doc(2, 2, [c for c in second if c not in twice],
                                                                 costs=other)], capsys)
    assert code == 1 and merged["summary"]["status"] == "inconsistent"
    assert "the shards disagree on the cost data" in err
    # the same cut, with the manifests claiming one cost table: the cases themselves tell; a case in two shards
    # is refused outright (merge._reject_repeated_cases), naming the cases, and nothing is written
    code = main([*write(tmp_path / "same", [shard_doc(1, 2, first), shard_doc(2, 2, second)]),
                 "-o", str(tmp_path / "same-out")])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "same-out").exists()
    assert f"{len(twice)} case(s) appear in two reports for the same architecture" in err
    assert twice[0] in err
    # without the repeated cases, the ones that ran nowhere are named
    code, merged, err = merged_of(tmp_path / "nowhere", [shard_doc(1, 2, first),
                                                         shard_doc(2, 2, [c for c in second if c not in twice])], capsys)
    assert code == 1 and merged["summary"]["status"] == "incomplete"
    assert merged["shards"]["ran_nowhere"] == {"nightly-17": nowhere}
    for cid in nowhere:
        assert cid in err
    assert f"{len(nowhere)} of the matrix's {len(MATRIX)} cases ran in no shard" in err


@pytest.mark.parametrize("field, value", [("mode", "memcheck"), ("harness_version", "0.2.0"), ("commit", "def456"),
                                          ("cover", "all")])
def test_shards_of_another_mode_version_commit_or_cover_are_inconsistent(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: str) -> None:
    parts = cut(COSTS, 2)
    docs = [shard_doc(1, 2, parts[1]), shard_doc(2, 2, parts[2], **{field: value})]
    code, merged, err = merged_of(tmp_path, docs, capsys)
    assert code == 1 and merged["summary"]["status"] == "inconsistent", err
    assert f"the shards disagree on the {manifest.SHARED[field]}" in err and repr(value) in err


def test_shards_of_another_matrix_are_inconsistent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parts = cut(COSTS, 2)
    docs = [shard_doc(1, 2, parts[1]), shard_doc(2, 2, parts[2], matrix=MATRIX + ["planted_oob[extra-n1]"])]
    code, merged, err = merged_of(tmp_path, docs, capsys)
    assert code == 1 and merged["summary"]["status"] == "inconsistent"
    assert "disagree on the matrix (case ids)" in err


def test_shards_of_two_runs_are_two_incomplete_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parts = cut(COSTS, 2)
    docs = [shard_doc(1, 2, parts[1], group="run-a"), shard_doc(2, 2, parts[2], group="run-b")]
    code, merged, err = merged_of(tmp_path, docs, capsys)
    assert code == 1 and merged["summary"]["status"] == "incomplete"
    assert "run group 'run-a': no report for shard 2/2" in err and "run group 'run-b': no report for shard 1/2" in err
    assert {m["group"]: m["missing"] for m in merged["missing_shards"]} == {"run-a": [2], "run-b": [1]}


def test_a_missing_shard_is_named_and_the_table_says_incomplete(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    parts = cut(COSTS, 4)
    code, merged, err = merged_of(tmp_path, [shard_doc(k, 4, parts[k]) for k in (1, 3, 4)], capsys)
    assert code == 1 and "incomplete: run group 'nightly-17': no report for shard 2/4" in err
    assert merged["missing_shards"] == [{"group": "nightly-17", "count": 4, "missing": [2], "counts_seen": [4]}]
    text = (tmp_path / "out" / "merged.md").read_text()
    assert text.startswith("## ❌ GPU memory safety across 3 runners — incomplete:")
    assert "**Incomplete:** run group 'nightly-17': no report for shard 2/4" in text


def test_a_shard_without_a_manifest_cannot_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parts = cut(COSTS, 2)
    old = build_report([result(cid) for cid in parts[2]], {"hostname": "old"}, started="s", finished="f",
                       argv=[], shard=shard_record(2, 2, "nightly-17"))
    code, merged, err = merged_of(tmp_path, [shard_doc(1, 2, parts[1]), old], capsys)
    assert code == 1 and merged["summary"]["status"] == "inconsistent"
    assert "has no shard manifest" in err


def test_a_passing_case_outside_the_matrix_is_inconsistent_and_a_failing_one_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parts = cut(COSTS, 2)
    stray = "planted_oob[stray-n7]"
    code, merged, err = merged_of(tmp_path, [shard_doc(1, 2, parts[1] + [stray]), shard_doc(2, 2, parts[2])], capsys)
    assert code == 1 and merged["summary"]["status"] == "inconsistent" and stray in err
    broken = "planted_oob[definition]"       # a scenario file that could not be collected: failed, in no matrix
    docs = [shard_doc(1, 2, parts[1] + [broken], failed=(broken,)), shard_doc(2, 2, parts[2])]
    code, merged, err = merged_of(tmp_path / "b", docs, capsys)
    assert code == 0 and merged["summary"]["status"] == "failed", err


def test_an_edited_manifest_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parts = cut(COSTS, 2)
    doc = shard_doc(1, 2, parts[1])
    doc["run"]["shard"]["manifest"]["matrix"] = parts[1]          # "only my cases were ever in the matrix"
    paths = write(tmp_path, [doc, shard_doc(2, 2, parts[2])])
    assert main([*paths, "-o", str(tmp_path / "out")]) == 2
    assert "run.shard.manifest.matrix_hash: is not the hash of the matrix's case ids" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    doc = shard_doc(1, 2, parts[1])
    doc["run"]["shard"]["manifest"]["group"] = "other"
    with pytest.raises(ReportError, match="run.shard.manifest.group: is 'other' but run.shard.group is 'nightly-17'"):
        merge_reports(write(tmp_path / "g", [doc]))


def test_no_bad_set_ever_reads_passed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every way of dropping, repeating or mixing shards of a good run: never status passed, never exit 0."""
    parts = cut(COSTS, 3)
    good = {k: shard_doc(k, 3, ids) for k, ids in parts.items()}
    other = {k: shard_doc(k, 3, ids, group="another-run") for k, ids in parts.items()}
    sets = [[good[1], good[2]], [good[1], good[3]], [good[1], good[2], other[3]], [good[1], other[2], good[3]],
            [good[1], good[2], shard_doc(3, 3, parts[3] + parts[1][:1])], [good[1], good[2], shard_doc(3, 3, [])]]
    for n, docs in enumerate(sets):
        if n == 4:   # a case in two shards: refused outright, nothing written (merge._reject_repeated_cases)
            assert main([*write(tmp_path / str(n), docs), "-o", str(tmp_path / str(n) / "out")]) == 2
            assert not (tmp_path / str(n) / "out").exists()
            continue
        code, merged, _ = merged_of(tmp_path / str(n), docs, capsys)
        assert code == 1 and merged["summary"]["status"] in ("incomplete", "inconsistent"), n


def test_incomplete_and_inconsistent_merges_match_the_published_schemas(tmp_path: Path) -> None:
    import jsonschema
    docs = ROOT / "docs"
    merged_schema = json.loads((docs / "merged.schema.json").read_text())
    report_schema = json.loads((docs / "report.schema.json").read_text())
    parts = cut(COSTS, 3)
    sets = {"whole": [shard_doc(k, 3, parts[k]) for k in (1, 2, 3)], "missing": [shard_doc(k, 3, parts[k]) for k in (1, 3)],
            "other cost data": [shard_doc(1, 3, parts[1]), shard_doc(2, 3, parts[2], costs={c: 2.0 for c in COSTS}),
                                shard_doc(3, 3, parts[3])]}
    for name, docs_ in sets.items():
        for doc in docs_:
            jsonschema.validate(doc, report_schema)
        merged = json.loads(report_json_text(merge_reports(write(tmp_path / name, docs_))))
        jsonschema.validate(merged, merged_schema)
        assert merged["summary"]["status"] == {"whole": "passed", "missing": "incomplete",
                                               "other cost data": "inconsistent"}[name]


# ------------------------------------------------------------------------------------------------ --shard K/N

def test_shard_counts_are_bounded_up_front() -> None:
    assert schedule.parse_shard("3/8") == schedule.Shard(3, 8)
    assert schedule.parse_shard(f"1/{schedule.MAX_SHARDS}").count == schedule.MAX_SHARDS
    for text in ("1/1000000000", f"1/{schedule.MAX_SHARDS + 1}", "0/2", "3/2", "1/0", "x", "1/2/3", ""):
        with pytest.raises(ValueError, match=f"K/N with 1 <= K <= N <= {schedule.MAX_SHARDS}"):
            schedule.parse_shard(text)


def test_planning_memory_is_proportional_to_the_matrix_not_to_the_shard_count() -> None:
    """`--shard 1/1000000000` used 22 GB: a heap entry per shard. Only shards that can get a case are held, and
    the cut is the one the full count would give."""
    many = jobs({f"s[c{i}]": float(i % 7) for i in range(200)})
    tracemalloc.start()
    t0 = time.perf_counter()
    owner = schedule.shard_of(many, 10**9)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert time.perf_counter() - t0 < 5 and peak < 8 << 20
    assert owner == schedule.shard_of(many, len(many)) and set(owner.values()) <= set(range(1, len(many) + 1))
    few = schedule.select_shard(many, schedule.Shard(10**9, 10**9))
    assert few == []


def test_negative_costs_from_a_cost_file_do_not_skew_the_cut() -> None:
    costs = {f"s[c{i}]": 2.0 for i in range(6)}
    skewed = {**costs, "s[c0]": -1e9}
    counts = [list(schedule.shard_of(jobs(skewed), 3).values()).count(k) for k in (1, 2, 3)]
    assert max(counts) <= 3, counts


@pytest.mark.parametrize("disagree", [False, True])
def test_a_full_run_merged_with_its_own_shards_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           disagree: bool) -> None:
    """The attack: a full run merged with its shards gave exit 0 with every case twice, both kept even when they
    disagreed (crashed and clean). Refused whether or not the two records agree; never both kept."""
    parts = cut(COSTS, 2)
    full = build_report([result(cid) for cid in MATRIX], {"hostname": "h200-full", "archs": ["sm_90"]},
                        started="s", finished="f", argv=["make", "sanitize"], mode="guard")
    shards = [shard_doc(1, 2, parts[1], failed=tuple(parts[1][:1]) if disagree else ()), shard_doc(2, 2, parts[2])]
    code = main([*write(tmp_path, [full, *shards]), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "out").exists(), err
    assert f"{len(MATRIX)} case(s) appear in two reports for the same architecture" in err
    assert "merge either a full run or its shards" in err
    with pytest.raises(ReportError, match="appear in two reports"):
        merge_reports(write(tmp_path / "again", [full, *shards]))
