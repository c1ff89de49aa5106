"""The detector modes as one policy table: what each mode runs, in which environment, under which deadline,
and what it can see.

Pure (no torch): the runner reads it to start processes, the worker to pick what to do with a case, the judge
to know which detectors were asked for and which of them need a covered buffer. A new mode is a row here,
not a name compared in three modules.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from gpu_memsafety.placement import layout as L
from gpu_memsafety.model import GUARD, GUARD_PAGE, MEMCHECK, POISON, RACECHECK, SYNCCHECK, UNINIT

# What the worker does with a case.
ONCE = "once"        # one launch on guarded buffers, then the marker check
REPEAT_POISON = "poison"   # a baseline launch, then one launch per buffer and region with its markers in another pattern
REPEAT_STRESS = "stress"   # production conditions, N launches
REPEAT_FILL = "fill"       # launches with two fill patterns in never-written bytes (harness/detectors/fillcheck.py)
WORKER_ACTIONS = (ONCE, REPEAT_POISON, REPEAT_STRESS, REPEAT_FILL)

# memcheck slows kernels 16-30x (measured on the H200) and a sanitized process starts slower.
SANITIZER_SLOWDOWN = 30.0

# Detectors that see nothing unless some buffer is covered (placed by the mode's watch placement: an exact
# allocation of its own, or ended against an unmapped page). Guard markers check every guarded buffer; poison
# poisons every buffer.
NEEDS_WATCH: frozenset[str] = frozenset({MEMCHECK, GUARD_PAGE})

# Which buffers get the mode's watch placement ("covered"): a scenario's `cover`, or the run-wide `--cover`.
COVER_ALL = "all"            # every buffer the adapter allocates through the context (the default)
COVER_WATCHED = "watched"    # only the buffers allocated with watch=True (the behaviour before issue 20)
COVERS = (COVER_ALL, COVER_WATCHED)
COVER_SCENARIO = "scenario"  # run-wide option: each scenario's own `cover` (the default)
COVER_OPTIONS = (COVER_SCENARIO, *COVERS)


def resolve_cover(option: str, scenario_cover: str) -> str:
    """What a case covers: the run-wide option (`--cover`), unless it defers to the scenario's own `cover`."""
    if option not in COVER_OPTIONS:
        raise ValueError(f"cover option {option!r} is not one of {', '.join(COVER_OPTIONS)}")
    return _known(scenario_cover if option == COVER_SCENARIO else option)


def covers(cover: str, watch: bool) -> bool:
    """The one place that decides whether a buffer is covered (gets the mode's watch placement): every buffer
    under `all`, only a buffer allocated with watch=True under `watched`."""
    return _known(cover) == COVER_ALL or watch


def _known(cover: str) -> str:
    if cover not in COVERS:
        raise ValueError(f"cover {cover!r} is not one of {', '.join(COVERS)}")
    return cover


