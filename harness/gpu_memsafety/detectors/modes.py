"""The detector modes as one policy table: which detectors each mode runs; everything else follows from them.

Pure (no torch): the runner reads it to start processes, the worker to pick the actions that run a case, the
judge to know which detectors were asked for and which of them need a covered buffer. A mode's sanitizer, the
placement of its covered buffers, whether the guard markers are checked, the worker actions and the deadline
all come from its detectors (gpu_memsafety.detectors.registry): a new detector is its module and one row here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from gpu_memsafety.detectors.registry import UNITS
from gpu_memsafety.detectors.actions import ONCE, STRESS
from gpu_memsafety.model import GUARD, GUARD_PAGE, MEMCHECK, POISON, RACECHECK, SYNCCHECK, TRACE, TRACE_RACE, UNINIT
from gpu_memsafety.placement import layout as L

# A sanitized case's deadline is its scenario's timeout_s times this. memcheck slows kernels 16-30x, but every
# scenario's timeout_s is already 4-200x its slowest case under memcheck (H200, session 8: 30 s at most, a cold
# nvcc build; 0.03-15 s warm), so x2 covers a loaded machine. It was x30 until a case that hung under memcheck
# in MODE=both (sampling_threshold_overread, session 8) held its worker past 250 s towards a 7,200 s deadline:
# a hung case must cost minutes, not hours.
SANITIZER_SLOWDOWN = 2.0

# Detectors that see nothing unless some buffer is covered (placed by the mode's watch placement: an exact
# allocation of its own, or ended against an unmapped page). Guard markers check every guarded buffer; poison
# poisons every buffer.
NEEDS_WATCH: frozenset[str] = frozenset(name for name, d in UNITS.items() if d.needs_cover)


class ModeError(ValueError):
    """A mode row whose detectors cannot share one process (two sanitizer tools, two placements)."""


@dataclass(frozen=True)
class Mode:
    name: str
    detectors: tuple[str, ...]     # what this mode can see (gpu_memsafety.detectors.registry names)
    summary: str
    # Worker actions (gpu_memsafety.detectors.actions.ACTIONS) run for each case, in order, when the row names them
    # (stress); () : those of the detectors the case's scenario uses, or the plain launch (actions_for).
    actions: tuple[str, ...] = ()
    caching_allocator: bool = False  # torch's caching allocator hides overreads and reuses addresses: off unless production
    per_iteration: bool = False    # the deadline is per iteration (stress)
    # A staged mode: each case runs through these modes in turn (those whose detectors its scenario uses), one
    # process kind each, and is judged once from all of them (gpu_memsafety.judge.combine). () : one process kind.
    stages: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [d for d in self.detectors if d not in UNITS]
        if unknown:
            raise ModeError(f"mode {self.name}: unknown detector(s) {unknown}; known: {', '.join(UNITS)}")
        if self.stages:
            return                  # each stage is a mode row of its own, checked as such
        tools = {UNITS[d].sanitizer for d in self.detectors} - {None}
        places = {UNITS[d].placement for d in self.detectors} - {L.GUARDED}
        if len(tools) > 1 or len(places) > 1:
            raise ModeError(f"mode {self.name}: {', '.join(self.detectors)} need {sorted(tools)} and {sorted(places)}: "
                            "one process runs under one sanitizer tool, with one placement")

    def actions_for(self, used: Sequence[str]) -> tuple[str, ...]:
        """The worker actions for a case whose scenario uses `used`: the row's own when it names them (stress),
        else those of its detectors the scenario uses (no survey for a detector that judges nothing), else the
        plain launch."""
        if self.actions:
            return self.actions
        derived = (UNITS[d].action for d in self.detectors if d in used)
        return tuple(dict.fromkeys(a for a in derived if a)) or (ONCE,)

    @property
    def sanitizer(self) -> str | None:
        """The compute-sanitizer tool this mode's processes run under, or None (a staged mode: see `tools`)."""
        if self.stages:
            return None
        return next((t for t in (UNITS[d].sanitizer for d in self.detectors) if t), None)

    @property
    def tools(self) -> tuple[str, ...]:
        """Every compute-sanitizer tool a run of this mode needs (its stages' too)."""
        modes = [MODES[s] for s in self.stages] if self.stages else [self]
        return tuple(dict.fromkeys(t for m in modes if (t := m.sanitizer)))

    @property
    def watch_placement(self) -> str:
        """Where covered buffers go: the placement a detector of this mode needs, else front and back guards."""
        return next((p for p in (UNITS[d].placement for d in self.detectors) if p != L.GUARDED), L.GUARDED)

    @property
    def check_markers(self) -> bool:
        """The worker verifies the guard markers after each launch."""
        return GUARD in self.detectors

    @property
    def needs_gpu(self) -> bool:
        """The mode itself (not only the kernel) needs a CUDA GPU."""
        return any(UNITS[d].needs_gpu for d in self.detectors)

    @property
    def deadline_factor(self) -> float:
        """x the scenario's deadline: the slowest of its detectors (poison: one launch per buffer and region)."""
        return max((UNITS[d].deadline_factor for d in self.detectors), default=1.0)

    def placement(self, sanitized: bool) -> str:
        """Where the worker puts covered buffers (gpu_memsafety.cover.covers): a sanitizer mode that runs without its
        sanitizer keeps guards (a flush end would only cost the back guard)."""
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
        return STRESS not in self.actions


