"""`pytest --gpu-memsafety` without a GPU: the suite's own Triton launches, run by Triton's interpreter, traced.

Why. On a machine with no GPU neither the guard allocator nor compute-sanitizer can run, yet a suite that sets
TRITON_INTERPRET=1 runs its Triton kernels on the CPU, and the interpreter computes the address of every load, store
and atomic. The scenario path judges those addresses against its arena (detectors/trace.py); a host suite has no
arena, so each launch gets one: every CPU storage its tensor arguments use is copied, for that launch, into a mapping
of its own with GUARD_BYTES on either side (one copy per storage, so views of one storage stay views of one copy;
page aligned), the kernel runs on the copies, and the interpreter copies them back into the suite's tensors when
the launch ends (its own `_restore_args_dev`), so the test sees what it would have. Nothing else can lie within a
copy's guards, so an overrun is found whatever the heap holds next to the suite's tensors.

What counts, with the scenario trace's own rules (detectors/trace.Tracer): a byte of an access outside its
storage's bytes is an overread or an overwrite of that kernel argument, at its exact offset (past_end or
before_start, the whole width of the access); an access beyond the guards is blamed on the nearest argument within
memcheck's distances, else reported by address; such stray lanes are masked off, so a wild access is a finding, not a
crash. Memory every argument's storage covers is the allocation, as memcheck sees it: a kernel reading another
part of its storage than the view it was given is not judged. CUDA C++ and torch ops are not traced.

Installed at the first test that finds Triton's interpreter imported (by the suite, never by us), like
host/launches.py; inert for launches outside a test.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from gpu_memsafety.detectors.trace import tensors_of
from gpu_memsafety.host import copy_bound
from gpu_memsafety.host.allocations import where_text
from gpu_memsafety.host.launches import storage_ptr, variables_of
from gpu_memsafety.model import OVERREAD, OVERWRITE, TRACE, UNATTRIBUTED, ByteRange, Finding
from gpu_memsafety.placement import layout as L

# Each side of a copy: far beyond any tile a kernel computes its addresses from (1 MiB, page aligned).
GUARD_BYTES = 1 << 20


@dataclass
class _Copy:
    """One storage's guarded copy for one launch (the fields detectors/trace.Tracer reads from an arena buffer)."""

    name: str
    alloc_base: int
    alloc_size: int
    tensor_addr: int
    layout: L.GuardLayout
    keep: Any                     # the mapping that holds the copy and its guards (alive while the launch runs)
    storage: Any                  # the torch storage of the copy's tensor bytes (exactly the original's size)
    params: list[str] = field(default_factory=list)
    variables: tuple[str, ...] = ()


@dataclass
class TraceOfTest:
    """What the traced launches of one test saw."""

    findings: list[Finding] = field(default_factory=list)
    launches: int = 0
    accesses: int = 0
    copies: int = 0
    unfinished: list[str] = field(default_factory=list)    # launches that raised: what they raised
    unhooked: str = ""     # the trace's hooks were gone by the test's end: its later launches went unseen (why)
    uncopied: list[str] = field(default_factory=list)      # launches not copied (host/copy_bound.py): why
    untimed: list[str] = field(default_factory=list)       # autotuned kernels whose every config ran once, untimed
    race_notes: list[str] = field(default_factory=list)    # the race check's (detectors/trace_race.notes)

    def notes(self) -> list[str]:
        """What the trace did differently from a plain interpreted run, in the verdict's words."""
        races = list(dict.fromkeys(self.race_notes))
        if not self.untimed:
            return races
        return races + [f"Triton's autotuner cannot time configs without a GPU ('0 active drivers'): each config of "
                f"{', '.join(sorted(set(self.untimed)))} ran once under the trace, untimed, and the first was kept"]


class _Arena:
    """The arena a launch's tracer places accesses in: this launch's copies, by name."""

    def __init__(self) -> None:
        self.buffers: dict[str, _Copy] = {}


