"""gpu_memsafety.detectors.poison: poison mode tells before from after, reads of row padding and unused rows from guard
reads, covers every buffer (watched first), and bounds the bytes by bisection (issue 20, items 1 and 4).
The kernel is simulated: a set of byte offsets it reads, each of which changes the output when poisoned."""
from __future__ import annotations

from typing import Any

import pytest
import torch

from gpu_memsafety.placement import layout as L
from gpu_memsafety.detectors import poison
from gpu_memsafety.placement.guard import Arena, Paint
from gpu_memsafety.model import POISON, ExpectedFinding
from repo_paths import FAKE_DIR

SCALE_ROWS = L.Rows(rows=8, row_bytes=72, row_stride=80, used_rows=5)


def simulated(reads: dict[str, set[int]], sees: tuple[int, ...] = poison.PATTERNS
              ) -> tuple[Any, list[tuple[str, list[tuple[int, int]]]]]:
    """A kernel reading `reads`; its output changes only under the poison patterns in `sees` (a max drops NaN)."""
    calls: list[tuple[str, list[tuple[int, int]]]] = []

    def run(name: str, spans: list[tuple[int, int]], pattern: int) -> dict[str, Any]:
        calls.append((name, spans))
        hit = pattern in sees and any(lo <= b < hi for b in reads.get(name, ()) for lo, hi in spans)
        return {"out": {"elements": 1, "of": 4}} if hit else {}
    return run, calls


def test_a_read_past_the_end_is_past_end_with_its_bytes_bounded() -> None:
    layouts = {"src": L.plan(4008, guard=1024), "dst": L.plan(4008, guard=1024)}
    run, calls = simulated({"src": {4008 + i for i in range(8)}})
    found, runs = poison.survey(layouts, ["src", "dst"], run)
    assert [(e["buffer"], e["region"], e["bounds"]) for e in found] == [("src", "past_end", [4008, 4016])]
    assert runs == len(calls) and 4 <= runs <= 3 * 5 + 2 + 2 * 11 + poison.GAP_CHUNKS   # 2 regions x 2 buffers: five
    # patterns where nothing changed, the first and its control where it did, two bisections of 1024 B, the gaps


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


def test_reads_of_row_padding_and_unused_rows_are_named_by_region_with_their_bytes() -> None:
    layouts = {"scale": L.plan(SCALE_ROWS.nbytes, guard=64, rows=SCALE_ROWS)}
    run, _ = simulated({"scale": {75, 410}})      # row 0's padding, unused row 5
    found, _ = poison.survey(layouts, ["scale"], run)
    assert sorted((e["region"], e["ranges"]) for e in found) == [("row_padding", [[75, 76, "row_padding[row 0]"]]),
                                                                 ("unused_row", [[410, 411, "unused_row[5]"]])]


def test_a_packed_stride_read_of_padded_rows_is_bounded_to_the_padding_it_read() -> None:
    """A consumer walking 5 rows of 72 B with the packed stride reads bytes 0..359: the padding of rows 0..3
    (8 B each), not row 4's (at 392..399) nor any unused row."""
    layouts = {"scale": L.plan(SCALE_ROWS.nbytes, guard=64, rows=SCALE_ROWS)}
    run, _ = simulated({"scale": set(range(5 * 72))})
    [entry], runs = poison.survey(layouts, ["scale"], run)
    assert entry["region"] == "row_padding"
    assert entry["ranges"] == [[r * 80 + 72, r * 80 + 80, f"row_padding[row {r}]"] for r in range(4)]
    [f] = poison.overread_findings({"regions": [entry]}, kernel="k", arch="cpu")
    assert (f.kind, f.buffer, f.region, f.bytes, f.count) == ("overread", "scale", "row_padding", 32, 4)
    assert [r.region for r in f.ranges] == [f"row_padding[row {r}]" for r in range(4)]
    # 4 regions (3 patterns, 4 inside), the columns of all rows at once (2 x 3 runs on 8 B), halving 5 spans,
    # bisecting 4 of 8 B
    assert runs < 10 + 6 + 40


