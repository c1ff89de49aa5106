"""Uninit mode, the worker side: run a case with every byte the host does not write in two fill patterns.

Why: a kernel that accumulates into a `torch.empty` output, or a launch grid one block short, corrupts results
silently; no guard, sanitizer placement or poison sees it, because nothing goes out of bounds. Every guarded
buffer's tensor bytes start as a fill value (the arena writes it, then the adapter writes what it means to);
guards and row padding keep the 0xA5 marker in every run. Then:

1. run A with fill 0xA5 (the same bytes as a guard-mode run), run B with fill 0x5A (every bit flipped);
2. an element whose every byte holds 0xA5 after A and 0x5A after B was written by nobody, or copied from bytes
   nobody wrote. Where that is inside a declared output (`RunInfo.outputs`), one more run with only those outputs
   in fill 0x5A tells them apart: bytes that hold their own buffer's fill were never written (unwritten output
   bytes); bytes that now hold 0xA5 came from another buffer's never-written bytes, and are judged like step 3
   (a lookup into a table the host filled in part names the table);
3. any other byte, or output element, that differs between A and B depends on bytes nobody wrote. Only then:
   run A again (C) to set aside bytes that differ between two runs of the same fill (atomics, races: not
   judged, counted), and one run per buffer with only that buffer's fill changed; a buffer whose fill change
   changes anything besides its own never-written bytes is one the kernel read before anyone wrote it.
   Run-to-run noise is not only where C happened to differ from A: a float sum whose atomics land in another
   order rounds differently, in other elements, on every run. So in a floating-point buffer or output where C
   differs from A, a difference counts only beyond NOISE_FACTOR times the largest difference between A and C
   (the two fills are 32 orders of magnitude apart as fp32: a value that read them moves far more than a
   rounding does); elsewhere bytes are compared exactly, minus those that differed between A and C.

4. for a buffer read that way, which of its bytes were read: runs with fill B in parts of it only (_read_bytes;
   at most READ_REFINE_RUNS), since the bytes that held the fill at the end are neither all nor only the ones read.

Where run B changed nothing, one run per EXTRA_FILLS value (0x00, 0xFA, 0xFF) until one changes something, which then
takes B's place in steps 3 and 4 (a read whose result is the same for 0xA5 and 0x5A: a bool, a range-checked index,
a running min over negative values).

A clean case costs five runs (six with the scrambled markers); one more when an output holds the fill; a case with a read of never-written
memory 3 + (number of buffers) + the search. Everything is
compared on the case's device; only runs of byte offsets come back. Run A's arena stays alive (the worker
keeps it: its buffer map is the case's); each other run's buffers are given back once compared. What comes back is plain JSON under "uninit"; harness/gpu_memsafety/detectors/uninit.py
(pure) turns it into findings.

What it cannot see: a read of never-written bytes whose value does not reach any result (masked, multiplied
by 0, or the same for both fills), and bytes of buffers the adapter did not allocate through the context.
Output bytes are the span from an output tensor's first to its last element; bytes inside it that are row
padding keep their marker and are never counted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from gpu_memsafety.detectors.bisection import bound
from gpu_memsafety.detectors.uninit import NOISE_FACTOR
from gpu_memsafety.model import UNINIT
from gpu_memsafety.placement.guard import _runs_from_sorted

# 0xA5 is the guard marker, so run A is a guard-mode run; 0x5A flips every bit. As fp32 and bf16 they are
# about -2.9e-16 and +1.5e16, as int32 -1.5e9 and +1.5e9, as fp8 e4m3 -0.2 and 20: a result computed from
# them differs between the runs almost whatever the arithmetic.
FILLS = (0xA5, 0x5A)
# Second fills tried, in order, when run B changed nothing: a read whose result is the same for 0xA5 and 0x5A. Both
# are non-zero (a bool reads true), both large out of range as an index (a range-checked slot is skipped either way),
# and as fp32 both sit above every log-prob (a running min keeps the real value). 0x00: zero, false, index 0
# (held-out round 8: hv_e, presence flags the host wrote only for live requests; hv_f, slot_mapping padding never
# written, range-checked). 0xFA: a large negative value (hv_h, a running min over log-probs never reset). 0xFF: NaN
# as fp32, bf16 and E8M0 (held-out hw_f: an epilogue `out = out * add + acc` with add = 0.0 on a never-written
# output; every finite fill times 0 is 0, a stale NaN is not). A clean case pays these three runs; a case whose run
# B changed something, none.
EXTRA_FILLS = (0x00, 0xFA, 0xFF)
# Runs the search for the bytes a kernel read before anyone wrote them may take, per buffer (_read_bytes). Only a case
# with such a read pays it; past it, what is left is kept whole (a bound).
READ_REFINE_RUNS = 512


@dataclass
class _Run:
    ctx: Any
    info: Any

    def body(self, name: str) -> torch.Tensor:
        return self.ctx.arena.buffers[name].body()

    def output(self, name: str) -> torch.Tensor:
        return _as_bytes(self.info.outputs[name])


def _launch(worker: Any, adapter: Any, case: Any, *, fill: int, fill_for: dict[str, int] | None = None,
            fill_spans: dict[str, list[tuple[int, int]]] | None = None, span_fill: int = FILLS[1]) -> _Run:
    from gpu_memsafety.placement.guard import Paint
    ctx = worker.context(case, paint=Paint(fill=fill, fill_for=dict(fill_for or {}), fill_spans=dict(fill_spans or {}),
                                           span_fill=span_fill))
    info = adapter(case, ctx)
    worker.sync()
    return _Run(ctx, info)


def _release(worker: Any, run: _Run) -> None:
    """Give a finished comparison run's buffers back: only run A's arena must live to the end (its buffer map
    is the case's). No sanitizer runs in this mode, so a reused address misleads nobody."""
    if run.ctx.arena in worker.keep:
        worker.keep.remove(run.ctx.arena)
    run.ctx = run.info = None


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    """[numel, itemsize] uint8 view of a tensor's values (a copy when it is not contiguous)."""
    flat = t.detach().reshape(-1).contiguous()
    return flat.view(torch.uint8).reshape(flat.numel(), -1)


def _runs(mask: torch.Tensor) -> list[list[int]]:
    return [[s, e] for s, e in _runs_from_sorted(torch.nonzero(mask.reshape(-1)).flatten(), 0)]


def _output_spans(run: _Run) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Per arena buffer, a mask of its bytes that some declared output covers; and the outputs that are not
    inside any arena buffer (compared value by value)."""
    masks: dict[str, torch.Tensor] = {}
    external: list[str] = []
    for key, t in run.info.outputs.items():
        hit = run.ctx.arena.owner(t)
        if hit is None:
            external.append(key)
            continue
        name, start, end = hit
        mask = masks.setdefault(name, torch.zeros(run.body(name).numel(), dtype=torch.bool, device=t.device))
        mask[start:end] = True
    return masks, external


def _whole_elements(run: _Run, name: str, mask: torch.Tensor, *, any_byte: bool = False) -> torch.Tensor:
    """Bytes of elements whose every byte (any_byte: any byte) is in the mask. A written float whose low
    bytes happen to equal the fill is written, not unwritten; a float that changed from run to run is noise
    in all its bytes, also the ones that happened to come out the same."""
    size = run.ctx.arena.buffers[name].tensor.element_size()
    if size == 1 or mask.numel() % size:
        return mask
    rows = mask.view(-1, size)
    hit = rows.any(dim=1, keepdim=True) if any_byte else rows.all(dim=1, keepdim=True)
    return hit.expand(-1, size).reshape(-1)


def _changed_elements(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x != y).any(dim=1)


def _values(run: _Run, name: str) -> torch.Tensor | None:
    """A buffer's bytes as fp32 values when its dtype is floating point (None: compare bytes exactly)."""
    return run.ctx.arena.buffers[name].float_values()


def _out_values(run: _Run, key: str) -> torch.Tensor | None:
    t = run.info.outputs[key]
    return t.detach().reshape(-1).float() if t.dtype.is_floating_point else None


def _far(x: torch.Tensor, y: torch.Tensor, tol: float) -> torch.Tensor:
    """Elements that differ by more than tol (a NaN on one side only, or an infinite difference, always does)."""
    same = (x == y) | (torch.isnan(x) & torch.isnan(y))
    return ~same & ~((x - y).abs() <= tol)


def _noise_scale(x: torch.Tensor | None, y: torch.Tensor | None) -> float | None:
    """The largest difference between two runs of the same fill, for floating-point values that differ at all
    (inf when a difference is not finite); None where there is nothing to scale by (bytes, or no noise)."""
    if x is None or y is None:
        return None
    differ = _far(x, y, 0.0)
    if not bool(differ.any()):
        return None
    d = (x - y).abs()[differ]
    return float(d.max()) if bool(torch.isfinite(d).all()) else math.inf


def _beyond(x: torch.Tensor, y: torch.Tensor, scale: float, itemsize: int = 1) -> torch.Tensor:
    """Elements (as a byte mask when itemsize > 1) whose difference exceeds NOISE_FACTOR x the noise scale."""
    far = _far(x, y, NOISE_FACTOR * scale)
    return far.repeat_interleave(itemsize) if itemsize > 1 else far


def run(worker: Any, adapter: Any, case: Any) -> dict[str, Any]:
    fill_a, fill_b = FILLS
    a = _launch(worker, adapter, case, fill=fill_a)
    b = _launch(worker, adapter, case, fill=fill_b)
    names = list(a.ctx.arena.buffers)
    out_masks, external = _output_spans(a)
    never, changed, ext_changed = _compare(a, b, fill_b, names, external)
    report: dict[str, Any] = {
        "fills": list(FILLS), "runs": 2, "outputs": sorted(a.info.outputs), "external_outputs": sorted(external),
        "unwritten": {}, "read": {}, "nondeterministic": {}, "unexplained": {},
    }
    unwritten = {n: never[n] & m for n, m in out_masks.items()}
    copied = _copied_fill(worker, adapter, case, a, unwritten, report)
    for n, m in copied.items():
        unwritten[n] &= ~m
        changed[n] |= m            # depends on bytes nobody wrote: the per-buffer runs below name whose
    report["unwritten"] = {n: r for n, m in unwritten.items() if (r := _runs(m))}
    if not _any(changed, ext_changed):
        other = _other_fills(worker, adapter, case, a, names, external, report)
        if other is not None:
            _release(worker, b)
            b, fill_b, changed, ext_changed = other
    if _any(changed, ext_changed):
        _attribute(worker, adapter, case, a, b, report, changed, ext_changed, external, fill_b)
    _release(worker, b)
    from gpu_memsafety.detectors.launch import launched, marker_check
    guard = _scrambled_markers(worker, adapter, case, marker_check(worker, a.ctx), report)
    return launched(a.ctx, a.info, evidence={**guard, UNINIT: report})


def _compare(a: _Run, other: _Run, fill: int, names: list[str], external: list[str]) -> tuple[
        dict[str, torch.Tensor], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Run A against a run with fill `fill`: per buffer, the bytes written by nobody (A's fill after A, this one's
    after it, in whole elements) and the other bytes that differ; per output outside the arena, the elements that
    differ."""
    never = {n: _whole_elements(a, n, (a.body(n) == FILLS[0]) & (other.body(n) == fill)) for n in names}
    changed = {n: (a.body(n) != other.body(n)) & ~never[n] for n in names}
    return never, changed, {k: _changed_elements(a.output(k), other.output(k)) for k in external}


def _any(*masks: dict[str, torch.Tensor]) -> bool:
    return any(bool(m.any()) for group in masks for m in group.values())


def _other_fills(worker: Any, adapter: Any, case: Any, a: _Run, names: list[str], external: list[str],
                 report: dict[str, Any]) -> tuple[_Run, int, dict[str, torch.Tensor], dict[str, torch.Tensor]] | None:
    """Run B changed nothing: one run per EXTRA_FILLS value until one changes something. Returns that run, its
    fill and what changed, to take B's place; None when none did."""
    for fill in EXTRA_FILLS:
        e = _launch(worker, adapter, case, fill=fill)
        report["runs"] += 1
        report.setdefault("extra_fills", []).append(fill)
        _, changed, ext_changed = _compare(a, e, fill, names, external)
        if _any(changed, ext_changed):
            report["read_fill"] = fill     # "fills" stay A's and B's: the unwritten output bytes held those
            return e, fill, changed, ext_changed
        _release(worker, e)
    return None


def _scrambled_markers(worker: Any, adapter: Any, case: Any, checked: dict[str, Any],
                       report: dict[str, Any]) -> dict[str, Any]:
    """The guard evidence of run A, completed by one more run whose every marker byte holds a scrambled value
    (placement.guard.scramble_bytes: per buffer and position, 0x00..0x7F); its changed bytes are added to A's.
    A uniform marker misses what leaves it as it was:
    - a byte written with the marker's own value (held-out hr_a: bf16 values 0xA5A5 stored past the end, 4 of 16 B
      seen): scrambled bytes are never 0xA5;
    - bytes copied from one marker position to another (held-out hv_c: KV blocks copied by their padded stride,
      padding onto padding) or from another buffer's markers (ht_a): scrambled bytes differ by position and buffer;
    - an atomic min onto the marker (held-out hv_g: 0xA5 words are negative, and stay the min): scrambled words are
      positive.
    One run per case, whatever run A saw. Where it sees bytes run A did not, they may be copies of marker bytes, and
    a copied byte equals the scrambled value it replaced 1 time in 128 (held-out hv_c: 254 of 256 B): a second run,
    scrambled with another salt, fills those holes. Nothing when this mode does not check markers."""
    from gpu_memsafety.detectors.guard import merge
    from gpu_memsafety.model import GUARD
    found = checked.get(GUARD)
    if found is None:
        return checked
    seen = {}
    for variant in (1, 2):
        from gpu_memsafety.placement.guard import Paint
        ctx = worker.context(case, paint=Paint(scramble=variant))
        info = adapter(case, ctx)
        worker.sync()
        seen[variant] = {name: [r.__dict__ for r in runs] for name, runs in ctx.arena.scrambled_changes().items()}
        _release(worker, _Run(ctx, info))
        report["runs"] += 1
        if _nbytes(merge(found, seen[variant])) == _nbytes(found):
            break              # nothing run A did not see: no byte copied from the markers, no hole to fill
    report["scrambled_markers"] = {name: sum(r["end"] - r["start"] for r in runs)
                                   for name, runs in (merge(*seen.values()) or {}).items() if runs}
    return {GUARD: merge(found, *seen.values())}


def _nbytes(guard: dict[str, list[dict[str, Any]]] | None) -> int:
    return sum(r["end"] - r["start"] for runs in (guard or {}).values() for r in runs)


def _copied_fill(worker: Any, adapter: Any, case: Any, a: _Run, unwritten: dict[str, torch.Tensor],
                 report: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Output bytes that held the fill in both runs were never written, or were written with bytes copied from
    memory nobody wrote (a lookup into a table the host filled only in part). One more run tells them apart: only
    those outputs get fill B; a byte that still holds its own buffer's fill was never written, one that holds fill
    A now came from another buffer. Returns the copied bytes per output buffer (none: no extra run)."""
    fill_a, fill_b = FILLS
    holding = [n for n, m in unwritten.items() if bool(m.any())]
    if not holding:
        return {}
    d = _launch(worker, adapter, case, fill=fill_a, fill_for={n: fill_b for n in holding})
    report["runs"] += 1
    copied = {}
    for n in holding:
        own = _whole_elements(a, n, d.body(n) == fill_b)
        moved = unwritten[n] & ~own
        if bool(moved.any()):
            copied[n] = moved
    _release(worker, d)
    if copied:
        report["copied"] = {n: _runs(m) for n, m in copied.items()}
    return copied


def _attribute(worker: Any, adapter: Any, case: Any, a: _Run, b: _Run, report: dict[str, Any],
               changed: dict[str, torch.Tensor], ext_changed: dict[str, torch.Tensor], external: list[str],
               fill_b: int = FILLS[1]) -> None:
    """Set aside run-to-run noise (a second run of fill A), then find the buffers whose fill (`fill_b`, B's) is
    read."""
    fill_a = FILLS[0]
    c = _launch(worker, adapter, case, fill=fill_a)
    report["runs"] += 1
    noise = {n: _whole_elements(a, n, a.body(n) != c.body(n), any_byte=True) for n in changed}
    noise.update({f"output:{k}": _changed_elements(a.output(k), c.output(k)) for k in external})
    scale = {n: _noise_scale(_values(a, n), _values(c, n)) for n in changed}
    scale.update({f"output:{k}": _noise_scale(_out_values(a, k), _out_values(c, k)) for k in external})
    _release(worker, c)
    report["nondeterministic"] = {k: int(m.sum()) for k, m in noise.items() if bool(m.any())}
    report["noise_scale"] = {k: (v if math.isfinite(v) else "unbounded") for k, v in scale.items() if v is not None}
    diff = _Diff(a, noise, scale)
    stable = {n: m & diff.buffer(b, n, m) for n, m in changed.items()}
    stable_ext = {k: m & diff.output(b, k, m) for k, m in ext_changed.items()}
    if not any(bool(m.any()) for m in [*stable.values(), *stable_ext.values()]):
        return
    for name in changed:
        d = _launch(worker, adapter, case, fill=fill_a, fill_for={name: fill_b})
        report["runs"] += 1
        effects = _effects(a, d, name, diff, external, fill_b)
        if effects:
            own = diff.buffer(d, name, a.body(name) != d.body(name))
            report["read"][name] = {"ranges": _runs(own), "effects": effects}
        _release(worker, d)
        if effects:
            report["read"][name].update(_read_bytes(worker, adapter, case, a, diff, external, name, own, report, fill_b))
    if not report["read"]:
        report["unexplained"] = {
            **{n: {"bytes": int(m.sum()), "ranges": _runs(m)} for n, m in stable.items() if bool(m.any())},
            **{f"output:{k}": {"elements": int(m.sum()), "of": int(m.numel())} for k, m in stable_ext.items() if bool(m.any())}}


def _read_bytes(worker: Any, adapter: Any, case: Any, a: _Run, diff: "_Diff", external: list[str], name: str,
                own: torch.Tensor, report: dict[str, Any], fill_b: int = FILLS[1]) -> dict[str, Any]:
    """Which of `name`'s bytes the kernel read before anyone wrote them, searched (detectors.bisection) by runs with
    fill B in some spans of `name` only: a result that changes (_effects) says a byte read is among them.

    The bytes whose value followed the fill at the end (`own`) are where to look first, but not the only place: a
    byte read before a later launch wrote it (held-out hs_f: decode attention run before the K/V write of the
    current token) ends written, and the never-written bytes at the end may be ones nobody read. So the rest of the
    buffer is tried once: if its fill changes nothing, the bytes read are among `own`, else the search covers the
    whole buffer. Returns the ranges found, whether they are a bound (not `own` exactly, or found past `own`), and
    `written_later` when some were overwritten after they were read."""
    size = a.ctx.arena.buffers[name].tensor.element_size()
    nbytes = int(own.numel())
    spans = [(int(lo), int(hi)) for lo, hi in _runs(own)]

    def changes(part: list[tuple[int, int]]) -> bool:
        # whole elements only: an element with bytes of both fills is neither fill, and would read as a result
        whole = [(lo // size * size, min(nbytes, -(-hi // size) * size)) for lo, hi in part]
        d = _launch(worker, adapter, case, fill=FILLS[0], fill_spans={name: whole}, span_fill=fill_b)
        report["runs"] += 1
        hit = bool(_effects(a, d, name, diff, external, fill_b))
        _release(worker, d)
        return hit

    rest = [(int(lo), int(hi)) for lo, hi in _runs(~own)]
    later = bool(rest) and changes(rest)
    found = bound(changes, [(0, nbytes)] if later or not spans else spans, size, READ_REFINE_RUNS, deep=True)
    return {"ranges": [list(r) for r in found], "bounded": later or found != spans, "written_later": later}


@dataclass
class _Diff:
    """What counts as a difference from run A: bytes that changed, minus A-vs-C noise; for floating-point values
    with run-to-run noise, only differences beyond NOISE_FACTOR x its scale (one place for the rule)."""

    a: _Run
    noise: dict[str, torch.Tensor]
    scale: dict[str, float | None]

    def buffer(self, other: _Run, name: str, changed: torch.Tensor) -> torch.Tensor:
        scale = self.scale.get(name)
        if scale is None:
            return changed & ~self.noise[name]
        size = self.a.ctx.arena.buffers[name].tensor.element_size()
        return changed & _beyond(_values(self.a, name), _values(other, name), scale, size)

    def output(self, other: _Run, key: str, changed: torch.Tensor) -> torch.Tensor:
        scale = self.scale.get(f"output:{key}")
        if scale is None:
            return changed & ~self.noise[f"output:{key}"]
        return changed & _beyond(_out_values(self.a, key), _out_values(other, key), scale)


def _effects(a: _Run, d: _Run, name: str, diff: _Diff, external: list[str], fill_b: int = FILLS[1]) -> dict[str, Any]:
    """What changed when only `name`'s fill changed (to `fill_b`), besides `name`'s own never-written bytes."""
    fill_a = FILLS[0]
    effects: dict[str, Any] = {}
    for other in diff.noise:
        if other.startswith("output:"):
            continue
        changed = diff.buffer(d, other, a.body(other) != d.body(other))
        if other == name:
            changed &= ~_whole_elements(a, name, (a.body(name) == fill_a) & (d.body(name) == fill_b))
        if bool(changed.any()):
            effects[other] = {"bytes": int(changed.sum()), "ranges": _runs(changed)}
    for key in external:
        changed = diff.output(d, key, _changed_elements(a.output(key), d.output(key)))
        if bool(changed.any()):
            effects[f"output:{key}"] = {"elements": int(changed.sum()), "of": int(changed.numel())}
    return effects
