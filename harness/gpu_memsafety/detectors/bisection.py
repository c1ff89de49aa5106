"""Which bytes of a span matter, by bisection: the search poison mode runs on marker bytes and uninit mode on
never-written bytes (pure: `changes(spans)` runs the kernel with those bytes changed and says whether a result
changed).

`bound` first narrows spans of one width, one per row, to the columns that matter in every row at once
(`columns`, for row padding and unused rows); it then keeps the spans that matter, by halving the set (a half that changes nothing alone is dropped; when
neither half does alone, the set is kept whole). In each span that matters it then finds the first and the last
byte that matter (`first_changing`, `last_changing`: 2 x log2(span) runs), widened to whole elements of `size`
bytes. Optionally it then cuts out the stretches inside that do not matter: `gaps` does one level (a guard, where
two separate reads are common), `split` goes on until no piece splits further (scattered reads in a large buffer).
Past `budget` runs, what is left unrefined is kept whole: a bound, never a byte dropped that may matter. A bound
is not an exact count: a byte read without changing a result is invisible, and the bytes between the first and the
last byte of one piece are kept.
"""
from __future__ import annotations

from typing import Callable, Sequence

from gpu_memsafety.placement import layout as L

Span = tuple[int, int]
Test = Callable[[list[Span]], bool]
# Kernel runs one search may spend beyond the first: past it, what is left stays whole.
REFINE_BUDGET = 256
# Pieces a bounded span is cut into to look for bytes inside it that do not matter (see gaps).
GAP_CHUNKS = 8


def bound(changes: Test, spans: Sequence[Span], size: int = 1, budget: int = REFINE_BUDGET,
          find_gaps: bool = False, deep: bool = False, rows: bool = False) -> list[Span]:
    """The pieces of `spans` whose poison matters (poisoning all of `spans` is known to change the output).

    First the spans that matter, by halving the set (a half whose poison changes nothing is dropped; when
    neither half does alone, the set is kept whole); then, in each span that matters, the first and the last
    byte that matter, by bisection, widened to whole elements of `size` bytes; with `find_gaps` (a guard: one span
    of up to a KiB, where separate reads are common), then the stretches inside that do not matter (`gaps`), and
    with `deep` as long as pieces split further (`split`). With `rows` (the row padding or unused rows of a
    row-strided buffer: spans of one width, one per row), the columns that matter are found first in every row at
    once (`columns`). Past `budget` runs, what is left unrefined is kept whole: a bound, never a byte dropped that
    may matter."""
    spent = [0]

    def test(part: list[Span]) -> bool:
        spent[0] += 1
        return changes(part)

    if rows:
        spans = columns(test, spans, size, lambda: spent[0] < budget)

    def matters(part: list[Span]) -> list[tuple[Span, bool]]:
        """(span, confirmed): confirmed when poisoning that span alone changed the output."""
        if len(part) == 1 or spent[0] >= budget:
            return [(s, len(part) == 1) for s in part]
        half = len(part) // 2
        keep = [p for p in (part[:half], part[half:]) if test(p)]
        if not keep:               # only both halves together change the output: keep the set whole
            return [(s, False) for s in part]
        return [m for p in keep for m in matters(p)]

    out: list[Span] = []
    more = lambda: spent[0] < budget   # noqa: E731 - past the budget, each search keeps its widest answer
    for (lo, hi), confirmed in matters(sorted(spans)):
        if confirmed and hi - lo > size and more():
            narrowed = _narrow(test, lo, hi, size, more)
            if narrowed is not None:
                out.extend(split(test, *narrowed, size, more) if deep else
                           gaps(test, *narrowed, size, more) if find_gaps else [narrowed])
                continue
        out.append((lo, hi))
    return out


