"""Poison mode's plan and findings (pure: no torch; the worker runs the kernel, this decides what to poison).

A baseline run has every marker byte in one pattern. Then, for every buffer (watched ones first: `watch=` is
an order, not a precondition) and every region of its marker bytes (before_start: the front guard;
past_end: the back guard; row_padding; unused_row), one run poisons only that region in the poison pattern,
and, only when that changed nothing, one more run in the next poison pattern: the first (0xFF) is NaN in
every float format, which survives multiplication by zero but which a max, a min or a comparison drops; the
second (0x7B) is a large finite positive value (1.3e36 as fp32/bf16, 6.1e4 as fp16, 352 as e4m3), which a max
picks; the third (0xFA) a large negative value with its lowest bit clear (-6.5e35 as fp32/bf16, -5.7e4 as fp16,
-320 as e4m3, -84,215,046 as int32), which lets the real values win a max where the baseline's small negative
0xA5 (fp16 -0.022) already did (held-out ht_h: an argmax over all-negative log-probs that reads the row padding),
and whose bit 0 differs from the three others' (held-out ht_b: a grammar bitmask word read past the end, whose
bit 0 alone reaches the logits). A clean region costs three runs.
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

from gpu_memsafety.detectors.base import Earlier, Evidence, Leave, Unit, wild_accesses
from gpu_memsafety.detectors.bisection import (  # noqa: F401  (first_changing, gaps...: poison's bisection, tested here)
    GAP_CHUNKS, REFINE_BUDGET, Span, bound, columns, first_changing, gaps, last_changing)
from gpu_memsafety.model import BEFORE_START, MEMCHECK, OVERREAD, PAST_END, POISON, TRACE, ByteRange, DetectorRun, Finding
from gpu_memsafety.placement import layout as L

# run(buffer, spans, pattern) -> {output: {"elements": ..., "of": ...}} for the outputs that changed ({} if none),
# when the spans of that buffer hold `pattern` and every other marker byte the baseline's.
Run = Callable[[str, list[Span], int], Mapping[str, Any]]
# Poison patterns in the order they are tried on a region (the baseline's marker is 0xA5): see the docstring.
# 0x00 last among the uniform ones: the one value a bool, a `!= 0` test or an index range check that only small
# values pass keys on (held-out round 8: hv_a, a bool flag read past the end, true under every other pattern;
# hv_b, padded token ids read through the row stride, skipped by `0 <= tok < vocab` under every other pattern).
PATTERNS = (0xFF, 0x7B, 0xFA, 0x00)
# A last pattern, tried when the uniform ones changed nothing: byte k of the tensor is (37 k + 11) mod 256, so
# neighbouring elements differ. A uniform region gives an argmax, or an equality between the bytes read, the same
# answer whatever its value (held-out hr_b: greedy argmax over the unused rows of a max-batch logits buffer; hv_d, a
# repeat check comparing token ids read past the end with each other); a ramp does not. Not a byte value: the arena
# writes the ramp (placement.guard.ramp_bytes). In guards too: where memcheck watched a buffer's ends, its guards are
# left to memcheck (`left_to_memcheck`), so this costs a run only where poison is the one detector looking.
RAMP = L.POISON_RAMP
# What every region is tried with, in order, until one changes an output.
TRIED = (*PATTERNS, RAMP)
# The baseline's marker, then the patterns: 0xA5 as E8M0 is 2^38 and as fp32 a tiny number; 0xFF is NaN as E8M0,
# as fp32 and as bf16; 0x7B a large finite positive number; 0xFA a large finite negative one, bit 0 clear; 0x00
# zero, false, index 0.
BASELINE = 0xA5
ACTION = "poison"
# A buffer's guards: the regions memcheck sees when the buffer is covered (its own allocation, exact).
OUTSIDE = (BEFORE_START, PAST_END)


class PoisonDetector(Unit):
    name = POISON
    sanitizer = None
    placement = L.GUARDED
    needs_cover = needs_gpu = False
    action = ACTION
    action_at = f"{__name__}:run"
    deadline_factor = 2.0       # one launch per buffer and region, at least two
    explains_fault = ends_process = False
    sees = (OVERREAD,)
    keeps_evidence = True       # the survey's regions and runs, in the case's details

    def void(self, ev: Evidence) -> str:
        """Its results varied between identical runs with nothing poisoned (unstable_regions), and the case is
        expected to read or write memory that is no buffer of ours (an UNATTRIBUTED expectation: triton#8327's
        scratchpad), which does exactly that: what such an access meets depends on where the allocator put things
        in each run. Poison cannot see through it; the other detectors' evidence stands, and memcheck places the
        access."""
        unstable = unstable_regions(ev.of(POISON))
        if not unstable:
            return ""
        try:
            wild = wild_accesses(ev.scenario.expectation(ev.case, ev.result.arch))
        except Exception:   # noqa: BLE001 - a scenario's expect is user code: the verdict reports what it raises
            return ""
        if not wild:
            return ""
        return (f"not applicable here: {unstable}; this case is expected to make such a change "
                f"({wild}: it reaches memory outside every buffer of the case), so "
                f"poison cannot tell an overread from it (memcheck places the access: mode complete or memcheck)")

    def distrust(self, ev: Evidence) -> str:
        """Results that varied between identical runs, or a survey that compared nothing known to be the kernel's
        result (a host-side refusal launches nothing by design: there is no result to compare)."""
        report = ev.of(POISON)
        return unstable_regions(report) or (nothing_compared(report) if not ev.result.notes.get("refused") else "")

    def left_out(self, earlier: Earlier) -> Leave | None:
        """Nothing left to see after memcheck (it watched both ends of every buffer, none has row padding or unused
        rows, and none of its overread counts needs checking), or after the interpreter's trace (it checked every
        access of the case's Triton launches to the byte, whatever the value read: trace_covers)."""
        if (earlier.watched is not None and MEMCHECK in earlier.scenario.detectors
                and not left_after_memcheck(earlier.watched) and not self.recount(earlier)):
            return Leave("not run: memcheck watched both ends of every buffer of the case and none has row padding or "
                         "unused rows, so poison had nothing memcheck did not see")
        launches = earlier.checked.get(TRACE, 0)
        if launches and trace_covers(earlier):
            return Leave(f"not run: the interpreter's trace checked every access of the case's {launches} Triton "
                         "launch(es) to the byte, whatever the value read, so poison had nothing the trace did not see",
                         alone=True)
        return None

    def recount(self, earlier: Earlier) -> tuple[str, ...]:
        """The buffers past whose ends memcheck saw an overread that no expectation of the case accepts: a bug the
        scenario does not know (a user's own kernel, a held-out one), whose byte count is all the report says of it.
        Poison surveys their guards; where its bound holds a byte memcheck's ranges do not, memcheck's count is at
        least (memcheck.undercounts). An expected finding is left as it is: its expectation already judges its
        count (the last-expert scale reads, where a poison survey of a gpt-oss shape would cost seconds)."""
        if not any(f.detector == MEMCHECK for f in earlier.findings):
            return ()
        expected = earlier.expected() or ()
        out: list[str] = []
        for f in earlier.findings:
            if f.detector != MEMCHECK or f.kind != OVERREAD or f.region not in OUTSIDE or f.buffer in out:
                continue
            if any(e.matches(f) for e in expected):
                continue
            out.append(f.buffer)
        return tuple(out)

    def ran(self, ev: Evidence) -> DetectorRun:
        report = ev.of(POISON)
        if report is None:
            return DetectorRun(POISON, False, "not run")
        left = report.get("left_to_memcheck")
        words = f"; the guards of {', '.join(left)} left to memcheck, which watched their ends" if left else ""
        blind = nothing_compared(report) if not ev.result.notes.get("refused") else ""
        if blind:
            return DetectorRun(POISON, True, f"{report.get('runs', 0)} runs, {blind}{words}")
        return DetectorRun(POISON, True, f"{len(TRIED)} patterns compared, "
                                         f"{report.get('runs', 0)} runs{words}")

    def findings(self, ev: Evidence) -> list[Finding]:
        return overread_findings(ev.of(POISON), kernel=ev.result.kernel, arch=ev.result.arch)


