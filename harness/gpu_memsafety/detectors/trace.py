"""Trace: every address a Triton kernel loads, stores or updates atomically under Triton's interpreter (a run
without a GPU), placed against the arena's buffers. What memcheck does for a GPU run, for Triton kernels on a CPU.

Why. Without a GPU, poison sees an overread only when the bytes read change an output, and the guard markers see
only writes. A read whose value never matters (a mask recomputed after the load, a compare that goes the same way
whatever the byte, held-out hx_f, hw_c, hw_e) was invisible on a CPU. The interpreter computes the address of
every access: each `tl.load` and `tl.store`, block pointers and tensor descriptors included, goes through
InterpreterBuilder's create_masked_load / create_masked_store, atomics through create_atomic_rmw / create_atomic_cas
(triton 3.6, runtime/interpreter.py). While the case's adapter runs, those four are wrapped, and each access its
mask lets through is checked against the arena's allocations.

What counts, exact bytes, each direction its own finding (a read is an overread, a write or an atomic an
overwrite), like memcheck's:
- the bytes of an access that lie in one of the arena's allocations but outside its tensor's logical bytes (a
  guard, row padding, an unused row);
- a stray access: one outside every allocation a kernel can reach, that is outside the arena's allocations, the
  storages of the launch's tensor arguments (a tensor the adapter or a library made with torch.empty: a split-K
  scratchpad, a workspace) and every other live torch storage (a kernel may load a pointer from a tensor of
  pointers). memcheck's out-of-allocation access. It is blamed on the launch's nearest tensor argument within
  memcheck's distances (sanitizer/attribute.NEAR_BYTES past its end, NEAR_BEFORE_BYTES before its start): an
  arena buffer's past_end or before_start at its offset from the tensor; another tensor's as memory that is no
  buffer of the case (`unattributed`), its text naming the argument, its size and the offset; else unattributed
  at its address. Its lanes are masked off before the interpreter touches that memory (a load gets its `other`,
  zero without one; a store or an atomic writes nothing), so a wild access is a finding, not a crash or a
  corrupted heap. Inside an allocation the kernel may reach (another tensor of the adapter, a view's neighbour in
  one buffer) nothing tells a legitimate access from a stray one: not judged.

Where it runs: in the plain launch (`once`) of the modes whose row names it, when the worker runs Triton in the
interpreter. On a GPU there is no interpreter: the detector did not run and is not missing (memcheck and the
markers see those accesses there). CUDA C kernels and torch ops are not traced.
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Iterator

from gpu_memsafety.detectors.base import Evidence, Unit
from gpu_memsafety.job import STRAY_ACCESS
from gpu_memsafety.model import OVERREAD, OVERWRITE, TRACE, UNATTRIBUTED, ByteRange, DetectorRun, Finding
from gpu_memsafety.placement import layout as L
from gpu_memsafety.sanitizer import attribute

READ, WRITE = "read", "write"
NOT_HERE = ("no Triton interpreter in this run (a GPU run: memcheck and the guard markers see these accesses "
            "there)")


class TraceDetector(Unit):
    name = TRACE
    sanitizer = None
    placement = L.GUARDED
    needs_cover = needs_gpu = False
    action = None               # the accesses are recorded during whatever plain launch runs the case
    deadline_factor = 1.0
    explains_fault = ends_process = False
    sees = (OVERREAD, OVERWRITE)
    places_strays = True        # an access outside every allocation is masked off and reported by address
    exact_accesses = True

    def explains(self, message: str) -> str:
        """A run without the trace that the interpreter's fence stopped over stray accesses (StrayAccess, the
        worker's message gpu_memsafety.job.STRAY_ACCESS): the trace judges those accesses, the run nothing."""
        return ("the interpreter's fence stopped the run over stray accesses (below), which the trace judges"
                if message.startswith(STRAY_ACCESS) else "")

    def checked_whole(self, ev: Evidence) -> int:
        """The interpreted launches the trace checked: every access of each, to the byte, whatever its value."""
        got = ev.of(TRACE)
        return int(got.get("launches") or 0) if got else 0

    def ran(self, ev: Evidence) -> DetectorRun:
        got = ev.of(TRACE)
        if got is None:
            return DetectorRun(TRACE, False, NOT_HERE)
        return DetectorRun(TRACE, True, f"{got.get('accesses', 0):,} accesses of {got.get('launches', 0)} interpreted "
                                        "Triton launches checked")

    def findings(self, ev: Evidence) -> list[Finding]:
        """One finding per buffer, direction and region class: exact bytes."""
        got = ev.of(TRACE) or {}
        out: list[Finding] = []
        for direction, kind in ((READ, OVERREAD), (WRITE, OVERWRITE)):
            runs = {name: dirs[direction] for name, dirs in (got.get("outside") or {}).items() if dirs.get(direction)}
            out += attribute.guard_findings(runs, kernel=ev.result.kernel, arch=ev.result.arch, case_id=ev.case.id,
                                            buffers=ev.result.buffers, detector=TRACE, kind=kind, access=direction,
                                            describe=lambda _case_id, name, s, e: ev.describe(name, s, e))
            strays = [ByteRange(UNATTRIBUTED, r["start"], r["end"], r.get("logical", ""))
                      for r in (got.get("strays") or {}).get(direction, [])]
            if strays:
                out.append(Finding(detector=TRACE, kind=kind, buffer=UNATTRIBUTED, region=UNATTRIBUTED,
                                   bytes=sum(r.nbytes for r in strays), count=len(strays), kernel=ev.result.kernel,
                                   arch=ev.result.arch, ranges=tuple(strays), details=(("access", direction),),
                                   note="memory that is no buffer of the case; the interpreter did not touch it"))
        return out


