"""Attribution: map each sanitizer access to a buffer, a region and byte offsets, then aggregate findings.

Pure: it works on the worker's buffer map (plain dicts) and parsed records, so it is tested on CPU with
recorded data. An access is attributed to the buffer whose allocation contains it, or else to the nearest
buffer that ends at most NEAR_BYTES before it (an overread past a flush-end tensor leaves the allocation) or
starts at most NEAR_BEFORE_BYTES after it (an underrun of a tensor that is its whole allocation).

Rules (one place each):
- kind: a read is an overread, a write or an atomic is an overwrite (the access stays in the details), a
  misaligned access is its own kind whatever its direction, never an overread;
- bytes: only the bytes of an access that lie outside the tensor's logical bytes count; an access that
  starts inside and ends past the end is a past_end access of the bytes beyond the end;
- shared memory: an access memcheck reports in the `__shared__` space names an offset in the block's shared
  window, not a global address: it is never placed against a buffer (a global buffer may hold the same number);
  it is the `__shared__` buffer's, region `shared`, at its offset in the block's own shared memory: the window offset
  (the address modulo SHARED_WINDOW, so a generic or cluster address reads as its offset) less the bytes the
  driver reserves at the window's start (`reserved_shared`; the window offset stays in the range's text), and
  belongs to the case that ran alone, else it is a stray;
- strays: an access that maps to no buffer is kept as an `unattributed` finding, never dropped; when the
  batch ran one case (`stray_case`), it belongs to that case, named relative to one of the case's buffers
  when that is plausible: the address is a wrapped 32-bit offset away from it (2^31 or 2^32 bytes times an
  element size of 1, 2, 4 or 8 from a byte of the buffer, or just past its end: "2,147,450,881 B before y"),
  else unattributed (an access into memory the kernel's library allocated says nothing about our buffers).
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from gpu_memsafety.placement import layout as L
from gpu_memsafety.model import (INSIDE, MEMCHECK, MISALIGNED, OVERREAD, OVERWRITE, SHARED, SHARED_MEMORY, UNATTRIBUTED,
                           ByteRange, Finding, region_class)

# How far past a tensor's end an access may land and still be blamed on it. A kernel's K loop walks at
# most a few tiles past its end; 4 MiB covers a 2 MiB guard granule with room to spare, and is far less
# than the distance between unrelated allocations of the sizes used here.
NEAR_BYTES = 4 << 20
# How far before a tensor's start an access may land and still be blamed on it (a negative index, a tile
# shifted back). Well under memcheck's padding (1 MiB, harness/gpu_memsafety/sanitizer/tool.py) that keeps the allocation before
# it away, so a short overrun past that allocation's end is always nearer to its own end.
NEAR_BEFORE_BYTES = 256 << 10
# The distances a wrapped 32-bit offset puts between an access and the byte it meant: 2^31 (a signed int32
# that overflowed) or 2^32 (an unsigned one), times the element size the offset is scaled by.
WRAPS = tuple(sorted({size << bits for size in (1, 2, 4, 8) for bits in (31, 32)}))
# A block's shared window: offsets below 16 MiB (Hopper's shared memory is at most 228 KiB per block; a cluster
# peer's address carries its rank above bit 24).
SHARED_WINDOW = 1 << 24
# Shared memory the driver reserves at the start of every block's window (cudaDevAttrReservedSharedMemoryPerBlock):
# 1 KiB from compute capability 8.0 on, none before (CUDA C++ Programming Guide, compute capabilities). Measured on
# the H200: the attribute reads 1024 (ci/gpu/probes/shared_atomic.cu), an atomic at byte 240 of a kernel's
# dynamic shared memory is reported at window offset 0x4f0, and planted_shared's read at byte 1000 at 0x7e8.
RESERVED_SHARED_SM80 = 1024


def reserved_shared(arch: str) -> int | None:
    """Bytes reserved before a block's own shared memory on `arch` ("sm_90"); None when the arch is not known
    (the finding then names the window offset)."""
    m = re.fullmatch(r"sm_(\d+)[a-z]?", arch or "")
    if m is None:
        return None
    return RESERVED_SHARED_SM80 if int(m[1]) // 10 >= 8 else 0

Describe = Callable[[str, int, int], str]


@dataclass(frozen=True)
class BufferRef:
    case_id: str
    name: str
    tensor_addr: int
    nbytes: int
    alloc_base: int
    alloc_size: int
    layout: L.GuardLayout

    @classmethod
    def from_record(cls, case_id: str, rec: Mapping[str, Any]) -> "BufferRef":
        return cls(case_id, rec["name"], int(rec["tensor_addr"]), int(rec["nbytes"]), int(rec["alloc_base"]),
                   int(rec["alloc_size"]), L.GuardLayout.from_json(rec["layout"]))

    @property
    def end(self) -> int:
        return self.tensor_addr + self.nbytes

    def contains(self, addr: int) -> bool:
        return self.alloc_base <= addr < self.alloc_base + self.alloc_size

    def distance_past_end(self, addr: int) -> int | None:
        return addr - self.end if addr >= self.end else None

    def distance_before_start(self, addr: int) -> int | None:
        """Bytes from addr to the tensor's first byte, for an address before the whole allocation."""
        return self.tensor_addr - addr if addr < self.alloc_base else None


