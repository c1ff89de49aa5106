"""Guard-page reruns: from a fault with several buffers on guard pages to the one buffer, and its direction.

A guard-page fault ends the CUDA context and says neither which buffer's page was touched nor on which side.
Every covered buffer sits on a page (back pages in the first pass, front pages in the second: harness/gpu_memsafety/engine/modes.py,
worker), so the runner reruns the case in fresh processes with one buffer paged at a time (a process per rerun
that faults: the context is lost) and this module decides what to rerun and what the reruns say:

1. name: each candidate alone on the side that faulted (watched buffers first). The buffers whose solo run faults
   are named; with one candidate the faulting run itself names it.
2. direction: each named buffer alone on the other side. A fault with the back page only is past_end, with the
   front page only before_start; a fault with both (or a rerun that could not run) cannot be told.
3. control: when every candidate faulted alone, or a named buffer faulted on both sides, once with no page at all:
   a fault there is not a guard-page access (a wild access, a crash of its own), and nothing is named.

Bounded: at most MAX_RERUNS reruns per case (a probe over the cap is listed as not run, and said so), and the
runner stops when RERUN_BUDGET_FACTOR x the case's deadline is spent. Pure (no torch, no processes): the runner
runs the probes, the judge (GuardPageDetector) turns `conclude()` into findings.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Mapping, Sequence

from gpu_memsafety.placement import layout as L
from gpu_memsafety.model import BEFORE_START, GUARD, PAST_END

BACK, FRONT = "back", "front"
SIDES = {L.GUARD_PAGE_BACK: BACK, L.GUARD_PAGE_FRONT: FRONT}
PLACEMENT = {BACK: L.GUARD_PAGE_BACK, FRONT: L.GUARD_PAGE_FRONT}
REGION = {BACK: PAST_END, FRONT: BEFORE_START}
# Region of a guard-page finding whose direction cannot be told: not a region of the vocabulary, so an
# expectation is not held to its region (model.ExpectedFinding.matches), and the finding says why.
UNTOLD = f"{BEFORE_START}|{PAST_END}"
# Reruns per case (each a worker process when it faults) and the wall time they may take together, in units of the
# case's own deadline (harness/gpu_memsafety/engine/modes.py Mode.deadline).
MAX_RERUNS = 8
RERUN_BUDGET_FACTOR = 4.0

NAME, DIRECTION, CONTROL = "name", "direction", "control"
FAULTED, CLEAN = "fault", "ok"       # a rerun's status: the worker's (gpu_memsafety.engine.job), or "timeout"/"crashed"


def other(side: str) -> str:
    return FRONT if side == BACK else BACK


@dataclass(frozen=True)
class Probe:
    """One rerun: these buffers on a page on these sides, every other buffer guarded (() : no page at all)."""

    pages: tuple[tuple[str, str], ...]
    why: str

    def placements(self) -> dict[str, str]:
        """Buffer name -> layout placement, what the worker's job entry carries (gpu_memsafety.engine.job.JobCase)."""
        return {name: PLACEMENT[side] for name, side in self.pages}

    @property
    def label(self) -> str:
        return ", ".join(f"{name} {side} page" for name, side in self.pages) or "no page"


@dataclass(frozen=True)
class ProbeRun:
    """What one rerun did: its status (gpu_memsafety.engine.job statuses: "fault" when the context was lost, "ok" when it ran
    through; or "timeout", "crashed"), its wall time, and the buffers whose guard markers it found changed."""

    probe: Probe
    status: str
    seconds: float = 0.0
    message: str = ""
    written: tuple[str, ...] = ()

    @property
    def faulted(self) -> bool:
        return self.status == FAULTED

    @property
    def clean(self) -> bool:
        return self.status == CLEAN

    def to_json(self) -> dict[str, Any]:
        return {"pages": self.probe.label, "why": self.probe.why, "status": self.status,
                "seconds": round(self.seconds, 3), "message": self.message[:300], "markers_changed": list(self.written)}


@dataclass(frozen=True)
class Named:
    """What the reruns say about one buffer (or, buffer "a|b", about none: `named` False)."""

    buffer: str
    region: str          # PAST_END, BEFORE_START or UNTOLD
    named: bool
    how: str             # which runs said so, in words
    written: bool = False  # the guard markers saw a write of this buffer in a rerun that ran through