DETECTOR = PoisonDetector()
# Seconds one region may spend on bounding its bytes, counted in runs of the case's own baseline (a gpt-oss shape's
# adapter call takes a second or two), never fewer runs than bisecting a default 1 KiB guard to the byte takes:
# its cost stays bounded, and what is left unrefined stays whole, a bound, never a byte dropped.
REFINE_SECONDS = 8.0
MIN_REFINE_RUNS = 24
# A run this long or longer is not refined at all where no expectation asks for the bytes (see refine_budget).
COSTLY_RUN_S = 0.25


def left_after_memcheck(buffers: Sequence[Mapping[str, Any]]) -> list[str]:
    """The buffers of a buffer map (the worker's, from a memcheck run) where poison still has something to see
    after memcheck: marker bytes inside the tensor (row padding, unused rows), or guards memcheck did not watch
    (a buffer that was not covered, placed with its guards). [] when memcheck saw past both ends of every buffer
    and none has rows: a poison survey would only repeat memcheck."""
    left = []
    for record in buffers:
        lay = L.GuardLayout.from_json(record["layout"])
        inside = any(0 <= lo < lay.nbytes for lo, _, _ in lay.marker_spans())
        if inside or lay.placement == L.GUARDED:
            left.append(str(record["name"]))
    return left


