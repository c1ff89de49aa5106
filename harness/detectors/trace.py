"""Trace: every address a Triton kernel loads, stores or updates atomically under Triton's interpreter (a run
without a GPU), placed against the arena's buffers. What memcheck does for a GPU run, for Triton kernels on a CPU.

Why. Without a GPU, poison sees an overread only when the bytes read change an output, and the guard markers see
only writes. A read whose value never matters (a mask recomputed after the load, a compare that goes the same way
whatever the byte, held-out hx_f, hw_c, hw_e) was invisible on a CPU. The interpreter computes the address of
every access: each `tl.load` and `tl.store`, block pointers and tensor descriptors included, goes through
InterpreterBuilder's create_masked_load / create_masked_store, atomics through create_atomic_rmw / create_atomic_cas
(triton 3.6, runtime/interpreter.py). While the case's adapter runs, those four are wrapped, and each access its
mask lets through is checked against the arena's allocations.

What counts: the bytes of an access that lie in one of the arena's allocations but outside its tensor's logical
bytes (a guard, row padding, an unused row): exact bytes, each direction its own finding (a read is an overread,
a write or an atomic an overwrite), like memcheck's. Memory that is no arena allocation (the adapter's own
tensors, torch's) is not judged: on a host nothing tells a legitimate access there from a stray one.

Where it runs: in the plain launch (`once`) of the modes whose row names it, when the worker runs Triton in the
interpreter. On a GPU there is no interpreter: the detector did not run and is not missing (memcheck and the
markers see those accesses there). CUDA C kernels and torch ops are not traced.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from gpu_memsafety.detectors.base import Evidence
from gpu_memsafety.model import OVERREAD, OVERWRITE, TRACE, DetectorRun, Finding
from gpu_memsafety.placement import layout as L
from gpu_memsafety.sanitizer import attribute

READ, WRITE = "read", "write"
NOT_HERE = ("no Triton interpreter in this run (a GPU run: memcheck and the guard markers see these accesses "
            "there)")


class TraceDetector:
    name = TRACE
    sanitizer = None
    placement = L.GUARDED
    needs_cover = needs_gpu = False
    action = None               # the accesses are recorded during whatever plain launch runs the case
    deadline_factor = 1.0
    explains_fault = ends_process = False

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
        return out


DETECTOR = TraceDetector()


# ------------------------------------------------------------------------------------------ worker side (numpy)

class Tracer:
    """Records, while active, the bytes outside logical bytes that interpreted Triton accesses touch in the arena's
    allocations (`arena`: gpu_memsafety.placement.guard.Arena; its buffers may be allocated while it runs)."""

    def __init__(self, arena: Any) -> None:
        self.arena = arena
        self.accesses = 0
        self.launches = 0
        self._table: list[tuple[str, int, int, int, L.GuardLayout]] = []
        self._seen = -1
        self._bytes: dict[tuple[str, str], list[Any]] = {}

    def _buffers(self) -> list[tuple[str, int, int, int, L.GuardLayout]]:
        if len(self.arena.buffers) != self._seen:       # buffers are only ever added during a case
            self._table = [(b.name, b.alloc_base, b.alloc_size, b.tensor_addr, b.layout)
                           for b in self.arena.buffers.values()]
            self._seen = len(self.arena.buffers)
        return self._table

    def record(self, direction: str, addrs: Any, mask: Any, size: int) -> None:
        import numpy as np
        a = np.asarray(addrs).astype(np.uint64, copy=False)
        if mask is not None:
            a = a[np.broadcast_to(np.asarray(mask).astype(bool), a.shape)]
        a = a.ravel()
        self.accesses += int(a.size)
        if not a.size:
            return
        for name, base, alloc, tensor, lay in self._buffers():
            sel = a[(a >= base) & (a < base + alloc)]
            if not sel.size:
                continue
            # every byte of every element touched, relative to the tensor's first byte
            off = (sel.astype(np.int64) - tensor)[:, None] + np.arange(max(size, 1), dtype=np.int64)[None, :]
            off = np.unique(off.ravel())
            outside = _outside(off, lay)
            if outside.size:
                self._bytes.setdefault((name, direction), []).append(outside)

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
        return {"accesses": self.accesses, "launches": self.launches, "outside": out}


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


@contextlib.contextmanager
def tracing(arena: Any) -> Iterator[Tracer | None]:
    """Wrap the interpreter's memory operations while the block runs; yields the Tracer (None when Triton is not
    interpreted here: nothing is wrapped)."""
    if not interpreting():
        yield None
        return
    import numpy as np
    from triton.runtime import interpreter as I

    builder = I.InterpreterBuilder
    tracer = Tracer(arena)

    def size_of(ptrs: Any) -> int:
        return int(np.dtype(I._get_np_dtype(ptrs.get_element_ty())).itemsize)

    orig = {name: getattr(builder, name) for name in
            ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas")}

    def load(self: Any, ptrs: Any, mask: Any, *args: Any, **kw: Any) -> Any:
        tracer.record(READ, ptrs.data, mask.data, size_of(ptrs))
        return orig["create_masked_load"](self, ptrs, mask, *args, **kw)

    def store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any, **kw: Any) -> Any:
        tracer.record(WRITE, ptrs.data, mask.data, size_of(ptrs))
        return orig["create_masked_store"](self, ptrs, value, mask, *args, **kw)

    def rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *args: Any, **kw: Any) -> Any:
        tracer.record(WRITE, ptr.data, mask.data, size_of(ptr))
        return orig["create_atomic_rmw"](self, op, ptr, val, mask, *args, **kw)

    def cas(self: Any, ptr: Any, *args: Any, **kw: Any) -> Any:
        tracer.record(WRITE, ptr.data, None, size_of(ptr))
        return orig["create_atomic_cas"](self, ptr, *args, **kw)

    orig_run = I.GridExecutor.__call__

    def run(self: Any, *args: Any, **kw: Any) -> Any:
        tracer.launches += 1
        return orig_run(self, *args, **kw)

    patched = {"create_masked_load": load, "create_masked_store": store, "create_atomic_rmw": rmw,
               "create_atomic_cas": cas}
    for name, fn in patched.items():
        setattr(builder, name, fn)
    I.GridExecutor.__call__ = run
    try:
        yield tracer
    finally:
        for name, fn in orig.items():
            setattr(builder, name, fn)
        I.GridExecutor.__call__ = orig_run