def _guarded_copy(name: str, storage: Any) -> _Copy:
    """A copy of `storage` in a mapping of its own: GUARD_BYTES on either side that nothing else can occupy (pages
    never touched cost no memory), so that where an overrun lands never depends on what the heap put next to it."""
    import ctypes
    import mmap

    import torch
    __tracebackhide__ = True          # pytest: no frame of the harness's, and no storage's repr, in a test's traceback
    n = int(storage.nbytes())
    size = GUARD_BYTES + n + GUARD_BYTES
    try:
        region = mmap.mmap(-1, size)
    except (OSError, MemoryError, ValueError, OverflowError) as exc:
        raise CopyRefused(f"the trace could not map a guarded copy of {name} ({n:,} B): {exc}") from None
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    middle = torch.frombuffer(memoryview(region)[GUARD_BYTES: GUARD_BYTES + n], dtype=torch.uint8)
    copy = middle.untyped_storage()
    copy.copy_(storage)
    return _Copy(name, base, size, base + GUARD_BYTES, L.GuardLayout(n, GUARD_BYTES, GUARD_BYTES), region, copy)


class CopyRefused(MemoryError):
    """A guarded copy that could not be made (its message names the storage and its size, never its contents)."""


def _storage_bytes(params: list[tuple[str, Any]]) -> tuple[int, int]:
    """(bytes, storages) of the distinct CPU storages a launch's arguments use: what relocate would copy."""
    seen: dict[int, int] = {}
    for _, value in params:
        for tensor in _tensors(value):
            storage = tensor.untyped_storage()
            if storage.device.type == "cpu":
                seen[int(storage.data_ptr())] = int(storage.nbytes())
    return sum(seen.values()), len(seen)


def _tensors(value: Any) -> list[Any]:
    """The tensors an argument carries (itself, a tuple's, a TensorDescriptor's or TensorWrapper's base)."""
    return list(tensors_of(value))


def _cpu_ptr(value: Any) -> int | None:
    """The first byte of a CPU tensor's storage (host/launches.storage_ptr, on the host)."""
    return storage_ptr(value, cuda=False)


def _guarded_buffer(buffers: list[Any], ptr: int) -> Any:
    """The gpu_memsafety_guarded fixture's buffer (placement/guard.Arena's) whose allocation holds `ptr`, or None."""
    return next((b for b in buffers if b.alloc_base <= ptr < b.alloc_base + b.alloc_size), None)


