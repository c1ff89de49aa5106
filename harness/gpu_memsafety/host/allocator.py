"""The process-wide guard allocator of `pytest --gpu-memsafety`: every CUDA storage of a test suite, guarded.

torch's caching allocator packs tensors into 2 MiB / 20 MiB segments, so neither guard markers nor memcheck
can see past a tensor's end. A `CUDAPluggableAllocator` installed before the first CUDA allocation is asked
once per storage, with its exact byte count (a per-test MemPool is not: the caching allocator asks it only for
segments). This module builds the shim (host/guard_alloc.cu, through the project's CUDA build cache),
installs it, and keeps the Python side of each allocation: the test that made it and the Python stack that made
it (a callback per allocation; frames inside torch, pytest and this package are left out).

`GuardAllocator` is the interface the pytest hooks use (plugin/suite/runtime.py); `CudaGuardAllocator` is the real
one; the CPU tests plug in a fake through the `pytest_gpu_memsafety_make_allocator` hook. What a check finds
is typed data (`GuardHit`), turned into findings by gpu_memsafety.host.allocations.
"""
from __future__ import annotations

import ctypes
import linecache
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence

MARKER = 0xA5
# The shim's placements (guard_alloc.cu enum Placement).
MARKERS, EXACT, PAGE_AFTER, PAGE_BEFORE = "markers", "exact", "page_after", "page_before"
PLACEMENT_CODES = {MARKERS: 0, EXACT: 1, PAGE_AFTER: 2, PAGE_BEFORE: 3}
FRONT_GUARD = 256
# Hits handed back by one check before the rest are only counted (each carries up to 768 guard bytes).
MAX_HITS = 4096
# Frames kept per allocation stack: the innermost frames outside torch, pytest, pluggy and this package.
STACK_FRAMES = 8
# Freed blocks kept (unreleased) between checks before a check is forced from inside a free.
QUARANTINE_BYTES = 1 << 30
QUARANTINE_COUNT = 1 << 16
SOURCE = Path(__file__).with_name("guard_alloc.cu")

BEFORE_TESTS = "(before the first test)"


class AllocatorUnavailable(RuntimeError):
    """The guard allocator cannot be installed here; the message says what was needed and what was found."""


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    def describe(self) -> str:
        code = linecache.getline(self.file, self.line).strip()
        where = f"{self.file}:{self.line} in {self.function}"
        return f"{where}: {code}" if code else where

    @property
    def site(self) -> str:
        return f"{Path(self.file).name}:{self.line}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function}

    @classmethod
    def from_json(cls, data: Any) -> "Frame":
        return cls(str(data["file"]), int(data["line"]), str(data["function"]))


@dataclass(frozen=True)
class Allocation:
    """One storage the allocator gave out: which test made it and where (innermost frame first)."""

    id: int
    size: int
    device: int
    test: str
    stack: tuple[Frame, ...] = ()
    ptr: int = 0
    freed_in: str = ""           # the test during which it was freed ("" while live)

    @property
    def site(self) -> str:
        return self.stack[0].site if self.stack else "unknown site"

    @property
    def label(self) -> str:
        """The finding's buffer name: stable across runs (no address, no id), e.g. 'alloc 92160 B at mxfp.py line 142'
        (no ':' in it: a baseline key is ':'-separated, model.Finding.key)."""
        if not self.stack:
            return f"alloc {self.size} B at an unknown site"
        return f"alloc {self.size} B at {Path(self.stack[0].file).name} line {self.stack[0].line}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "size": self.size, "device": self.device, "test": self.test, "ptr": self.ptr,
                "freed_in": self.freed_in, "stack": [f.to_json() for f in self.stack]}

    @classmethod
    def from_json(cls, data: Any) -> "Allocation":
        return cls(int(data["id"]), int(data["size"]), int(data["device"]), str(data["test"]),
                   tuple(Frame.from_json(f) for f in data.get("stack", ())), int(data.get("ptr", 0)),
                   str(data.get("freed_in", "")))


