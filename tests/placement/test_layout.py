"""gpu_memsafety.placement.layout: the byte arithmetic every detector and every attribution rests on.

A wrong boundary here misnames every finding (a padding write reported as 'inside', an overread that
memcheck cannot see because the tensor does not end on its allocation's last byte), so each rule is pinned
with exact offsets: flush-end rounding, padded rows (72 logical bytes of 80), unused rows, region cuts,
run merging, and the messages of layouts that cannot be built.
"""
from __future__ import annotations

import pytest

from gpu_memsafety.placement import layout as L
from gpu_memsafety.placement.layout import GuardLayout, LayoutError, Rows
from gpu_memsafety.model import ByteRange
from repo_paths import ROOT

# The pre-dispatch scale buffer at H=2304: 8 rows of 72 logical bytes, 80 bytes apart, 5 tokens written.
SCALE_ROWS = Rows(rows=8, row_bytes=72, row_stride=80, used_rows=5)


def scale_layout(placement: str = L.GUARDED, guard: int = 64) -> GuardLayout:
    return L.plan(SCALE_ROWS.nbytes, placement=placement, guard=guard, rows=SCALE_ROWS)


# ------------------------------------------------------------------------------------------------- plan

def test_guarded_plan_puts_the_guard_on_both_sides() -> None:
    lay = L.plan(4000, guard=1024)
    assert (lay.front, lay.nbytes, lay.back, lay.total) == (1024, 4000, 1024, 6048)
    assert lay.placement == L.GUARDED


def test_flush_end_plan_starts_aligned_and_is_exactly_front_plus_tensor() -> None:
    # Issue 19: the old plan put a 4,008-byte tensor at offset 1112 (misaligned); now it starts at 1024 of an
    # exact 5,032-byte allocation (the real allocator's: memcheck knows its size to the byte).
    lay = L.plan(4008, placement=L.FLUSH_END, guard=1024)
    assert (lay.front, lay.back, lay.tail, lay.total, lay.allocation_end) == (1024, 0, 0, 5032, 4008)


def test_guard_page_plan_starts_aligned_and_ends_on_the_next_align_boundary() -> None:
    lay = L.plan(4008, placement=L.GUARD_PAGE_BACK, guard=1024)
    assert (lay.front, lay.back, lay.tail, lay.total) == (1024, 88, 88, 5120)
    assert lay.allocation_end == 4096


@pytest.mark.parametrize("placement", [L.GUARDED, L.FLUSH_END, L.GUARD_PAGE_BACK])
@pytest.mark.parametrize("guard", [0, 1, 16, 1024])
def test_placement_arithmetic_for_every_size_from_1_to_4096_bytes(placement: str, guard: int) -> None:
    """Every tensor start is ALIGN-aligned; a flush-end allocation is exactly front + nbytes; a guard-page
    allocation ends on the first ALIGN boundary at or after the tensor's end (so an allocation that ends on a
    page keeps the start aligned); that tail is the only gap and it is covered by markers."""
    for nbytes in range(1, 4097):
        lay = L.plan(nbytes, placement=placement, guard=guard)
        assert lay.front % L.ALIGN == 0 and guard <= lay.front < guard + L.ALIGN, (nbytes, lay)
        if placement == L.GUARDED:
            assert (lay.back, lay.tail) == (guard, 0)
            continue
        if placement == L.FLUSH_END:
            assert (lay.back, lay.tail, lay.total, lay.allocation_end) == (0, 0, lay.front + nbytes, nbytes)
            assert lay.marker_spans() == ([(-lay.front, 0, "front_guard")] if lay.front else [])
            assert (lay.region_of(nbytes), lay.zone_of(nbytes)) == ("past_end", "past_allocation")
            continue
        assert lay.total % L.ALIGN == 0, (nbytes, lay)                  # start = any_aligned_end - total
        assert lay.allocation_end == L.round_up(nbytes, L.ALIGN)
        assert 0 <= lay.tail < L.ALIGN and lay.tail == (-nbytes) % L.ALIGN
        assert (lay.tail == 0) == (nbytes % L.ALIGN == 0)
        spans = lay.marker_spans()
        assert ((nbytes, nbytes + lay.tail, "alignment_tail") in spans) == bool(lay.tail)
        for offset in (nbytes, nbytes + lay.tail - 1):
            if lay.tail:
                assert (lay.region_of(offset), lay.zone_of(offset)) == ("past_end", "alignment_tail")
        assert (lay.region_of(lay.allocation_end), lay.zone_of(lay.allocation_end)) == ("past_end", "past_allocation")


