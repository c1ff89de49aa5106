"""What a kernel adapter gets in the worker: the device, an arena of guarded buffers, and a seed.

Adapters ask for buffers by name; `watch=True` marks the buffer whose bounds the scenario is about: in
memcheck mode it ends flush with its allocation, in guard-page mode flush against an unmapped page, in
poison mode its guards hold the poison pattern; otherwise it gets front and back guards.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from harness import layout as L
from harness.errors import Unsupported  # noqa: F401  (re-exported for adapters)
from harness.guard import Arena


@dataclass
class RunInfo:
    kernel: str
    outputs: dict[str, torch.Tensor] = field(default_factory=dict)
    launches: int = 1
    notes: dict[str, Any] = field(default_factory=dict)
    relaunch: Callable[[], Any] | None = None   # launches the kernel again on the same buffers (benchmarks)


@dataclass
class RunContext:
    device: torch.device
    arena: Arena
    seed: int = 0
    watch_placement: str = L.GUARDED
    production: bool = False          # stress mode: plain torch allocations, no guards, caching allocator on
    watched: set[str] = field(default_factory=set)

    def tensor(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, *, watch: bool = False) -> torch.Tensor:
        if self.production:
            return torch.empty(shape, dtype=dtype, device=self.device)
        if watch:
            self.watched.add(name)
        placement = self.watch_placement if watch else L.GUARDED
        return self.arena.tensor(name, shape, dtype, placement=placement)

    def rows(self, name: str, *, rows: int, row_bytes: int, row_stride: int, used_rows: int,
             dtype: torch.dtype = torch.uint8, watch: bool = False) -> torch.Tensor:
        if self.production:
            flat = torch.empty(rows * row_stride // _itemsize(dtype), dtype=dtype, device=self.device)
            return flat.as_strided((rows, row_bytes // _itemsize(dtype)), (row_stride // _itemsize(dtype), 1))
        if watch:
            self.watched.add(name)
        placement = self.watch_placement if watch else L.GUARDED
        return self.arena.rows(name, rows=rows, row_bytes=row_bytes, row_stride=row_stride,
                               used_rows=used_rows, dtype=dtype, placement=placement)

    def generator(self) -> torch.Generator:
        gen = torch.Generator(device="cpu")
        gen.manual_seed(self.seed)
        return gen

    def randn(self, shape: tuple[int, ...], dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        """Deterministic random data made on the CPU (same on every device), then moved."""
        return torch.randn(shape, generator=self.generator(), dtype=torch.float32).to(dtype).to(self.device)

    def arch(self) -> str:
        if self.device.type != "cuda":
            return "cpu"
        major, minor = torch.cuda.get_device_capability(self.device)
        return f"sm_{major}{minor}"


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()