def test_a_reduction_over_unused_rows_names_each_row_and_the_bytes_read_in_it() -> None:
    """Reading the 72 logical-width bytes of every physical row, unused ones included: rows 5..7, 72 B each;
    the 8 B at the end of each unused row are not read and not reported."""
    layouts = {"scale": L.plan(SCALE_ROWS.nbytes, guard=64, rows=SCALE_ROWS)}
    run, _ = simulated({"scale": {r * 80 + c for r in range(8) for c in range(72)}})
    [entry], _ = poison.survey(layouts, ["scale"], run, {"scale": 4})
    assert entry["region"] == "unused_row"
    assert entry["ranges"] == [[r * 80, r * 80 + 72, f"unused_row[{r}]"] for r in (5, 6, 7)]


def test_one_column_read_in_every_rows_padding_is_bounded_to_that_column_within_a_small_budget() -> None:
    """Held-out hx_a on the H200 (run 45): a GEMV reads scale column 5 of 5 real ones in each of 16 rows (4 B of each
    row's 12 B of padding). With 24 runs, halving the 16 rows first spent the budget before narrowing any row: 192 B.
    The columns of every row at once first: 4 B in each row, 64 B, the truth."""
    rows = L.Rows(rows=16, row_bytes=20, row_stride=32, used_rows=16)
    layouts = {"w_scale": L.plan(rows.nbytes, guard=64, rows=rows)}
    truth = [(r * 32 + 20, r * 32 + 24) for r in range(16)]
    run, calls = simulated({"w_scale": {b for lo, hi in truth for b in range(lo, hi)}})
    [entry], runs = poison.survey(layouts, ["w_scale"], run, {"w_scale": 4}, budget=24)
    assert entry["region"] == "row_padding" and [(lo, hi) for lo, hi, _ in entry["ranges"]] == truth
    assert runs <= 10 + 2 + 24 + 1     # five patterns on each guard, the padding's first and control, the budget


def test_rows_that_read_different_columns_keep_every_byte_that_matters() -> None:
    """Row 0 reads column 0 of its padding, row 1 column 7: the columns of all rows at once span 0..7; each row is
    then narrowed alone. Never a byte that matters dropped."""
    spans = [(72, 80), (152, 160)]
    reads = {72, 159}

    def changes(part: list[tuple[int, int]]) -> bool:
        return any(lo <= b < hi for b in reads for lo, hi in part)
    assert poison.bound(changes, spans, rows=True) == [(72, 73), (159, 160)]
    assert poison.bound(changes, spans, rows=True, budget=8) in ([(72, 80), (152, 160)], [(72, 73), (159, 160)],
                                                                   [(72, 73), (152, 160)])


def test_spans_of_different_widths_are_not_searched_by_column() -> None:
    spans = [(0, 8), (100, 104)]
    calls = []

    def changes(part: list[tuple[int, int]]) -> bool:
        calls.append(part)
        return any(lo <= 101 < hi for lo, hi in part)
    assert poison.columns(changes, spans) == spans and calls == []


def test_spans_that_matter_only_together_are_kept_whole() -> None:
    """An output that changes only when two rows' padding are both poisoned (a max, a comparison): no single
    span is confirmed, so the set is kept whole rather than dropped."""
    spans = [(72, 80), (152, 160)]

    def changes(part: list[tuple[int, int]]) -> bool:
        return sum(hi - lo for lo, hi in part) >= 16
    assert poison.bound(changes, spans) == spans


def test_past_the_budget_what_is_left_stays_whole() -> None:
    spans = [(r * 80 + 72, r * 80 + 80) for r in range(64)]
    calls = []

    def changes(part: list[tuple[int, int]]) -> bool:
        calls.append(part)
        return any(lo <= 75 < hi or lo <= 5035 < hi for lo, hi in part)
    assert poison.bound(changes, spans, budget=4000) == [(75, 76), (5035, 5036)]
    calls.clear()
    kept = poison.bound(changes, spans, budget=3)
    assert len(calls) <= 4 and (72, 80) in kept and (5032, 5040) in kept     # unrefined spans whole: a bound
    assert set(kept) <= set(spans) and len(kept) > 2