@dataclass(frozen=True)
class Access:
    """One memory-access record, reduced to what attribution needs."""

    address: int
    size: int
    direction: str   # "read" | "write" | "atomic"
    kernel: str
    thread: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    source: str = ""
    misaligned: bool = False
    text: str = ""   # the sanitizer's own words for the record
    path: str = ""   # the source file the record names, as it named it (annotations place the finding there)
    space: str = ""  # the sanitizer's memory space ("global", "shared", ...; "" when it names none)
    inlined: str = ""  # the device function the access was made in when not the kernel (SanitizerRecord.inlined)


def kind_of(access: Access) -> str:
    if access.misaligned:
        return MISALIGNED
    return OVERWRITE if access.direction in ("write", "atomic") else OVERREAD


def locate(addr: int, buffers: Sequence[BufferRef]) -> BufferRef | None:
    for buf in buffers:
        if buf.contains(addr):
            return buf
    # The nearest end or start wins; at equal distance the end (an overrun is the commoner bug).
    best: tuple[int, int, BufferRef] | None = None
    for buf in buffers:
        past, before = buf.distance_past_end(addr), buf.distance_before_start(addr)
        for key in ((past, 0) if past is not None and past < NEAR_BYTES else None,
                    (before, 1) if before is not None and before <= NEAR_BEFORE_BYTES else None):
            if key is not None and (best is None or key < best[:2]):
                best = (*key, buf)
    return best[2] if best else None


def nearest(addr: int, buffers: Sequence[BufferRef]) -> tuple[BufferRef, int] | None:
    """The buffer a stray access plausibly meant, and the wrap that moved it there (signed: the access lies
    `wrap` bytes before what it meant when negative): the address plus or minus a WRAPS distance lands in
    the buffer's allocation or at most NEAR_BYTES past its end. None when no buffer is plausible."""
    best: tuple[int, BufferRef, int] | None = None
    for buf in buffers:
        for wrap in WRAPS:
            for signed in (wrap, -wrap):
                meant = addr + signed
                if buf.alloc_base <= meant < buf.end + NEAR_BYTES:
                    key = abs(meant - buf.tensor_addr) + wrap
                    if best is None or key < best[0]:
                        best = (key, buf, -signed)
    return (best[1], best[2]) if best else None


PlacedAccess = tuple[Access, BufferRef | None, int, int, str]   # access, buffer, start, end (tensor offsets), region


