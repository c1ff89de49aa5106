"""Guard-marker buffers: tensors inside byte allocations whose guards and row padding hold a marker.

This is the detector no sanitizer replaces: it sees every overwrite outside a tensor's logical bytes,
including writes that stay inside the allocation (row padding, unused rows), at near-native speed.
It never sees reads. Verification runs on the tensor's own device in a handful of vectorized passes and
brings back only the runs of changed bytes, never the buffer.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from gpu_memsafety.placement import layout as L
from gpu_memsafety.model import ByteRange

DEFAULT_MARKER = 0xA5


@dataclass
class GuardedBuffer:
    name: str
    layout: L.GuardLayout
    storage: torch.Tensor          # uint8, layout.total bytes: front guard, tensor bytes, back guard
    tensor: torch.Tensor           # the view handed to the kernel
    marker: int
    backend: str                   # "torch" or "vmm"
    alloc_base: int                # the allocation as the sanitizer knows it
    alloc_size: int
    keepalive: Any = None          # owner of VMM memory

    @property
    def tensor_addr(self) -> int:
        return self.storage.data_ptr() + self.layout.front

    def body(self) -> torch.Tensor:
        return self.storage[self.layout.front : self.layout.front + self.layout.nbytes]

    def float_values(self) -> torch.Tensor | None:
        """The tensor's bytes (the body, row padding included) as fp32 values when its dtype is floating point;
        None otherwise (such bytes are compared exactly). What uninit and poison mode compare between runs."""
        size = self.tensor.element_size()
        if not self.tensor.dtype.is_floating_point or self.layout.nbytes % size:
            return None
        return self.body().view(self.tensor.dtype).float()

    def refill(self, marker: int | None = None) -> None:
        """Reset every byte (guards, padding and tensor) to the marker."""
        if marker is not None:
            self.marker = marker
        self.storage.fill_(self.marker)

    def marker_views(self) -> list[torch.Tensor]:
        """uint8 views (1-D, or 2-D for row padding) over every byte that must still hold the marker."""
        lay, st = self.layout, self.storage
        views = []
        if lay.front:
            views.append(st[: lay.front])
        if lay.back:
            views.append(st[lay.front + lay.nbytes : lay.total])
        rows = lay.rows
        if rows is not None:
            grid = self.body().view(rows.rows, rows.row_stride)
            if rows.row_stride > rows.row_bytes and rows.used_rows:
                views.append(grid[: rows.used_rows, rows.row_bytes :])
            if rows.used_rows < rows.rows:
                views.append(grid[rows.used_rows :].reshape(-1))
        return views

    def fill_markers(self) -> None:
        """Reset only the marker bytes (guards, padding, unused rows); the tensor's contents stay."""
        for view in self.marker_views():
            view.fill_(self.marker)

    def changed_counts(self) -> list[torch.Tensor]:
        """Per marker view, the number of changed words, as device scalars: no host sync."""
        return [_count_changed(view, self.marker) for view in self.marker_views()]

    def verify(self) -> list[ByteRange]:
        """Every marker byte that changed, as runs cut at region boundaries (offsets relative to the tensor)."""
        runs: list[tuple[int, int]] = []
        for start, stop in self._flat_spans():
            runs.extend(_changed_runs(self.storage[start + self.layout.front : stop + self.layout.front], self.marker, start))
        runs.extend(self._row_runs())
        return L.ranges_from_offsets(self.layout, L.merge_runs(runs))

    def _flat_spans(self) -> list[tuple[int, int]]:
        spans = []
        if self.layout.front:
            spans.append((-self.layout.front, 0))
        if self.layout.back:
            spans.append((self.layout.nbytes, self.layout.nbytes + self.layout.back))
        return spans

    def _row_runs(self) -> list[tuple[int, int]]:
        rows = self.layout.rows
        if rows is None:
            return []
        grid = self.body().view(rows.rows, rows.row_stride)
        runs: list[tuple[int, int]] = []
        if rows.row_stride > rows.row_bytes and rows.used_rows:
            pad = grid[: rows.used_rows, rows.row_bytes :]
            runs.extend(_changed_runs_2d(pad, self.marker, rows.row_stride, rows.row_bytes))
        if rows.used_rows < rows.rows:
            unused = grid[rows.used_rows :].reshape(-1)
            runs.extend(_changed_runs(unused, self.marker, rows.used_rows * rows.row_stride))
        return runs

    def record(self) -> dict[str, Any]:
        """The buffer-map entry that attribution uses in the parent process."""
        return {
            "name": self.name,
            "tensor_addr": self.tensor_addr,
            "nbytes": self.layout.nbytes,
            "alloc_base": self.alloc_base,
            "alloc_size": self.alloc_size,
            "backend": self.backend,
            "layout": self.layout.to_json(),
            "dtype": str(self.tensor.dtype).replace("torch.", ""),
            "itemsize": self.tensor.element_size(),
            "shape": list(self.tensor.shape),
            "stride": list(self.tensor.stride()),
        }