@pytest.mark.parametrize("reads, pieces", [
    ({-12, -11, -10, -9, -4, -3, -2, -1}, [(-12, -8), (-4, 0)]),       # held-out hq_c: table rows -3 and -1, not -2
    ({4000, 4001, 4900}, [(4000, 4002), (4900, 4901)]),
    (set(range(4000, 4064)), [(4000, 4064)]),                          # one contiguous read: one piece
    ({-1024, -1}, [(-1024, -1023), (-1, 0)]),
])
def test_separate_reads_in_one_guard_are_separate_pieces_not_one_span(reads: set[int], pieces: list[tuple[int, int]]) -> None:
    layouts = {"t": L.plan(4000, guard=1024)}
    run, _ = simulated({"t": reads})
    [entry], _ = poison.survey(layouts, ["t"], run)
    assert [(lo, hi) for lo, hi, _ in entry["ranges"]] == pieces
    [f] = poison.overread_findings({"regions": [entry]}, kernel="k", arch="cpu")
    assert f.bytes == sum(hi - lo for lo, hi in pieces)


def test_stretches_that_matter_only_together_keep_the_span_whole() -> None:
    """The first and last byte matter alone; the bytes between them only all together (a max over them): the span
    stays whole rather than losing them."""
    middle = set(range(10, 30))

    def test(part: list[tuple[int, int]]) -> bool:
        hit = {b for lo, hi in part for b in range(lo, hi)}
        return 0 in hit or 39 in hit or middle <= hit
    assert poison.gaps(test, 0, 40) == [(0, 40)]


def test_nothing_read_nothing_found_one_run_per_buffer_region() -> None:
    layouts = {"a": L.plan(64, guard=16), "b": L.plan(SCALE_ROWS.nbytes, guard=64, rows=SCALE_ROWS)}
    run, calls = simulated({})
    assert poison.survey(layouts, ["a", "b"], run) == ([], 30)     # five patterns per region (4 uniform, the ramp)
    assert [c[0] for c in calls] == ["a"] * 10 + ["b"] * 20  # every buffer, in the given order


@pytest.mark.parametrize("reads", [{5}, {0}, {1023}, {0, 1023}, {200, 201, 202}, {17, 900}])
def test_bisection_finds_the_first_and_last_byte_that_change_the_output(reads: set[int]) -> None:
    changes = lambda a, b: any(a <= r < b for r in reads)  # noqa: E731
    assert poison.first_changing(changes, 0, 1024) == min(reads)
    assert poison.last_changing(changes, 0, 1024) == max(reads)


def test_findings_carry_region_bounds_and_are_inexact() -> None:
    data = {"regions": [{"buffer": "src", "region": "past_end", "bounds": [4008, 4016], "outputs": {"total": {"elements": 1, "of": 1}}},
                        {"buffer": "scale", "region": "row_padding", "bounds": None, "outputs": {"o": {"elements": 3, "of": 9}}}]}
    src, scale = poison.overread_findings(data, kernel="k", arch="cpu")
    assert (src.detector, src.kind, src.buffer, src.region, src.bytes, src.exact) == (POISON, "overread", "src", "past_end", 8, False)
    assert [(r.start, r.end) for r in src.ranges] == [(4008, 4016)] and "4008..4015" in src.note
    assert (scale.region, scale.bytes, scale.ranges) == ("row_padding", 0, ())   # a report from before ranges
    assert poison.overread_findings(None, kernel="k", arch="") == []


def test_an_inexact_finding_with_a_region_is_held_to_it() -> None:
    [f] = poison.overread_findings({"regions": [{"buffer": "src", "region": "past_end", "bounds": None,
                                        "outputs": {"t": {"elements": 1, "of": 1}}}]}, kernel="k", arch="")
    assert ExpectedFinding("overread", "src", (POISON,), region="past_end", bytes=4).matches(f)
    assert not ExpectedFinding("overread", "src", (POISON,), region="before_start").matches(f)


def test_arena_poisons_only_the_given_spans() -> None:
    a = Arena(torch.device("cpu"), paint=Paint(poison_spans={"x": [(100, 104)]}, poison_marker=0xFF))
    a.tensor("x", (100,), torch.uint8)
    buf = a.buffers["x"]
    st = buf.storage
    assert st[buf.layout.front + 100 : buf.layout.front + 104].tolist() == [0xFF] * 4
    assert int((st == 0xFF).sum()) == 4
    with pytest.raises(L.LayoutError, match=r"poison span 0..4 is not inside its marker bytes"):
        Arena(torch.device("cpu"), paint=Paint(poison_spans={"y": [(0, 4)]})).tensor("y", (100,), torch.uint8)