DETECTOR = TraceDetector()


# ------------------------------------------------------------------------------------------ worker side (numpy)

@dataclass(frozen=True)
class Arg:
    """A tensor argument of one interpreted launch: its parameter, its storage's bytes [lo, hi) (the memory a
    kernel may legitimately reach from it), and the arena buffer that storage is ("" for another tensor)."""
    name: str
    lo: int
    hi: int
    buffer: str = ""


class Tracer:
    """Records, while active, the bytes outside logical bytes that interpreted Triton accesses touch in the arena's
    allocations (`arena`: gpu_memsafety.placement.guard.Arena; its buffers may be allocated while it runs), and the
    stray accesses outside every allocation a kernel can reach."""

    OTHER = " not made through the context"     # what a stray's tensor argument is when no arena buffer is it

    def __init__(self, arena: Any) -> None:
        self.arena = arena
        self.accesses = 0
        self.launches = 0
        self._table: list[tuple[str, int, int, int, L.GuardLayout]] = []
        self._seen = -1
        self._bytes: dict[tuple[str, str], list[Any]] = {}
        self._args: list[Arg] = []
        self._live: Any = None                          # (lo, hi) arrays of every live torch storage, per launch
        self._strays: dict[str, dict[tuple[str, int], list[Any]]] = {}   # direction -> (arg, its size) -> offsets
        self._wild: dict[str, list[Any]] = {}           # direction -> addresses near no argument
        self._judging = True                            # strays are judged (every tensor argument on the host)
        self._sites: dict[tuple[str, str], tuple[str, int]] = {}   # (buffer, direction) -> the first such access's
                                                                    # kernel line ("" for strays near no buffer)
        self.kernel = ""                                # the launch in progress (its Triton function's name)
        self.races: Any = None                          # detectors/trace_race.Races, where the mode runs that check

    def begin(self, args: list[tuple[str, Any]]) -> None:
        """A launch starts: its tensor arguments (parameter name, value as passed: a tensor, a TensorDescriptor,
        a tuple of them)."""
        self._live, self._judging = None, True
        found: list[Arg] = []
        for name, value in args:
            for tensor in tensors_of(value):
                if getattr(tensor, "device", None) is not None and tensor.device.type != "cpu":
                    self._judging = False       # the interpreter works on host copies: no address is the arena's
                try:
                    storage = tensor.untyped_storage()
                    lo, size = int(storage.data_ptr()), int(storage.nbytes())
                except (AttributeError, RuntimeError, TypeError):
                    continue
                owner = next((b for b, base, alloc, _t, _l in self._buffers() if base <= lo < base + alloc), "")
                found.append(Arg(name, lo, lo + size, owner))
        self._args = found
        if self.races is not None:
            self.races.begin(self.kernel, found, self.arena)

    def end(self) -> None:
        if self.races is not None:
            self.races.end()
        self._args, self._live, self._judging = [], None, True

    def _buffers(self) -> list[tuple[str, int, int, int, L.GuardLayout]]:
        if len(self.arena.buffers) != self._seen:       # buffers are only ever added during a case
            self._table = [(b.name, b.alloc_base, b.alloc_size, b.tensor_addr, b.layout)
                           for b in self.arena.buffers.values()]
            self._seen = len(self.arena.buffers)
        return self._table

    def record(self, direction: str, addrs: Any, mask: Any, size: int) -> Any:
        """Check one access's addresses (`mask`: the lanes that access; None: all). Returns None, or where some
        lanes are stray, a boolean array of the addresses' shape marking them (the caller masks them off)."""
        import numpy as np
        full = np.asarray(addrs).astype(np.uint64, copy=False)
        lanes = None if mask is None else np.broadcast_to(np.asarray(mask).astype(bool), full.shape)
        a = (full if lanes is None else full[lanes]).ravel()
        self.accesses += int(a.size)
        if not a.size:
            return None
        ours = np.zeros(a.shape, dtype=bool)
        for name, base, alloc, tensor, lay in self._buffers():
            inside = (a >= base) & (a < base + alloc)
            if not inside.any():
                continue
            ours |= inside
            # every byte of every element touched, relative to the tensor's first byte
            off = (a[inside].astype(np.int64) - tensor)[:, None] + np.arange(max(size, 1), dtype=np.int64)[None, :]
            off = np.unique(off.ravel())
            outside = _outside(off, lay)
            if outside.size:
                self._bytes.setdefault((name, direction), []).append(outside)
                self._site(name, direction)
        if ours.all() or not self._judging:
            return None
        stray = ~ours
        stray[stray] = ~self._reachable(a[stray])
        if not stray.any():
            return None
        self._stray(direction, a[stray], max(size, 1))
        self._site("", direction)
        if lanes is None:
            return stray.reshape(full.shape)
        out = np.zeros(full.shape, dtype=bool)
        out[lanes] = stray
        return out

    def _site(self, name: str, direction: str) -> None:
        """The kernel line of the first access outside `name` (the stack's innermost frame outside Triton, numpy
        and this harness: the interpreter runs a kernel's code compiled from its own file, at its own lines)."""
        if (name, direction) not in self._sites:
            self._sites[(name, direction)] = kernel_line()

    def _reachable(self, a: Any) -> Any:
        """Which addresses lie in memory a kernel may reach outside the arena: a tensor argument's storage, else
        any live torch storage (looked up once per launch, and only when an address is in no argument)."""
        import numpy as np
        hit = np.zeros(a.shape, dtype=bool)
        for arg in self._args:
            hit |= (a >= arg.lo) & (a < arg.hi)
        if hit.all():
            return hit
        if self._live is None:
            self._live = _live_storages()
        lo, hi = self._live
        rest = a[~hit]
        if lo.size:
            i = np.searchsorted(lo, rest, side="right") - 1
            inside = (i >= 0) & (rest < hi[np.maximum(i, 0)])
            hit[~hit] = inside
        return hit

    def _stray(self, direction: str, a: Any, size: int) -> None:
        """Blame stray addresses on the launch's nearest tensor argument within memcheck's distances: the rule of
        sanitizer.attribute.locate, over a whole array of addresses and the launch's arguments' storages."""
        import numpy as np
        x = a.astype(np.int64)
        best = np.full(x.shape, np.iinfo(np.int64).max, dtype=np.int64)
        who = np.full(x.shape, -1, dtype=np.int64)
        for i, arg in enumerate(self._args):
            past, before = x - arg.hi, arg.lo - (x + size)
            dist = np.where(past >= 0, past, before)
            near = ((past >= 0) & (past < attribute.NEAR_BYTES)) | ((before >= 0) & (before < attribute.NEAR_BEFORE_BYTES))
            better = near & (dist < best)
            best[better], who[better] = dist[better], i
        width = np.arange(size, dtype=np.int64)[None, :]
        for i, arg in enumerate(self._args):
            sel = x[who == i]
            if not sel.size:
                continue
            if arg.buffer:
                off = np.unique(((sel - self.arena.buffers[arg.buffer].tensor_addr)[:, None] + width).ravel())
                self._bytes.setdefault((arg.buffer, direction), []).append(off)
                self._site(arg.buffer, direction)
            else:
                off = np.unique(((sel - arg.lo)[:, None] + width).ravel())
                self._strays.setdefault(direction, {}).setdefault((arg.name, arg.hi - arg.lo), []).append(off)
        rest = x[who == -1]
        if rest.size:
            self._wild.setdefault(direction, []).append(np.unique((rest[:, None] + width).ravel()))

    def evidence(self) -> dict[str, Any]:
        import numpy as np
        out: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for (name, direction), parts in self._bytes.items():
            offs = np.unique(np.concatenate(parts))
            lay = self.arena.buffers[name].layout
            runs = []
            for lo, hi in _runs(offs):
                runs += [{"region": region, "start": a, "end": b, "logical": ""}
                         for a, b, region in L.split_by_region(lay, lo, hi)]
            out.setdefault(name, {READ: [], WRITE: []})[direction] = runs
        strays: dict[str, list[dict[str, Any]]] = {}
        for direction, by_arg in self._strays.items():
            for (arg, size), parts in sorted(by_arg.items()):
                for lo, hi in _runs(np.unique(np.concatenate(parts))):
                    side = "past its end" if lo >= size else "before its start"
                    strays.setdefault(direction, []).append({
                        "start": lo, "end": hi,
                        "logical": f"{hi - lo:,} B at {lo:,}..{hi - 1:,} of kernel argument `{arg}`, {side} (a "
                                   f"{size:,} B tensor{self.OTHER})"})
        for direction, parts in self._wild.items():
            for lo, hi in _runs(np.unique(np.concatenate(parts))):
                strays.setdefault(direction, []).append({"start": lo, "end": hi,
                                                         "logical": f"address {lo:#x}, near no tensor argument"})
        doc: dict[str, Any] = {"accesses": self.accesses, "launches": self.launches, "outside": out}
        if strays:
            doc["strays"] = strays
        sites: dict[str, dict[str, dict[str, Any]]] = {}
        for (name, direction), (file, line) in self._sites.items():
            if file:
                sites.setdefault(name, {})[direction] = {"file": file, "line": line}
        if sites:
            doc["sites"] = sites          # buffer ("" for strays) -> direction -> the kernel's file and line
        return doc