_WORDS = ((8, torch.int64), (4, torch.int32), (2, torch.int16))


def _count_changed(view: torch.Tensor, marker: int) -> torch.Tensor:
    """Words of `view` that are not all marker bytes, counted on the device.

    Compares in the widest word the view's address, width and row stride allow (8 bytes for guards and
    most padding), so a clean check reads each byte once and writes an eighth of a byte per byte.
    """
    width = view.shape[-1]
    aligned = lambda w: view.data_ptr() % w == 0 and width % w == 0 and (view.dim() == 1 or view.stride(0) % w == 0)  # noqa: E731
    for size, dtype in _WORDS:
        if aligned(size):
            pattern = int.from_bytes(bytes([marker]) * size, "little", signed=True)
            return torch.count_nonzero(view.view(dtype) != pattern)
    return torch.count_nonzero(view != marker)


def _changed_runs(flat: torch.Tensor, marker: int | torch.Tensor, base: int) -> list[tuple[int, int]]:
    """Runs of bytes != marker (a byte value, or the bytes expected at each position) in a 1-D uint8 tensor; offsets
    shifted by base. Computed on the device."""
    idx = torch.nonzero(flat != marker).flatten()
    return _runs_from_sorted(idx, base)


def _changed_runs_2d(block: torch.Tensor, marker: int, stride: int, col0: int) -> list[tuple[int, int]]:
    hits = torch.nonzero(block != marker)
    if hits.numel() == 0:
        return []
    offsets = hits[:, 0] * stride + hits[:, 1] + col0
    return _runs_from_sorted(offsets, 0)


def _runs_from_sorted(idx: torch.Tensor, base: int) -> list[tuple[int, int]]:
    if idx.numel() == 0:
        return []
    breaks = torch.nonzero(idx[1:] - idx[:-1] != 1).flatten()
    starts = torch.cat([idx[:1], idx[breaks + 1]])
    ends = torch.cat([idx[breaks], idx[-1:]]) + 1
    pairs = torch.stack([starts, ends], dim=1).cpu().tolist()
    return [(int(s) + base, int(e) + base) for s, e in pairs]


Allocator = Callable[[int, torch.device], tuple[torch.Tensor, int, int, str, Any]]


def torch_allocator(total: int, device: torch.device) -> tuple[torch.Tensor, int, int, str, Any]:
    storage = torch.empty(total, dtype=torch.uint8, device=device)
    return storage, storage.data_ptr(), total, "torch", None


@dataclass(frozen=True)
class Paint:
    """What an arena's buffers hold before a launch, one description for every detector that paints them (the
    arena knows no detector): the guard markers, and the variations the value detectors ask for."""

    marker: int = DEFAULT_MARKER
    marker_for: dict[str, int] = field(default_factory=dict)   # per-buffer marker (poison mode)
    # poison mode: these marker spans (tensor-relative offsets) of these buffers hold poison_marker instead
    poison_spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    poison_marker: int = 0xFF
    fill: int | None = None                                    # tensor bytes' first value (default: the marker)
    fill_for: dict[str, int] = field(default_factory=dict)     # per-buffer fill (uninit mode's attribution runs)
    # uninit mode's search for the bytes read: these spans (tensor-relative) of these buffers start as span_fill
    fill_spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    span_fill: int = 0x5A
    # uninit mode's scrambled-marker runs: every marker byte holds scramble_bytes (per buffer, position and this
    # variant, 1 or 2) instead; 0: off
    scramble: int = 0