@dataclass(frozen=True)
class Mode:
    name: str
    sanitizer: str | None          # compute-sanitizer tool, or None
    watch_placement: str           # where covered buffers sit (layout placement; see covers)
    check_markers: bool            # the worker verifies guard markers after the launch
    worker_mode: str               # what the worker does: one of WORKER_ACTIONS
    detectors: tuple[str, ...]     # what this mode can see
    summary: str
    caching_allocator: bool = False  # torch's caching allocator hides overreads and reuses addresses: off unless production
    needs_gpu: bool = False        # the mode itself (not only the kernel) needs a CUDA GPU
    deadline_factor: float = 1.0   # x the scenario's deadline (poison: one launch per buffer and region, at least two)
    per_iteration: bool = False    # the deadline is per iteration (stress)
    # a second pass with the covered buffers in this placement when the first ran through (guard_page: front pages,
    # so that a read or write before a tensor's start faults too); None: one pass
    then_placement: str | None = None

    def placement(self, sanitized: bool) -> str:
        """Where the worker puts covered buffers (modes.covers): a sanitizer mode that runs without its sanitizer keeps guards
        (a flush end would only cost the back guard)."""
        return L.GUARDED if self.sanitizer and not sanitized else self.watch_placement

    def deadline(self, timeout_s: float, *, sanitized: bool, iterations: int = 1, scale: float = 1.0) -> float:
        """Seconds one case may take in this mode."""
        factor = self.deadline_factor * (SANITIZER_SLOWDOWN if sanitized else 1.0)
        if self.per_iteration:
            factor *= max(1, iterations)
        return timeout_s * factor * scale

    def env(self) -> dict[str, str | None]:
        """Environment the worker runs under (None removes a variable)."""
        return {"PYTORCH_NO_CUDA_MEMORY_CACHING": None if self.caching_allocator else "1"}

    def case_placement(self, watch_placement: str, detectors: tuple[str, ...]) -> str:
        """Where a case's covered buffers go: the run's watch placement (Job.watch_placement) when a detector of
        this mode that the scenario uses needs a covered buffer; front and back guards otherwise (the memcheck
        placement strips the markers' guards, and no detector of the case would look past the end)."""
        return watch_placement if self.needs_watch(detectors) else L.GUARDED

    def needs_watch(self, detectors: tuple[str, ...] | None = None) -> tuple[str, ...]:
        """This mode's detectors (among `detectors`, the scenario's) that see nothing without a covered buffer."""
        used = self.detectors if detectors is None else tuple(d for d in self.detectors if d in detectors)
        return tuple(d for d in used if d in NEEDS_WATCH)

    @property
    def guarded(self) -> bool:
        """The mode places buffers with guards (all but production runs)."""
        return self.worker_mode != REPEAT_STRESS


MODES: Mapping[str, Mode] = {m.name: m for m in (
    Mode("guard", None, L.GUARDED, True, ONCE, (GUARD,),
         "guard markers only, no sanitizer (near-native speed; overwrites only)"),
    Mode("memcheck", "memcheck", L.EXACT, False, ONCE, (MEMCHECK,), "compute-sanitizer memcheck only"),
    Mode("both", "memcheck", L.EXACT, True, ONCE, (GUARD, MEMCHECK), "guard markers and memcheck in one run"),
    # Two passes (back pages, then front pages) when the case runs through; after a fault, reruns with one buffer
    # on a page at a time name it and its side (harness/detectors/pageprobe.py; the runner runs them, in the case's budget).
    Mode("guard_page", None, L.GUARD_PAGE_BACK, True, ONCE, (GUARD, GUARD_PAGE),
         "covered tensors flush against an unmapped page, then start right after one: accesses past the end and "
         "before the start fault in hardware, no sanitizer",
         needs_gpu=True, deadline_factor=2.0, then_placement=L.GUARD_PAGE_FRONT),
    Mode("poison", None, L.GUARDED, True, REPEAT_POISON, (GUARD, POISON),
         "guards in two poison patterns; an output that changes is an overread", deadline_factor=2.0),
    Mode("stress", None, L.GUARDED, False, REPEAT_STRESS, (),
         "production conditions (caching allocator on, no guards), repeated: how often does it crash?",
         caching_allocator=True, per_iteration=True),
    # Two runs when clean; 3 + one per buffer when a result depends on never-written bytes (fillcheck).
    Mode("uninit", None, L.GUARDED, True, REPEAT_FILL, (GUARD, UNINIT),
         "two fill patterns in every byte the host did not write: reads of never-written memory, outputs left unwritten",
         deadline_factor=12.0),
    # racecheck tracks every shared-memory access: far slower than memcheck (DESIGN: 1,000x and more).
    Mode("racecheck", "racecheck", L.GUARDED, False, ONCE, (RACECHECK,),
         "compute-sanitizer racecheck: shared-memory races, naming the kernel and both source lines",
         deadline_factor=10.0),
    Mode("synccheck", "synccheck", L.GUARDED, False, ONCE, (SYNCCHECK,),
         "compute-sanitizer synccheck: barriers used wrongly (divergent __syncthreads), naming kernel and line"),
)}
