"""What a pluggable allocator breaks (gpu_memsafety.host.breaks): each break is noticed from torch's own words, from
a call to the entry point that leads to it (on a fake namespace), or from the shim's counters."""
from __future__ import annotations

import types

import pytest

from gpu_memsafety.host import breaks

# torch/csrc/cuda/CUDAPluggableAllocator.cpp's words (torch 2.11), and the guard allocator's own.
WORDS = {
    "cudnn_benchmark": "RuntimeError: CUDAPluggableAllocator does not yet support cacheInfo. If you need it, please file an issue",
    "memory_stats": "RuntimeError: CUDAPluggableAllocator does not yet support getDeviceStats. If you need it, ...",
    "memory_snapshot": "RuntimeError: CUDAPluggableAllocator does not yet support snapshot. If you need it, ...",
    "out_of_memory": "torch.OutOfMemoryError: gpu-memsafety guard allocator: CUDA out of memory: cudaMalloc(512) failed",
    "graph_capture": "RuntimeError: CUDAPluggableAllocator does not yet support getCheckpointState. If you need it",
    "ipc": "RuntimeError: CUDAPluggableAllocator does not yet support getIpcDevPtr. If you need it, ...",
    "expandable_segments": "RuntimeError: CUDAPluggableAllocator ... expandable_segments not supported",
    "private_pool": "RuntimeError: CUDAPluggableAllocator: MemPool needs the caching allocator",
}


@pytest.mark.parametrize("key", sorted(WORDS))
def test_each_break_is_noticed_from_the_allocators_words(key: str) -> None:
    seen = breaks.from_text(WORDS[key])
    assert key in [s.key for s in seen]
    assert breaks.caused_failure(WORDS[key])
    assert breaks.BY_KEY[key].issue in seen[0].reason() or key in ("ipc", "private_pool")


def test_a_failure_of_the_tests_own_is_no_break() -> None:
    text = "AssertionError: expected MemPool stats to match getDeviceStats"
    assert breaks.from_text(text) == [] and not breaks.caused_failure(text)


def fake_torch() -> types.SimpleNamespace:
    calls: list[str] = []
    memory = types.SimpleNamespace(memory_stats=lambda device=None: calls.append("stats") or {},
                                   _set_allocator_settings=lambda s: calls.append(s))
    storage = type("UntypedStorage", (), {"_share_cuda_": lambda self: calls.append("share")})
    return types.SimpleNamespace(memory=memory, UntypedStorage=storage, calls=calls)


def test_watched_calls_are_noted_called_through_or_refused() -> None:
    torch = fake_torch()
    watches = (breaks.Watch("t.memory", "memory_stats", "memory_stats"),
               breaks.Watch("t.memory", "_set_allocator_settings", "expandable_segments",
                            when=breaks._mentions_expandable),
               breaks.Watch("t.UntypedStorage", "_share_cuda_", "ipc", refuse=breaks.IPC_REFUSED),
               breaks.Watch("t.absent", "nothing", "ipc"))
    w = breaks.Watcher()
    w.install(watches, resolve=lambda dotted: _walk(torch, dotted))
    assert w.installed == ["t.memory.memory_stats", "t.memory._set_allocator_settings", "t.UntypedStorage._share_cuda_"]
    torch.memory.memory_stats()
    torch.memory._set_allocator_settings("max_split_size_mb:64")
    torch.memory._set_allocator_settings("expandable_segments:True")
    with pytest.raises(RuntimeError, match="CUDA IPC"):
        torch.UntypedStorage()._share_cuda_()
    assert torch.calls == ["stats", "max_split_size_mb:64", "expandable_segments:True"]
    assert [s.key for s in w.reset()] == ["memory_stats", "expandable_segments", "ipc"]
    assert w.reset() == []
    w.uninstall()
    torch.memory.memory_stats()
    assert w.reset() == []


def _walk(root: object, dotted: str) -> object:
    obj = root
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def test_capture_allocations_are_the_graph_capture_break() -> None:
    assert breaks.from_counters(0) == []
    (seen,) = breaks.from_counters(3)
    assert seen.key == "graph_capture" and "3 allocation(s)" in seen.how


def test_merge_keeps_one_per_break() -> None:
    a, b = breaks.Seen("ipc", "call"), breaks.Seen("ipc", "text")
    assert breaks.merge([a], [b, breaks.Seen("memory_stats", "x")]) == [a, breaks.Seen("memory_stats", "x")]
