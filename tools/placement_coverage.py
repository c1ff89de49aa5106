"""Which placement catches more: planted overruns past the end of every tensor size from 1 to 4096 bytes.

Issue 19, item 1. For each size n and each planted access past the end (reads and writes of width 1, 4 and
16 bytes, aligned to the tensor's start as a kernel's would be, the first one starting 0..255 bytes past the
last whole access inside), count what each placement lets a detector see, from harness/gpu_memsafety/placement/layout.py's
arithmetic and the facts it rests on (memcheck knows a cudaMalloc allocation's exact size: the H200 runs in
tests/data/sanitizer report "nearest allocation ... of size 4,000 bytes"; a VMM mapping ends on a page):

- misaligned_flush (before issue 19): the tensor's last byte on a page's last byte; the start then is
  page_end - n, misaligned for a w-byte access whenever n % w != 0, so every w-byte access of a correct
  kernel is a false "misaligned" record (and the kernel is ended at the first one);
- guard_page (aligned, alignment tail in markers): the fault and memcheck see an access only past the
  tail; the markers see writes in the tail; reads in the tail are missed;
- flush_end (aligned, exact allocation, memcheck --padding): memcheck sees every byte past the end;
- poison (guarded, 1 KiB guards): a read that changes the output is seen (assumed here: every read does).

Run: python tools/placement_coverage.py  (prints the table the README quotes; tests/placement/test_layout.py pins it)
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_memsafety.placement import layout as L  # noqa: E402

PAGE = 2 << 20
WIDTHS = (1, 4, 16)
SIZES = range(1, 4097)


def planted(n: int, width: int) -> list[tuple[int, int]]:
    """Accesses [start, end) that cross or lie past the end: the straddling last one, then 0..255 B further."""
    first = (n // width) * width            # the first access that is not wholly inside
    out = []
    for skip in range(0, 256, width):
        start = first + skip
        if start + width > n:
            out.append((start, start + width))
    return out


def coverage() -> dict[str, dict[str, int]]:
    counts = {p: {"reads": 0, "writes": 0, "false_misaligned_sizes": 0} for p in
              ("misaligned_flush", "guard_page", "flush_end", "poison")}
    total = 0
    for n in SIZES:
        page = L.plan(n, placement=L.GUARD_PAGE_BACK, guard=0)
        for width in WIDTHS:
            for lo, hi in planted(n, width):
                total += 1
                beyond_tail = hi > page.allocation_end
                counts["misaligned_flush"]["reads"] += 1
                counts["misaligned_flush"]["writes"] += 1
                counts["guard_page"]["reads"] += beyond_tail
                counts["guard_page"]["writes"] += 1          # markers in the tail, the fault past it
                counts["flush_end"]["reads"] += 1
                counts["flush_end"]["writes"] += 1
                counts["poison"]["reads"] += hi - n <= L.DEFAULT_GUARD
                counts["poison"]["writes"] += hi - n <= L.DEFAULT_GUARD
        old_start = PAGE - n                   # the old placement: tensor end = page end
        counts["misaligned_flush"]["false_misaligned_sizes"] += any(old_start % w for w in (4, 16))
    for c in counts.values():
        c["planted"] = total
    return counts


def main() -> None:
    counts = coverage()
    print("| placement | overreads seen | overwrites seen | sizes 1..4096 where a correct 4/16-byte load is 'misaligned' |")
    print("|---|---|---|---|")
    for name, c in counts.items():
        print(f"| {name} | {c['reads']} of {c['planted']} | {c['writes']} of {c['planted']} | {c['false_misaligned_sizes']} |")


if __name__ == "__main__":
    main()
