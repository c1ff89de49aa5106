"""Poison mode's plan and findings (pure: no torch; the worker runs the kernel, this decides what to poison).

A baseline run has every marker byte in one pattern. Then, for every buffer (watched ones first: `watch=` is
an order, not a precondition) and every region of its marker bytes (before_start: the front guard;
past_end: the back guard; row_padding; unused_row), one run poisons only that region in the poison pattern,
and, only when that changed nothing, one more run in the second poison pattern: the first (0xFF) is NaN in
every float format, which survives multiplication by zero but which a max, a min or a comparison drops; the
second (0x7B) is a large finite positive value (1.3e36 as fp32/bf16, 6.1e4 as fp16, 352 as e4m3), which a max
picks. A clean region costs two runs.
An output that changes is an overread of that buffer's region: reads inside the allocation (row padding, unused
rows) are named as such, and before and after the tensor are told apart. The bytes that matter are then bounded
(`bound`), only when something was found: the region's spans that matter, by halving the set of spans (a
padded buffer has one padding span per row, one span per unused row), then in each the first and the last byte
whose poison changes the output, by bisection (2 x log2(span) runs), widened to whole elements of the buffer's
dtype (a kernel reads elements: poisoning the low mantissa byte of a float may change nothing). A bound is not
an exact count (a byte read without changing the output is invisible, and bytes between the first and the last
of one span are kept), so the finding is inexact.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from gpu_memsafety.detectors.base import Evidence
from gpu_memsafety.model import OVERREAD, POISON, ByteRange, DetectorRun, Finding
from gpu_memsafety.placement import layout as L

Span = tuple[int, int]
# run(buffer, spans, pattern) -> {output: {"elements": ..., "of": ...}} for the outputs that changed ({} if none),
# when the spans of that buffer hold `pattern` and every other marker byte the baseline's.
Run = Callable[[str, list[Span], int], Mapping[str, Any]]
# Poison patterns in the order they are tried on a region (the baseline's marker is 0xA5): see the docstring.
PATTERNS = (0xFF, 0x7B)
# The baseline's marker, then the patterns: 0xA5 as E8M0 is 2^38 and as fp32 a tiny number; 0xFF is NaN as E8M0,
# as fp32 and as bf16; 0x7B a large finite positive number.
BASELINE = 0xA5
ACTION = "poison"


class PoisonDetector:
    name = POISON
    sanitizer = None
    placement = L.GUARDED
    needs_cover = needs_gpu = False
    action = ACTION
    deadline_factor = 2.0       # one launch per buffer and region, at least two
    explains_fault = ends_process = False

    def ran(self, ev: Evidence) -> DetectorRun:
        ok = ev.of(POISON) is not None
        return DetectorRun(POISON, ok, "two patterns compared" if ok else "not run")

    def findings(self, ev: Evidence) -> list[Finding]:
        return overread_findings(ev.of(POISON), kernel=ev.result.kernel, arch=ev.result.arch)


DETECTOR = PoisonDetector()
# Kernel runs one region may spend on bounding its bytes beyond the first: past it, what is left stays whole.
REFINE_BUDGET = 256


def survey(layouts: Mapping[str, L.GuardLayout], order: Sequence[str], run: Run,
           itemsizes: Mapping[str, int] | None = None, budget: int = REFINE_BUDGET,
           patterns: Sequence[int] = PATTERNS) -> tuple[list[dict[str, Any]], int]:
    """Every (buffer, region) whose poison changes an output, with the bytes that matter bounded (in the pattern
    that changed it); and how many kernel runs that took (the baseline not counted)."""
    found: list[dict[str, Any]] = []
    runs = 0
    for name in order:
        layout = layouts[name]
        for region, spans in layout.region_spans().items():
            diff: dict[str, Any] = {}
            for pattern in patterns:
                diff = dict(run(name, spans, pattern))
                runs += 1
                if diff:
                    break
            if not diff:
                continue
            calls = [0]

            def changes(part: list[Span], pattern: int = pattern) -> bool:
                calls[0] += 1
                return bool(run(name, part, pattern))
            size = max(1, (itemsizes or {}).get(name, 1))
            pieces = bound(changes, spans, size, budget)
            runs += calls[0]
            ranges = [[lo, hi, layout.region_of(lo)] for lo, hi in pieces]
            found.append({"buffer": name, "region": region, "outputs": diff, "ranges": ranges, "pattern": pattern,
                          "bounds": [pieces[0][0], pieces[-1][1]] if pieces else None})
    return found, runs


def bound(changes: Callable[[list[Span]], bool], spans: Sequence[Span], size: int = 1,
          budget: int = REFINE_BUDGET) -> list[Span]:
    """The pieces of `spans` whose poison matters (poisoning all of `spans` is known to change the output).

    First the spans that matter, by halving the set (a half whose poison changes nothing is dropped; when
    neither half does alone, the set is kept whole); then, in each span that matters, the first and the last
    byte that matter, by bisection, widened to whole elements of `size` bytes. Past `budget` runs, what is
    left unrefined is kept whole: a bound, never a byte dropped that may matter."""
    spent = [0]

    def test(part: list[Span]) -> bool:
        spent[0] += 1
        return changes(part)

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
    for (lo, hi), confirmed in matters(sorted(spans)):
        if confirmed and hi - lo > size and spent[0] < budget:
            first = first_changing(lambda a, b: test([(a, b)]), lo, hi)
            last = last_changing(lambda a, b: test([(a, b)]), lo, hi)
            lo, hi = max(lo, first // size * size), min(hi, -(-(last + 1) // size) * size)
        out.append((lo, hi))
    return out


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


def overread_findings(poison: Mapping[str, Any] | None, *, kernel: str, arch: str) -> list[Finding]:
    """One overread finding per (buffer, region) whose poison changed an output, its bytes the bounded ranges
    (a report written before ranges were recorded has only `bounds`, or nothing for rows: 0 bytes)."""
    out = []
    for entry in (poison or {}).get("regions") or ():
        name, region = entry["buffer"], entry["region"]
        changed = "; ".join(f"{k}: {v['elements']} of {v['of']} elements changed" for k, v in entry["outputs"].items())
        ranges = _ranges(entry)
        pattern = entry.get("pattern")
        where = f"only {name}'s {region} bytes changed pattern" + (f" (to {pattern:#04x})" if pattern is not None else "")
        if pattern is not None and pattern != PATTERNS[0]:
            where += f", after {PATTERNS[0]:#04x} (NaN) changed nothing: a max, min or comparison drops NaN"
        if ranges:
            spans = ", ".join(f"{r.start}..{r.end - 1}" for r in ranges[:4]) + (", ..." if len(ranges) > 4 else "")
            where += f"; the bytes that matter are bounded to {spans} ({sum(r.nbytes for r in ranges)} B)"
        out.append(Finding(detector=POISON, kind=OVERREAD, buffer=name, region=region,
                           bytes=sum(r.nbytes for r in ranges), count=max(1, len(ranges)), kernel=kernel, arch=arch,
                           ranges=ranges, exact=False, note=f"output changed when {where} ({changed})",
                           details=(("access", "read"), ("zone", region))))
    return out


def _ranges(entry: Mapping[str, Any]) -> tuple[ByteRange, ...]:
    if entry.get("ranges"):
        return tuple(ByteRange(str(r[2]), int(r[0]), int(r[1])) for r in entry["ranges"])
    bounds = entry.get("bounds")
    return (ByteRange(entry["region"], int(bounds[0]), int(bounds[1])),) if bounds else ()


# ------------------------------------------------------------------------------------ the worker side (torch)

def run(worker: Any, adapter: Any, case: Any) -> dict[str, Any]:
    """A baseline run with every marker byte in one pattern, then one run per buffer and region of its marker
    bytes with only that region in another pattern (`survey`: every buffer, watched ones first; before and after
    the tensor apart; bytes bounded by bisection when something changed)."""
    from gpu_memsafety.engine.actions import launched, marker_check
    ctx = worker.context(case, marker=BASELINE)
    info = adapter(case, ctx)
    worker.sync()
    baseline = _host_outputs(info.outputs)
    result = launched(ctx, info, evidence=marker_check(worker, ctx))

    # Besides the declared outputs, every buffer that holds none of them is compared too: an adapter that
    # declares no output (or not all of them) must not make poison mode compare nothing.
    compared = _undeclared_buffers(ctx, info.outputs)

    def poisoned(name: str, spans: list[tuple[int, int]], pattern: int) -> dict[str, Any]:
        kept = len(worker.keep)
        pctx = worker.context(case, marker=BASELINE, poison_spans={name: spans}, poison_marker=pattern)
        pinfo = adapter(case, pctx)
        worker.sync()
        diff = _changed_outputs(baseline, _host_outputs(pinfo.outputs))
        diff.update(_changed_buffers(ctx, pctx, [n for n in compared if n != name]))
        worker.release(kept, current=ctx)     # no sanitizer watches these runs: their addresses may be reused
        return diff

    layouts = {name: buf.layout for name, buf in ctx.arena.buffers.items()}
    order = sorted(ctx.watched) + sorted(set(layouts) - ctx.watched)
    itemsizes = {name: buf.tensor.element_size() for name, buf in ctx.arena.buffers.items()}
    regions, runs = survey(layouts, order, poisoned, itemsizes)
    changed: dict[str, Any] = {}
    for entry in regions:
        changed.setdefault(entry["buffer"], {}).update(entry["outputs"])
    result["evidence"][POISON] = {"patterns": [BASELINE, *PATTERNS], "changed": changed, "regions": regions,
                                  "outputs": sorted(baseline), "compared_buffers": compared, "runs": 1 + runs,
                                  "buffers": order}
    return result


def _host_outputs(outputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v.detach().float().cpu() for k, v in outputs.items()}


def _undeclared_buffers(ctx: Any, outputs: dict[str, Any]) -> list[str]:
    """The case's buffers that hold none of the declared outputs (their bytes are compared as a whole)."""
    def holds(buf: Any) -> bool:
        lo, hi = buf.tensor_addr, buf.tensor_addr + buf.layout.nbytes
        return any(t.device == buf.storage.device and lo <= t.data_ptr() < hi for t in outputs.values())
    return [name for name, buf in ctx.arena.buffers.items() if not holds(buf)]


