"""Guard layouts: where the tensor, its guard zones and its row padding sit inside one byte allocation.

Pure arithmetic, shared by the worker (which fills and verifies markers) and the parent (which attributes
sanitizer addresses to regions). Offsets are relative to the tensor's first byte: the front guard has
negative offsets, bytes past the tensor's end have offsets >= nbytes.

Alignment: every tensor starts ALIGN-aligned (cudaMalloc's 256 B), whatever the placement, because real
kernels rely on it (a 16-byte vector load on a tensor the harness misaligned is a false "misaligned"
record, and it hides the real finding). The flush placements end the tensor differently:
- EXACT (memcheck): the tensor is its whole allocation, exactly nbytes from the real allocator (cudaMalloc,
  caching off, which starts it aligned): memcheck knows its exact bounds, so the first byte before its start
  and the first byte past its end are both outside it (compute-sanitizer's --padding keeps every other
  allocation at least that far away on either side); guard markers then see only row padding and unused rows;
- FLUSH_END (memcheck before EXACT; still read from older reports): front guard, then exactly nbytes: memcheck
  sees past the end only;
- GUARD_PAGE_BACK: the allocation must end on a page, so the tensor cannot always end on its last byte: the
  bytes between its end and the next ALIGN boundary (the alignment tail, 0..255 B, its `back`) hold
  markers, so writes there are seen by the guard markers; reads there are not seen by the fault (poison
  mode and memcheck's exact placement see them).
- GUARD_PAGE_FRONT: the other side: the tensor's first byte is the first mapped byte after an unmapped page
  (no front guard; a page start is ALIGN-aligned), then its alignment tail in markers up to the next ALIGN
  boundary. The first byte read or written before the tensor faults: what tells before_start from past_end.

Two vocabularies (one place for each):
- region_of: the words expectations and findings use, the same for every detector: before_start,
  inside, row_padding[row r], unused_row[r], past_end (REGIONS, classes without the index);
- zone_of: the detector's physical view of the same byte: before_allocation, front_guard, padding[row r],
  unused_row[r], back_guard, alignment_tail, past_allocation. It goes into a finding's details.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

from gpu_memsafety.model import ByteRange, region_class  # noqa: F401  (re-exported)

# cudaMalloc's alignment (torch's allocator gives at least this): every tensor start is a multiple of it
# relative to an allocation base that is itself at least this aligned.
ALIGN = 256
# Default guard size: larger than any single vector access (16 B) and than a whole Triton tile row of
# fp32 (128 x 4 B), so a small overrun lands in the guard and not in whatever follows.
DEFAULT_GUARD = 1024
GUARDED = "guarded"        # front and back guard, markers in both
FLUSH_END = "flush_end"    # the tensor's last byte is the allocation's last byte (memcheck sees overreads)
EXACT = "exact"            # the tensor is its whole allocation (memcheck sees both ends)
GUARD_PAGE_BACK = "guard_page"  # an aligned tail, then an unmapped page of a VMM reservation (hardware faults)
GUARD_PAGE_FRONT = "guard_page_front"  # an unmapped page, then the tensor at once (faults before its start)
PAGED = (GUARD_PAGE_BACK, GUARD_PAGE_FRONT)  # the placements that put a buffer against an unmapped page
PLACEMENTS = (GUARDED, FLUSH_END, EXACT, GUARD_PAGE_BACK, GUARD_PAGE_FRONT)
# Placements whose tensor ends where its real allocation ends: a sanitizer sees the first byte past the end.
SANITIZER_PLACEMENTS = (FLUSH_END, EXACT)
# The page placements and the side of the tensor their unmapped page is on.
PAGE_SIDES = {GUARD_PAGE_BACK: "back", GUARD_PAGE_FRONT: "front"}

# The region vocabulary lives in gpu_memsafety.model (expectations are checked against it there).
from gpu_memsafety.model import (BEFORE_START, INSIDE, OLD_REGION_NAMES, PAST_END, REGIONS, ROW_PADDING,  # noqa: E402,F401
                           UNUSED_ROW, check_region)


class LayoutError(ValueError):
    """A guard layout that cannot hold what it was asked to hold."""


@dataclass(frozen=True)
class Rows:
    """A 2-D byte view whose rows are longer than their logical content.

    rows: physical rows; row_bytes: logical bytes per row; row_stride: bytes from one row to the next;
    used_rows: rows the kernel may write (rows past it must keep their markers whole).
    """

    rows: int
    row_bytes: int
    row_stride: int
    used_rows: int

    def __post_init__(self) -> None:
        if self.rows <= 0 or self.row_bytes <= 0:
            raise LayoutError(f"rows and row_bytes must be positive, got rows={self.rows} row_bytes={self.row_bytes}")
        if self.row_stride < self.row_bytes:
            raise LayoutError(f"row_stride {self.row_stride} is smaller than row_bytes {self.row_bytes}")
        if not 0 <= self.used_rows <= self.rows:
            raise LayoutError(f"used_rows {self.used_rows} is outside 0..{self.rows}")

    @property
    def nbytes(self) -> int:
        return self.rows * self.row_stride


@dataclass(frozen=True)
class GuardLayout:
    nbytes: int
    front: int
    back: int
    placement: str = GUARDED
    rows: Rows | None = None

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise LayoutError(f"placement {self.placement!r} is not one of {PLACEMENTS}")
        if self.nbytes <= 0:
            raise LayoutError(f"nbytes must be positive, got {self.nbytes}")
        if self.front < 0 or self.back < 0:
            raise LayoutError(f"guards cannot be negative (front={self.front}, back={self.back})")
        if self.front % ALIGN:
            raise LayoutError(f"a front guard of {self.front} B would start the tensor misaligned "
                              f"(it must be a multiple of {ALIGN} B, cudaMalloc's alignment)")
        if self.rows is not None and self.rows.nbytes != self.nbytes:
            raise LayoutError(f"rows cover {self.rows.nbytes} bytes but the tensor has {self.nbytes}")
        if self.placement in SANITIZER_PLACEMENTS and self.back:
            raise LayoutError(f"placement {self.placement} has no back guard, got back={self.back}")
        if self.placement == EXACT and self.front:
            raise LayoutError(f"placement {self.placement} has no front guard, got front={self.front}")
        if self.placement in PAGE_SIDES and self.back >= ALIGN:
            raise LayoutError(f"placement {self.placement} has no back guard, only an alignment tail below "
                              f"{ALIGN} B, got back={self.back}")
        if self.placement == GUARD_PAGE_FRONT and self.front:
            raise LayoutError(f"placement {self.placement} starts the tensor right after an unmapped page: it has no "
                              f"front guard, got front={self.front}")

    @property
    def tail(self) -> int:
        """Bytes between the tensor's end and its allocation's end in a guard-page placement (0..ALIGN-1)."""
        return self.back if self.placement in PAGE_SIDES else 0

    @property
    def allocation_end(self) -> int:
        """Offset of the first byte past the allocation: what memcheck and a guard page can see from."""
        return self.nbytes + self.back

    @property
    def total(self) -> int:
        return self.front + self.nbytes + self.back

    def marker_spans(self) -> list[tuple[int, int, str]]:
        """(start, end, zone) of every byte that must still hold the marker after the kernel ran."""
        spans: list[tuple[int, int, str]] = []
        if self.front:
            spans.append((-self.front, 0, "front_guard"))
        if self.rows is not None:
            spans.extend(self._row_spans(self.rows))
        if self.back:
            spans.append((self.nbytes, self.nbytes + self.back, self._back_zone()))
        return spans

    def region_spans(self) -> dict[str, list[tuple[int, int]]]:
        """The marker spans grouped by region (before_start, past_end, row_padding, unused_row): what poison
        mode poisons one region at a time."""
        out: dict[str, list[tuple[int, int]]] = {}
        for lo, hi, _ in self.marker_spans():
            out.setdefault(region_class(self.region_of(lo)), []).append((lo, hi))
        return out

    def _back_zone(self) -> str:
        return "back_guard" if self.placement == GUARDED else "alignment_tail"

    @staticmethod
    def _row_spans(rows: Rows) -> list[tuple[int, int, str]]:
        spans = []
        for r in range(rows.rows):
            start = r * rows.row_stride
            if r >= rows.used_rows:
                spans.append((start, start + rows.row_stride, f"unused_row[{r}]"))
            elif rows.row_stride > rows.row_bytes:
                spans.append((start + rows.row_bytes, start + rows.row_stride, f"padding[row {r}]"))
        return spans

    def region_of(self, offset: int) -> str:
        """Region of one byte offset (relative to the tensor start), in the vocabulary of REGIONS."""
        if offset < 0:
            return BEFORE_START
        if offset >= self.nbytes:
            return PAST_END
        return self._row_region(offset, ROW_PADDING) or INSIDE

    def zone_of(self, offset: int) -> str:
        """The detectors' physical word for the same byte (front_guard, alignment_tail, past_allocation...)."""
        if offset < -self.front:
            return "before_allocation"
        if offset < 0:
            return "front_guard"
        if offset >= self.nbytes + self.back:
            return "past_allocation"
        if offset >= self.nbytes:
            return self._back_zone()
        return self._row_region(offset, "padding") or INSIDE

    def _row_region(self, offset: int, padding_word: str) -> str:
        if self.rows is None:
            return ""
        r, col = divmod(offset, self.rows.row_stride)
        if r >= self.rows.used_rows:
            return f"{UNUSED_ROW}[{r}]"
        if col >= self.rows.row_bytes:
            return f"{padding_word}[row {r}]"
        return ""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "GuardLayout":
        fields = dict(data)
        rows = fields.pop("rows", None)
        return cls(rows=Rows(**rows) if rows else None, **fields)