def _pieces(acc: Access, buf: BufferRef) -> list[tuple[int, int, str]]:
    """The bytes of one access that count, cut at region boundaries: bytes inside the tensor's logical
    bytes do not count, unless nothing else is left (then the record says something is wrong inside)."""
    lo = acc.address - buf.tensor_addr
    pieces = L.split_by_region(buf.layout, lo, lo + max(acc.size, 1))
    if acc.misaligned:
        return [(lo, lo + max(acc.size, 1), L.region_class(buf.layout.region_of(lo)))]
    outside = [p for p in pieces if p[2] != INSIDE]
    return outside or pieces


def aggregate(accesses: Iterable[Access], buffers: Sequence[BufferRef], *, arch: str = "",
              describe: Callable[[str, str, int, int], str] | None = None,
              stray_case: str | None = None) -> dict[str, list[Finding]]:
    """Findings per case id ("" for accesses that map to no buffer and no known case).

    arch: the GPU's ("sm_90"); shared-memory offsets are counted from the block's own shared memory past what the
    driver reserves there (`reserved_shared`), from the window's start when the arch is not known.

    stray_case: the one case that ran in the process (the batch was a single case): an access that maps
    to no buffer is that case's, named relative to its nearest buffer when plausible."""
    groups: dict[tuple[str, str, str, str, str, str], list[PlacedAccess]] = defaultdict(list)
    reserved = reserved_shared(arch)
    for acc in accesses:
        kind = kind_of(acc)
        if acc.space == "shared":
            lo = acc.address % SHARED_WINDOW - (reserved or 0)
            groups[(stray_case or "", acc.kernel, kind, SHARED, SHARED_MEMORY, "")].append(
                (acc, None, lo, lo + max(acc.size, 1), SHARED_MEMORY))
            continue
        buf = locate(acc.address, buffers)
        if buf is None:
            _place_stray(groups, acc, kind, buffers, stray_case)
            continue
        for lo, hi, region in _pieces(acc, buf):
            cls = region_class(region)
            groups[(buf.case_id, acc.kernel, kind, buf.name, cls, "")].append((acc, buf, lo, hi, region))
    out: dict[str, list[Finding]] = defaultdict(list)
    for (case_id, kernel, kind, name, region, how), items in groups.items():
        out[case_id].append(_finding(kernel, kind, name, region, how, items, arch, describe, case_id, reserved))
    return dict(out)


# An access into memory of no buffer of ours is reported by memcheck only where it lands outside every live
# allocation of the process; where the same wild access lands inside another allocation (the library's workspace,
# torch's cache) memcheck is silent, and which of its addresses do depends on the process's memory layout (what ran
# before in the same worker). The count is what memcheck saw, at least: run 33 saw 49,152 B one run and 48,640 B the
# next for the same split-k scratchpad write (triton#8327).
WILD_NOTE = ("at least: memcheck reports a wild access only where it lands outside every live allocation, and "
             "which of its addresses do depends on the process's memory layout")

def _place_stray(groups: dict[tuple[str, str, str, str, str, str], list[PlacedAccess]], acc: Access, kind: str,
                 buffers: Sequence[BufferRef], stray_case: str | None) -> None:
    if stray_case is None:
        groups[("", acc.kernel, kind, UNATTRIBUTED, UNATTRIBUTED, "")].append((acc, None, acc.address, acc.address + acc.size, UNATTRIBUTED))
        return
    near = nearest(acc.address, [b for b in buffers if b.case_id == stray_case])
    if near is None:
        groups[(stray_case, acc.kernel, kind, UNATTRIBUTED, UNATTRIBUTED, "")].append((acc, None, acc.address, acc.address + acc.size, UNATTRIBUTED))
        return
    buf, _ = near
    lo = acc.address - buf.tensor_addr
    region = L.BEFORE_START if lo < 0 else L.PAST_END
    groups[(stray_case, acc.kernel, kind, buf.name, region, "nearest")].append((acc, buf, lo, lo + max(acc.size, 1), region))