MODES: Mapping[str, Mode] = {m.name: m for m in (
    Mode("guard", (GUARD,), "guard markers only, no sanitizer (near-native speed; overwrites only)"),
    Mode("memcheck", (MEMCHECK,), "compute-sanitizer memcheck only"),
    # The trace runs where Triton is interpreted (no GPU): memcheck's stand-in for Triton kernels (detectors/trace.py).
    # The trace's race check (detectors/trace_race.py) records its program instances in the same run.
    Mode("both", (GUARD, MEMCHECK, TRACE, TRACE_RACE), "guard markers and memcheck in one run (without a GPU: the "
                                                       "interpreter's trace of every Triton access instead of memcheck, "
                                                       "and its races between program instances)"),
    # Two passes (back pages, then front pages) when the case runs through; after a fault, reruns with one buffer
    # on a page at a time name it and its side (gpu_memsafety.detectors.pageprobe; the runner runs them, in the case's budget).
    Mode("guard_page", (GUARD, GUARD_PAGE),
         "covered tensors flush against an unmapped page, then start right after one: accesses past the end and "
         "before the start fault in hardware, no sanitizer"),
    Mode("poison", (GUARD, POISON), "guards in two poison patterns; an output that changes is an overread"),
    Mode("stress", (), "production conditions (caching allocator on, no guards), repeated: how often does it crash?",
         actions=(STRESS,), caching_allocator=True, per_iteration=True),
    # Two runs when clean; 3 + one per buffer when a result depends on never-written bytes (fillcheck).
    Mode("uninit", (GUARD, UNINIT),
         "two fill patterns in every byte the host did not write: reads of never-written memory, outputs left unwritten"),
    Mode("racecheck", (RACECHECK,), "compute-sanitizer racecheck: shared-memory races, naming the kernel and both source lines"),
    Mode("synccheck", (SYNCCHECK,),
         "compute-sanitizer synccheck: barriers used wrongly (divergent __syncthreads), naming kernel and line"),
    # The complete mode's second stage: what memcheck cannot see, without a sanitizer. After a memcheck stage poison
    # leaves the guards of covered buffers to it (Job.covered_seen) and surveys row padding, unused rows and the
    # guards of buffers memcheck did not cover.
    Mode("values", (GUARD, POISON, UNINIT),
         "poison where memcheck cannot see (row padding, unused rows, uncovered buffers) and two fill patterns "
         "(reads of never-written memory, outputs left unwritten), no sanitizer"),
    Mode("complete", (GUARD, MEMCHECK, POISON, UNINIT, TRACE, TRACE_RACE, RACECHECK, SYNCCHECK),
         "every detector that applies to a case, one judgement: memcheck and the guard markers in one sanitized "
         "process, then poison (inside allocations) and uninit, then racecheck and synccheck for kernels whose "
         "scenario uses them", stages=("both", "values", "racecheck", "synccheck")),
)}
DEFAULT_MODE = "complete"
QUICK_MODE = "both"      # `make sanitize-quick`: memcheck and the markers only, a partial gate for pull requests

for _mode in MODES.values():
    for _stage in _mode.stages:
        if _stage not in MODES or MODES[_stage].stages:
            raise ModeError(f"mode {_mode.name}: stage {_stage!r} is not a mode of one process kind")