@dataclass
class Probing:
    """The reruns of one case after a guard-page fault: built from the faulting result (`start`), asked for the
    next round of probes by the runner until it has none, then concluded by the judge."""

    side: str                                  # the side every candidate was paged on when the case faulted
    candidates: tuple[str, ...]                # the buffers on a page then, watched ones first
    cap: int = MAX_RERUNS
    runs: list[ProbeRun] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)   # probes over the cap or the budget
    stopped: str = ""                          # why reruns stopped early ("" when they did not)
    _rounds: set[str] = field(default_factory=set)
    budget_factor: ClassVar[float] = RERUN_BUDGET_FACTOR  # the runner's wall-time budget, x the case's deadline
    details_key: ClassVar[str] = "guard_page_reruns"     # where the case's details keep to_json()

    # -- planning ----------------------------------------------------------------------------------------
    def next_round(self) -> list[Probe]:
        """The probes to run next (each round once), cut to what the cap leaves; [] when there is nothing left."""
        if self.stopped:
            return []
        for why, probes in ((NAME, self._name_probes), (DIRECTION, self._direction_probes),
                            (CONTROL, self._control_probes)):
            if why in self._rounds:
                continue
            self._rounds.add(why)
            planned = probes()
            if not planned:
                continue
            room = max(0, self.cap - len(self.runs))
            if len(planned) > room:
                self.not_run.extend(p.label for p in planned[room:])
                if not self.stopped:
                    self.stopped = f"rerun cap of {self.cap} per case reached"
                planned = planned[:room]
            if planned:
                return planned
        return []

    def ran(self, probe: Probe, status: str, seconds: float, message: str,
            evidence: Mapping[str, Any] | None = None) -> ProbeRun:
        """What one rerun left: the worker's status (or the runner's: timeout, crashed), and, from its evidence, the
        buffers whose guard markers it found changed."""
        guard = (evidence or {}).get(GUARD) or {}
        return ProbeRun(probe, status, seconds, message, tuple(sorted(name for name, changed in guard.items() if changed)))

    def record(self, runs: Iterable[ProbeRun]) -> None:
        self.runs.extend(runs)

    def stop(self, why: str, left: Sequence[Probe] = ()) -> None:
        """No more reruns (the budget is spent): what was left is listed as not run."""
        self.not_run.extend(p.label for p in left)
        self.stopped = self.stopped or why

    def _name_probes(self) -> list[Probe]:
        if len(self.candidates) < 2:
            return []
        return [Probe(((name, self.side),), NAME) for name in self.candidates]

    def _direction_probes(self) -> list[Probe]:
        return [Probe(((name, other(self.side)),), DIRECTION) for name in self._named()]

    def _control_probes(self) -> list[Probe]:
        named = self._named()
        all_faulted = len(self.candidates) > 1 and named and len(named) == len(self.candidates)
        both = any(self._faults(n, other(self.side)) for n in named)
        return [Probe((), CONTROL)] if all_faulted or both else []

    # -- reading the runs --------------------------------------------------------------------------------
    def _run(self, name: str | None, side: str | None) -> ProbeRun | None:
        want = ((name, side),) if name is not None else ()
        return next((r for r in self.runs if r.probe.pages == want), None)

    def _faults(self, name: str, side: str) -> bool | None:
        """Whether `name` alone on a `side` page faults: True, False, or None when no rerun says (not run, or it
        ended some other way). With one candidate the case's own run is that run on the faulting side."""
        if side == self.side and len(self.candidates) == 1 and name == self.candidates[0]:
            return True
        run = self._run(name, side)
        if run is None or not (run.faulted or run.clean):
            return None
        return run.faulted

    def _named(self) -> list[str]:
        return [c for c in self.candidates if self._faults(c, self.side)]

    def conclude(self) -> list[Named]:
        """One Named per buffer the reruns name, or a single unnamed one listing the candidates and why."""
        control = self._run(None, None)
        if control is not None and control.faulted:
            return [self._unnamed("the case faults with no guard page at all: the fault is not an access across a "
                                  "guard page (a wild access, or a crash of its own)")]
        named = self._named()
        if not named:
            solo = [self._faults(c, self.side) for c in self.candidates]
            if all(s is False for s in solo):
                why = ("no candidate faulted alone on its page: the fault needs several buffers on pages at once, or "
                       "is intermittent")
            else:
                unknown = [c for c, s in zip(self.candidates, solo) if s is None]
                why = f"not every candidate could be rerun alone ({', '.join(unknown)}: {self._why_unknown(unknown)})"
            return [self._unnamed(why)]
        return [self._direction(name) for name in named]

    def _direction(self, name: str) -> Named:
        side, far = self.side, other(self.side)
        here = ("the case's own run (the only buffer on a page)" if len(self.candidates) == 1
                else f"its solo rerun on the {side} page")
        there = self._faults(name, far)
        written = any(name in r.written for r in self.runs if r.clean)
        if there is False:
            how = f"faulted with its {side} page ({here}), not with its {far} page: {REGION[side].replace('_', ' ')}"
            return Named(name, REGION[side], True, how, written)
        if there is True:
            how = (f"faulted with its {side} page ({here}) and with its {far} page: accesses on both sides, or a "
                   f"fault that does not depend on the page; the direction cannot be told")
        else:
            how = (f"faulted with its {side} page ({here}); the {far}-page rerun "
                   f"{self._why_unknown([name], far)}: the direction cannot be told")
        return Named(name, UNTOLD, True, how, written)

    def _why_unknown(self, names: Sequence[str], side: str | None = None) -> str:
        side = side or self.side
        runs = [self._run(n, side) for n in names]
        ended = [f"{r.status}: {r.message[:120]}" for r in runs if r is not None]
        if ended:
            return "ended " + "; ".join(ended)
        return f"did not run ({self.stopped or ('no reruns were made' if not self.runs else 'not planned')})"

    def _unnamed(self, why: str) -> Named:
        return Named("|".join(self.candidates), UNTOLD, False, why)

    def to_json(self) -> dict[str, Any]:
        return {"side": self.side, "candidates": list(self.candidates), "cap": self.cap,
                "runs": [r.to_json() for r in self.runs], "not_run": list(self.not_run), "stopped": self.stopped,
                "seconds": round(sum(r.seconds for r in self.runs), 3)}


def start(buffers: Sequence[Mapping[str, Any]], watched: Iterable[str] = (), cap: int = MAX_RERUNS) -> Probing | None:
    """The reruns for a result whose case faulted with these buffers on pages (its buffer map), or None when no
    buffer sat on a page. Watched buffers are probed first, then the rest in the order they were allocated."""
    paged = L.paged_buffers(buffers)
    if not paged:
        return None
    sides = set(paged.values())
    side = BACK if BACK in sides else FRONT    # one pass pages one side; a mixed map is probed from the back
    names = [n for n, s in paged.items() if s == side]
    watch = set(watched)
    order = [n for n in names if n in watch] + [n for n in names if n not in watch]
    return Probing(side=side, candidates=tuple(order), cap=cap)