class _Launch:
    """One interpreted launch in progress: its tracer, its copies, its kernel's name and parameters."""

    def __init__(self, kernel: str, params: list[tuple[str, Any]], variables: dict[int, tuple[str, ...]],
                 guarded: list[Any] = ()) -> None:
        from gpu_memsafety.detectors.trace import Tracer
        from gpu_memsafety.detectors.trace_race import Races
        self.kernel = kernel
        self.arena = _Arena()
        self.tracer = Tracer(self.arena)
        self.tracer.races = Races()          # races between its program instances (detectors/trace_race.py)
        self.params = params
        self.variables = variables
        self.guarded = list(guarded)         # the test's gpu_memsafety_guarded buffers: placed as they are

    def relocate(self, args_hst: list[Any], kwargs_hst: dict[str, Any]) -> None:
        """Move the interpreter's host tensors onto guarded copies (one per storage), then tell the tracer the
        launch's arguments are those copies."""
        __tracebackhide__ = True
        by_storage: dict[int, _Copy] = {}
        names = [name for name, _ in self.params]
        names += [f"#{i}" for i in range(len(names), len(args_hst))]
        originals = {name: value for name, value in self.params}
        bound = list(zip(names, args_hst)) + list(kwargs_hst.items())
        for param, value in bound:
            tensors, before = _tensors(value), _tensors(originals.get(param))
            for i, tensor in enumerate(tensors):
                # a tuple's tensors by their index (`ptrs[1]`), each named after the test's variable that holds it
                name = f"{param}[{i}]" if isinstance(value, (tuple, list)) else param
                original = before[i] if i < len(before) else None
                storage = tensor.untyped_storage()
                if storage.device.type != "cpu" or not storage.nbytes():
                    continue
                key = int(storage.data_ptr())
                copy = by_storage.get(key)
                own = _guarded_buffer(self.guarded, key) if copy is None else None
                if own is not None:
                    # a guarded fixture tensor: its own layout is the truth (its guards, its row padding), no copy
                    copy = _Copy(self._unique(own.name), own.alloc_base, own.alloc_size, own.tensor_addr, own.layout,
                                 None, None)
                    by_storage[key] = copy
                    self.arena.buffers[copy.name] = copy
                    copy.variables = self._variables_of(original)
                if copy is None:
                    copy = _guarded_copy(self._unique(f"{name} of {self.kernel}"), storage)
                    by_storage[key] = copy
                    self.arena.buffers[copy.name] = copy
                    copy.variables = self._variables_of(original)
                if name not in copy.params:
                    copy.params.append(name)
                if copy.storage is not None:
                    tensor.set_(copy.storage, tensor.storage_offset(), tensor.size(), tensor.stride())
        self.tracer.begin(bound)

    def _unique(self, name: str) -> str:
        """A name no other buffer of this launch has (a tuple argument holds several storages under one name)."""
        n, unique = 1, name
        while unique in self.arena.buffers:
            n += 1
            unique = f"{name} (#{n})"
        return unique

    def _variables_of(self, original: Any) -> tuple[str, ...]:
        ptr = _cpu_ptr(original) if original is not None else None
        return self.variables.get(ptr, ()) if ptr is not None else ()

    def findings(self) -> list[Finding]:
        from gpu_memsafety.detectors.trace import READ, WRITE
        from gpu_memsafety.sanitizer import attribute
        doc = self.tracer.evidence()
        sites = doc.get("sites", {})
        out: list[Finding] = []
        for direction, kind in ((READ, OVERREAD), (WRITE, OVERWRITE)):
            runs = {name: dirs[direction] for name, dirs in doc.get("outside", {}).items() if dirs.get(direction)}
            for name, ranges in runs.items():
                copy = self.arena.buffers[name]
                for r in ranges:
                    r["logical"] = where_text(r["start"], r["end"], copy.layout.nbytes)
                for f in attribute.guard_findings({name: ranges}, kernel=self.kernel, arch="cpu", detector=TRACE,
                                                  kind=kind, access=direction):
                    out.append(_at(_named(f, copy, self.kernel), sites.get(name, {}).get(direction)))
            strays = [ByteRange(UNATTRIBUTED, r["start"], r["end"], r.get("logical", ""))
                      for r in doc.get("strays", {}).get(direction, [])]
            if strays:
                out.append(_at(Finding(detector=TRACE, kind=kind, buffer=UNATTRIBUTED, region=UNATTRIBUTED,
                                   bytes=sum(r.nbytes for r in strays), count=len(strays), kernel=self.kernel,
                                   arch="cpu", ranges=tuple(strays), details=(("access", direction),),
                                   note="memory outside every allocation the launch can reach; the interpreter did "
                                        "not touch it"), sites.get("", {}).get(direction)))
        return out + self._races()

    def _races(self) -> list[Finding]:
        """The race check's findings, each tensor named as the trace's are (kernel argument, test variable)."""
        from gpu_memsafety.detectors.trace_race import findings_of

        def name(rec: dict[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
            copy = self.arena.buffers.get(rec["buffer"])
            if copy is None:
                return rec["buffer"], (("tensor", f"kernel argument `{rec['buffer']}` of {self.kernel}"),)
            label = copy.name if copy.storage is None and copy.keep is None or not copy.params else copy.params[0]
            return label, (("tensor", _tensor_words(copy, self.kernel)), ("size", str(copy.layout.nbytes)),
                           ("device", "cpu"))
        return findings_of(self.tracer.races.evidence(), "cpu", name)

    def race_notes(self) -> list[str]:
        from gpu_memsafety.detectors.trace_race import notes
        return notes(self.tracer.races.evidence())


def _at(f: Finding, site: Any) -> Finding:
    """f at the kernel's line that made its first access (the trace's site: {"file", "line"}), as memcheck places
    its records: `source` is "file.py:LINE", the detail `path` the whole file name (report/locate.py)."""
    if not site:
        return f
    from dataclasses import replace
    from pathlib import PurePath
    return replace(f, source=f"{PurePath(site['file']).name}:{site['line']}",
                   details=(*f.details, ("path", str(site["file"]))))


def _named(f: Finding, copy: _Copy, kernel: str) -> Finding:
    """f named by the kernel argument and test variable it was found in; its note starts with its byte count."""
    from dataclasses import replace
    tensor = _tensor_words(copy, kernel)
    fixture = copy.storage is None and copy.keep is None       # a gpu_memsafety_guarded tensor, placed as it is
    where = {L.PAST_END: "past the end of", L.BEFORE_START: "before the start of"}.get(f.region, f"in the {f.region} of")
    what = "gpu_memsafety_guarded tensor" if fixture else "CPU storage"
    note = (f"{f.bytes} B {where} a {copy.layout.nbytes:,} B {what}, seen by Triton's interpreter "
            f"({'read' if f.kind == OVERREAD else 'written'}; exact bytes of whole accesses)")
    return replace(f, buffer=copy.name if fixture or not copy.params else copy.params[0], note=note,
                   details=(*f.details, ("tensor", tensor), ("size", str(copy.layout.nbytes)), ("device", "cpu")))


def _tensor_words(copy: _Copy, kernel: str) -> str:
    """A copy's tensor in the test's words: its kernel argument(s) and the test variable(s) that hold it."""
    params = ", ".join(f"`{p}`" for p in copy.params)
    tensor = f"kernel argument {params} of {kernel}"
    if copy.variables:
        tensor += "; test variable " + ", ".join(f"`{v}`" for v in copy.variables)
    return tensor


def merged(findings: list[Finding]) -> list[Finding]:
    """One finding per kernel, tensor, direction and region for the whole test: the union of the bytes its launches
    touched (an autotuned kernel's configs, a kernel called in a loop), their accesses counted together."""
    from dataclasses import replace
    groups: dict[tuple[Any, ...], list[Finding]] = {}
    for f in findings:
        key = (f.detector, f.kind, f.kernel, f.buffer, f.region, f.detail("tensor"), f.detail("size"))
        groups.setdefault(key, []).append(f)
    out = []
    for group in groups.values():
        first = group[0]
        if len(group) == 1:
            out.append(first)
            continue
        spans: list[list[int]] = []
        for lo, hi in sorted({(r.start, r.end) for f in group for r in f.ranges}):
            if spans and lo <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], hi)
            else:
                spans.append([lo, hi])
        size = int(first.detail("size") or 0)
        ranges = tuple(ByteRange(first.region, lo, hi, where_text(lo, hi, size) if size else "") for lo, hi in spans)
        nbytes = sum(r.nbytes for r in ranges)
        note = _with_bytes(first, nbytes) + f"; the union of {len(group)} launches"
        out.append(replace(first, ranges=ranges, bytes=nbytes, count=sum(f.count for f in group), note=note))
    return out