def test_a_layout_whose_front_would_misalign_the_tensor_is_refused() -> None:
    with pytest.raises(LayoutError, match=r"front guard of 16 B would start the tensor misaligned .*256"):
        GuardLayout(nbytes=100, front=16, back=16)


def test_flush_end_with_exact_alignment_and_no_guard_has_no_front_guard_and_no_tail() -> None:
    lay = L.plan(1024, placement=L.FLUSH_END, guard=0)
    assert (lay.front, lay.back, lay.total) == (0, 0, 1024)


def test_exact_plan_is_the_tensor_alone_so_memcheck_sees_both_ends() -> None:
    """memcheck's placement: no guard on either side; the first byte before the start and past the end are
    both outside the allocation; only row padding and unused rows keep markers."""
    for nbytes in (1, 255, 256, 4008):
        lay = L.plan(nbytes, placement=L.EXACT, guard=1024)
        assert (lay.front, lay.back, lay.total, lay.allocation_end) == (0, 0, nbytes, nbytes)
        assert lay.marker_spans() == []
        assert (lay.region_of(-1), lay.zone_of(-1)) == ("before_start", "before_allocation")
        assert (lay.region_of(nbytes), lay.zone_of(nbytes)) == ("past_end", "past_allocation")
    rows = L.plan(SCALE_ROWS.nbytes, placement=L.EXACT, rows=SCALE_ROWS)
    assert {zone.split("[")[0] for _, _, zone in rows.marker_spans()} <= {"padding", "unused_row"}
    with pytest.raises(LayoutError, match="no front guard"):
        GuardLayout(nbytes=100, front=256, back=0, placement=L.EXACT)
    assert L.unguarded_regions(L.EXACT) == {"before_start", "past_end"}
    assert L.unguarded_regions(L.FLUSH_END) == {"past_end"} and not L.unguarded_regions(L.GUARDED)


def test_sanitizer_modes_use_the_exact_placement() -> None:
    from gpu_memsafety.detectors.modes import MODES
    assert MODES["memcheck"].placement(sanitized=True) == L.EXACT == MODES["both"].placement(sanitized=True)
    assert MODES["both"].placement(sanitized=False) == L.GUARDED     # without the sanitizer, guards stay


def test_plan_keeps_the_row_spec() -> None:
    assert scale_layout().rows == SCALE_ROWS
    assert scale_layout(L.FLUSH_END).rows == SCALE_ROWS


def test_round_up() -> None:
    assert [L.round_up(v, 512) for v in (0, 1, 511, 512, 513)] == [0, 512, 512, 512, 1024]


# ---------------------------------------------------------------------------------------------- errors

def test_negative_guard_is_refused_with_its_value() -> None:
    with pytest.raises(LayoutError, match=r"guard must be >= 0, got -8"):
        L.plan(100, guard=-8)


def test_unknown_placement_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(LayoutError, match=r"placement 'sideways' is not one of .*flush_end"):
        GuardLayout(nbytes=16, front=0, back=0, placement="sideways")


def test_empty_tensor_is_refused() -> None:
    with pytest.raises(LayoutError, match=r"nbytes must be positive, got 0"):
        L.plan(0)


def test_negative_guard_fields_are_refused() -> None:
    with pytest.raises(LayoutError, match=r"guards cannot be negative \(front=-1, back=0\)"):
        GuardLayout(nbytes=16, front=-1, back=0)


