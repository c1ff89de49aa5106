"""What a process-wide pluggable allocator breaks in torch, how each break is noticed, and what it means for a test.

A test that meets one of these cannot be judged guarded: it is reported `not applicable` with the break's reason
(and, when the break made the test fail, its own result comes from a run without the guard allocator), never a
crashed session and never a silent clean. Each break is noticed in one or more of three ways:

- words: torch's CUDAPluggableAllocator answers the calls it does not implement with "CUDAPluggableAllocator does
  not yet support X" (torch/csrc/cuda/CUDAPluggableAllocator.cpp); the guard allocator's own out-of-memory says
  "gpu-memsafety guard allocator: CUDA out of memory". Found in the text of a test's failure.
- calls: the Python entry points that lead to a break are wrapped (`watch`) so that a call during a test is noted
  even when the test catches the error; the ones that would go wrong silently (sharing a guarded tensor with
  another process hands out the guard's address) raise instead.
- counters: allocations made during a CUDA graph capture (the shim counts them; their guards are not painted).

Pure except `watch`, which patches torch (imported there).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence


@dataclass(frozen=True)
class Break:
    key: str
    what: str                    # what the test did, in a few words
    issue: str                   # where the limitation is tracked upstream
    consequence: str             # why the test cannot be judged guarded
    words: tuple[str, ...] = ()  # regexes over a failure's text

    def reason(self, detail: str = "") -> str:
        seen = f" ({detail})" if detail else ""
        return (f"{self.what}{seen}: {self.consequence} with a pluggable CUDA allocator ({self.issue}); "
                f"the test ran unguarded")


CUDNN_BENCHMARK = Break("cudnn_benchmark", "cuDNN benchmark mode", "pytorch/pytorch#98481",
                        "cudnn.benchmark asks the allocator for cacheInfo, which a pluggable allocator lacks",
                        (r"does not yet support cacheInfo",))
MEMORY_STATS = Break("memory_stats", "CUDA memory statistics", "pytorch/pytorch#133281",
                     "memory_allocated/memory_stats/reset_peak_memory_stats need the caching allocator's counters",
                     (r"does not yet support (getDeviceStats|resetAccumulatedStats|resetPeakStats)",))
MEMORY_SNAPSHOT = Break("memory_snapshot", "CUDA memory snapshots or history", "pytorch/pytorch#133281",
                        "memory_snapshot/_record_memory_history/OOM observers are the caching allocator's",
                        (r"does not yet support (snapshot|recordHistory|attachOutOfMemoryObserver)",))
OUT_OF_MEMORY = Break("out_of_memory", "out of memory under the guard allocator", "pytorch/pytorch#133280",
                      "guards and the freed-block quarantine need more memory than the caching allocator, and a "
                      "pluggable allocator's out-of-memory is not the caching allocator's (no cache to empty, no "
                      "memory stats in the message)",
                      (r"gpu-memsafety guard allocator: CUDA out of memory",))
GRAPH_CAPTURE = Break("graph_capture", "CUDA graph capture", "pytorch/pytorch#163257",
                      "allocations during a capture cannot be painted (the memset would be captured), frees during "
                      "capture and graph trees' allocator checkpoints are not supported",
                      (r"does not yet support (getCheckpointState|setCheckpointPoolState)",))
EXPANDABLE_SEGMENTS = Break("expandable_segments", "expandable segments", "pytorch/pytorch#147851",
                            "expandable_segments is a setting of the caching allocator, which the guard allocator "
                            "replaces", (r"expandable_segments",))
IPC = Break("ipc", "CUDA IPC (a CUDA tensor shared with another process)", "pytorch/pytorch#133281",
            "the other process would open the guarded block at its base, 256 B before the tensor",
            (r"does not yet support getIpcDevPtr", r"gpu-memsafety: CUDA IPC"))
PRIVATE_POOL = Break("private_pool", "NCCL, symmetric memory or a private memory pool", "pytorch/pytorch#133281",
                     "memory pools and NCCL registration go through the caching allocator's pools",
                     (r"MemPool", r"use_mem_pool", r"ncclMemAlloc"))

BREAKS: tuple[Break, ...] = (CUDNN_BENCHMARK, MEMORY_STATS, MEMORY_SNAPSHOT, OUT_OF_MEMORY, GRAPH_CAPTURE,
                             EXPANDABLE_SEGMENTS, IPC, PRIVATE_POOL)
BY_KEY = {b.key: b for b in BREAKS}
# Words only the pluggable allocator (or the guard allocator) says: a failure with none of these is the test's own.
_ALLOCATOR_WORDS = re.compile(r"CUDAPluggableAllocator|gpu-memsafety guard allocator|gpu-memsafety: CUDA IPC")


@dataclass(frozen=True)
class Seen:
    """A break noticed during one test, and how."""

    key: str
    how: str                     # "failure text", "call to torch.cuda.memory_stats", "2 allocations during capture"

    @property
    def brk(self) -> Break:
        return BY_KEY[self.key]

    def reason(self) -> str:
        return self.brk.reason(self.how)

    def to_json(self) -> dict[str, str]:
        return {"key": self.key, "how": self.how}

    @classmethod
    def from_json(cls, data: Any) -> "Seen":
        return cls(str(data["key"]), str(data["how"]))


def from_text(text: str) -> list[Seen]:
    """Breaks a failure's text names (only where the allocator's own words are in it)."""
    if not _ALLOCATOR_WORDS.search(text):
        return []
    return [Seen(b.key, "failure text: " + _quote(text, b)) for b in BREAKS if any(re.search(w, text) for w in b.words)]


def caused_failure(text: str) -> bool:
    """The failure came from the allocator itself (an unsupported call, the guard allocator's OOM, refused IPC)."""
    return bool(_ALLOCATOR_WORDS.search(text))


def _quote(text: str, brk: Break) -> str:
    """The line of the failure that names the break: pytest's exception line ("E   RuntimeError: ...") first."""
    lines = [line for line in text.splitlines() if any(re.search(w, line) for w in brk.words)]
    lines.sort(key=lambda line: not line.startswith("E "))
    return re.sub(r"^E\s+", "", lines[0].strip())[:200] if lines else ""


def from_counters(capture_allocations: int) -> list[Seen]:
    if capture_allocations <= 0:
        return []
    return [Seen(GRAPH_CAPTURE.key, f"{capture_allocations} allocation(s) made during a capture")]


def merge(*groups: Iterable[Seen]) -> list[Seen]:
    """One entry per break, the first way it was noticed."""
    out: dict[str, Seen] = {}
    for group in groups:
        for seen in group:
            out.setdefault(seen.key, seen)
    return list(out.values())


# ---------------------------------------------------------------------------------------------- watch

@dataclass(frozen=True)
class Watch:
    """One Python entry point to wrap: module path, attribute, the break it leads to, and whether to refuse it."""

    owner: str                   # dotted path of the object holding the attribute
    name: str
    key: str
    refuse: str = ""             # "" to call through; else the error to raise instead (silent corruption ahead)
    when: Callable[..., bool] | None = None   # only when the arguments say so (None: always)


def _mentions_expandable(*args: Any, **kwargs: Any) -> bool:
    return any("expandable_segments" in str(a) for a in (*args, *kwargs.values()))


def _nccl_backend(*args: Any, **kwargs: Any) -> bool:
    backend = kwargs.get("backend", args[0] if args else None)
    return backend is None or "nccl" in str(backend).lower()


IPC_REFUSED = ("gpu-memsafety: CUDA IPC of a guarded tensor refused: the guard allocator hands out pointers 256 B "
               "inside their cudaMalloc block, and the receiving process would open the block at its base")

WATCHES: tuple[Watch, ...] = (
    Watch("torch.cuda.memory", "memory_stats", MEMORY_STATS.key),
    Watch("torch.cuda.memory", "reset_peak_memory_stats", MEMORY_STATS.key),
    Watch("torch.cuda.memory", "memory_snapshot", MEMORY_SNAPSHOT.key),
    Watch("torch.cuda.memory", "_record_memory_history", MEMORY_SNAPSHOT.key),
    Watch("torch.cuda.memory", "_set_allocator_settings", EXPANDABLE_SEGMENTS.key, when=_mentions_expandable),
    Watch("torch.cuda.memory", "use_mem_pool", PRIVATE_POOL.key),
    Watch("torch.cuda.memory.MemPool", "__init__", PRIVATE_POOL.key),
    Watch("torch.cuda.graphs.CUDAGraph", "capture_begin", GRAPH_CAPTURE.key),
    Watch("torch.UntypedStorage", "_share_cuda_", IPC.key, refuse=IPC_REFUSED),
    Watch("torch.distributed", "init_process_group", PRIVATE_POOL.key, when=_nccl_backend),
)


class Watcher:
    """Wraps the WATCHES entry points (those that exist in this torch) and collects the breaks called since `reset`."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.installed: list[str] = []
        self._undo: list[Callable[[], None]] = []

    def reset(self) -> list[Seen]:
        seen, self.seen = self.seen, []
        return seen

    def install(self, watches: Sequence[Watch] = WATCHES, resolve: Callable[[str], Any] | None = None) -> None:
        resolve = resolve or _resolve
        for watch in watches:
            try:
                owner = resolve(watch.owner)
            except (ImportError, AttributeError):
                continue        # not in this torch: nothing can lead there
            original = getattr(owner, watch.name, None)
            if original is None:
                continue
            setattr(owner, watch.name, self._wrap(watch, original))
            self.installed.append(f"{watch.owner}.{watch.name}")
            self._undo.append(functools.partial(setattr, owner, watch.name, original))

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _wrap(self, watch: Watch, original: Callable[..., Any]) -> Callable[..., Any]:
        seen = self.seen_list

        @functools.wraps(original)
        def watched(*args: Any, **kwargs: Any) -> Any:
            if watch.when is None or watch.when(*args, **kwargs):
                seen().append(Seen(watch.key, f"call to {watch.owner}.{watch.name}"))
                if watch.refuse:
                    raise RuntimeError(watch.refuse)
            return original(*args, **kwargs)
        return watched

    def seen_list(self) -> list[Seen]:
        return self.seen


def _resolve(dotted: str) -> Any:
    """The object at a dotted path, through modules already imported only: watching never imports torch (a suite
    that does not use it pays nothing; where the guard allocator is installed, torch is imported already)."""
    import sys
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        obj = module
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"{dotted}: not imported")