def _finding(kernel: str, kind: str, name: str, region: str, how: str, items: list[PlacedAccess], arch: str,
             describe: Callable[[str, str, int, int], str] | None, case_id: str = "",
             shared_reserved: int | None = None) -> Finding:
    first, buf = items[0][0], items[0][1]
    spans = L.merge_runs((lo, hi) for _, _, lo, hi, _ in items)
    ranges: tuple[ByteRange, ...]
    if name == SHARED:
        ranges = tuple(ByteRange(SHARED_MEMORY, lo, hi, (describe(case_id, SHARED, lo, hi) if describe else "")
                                 or _shared_text(lo, shared_reserved)) for lo, hi in spans)
    elif buf is None:
        ranges = tuple(ByteRange(UNATTRIBUTED, lo, hi, logical=f"address {lo:#x}") for lo, hi in spans)
    else:
        ranges = tuple(_ranges(buf, spans, describe))
    details = _details(items, buf, how, kind)
    note = dict(details).get("nearest", "")
    wild = buf is None and name != SHARED
    if wild:
        note = "; ".join(n for n in (note, WILD_NOTE) if n)
    return Finding(
        detector=MEMCHECK, kind=kind, buffer=name, region=region, bytes=sum(hi - lo for lo, hi in spans),
        count=len({id(a) for a, *_ in items}), kernel=kernel, arch=arch, ranges=ranges,
        first_thread=_xyz(first.thread), first_block=_xyz(first.block), source=first.source, note=note,
        details=details, exact=not wild,
    )


def _shared_text(lo: int, reserved: int | None) -> str:
    if not reserved:
        return f"shared-window offset {lo:#x}" if reserved is None else f"shared offset {lo:,}"
    return f"shared offset {lo:,} (window offset {lo + reserved:#x}, past the {reserved:,} B the driver reserves)"


def _details(items: list[PlacedAccess], buf: BufferRef | None, how: str, kind: str) -> tuple[tuple[str, str], ...]:
    first = items[0][0]
    out: list[tuple[str, str]] = []
    out.append(("access", "/".join(sorted({a.direction or "read" for a, *_ in items}))))
    if first.space == "shared":
        out.append(("space", "shared"))
    if first.text:
        out.append(("sanitizer", first.text))
    width = _width_words(items, buf)
    if width:
        out.append(("width", width))
    if first.path:
        out.append(("path", first.path))
    if first.inlined:
        out.append(("inlined", first.inlined))
    if buf is not None:
        zones = []
        for _, _, lo, hi, _ in items:
            for zone in (buf.layout.zone_of(lo), buf.layout.zone_of(hi - 1)):
                word = L.region_class(zone)
                if word not in zones:
                    zones.append(word)
        out.append(("zone", ", ".join(zones)))
    if how == "nearest" and buf is not None:
        out.append(("nearest", _distance_words(items, buf, nearest(first.address, [buf]))))
    if kind == MISALIGNED and buf is not None:
        out.append(("misaligned", _misaligned_cause(first, buf)))
    return tuple(out)


def _width_words(items: list[PlacedAccess], buf: BufferRef | None) -> str:
    """The full width of the accesses, where the counted bytes are only part of them (an access that straddles the
    tensor's end: an 8-byte load at +3996 counts the 4 B past the end, and says it was 8 B wide), or where they are
    wider than 4 B (a vector load); "" otherwise."""
    if buf is None:
        return ""
    spans = [(a.address - buf.tensor_addr, a.address - buf.tensor_addr + max(a.size, 1)) for a, *_ in items]
    sizes = sorted({end - start for start, end in spans})
    lo, hi = min(start for start, _ in spans), max(end for _, end in spans)
    counted = sum(h - l for l, h in L.merge_runs((l, h) for _, _, l, h, _ in items))
    straddle = counted < hi - lo and any(start < 0 < end or start < buf.nbytes < end for start, end in spans)
    if not straddle and sizes[-1] <= 4:
        return ""
    text = f"{'/'.join(str(s) for s in sizes)} B per access"
    if straddle:
        inside = sum(max(0, min(end, buf.nbytes) - max(start, 0)) for start, end in spans)
        text += (f"; the accesses span {lo:+,}..{hi:+,} and straddle the tensor's "
                 f"{'start' if lo < 0 else 'end'}: {inside:,} B of them inside it, not counted")
    return text