def _changed_buffers(base: Any, other: Any, names: list[str]) -> dict[str, Any]:
    """Buffers of `names` whose contents differ between two runs, as {"buffer NAME": {"elements", "of"}}."""
    changed = {}
    for name in names:
        a_buf, b_buf = base.arena.buffers.get(name), other.arena.buffers.get(name)
        if a_buf is None or b_buf is None or a_buf.layout != b_buf.layout:
            continue
        x, y = a_buf.float_values(), b_buf.float_values()
        if x is None or y is None:         # not floating point: the bytes, exactly
            x, y = a_buf.body(), b_buf.body()
        diff = _count_changed(x, y)
        if diff:
            changed[f"buffer {name}"] = {"elements": diff, "of": x.numel()}
    return changed


def _count_changed(x: Any, y: Any) -> int:
    """Elements that differ between two runs: floats beyond isclose's tolerance (NaN equals NaN), others exactly."""
    import torch
    same = torch.isclose(x, y, equal_nan=True) if x.dtype.is_floating_point else x == y
    return int((~same).sum())


def _changed_outputs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    import torch
    changed = {}
    for name in a:
        x, y = a[name], b[name]
        diff = _count_changed(x, y)
        if diff:
            changed[name] = {"elements": diff, "of": x.numel(),
                             "nan_b": int(torch.isnan(y).sum()), "nan_a": int(torch.isnan(x).sum())}
    return changed
