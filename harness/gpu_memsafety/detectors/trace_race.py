"""Races between the program instances of one launch, seen in the trace (Triton's interpreter, a run without a GPU).

Why. Triton gives a launch's program instances no order: on a GPU they run at once, in any order. A kernel whose
programs write the same bytes (one storing into its neighbour's slot), or read bytes another program writes, gives
wrong results without touching a byte outside any allocation: memcheck, the guard markers, the pages and the
trace's bounds check are all silent. Triton's interpreter runs the programs one after another
(GridExecutor.__call__ sets InterpreterBuilder.grid_idx before each), so the trace knows which program made
each access (detectors/trace.py's wrappers hand each one here, its lanes as the interpreter makes them).

What counts. Per launch and per storage of a tensor argument, every byte's first writer and first reader program
(numpy arrays, an int16 each per byte, int32 on a grid of 32,767 programs or more, and one flag: did a write change
the byte). A program's accesses are gathered while it runs and checked when the next program starts, against the
programs before it only:
- write-write: bytes this program writes that an earlier program wrote;
- read-write: bytes this program writes that an earlier program read, or reads that an earlier program wrote.
Since programs run one after another and each is checked against every earlier one, every pair of programs that
touch one byte, one of them writing, is found (the later of the two sees the earlier's mark). What is not a race:
- a write that left the byte as it was (the same value an earlier program wrote, or read): identical values are
  a note, not a finding; a read of bytes whose only earlier writes changed nothing likewise;
- atomics (tl.atomic_*): not recorded;
- accesses a program makes while it holds a lock (after a tl.atomic_cas, until a tl.atomic_xchg on that
  address releases it: the lock orders them): not recorded, counted in the detector's line;
- masked-off lanes (and the trace's stray lanes, which the interpreter does not make): not accesses.

Bounded: a storage's bookkeeping (5 B per byte, 9 on a larger grid) is allocated when a program first touches it,
and only while the launch's tracked bytes stay under GPU_MEMSAFETY_RACE_BYTES (32 MiB by default); a storage past
it is not checked, and the detector's line and the verdict say "race check partial", naming it. Freed when the
launch ends.

Where it runs: wherever the trace runs (model.RIDES_WITH): the scenario worker's traced launch, and a host suite's
interpreted launches (host/trace.py), on a CPU by default and with `--gpu-memsafety=trace`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from gpu_memsafety.detectors.base import Evidence, Unit
from gpu_memsafety.detectors.trace import NOT_HERE, READ, WRITE, _runs
from gpu_memsafety.model import BEFORE_START, INSIDE, PAST_END, RACE, TRACE_RACE, ByteRange, DetectorRun, Finding
from gpu_memsafety.placement import layout as L

CAP_ENV = "GPU_MEMSAFETY_RACE_BYTES"
DEFAULT_CAP = 32 << 20          # storage bytes tracked per launch (x 5 or 9 B of bookkeeping each)
WW, RW = "write-write", "read-write"
SAME_WW, SAME_RW = "same-value write-write", "same-value read-write"
OFF = f"race check off ({CAP_ENV}=0): races between program instances were not checked"
MAX_RUNS = 256                  # byte runs kept per storage and kind (the byte count stays exact)


def cap_from_env() -> int:
    """The cap on tracked bytes per launch: GPU_MEMSAFETY_RACE_BYTES (an int; 0: no race check), else DEFAULT_CAP."""
    raw = os.environ.get(CAP_ENV, "").strip()
    if not raw:
        return DEFAULT_CAP
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{CAP_ENV}={raw!r}: expected a number of bytes (0 turns the race check off)") from None
    if value < 0:
        raise ValueError(f"{CAP_ENV}={raw!r}: expected a number of bytes >= 0")
    return value


class RaceDetector(Unit):
    name = TRACE_RACE
    sanitizer = None
    placement = L.GUARDED
    needs_cover = needs_gpu = False
    action = None               # recorded during the trace's launch (detectors/trace.py)
    deadline_factor = 1.0
    explains_fault = ends_process = False
    sees = (RACE,)

    def ran(self, ev: Evidence) -> DetectorRun:
        got = ev.of(TRACE_RACE)
        if got is None:
            return DetectorRun(TRACE_RACE, False, NOT_HERE)
        if got.get("off"):
            return DetectorRun(TRACE_RACE, False, OFF)
        return DetectorRun(TRACE_RACE, True, "; ".join([ran_words(got), *notes(got)]))

    def findings(self, ev: Evidence) -> list[Finding]:
        return findings_of(ev.of(TRACE_RACE) or {}, arch=ev.result.arch)


DETECTOR = RaceDetector()


def ran_words(doc: dict[str, Any]) -> str:
    return (f"races between program instances checked in {doc.get('launches', 0)} interpreted Triton launch(es) "
            f"({doc.get('tracked', 0):,} B tracked)")


def notes(doc: dict[str, Any]) -> list[str]:
    """What the check did not judge, or judged no race, in the verdict's words: partial storages first."""
    if doc.get("off"):
        return [OFF]
    out = [f"race check partial: {p}" for p in doc.get("partial", ())]
    if doc.get("locked"):
        out.append(f"{doc['locked']:,} access lanes made under a lock (after tl.atomic_cas, before its release) not "
                   f"checked for races")
    for rec in doc.get("races", ()):
        for kind, words in ((SAME_WW, "programs {a} and {b} of {k} wrote identical values into"),
                            (SAME_RW, "program {b} of {k} wrote the values they already held into bytes program {a} "
                                      "read, in")):
            got = rec["kinds"].get(kind)
            if got:
                a, b = (program_text(p, rec["grid"]) for p in got["programs"])
                out.append(f"{words.format(a=a, b=b, k=rec['kernel'])} {got['bytes']:,} B of `{rec['buffer']}` "
                           f"(a note, not a race)")
    return out


