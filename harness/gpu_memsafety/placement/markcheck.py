"""Marker fill and check for a whole arena in one kernel launch each (Triton), for the GPU.

A case's marker bytes are a handful of spans: front and back guards, row padding (a 2-D span: rows of
`width` bytes, `stride` apart), unused rows. The span table holds each span's address, rows, width, stride
and marker; one launch fills them all, one launch counts the changed words of each. The counts land in a
device tensor, so checking costs no host sync until the caller reads them, and the clean check reads every
marker byte once. Spans whose address, width and stride are multiples of 8 go through 8-byte words; any
other span through bytes (guards of odd-sized tensors, 90-byte rows).

Off the GPU, harness/gpu_memsafety/placement/guard.py checks with torch ops instead (the CPU tests run this kernel in Triton's
interpreter and compare the two).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import triton
import triton.language as tl

WORD = 8
BLOCK = 1024
MAX_PROGRAMS = 1024       # per span: enough to fill an H100/H200 (132 SMs) with one large span


@dataclass(frozen=True)
class Span:
    addr: int       # first byte
    rows: int
    width: int      # bytes per row
    stride: int     # bytes from one row to the next
    marker: int     # the byte every position must hold

    @classmethod
    def of(cls, view: torch.Tensor, marker: int) -> "Span":
        if view.dim() == 1:
            return cls(view.data_ptr(), 1, view.shape[0], view.shape[0], marker)
        return cls(view.data_ptr(), view.shape[0], view.shape[1], view.stride(0), marker)

    @property
    def words(self) -> bool:
        return self.addr % WORD == 0 and self.width % WORD == 0 and (self.rows == 1 or self.stride % WORD == 0)

    @property
    def nbytes(self) -> int:
        return self.rows * self.width


def span_pass(row, pid, programs, FILL: tl.constexpr, WORDS: tl.constexpr, BLOCK: tl.constexpr, REARM: tl.constexpr):
    """One program's share of one span (a table row): fill it, or count (and re-arm) its changed elements."""
    addr = tl.load(row)
    rows = tl.load(row + 1).to(tl.int32)
    width = tl.load(row + 2).to(tl.int32)
    stride = tl.load(row + 3)
    pattern = tl.load(row + 4)
    if WORDS:
        ptr = addr.to(tl.pointer_type(tl.int64))
        value = pattern
        filler = tl.zeros((BLOCK,), dtype=tl.int64) + value
    else:
        ptr = addr.to(tl.pointer_type(tl.uint8))
        value = pattern.to(tl.uint8)
        filler = tl.zeros((BLOCK,), dtype=tl.uint8) + value
    total = rows * width
    offs = tl.arange(0, BLOCK)
    changed = tl.zeros((BLOCK,), dtype=tl.int32)
    for start in range(pid * BLOCK, total, programs * BLOCK):
        idx = start + offs
        mask = idx < total
        if rows == 1:
            where = ptr + idx
        else:
            r = idx // width
            where = ptr + r.to(tl.int64) * stride + (idx - r * width)
        if FILL:
            tl.store(where, filler, mask=mask)
        else:
            got = tl.load(where, mask=mask, other=value)
            bad = got != value
            changed += bad.to(tl.int32)
            if REARM:
                tl.store(where, filler, mask=mask & bad)     # a clean span is only read
    return tl.sum(changed, 0)


def fill_or_count(table_ptr, counts_ptr, FILL: tl.constexpr, BLOCK: tl.constexpr, REARM: tl.constexpr = False):
    """Every span of the table in one launch, word spans and byte spans alike (column 6 says which): the
    check of a small case is one short kernel, not one per span kind."""
    span = tl.program_id(0)
    pid = tl.program_id(1)
    programs = tl.num_programs(1)
    row = table_ptr + span * COLUMNS  # a table row: addr, rows, width, stride (elements), pattern, count slot, words
    slot = tl.load(row + 5)
    if tl.load(row + 6) != 0:
        changed = _SPAN_PASS(row, pid, programs, FILL, True, BLOCK, REARM)
    else:
        changed = _SPAN_PASS(row, pid, programs, FILL, False, BLOCK, REARM)
    if not FILL:
        # Every (span, program) writes its own slot, work or not: no zeroing launch, no atomics.
        tl.store(counts_ptr + slot * programs + pid, changed)