def test_rows_that_do_not_cover_the_tensor_are_refused() -> None:
    with pytest.raises(LayoutError, match=r"rows cover 640 bytes but the tensor has 576"):
        GuardLayout(nbytes=576, front=0, back=0, rows=SCALE_ROWS)


def test_flush_end_with_a_back_guard_is_refused() -> None:
    with pytest.raises(LayoutError, match=r"placement flush_end has no back guard, got back=16"):
        GuardLayout(nbytes=16, front=0, back=16, placement=L.FLUSH_END)


def test_guard_page_with_more_than_an_alignment_tail_is_refused() -> None:
    with pytest.raises(LayoutError, match=r"placement guard_page has no back guard, only an alignment tail below 256 B, got back=256"):
        GuardLayout(nbytes=16, front=0, back=256, placement=L.GUARD_PAGE_BACK)


@pytest.mark.parametrize("kwargs, message", [
    ({"rows": 0, "row_bytes": 72, "row_stride": 80, "used_rows": 0}, r"rows and row_bytes must be positive, got rows=0"),
    ({"rows": 8, "row_bytes": 0, "row_stride": 80, "used_rows": 0}, r"row_bytes=0"),
    ({"rows": 8, "row_bytes": 80, "row_stride": 72, "used_rows": 5}, r"row_stride 72 is smaller than row_bytes 80"),
    ({"rows": 8, "row_bytes": 72, "row_stride": 80, "used_rows": 9}, r"used_rows 9 is outside 0..8"),
    ({"rows": 8, "row_bytes": 72, "row_stride": 80, "used_rows": -1}, r"used_rows -1 is outside 0..8"),
])
def test_impossible_rows_are_refused_with_the_numbers(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        Rows(**kwargs)


def test_layout_error_is_a_value_error() -> None:
    assert issubclass(LayoutError, ValueError)


# ------------------------------------------------------------------------------------------- region_of

@pytest.mark.parametrize("offset, region, zone", [
    (-257, "before_start", "before_allocation"), (-256, "before_start", "front_guard"), (-1, "before_start", "front_guard"),
    (0, "inside", "inside"), (99, "inside", "inside"), (100, "past_end", "back_guard"), (115, "past_end", "back_guard"),
    (116, "past_end", "past_allocation"), (10_000, "past_end", "past_allocation"),
])
def test_region_and_zone_of_a_guarded_tensor(offset: int, region: str, zone: str) -> None:
    lay = L.plan(100, guard=16)
    assert (lay.region_of(offset), lay.zone_of(offset)) == (region, zone)


def test_past_a_guard_page_tensor_is_past_end_at_once() -> None:
    lay = L.plan(4000, placement=L.GUARD_PAGE_BACK, guard=1024)
    assert lay.region_of(3999) == "inside"
    assert (lay.region_of(4000), lay.zone_of(4000)) == ("past_end", "alignment_tail")
    assert (lay.region_of(4096), lay.zone_of(4096)) == ("past_end", "past_allocation")
    assert (lay.region_of(-lay.front), lay.zone_of(-lay.front)) == ("before_start", "front_guard")
    assert lay.zone_of(-lay.front - 1) == "before_allocation"


@pytest.mark.parametrize("offset, region", [
    (0, "inside"), (71, "inside"), (72, "row_padding[row 0]"), (79, "row_padding[row 0]"), (80, "inside"),
    (231, "inside"), (232, "row_padding[row 2]"), (239, "row_padding[row 2]"), (240, "inside"),
    (392, "row_padding[row 4]"), (399, "row_padding[row 4]"),
    (400, "unused_row[5]"), (472, "unused_row[5]"),     # an unused row is unused in its padding too
    (480, "unused_row[6]"), (639, "unused_row[7]"), (640, "past_end"), (-1, "before_start"),
])
def test_region_of_padded_rows_72_of_80_with_5_of_8_used(offset: int, region: str) -> None:
    assert scale_layout().region_of(offset) == region


def test_zone_of_padded_rows_keeps_the_guard_words() -> None:
    lay = scale_layout()
    assert [lay.zone_of(o) for o in (72, 400, 640, -1)] == ["padding[row 0]", "unused_row[5]", "back_guard", "front_guard"]


def test_rows_without_padding_have_no_padding_region() -> None:
    lay = L.plan(8 * 72, rows=Rows(rows=8, row_bytes=72, row_stride=72, used_rows=5), guard=8)
    assert lay.region_of(71) == "inside"
    assert lay.region_of(72) == "inside"
    assert lay.region_of(360) == "unused_row[5]"


def test_region_class_strips_the_index() -> None:
    assert L.region_class("row_padding[row 2]") == "row_padding"
    assert L.region_class("unused_row[5]") == "unused_row"
    assert L.region_class("past_end") == "past_end"


@pytest.mark.parametrize("old, new", [("back_guard", "past_end"), ("front_guard", "before_start"),
                                      ("padding", "row_padding"), ("before_allocation", "before_start")])
def test_old_region_words_are_refused_with_the_word_to_use(old: str, new: str) -> None:
    with pytest.raises(ValueError, match=rf"region '{old}' is a detector's word, not a region: use '{new}'"):
        L.check_region(old)


def test_unknown_region_is_refused_listing_the_vocabulary() -> None:
    with pytest.raises(ValueError, match=r"unknown region .sideways.; regions: before_start, past_end, row_padding, unused_row, inside, shared"):
        L.check_region("sideways")
    assert [L.check_region(r) for r in L.REGIONS] == list(L.REGIONS)


# ---------------------------------------------------------------------------------------- marker_spans

def test_marker_spans_of_padded_rows() -> None:
    spans = scale_layout(guard=64).marker_spans()
    assert spans == [
        (-256, 0, "front_guard"),
        (72, 80, "padding[row 0]"), (152, 160, "padding[row 1]"), (232, 240, "padding[row 2]"),
        (312, 320, "padding[row 3]"), (392, 400, "padding[row 4]"),
        (400, 480, "unused_row[5]"), (480, 560, "unused_row[6]"), (560, 640, "unused_row[7]"),
        (640, 704, "back_guard"),
    ]


def test_marker_spans_of_a_guard_page_tensor_cover_the_alignment_tail() -> None:
    lay = L.plan(4000, placement=L.GUARD_PAGE_BACK)
    assert lay.marker_spans() == [(-lay.front, 0, "front_guard"), (4000, 4096, "alignment_tail")]
    assert L.plan(4096, placement=L.GUARD_PAGE_BACK).marker_spans() == [(-1024, 0, "front_guard")]
    assert L.plan(4000, placement=L.FLUSH_END).marker_spans() == [(-1024, 0, "front_guard")]


# -------------------------------------------------------------------------------------- split_by_region

def test_split_a_write_across_a_padding() -> None:
    assert L.split_by_region(scale_layout(), 70, 82) == [(70, 72, "inside"), (72, 80, "row_padding[row 0]"), (80, 82, "inside")]


def test_split_from_the_last_used_row_into_the_unused_rows() -> None:
    assert L.split_by_region(scale_layout(), 390, 490) == [
        (390, 392, "inside"), (392, 400, "row_padding[row 4]"), (400, 480, "unused_row[5]"), (480, 490, "unused_row[6]")]


def test_split_keeps_one_piece_per_region_even_across_the_row_width() -> None:
    # 460..478 crosses row 5's logical width (472) but stays in unused_row[5]
    assert L.split_by_region(scale_layout(), 460, 478) == [(460, 478, "unused_row[5]")]


def test_split_from_front_guard_into_the_tensor() -> None:
    assert L.split_by_region(L.plan(100, guard=16), -4, 4) == [(-4, 0, "before_start"), (0, 4, "inside")]


def test_split_through_the_back_guard_and_past_the_allocation_is_one_past_end_piece() -> None:
    lay = L.plan(100, guard=16)
    assert L.split_by_region(lay, 98, 120) == [(98, 100, "inside"), (100, 120, "past_end")]


def test_split_before_the_allocation_is_one_before_start_piece() -> None:
    lay = L.plan(100, guard=16)
    assert L.split_by_region(lay, -300, -10) == [(-300, -10, "before_start")]


def test_split_past_a_flush_end() -> None:
    lay = L.plan(4000, placement=L.FLUSH_END)
    assert L.split_by_region(lay, 3996, 4012) == [(3996, 4000, "inside"), (4000, 4012, "past_end")]


def test_packed_writes_of_5_tokens_hit_the_padding_of_rows_0_to_3() -> None:
    lay = scale_layout()
    pieces = [p for t in range(5) for p in L.split_by_region(lay, t * 72, t * 72 + 72) if p[2] != "inside"]
    assert pieces == [(72, 80, "row_padding[row 0]"), (152, 160, "row_padding[row 1]"), (232, 240, "row_padding[row 2]"),
                      (312, 320, "row_padding[row 3]")]


# ----------------------------------------------------------------------------------- ranges_from_offsets

def test_ranges_from_offsets_cuts_each_run_at_region_boundaries() -> None:
    ranges = L.ranges_from_offsets(scale_layout(), [(70, 82), (232, 240), (640, 642)])
    assert ranges == [
        ByteRange("inside", 70, 72), ByteRange("row_padding[row 0]", 72, 80), ByteRange("inside", 80, 82),
        ByteRange("row_padding[row 2]", 232, 240), ByteRange("past_end", 640, 642),
    ]
    assert [r.nbytes for r in ranges] == [2, 8, 2, 8, 2]


def test_ranges_from_no_offsets_is_empty() -> None:
    assert L.ranges_from_offsets(scale_layout(), []) == []


# ------------------------------------------------------------------------------------------- merge_runs

@pytest.mark.parametrize("spans, merged", [
    ([], []),
    ([(5, 10)], [(5, 10)]),
    ([(10, 20), (0, 5)], [(0, 5), (10, 20)]),           # sorted
    ([(0, 10), (5, 15)], [(0, 15)]),                    # overlapping
    ([(0, 10), (10, 15)], [(0, 15)]),                   # touching
    ([(0, 100), (10, 20), (30, 40)], [(0, 100)]),       # nested
    ([(0, 4), (4, 8), (8, 12), (20, 24)], [(0, 12), (20, 24)]),
    ([(-4, 0), (0, 4)], [(-4, 4)]),                     # negative offsets (front guard)
])
def test_merge_runs(spans: list[tuple[int, int]], merged: list[tuple[int, int]]) -> None:
    assert L.merge_runs(spans) == merged


# ----------------------------------------------------------------------------------------------- json

@pytest.mark.parametrize("lay", [L.plan(4000), scale_layout(L.FLUSH_END), L.plan(7, placement=L.GUARD_PAGE_BACK, guard=3)])
def test_layout_round_trips_through_json(lay: GuardLayout) -> None:
    import json
    assert GuardLayout.from_json(json.loads(json.dumps(lay.to_json()))) == lay


# ------------------------------------------------------------------------------ which placement catches more

def test_placement_coverage_table_the_readme_quotes() -> None:
    """tools/placement_coverage.py: every size 1..4096, planted 1/4/16-byte accesses up to 255 B past the end.
    The old flush placement made correct 4/16-byte loads 'misaligned' on 3,840 of 4,096 sizes; no aligned
    placement does. A guard page misses the overreads that stay in its alignment tail (about half of these);
    the exact flush-end allocation memcheck watches sees them all."""
    import importlib.util
    from pathlib import Path
    path = ROOT / "tools" / "placement_coverage.py"
    spec = importlib.util.spec_from_file_location("placement_coverage", path)
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    c = tool.coverage()
    planted = c["flush_end"]["planted"]
    assert (c["misaligned_flush"]["false_misaligned_sizes"], c["guard_page"]["false_misaligned_sizes"],
            c["flush_end"]["false_misaligned_sizes"]) == (3840, 0, 0)
    assert c["flush_end"]["reads"] == c["flush_end"]["writes"] == c["guard_page"]["writes"] == planted
    assert c["guard_page"]["reads"] == 687_360 and planted == 1_376_256


def test_guard_page_offsets_come_from_where_the_mapping_really_ends() -> None:
    """A 4,000-byte tensor on a guard page: 96 bytes of alignment tail, then the page at byte 4096; a torch
    buffer has no guard page and is left out."""
    lay = L.plan(4000, placement=L.GUARD_PAGE_BACK)
    base, mapped = 1 << 40, 2 << 20
    tensor = base + mapped - lay.total + lay.front
    buffers = [{"name": "src", "backend": "vmm", "alloc_base": base, "alloc_size": mapped, "tensor_addr": tensor},
               {"name": "dst", "backend": "torch", "alloc_base": 0, "alloc_size": 4000, "tensor_addr": 0}]
    assert L.guard_page_offsets(buffers) == {"src": 4096}
    with pytest.raises(L.LayoutError, match="alloc_base"):
        L.guard_page_offsets([{"name": "x", "backend": "vmm"}])


# ------------------------------------------------------------------------------------------- the front page

def test_front_page_plan_starts_the_tensor_on_the_page_with_markers_to_the_next_align_boundary() -> None:
    """Issue 20 item 4: the tensor's first byte is the first mapped byte after an unmapped page (no front guard:
    a page boundary is aligned), its alignment tail in markers after its end; the first byte before it faults."""
    lay = L.plan(4008, placement=L.GUARD_PAGE_FRONT, guard=1024)
    assert (lay.front, lay.back, lay.tail, lay.total, lay.allocation_end) == (0, 88, 88, 4096, 4096)
    assert lay.marker_spans() == [(4008, 4096, "alignment_tail")]
    assert (lay.region_of(-1), lay.zone_of(-1)) == ("before_start", "before_allocation")
    assert (lay.region_of(4008), lay.zone_of(4008)) == ("past_end", "alignment_tail")
    for nbytes in range(1, 4097):
        lay = L.plan(nbytes, placement=L.GUARD_PAGE_FRONT, guard=1024)
        assert lay.front == 0 and lay.total % L.ALIGN == 0 and lay.total - nbytes == lay.back < L.ALIGN, nbytes
    rows = L.plan(SCALE_ROWS.nbytes, placement=L.GUARD_PAGE_FRONT, rows=SCALE_ROWS)
    assert rows.front == 0 and rows.region_of(72) == "row_padding[row 0]"


def test_a_front_page_layout_with_a_front_guard_or_a_back_guard_is_refused() -> None:
    with pytest.raises(LayoutError, match=r"guard_page_front starts the tensor right after an unmapped page: it has no front guard, got front=256"):
        GuardLayout(nbytes=16, front=256, back=240, placement=L.GUARD_PAGE_FRONT)
    with pytest.raises(LayoutError, match=r"guard_page_front has no back guard, only an alignment tail below 256 B"):
        GuardLayout(nbytes=16, front=0, back=256, placement=L.GUARD_PAGE_FRONT)


def test_page_side_reads_the_placement_from_the_buffer_map_and_only_a_vmm_buffer_has_a_page() -> None:
    back, front = L.plan(4000, placement=L.GUARD_PAGE_BACK), L.plan(4000, placement=L.GUARD_PAGE_FRONT)
    base = 1 << 40
    buffers = [{"name": "a", "backend": "vmm", "layout": back.to_json(), "alloc_base": base, "alloc_size": 2 << 20,
                "tensor_addr": base + (2 << 20) - 96 - 4000},
               {"name": "b", "backend": "vmm", "layout": front.to_json(), "alloc_base": base, "alloc_size": 2 << 20,
                "tensor_addr": base},
               {"name": "c", "backend": "torch", "layout": front.to_json()},
               {"name": "d", "backend": "vmm"}]          # an older map without a layout: the back page, the only one
    assert L.paged_buffers(buffers) == {"a": "back", "b": "front", "d": "back"}
    # only a back page has an offset past which bytes fault (verdict.decide's `pages`)
    assert L.guard_page_offsets(buffers[:3]) == {"a": 4096}