def program_text(linear: int, grid: list[int]) -> str:
    """A program's linear index as Triton's (x, y, z) grid index."""
    _gx, gy, gz = grid
    return f"({linear // (gy * gz)}, {(linear // gz) % gy}, {linear % gz})"


def findings_of(doc: dict[str, Any], arch: str = "",
                name: Callable[[dict[str, Any]], tuple[str, tuple[tuple[str, str], ...]]] | None = None) -> list[Finding]:
    """One finding per kernel, tensor and region: the union of the bytes its programs race on over the case's
    launches, write-write and read-write each said in its details (bytes, a pair of programs). `name` gives a
    record's buffer label and extra details (a host suite's kernel argument and test variable)."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for rec in doc.get("races", ()):
        label, extra = name(rec) if name else (rec["buffer"], (("arguments", ", ".join(rec["params"])),))
        for kind in (WW, RW):
            got = rec["kinds"].get(kind)
            if not got:
                continue
            for lo, hi in got["runs"]:
                for region, start, end in _regions(lo, hi, rec["size"]):
                    g = groups.setdefault((rec["kernel"], label, region), {"spans": {}, "pairs": {}, "left_out": 0,
                                                                           "extra": extra})
                    g["spans"].setdefault(kind, []).append((start, end))
                    g["pairs"].setdefault(kind, tuple(program_text(p, rec["grid"]) for p in got["programs"]))
            g_all = [g for key, g in groups.items() if key[:2] == (rec["kernel"], label)]
            if g_all:
                g_all[0]["left_out"] += int(got.get("left_out", 0))
    out = []
    for (kernel, label, region), g in groups.items():
        ranges = tuple(ByteRange(region, s, e) for s, e in _merge([x for spans in g["spans"].values() for x in spans]))
        nbytes = sum(r.nbytes for r in ranges)
        said, details = [], []
        for kind in (WW, RW):
            if kind not in g["spans"]:
                continue
            a, b = g["pairs"][kind]
            count = sum(e - s for s, e in _merge(g["spans"][kind]))
            said.append(f"{count:,} B written by programs {a} and {b}" if kind == WW else
                        f"{count:,} B read by program {a} and written by program {b}")
            details += [(kind, f"{count} B, programs {a} and {b}")]
        more = f"; {g['left_out']} more byte run(s) not listed" if g["left_out"] else ""
        out.append(Finding(detector=TRACE_RACE, kind=RACE, buffer=label, region=region, bytes=nbytes,
                           count=len(ranges), kernel=kernel, arch=arch, ranges=ranges,
                           note=f"{nbytes} B that program instances of {kernel} race on, without atomics "
                                f"({'; '.join(said)}; first seen): their order on a GPU is undefined{more}",
                           details=(("race", " and ".join(k for k in (WW, RW) if k in g["spans"])), *details,
                                    *g["extra"])))
    return out


def _regions(lo: int, hi: int, size: int) -> list[tuple[str, int, int]]:
    parts = [(BEFORE_START, lo, min(hi, 0)), (INSIDE, max(lo, 0), min(hi, size)), (PAST_END, max(lo, size), hi)]
    return [(r, s, e) for r, s, e in parts if s < e]


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(a, b) for a, b in out]


# ------------------------------------------------------------------------------------------ worker side (numpy)

@dataclass
class _Storage:
    """One storage of a launch's tensor arguments: its bytes [lo, hi), where its offsets count from (`base`: the
    tensor's first byte of an arena buffer; the storage's own first byte otherwise) and its bookkeeping."""
    label: str
    params: list[str]
    lo: int
    hi: int
    base: int
    size: int                                     # the tensor's logical bytes (regions: before_start, past_end)
    state: Any = None                             # (writer, reader, changed, memory) once touched
    skipped: bool = False
    reads: list[Any] = field(default_factory=list)     # this program's byte offsets (from lo), in pieces
    same: list[Any] = field(default_factory=list)      # ... written, the byte unchanged by the write
    diff: list[Any] = field(default_factory=list)      # ... written, changed
    found: dict[str, list[Any]] = field(default_factory=dict)
    pairs: dict[str, tuple[int, int]] = field(default_factory=dict)


class Races:
    """The race check of a traced run's launches (one per tracer: detectors/trace.Tracer.races)."""

    def __init__(self, cap: int | None = None) -> None:
        self.cap = cap_from_env() if cap is None else cap
        self.launches = 0
        self.tracked = 0
        self.locked = 0
        self.records: list[dict[str, Any]] = []
        self.partial: list[str] = []
        self._storages: list[_Storage] = []
        self._kernel = ""
        self._grid = (1, 1, 1)
        self._program = -1
        self._locks: set[int] = set()
        self._used = 0

    def begin(self, kernel: str, args: list[Any], arena: Any) -> None:
        """A launch starts (again, when the host moved its arguments onto copies): its tensor arguments'
        storages (detectors/trace.Arg), arena buffers named as the arena names them."""
        self._kernel, self._program, self._locks, self._used = kernel, -1, set(), 0
        by_lo: dict[int, _Storage] = {}
        for arg in args:
            st = by_lo.get(arg.lo)
            if st is None:
                buf = arena.buffers.get(arg.buffer) if arg.buffer else None
                if buf is not None:
                    st = _Storage(arg.buffer, [], arg.lo, arg.hi, int(buf.tensor_addr), int(buf.layout.nbytes))
                else:
                    st = _Storage(arg.name, [], arg.lo, arg.hi, arg.lo, arg.hi - arg.lo)
                by_lo[arg.lo] = st
            if arg.name not in st.params:
                st.params.append(arg.name)
        self._storages = list(by_lo.values())

    def access(self, *args: Any, **kw: Any) -> None:
        """One load or store of the running program (_access); an error of the check's own stops it for the rest
        of the launch, said as partial, and never reaches the kernel's run."""
        self._guarded(self._access, *args, **kw)

    def atomic(self, *args: Any, **kw: Any) -> None:
        """An atomic of the running program (_atomic), guarded as access is."""
        self._guarded(self._atomic, *args, **kw)

    def _guarded(self, step: Callable[..., None], *args: Any, **kw: Any) -> None:
        if not self._storages:
            return
        try:
            step(*args, **kw)
        except Exception as exc:                # noqa: BLE001 - the suite's kernel runs on, the check says it stopped
            self.partial.append(f"the check of {self._kernel} stopped at an error of its own "
                                f"({type(exc).__name__}: {str(exc)[:200]}); that launch's races are not all known")
            self._storages, self._program = [], -1

    def _access(self, direction: str, addrs: Any, mask: Any, size: int, grid_idx: Any, grid_dim: Any,
                value: Any = None) -> None:
        """One load or store of the running program: the lanes `mask` lets through (None: all)."""
        import numpy as np
        if self.cap <= 0:
            return
        full = np.asarray(addrs)
        lanes = None if mask is None else np.broadcast_to(np.asarray(mask).astype(bool), full.shape)
        a = (full if lanes is None else full[lanes]).ravel().astype(np.uint64, copy=False)
        if not a.size:
            return
        self._switch(grid_idx, grid_dim)
        if self._locks:
            self.locked += int(a.size)
            return
        vals = None
        if value is not None and direction == WRITE:
            v = np.broadcast_to(np.asarray(value), full.shape)
            v = (v if lanes is None else v[lanes]).ravel()
            if v.dtype.itemsize == size:
                vals = np.ascontiguousarray(v).view(np.uint8).reshape(-1, size)
        width = np.arange(max(size, 1), dtype=np.int64)
        for st in self._storages:
            inside = (a >= st.lo) & (a < st.hi)
            if not inside.any() or not self._ready(st):
                continue
            off = (a[inside].astype(np.int64) - st.lo)[:, None] + width[None, :]
            keep = off < st.hi - st.lo
            if direction == READ:
                st.reads.append(off[keep])
                continue
            if vals is None:
                st.diff.append(off[keep])
                continue
            memory = st.state[3]
            new = vals[inside]
            old = memory[np.where(keep, off, 0)]
            same = ((old == new) | ~keep).all(axis=1)[:, None] & keep     # the whole element unchanged
            st.same.append(off[same])
            st.diff.append(off[keep & ~same])

    def _atomic(self, addrs: Any, mask: Any, grid_idx: Any, grid_dim: Any, *, acquire: bool = False,
                release: bool = False) -> None:
        """An atomic of the running program: not a race; a compare-and-swap takes a lock on its addresses, an
        exchange on one of them gives it back (the accesses between are ordered by the lock)."""
        import numpy as np
        full = np.asarray(addrs)
        lanes = None if mask is None else np.broadcast_to(np.asarray(mask).astype(bool), full.shape)
        a = (full if lanes is None else full[lanes]).ravel()
        if not a.size:
            return
        self._switch(grid_idx, grid_dim)
        if acquire:
            self._locks.update(int(x) for x in a[:64])
        elif release:
            self._locks.difference_update(int(x) for x in a[:64])

    def _switch(self, grid_idx: Any, grid_dim: Any) -> None:
        gx, gy, gz = (int(d) for d in grid_dim)
        x, y, z = (int(i) for i in grid_idx)
        program = (x * gy + y) * gz + z
        if program != self._program:
            self._fold()
            self._program, self._grid, self._locks = program, (gx, gy, gz), set()

    def _ready(self, st: _Storage) -> bool:
        """The storage's bookkeeping, made at its first access unless it would pass the cap."""
        if st.state is not None:
            return True
        if st.skipped:
            return False
        import ctypes

        import numpy as np
        n = st.hi - st.lo
        if self._used + n > self.cap:
            st.skipped = True
            self.partial.append(f"`{st.label}` of {self._kernel} ({n:,} B) not checked: the launch's tracked bytes "
                                f"would pass {self.cap:,} B ({CAP_ENV})")
            return False
        self._used += n
        self.tracked += n
        memory = np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(st.lo))
        gx, gy, gz = self._grid
        ids = np.int16 if gx * gy * gz < np.iinfo(np.int16).max else np.int32    # 5 B per byte where it can
        st.state = (np.full(n, -1, dtype=ids), np.full(n, -1, dtype=ids), np.zeros(n, dtype=bool), memory)
        return True

    def _fold(self) -> None:
        """The running program is done: its accesses against every earlier program's, then marked as its."""
        import numpy as np
        p = self._program
        for st in self._storages:
            if not (st.reads or st.same or st.diff):
                continue
            writer, reader, changed, _memory = st.state
            # byte offsets as gathered, repeats and all (a lookup costs less than the sort that would drop them;
            # the raced bytes are made unique when the launch ends)
            read = _joined(st.reads)
            diff = _joined(st.diff)
            same = _joined(st.same)
            if same.size and diff.size:             # a byte this program also changed is a changed byte
                same = same[~np.isin(same, diff)]
            st.reads, st.same, st.diff = [], [], []
            for wrote, unchanged in ((diff, False), (same, True)):
                if not wrote.size:
                    continue
                earlier = writer[wrote]
                hit = earlier >= 0
                self._found(st, SAME_WW if unchanged else WW, wrote[hit], earlier[hit], p)
                earlier = reader[wrote]
                hit = earlier >= 0
                self._found(st, SAME_RW if unchanged else RW, wrote[hit], earlier[hit], p)
            if read.size:
                earlier = writer[read]
                hit = earlier >= 0
                real = changed[read]
                self._found(st, RW, read[hit & real], p, earlier[hit & real])
                self._found(st, SAME_RW, read[hit & ~real], p, earlier[hit & ~real])
            for wrote in (diff, same):
                if wrote.size:
                    writer[wrote[writer[wrote] < 0]] = p
            changed[diff] = True
            if read.size:
                reader[read[reader[read] < 0]] = p

    @staticmethod
    def _found(st: _Storage, kind: str, offs: Any, a: Any, b: Any) -> None:
        """Bytes `offs` raced as `kind`; the first pair of programs (a: the reader or first writer, b: the other)."""
        import numpy as np
        if not offs.size:
            return
        st.found.setdefault(kind, []).append(offs)
        if kind not in st.pairs:
            first = lambda x: int(np.asarray(x).ravel()[0])   # noqa: E731 - a scalar or an array of programs
            st.pairs[kind] = (first(a), first(b))

    def end(self) -> None:
        """The launch is over: its last program checked, its races kept as records, its bookkeeping freed."""
        if not self._storages:
            return
        self._guarded(self._fold)
        if self._storages:
            self._guarded(self._keep)
        self._storages, self._program = [], -1

    def _keep(self) -> None:
        import numpy as np
        self.launches += 1
        for st in self._storages:
            if not st.found:
                continue
            shift = st.lo - st.base
            kinds = {}
            for kind, parts in st.found.items():
                offs = np.unique(np.concatenate(parts)) + shift
                runs = _runs(offs)
                kinds[kind] = {"bytes": int(offs.size), "runs": [list(r) for r in runs[:MAX_RUNS]],
                               "left_out": max(0, len(runs) - MAX_RUNS), "programs": list(st.pairs[kind])}
            self.records.append({"kernel": self._kernel, "buffer": st.label, "params": list(st.params),
                                 "size": st.size, "grid": list(self._grid), "kinds": kinds})

    def evidence(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"launches": self.launches, "tracked": self.tracked, "races": self.records}
        if self.cap <= 0:
            doc["off"] = True
        if self.partial:
            doc["partial"] = list(self.partial)
        if self.locked:
            doc["locked"] = self.locked
        return doc


def _joined(parts: list[Any]) -> Any:
    import numpy as np
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