_COLUMNS = 7
COLUMNS = tl.constexpr(_COLUMNS)      # the kernel may only read constexpr globals
_SPAN_PASS = triton.jit(span_pass)


_COMPILED: dict[str, Any] = {}


def _kernel(device: torch.device) -> Any:
    """The jitted kernel; with TRITON_INTERPRET=1 set before triton was imported, Triton's interpreter
    (how the CPU tests run it)."""
    if "k" not in _COMPILED:
        _COMPILED["k"] = triton.jit(fill_or_count)
    return _COMPILED["k"]


class SpanTable:
    """The marker spans of an arena, laid out for the kernel; built once, reused for every fill and check."""

    def __init__(self, spans: Sequence[Span], device: torch.device) -> None:
        self.spans = list(spans)
        self.device = device
        rows = []
        longest = 1
        for i, s in enumerate(self.spans):
            size = WORD if s.words else 1
            elements = s.nbytes // size
            if elements >= 2**31:
                raise ValueError(f"a marker span of {elements} elements is too long for one check (limit 2**31)")
            longest = max(longest, elements)
            rows.append([s.addr, s.rows, s.width // size, s.stride // size, _pattern(s.marker, s.words), i, int(s.words)])
        self.table = torch.tensor(rows, dtype=torch.int64, device=device).reshape(-1, _COLUMNS)
        # One program count for every span, so that together they write every slot of the partial counts.
        self.programs = max(1, min(MAX_PROGRAMS, -(-longest // BLOCK)))

    def fill(self) -> None:
        if self.spans:
            _kernel(self.device)[(len(self.spans), self.programs)](self.table, self.table, FILL=True, BLOCK=BLOCK)

    def count(self, *, rearm: bool = False, out: torch.Tensor | None = None) -> torch.Tensor:
        """Changed words (or bytes, for byte spans) as [spans, programs] partial counts on the device: one
        launch, no sync. Sum over the last axis for the count of each span (in span order).
        rearm=True also writes the marker back where it changed, so the next launch starts armed."""
        partials = out if out is not None else torch.empty((len(self.spans), self.programs), dtype=torch.int32,
                                                           device=self.device)
        if self.spans:
            _kernel(self.device)[(len(self.spans), self.programs)](self.table, partials, FILL=False, BLOCK=BLOCK,
                                                                   REARM=rearm)
        return partials

    def graphed(self, *, rearm: bool = True) -> Callable[[], torch.Tensor]:
        """`count` captured in a CUDA graph: each call replays it (one driver call instead of Triton's Python
        launch path, which dominates a check of a few microseconds) and returns the same partials tensor,
        overwritten. Capture after every buffer exists: the graph holds the table's addresses. The kernel is
        compiled and loaded first, by a count without re-arm (it writes only the partials)."""
        partials = torch.empty((len(self.spans), self.programs), dtype=torch.int32, device=self.device)
        if self.device.type != "cuda":
            return lambda: self.count(rearm=rearm, out=partials)
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            self.count(rearm=False, out=partials)
            if rearm:                                         # compile the re-arming variant on a scratch span
                scratch = torch.full((WORD,), 0xA5, dtype=torch.uint8, device=self.device)
                SpanTable([Span.of(scratch, 0xA5)], self.device).count(rearm=True)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.count(rearm=rearm, out=partials)

        def replay() -> torch.Tensor:
            graph.replay()
            return partials
        replay.graph = graph            # type: ignore[attr-defined]  # keep it alive with the closure
        return replay


def _pattern(marker: int, words: bool) -> int:
    if not words:
        return marker
    return int.from_bytes(bytes([marker]) * WORD, "little", signed=True)