def refine_budget(baseline_s: float, expected: Sequence[Any] = (), buffer: str | None = None) -> int:
    """Refinement runs per region for a case whose baseline run took `baseline_s` seconds.

    Where an expected poison finding on this buffer names its bytes (`expected`: the case's ExpectedFindings), the
    verdict holds the bound's bytes against them: the full REFINE_BUDGET, whatever the run took, so that the verdict
    never follows the machine's load (run 40: a Triton case whose baseline run was slow under load got 24 runs, was
    bounded to 232 B instead of its 216 B and failed in one run of two). Such expectations sit on small calibration
    kernels; a bisection stops as soon as it is done, so the budget is a cap, not a cost.
    Elsewhere the bound's bytes judge nothing (a finding no expectation names fails whatever its size; its identity
    leaves inexact bytes out): seconds per region (REFINE_SECONDS) in runs of this case's own time, and none at all
    for a costly case (COSTLY_RUN_S and longer per run) on a buffer whose every expected poison finding names no
    bytes (the finding then names its whole region, still a bound)."""
    mine = [e for e in expected if e.buffer == buffer and POISON in e.detectors]
    if any(e.ranges is not None or e.bytes is not None for e in mine):
        return REFINE_BUDGET
    if baseline_s >= COSTLY_RUN_S and mine:
        return 0
    return max(MIN_REFINE_RUNS, min(REFINE_BUDGET, int(REFINE_SECONDS / max(baseline_s, 1e-3))))


def survey(layouts: Mapping[str, L.GuardLayout], order: Sequence[str], run: Run,
           itemsizes: Mapping[str, int] | None = None, budget: int | Mapping[str, int] = REFINE_BUDGET,
           patterns: Sequence[int] = TRIED,
           skip: Mapping[str, Sequence[str]] | None = None) -> tuple[list[dict[str, Any]], int]:
    """Every (buffer, region) whose poison changes an output, with the bytes that matter bounded (in the pattern
    that changed it); and how many kernel runs that took (the baseline not counted). `skip`: regions of a buffer
    not to survey (the guards of a buffer whose ends memcheck watched)."""
    found: list[dict[str, Any]] = []
    runs = 0
    for name in order:
        layout = layouts[name]
        for region, spans in layout.region_spans().items():
            if region in (skip or {}).get(name, ()):
                continue
            diff: dict[str, Any] = {}
            for pattern in patterns:
                diff = dict(run(name, spans, pattern))
                runs += 1
                if diff:
                    break
            if not diff:
                continue
            # The same run with nothing poisoned: an output that changes anyway varies between identical runs (a
            # write landing in memory that moves between runs, a race), and no byte of this region is to blame.
            control = dict(run(name, [], pattern))
            runs += 1
            if control:
                found.append({"buffer": name, "region": region, "outputs": diff, "unstable": control,
                              "ranges": [], "pattern": pattern, "bounds": None})
                continue
            calls = [0]

            def changes(part: list[Span], pattern: int = pattern) -> bool:
                calls[0] += 1
                return bool(run(name, part, pattern))
            size = max(1, (itemsizes or {}).get(name, 1))
            pieces = bound(changes, spans, size, budget if isinstance(budget, int) else budget.get(name, REFINE_BUDGET),
                           find_gaps=region in OUTSIDE, rows=region not in OUTSIDE)
            runs += calls[0]
            ranges = [[lo, hi, layout.region_of(lo)] for lo, hi in pieces]
            found.append({"buffer": name, "region": region, "outputs": diff, "ranges": ranges, "pattern": pattern,
                          "bounds": [pieces[0][0], pieces[-1][1]] if pieces else None})
    return found, runs