def _with_bytes(f: Finding, nbytes: int) -> str:
    """f's note for `nbytes` bytes: a named finding's note starts with its byte count (_named); another's has none."""
    head = f"{f.bytes} B "
    return f"{nbytes} B {f.note[len(head):]}" if f.note.startswith(head) else f.note


class HostTrace:
    """The running test's interpreted Triton launches, traced (begin .. take)."""

    def __init__(self) -> None:
        self.code: Any = None
        self.current = TraceOfTest()
        self._restore: Callable[[], None] | None = None
        self._launch: list[_Launch] = []
        self._arenas: list[Any] = []
        self._hooks: tuple[Any, Any] | None = None

    def watch(self, arena: Any) -> None:
        """The running test's gpu_memsafety_guarded arena (placement/guard.Arena): its buffers are placed with their
        own layouts, not copied."""
        self._arenas.append(arena)

    def begin(self, test_function: Any) -> None:
        self.code = getattr(test_function, "__code__", None)
        self.current = TraceOfTest()
        self._arenas = []
        if self._restore is not None and not self.hooks_present():
            self.uninstall()          # re-checked at each test: a reloaded interpreter gets the hooks again
        if self._restore is None and "triton.runtime.interpreter" in sys.modules:
            self.install()

    def take(self) -> TraceOfTest:
        done, self.current = self.current, TraceOfTest()
        done.findings = merged(done.findings)
        if self._restore is not None and not self.hooks_present():
            done.unhooked = ("not checked: the trace's hooks on Triton's interpreter were gone by the end of this test "
                             "(triton.runtime.interpreter reloaded, or its classes replaced), so its launches after "
                             "that were not traced")
        return done

    def hooks_present(self) -> bool:
        """The interpreter still launches through this trace and its memory operations through detectors/trace."""
        from gpu_memsafety.detectors import trace
        interpreter = sys.modules.get("triton.runtime.interpreter")
        executor = getattr(interpreter, "GridExecutor", None)
        return (trace.hooks_present() and executor is not None and (executor.__call__, executor._init_args_hst)
                == self._hooks)

    @property
    def installed(self) -> bool:
        return self._restore is not None

    def install(self) -> bool:
        """Wrap the interpreter's launch and its copy of the arguments to the host; False without Triton."""
        try:
            from triton.runtime import interpreter as I
        except Exception:                              # noqa: BLE001 - no (working) Triton: nothing to trace
            return False
        from gpu_memsafety.detectors import trace
        trace._install()                               # the four memory operations and the launch's tracer stack
        call, init = I.GridExecutor.__call__, I.GridExecutor._init_args_hst
        host = self

        def launch(executor: Any, *args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True                     # pytest: the test's traceback shows no harness frame
            kernel = getattr(getattr(executor, "fn", None), "__name__", "a Triton kernel")
            names = list(getattr(executor, "arg_names", None) or ())
            params = list(zip(names, args)) + list(kwargs.items())
            variables = variables_of(sys._getframe(1), host.code, _cpu_ptr) if host.code is not None else {}
            guarded = [b for arena in host._arenas for b in arena.buffers.values()]
            copy_bytes, copies = _storage_bytes(params)
            refused = copy_bound.refusal(copy_bytes, GUARD_BYTES, copies)
            if refused:                                  # run as a plain interpreted launch, under the fence only
                host.current.uncopied.append(f"{kernel} was not checked: {refused}")
                return call(executor, *args, **kwargs)
            current = _Launch(kernel, params, variables, guarded)
            host._launch.append(current)
            trace._ACTIVE.append(current.tracer)
            try:
                return call(executor, *args, **kwargs)
            except BaseException as exc:
                cause = exc.__cause__ or exc             # the interpreter wraps what the kernel raised
                text = str(cause).splitlines()[0] if str(cause) else ""
                host.current.unfinished.append(f"{kernel} raised {type(cause).__name__}"
                                               f"{': ' + text[:200] if text else ''}")
                raise
            finally:
                trace._ACTIVE.remove(current.tracer)
                host._launch.remove(current)
                host.current.launches += 1
                host.current.accesses += current.tracer.accesses
                host.current.copies += len(current.arena.buffers)
                host.current.findings += current.findings()
                host.current.race_notes += current.race_notes()

        def init_args(executor: Any, args_dev: Any, kwargs: Any) -> Any:
            __tracebackhide__ = True
            args_hst, kwargs_hst = init(executor, args_dev, kwargs)
            if host._launch:
                host._launch[-1].relocate(args_hst, kwargs_hst)
            return args_hst, kwargs_hst

        executor = I.GridExecutor
        executor.__call__ = launch                     # type: ignore[method-assign]
        executor._init_args_hst = init_args            # type: ignore[method-assign]
        self._hooks = (launch, init_args)
        untimed = self._untimed_autotune()

        def restore() -> None:                         # on the class patched (a reloaded module has a new one)
            executor.__call__ = call                   # type: ignore[method-assign]
            executor._init_args_hst = init             # type: ignore[method-assign]
            untimed()
        self._restore = restore
        return True

    def _untimed_autotune(self) -> Callable[[], None]:
        """Triton's autotuner times each config with the active driver's benchmarker; without a GPU there is none and
        it stops ('0 active drivers'), so no autotuned kernel could run in the interpreter. Where that is so, each
        config runs once instead (every config's accesses are checked, not only the one a GPU would pick), timed
        alike, so the first is kept. Returns what puts the autotuner back."""
        try:
            from triton.runtime import autotuner as AT
        except Exception:                              # noqa: BLE001 - no autotuner in this Triton
            return lambda: None
        original = AT.Autotuner.__dict__.get("do_bench")
        if original is None or not hasattr(original, "__get__"):
            return lambda: None
        host = self

        def do_bench(tuner: Any) -> Any:
            try:
                return original.__get__(tuner, type(tuner))
            except RuntimeError as exc:
                if "active driver" not in str(exc):
                    raise
            name = getattr(getattr(tuner, "base_fn", None), "__name__", "a kernel")

            def once(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
                host.current.untimed.append(name)
                kernel_call()
                return [1.0] * len(quantiles) if quantiles else 1.0
            return once

        AT.Autotuner.do_bench = property(do_bench)     # type: ignore[assignment]

        def restore() -> None:
            AT.Autotuner.do_bench = original           # type: ignore[assignment]
        return restore

    def uninstall(self) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None
