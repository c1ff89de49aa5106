"""harness.poison: poison mode tells before from after, reads of row padding and unused rows from guard
reads, covers every buffer (watched first), and bounds the bytes by bisection (issue 20, items 1 and 4).
The kernel is simulated: a set of byte offsets it reads, each of which changes the output when poisoned."""
from __future__ import annotations

from typing import Any

import pytest
import torch

from harness import layout as L
from harness import poison
from harness.guard import Arena
from harness.model import POISON, ExpectedFinding

SCALE_ROWS = L.Rows(rows=8, row_bytes=72, row_stride=80, used_rows=5)


def simulated(reads: dict[str, set[int]]) -> tuple[Any, list[tuple[str, list[tuple[int, int]]]]]:
    calls: list[tuple[str, list[tuple[int, int]]]] = []

    def run(name: str, spans: list[tuple[int, int]]) -> dict[str, Any]:
        calls.append((name, spans))
        hit = any(lo <= b < hi for b in reads.get(name, ()) for lo, hi in spans)
        return {"out": {"elements": 1, "of": 4}} if hit else {}
    return run, calls


def test_a_read_past_the_end_is_past_end_with_its_bytes_bounded() -> None:
    layouts = {"src": L.plan(4008, guard=1024), "dst": L.plan(4008, guard=1024)}
    run, calls = simulated({"src": {4008 + i for i in range(8)}})
    found, runs = poison.survey(layouts, ["src", "dst"], run)
    assert [(e["buffer"], e["region"], e["bounds"]) for e in found] == [("src", "past_end", [4008, 4016])]
    assert runs == len(calls) and 4 <= runs <= 4 + 2 * 11      # 2 regions x 2 buffers, then two bisections of 1024 B


def test_a_read_before_the_start_is_before_start() -> None:
    layouts = {"x": L.plan(100, guard=16)}
    run, _ = simulated({"x": {-3, -2}})
    [entry], _ = poison.survey(layouts, ["x"], run)
    assert (entry["region"], entry["bounds"]) == ("before_start", [-3, -1])


def test_bounds_widen_to_whole_elements() -> None:
    """Only the exponent byte of an fp32 past the end changes the sum: the bound is the whole element."""
    layouts = {"src": L.plan(4008, guard=1024)}
    run, _ = simulated({"src": {4011, 4015}})
    [entry], _ = poison.survey(layouts, ["src"], run, {"src": 4})
    assert entry["bounds"] == [4008, 4016]


def test_reads_of_row_padding_and_unused_rows_are_named_by_region() -> None:
    layouts = {"scale": L.plan(SCALE_ROWS.nbytes, guard=64, rows=SCALE_ROWS)}
    run, _ = simulated({"scale": {75, 410}})      # row 0's padding, unused row 5
    found, _ = poison.survey(layouts, ["scale"], run)
    assert sorted((e["region"], e["bounds"]) for e in found) == [("row_padding", None), ("unused_row", None)]


def test_nothing_read_nothing_found_one_run_per_buffer_region() -> None:
    layouts = {"a": L.plan(64, guard=16), "b": L.plan(SCALE_ROWS.nbytes, guard=64, rows=SCALE_ROWS)}
    run, calls = simulated({})
    assert poison.survey(layouts, ["a", "b"], run) == ([], 6)
    assert [c[0] for c in calls] == ["a", "a", "b", "b", "b", "b"]   # every buffer, in the given order


@pytest.mark.parametrize("reads", [{5}, {0}, {1023}, {0, 1023}, {200, 201, 202}, {17, 900}])
def test_bisection_finds_the_first_and_last_byte_that_change_the_output(reads: set[int]) -> None:
    changes = lambda a, b: any(a <= r < b for r in reads)  # noqa: E731
    assert poison.first_changing(changes, 0, 1024) == min(reads)
    assert poison.last_changing(changes, 0, 1024) == max(reads)


def test_findings_carry_region_bounds_and_are_inexact() -> None:
    data = {"regions": [{"buffer": "src", "region": "past_end", "bounds": [4008, 4016], "outputs": {"total": {"elements": 1, "of": 1}}},
                        {"buffer": "scale", "region": "row_padding", "bounds": None, "outputs": {"o": {"elements": 3, "of": 9}}}]}
    src, scale = poison.findings(data, kernel="k", arch="cpu")
    assert (src.detector, src.kind, src.buffer, src.region, src.bytes, src.exact) == (POISON, "overread", "src", "past_end", 8, False)
    assert [(r.start, r.end) for r in src.ranges] == [(4008, 4016)] and "4008..4015" in src.note
    assert (scale.region, scale.bytes, scale.ranges) == ("row_padding", 0, ())
    assert poison.findings(None, kernel="k", arch="") == []


def test_an_inexact_finding_with_a_region_is_held_to_it() -> None:
    [f] = poison.findings({"regions": [{"buffer": "src", "region": "past_end", "bounds": None,
                                        "outputs": {"t": {"elements": 1, "of": 1}}}]}, kernel="k", arch="")
    assert ExpectedFinding("overread", "src", (POISON,), region="past_end", bytes=4).matches(f)
    assert not ExpectedFinding("overread", "src", (POISON,), region="before_start").matches(f)


def test_arena_poisons_only_the_given_spans() -> None:
    a = Arena(torch.device("cpu"), poison_spans={"x": [(100, 104)]}, poison_marker=0xFF)
    a.tensor("x", (100,), torch.uint8)
    buf = a.buffers["x"]
    st = buf.storage
    assert st[buf.layout.front + 100 : buf.layout.front + 104].tolist() == [0xFF] * 4
    assert int((st == 0xFF).sum()) == 4
    with pytest.raises(L.LayoutError, match=r"poison span 0..4 is not inside its marker bytes"):
        Arena(torch.device("cpu"), poison_spans={"y": [(0, 4)]}).tensor("y", (100,), torch.uint8)