def overread_findings(poison: Mapping[str, Any] | None, *, kernel: str, arch: str) -> list[Finding]:
    """One overread finding per (buffer, region) whose poison changed an output, its bytes the bounded ranges
    (a report written before ranges were recorded has only `bounds`, or nothing for rows: 0 bytes)."""
    out = []
    for entry in (poison or {}).get("regions") or ():
        if entry.get("unstable"):
            continue                # judged by the rules as not reproducible (unstable_regions), never an overread
        name, region = entry["buffer"], entry["region"]
        changed = "; ".join(f"{k}: {v['elements']} of {v['of']} elements changed" for k, v in entry["outputs"].items())
        ranges = _ranges(entry)
        pattern = entry.get("pattern")
        where = f"only {name}'s {region} bytes changed pattern" + (f" (to {pattern_words(pattern)})" if pattern is not None else "")
        if pattern == RAMP:
            where += (f", after {', '.join(f'{p:#04x}' for p in PATTERNS)} changed nothing: an argmax, or an equality "
                      f"between the bytes read, gives uniform bytes one answer whatever their value")
        elif pattern == PATTERNS[3]:
            where += (f", after {', '.join(f'{p:#04x}' for p in PATTERNS[:3])} changed nothing: a test of zero (a bool "
                      f"flag, a `!= 0`, an index range check that only a small value passes)")
        elif pattern == PATTERNS[2]:
            where += (f", after {PATTERNS[0]:#04x} (NaN) and {PATTERNS[1]:#04x} (large positive) changed nothing: a max "
                      f"that the baseline's bytes already won, or a test of their lowest bit")
        elif pattern is not None and pattern != PATTERNS[0]:
            where += f", after {PATTERNS[0]:#04x} (NaN) changed nothing: a max, min or comparison drops NaN"
        if ranges:
            spans = ", ".join(f"{r.start}..{r.end - 1}" for r in ranges[:4]) + (", ..." if len(ranges) > 4 else "")
            where += f"; the bytes that matter are bounded to {spans} ({sum(r.nbytes for r in ranges)} B)"
        out.append(Finding(detector=POISON, kind=OVERREAD, buffer=name, region=region,
                           bytes=sum(r.nbytes for r in ranges), count=max(1, len(ranges)), kernel=kernel, arch=arch,
                           ranges=ranges, exact=False, note=f"output changed when {where} ({changed})",
                           details=(("access", "read"), ("zone", region))))
    return out


def pattern_words(pattern: int) -> str:
    return "a ramp of bytes, (37 k + 11) mod 256" if pattern == RAMP else f"{pattern:#04x}"


def nothing_compared(poison: Mapping[str, Any] | None) -> str:
    """Why poison's survey compared nothing known to be the kernel's result ("" when it did): no declared output
    (RunInfo.outputs) held an element, and no region's poison changed anything. The context's own buffers are
    compared too, but without a declared output nothing says the result is among them: an adapter whose result sits
    in a tensor the context did not allocate would otherwise be called clean with its result never looked at. A
    survey that found a change did compare something, and its findings stand."""
    if poison is None or any(e for e in poison.get("regions") or ()):
        return ""
    elements = poison.get("output_elements")
    if elements is None:             # a report from before output_elements: its declared outputs' names
        elements = len(poison.get("outputs") or ())
    if elements:
        return ""
    declared = poison.get("outputs") or []
    what = (f"the declared outputs {', '.join(declared)} hold no element" if declared
            else "the adapter declared no output (RunInfo.outputs)")
    return (f"poison compared nothing known to be the kernel's result: {what}, and no poisoned region changed the "
            f"context's buffers ({', '.join(poison.get('compared_buffers') or []) or 'none'}), which need not hold "
            f"it (a result in a tensor the context did not allocate is never seen); declare the kernel's outputs in "
            f"RunInfo.outputs")