@dataclass(frozen=True)
class GuardHit:
    """An allocation whose marker bytes changed since the last check: the bytes as found (0xA5 where intact)."""

    allocation: Allocation
    front: bytes                 # the FRONT_GUARD bytes before the tensor
    back: bytes                  # the bytes after the tensor's end (alignment tail, then the back guard)
    live: bool                   # still allocated (re-armed) or freed since the last check

    def changed_runs(self) -> list[tuple[int, int]]:
        """Changed bytes as runs of offsets relative to the tensor's first byte (negative: before it)."""
        runs = [(i - len(self.front), j - len(self.front)) for i, j in _runs(self.front)]
        runs += [(self.allocation.size + i, self.allocation.size + j) for i, j in _runs(self.back)]
        return runs


def _runs(data: bytes) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    start = None
    for i, value in enumerate(data):
        if value != MARKER and start is None:
            start = i
        elif value == MARKER and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(data)))
    return runs


@dataclass
class CheckResult:
    hits: list[GuardHit] = field(default_factory=list)
    truncated: int = 0           # hits found beyond MAX_HITS (counted, not handed back)
    error: str = ""              # the CUDA context was lost (or the check failed): nothing after it is trusted


@dataclass(frozen=True)
class Counters:
    """The allocator's running totals (guard_alloc.cu gms_info)."""

    allocations: int = 0
    live: int = 0
    live_bytes: int = 0
    quarantined: int = 0
    capture_allocations: int = 0
    unknown_frees: int = 0
    oom_retries: int = 0
    paged: int = 0


class GuardAllocator(Protocol):
    """What the pytest hooks need from an allocator (the real one, or a CPU fake)."""

    placement: str
    describe: str

    def begin(self, test: str) -> None:
        """Allocations from now on belong to `test`."""

    def check(self) -> CheckResult:
        """Synchronize, check every live and freed-since-last-check block, re-arm, release the freed ones."""

    def counters(self) -> Counters: ...

    def allocations_of(self, test: str) -> list[Allocation]:
        """The allocations `test` made (live or freed), for the child's record of a test."""

    def fence(self) -> None:
        """A marker record in a sanitizer's output (memcheck children); nothing elsewhere."""

    def close(self) -> None:
        """Stop calling back into Python (before the interpreter shuts down)."""


# ----------------------------------------------------------------------------------------------- stacks

_SKIP_PARTS = (f"{os.sep}torch{os.sep}", f"{os.sep}_pytest{os.sep}", f"{os.sep}pluggy{os.sep}",
               f"{os.sep}gpu_memsafety{os.sep}", f"{os.sep}harness{os.sep}placement{os.sep}",
               "<frozen ", f"{os.sep}contextlib.py")


def capture_stack(limit: int = STACK_FRAMES) -> tuple[Frame, ...]:
    """The innermost frames that are neither torch's, pytest's nor this package's: where the test (or the library
    under test) asked for the memory."""
    frames: list[Frame] = []
    frame = sys._getframe(1)
    while frame is not None and len(frames) < limit:
        path = frame.f_code.co_filename
        if not any(part in path for part in _SKIP_PARTS):
            frames.append(Frame(path, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return tuple(frames)


# ------------------------------------------------------------------------------------------ the shim

class _Hit(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint64), ("size", ctypes.c_uint64), ("tag", ctypes.c_int32), ("live", ctypes.c_int32),
                ("front_len", ctypes.c_uint32), ("back_len", ctypes.c_uint32),
                ("front", ctypes.c_uint8 * FRONT_GUARD), ("back", ctypes.c_uint8 * (2 * FRONT_GUARD))]


class _Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "allocations", "live", "live_bytes", "quarantined", "quarantined_bytes", "capture_allocations",
        "unknown_frees", "oom_retries", "pending_hits", "paged")]


_HOOK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64)
ALLOC_EVENT, FREE_EVENT = 0, 1


def build_shim() -> Path:
    """The shim's shared library, built once per source, torch and GPU architecture (cached across processes).
    The architecture comes from NVML: asking torch would initialize CUDA, after which no allocator can be swapped."""
    from gpu_memsafety.util import cuda_build
    return cuda_build.build_library("guard_alloc", SOURCE, visible_capability(),
                                    extra_ldflags=cuda_build.driver_ldflags())