def test_a_bound_must_lie_inside_the_expected_bytes() -> None:
    """Poison's ranges are bytes whose poison changed the output, so bytes the kernel read: held to the expected
    ranges (inside them), while its byte count, a bound, is not held to the expected count."""
    entry = {"buffer": "scale", "region": "row_padding", "outputs": {"o": {"elements": 1, "of": 9}},
             "ranges": [[72, 80, "row_padding[row 0]"], [152, 160, "row_padding[row 1]"]]}
    [f] = poison.overread_findings({"regions": [entry]}, kernel="k", arch="")
    padding = ((72, 80), (152, 160), (232, 240))
    assert ExpectedFinding("overread", "scale", (POISON,), region="row_padding", bytes=24, ranges=padding).matches(f)
    assert not ExpectedFinding("overread", "scale", (POISON,), region="row_padding", ranges=((72, 80),)).matches(f)


def test_a_max_reduction_that_drops_nan_is_seen_with_the_second_pattern() -> None:
    """Held-out on the H200: a column max over unused rows was missed, because poison's 0xFF is NaN and a max
    drops NaN (and 0xA5 is a tiny negative number a max also ignores). The second pattern, a large finite
    value, is picked by the max: the region is found, bounded in that pattern, and the note says why."""
    layouts = {"a": L.plan(SCALE_ROWS.nbytes, guard=64, rows=SCALE_ROWS)}
    run, _ = simulated({"a": {5 * 80 + 4, 6 * 80 + 4}}, sees=(0x7B,))
    [entry], _ = poison.survey(layouts, ["a"], run, {"a": 4})
    assert (entry["region"], entry["pattern"]) == ("unused_row", 0x7B)
    assert [tuple(r[:2]) for r in entry["ranges"]] == [(404, 408), (484, 488)]
    [f] = poison.overread_findings({"regions": [entry]}, kernel="k", arch="sm_90")
    assert "0x7b" in f.note and "drops NaN" in f.note
    assert poison.PATTERNS[0] == 0xFF      # NaN first: it survives multiplication by zero, 0x7B does not


def test_nothing_seen_in_any_pattern_costs_five_runs_per_guard() -> None:
    layouts = {"x": L.plan(64, guard=16)}
    run, calls = simulated({"x": {70}}, sees=())
    assert poison.survey(layouts, ["x"], run) == ([], 10)


@pytest.mark.parametrize("why, region, read", [
    ("a grammar bitmask word read past the end, only its bit 0 reaching the logits (held-out ht_b): set in 0xA5, "
     "0xFF and 0x7B alike", "past_end", 64 + 8),
    ("an argmax over all-negative log-probs that reads the row padding (held-out ht_h): the baseline's 0xA5, NaN and "
     "0x7B all win it; only a large negative value lets the real values win", "row_padding", 72),
])
def test_a_read_only_a_large_negative_pattern_with_bit_0_clear_changes_is_found_by_0xfa(why: str, region: str,
                                                                                      read: int) -> None:
    layouts = {"x": L.plan(SCALE_ROWS.nbytes if region == "row_padding" else 64, guard=16,
                           rows=SCALE_ROWS if region == "row_padding" else None)}
    run, _ = simulated({"x": {read}}, sees=(0xFA,))
    [entry], _ = poison.survey(layouts, ["x"], run)
    assert (entry["region"], entry["pattern"]) == (region, 0xFA), why
    [f] = poison.overread_findings({"regions": [entry]}, kernel="k", arch="cpu")
    assert "0xfa" in f.note and "lowest bit" in f.note


