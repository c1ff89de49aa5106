"""The picture of a finding's buffer (gpu_memsafety.report.picture, .svg): segments from the recorded layout, the
touched bytes placed in the right segment, the text strip `repro` prints, and the SVG the HTML report inlines."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, OVERWRITE, UNATTRIBUTED, ByteRange, Finding
from gpu_memsafety.placement.layout import Rows, plan
from gpu_memsafety.report.picture import (BACK_GUARD, FOLDED, FRONT_GUARD, OUTSIDE, PADDING, ROW, TAIL, TENSOR, UNUSED,
                                          Picture, buffer_records, drawable, picture, strip)
from gpu_memsafety.report.svg import picture_svg
from report_samples import HOSTILE, SCALE_LAYOUT, padding_overwrite, past_end_overread


def record(layout, first: str = "", last: str = "") -> dict:
    return {"layout": layout.to_json(), "first": first, "last": last}


def segment_at(pic: Picture, offset: int):
    return next(s for s in pic.segments if s.start <= offset < s.end)


def x_range(pic: Picture, seg) -> tuple[float, float]:
    return pic.x(seg.start), pic.x(seg.end)


def test_rows_layout_draws_guards_rows_padding_and_unused_rows_and_places_the_mark_in_its_padding() -> None:
    pic = picture(padding_overwrite(), record(SCALE_LAYOUT, "token 0", "token 7"))
    kinds = [s.kind for s in pic.segments]
    assert kinds[0] == FRONT_GUARD and kinds[-1] == BACK_GUARD and UNUSED in kinds
    assert [s.label for s in pic.segments if s.kind == ROW] == ["row 0", "row 1", "row 2", "row 3", "row 4"]
    padding = segment_at(pic, 88)
    assert (padding.kind, padding.label) == (PADDING, "row 2 padding 8 B")
    [mark] = pic.marks
    lo, hi = pic.span(mark)
    left, right = x_range(pic, padding)
    assert left <= lo < hi <= right                      # the red bytes are drawn inside row 2's padding
    assert segment_at(pic, 5 * 32).label == "unused rows 5..7"
    assert (pic.first, pic.last, pic.recorded) == ("token 0", "token 7", True)
    assert "8 rows of 24 B every 32 B, 5 used" in pic.title


def test_an_overread_past_an_exact_allocation_lies_outside_it_after_the_tensor() -> None:
    layout = plan(4096, placement="exact")
    pic = picture(past_end_overread(), record(layout))
    assert [s.kind for s in pic.segments] == [TENSOR, OUTSIDE]
    assert pic.segments[1].label == "past the allocation"
    lo, _ = pic.span(pic.marks[0])
    assert lo >= pic.x(4096) > pic.x(0)


def test_a_guard_page_placement_shows_its_tail_and_the_unmapped_page() -> None:
    layout = plan(4000, placement="guard_page")        # 96 B alignment tail before the page
    finding = Finding(MEMCHECK, OVERREAD, "x", "past_end", 4, 1, ranges=(ByteRange("past_end", 4100, 4104),))
    pic = picture(finding, record(layout))
    assert [(s.kind, s.label) for s in pic.segments[-2:]] == [(TAIL, "alignment tail 96 B"), (OUTSIDE, "unmapped page")]


def test_many_touched_rows_are_folded_in_the_middle_and_every_range_is_still_drawn() -> None:
    rows = Rows(rows=512, row_bytes=72, row_stride=80, used_rows=512)
    ranges = tuple(ByteRange(f"row_padding[row {r}]", r * 80 + 72, r * 80 + 80) for r in range(512))
    finding = Finding(GUARD, OVERWRITE, "scale", "row_padding", 8 * 512, 512, ranges=ranges)
    pic = picture(finding, record(plan(512 * 80, rows=rows)))
    assert len(pic.segments) < 30
    assert any(s.kind == FOLDED and s.label.startswith("rows ") for s in pic.segments)
    assert len(pic.marks) == 512 and len(pic.legend) == 6 and pic.unlisted == 506
    assert "and 506 more ranges" in strip(pic)


def test_without_a_recorded_layout_the_picture_is_a_schematic_and_says_so() -> None:
    pic = picture(past_end_overread(), None)
    assert not pic.recorded and "layout not recorded" in pic.title
    assert [s.label for s in pic.segments] == ["tensor (size not recorded)", "past the end"]
    broken = picture(past_end_overread(), {"layout": {"nbytes": -1}})   # a record that is not a layout: a schematic
    assert not broken.recorded


def _cell_at(boxes: str, column: int) -> str:
    left = boxes.rfind("|", 0, column)
    right = boxes.find("|", column)
    return boxes[left + 1:right].strip()


def test_the_text_strip_marks_the_touched_bytes_under_their_box_and_names_them() -> None:
    text = strip(picture(padding_overwrite(), record(SCALE_LAYOUT, "token 0", "token 7")))
    lines = text.splitlines()
    boxes = next(line for line in lines if line.lstrip().startswith("|"))
    marks = lines[lines.index(boxes) + 1]
    columns = [i for i, c in enumerate(marks) if c == "^"]
    assert columns and {_cell_at(boxes, c) for c in columns} == {"pad"}
    row2 = boxes.index("row 2")
    assert all(c > row2 for c in columns) and all(c < boxes.index("row 3") for c in columns)
    assert "  ^  +88..+92 (4 B, row_padding[row 2]): token 2, scale bytes 24..27" in lines
    assert "  tensor from: token 0" in lines


def test_buffer_records_keep_the_named_buffers_layout_and_the_scenarios_words() -> None:
    buffers = [{"name": "scale", "layout": SCALE_LAYOUT.to_json(), "tensor_addr": 123},
               {"name": "other", "layout": plan(64).to_json()}]
    got = buffer_records(buffers, [padding_overwrite()], lambda name, lo, hi: f"{name} {lo}..{hi - 1}")
    assert list(got) == ["scale"]
    assert got["scale"] == {"layout": SCALE_LAYOUT.to_json(), "first": "scale 0..0", "last": "scale 255..255"}

    def broken(name: str, lo: int, hi: int) -> str:
        raise KeyError(name)
    said = buffer_records(buffers, [padding_overwrite()], broken)["scale"]["first"]
    assert said.startswith("(the scenario's describe failed: KeyError")


def test_svg_is_well_formed_escapes_foreign_text_and_draws_each_segment_and_mark() -> None:
    finding = Finding(GUARD, OVERWRITE, "scale", "row_padding", 4, 1, kernel=HOSTILE,
                      ranges=(ByteRange("row_padding[row 2]", 88, 92, HOSTILE),))
    pic = picture(finding, record(SCALE_LAYOUT, HOSTILE, "token 7"))
    svg = picture_svg(pic)
    root = ET.fromstring(svg)                                   # well-formed XML: nothing foreign became markup
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "<script" not in svg and "\x1b" not in svg and "\\x1b" in svg
    rects = [r for r in root.iter("{http://www.w3.org/2000/svg}rect")]
    assert len(rects) >= len(pic.segments) + 2 * len(pic.marks)
    texts = "".join(root.itertext())
    assert "row 2" in texts and "front" in texts and "<script>alert(1)</script>" in texts   # shown as text


@pytest.mark.parametrize("finding,ok", [
    (padding_overwrite(), True),
    (Finding(MEMCHECK, OVERWRITE, UNATTRIBUTED, UNATTRIBUTED, 4, 1, ranges=(ByteRange(UNATTRIBUTED, 1 << 40, (1 << 40) + 4),)), False),
    (Finding(GUARD, OVERWRITE, "scale", "row_padding", 4, 1), False),      # no range: nothing to place
])
def test_only_findings_with_ranges_of_a_buffer_are_drawn(finding: Finding, ok: bool) -> None:
    assert drawable(finding) is ok


def test_repro_prints_the_picture_under_each_finding_it_can_draw() -> None:
    from gpu_memsafety.cli.repro import answer
    from gpu_memsafety.model import CaseResult, Outcome
    unplaced = Finding(MEMCHECK, OVERWRITE, UNATTRIBUTED, UNATTRIBUTED, 4, 1, ranges=(ByteRange(UNATTRIBUTED, 9, 13),))
    result = CaseResult(case_id="s[v]", scenario="s", variant="v", params={}, kernel="k", arch="sm_90", mode="guard",
                        outcome=Outcome.FINDING, expected="clean", findings=[padding_overwrite(), unplaced],
                        message="unexpected", details={"buffers": {"scale": record(SCALE_LAYOUT)}})
    text = answer(result, 1.0)
    assert "      scale: 256 B, placement guarded, 8 rows of 24 B every 32 B, 5 used" in text
    assert "      ^  +88..+92 (4 B, row_padding[row 2]): token 2, scale bytes 24..27" in text
    assert text.count("placement") == 1            # the unplaced access has no buffer to draw