def _distance_words(items: list[PlacedAccess], buf: BufferRef, near: tuple[BufferRef, int] | None) -> str:
    lo = min(lo for _, _, lo, _, _ in items)
    hi = max(hi for _, _, _, hi, _ in items)
    where = f"{-lo:,} B before {buf.name}" if lo < 0 else f"{lo - buf.nbytes + 1:,} B after the end of {buf.name}"
    wrap = near[1] if near else 0
    meant = f"{abs(wrap):,} B {'further' if wrap < 0 else 'back'} it would be {buf.name}'s byte {lo - wrap:,}" if wrap else ""
    return (f"outside every allocation; {where} ({hi - lo:,} B spanned): a 32-bit offset that wrapped ({meant}); "
            "this case's, since it ran alone in its process")


def _misaligned_cause(acc: Access, buf: BufferRef) -> str:
    size = max(acc.size, 1)
    if buf.tensor_addr % size and (acc.address - buf.tensor_addr) % size == 0:
        return (f"the harness's placement caused this: the tensor starts at {buf.tensor_addr:#x}, not "
                f"{size}-byte aligned, and the access is aligned relative to the tensor's start")
    return (f"the kernel's own address: offset {acc.address - buf.tensor_addr} is not a multiple of the "
            f"{size}-byte access, and the tensor starts {L.ALIGN}-byte aligned" if buf.tensor_addr % L.ALIGN == 0
            else f"offset {acc.address - buf.tensor_addr} is not a multiple of the {size}-byte access")


def _ranges(buf: BufferRef, spans: list[tuple[int, int]], describe: Callable[[str, str, int, int], str] | None) -> list[ByteRange]:
    out = []
    for rng in L.ranges_from_offsets(buf.layout, spans):
        logical = describe(buf.case_id, buf.name, rng.start, rng.end) if describe else ""
        out.append(ByteRange(rng.region, rng.start, rng.end, logical))
    return out


def _xyz(v: tuple[int, int, int] | None) -> str:
    return f"({v[0]},{v[1]},{v[2]})" if v else ""


