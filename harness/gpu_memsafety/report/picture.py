"""The picture of a finding's buffer: where its bytes fell among guards, rows, row padding and unused rows.

An overrun into row padding is understood at a glance from a picture of the buffer and slowly from byte
ranges. The judge records, for each buffer a case's findings name, its guard layout and the scenario's own
words for the tensor's first and last bytes (`buffer_records`, kept in the case's `details.buffers`), so a
picture is drawn from report.json alone, on any machine, long after the run. `picture(finding, record)` lays
the buffer out as a strip of segments (front guard, the tensor or its rows with their padding, unused rows,
back guard or alignment tail, and whatever lies outside the allocation) with the finding's byte ranges
marked on it. Segments are drawn on a broken axis: each gets a width that grows with the log of its size,
and a range is placed linearly inside its segment, so 64 bytes past a 64 MiB tensor are as visible as the
tensor. `strip` is the text version (the terminal, `repro`); gpu_memsafety.report.svg draws the same picture.

A report written before buffers were recorded has only the finding's ranges: its picture is a schematic
(the tensor's size unknown), and says so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from gpu_memsafety.model import (BEFORE_START, PAST_END, SHARED, SHARED_MEMORY, UNATTRIBUTED, ByteRange, Finding,
                                 region_class)
from gpu_memsafety.placement.layout import GUARDED, PAGE_SIDES, GuardLayout, LayoutError

# details key of the buffer records a case carries
BUFFERS = "buffers"
# The scenario's words for a byte are cut here in a record (the full text of a touched range is in the finding).
LOGICAL_CHARS = 160
# Rows drawn one by one around each touched row and at both ends of the tensor; the rest are folded into one
# "rows a..b" segment, so a 512-row buffer draws as a dozen segments.
ROWS_AROUND = 1
# Touched rows drawn at each end when many are touched (the ones between are folded).
ROWS_TOUCHED_SHOWN = 3
# Segment kinds, in the vocabulary of gpu_memsafety.placement.layout.zone_of where there is one.
FRONT_GUARD, BACK_GUARD, TAIL = "front_guard", "back_guard", "alignment_tail"
TENSOR, ROW, PADDING, FOLDED, UNUSED = "tensor", "row", "padding", "rows", "unused_rows"
OUTSIDE = "outside"    # before or past the allocation: no byte of the buffer is there
KINDS = (FRONT_GUARD, TENSOR, ROW, PADDING, FOLDED, UNUSED, BACK_GUARD, TAIL, OUTSIDE)
# Relative widths: each segment's grows with log2 of its size, between these bounds; a folded run of rows
# counts as little as a guard.
MIN_WEIGHT, MAX_WEIGHT, FOLDED_WEIGHT = 3.0, 24.0, 4.0
TENSOR_MIN_WEIGHT = 12.0

Describe = Callable[[str, int, int], str]
# Findings with no buffer to draw: an access into memory of no buffer of the case (its ranges are addresses),
# a sanitizer record that could not be placed (gpu_memsafety.judge.rules.UNPLACED), a shared-memory hazard.
NOT_A_BUFFER = frozenset({UNATTRIBUTED, "(unplaced)", "unplaced", SHARED_MEMORY, SHARED})


def drawable(finding: Finding) -> bool:
    """Whether the finding has byte ranges of one of the case's buffers to draw."""
    return bool(finding.ranges) and finding.buffer not in NOT_A_BUFFER and finding.region not in NOT_A_BUFFER


# ------------------------------------------------------------------------------------------ the record


def buffer_records(buffer_map: Sequence[Mapping[str, Any]], findings: Sequence[Finding],
                   describe: Describe | None = None) -> dict[str, dict[str, Any]]:
    """For each buffer the findings name (from the worker's buffer map): its layout and the scenario's words
    for the tensor's first and last bytes. What `picture` needs, and nothing that depends on an address."""
    named = {f.buffer for f in findings}
    out: dict[str, dict[str, Any]] = {}
    for rec in buffer_map:
        name = rec.get("name")
        if name not in named or not isinstance(rec.get("layout"), Mapping):
            continue
        layout = GuardLayout.from_json(rec["layout"])
        out[str(name)] = {"layout": layout.to_json(),
                          "first": _words(describe, str(name), 0, 1),
                          "last": _words(describe, str(name), layout.nbytes - 1, layout.nbytes)}
    return out