def unstable_regions(poison: Mapping[str, Any] | None) -> str:
    """Why poison's evidence cannot be judged ("" when it can): a region whose poison changed an output, where the
    same run with nothing poisoned changed it too."""
    bad = [e for e in (poison or {}).get("regions") or () if e.get("unstable")]
    if not bad:
        return ""
    what = "; ".join(f"{k}: {v['elements']} of {v['of']} elements" for k, v in bad[0]["unstable"].items())
    return (f"poison cannot judge this case: its results differ between identical runs with nothing poisoned "
            f"({what}, first seen surveying {bad[0]['buffer']}'s {bad[0]['region']} bytes; {len(bad)} region(s)). "
            f"A write landing in memory that moves between runs, or a race, can do this; memcheck places stray "
            f"accesses")


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
    import time

    from gpu_memsafety.detectors.launch import launched, marker_check
    from gpu_memsafety.placement.guard import Paint
    ctx = worker.context(case, paint=Paint(marker=BASELINE))
    t0 = time.perf_counter()
    info = adapter(case, ctx)
    worker.sync()
    took = time.perf_counter() - t0
    baseline = _host_outputs(ctx, info.outputs)
    result = launched(ctx, info, evidence=marker_check(worker, ctx))

    # Besides the declared outputs, every buffer that holds none of them is compared too: an adapter that
    # declares no output (or not all of them) must not make poison mode compare nothing.
    compared = _undeclared_buffers(ctx, info.outputs)
    held = _declared_spans(ctx, info.outputs)    # and the bytes of the others that no declared output covers

    def poisoned(name: str, spans: list[tuple[int, int]], pattern: int) -> dict[str, Any]:
        kept = len(worker.keep)
        pctx = worker.context(case, paint=Paint(marker=BASELINE, poison_spans={name: spans}, poison_marker=pattern))
        pinfo = adapter(case, pctx)
        worker.sync()
        diff = _changed_outputs(baseline, _host_outputs(pctx, pinfo.outputs))
        diff.update(_changed_buffers(ctx, pctx, [n for n in compared if n != name]))
        for other, spans in held.items():
            diff.update(_changed_own(ctx, pctx, other, spans))
        if name in compared:
            diff.update(_changed_own(ctx, pctx, name))
        worker.release(kept, current=ctx)     # no sanitizer watches these runs: their addresses may be reused
        return diff

    layouts = {name: buf.layout for name, buf in ctx.arena.buffers.items()}
    order = sorted(ctx.watched) + sorted(set(layouts) - ctx.watched)
    itemsizes = {name: buf.tensor.element_size() for name, buf in ctx.arena.buffers.items()}
    left = {}
    if worker.job.covered_seen and worker.scenario is not None and MEMCHECK in worker.scenario.detectors:
        from gpu_memsafety.cover import covers
        recount = set(worker.entry.recount) if worker.entry is not None else set()
        left = {name: OUTSIDE for name in order if covers(worker.cover, name in ctx.watched) and name not in recount}
    expected = worker.scenario.expectation(case, ctx.arch()).findings if worker.scenario is not None else ()
    budgets = {name: refine_budget(took, expected, name) for name in order}
    regions, runs = survey(layouts, order, poisoned, itemsizes, budget=budgets, skip=left)
    changed: dict[str, Any] = {}
    for entry in regions:
        changed.setdefault(entry["buffer"], {}).update(entry["outputs"])
    result["evidence"][POISON] = {"patterns": [BASELINE, *TRIED], "changed": changed, "regions": regions,
                                  "outputs": sorted(baseline), "compared_buffers": compared, "runs": 1 + runs,
                                  "output_elements": sum(int(v.numel()) for v in baseline.values()),
                                  "buffers": order, "refine_budget": budgets,
                                  **({"left_to_memcheck": sorted(left)} if left else {})}
    return result


def _host_outputs(ctx: Any, outputs: dict[str, Any]) -> dict[str, Any]:
    """The declared outputs' values on the host, for comparison between runs: floating-point ones as fp32, others as
    they are (compared exactly: a cursor of 3,145,023 moved by 4 is within a float tolerance, held-out hw_a; and
    past 2^24 fp32 cannot tell neighbouring integers apart). An output that is a view of an arena buffer with marker
    bytes inside it (a `ctx.rows` buffer handed back whole: its row padding and unused rows) has those elements set
    to 0: they are no result (poisoning them changes them, and that is no overread).
    Always a copy: an output the context did not allocate (a library's persistent workspace, handed back by every
    run) would otherwise be the same tensor in the baseline and in each poisoned run, compared with itself."""
    import torch
    out = {}
    for key, tensor in outputs.items():
        values = tensor.detach()
        values = values.to(torch.float32 if values.dtype.is_floating_point else values.dtype, copy=True)
        markers = _marker_elements(ctx, tensor)
        out[key] = (values.masked_fill(markers, 0) if markers is not None else values).to("cpu", copy=True)
    return out


