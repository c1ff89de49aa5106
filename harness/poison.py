"""Poison mode's plan and findings (pure: no torch; the worker runs the kernel, this decides what to poison).

A baseline run has every marker byte in one pattern. Then, for every buffer (watched ones first: `watch=` is
an order, not a precondition) and every region of its marker bytes (before_start: the front guard;
past_end: the back guard; row_padding; unused_row), one run poisons only that region in the other pattern.
An output that changes is an overread of that buffer's region: reads inside the allocation (padding, unused
rows) are named as such, and before and after the tensor are told apart. For before_start and past_end the
bytes are then bounded by bisection (poison a prefix, then a suffix, of the guard): the first and the last
byte whose poison changes the output, in 2 x log2(guard) more runs, only when something was found, widened
to whole elements of the buffer's dtype (a kernel reads elements: poisoning the low mantissa byte of a float
may change nothing). A bound is not an exact count (a byte read without changing the output is invisible),
so the finding is inexact.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from harness import layout as L
from harness.model import BEFORE_START, OVERREAD, PAST_END, POISON, ByteRange, Finding

Span = tuple[int, int]
# run(buffer, spans) -> {output: {"elements": ..., "of": ...}} for the outputs that changed ({} if none)
Run = Callable[[str, list[Span]], Mapping[str, Any]]
BISECTED = (BEFORE_START, PAST_END)


def survey(layouts: Mapping[str, L.GuardLayout], order: Sequence[str], run: Run,
           itemsizes: Mapping[str, int] | None = None) -> tuple[list[dict[str, Any]], int]:
    """Every (buffer, region) whose poison changes an output, with bounds where they can be had; and how
    many kernel runs that took (the baseline not counted)."""
    found: list[dict[str, Any]] = []
    runs = 0
    for name in order:
        for region, spans in layouts[name].region_spans().items():
            diff = dict(run(name, spans))
            runs += 1
            if not diff:
                continue
            entry: dict[str, Any] = {"buffer": name, "region": region, "outputs": diff, "bounds": None}
            if region in BISECTED and len(spans) == 1:
                (lo, hi), calls = spans[0], [0]

                def changes(a: int, b: int) -> bool:
                    calls[0] += 1
                    return bool(run(name, [(a, b)]))
                size = max(1, (itemsizes or {}).get(name, 1))
                first, last = first_changing(changes, lo, hi), last_changing(changes, lo, hi)
                entry["bounds"] = [max(lo, first // size * size), min(hi, -(-(last + 1) // size) * size)]
                runs += calls[0]
            found.append(entry)
    return found, runs


def first_changing(changes: Callable[[int, int], bool], lo: int, hi: int) -> int:
    """The smallest b such that poisoning [lo, b] changes the output (changes(lo, hi) is known true)."""
    a, b = lo + 1, hi            # poisoning [lo, a) ... [lo, b): find the smallest end that changes
    while a < b:
        mid = (a + b) // 2
        if changes(lo, mid):
            b = mid
        else:
            a = mid + 1
    return a - 1


def last_changing(changes: Callable[[int, int], bool], lo: int, hi: int) -> int:
    """The largest a such that poisoning [a, hi) changes the output (changes(lo, hi) is known true)."""
    a, b = lo, hi - 1
    while a < b:
        mid = (a + b + 1) // 2
        if changes(mid, hi):
            a = mid
        else:
            b = mid - 1
    return a


def findings(poison: Mapping[str, Any] | None, *, kernel: str, arch: str) -> list[Finding]:
    """One overread finding per (buffer, region) whose poison changed an output."""
    out = []
    for entry in (poison or {}).get("regions") or ():
        name, region, bounds = entry["buffer"], entry["region"], entry.get("bounds")
        changed = "; ".join(f"{k}: {v['elements']} of {v['of']} elements changed" for k, v in entry["outputs"].items())
        ranges: tuple[ByteRange, ...] = ()
        where = f"only {name}'s {region} bytes changed pattern"
        if bounds:
            ranges = (ByteRange(region, int(bounds[0]), int(bounds[1])),)
            where += f"; bisection bounds the bytes that matter to {bounds[0]}..{bounds[1] - 1}"
        out.append(Finding(detector=POISON, kind=OVERREAD, buffer=name, region=region,
                           bytes=(int(bounds[1]) - int(bounds[0])) if bounds else 0, kernel=kernel, arch=arch,
                           ranges=ranges, exact=False, note=f"output changed when {where} ({changed})",
                           details=(("access", "read"), ("zone", region))))
    return out