class _Fence(Tracer):
    """The tracer of launches outside a traced run: no arena to place bytes in, only strays; take() says what they
    were (and forgets them, for the next launch)."""

    OTHER = ""                                  # no arena here: any tensor, a context buffer or not

    def __init__(self) -> None:
        super().__init__(SimpleNamespace(buffers={}))

    def has_strays(self) -> bool:
        return bool(self._strays or self._wild)

    def take(self, kernel: str) -> str:
        found = self.evidence().get("strays", {})
        self._strays, self._wild = {}, {}
        what = "; ".join(f"{'read' if d == READ else 'wrote'} {sum(r['end'] - r['start'] for r in rs):,} B (first: "
                         f"{rs[0]['logical']})" for d, rs in sorted(found.items()))
        return (f"{kernel} {what}: accesses outside every allocation the launch can reach, which the interpreter did "
                f"not make. This run's detectors do not judge them; the interpreter's trace does (mode complete, the "
                f"default, or both)")


_FENCE = _Fence()


_NOT_KERNEL: list[tuple[str, ...]] = []


def kernel_line() -> tuple[str, int]:
    """(file, line) of the running kernel's code: the innermost frame outside Triton, numpy, torch and this harness
    (a `@triton.jit` helper's line where the access is in a helper); ("", 0) when there is none."""
    import os
    import sys
    if not _NOT_KERNEL:
        roots = []
        for name in ("triton", "numpy", "torch", "gpu_memsafety"):
            module = sys.modules.get(name)
            if module is not None and getattr(module, "__file__", None):
                roots.append(os.path.dirname(os.path.abspath(module.__file__)) + os.sep)
        _NOT_KERNEL.append(tuple(roots))
    frame = sys._getframe(1)
    while frame is not None:
        file = frame.f_code.co_filename
        if not file.startswith("<") and not file.startswith(_NOT_KERNEL[0]) and os.path.isabs(file):
            return file, frame.f_lineno
        frame = frame.f_back
    return "", 0


