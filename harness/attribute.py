"""Attribution: map each sanitizer access to a buffer, a region and byte offsets, then aggregate findings.

Pure: it works on the worker's buffer map (plain dicts) and parsed records, so it is tested on CPU with
recorded data. An access is attributed to the buffer whose allocation contains it, or else to the nearest
buffer that ends at most NEAR_BYTES before it (an overread past a flush-end tensor leaves the allocation);
what maps to no buffer is kept as an `unattributed` finding, never dropped.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from harness import layout as L
from harness.model import MEMCHECK, OVERREAD, OVERWRITE, ByteRange, Finding

# How far past a tensor's end an access may land and still be blamed on it. A kernel's K loop walks at
# most a few tiles past its end; 4 MiB covers a 2 MiB guard granule with room to spare, and is far less
# than the distance between unrelated allocations of the sizes used here.
NEAR_BYTES = 4 << 20

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


@dataclass(frozen=True)
class Access:
    """One memory-access record, reduced to what attribution needs."""

    address: int
    size: int
    direction: str   # "read" | "write"
    kernel: str
    thread: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    source: str = ""


def locate(addr: int, buffers: Sequence[BufferRef]) -> BufferRef | None:
    for buf in buffers:
        if buf.contains(addr):
            return buf
    best: tuple[int, BufferRef] | None = None
    for buf in buffers:
        dist = buf.distance_past_end(addr)
        if dist is not None and dist < NEAR_BYTES and (best is None or dist < best[0]):
            best = (dist, buf)
    return best[1] if best else None


def aggregate(accesses: Iterable[Access], buffers: Sequence[BufferRef], *, arch: str = "",
              describe: Callable[[str, str, int, int], str] | None = None) -> dict[str, list[Finding]]:
    """Findings per case id ("" for accesses that map to no buffer)."""
    groups: dict[tuple[str, str, str, str, str], list[tuple[Access, BufferRef | None]]] = defaultdict(list)
    for acc in accesses:
        buf = locate(acc.address, buffers)
        kind = OVERWRITE if acc.direction == "write" else OVERREAD
        if buf is None:
            groups[("", acc.kernel, kind, "unattributed", "unknown")].append((acc, None))
            continue
        offset = acc.address - buf.tensor_addr
        region = L.region_class(buf.layout.region_of(offset))
        groups[(buf.case_id, acc.kernel, kind, buf.name, region)].append((acc, buf))
    out: dict[str, list[Finding]] = defaultdict(list)
    for (case_id, kernel, kind, name, region), items in groups.items():
        out[case_id].append(_finding(kernel, kind, name, region, items, arch, describe))
    return dict(out)


def _finding(kernel: str, kind: str, name: str, region: str, items: list[tuple[Access, BufferRef | None]],
             arch: str, describe: Callable[[str, str, int, int], str] | None) -> Finding:
    first = items[0][0]
    buf = items[0][1]
    if buf is None:
        spans = L.merge_runs((a.address, a.address + a.size) for a, _ in items)
        ranges = tuple(ByteRange("unattributed", lo, hi, logical=f"address {lo:#x}") for lo, hi in spans)
    else:
        spans = L.merge_runs((a.address - buf.tensor_addr, a.address - buf.tensor_addr + a.size) for a, _ in items)
        ranges = tuple(_ranges(buf, spans, describe))
    return Finding(
        detector=MEMCHECK, kind=kind, buffer=name, region=region, bytes=sum(hi - lo for lo, hi in spans),
        count=len(items), kernel=kernel, arch=arch, ranges=ranges,
        first_thread=_xyz(first.thread), first_block=_xyz(first.block), source=first.source,
    )


def _ranges(buf: BufferRef, spans: list[tuple[int, int]], describe: Callable[[str, str, int, int], str] | None) -> list[ByteRange]:
    out = []
    for rng in L.ranges_from_offsets(buf.layout, spans):
        logical = describe(buf.case_id, buf.name, rng.start, rng.end) if describe else ""
        out.append(ByteRange(rng.region, rng.start, rng.end, logical))
    return out


def _xyz(v: tuple[int, int, int] | None) -> str:
    return f"({v[0]},{v[1]},{v[2]})" if v else ""


def guard_findings(guard: Mapping[str, Sequence[Mapping[str, Any]]], *, kernel: str, arch: str,
                   case_id: str = "", describe: Callable[[str, str, int, int], str] | None = None) -> list[Finding]:
    """Guard-marker ranges (from the worker) grouped per buffer and region class into overwrite findings."""
    from harness.model import GUARD
    findings = []
    for name, runs in guard.items():
        by_class: dict[str, list[ByteRange]] = defaultdict(list)
        for r in runs:
            logical = describe(case_id, name, r["start"], r["end"]) if describe else r.get("logical", "")
            by_class[L.region_class(r["region"])].append(ByteRange(r["region"], r["start"], r["end"], logical))
        for region, ranges in by_class.items():
            findings.append(Finding(detector=GUARD, kind=OVERWRITE, buffer=name, region=region,
                                    bytes=sum(x.nbytes for x in ranges), count=len(ranges), kernel=kernel,
                                    arch=arch, ranges=tuple(ranges)))
    return findings