def guard_findings(guard: Mapping[str, Sequence[Mapping[str, Any]]], *, kernel: str, arch: str,
                   case_id: str = "", describe: Callable[[str, str, int, int], str] | None = None,
                   buffers: Sequence[Mapping[str, Any]] = (), detector: str = "guard", kind: str = OVERWRITE,
                   access: str = "write") -> list[Finding]:
    """Guard-marker ranges (from the worker) grouped per buffer and region class into overwrite findings.
    With the buffer map, each finding's details name the marker zones (front_guard, alignment_tail...).
    `detector`, `kind`, `access`: the same for the byte ranges another detector recorded (the interpreter's trace:
    exact bytes of whole accesses, never widened to whole elements as changed marker bytes are)."""
    from gpu_memsafety.model import GUARD
    layouts = {b["name"]: L.GuardLayout.from_json(b["layout"]) for b in buffers if "layout" in b}
    itemsizes = {b["name"]: itemsize_of(b) for b in buffers if "name" in b}
    findings = []
    for name, runs in guard.items():
        by_class: dict[str, list[ByteRange]] = defaultdict(list)

        def words(lo: int, hi: int, given: str = "", name: str = name) -> str:
            return describe(case_id, name, lo, hi) if describe else given
        for r in runs:
            by_class[L.region_class(r["region"])].append(ByteRange(r["region"], r["start"], r["end"],
                                                                   words(r["start"], r["end"], r.get("logical", ""))))
        for region, ranges in by_class.items():
            details: tuple[tuple[str, str], ...] = (("access", access),)
            notes: list[str] = []
            if name in layouts:
                lay = layouts[name]
                zones = dict.fromkeys(L.region_class(lay.zone_of(x.start)) for x in ranges)
                details += (("zone", ", ".join(zones)),)
                size = itemsizes.get(name, 1)
                if detector == GUARD and size > 1 and region in (L.PAST_END, L.BEFORE_START):
                    whole = _whole_elements(ranges, size, lay, words)
                    changed, widened = sum(x.nbytes for x in ranges), sum(x.nbytes for x in whole)
                    if widened != changed:
                        notes.append(f"{changed} B changed, {widened} B in whole {size}-byte elements of {name}: a "
                                     f"store writes whole elements, and a byte it left equal to the marker (or that an "
                                     f"atomic add did not change) is not seen")
                        ranges = whole
                notes.append(_beyond_guard(lay, ranges))
            note = "; ".join(n for n in notes if n)
            exact = not note
            findings.append(Finding(detector=detector, kind=kind, buffer=name, region=region,
                                    bytes=sum(x.nbytes for x in ranges), count=len(ranges), kernel=kernel,
                                    arch=arch, ranges=tuple(ranges), details=details, exact=exact, note=note))
    return findings


def itemsize_of(record: Mapping[str, Any]) -> int:
    """Bytes per element of a buffer-map entry: its `itemsize`, else from its dtype's name (float32: 4; bfloat16: 2;
    float8_e4m3fn: 1), else 1."""
    if isinstance(record.get("itemsize"), int) and record["itemsize"] > 0:
        return int(record["itemsize"])
    bits = re.search(r"(\d+)", str(record.get("dtype", "")))
    return max(1, int(bits.group(1)) // 8) if bits else 1


def _whole_elements(ranges: Sequence[ByteRange], size: int, lay: L.GuardLayout,
                    words: Callable[[int, int], str]) -> list[ByteRange]:
    """Changed guard bytes widened to the whole elements of `size` bytes they fall in (offsets from the tensor's
    first byte), kept inside the guard, touching pieces merged."""
    spans = []
    for x in ranges:
        lo, hi = x.start // size * size, -(-x.end // size) * size
        if region_class(x.region) == L.PAST_END:
            lo, hi = max(lo, lay.nbytes), min(hi, lay.nbytes + lay.back)
        else:
            lo, hi = max(lo, -lay.front), min(hi, 0)
        spans.append((lo, hi, x.region))
    first = sorted(spans)      # each merged piece keeps the region name of the first range in it
    return [ByteRange(next(r for a, _, r in first if lo <= a < hi), lo, hi, words(lo, hi))
            for lo, hi in L.merge_runs((lo, hi) for lo, hi, _ in spans)]


def _beyond_guard(lay: L.GuardLayout, ranges: Sequence[ByteRange]) -> str:
    """Why the changed marker bytes are only a lower bound ("" when they are the count): a write that reaches the
    outer edge of a guard may go on past it, into memory the markers do not watch (held-out hp_a on the H200: a
    4,400 B row written past the end changed the whole 1 KiB back guard)."""
    for x in ranges:
        side = region_class(x.region)
        if lay.back and side == L.PAST_END and x.end >= lay.nbytes + lay.back:
            edge = f"the last byte of the {lay.back} B back guard"
        elif lay.front and side == L.BEFORE_START and x.start <= -lay.front:
            edge = f"the first byte of the {lay.front} B front guard"
        else:
            continue
        return (f"at least: the write reaches {edge} and may go on beyond it, where no marker watches "
                f"(memcheck sees how far, where nothing else is allocated)")
    return ""