def _marker_elements(ctx: Any, tensor: Any) -> Any:
    """A bool mask over `tensor`'s elements: those whose first byte is a marker byte (row padding, an unused row)
    of the arena buffer that holds the tensor; None when it lies in no arena buffer, or that buffer has none."""
    import torch
    for buf in ctx.arena.buffers.values():
        lay, lo = buf.layout, buf.tensor_addr
        if tensor.numel() == 0 or tensor.device != buf.storage.device or not lo <= tensor.data_ptr() < lo + lay.nbytes:
            continue
        inside = [(max(s, 0), min(e, lay.nbytes)) for s, e, _ in lay.marker_spans() if e > 0 and s < lay.nbytes]
        if not inside:
            return None
        marker = torch.zeros(lay.nbytes, dtype=torch.bool, device=tensor.device)
        for s, e in inside:
            marker[s:e] = True
        offsets = torch.full(tensor.shape, tensor.data_ptr() - lo, dtype=torch.int64, device=tensor.device)
        for dim, (size, stride) in enumerate(zip(tensor.shape, tensor.stride())):
            shape = [1] * tensor.dim()
            shape[dim] = size
            offsets = offsets + (torch.arange(size, device=tensor.device) * stride * tensor.element_size()).view(shape)
        return marker[offsets.clamp(0, lay.nbytes - 1)]
    return None


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


def _declared_spans(ctx: Any, outputs: dict[str, Any]) -> dict[str, list[tuple[int, int]]]:
    """Per arena buffer that holds declared outputs, the byte spans (tensor-relative) those outputs cover: from each
    one's first to its last element."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for name, start, end in filter(None, map(ctx.arena.owner, outputs.values())):
        spans.setdefault(name, []).append((start, end))
    return spans


def _changed_own(base: Any, other: Any, name: str, declared: Sequence[tuple[int, int]] = ()) -> dict[str, Any]:
    """A buffer's bytes that no comparison of the declared outputs covers: its tensor bytes less its marker bytes
    (row padding, unused rows: poisoned ones among them differ by construction) and less the `declared` spans.
    For the poisoned buffer when it holds no declared output (held-out hw_d: an in-place log-softmax whose max loads
    one element of each row's padding, no output declared: the only buffer that changes is the one poisoned); for
    a buffer that holds declared outputs, the rest of it (held-out hw_b: an RMSNorm over the padded batch returns
    `out[:T]`, and the rows past T that the overread turned to garbage were never compared)."""
    import torch
    a_buf, b_buf = base.arena.buffers.get(name), other.arena.buffers.get(name)
    if a_buf is None or b_buf is None or a_buf.layout != b_buf.layout:
        return {}
    lay = a_buf.layout
    keep = torch.ones(lay.nbytes, dtype=torch.bool, device=a_buf.storage.device)
    for lo, hi in [(lo, hi) for lo, hi, _ in lay.marker_spans()] + list(declared):
        if hi > 0 and lo < lay.nbytes:
            keep[max(lo, 0):min(hi, lay.nbytes)] = False
    if not bool(keep.any()):
        return {}
    x, y = a_buf.float_values(), b_buf.float_values()
    if x is not None:
        whole = keep.view(x.numel(), -1).all(dim=1)          # elements none of whose bytes is a marker byte
        diff, of = _count_changed(x[whole], y[whole]), int(whole.sum())
    else:
        diff, of = int(((a_buf.body() != b_buf.body()) & keep).sum()), int(keep.sum())
    key = f"buffer {name}" + (" (outside its declared outputs)" if declared else "")
    return {key: {"elements": diff, "of": of}} if diff else {}


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


def trace_covers(earlier: Earlier) -> bool:
    """Whether the interpreter's trace, having run on the case (its launches checked), saw all poison could: every
    read of a marker byte by an interpreted Triton kernel, exact, whatever its value (poison's regions are marker
    bytes only). Not where an expectation needs poison and says the trace cannot see it (a read made by a torch
    op: ExpectedFinding.blind), nor where the expectation cannot be read."""
    expected = earlier.expected()
    return expected is not None and not any(POISON in e.detectors and TRACE not in e.detectors for e in expected)