def tensors_of(value: Any) -> Iterator[Any]:
    """The torch tensors a kernel argument carries: itself, a TensorDescriptor's base, a TensorWrapper's base, the
    tensors of a tuple."""
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from tensors_of(v)
        return
    base = getattr(value, "base", None)
    if base is not None and hasattr(base, "untyped_storage") and not hasattr(value, "untyped_storage"):
        yield base                                      # TensorDescriptor, triton's TensorWrapper
    elif hasattr(value, "untyped_storage"):
        yield value


def _live_storages() -> tuple[Any, Any]:
    """Sorted (lo, hi) arrays of the storages of every torch tensor alive in this process (the garbage collector
    tracks each); overlapping storages merged."""
    import gc

    import numpy as np
    import torch
    spans = set()
    for obj in gc.get_objects():
        if issubclass(type(obj), torch.Tensor):        # type(): no __class__ lookup on foreign objects
            try:
                st = obj.untyped_storage()
                if st.device.type == "cpu" and st.nbytes():
                    spans.add((int(st.data_ptr()), int(st.data_ptr()) + int(st.nbytes())))
            except (RuntimeError, NotImplementedError):
                continue
    merged: list[list[int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    arr = np.array(merged, dtype=np.uint64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def _outside(off: Any, lay: L.GuardLayout) -> Any:
    """The offsets (relative to the tensor's first byte) that are not logical bytes of the tensor: the region
    rule of GuardLayout.region_of (outside the tensor, an unused row, a row's padding), over a whole array at once
    (it runs for every interpreted access)."""
    import numpy as np
    out = (off < 0) | (off >= lay.nbytes)
    if lay.rows is not None:
        inside = ~out
        r, col = np.divmod(np.where(inside, off, 0), lay.rows.row_stride)
        out |= inside & ((r >= lay.rows.used_rows) | (col >= lay.rows.row_bytes))
    return off[out]


def _runs(offs: Any) -> list[tuple[int, int]]:
    """Sorted unique offsets -> [lo, hi) runs of consecutive ones."""
    import numpy as np
    if not len(offs):
        return []
    breaks = np.nonzero(np.diff(offs) != 1)[0]
    starts = np.concatenate(([0], breaks + 1))
    ends = np.concatenate((breaks, [len(offs) - 1]))
    return [(int(offs[s]), int(offs[e]) + 1) for s, e in zip(starts, ends)]


def interpreting() -> bool:
    """Triton runs kernels in its interpreter in this process (TRITON_INTERPRET=1 before triton was imported)."""
    import os
    return os.environ.get("TRITON_INTERPRET") == "1"


class StrayAccess(RuntimeError):
    """A launch outside the trace made stray accesses; the fence kept the interpreter from making them."""


# How a case's result message starts when the fence stopped its run (the worker writes "Type: message").
assert STRAY_ACCESS == f"{StrayAccess.__name__}: "    # the worker's message of one (gpu_memsafety.job spells it)


# The tracers of the runs in progress (tracing()); with none, the fence's own, which raises StrayAccess.
_ACTIVE: list[Tracer] = []
# What _install put on the interpreter's classes: (class name in triton.runtime.interpreter, attribute) -> function.
_HOOKS: dict[tuple[str, str], Any] = {}
_STRICT: list[bool] = [True]


def fence(strict: bool = True) -> bool:
    """Wrap the interpreter's memory operations for the rest of this process (once; False when Triton is not
    interpreted here). Every interpreted launch is then checked: in a traced run (tracing()) its tracer records
    what it finds; in any other run (poison's, uninit's) a stray access is masked off all the same and, `strict`,
    the launch raises StrayAccess when it is over, so that no run of a case ever touches memory the process does
    not own (a heap overrun there would corrupt the cases after it in the same process) and none passes over it.
    Not `strict`: the process's mode runs a detector that judges such accesses itself (memcheck)."""
    if not interpreting():
        return False
    _STRICT[:] = [strict]
    _install()
    return True


def hooks_present() -> bool:
    """Whether the interpreter's memory operations still run through the trace: code that reloads
    triton.runtime.interpreter (importlib.reload) re-creates its classes without the hooks, and every launch after
    that would go unseen."""
    interpreter = sys.modules.get("triton.runtime.interpreter")
    return bool(_HOOKS) and interpreter is not None and all(
        getattr(getattr(interpreter, owner, None), name, None) is fn for (owner, name), fn in _HOOKS.items())


def _install() -> None:
    """Wrap the interpreter's four memory operations and its launch (fence()): once, and again where the
    interpreter's classes lost the hooks (hooks_present)."""
    if hooks_present():
        return
    _HOOKS.clear()
    import numpy as np
    from triton.runtime import interpreter as I

    from gpu_memsafety.detectors import trace_fidelity
    trace_fidelity.install()          # floats and loop variables as compiled Triton has them
    builder = I.InterpreterBuilder
    orig = {name: getattr(builder, name) for name in
            ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas")}
    orig_run = I.GridExecutor.__call__

    def active() -> Tracer:
        return _ACTIVE[-1] if _ACTIVE else _FENCE

    def size_of(ptrs: Any) -> int:
        return int(np.dtype(I._get_np_dtype(ptrs.get_element_ty())).itemsize)

    def allowed(mask: Any, stray: Any) -> Any:
        """The access's mask less its stray lanes (which the interpreter must not touch)."""
        return mask if stray is None else I.TensorHandle(np.asarray(mask.data).astype(bool) & ~stray, mask.dtype)

    # Each access also goes, lanes as the interpreter will make them, to the launch's race check when one runs
    # (detectors/trace_race.Races: which program instance, builder.grid_idx, touched which bytes).
    def load(self: Any, ptrs: Any, mask: Any, *args: Any, **kw: Any) -> Any:
        tracer = active()
        lanes = allowed(mask, tracer.record(READ, ptrs.data, mask.data, size_of(ptrs)))
        if tracer.races is not None:
            tracer.races.access(READ, ptrs.data, lanes.data, size_of(ptrs), self.grid_idx, self.grid_dim)
        return orig["create_masked_load"](self, ptrs, lanes, *args, **kw)

    def store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any, **kw: Any) -> Any:
        tracer = active()
        lanes = allowed(mask, tracer.record(WRITE, ptrs.data, mask.data, size_of(ptrs)))
        if tracer.races is not None:
            tracer.races.access(WRITE, ptrs.data, lanes.data, size_of(ptrs), self.grid_idx, self.grid_dim, value.data)
        return orig["create_masked_store"](self, ptrs, value, lanes, *args, **kw)

    def rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *args: Any, **kw: Any) -> Any:
        tracer = active()
        lanes = allowed(mask, tracer.record(WRITE, ptr.data, mask.data, size_of(ptr)))
        if tracer.races is not None:
            tracer.races.atomic(ptr.data, lanes.data, self.grid_idx, self.grid_dim,
                                release=op == I._ir.ATOMIC_OP.XCHG)
        return orig["create_atomic_rmw"](self, op, ptr, val, lanes, *args, **kw)

    def cas(self: Any, ptr: Any, *args: Any, **kw: Any) -> Any:
        tracer = active()
        tracer.record(WRITE, ptr.data, None, size_of(ptr))    # no mask to take a stray lane off: recorded only
        if tracer.races is not None:
            tracer.races.atomic(ptr.data, None, self.grid_idx, self.grid_dim, acquire=True)
        return orig["create_atomic_cas"](self, ptr, *args, **kw)

    def run(self: Any, *args: Any, **kw: Any) -> Any:
        tracer = active()
        tracer.launches += 1
        tracer.kernel = getattr(self.fn, "__name__", "a Triton kernel")
        names = list(getattr(self, "arg_names", None) or ())
        names += [f"#{i}" for i in range(len(names), len(args))]      # parameters by position where unnamed
        tracer.begin(list(zip(names, args)) + list(kw.items()))
        try:
            out = orig_run(self, *args, **kw)
        finally:
            tracer.end()
        if tracer is _FENCE and _FENCE.has_strays():
            what = _FENCE.take(getattr(self.fn, "__name__", "a Triton kernel"))
            if _STRICT[0]:
                raise StrayAccess(what)
        return out

    for name, fn in {"create_masked_load": load, "create_masked_store": store, "create_atomic_rmw": rmw,
                     "create_atomic_cas": cas}.items():
        setattr(builder, name, fn)
        _HOOKS[("InterpreterBuilder", name)] = fn
    I.GridExecutor.__call__ = run


@contextlib.contextmanager
def tracing(arena: Any, races: Any = None) -> Iterator[Tracer | None]:
    """Trace the interpreted launches while the block runs (installing the fence first, its strictness left as the
    worker set it), checking races between their program instances with `races` (detectors/trace_race.Races) when
    given; yields the Tracer (None when Triton is not interpreted here: nothing is wrapped)."""
    if not interpreting():
        yield None
        return
    _install()
    tracer = Tracer(arena)
    tracer.races = races
    _ACTIVE.append(tracer)
    try:
        yield tracer
    finally:
        _ACTIVE.remove(tracer)