def visible_capability() -> tuple[int, int]:
    """The compute capability of the first GPU this process sees (CUDA_VISIBLE_DEVICES applied), from NVML."""
    from gpu_memsafety.util.gpus import discover
    from gpu_memsafety.util import gpus
    disc = discover()
    devices, why = gpus.visible([(g.index, g.uuid) for g in disc.gpus], os.environ.get("CUDA_VISIBLE_DEVICES"))
    for device in devices:
        for gpu in disc.gpus:
            if gpu.uuid == device.uuid or gpu.index == device.index:
                return gpu.capability
    raise AllocatorUnavailable(f"needs the compute capability of a visible GPU; NVML found none ({disc.nvml or why})")


class CudaGuardAllocator:
    """The shim installed as torch's CUDA allocator, and the Python record of each allocation."""

    def __init__(self, library: Path, placement: str) -> None:
        self.placement = placement
        self.describe = f"gpu-memsafety guard allocator ({placement}) from {library}"
        self._lib = ctypes.CDLL(str(library))
        self._declare()
        rc = self._lib.gms_configure(PLACEMENT_CODES[placement], QUARANTINE_BYTES, QUARANTINE_COUNT)
        if rc != 0:
            raise AllocatorUnavailable(f"the shim refused placement {placement!r} (code {rc})")
        self._tags: list[str] = [BEFORE_TESTS]
        self._test = BEFORE_TESTS
        self._live: dict[int, Allocation] = {}
        self._freed: dict[int, Allocation] = {}
        self._by_test: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        self._hits: Any = None
        self._hook = _HOOK(self._on_event)     # kept for the life of the process: the shim holds its address
        self._lib.gms_set_hook(self._hook)

    def _declare(self) -> None:
        lib = self._lib
        lib.gms_configure.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64]
        lib.gms_set_hook.argtypes = [_HOOK]
        lib.gms_set_tag.argtypes = [ctypes.c_int32]
        lib.gms_set_page_window.argtypes = [ctypes.c_int64, ctypes.c_int64]
        lib.gms_check.argtypes = [ctypes.POINTER(_Hit), ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        lib.gms_get_info.argtypes = [ctypes.POINTER(_Info)]
        lib.gms_last_error.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.gms_fence.argtypes = []

    def install(self) -> None:
        import torch
        plug = torch.cuda.memory.CUDAPluggableAllocator(str(self._library_path()), "gms_malloc", "gms_free")
        torch.cuda.memory.change_current_allocator(plug)
        self._plug = plug

    def _library_path(self) -> str:
        return str(self._lib._name)

    # -- the callback: called by the shim on every allocation and free (any thread, GIL taken by ctypes)
    def _on_event(self, event: int, ident: int, size: int, device: int, ptr: int) -> None:
        try:
            if event == ALLOC_EVENT:
                alloc = Allocation(ident, size, device, self._test, capture_stack(), ptr)
                with self._lock:
                    self._live[ident] = alloc
                    self._by_test.setdefault(self._test, []).append(ident)
            else:
                with self._lock:
                    alloc = self._live.pop(ident, None)
                    if alloc is not None:
                        self._freed[ident] = _replace_freed(alloc, self._test)
        except BaseException:   # noqa: BLE001 - an exception must never unwind into the shim
            pass

    def begin(self, test: str) -> None:
        self._test = test
        self._tags.append(test)
        self._lib.gms_set_tag(len(self._tags) - 1)

    def set_page_window(self, lo: int, hi: int) -> None:
        self._lib.gms_set_page_window(lo, hi)

    def check(self) -> CheckResult:
        if self._hits is None:
            self._hits = (_Hit * MAX_HITS)()   # 3 MiB, made once
        hits = self._hits
        found = ctypes.c_int(0)
        status = self._lib.gms_check(hits, MAX_HITS, ctypes.byref(found))
        result = CheckResult()
        with self._lock:
            for i in range(min(found.value, MAX_HITS)):
                h = hits[i]
                alloc = self._live.get(h.id) or self._freed.get(h.id) or Allocation(h.id, h.size, -1, self._tags[h.tag])
                result.hits.append(GuardHit(alloc, bytes(h.front[: h.front_len]), bytes(h.back[: h.back_len]),
                                            bool(h.live)))
            self._freed.clear()     # released by this check: their guards are gone
        result.truncated = max(0, found.value - MAX_HITS)
        if status != 0:
            result.error = self.last_error() or f"CUDA error {status} during the guard check"
        return result

    def last_error(self) -> str:
        buf = ctypes.create_string_buffer(1024)
        self._lib.gms_last_error(buf, len(buf))
        return buf.value.decode(errors="replace")

    def counters(self) -> Counters:
        info = _Info()
        self._lib.gms_get_info(ctypes.byref(info))
        return Counters(info.allocations, info.live, info.live_bytes, info.quarantined, info.capture_allocations,
                        info.unknown_frees, info.oom_retries, info.paged)

    def allocations_of(self, test: str) -> list[Allocation]:
        with self._lock:
            ids = self._by_test.pop(test, [])
            return [self._live.get(i) or self._freed.get(i) or Allocation(i, 0, -1, test) for i in ids]

    def fence(self) -> None:
        self._lib.gms_fence()

    def close(self) -> None:
        self._lib.gms_set_hook(_HOOK())     # a null hook: no call into Python after this


def _replace_freed(alloc: Allocation, test: str) -> Allocation:
    from dataclasses import replace
    return replace(alloc, freed_in=test)


def install(placement: str) -> CudaGuardAllocator:
    """Build and install the shim; AllocatorUnavailable (what was needed, what was found) when it cannot be.
    Nothing here initializes CUDA (no device query through torch: the architecture comes from NVML), so a suite
    that sets CUDA_VISIBLE_DEVICES in its own conftest.py still decides which GPU it gets."""
    try:
        import torch
    except ImportError as exc:
        raise AllocatorUnavailable(f"needs torch; found none ({exc})") from exc
    if not torch.version.cuda:
        raise AllocatorUnavailable(f"needs a CUDA build of torch; found torch {torch.__version__} built without CUDA")
    early = _already_allocated()
    if early:
        raise AllocatorUnavailable(early)
    from gpu_memsafety.util.build_errors import KernelBuildError, ToolchainMissing
    try:
        library = build_shim()
    except (ToolchainMissing, KernelBuildError) as exc:
        raise AllocatorUnavailable(f"building the guard allocator shim failed: {exc}") from exc
    allocator = CudaGuardAllocator(library, placement)
    try:
        allocator.install()
    except RuntimeError as exc:
        allocator.close()
        raise AllocatorUnavailable(f"torch refused the guard allocator: {exc}; "
                                   f"{_already_allocated() or 'no allocation was seen before it'}") from exc
    return allocator


def _already_allocated() -> str:
    """Names what reached torch's CUDA allocator before it could be swapped ("" when CUDA is not initialized yet:
    torch fixes its allocator when CUDA initializes, whether anything was allocated or not)."""
    import torch
    if not torch.cuda.is_initialized():
        return ""
    try:
        snapshot = torch.cuda.memory_snapshot()
    except RuntimeError:
        snapshot = []
    return describe_early_allocations(snapshot)


def describe_early_allocations(snapshot: Sequence[Any]) -> str:
    """What torch's caching allocator already held (its memory_snapshot) when the guard allocator came too late:
    segments and the blocks in them, so the message names the allocations that were made unguarded."""
    blocks = [(seg.get("device", 0), b.get("size", 0), b.get("state", "")) for seg in snapshot
              for b in seg.get("blocks", ()) if b.get("state") == "active_allocated"]
    sizes = ", ".join(f"{size:,} B on cuda:{dev}" for dev, size, _ in blocks[:8])
    more = f" and {len(blocks) - 8} more" if len(blocks) > 8 else ""
    segs = sum(int(seg.get("total_size", 0)) for seg in snapshot)
    what = (f"CUDA memory was allocated before the guard allocator could be installed ({len(blocks)} live "
            f"allocation(s): {sizes or 'none live'}{more}; {segs:,} B reserved in {len(snapshot)} segment(s))"
            if snapshot else "CUDA was initialized before the guard allocator could be installed (nothing allocated yet)")
    return (f"{what}; torch fixes its allocator when CUDA initializes. Something used the GPU at import or configure "
            "time (a conftest.py, a plugin): move that into a fixture, or load gpu_memsafety before it")