@dataclass
class Arena:
    """Allocates guarded buffers for one case and keeps the buffer map.

    Buffers stay alive as long as the arena, so that in a batched process no address is ever reused and
    every sanitizer record maps to exactly one case's buffer.
    """

    device: torch.device
    paint: Paint = field(default_factory=Paint)    # what every buffer's bytes hold before a launch
    placement: str = L.GUARDED
    guard: int = L.DEFAULT_GUARD
    # where each page placement's allocation comes from (gpu_memsafety.placement.vmm.ALLOCATORS on a GPU); a page placement without
    # one gets its layout from the torch allocator, with no page (the buffer map's backend says "torch")
    page_allocators: dict[str, Allocator] = field(default_factory=dict)
    on_change: Callable[[], None] | None = None                # told after each allocation (buffer map on disk)
    checker: str = "auto"      # "auto": Triton on a GPU, torch ops elsewhere; "triton" or "torch" to force one
    buffers: dict[str, GuardedBuffer] = field(default_factory=dict)
    _table: Any = field(default=None, repr=False)
    _table_key: tuple = field(default=(), repr=False)

    def tensor(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, *, placement: str | None = None) -> torch.Tensor:
        itemsize = _itemsize(name, dtype)
        nbytes = itemsize * _numel(shape)
        buf = self._allocate(name, L.plan(nbytes, placement=self._placement(placement), guard=self.guard))
        buf.tensor = buf.body().view(dtype).view(shape)
        self._changed()
        return buf.tensor

    def rows(self, name: str, *, rows: int, row_bytes: int, row_stride: int, used_rows: int,
             dtype: torch.dtype = torch.uint8, placement: str | None = None) -> torch.Tensor:
        """A [rows, row_bytes/itemsize] view whose rows are row_stride bytes apart; padding holds markers."""
        itemsize = _itemsize(name, dtype)
        if row_bytes % itemsize or row_stride % itemsize:
            raise L.LayoutError(f"{name}: row_bytes {row_bytes} and row_stride {row_stride} must be multiples of {itemsize}")
        spec = L.Rows(rows=rows, row_bytes=row_bytes, row_stride=row_stride, used_rows=used_rows)
        buf = self._allocate(name, L.plan(spec.nbytes, placement=self._placement(placement), guard=self.guard, rows=spec))
        flat = buf.body().view(dtype)
        buf.tensor = flat.as_strided((rows, row_bytes // itemsize), (row_stride // itemsize, 1))
        self._changed()
        return buf.tensor

    def allocate(self, name: str, lay: L.GuardLayout) -> GuardedBuffer:
        """A buffer with exactly this layout (markers armed, storage bytes only, no typed tensor view): what
        `tensor` and `rows` allocate, for a caller that already has the plan (the bench re-allocates a case's
        layouts to time allocation and fill)."""
        buf = self._allocate(name, lay)
        self._changed()
        return buf

    def _placement(self, placement: str | None) -> str:
        return placement or self.placement

    def _allocate(self, name: str, lay: L.GuardLayout) -> GuardedBuffer:
        if name in self.buffers:
            raise ValueError(f"buffer {name!r} allocated twice in one case")
        # Only a guard page (after or before the tensor) needs a VMM reservation; a flush-end tensor is the real
        # allocator's exact allocation (memcheck knows its size to the byte; see harness/gpu_memsafety/placement/layout.py).
        allocate = self.page_allocators.get(lay.placement, torch_allocator)
        storage, base, size, backend, keep = allocate(lay.total, self.device)
        paint = self.paint
        marker = paint.marker_for.get(name, paint.marker)
        buf = GuardedBuffer(name, lay, storage, storage, marker, backend, base, size, keep)
        # The tensor's bytes start as the arena's marker, its guards and padding as its own: in poison mode
        # only the guards differ between runs, so output bytes a kernel leaves unwritten cannot look like
        # an overread.
        storage.fill_(paint.marker)
        fill = paint.fill_for.get(name, paint.fill)
        if fill is not None and fill != paint.marker:
            buf.body().fill_(fill)   # uninit mode: bytes nobody writes keep this value; markers are refilled below
        spans = paint.fill_spans.get(name, ())
        for lo, hi in spans:
            if not 0 <= lo <= hi <= lay.nbytes:
                raise L.LayoutError(f"buffer {name!r}: fill span {lo}..{hi} is not inside its {lay.nbytes} tensor bytes")
            buf.body()[lo:hi].fill_(paint.span_fill)
        if marker != paint.marker or (fill is not None and fill != paint.marker) or spans:
            buf.fill_markers()
        for lo, hi in paint.poison_spans.get(name, ()):
            if not any(s <= lo and hi <= e for s, e, _ in lay.marker_spans()):
                raise L.LayoutError(f"buffer {name!r}: poison span {lo}..{hi} is not inside its marker bytes")
            if paint.poison_marker == L.POISON_RAMP:
                storage[lay.front + lo : lay.front + hi] = ramp_bytes(lo, hi, storage.device)
            else:
                storage[lay.front + lo : lay.front + hi].fill_(paint.poison_marker)
        if paint.scramble:
            for lo, hi, _ in lay.marker_spans():
                storage[lay.front + lo : lay.front + hi] = scramble_bytes(name, lo, hi, storage.device, paint.scramble)
        self.buffers[name] = buf
        return buf

    def owner(self, t: torch.Tensor) -> tuple[str, int, int] | None:
        """The buffer that holds tensor `t` (a view of its bytes) and the bytes it spans, tensor-relative, from its
        first to its last element: (name, start, end); None for an empty tensor or one in no buffer of this arena."""
        if t.numel() == 0:
            return None
        extent = (sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) + 1) * t.element_size()
        for name, buf in self.buffers.items():
            lo = buf.tensor_addr
            if t.device == buf.storage.device and lo <= t.data_ptr() < lo + buf.layout.nbytes:
                start = t.data_ptr() - lo
                return name, start, min(start + extent, buf.layout.nbytes)
        return None

    def scrambled_changes(self) -> dict[str, list[ByteRange]]:
        """For an arena with `scramble`: per buffer, the marker bytes that no longer hold their scrambled value, as
        runs cut at region boundaries (offsets relative to the tensor), as `verify` gives them for a uniform marker."""
        out: dict[str, list[ByteRange]] = {}
        for name, buf in self.buffers.items():
            lay = buf.layout
            runs: list[tuple[int, int]] = []
            for lo, hi, _ in lay.marker_spans():
                now = buf.storage[lay.front + lo : lay.front + hi]
                runs.extend(_changed_runs(now, scramble_bytes(name, lo, hi, now.device, self.paint.scramble), lo))
            out[name] = L.ranges_from_offsets(lay, L.merge_runs(runs))
        return out

    def _changed(self) -> None:
        """Tell the owner (the worker writes the buffer map to disk before any launch)."""
        if self.on_change is not None:
            self.on_change()

    def verify(self) -> dict[str, list[ByteRange]]:
        """Changed marker bytes per buffer. One device pass and one host sync when nothing changed; only a
        buffer with changes is searched byte by byte for its runs."""
        counts = self.changed_counts()
        if counts is None:
            return {name: [] for name in self.buffers}
        owners = [name for name, buf in self.buffers.items() for _ in buf.marker_views()]
        per_view = counts.cpu().reshape(len(owners), -1).sum(dim=1).tolist()
        dirty = {owner for owner, n in zip(owners, per_view) if n}
        return {name: (buf.verify() if name in dirty else []) for name, buf in self.buffers.items()}

    def changed_counts(self) -> torch.Tensor | None:
        """Changed-word counts of every marker view on the device (no sync), or None without markers: one
        count per view (torch ops), or a row of partial counts per view (Triton); either way, nonzero means
        changed and `.reshape(views, -1).sum(1)` gives the count per view."""
        table = self._span_table()
        if table is not None:
            return table.count()
        counts = [c for buf in self.buffers.values() for c in buf.changed_counts()]
        return torch.stack(counts) if counts else None

    def check_and_rearm(self) -> torch.Tensor | None:
        """changed_counts, then every marker back in place (one pass on a GPU: a clean span is only read)."""
        table = self._span_table()
        if table is not None:
            return table.count(rearm=True)
        counts = self.changed_counts()
        self.fill_markers()
        return counts

    def graphed_check_and_rearm(self) -> Callable[[], torch.Tensor | None]:
        """check_and_rearm as one CUDA-graph replay on a GPU (no Triton launch path per check; for launch-bound
        small cases); the plain call elsewhere. Capture after the last buffer is allocated."""
        table = self._span_table()
        if table is None or self.device.type != "cuda":
            return self.check_and_rearm
        return table.graphed(rearm=True)

    def fill_markers(self) -> None:
        table = self._span_table()
        if table is not None:
            table.fill()
            return
        for buf in self.buffers.values():
            buf.fill_markers()

    def _span_table(self) -> Any:
        """On a GPU, the marker spans of every buffer for one-launch fill and check (rebuilt when a buffer is
        added or a marker changes); None where the torch ops are used."""
        if self.checker not in ("auto", "triton", "torch"):
            raise ValueError(f"checker {self.checker!r} is not one of auto, triton, torch")
        if self.checker == "torch" or (self.checker == "auto" and self.device.type != "cuda"):
            return None
        key = tuple((name, buf.marker, buf.storage.data_ptr()) for name, buf in self.buffers.items())
        if key != self._table_key:
            from gpu_memsafety.placement.markcheck import Span, SpanTable
            spans = [Span.of(view, buf.marker) for buf in self.buffers.values() for view in buf.marker_views()]
            self._table = SpanTable(spans, self.device) if spans else None
            self._table_key = key
        return self._table

    def refill(self, marker: int | None = None) -> None:
        for buf in self.buffers.values():
            buf.refill(marker)

    def buffer_map(self) -> list[dict[str, Any]]:
        return [buf.record() for buf in self.buffers.values()]


def ramp_bytes(lo: int, hi: int, device: Any) -> torch.Tensor:
    """Bytes lo..hi-1 (offsets from the tensor's first byte) of poison's ramp, (37 k + 11) mod 256: neighbouring
    elements differ, and any part of a span holds the same bytes as in the whole."""
    return ((torch.arange(lo, hi, dtype=torch.int64, device=device) * 37 + 11) % 256).to(torch.uint8)


def scramble_bytes(name: str, lo: int, hi: int, device: Any, variant: int = 1) -> torch.Tensor:
    """Bytes lo..hi-1 (offsets from the tensor's first byte) of buffer `name`'s scrambled markers: a hash of the
    offset, salted with the name, in 0x00..0x7F. Position-dependent with no period a stride can match, so a byte
    copied from one marker position to another (row padding copied over row padding: held-out hv_c), or from another
    buffer's markers, differs from what it replaced; never 0xA5, so a byte written with the marker's own value is
    seen (held-out hr_a); every int32 and fp32 word positive, where 0xA5's are negative, so an atomic min leaves
    neither unchanged (held-out hv_g). A copied byte still equals what it replaced 1 time in 128: another `variant`
    (another salt) tells those apart. The products wrap in int64; their low 32 bits, all that is kept, do not."""
    salt = zlib.crc32(f"{name}:{variant}".encode())
    k = torch.arange(lo, hi, dtype=torch.int64, device=device) & 0xFFFFFFFF
    h = (k * 0x9E3779B1 + salt) & 0xFFFFFFFF
    h = ((h ^ (h >> 15)) * 0x2C1B3C6D) & 0xFFFFFFFF
    h = ((h ^ (h >> 12)) * 0x297A2D39) & 0xFFFFFFFF
    return ((h ^ (h >> 15)) & 0x7F).to(torch.uint8)


def _itemsize(name: str, dtype: Any) -> int:
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"buffer {name!r}: dtype {dtype!r} is not a torch.dtype")
    return torch.empty((), dtype=dtype).element_size()


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        if s < 0:
            raise L.LayoutError(f"negative dimension in shape {shape}")
        n *= s
    return n