@pytest.mark.e2e
def test_an_adapter_that_declares_no_output_still_has_its_buffers_compared(tmp_path: Any) -> None:
    """Poison compares the declared outputs (RunInfo.outputs) and, besides them, every buffer that holds none:
    an adapter that declares no output must not make poison mode compare nothing and call the case clean."""
    import json
    import os
    import subprocess
    import sys

    from gpu_memsafety.scenario import registry
    from gpu_memsafety.model import DetectorRun, Outcome
    from gpu_memsafety.util.paths import CHECKOUT as ROOT
    from gpu_memsafety.judge.verdict import decide
    fake = FAKE_DIR
    scenario = registry.load_source(registry.Source(str(fake / "fake_scenarios" / "fake_poison.py")))
    cases = [c for c in scenario.build() if c.variant.startswith("undeclared")]
    job = {"cases": [registry.case_job(scenario, c) for c in cases], "out_dir": str(tmp_path), "mode": "poison",
           "watch_placement": L.GUARDED, "seed": 0, "guard": L.DEFAULT_GUARD, "flush_backend": "torch", "iterations": 1}
    (tmp_path / "job.json").write_text(json.dumps(job))
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=os.pathsep.join([str(ROOT), str(fake)]))
    proc = subprocess.run([sys.executable, "-m", "gpu_memsafety.engine.worker", str(tmp_path / "job.json")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for i, case in enumerate(cases):
        res = json.loads((tmp_path / f"{i}.json").read_text())
        assert res["status"] == "ok", res
        assert res["evidence"]["poison"]["outputs"] == [] and res["evidence"]["poison"]["compared_buffers"] == ["x", "out"]
        found = poison.overread_findings(res["evidence"]["poison"], kernel=res["kernel"], arch=res["arch"])
        verdict = decide(scenario.expect(case), found, [DetectorRun(POISON, True, "compared")])
        if case.variant == "undeclared_overread":
            assert verdict.outcome is Outcome.EXPECTED_FINDING, verdict.message
            [f] = found
            assert (f.buffer, f.region, [(r.start, r.end) for r in f.ranges]) == ("x", "past_end", [(4000, 4004)])
            assert "buffer out: 1000 of 1000 elements changed" in f.note
        else:
            assert verdict.outcome is Outcome.CLEAN and not found, verdict.message


def test_a_change_that_does_not_follow_the_poisoned_bytes_keeps_the_span_whole_never_a_negative_bound() -> None:
    """A CPU held-out run (session 8): a kernel writing 64 KiB past its buffer changed another buffer in some runs
    and not others; bisection then ended with its first byte past its last ("22868..21919 (-948 B)") and the
    report could not be written. An inconsistent answer keeps the span whole."""
    whole = (4008, 5032)
    changes = lambda part: part == [whole]              # noqa: E731 - only the whole span ever changes anything
    assert poison.bound(changes, [whole], 4) == [whole]


def test_an_output_that_changes_with_nothing_poisoned_is_not_an_overread_but_unjudgeable() -> None:
    layouts = {"out": L.plan(4008, guard=1024), "x": L.plan(4008, guard=1024)}

    def run(name: str, spans: list[tuple[int, int]], pattern: int) -> dict[str, Any]:
        return {"buffer x": {"elements": 1, "of": 1002}} if name == "out" else {}    # whatever is poisoned
    found, runs = poison.survey(layouts, ["out", "x"], run)
    assert [(e["buffer"], e["region"], bool(e.get("unstable"))) for e in found] == [
        ("out", "before_start", True), ("out", "past_end", True)]
    evidence = {"regions": found, "runs": runs}
    assert poison.overread_findings(evidence, kernel="k", arch="cpu") == []
    why = poison.unstable_regions(evidence)
    assert "differ between identical runs with nothing poisoned" in why and "buffer x: 1 of 1002" in why
    # a kernel that reads what it should not, deterministically, is unaffected (the control run changes nothing)
    run2, calls = simulated({"x": {4008}})
    [entry], _ = poison.survey({"x": L.plan(4008, guard=1024)}, ["x"], run2)
    assert not entry.get("unstable") and ("x", []) in calls


def test_a_read_of_unused_rows_that_only_an_argmax_sees_is_found_by_the_ramp() -> None:
    """Held-out hr_b (session 9): a greedy argmax over every row of a max-batch logits buffer. A row of one byte value
    (the marker, 0xFF, 0x7B) always gives argmax 0, so neither uniform pattern changed anything; the ramp does.
    Guards get the ramp too (where memcheck watched a buffer's ends, its guards are left to memcheck)."""
    rows = L.Rows(rows=8, row_bytes=64, row_stride=64, used_rows=5)
    layouts = {"logits": L.plan(rows.nbytes, guard=64, rows=rows)}
    seen = []

    def run(name: str, spans: list[tuple[int, int]], pattern: int) -> dict[str, Any]:
        seen.append(pattern)
        unused = any(5 * 64 <= lo < rows.nbytes for lo, _ in spans)
        return {"argmax": {"elements": 1, "of": 8}} if unused and pattern == poison.RAMP else {}
    [entry], runs = poison.survey(layouts, ["logits"], run)
    assert (entry["region"], entry["pattern"]) == ("unused_row", poison.RAMP)
    [f] = poison.overread_findings({"regions": [entry]}, kernel="k", arch="cpu")
    assert "ramp" in f.note and "argmax" in f.note
    assert seen[:10] == [0xFF, 0x7B, 0xFA, 0x00, poison.RAMP] * 2     # the two guards: every pattern, nothing seen


def test_the_arena_writes_the_ramp_into_the_poisoned_spans_and_nothing_else() -> None:
    from gpu_memsafety.placement.guard import ramp_bytes
    arena = Arena(torch.device("cpu"), guard=16, paint=Paint(poison_spans={"x": [(8, 12)]}, poison_marker=poison.RAMP))
    x = arena.tensor("x", (2,), torch.int32)
    buf = arena.buffers["x"]
    front = buf.layout.front
    assert buf.storage[front + 8:front + 12].tolist() == ramp_bytes(8, 12, torch.device("cpu")).tolist() == [51, 88, 125, 162]
    assert set(buf.storage[:front].tolist()) == {0xA5} and set(buf.storage[front + 12:].tolist()) == {0xA5}
    assert x.numel() == 2


def test_integer_outputs_are_compared_exactly() -> None:
    """Held-out hw_a: a KV ring cursor of 3,145,023 moved by 4 when the count past the end is poisoned: within a float
    tolerance (1.3e-6 relative), so it was never seen. Integer outputs now keep their dtype and are compared exactly."""
    from types import SimpleNamespace
    ctx = SimpleNamespace(arena=SimpleNamespace(buffers={}))
    base = poison._host_outputs(ctx, {"cursor": torch.tensor([3_145_023], dtype=torch.int32)})
    moved = poison._host_outputs(ctx, {"cursor": torch.tensor([3_145_027], dtype=torch.int32)})
    assert base["cursor"].dtype == torch.int32
    assert poison._changed_outputs(base, moved) == {"cursor": {"elements": 1, "of": 1, "nan_b": 0, "nan_a": 0}}
    big = poison._host_outputs(ctx, {"n": torch.tensor([(1 << 24) + 1], dtype=torch.int64)})
    assert poison._changed_outputs(big, poison._host_outputs(ctx, {"n": torch.tensor([1 << 24])}))   # fp32 merged them


def test_the_poisoned_buffer_s_own_values_are_compared_less_its_marker_bytes() -> None:
    """Held-out hw_d: an in-place log-softmax over padded-vocab rows reads one element of each row's padding into
    its own values, and declares no output: the only buffer that changes is the one being poisoned."""
    from types import SimpleNamespace
    rows = L.Rows(rows=4, row_bytes=16, row_stride=32, used_rows=4)

    def ctx_with(value_at: int | None, pad_byte: int | None) -> Any:
        arena = Arena(torch.device("cpu"), guard=64)
        arena.rows("logits", rows=4, row_bytes=16, row_stride=32, used_rows=4, dtype=torch.float32)
        body = arena.buffers["logits"].body()
        body[:16].view(torch.float32).fill_(1.0)
        if value_at is not None:
            body[value_at:value_at + 4].view(torch.float32).fill_(2.0)
        if pad_byte is not None:
            body[16 + pad_byte] = 0x00                # a poisoned marker byte inside the row padding
        return SimpleNamespace(arena=arena)
    base = ctx_with(None, None)
    assert poison._changed_own(base, ctx_with(None, 3), "logits") == {}        # only marker bytes differ: nothing
    assert poison._changed_own(base, ctx_with(4, 3), "logits") == {"buffer logits": {"elements": 1, "of": 16}}
    assert rows.nbytes == 128


def test_the_rest_of_a_buffer_that_holds_a_declared_output_is_compared() -> None:
    """Held-out hw_b: add+RMSNorm over the CUDA-graph padded batch (8 rows) with a residual sized to the real one (6);
    the adapter declares `out[:6]`. Rows 6-7 of out, garbage from the residual's back guard, were never compared."""
    from types import SimpleNamespace

    def ctx_with(rows_6_7: float) -> Any:
        arena = Arena(torch.device("cpu"), guard=64)
        out = arena.tensor("out", (8, 4), torch.float32)
        out.fill_(1.0)
        out[6:] = rows_6_7
        return SimpleNamespace(arena=arena), {"out": out[:6]}
    (base, outputs), (moved, _) = ctx_with(1.0), ctx_with(7.0)
    spans = poison._declared_spans(base, outputs)
    assert spans == {"out": [(0, 96)]}
    assert poison._changed_own(base, moved, "out", spans["out"]) == {
        "buffer out (outside its declared outputs)": {"elements": 8, "of": 8}}
    assert poison._changed_own(base, ctx_with(1.0)[0], "out", spans["out"]) == {}


@pytest.mark.e2e
def test_a_result_the_context_did_not_allocate_is_never_called_clean(tmp_path: Any, worker_env: Any) -> None:
    """Issue 44: the adapter writes its result into a tensor of its own (torch.empty) and declares none, or declares
    a persistent workspace handed back by every run. Poison compared nothing known to be the result: the verdict
    says so and is no pass; a persistent output is copied at the baseline, so an overread that changes it is seen."""
    from pathlib import Path

    from gpu_memsafety.detectors.modes import MODES
    from gpu_memsafety.engine.runner import RunOptions, Runner
    from gpu_memsafety.model import Outcome
    from gpu_memsafety.scenario import registry
    from gpu_memsafety.util.paths import CHECKOUT as ROOT
    fake = registry.load_source(registry.Source(str(FAKE_DIR / "fake_scenarios" / "fake_poison.py"),
                                                None, "tests"))
    wanted = ("foreign_undeclared", "foreign_kept", "foreign_declared", "undeclared_clean", "undeclared_overread")
    cases = [c for c in fake.build() if c.variant in wanted]
    runner = Runner(RunOptions(mode=MODES["poison"], workdir=Path(tmp_path) / "w", gpu_available=False,
                               timeout_scale=0.5))
    got = {r.variant: r for r in runner.run([(fake, c) for c in cases])}
    for variant in ("foreign_undeclared", "undeclared_clean"):
        result = got[variant]
        assert result.outcome is Outcome.UNRESOLVED and result.failed, (variant, result.outcome, result.message)
        assert "poison compared nothing known to be the kernel's result" in result.message
        assert "declared no output" in result.message
        [run] = [d for d in result.detectors if d.detector == POISON]
        assert "compared nothing" in run.detail
    for variant in ("foreign_kept", "foreign_declared", "undeclared_overread"):
        result = got[variant]
        assert result.outcome is Outcome.EXPECTED_FINDING, (variant, result.outcome, result.message)
        assert [(f.buffer, f.region) for f in result.findings] == [("x", "past_end")]


def test_declared_outputs_without_an_element_compare_nothing() -> None:
    report = {"regions": [], "outputs": ["out"], "output_elements": 0, "compared_buffers": ["x"], "runs": 4}
    assert "the declared outputs out hold no element" in poison.nothing_compared(report)
    assert poison.nothing_compared({**report, "output_elements": 8}) == ""
    assert poison.nothing_compared({**report, "regions": [{"buffer": "x"}]}) == ""      # a change was compared
    assert poison.nothing_compared({"regions": [], "outputs": ["out"], "compared_buffers": []}) == ""  # older report
    from types import SimpleNamespace
    ev = SimpleNamespace(of=lambda _: report, result=SimpleNamespace(notes={}))
    assert "compared nothing" in poison.DETECTOR.ran(ev).detail  # type: ignore[arg-type]