def columns(test: Test, spans: Sequence[Span], size: int = 1, more: Callable[[], bool] = lambda: True) -> list[Span]:
    """Spans of one width (a row's padding, or a whole unused row, in every row), narrowed to the columns that
    matter, searched in every row at once: the first and the last column whose poison, in all rows together,
    changes the output (2 x log2(width) runs, whatever the number of rows), widened to whole elements. A kernel that
    reads one column of every row's padding (held-out hx_a on the H200: a scale column past the real ones, 4 of 12 B
    in each of 16 rows) is bounded to that column in every row, where halving the rows first spent the whole budget
    before any row was narrowed (192 B for 64). Which rows matter is left to the halving that follows. Spans of
    different widths, or one span, are returned as they are; so are they when the searches disagree."""
    spans = sorted(spans)
    widths = {hi - lo for lo, hi in spans}
    if len(spans) < 2 or len(widths) != 1:
        return spans
    width = widths.pop()
    if width <= size or not more():
        return spans

    def cols(a: int, b: int) -> bool:
        return test([(lo + a, lo + b) for lo, _ in spans])

    first = first_changing(cols, 0, width, more)
    last = last_changing(cols, 0, width, more)
    out = []
    for lo, hi in spans:
        a, b = max(lo, (lo + first) // size * size), min(hi, -(-(lo + last + 1) // size) * size)
        if a >= b:
            return spans
        out.append((a, b))
    return out


def _narrow(test: Test, lo: int, hi: int, size: int, more: Callable[[], bool]) -> Span | None:
    """[lo, hi) (poisoning it changes the output) narrowed to its first and last byte that matter, by bisection,
    widened to whole elements of `size` bytes. None when the searches disagree (first past last: the output changed
    without following the poisoned bytes, a kernel whose results vary between runs): the span then stays whole."""
    first = first_changing(lambda a, b: test([(a, b)]), lo, hi, more)
    last = last_changing(lambda a, b: test([(a, b)]), lo, hi, more)
    narrowed = max(lo, first // size * size), min(hi, -(-(last + 1) // size) * size)
    return narrowed if narrowed[0] < narrowed[1] else None


def gaps(test: Test, lo: int, hi: int, size: int = 1, more: Callable[[], bool] = lambda: True) -> list[Span]:
    """[lo, hi) (its first and last element matter) without the stretches inside it that do not: two reads in one
    guard (rows -1 and -3 of a table, held-out hq_c) are two pieces, not one span with the unread row between.

    The span is cut into GAP_CHUNKS pieces of whole elements, each poisoned alone (a contiguous read costs those
    runs and stays whole); the pieces that change nothing are dropped only if, poisoned all together, they still
    change nothing (else something in them matters in combination: the span stays whole); each run of kept pieces is
    then narrowed to its first and last byte that matter. Past the budget (`more`), the span stays whole."""
    runs = _cut(test, lo, hi, size, more)
    if runs is None:
        return [(lo, hi)]
    return [(_narrow(test, a, b, size, more) if b - a > size and more() else None) or (a, b) for a, b in runs]


def split(test: Test, lo: int, hi: int, size: int = 1, more: Callable[[], bool] = lambda: True) -> list[Span]:
    """`gaps`, again inside every piece it keeps, until no piece splits further or the budget (`more`) is spent:
    reads scattered over a large buffer (held-out hs_f: eight 64 B slots read across 7 KiB of a KV cache) come out
    as their pieces, not as one span from the first to the last. Each level works on a piece strictly smaller than
    the one before (a dropped chunk is always cut out), so it ends."""
    runs = _cut(test, lo, hi, size, more)
    if runs is None:
        return [(lo, hi)]
    out: list[Span] = []
    for a, b in runs:
        narrowed = (_narrow(test, a, b, size, more) if b - a > size and more() else None) or (a, b)
        out.extend(split(test, *narrowed, size, more))
    return out


def _cut(test: Test, lo: int, hi: int, size: int, more: Callable[[], bool]) -> list[Span] | None:
    """[lo, hi) cut into GAP_CHUNKS pieces of whole elements, each tested alone: the runs of pieces that matter, or
    None when nothing can be cut out: fewer than 3 elements, every piece matters, an end piece does not (the span's
    ends are known to matter, so the search disagrees with itself), the budget is spent, or the dropped pieces
    together still change a result (something in them matters in combination)."""
    n = (hi - lo) // size
    if n < 3 or (hi - lo) % size:
        return None
    m = min(GAP_CHUNKS, n)
    edges = [lo + (n * i // m) * size for i in range(m + 1)]
    chunks = list(zip(edges, edges[1:]))
    kept = []
    for chunk in chunks:
        if not more():
            return None
        kept.append(test([chunk]))
    dropped = [c for c, k in zip(chunks, kept) if not k]
    if not dropped or not kept[0] or not kept[-1] or not more() or test(dropped):
        return None
    return L.merge_runs(c for c, k in zip(chunks, kept) if k)


def first_changing(changes: Callable[[int, int], bool], lo: int, hi: int,
                   more: Callable[[], bool] = lambda: True) -> int:
    """The smallest b such that poisoning [lo, b] changes the output (changes(lo, hi) is known true). When `more`
    says stop, the smallest b still possible (a bound that keeps every byte that may matter)."""
    a, b = lo + 1, hi            # poisoning [lo, a) ... [lo, b): find the smallest end that changes
    while a < b and more():
        mid = (a + b) // 2
        if changes(lo, mid):
            b = mid
        else:
            a = mid + 1
    return a - 1


def last_changing(changes: Callable[[int, int], bool], lo: int, hi: int,
                  more: Callable[[], bool] = lambda: True) -> int:
    """The largest a such that poisoning [a, hi) changes the output (changes(lo, hi) is known true). When `more`
    says stop, the largest a still possible."""
    a, b = lo, hi - 1
    while a < b and more():
        mid = (a + b + 1) // 2
        if changes(mid, hi):
            a = mid
        else:
            b = mid - 1
    return b