def plan(nbytes: int, *, placement: str = GUARDED, guard: int = DEFAULT_GUARD, rows: Rows | None = None) -> GuardLayout:
    """Choose guard sizes. The front guard is rounded up to ALIGN so that the tensor starts aligned in an
    aligned allocation. EXACT allocates exactly nbytes (no guard at all: the tensor is the allocation);
    FLUSH_END allocates exactly front + nbytes (the tensor's last byte is the allocation's); GUARD_PAGE_BACK ends the
    allocation on the next ALIGN boundary after the tensor (the alignment tail, 0..ALIGN-1 bytes, is its `back`),
    so an allocation that must end on a page starts the tensor aligned; GUARD_PAGE_FRONT has no front guard (the
    tensor starts on the page boundary) and the same alignment tail."""
    if guard < 0:
        raise LayoutError(f"guard must be >= 0, got {guard}")
    if nbytes <= 0:
        raise LayoutError(f"nbytes must be positive, got {nbytes}")
    front = round_up(guard, ALIGN)
    if placement == GUARDED:
        return GuardLayout(nbytes=nbytes, front=front, back=guard, placement=placement, rows=rows)
    if placement == EXACT:
        return GuardLayout(nbytes=nbytes, front=0, back=0, placement=placement, rows=rows)
    if placement == FLUSH_END:
        return GuardLayout(nbytes=nbytes, front=front, back=0, placement=placement, rows=rows)
    if placement == GUARD_PAGE_FRONT:
        front = 0
    return GuardLayout(nbytes=nbytes, front=front, back=round_up(nbytes, ALIGN) - nbytes, placement=placement, rows=rows)