def _words(describe: Describe | None, name: str, start: int, end: int) -> str:
    if describe is None:
        return ""
    try:
        text = describe(name, start, end)
    except Exception as exc:  # a scenario's describe that fails on its own first byte: said, never fatal
        text = f"(the scenario's describe failed: {type(exc).__name__}: {exc})"
    return text if len(text) <= LOGICAL_CHARS else text[: LOGICAL_CHARS - 3] + "..."


def record_layout(record: Any) -> GuardLayout | None:
    """The GuardLayout of a record read from a report; None when there is none or it is not a valid one."""
    if not isinstance(record, Mapping) or not isinstance(record.get("layout"), Mapping):
        return None
    try:
        return GuardLayout.from_json(record["layout"])
    except (LayoutError, TypeError, ValueError):
        return None


# ------------------------------------------------------------------------------------------ the model


@dataclass(frozen=True)
class Segment:
    kind: str        # one of KINDS
    start: int       # byte offsets relative to the tensor's first byte, end exclusive
    end: int
    label: str       # "front guard", "row 2", "rows 3..509", "unused rows 8..9", "past the allocation"
    short: str       # the label for a narrow box: "front", "r2", "pad", "..."
    weight: float

    @property
    def nbytes(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Mark:
    """One byte range of the finding, numbered from 1 as the legend lists them."""

    number: int
    start: int
    end: int
    region: str
    logical: str

    @property
    def nbytes(self) -> int:
        return self.end - self.start

    def text(self) -> str:
        """'+2,560..+3,072 (512 B, row_padding[row 10]): token 10, scale bytes 0..511'"""
        where = f"{self.start:+,}..{self.end:+,} ({self.nbytes:,} B, {self.region})"
        return f"{where}: {self.logical}" if self.logical else where


@dataclass(frozen=True)
class Picture:
    buffer: str
    title: str                      # "w_scale: 67,829,760 B, placement exact" or "... (layout not recorded)"
    segments: tuple[Segment, ...]
    marks: tuple[Mark, ...]
    first: str = ""                 # the scenario's words for the tensor's first and last bytes
    last: str = ""
    recorded: bool = True           # False: a schematic drawn from the finding's ranges alone
    hidden_marks: int = 0           # ranges of the finding not drawn (beyond MARKS_DRAWN)

    @property
    def legend(self) -> tuple[Mark, ...]:
        """The marks the legend lists one by one (the rest are counted)."""
        return self.marks[:MARKS_SHOWN]

    @property
    def unlisted(self) -> int:
        return len(self.marks) - len(self.legend) + self.hidden_marks

    def x(self, offset: int) -> float:
        """Where `offset` falls along the strip, 0..1 (offsets outside every segment clamp to the ends)."""
        total = sum(s.weight for s in self.segments)
        before = 0.0
        for seg in self.segments:
            if offset < seg.end or seg is self.segments[-1]:
                inside = min(max(offset - seg.start, 0), seg.nbytes) / seg.nbytes if seg.nbytes else 0.0
                return (before + inside * seg.weight) / total
            before += seg.weight
        return 1.0

    def span(self, mark: Mark) -> tuple[float, float]:
        return self.x(mark.start), self.x(mark.end)


# The ranges of one finding listed under its picture one by one; the rest are counted ("and N more ranges").
# Up to MARKS_DRAWN are drawn (a bug in every row's padding has a range per row).
MARKS_SHOWN = 6
MARKS_DRAWN = 512


def picture(finding: Finding, record: Any = None) -> Picture:
    """The picture of `finding`'s buffer: from its recorded layout, or a schematic from its ranges alone."""
    marks = tuple(Mark(i + 1, r.start, r.end, r.region, r.logical) for i, r in enumerate(finding.ranges[:MARKS_DRAWN]))
    hidden = max(len(finding.ranges) - MARKS_DRAWN, 0)
    layout = record_layout(record)
    if layout is None:
        return Picture(finding.buffer, f"{finding.buffer} (layout not recorded in this report: schematic)",
                       _schematic(finding.ranges), marks, recorded=False, hidden_marks=hidden)
    first = str(record.get("first") or "") if isinstance(record, Mapping) else ""
    last = str(record.get("last") or "") if isinstance(record, Mapping) else ""
    title = f"{finding.buffer}: {layout.nbytes:,} B, placement {layout.placement}"
    if layout.rows is not None:
        rows = layout.rows
        title += (f", {rows.rows} rows of {rows.row_bytes:,} B every {rows.row_stride:,} B, "
                  f"{rows.used_rows} used")
    return Picture(finding.buffer, title, tuple(_segments(layout, marks)), marks, first, last, hidden_marks=hidden)


def _weight(nbytes: int, low: float = MIN_WEIGHT) -> float:
    return min(max(math.log2(1 + max(nbytes, 0)), low), MAX_WEIGHT)


def _segments(layout: GuardLayout, marks: Sequence[Mark]) -> list[Segment]:
    lo = min([m.start for m in marks] + [-layout.front])
    hi = max([m.end for m in marks] + [layout.allocation_end])
    out: list[Segment] = []
    if lo < -layout.front:
        out.append(Segment(OUTSIDE, lo, -layout.front, "before the allocation", "before", _weight(-layout.front - lo)))
    if layout.front:
        out.append(Segment(FRONT_GUARD, -layout.front, 0, f"front guard {layout.front:,} B", "front",
                           _weight(layout.front)))
    out += _tensor(layout, marks)
    if layout.back:
        kind = BACK_GUARD if layout.placement == GUARDED else TAIL
        words = "back guard" if kind == BACK_GUARD else "alignment tail"
        out.append(Segment(kind, layout.nbytes, layout.allocation_end, f"{words} {layout.back:,} B",
                           "back" if kind == BACK_GUARD else "tail", _weight(layout.back)))
    if hi > layout.allocation_end:
        words = "unmapped page" if layout.placement in PAGE_SIDES else "past the allocation"
        out.append(Segment(OUTSIDE, layout.allocation_end, hi, words, "past", _weight(hi - layout.allocation_end)))
    return out


def _tensor(layout: GuardLayout, marks: Sequence[Mark]) -> list[Segment]:
    rows = layout.rows
    if rows is None:
        return [Segment(TENSOR, 0, layout.nbytes, f"tensor {layout.nbytes:,} B", "tensor",
                        _weight(layout.nbytes, TENSOR_MIN_WEIGHT))]
    stride, last_used = rows.row_stride, rows.used_rows - 1
    touched = sorted({r for m in marks for r in _rows_of(m, stride, layout.nbytes) if r <= last_used})
    # many touched rows (a bug in every row's padding): the first and last few drawn, the middle folded
    if len(touched) > 2 * ROWS_TOUCHED_SHOWN:
        touched = touched[:ROWS_TOUCHED_SHOWN] + touched[-ROWS_TOUCHED_SHOWN:]
    shown = sorted({r for t in {*touched, 0, last_used} for r in range(t - ROWS_AROUND, t + ROWS_AROUND + 1)
                    if 0 <= r <= last_used})
    out: list[Segment] = []
    previous = -1
    for r in shown:
        if r > previous + 1:
            out.append(_folded(previous + 1, r - 1, stride))
        out += _row(r, rows.row_bytes, stride)
        previous = r
    if previous < last_used:
        out.append(_folded(previous + 1, last_used, stride))
    if rows.used_rows < rows.rows:
        first_unused, count = rows.used_rows, rows.rows - rows.used_rows
        words = f"unused row {first_unused}" if count == 1 else f"unused rows {first_unused}..{rows.rows - 1}"
        out.append(Segment(UNUSED, first_unused * stride, layout.nbytes, words, "unused",
                           _weight(count * stride)))
    return out


def _rows_of(mark: Mark, stride: int, nbytes: int) -> range:
    """The rows a range overlaps (none for bytes outside the tensor)."""
    lo, hi = max(mark.start, 0), min(mark.end, nbytes)
    return range(lo // stride, (hi - 1) // stride + 1) if lo < hi else range(0)


def _row(r: int, row_bytes: int, stride: int) -> list[Segment]:
    start = r * stride
    row = [Segment(ROW, start, start + row_bytes, f"row {r}", f"r{r}", _weight(row_bytes, 6.0))]
    if stride > row_bytes:
        row.append(Segment(PADDING, start + row_bytes, start + stride, f"row {r} padding {stride - row_bytes:,} B",
                           "pad", _weight(stride - row_bytes)))
    return row


def _folded(first: int, last: int, stride: int) -> Segment:
    words = f"row {first}" if first == last else f"rows {first}..{last}"
    return Segment(FOLDED, first * stride, (last + 1) * stride, words, "..", FOLDED_WEIGHT)


def _schematic(ranges: Sequence[ByteRange]) -> list[Segment]:
    """Segments for a finding whose buffer's layout was not recorded: the tensor from 0 to the first byte
    known to lie past its end (or the last byte known to lie in it), what lies before and after."""
    past = [r for r in ranges if region_class(r.region) == PAST_END]
    before = [r for r in ranges if region_class(r.region) == BEFORE_START]
    inside = [r for r in ranges if r not in past and r not in before]
    end = min((r.start for r in past), default=max((r.end for r in inside), default=1))
    end = max(end, max((r.end for r in inside), default=1), 1)
    out: list[Segment] = []
    if before:
        out.append(Segment(OUTSIDE, min(r.start for r in before), 0, "before the start", "before", MIN_WEIGHT * 2))
    out.append(Segment(TENSOR, 0, end, "tensor (size not recorded)", "tensor", TENSOR_MIN_WEIGHT))
    if past:
        out.append(Segment(OUTSIDE, end, max(r.end for r in past), "past the end", "past", MIN_WEIGHT * 2))
    return out


# -------------------------------------------------------------------------------------------- text


STRIP_WIDTH = 96


def strip(pic: Picture, width: int = STRIP_WIDTH) -> str:
    """The picture as text: a row of labelled boxes, a row marking the touched bytes (with the ranges' numbers
    when there are 2 to 9, else ^), then one line per listed range. Plain ASCII: any terminal shows it."""
    cells = _cells(pic, width)
    boxes = "".join("|" + _fit(seg.label, seg.short, n - 1) for seg, n in cells) + "|"
    numbered = 1 < len(pic.marks) < 10
    under = [" "] * len(boxes)
    for mark in pic.marks:
        a = _column(cells, mark.start)
        b = max(_column(cells, mark.end - 1), a)
        for i in range(a, b + 1):
            under[i] = str(mark.number) if numbered else "^"
    lines = [pic.title]
    if pic.first or pic.last:
        lines += [f"  tensor from: {pic.first or '?'}", f"  tensor to:   {pic.last or '?'}"]
    lines += ["  " + boxes, "  " + "".join(under).rstrip()]
    lines += [f"  {m.number if numbered else '^'}  {m.text()}" for m in pic.legend]
    if pic.unlisted:
        lines.append(f"  and {pic.unlisted:,} more ranges")
    return "\n".join(lines)


def _cells(pic: Picture, width: int) -> list[tuple[Segment, int]]:
    """Each segment's width in characters, its bar included (at least 3), summing to about `width`."""
    total = sum(s.weight for s in pic.segments)
    return [(seg, max(3, round(seg.weight / total * width))) for seg in pic.segments]


def _column(cells: Sequence[tuple[Segment, int]], offset: int) -> int:
    """The character column of a byte offset: inside its segment's box, in proportion (never on a bar)."""
    left = 0
    for index, (seg, n) in enumerate(cells):
        if offset < seg.end or index == len(cells) - 1:
            frac = min(max(offset - seg.start, 0), max(seg.nbytes - 1, 0)) / seg.nbytes if seg.nbytes else 0.0
            return left + 1 + min(int(frac * (n - 1)), n - 2)
        left += n
    return left


def _fit(label: str, short: str, room: int) -> str:
    text = label if len(label) <= room else short if len(short) <= room else short[:room]
    return text.center(room)
