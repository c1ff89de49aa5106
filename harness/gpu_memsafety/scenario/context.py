"""What a kernel adapter gets in the worker (`RunContext`) and what it gives back (`RunInfo`).

An adapter is a function `(case, ctx: RunContext) -> RunInfo` (gpu_memsafety.scenario.adapter.Adapter). It asks the
context for every buffer the kernel touches, by name, instead of calling torch.empty: those buffers get
guard markers (0xA5) around them and the placement each detector needs.

Every buffer is covered by default: in memcheck modes (memcheck, both) each one is an exact allocation of its
own (placement `exact`), so memcheck sees the first byte past its end and the first before its start; in guard-page mode each one ends before
an unmapped page; in the other modes every buffer has front and back guards. `watch=True` is a hint: it marks
a buffer whose bounds the scenario is about (poison mode surveys watched buffers first), and it becomes the
selection when the scenario narrows cover to watched buffers (`Scenario(cover="watched")`, or a run with
`--gpu-memsafety-cover watched`): then only watched buffers are placed for memcheck or the guard page, and the others keep
their front and back guards, where memcheck and the guard page cannot see past their end.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from gpu_memsafety.placement import layout as L
from gpu_memsafety.placement.guard import Arena
from gpu_memsafety.cover import COVER_ALL, covers


@dataclass
class RunInfo:
    """What an adapter returns after launching its kernel.

    kernel: the kernel's name as the reports show it (and as compute-sanitizer names it, for attribution).
    outputs: tensors the kernel produced; poison mode compares them between two guard patterns, so an
        overread that changes a result is seen. Leave empty when the kernel has no output to compare.
    launches: how many kernel launches the adapter made (0 means nothing ran: memcheck then checked nothing).
    notes: anything JSON-serialisable worth keeping in the report's details.
    relaunch: a function that launches the kernel again on the same buffers (`make bench` times it).
    """

    kernel: str
    outputs: dict[str, torch.Tensor] = field(default_factory=dict)
    launches: int = 1
    notes: dict[str, Any] = field(default_factory=dict)
    relaunch: Callable[[], Any] | None = None


@dataclass
class RunContext:
    """The worker's side of one case run, handed to the adapter.

    device: where to run (cuda, or cpu under the Triton interpreter).
    arena: the guarded allocations of this case (gpu_memsafety.placement.guard.Arena); adapters use `tensor` and `rows`.
    seed: use `randn`/`generator` for data, so every run and device sees the same inputs.
    watch_placement: where covered buffers go in this mode (set by the harness, not the adapter).
    cover: which buffers are covered: "all" (every buffer) or "watched" (those allocated with `watch=True`);
        set by the harness from the scenario's `cover` and the run's `--gpu-memsafety-cover` (gpu_memsafety.detectors.modes.resolve_cover).
    production: stress mode: plain torch allocations, no guards, caching allocator on.
    watched: names of the buffers allocated with `watch=True`.
    covered: (property) names of the buffers that got `watch_placement` (none where it is the guarded placement).
    """

    device: torch.device
    arena: Arena
    seed: int = 0
    watch_placement: str = L.GUARDED
    production: bool = False
    watched: set[str] = field(default_factory=set)
    cover: str = COVER_ALL
    # A guard-page rerun (harness/gpu_memsafety/detectors/pageprobe.py): exactly these buffers get these placements, every other one is
    # guarded, whatever the cover and the adapter's watch= say. None: the usual placement.
    placements: dict[str, str] | None = None

    @property
    def covered(self) -> set[str]:
        return {name for name, buf in self.arena.buffers.items() if buf.layout.placement != L.GUARDED}

    @property
    def results_checkable(self) -> bool:
        """Whether an adapter may check the kernel's results against a model: not under memcheck (placement
        `exact`), which stops a kernel at its first bad access, so a buggy kernel's outputs stay partly unwritten
        there (they hold the fill); the bad access itself is memcheck's finding."""
        return self.watch_placement != L.EXACT

    def tensor(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, *, watch: bool = False) -> torch.Tensor:
        """A contiguous tensor named `name` with guard markers around it (its contents are the marker byte 0xA5
        until the adapter writes them), placed so that this mode's detectors see accesses past its end (every
        buffer is covered unless the scenario narrows cover to watched ones). `watch=True`: a buffer whose
        bounds the scenario is about (see the module's docstring)."""
        if self.production:
            return torch.empty(shape, dtype=dtype, device=self.device)
        return self.arena.tensor(name, shape, dtype, placement=self.placement(name, watch))

    def rows(self, name: str, *, rows: int, row_bytes: int, row_stride: int, used_rows: int,
             dtype: torch.dtype = torch.uint8, watch: bool = False) -> torch.Tensor:
        """A 2-D view of `rows` rows of `row_bytes` logical bytes each, `row_stride` bytes apart; only the first
        `used_rows` may be written. Row padding (row_stride - row_bytes) and unused rows hold markers, so a
        write there is reported as `row_padding` or `unused_row` of this buffer."""
        if self.production:
            flat = torch.empty(rows * row_stride // _itemsize(dtype), dtype=dtype, device=self.device)
            return flat.as_strided((rows, row_bytes // _itemsize(dtype)), (row_stride // _itemsize(dtype), 1))
        return self.arena.rows(name, rows=rows, row_bytes=row_bytes, row_stride=row_stride,
                               used_rows=used_rows, dtype=dtype, placement=self.placement(name, watch))

    def placement(self, name: str, watch: bool) -> str:
        """Where buffer `name` goes: a guard-page rerun's own placement; else the mode's watch placement when it is
        covered (gpu_memsafety.detectors.modes.covers decides, from `cover` and the watch hint), else front and back guards."""
        if watch:
            self.watched.add(name)
        if self.placements is not None:
            return self.placements.get(name, L.GUARDED)
        if self.watch_placement == L.GUARDED or not covers(self.cover, watch):
            return L.GUARDED
        return self.watch_placement

    def generator(self) -> torch.Generator:
        """A CPU generator seeded with the case's seed."""
        gen = torch.Generator(device="cpu")
        gen.manual_seed(self.seed)
        return gen

    def randn(self, shape: tuple[int, ...], dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        """Deterministic random data made on the CPU (same on every device), then moved."""
        return torch.randn(shape, generator=self.generator(), dtype=torch.float32).to(dtype).to(self.device)

    def arch(self) -> str:
        """"sm_90"-style architecture of the device, or "cpu"."""
        if self.device.type != "cuda":
            return "cpu"
        major, minor = torch.cuda.get_device_capability(self.device)
        return f"sm_{major}{minor}"


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()