def unguarded_regions(placement: str) -> frozenset[str]:
    """Region classes a placement keeps no marker bytes in, so the guard markers cannot see a write there:
    past_end under every flush placement (a guard page keeps only its alignment tail, 0..255 B: see
    verdict.decide's `pages`), and before_start too where the tensor is its whole allocation (EXACT) or starts
    right after an unmapped page (GUARD_PAGE_FRONT)."""
    if placement in (EXACT, GUARD_PAGE_FRONT):
        return frozenset({BEFORE_START, PAST_END})
    if placement in (FLUSH_END, GUARD_PAGE_BACK):
        return frozenset({PAST_END})
    return frozenset()


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def split_by_region(layout: GuardLayout, start: int, end: int) -> list[tuple[int, int, str]]:
    """Cut [start, end) at region boundaries so that each piece lies in one region."""
    cuts = sorted({start, end, *_boundaries(layout, start, end)})
    pieces = []
    for lo, hi in zip(cuts, cuts[1:]):
        pieces.append((lo, hi, layout.region_of(lo)))
    return _merge_same_region(pieces)


def _boundaries(layout: GuardLayout, start: int, end: int) -> Iterable[int]:
    fixed = (0, layout.nbytes)
    yield from (b for b in fixed if start < b < end)
    if layout.rows is not None:
        stride, width = layout.rows.row_stride, layout.rows.row_bytes
        first = max(0, start // stride)
        last = min(layout.rows.rows, end // stride + 1)
        for r in range(first, last):
            for b in (r * stride, r * stride + width):
                if start < b < end:
                    yield b


def _merge_same_region(pieces: Sequence[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    merged: list[tuple[int, int, str]] = []
    for lo, hi, region in pieces:
        if merged and merged[-1][2] == region and merged[-1][1] == lo:
            merged[-1] = (merged[-1][0], hi, region)
        else:
            merged.append((lo, hi, region))
    return merged


def ranges_from_offsets(layout: GuardLayout, runs: Iterable[tuple[int, int]]) -> list[ByteRange]:
    """Turn runs of changed/accessed offsets into ByteRanges cut at region boundaries."""
    out: list[ByteRange] = []
    for start, end in runs:
        out.extend(ByteRange(region=r, start=lo, end=hi) for lo, hi, r in split_by_region(layout, start, end))
    return out


def merge_runs(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Union of half-open intervals, sorted."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def placements(buffers: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """From a worker's buffer map: each buffer's placement (GUARDED, FLUSH_END, GUARD_PAGE_BACK), as its layout says."""
    out: dict[str, str] = {}
    for b in buffers:
        try:
            out[str(b["name"])] = str(b["layout"].get("placement", GUARDED))
        except (KeyError, TypeError, AttributeError) as exc:
            raise LayoutError(f"buffer map entry {b!r} has no usable name/layout: {exc}") from exc
    return out


def covered_buffers(buffers: Iterable[Mapping[str, Any]]) -> list[str]:
    """From a worker's buffer map: the buffers placed for memcheck or a guard page (any placement but GUARDED)."""
    return [name for name, placement in placements(buffers).items() if placement != GUARDED]


def page_side(buffer: Mapping[str, Any]) -> str:
    """"back", "front" or "" for one buffer-map entry: which side of the tensor an unmapped page sat on (backend
    "vmm" only: without CUDA virtual memory the same layout has no page). An entry without a layout (older maps)
    counts as the back page, the only one there was."""
    if buffer.get("backend") != "vmm":
        return ""
    placement = (buffer.get("layout") or {}).get("placement", GUARD_PAGE_BACK)
    return PAGE_SIDES.get(placement, "")


def paged_buffers(buffers: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Buffer name -> the side its unmapped page sat on, in buffer-map order, for every buffer that had one."""
    return {str(b["name"]): side for b in buffers if (side := page_side(b))}


def guard_page_offsets(buffers: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """From a worker's buffer map: for each buffer placed before an unmapped guard page (backend "vmm", back side),
    the offset from the tensor's first byte of the page's first byte (its size plus its alignment tail, read from
    where the mapping really ends). Bytes before that offset never fault: see verdict.decide's `pages`."""
    out: dict[str, int] = {}
    for b in buffers:
        if page_side(b) != "back":
            continue
        try:
            out[str(b["name"])] = int(b["alloc_base"]) + int(b["alloc_size"]) - int(b["tensor_addr"])
        except (KeyError, TypeError, ValueError) as exc:
            raise LayoutError(f"buffer map entry {b!r} has no usable alloc_base/alloc_size/tensor_addr: {exc}") from exc
    return out


# Poison mode's third pattern: not a byte value, a ramp of bytes the arena writes (placement.guard.ramp_bytes;
# detectors.poison.RAMP says why).
POISON_RAMP = 0x100
