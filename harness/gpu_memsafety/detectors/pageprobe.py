"""Guard-page reruns: from a fault with several buffers on guard pages to the one buffer, and its direction. The one
planner for a scenario case (detectors/guard_page.py) and for a pytest test in pages mode (host/guard_page.py).

A guard-page fault ends the CUDA context and says neither which buffer's page was touched nor on which side.
Every candidate sits on a page on one side when the unit faults (a scenario's covered buffers: back pages in the
first pass, front pages in the second, harness/gpu_memsafety/detectors/modes.py and the worker; a test's allocations:
back pages), so the unit reruns in fresh processes with fewer of them paged (a process per rerun that faults: the
context is lost) and this module decides what to rerun and what the reruns say:

0. confirm (only when the fault came from a run of more than the unit: a test in a child that ran others first):
   every candidate on its page, the unit alone. A run that does not fault names nothing.
1. name, one of two ways (`narrowing`):
   - SOLO, each candidate alone on the side that faulted (watched buffers first): the buffers whose solo run faults
     are named; with one candidate the faulting run itself names it. For a scenario, whose buffers are few and
     known by name before it runs.
   - HALVING, the first half of the window still in doubt paged, the rest not: a fault keeps that half, a clean run
     the other, until one candidate is left (or the cap). For a test, whose allocations may be dozens, known only
     by their order, and paged by a window of that order (the allocator shim's page window).
2. direction: each named buffer alone on the other side. A fault with the back page only is past_end, with the
   front page only before_start; a fault with both (or a rerun that could not run) cannot be told.
3. control: when every rerun of the name round faulted, or a named buffer faulted on both sides, once with no page
   at all: a fault there is not a guard-page access (a wild access, a crash of its own), and nothing is named.

Bounded: at most `cap` reruns per unit (MAX_RERUNS for a case; a probe over the cap is listed as not run, and said
so), and the scenario runner stops when RERUN_BUDGET_FACTOR x the case's deadline is spent. Pure (no torch, no
processes): the runner (or the host face) runs the probes, the detector turns `conclude()` into findings.
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
# case's own deadline (harness/gpu_memsafety/detectors/modes.py Mode.deadline).
MAX_RERUNS = 8
RERUN_BUDGET_FACTOR = 4.0

CONFIRM, NAME, DIRECTION, CONTROL = "confirm", "name", "direction", "control"     # the rounds, in order
SOLO, HALVING = "solo", "halving"    # how the name round narrows the candidates (the module's docstring)
FAULTED, CLEAN = "fault", "ok"       # a rerun's status: the worker's (gpu_memsafety.job), or "timeout"/"crashed"


def other(side: str) -> str:
    return FRONT if side == BACK else BACK


@dataclass(frozen=True)
class Probe:
    """One rerun: these buffers on a page on these sides, every other buffer guarded (() : no page at all)."""

    pages: tuple[tuple[str, str], ...]
    why: str
    text: str = ""       # the label, where listing every page would not read (a window of many candidates)

    def placements(self) -> dict[str, str]:
        """Buffer name -> layout placement, what the worker's job entry carries (gpu_memsafety.job.JobCase)."""
        return {name: PLACEMENT[side] for name, side in self.pages}

    @property
    def label(self) -> str:
        return self.text or ", ".join(f"{name} {side} page" for name, side in self.pages) or "no page"


@dataclass(frozen=True)
class ProbeRun:
    """What one rerun did: its status (gpu_memsafety.job statuses: "fault" when the context was lost, "ok" when it ran
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
    """The reruns of one unit after a guard-page fault: built from the faulting result (`start`, or directly for a
    test), asked for the next round of probes until it has none, then concluded."""

    side: str                                  # the side every candidate was paged on when the unit faulted
    candidates: tuple[str, ...]                # the buffers on a page then, in the order they are probed
    cap: int = MAX_RERUNS
    narrowing: str = SOLO                      # SOLO or HALVING (the module's docstring)
    confirmed: bool = True                     # the faulting run was the unit alone (False: a confirm run first)
    runs: list[ProbeRun] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)   # probes over the cap or the budget
    stopped: str = ""                          # why reruns stopped early ("" when they did not)
    budget_factor: ClassVar[float] = RERUN_BUDGET_FACTOR  # the runner's wall-time budget, x the case's deadline
    details_key: ClassVar[str] = "guard_page_reruns"     # where the case's details keep to_json()

    def __post_init__(self) -> None:
        if self.narrowing not in (SOLO, HALVING):
            raise ValueError(f"narrowing {self.narrowing!r} is not {SOLO!r} or {HALVING!r}")

    # -- planning ----------------------------------------------------------------------------------------
    def next_round(self) -> list[Probe]:
        """The probes to run next, cut to what the cap leaves; [] when there is nothing left. A round's probes are
        planned until each has run (halving plans one at a time, from what the last one said)."""
        if self.stopped or self._unconfirmed():
            return []
        for probes in (self._confirm_probes, self._name_probes, self._direction_probes, self._control_probes):
            planned = [p for p in probes() if self._run_of(p) is None]
            if not planned:
                continue
            room = max(0, self.cap - len(self.runs))
            if len(planned) > room:
                self.not_run.extend(p.label for p in planned[room:])
                self.stopped = f"rerun cap of {self.cap} per case reached"
                planned = planned[:room]
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

    def widen(self, more: Sequence[str]) -> None:
        """Candidates the confirm run found that the faulting run had not reached (a test alone may allocate what a
        cache served it in a child that ran other tests first); only before the name round."""
        if any(r.probe.why == NAME for r in self.runs):
            raise ValueError("candidates can only be added before the name round")
        self.candidates += tuple(m for m in more if m not in self.candidates)

    def _confirm_probes(self) -> list[Probe]:
        if self.confirmed:
            return []
        return [Probe(tuple((c, self.side) for c in self.candidates), CONFIRM,
                      f"every candidate on its {self.side} page, alone")]

    def _name_probes(self) -> list[Probe]:
        if self.narrowing == HALVING:
            lo, hi, unread = self._window()
            if unread is not None or hi - lo < 2:
                return []
            mid = (lo + hi) // 2
            names = self.candidates[lo:mid]
            return [Probe(tuple((c, self.side) for c in names), NAME,
                          f"{self.side} page on {names[0]}" + (f" .. {names[-1]}" if len(names) > 1 else ""))]
        if len(self.candidates) < 2:
            return []
        return [Probe(((name, self.side),), NAME) for name in self.candidates]

    def _direction_probes(self) -> list[Probe]:
        return [Probe(((name, other(self.side)),), DIRECTION) for name in self._named()]

    def _control_probes(self) -> list[Probe]:
        both = any(self._faults(n, other(self.side)) for n in self._named())
        return [Probe((), CONTROL)] if self._never_clean() or both else []

    # -- reading the runs --------------------------------------------------------------------------------
    def _run_of(self, probe: Probe) -> ProbeRun | None:
        return next((r for r in self.runs if (r.probe.pages, r.probe.why) == (probe.pages, probe.why)), None)

    def _run(self, name: str, side: str) -> ProbeRun | None:
        want = ((name, side),)
        return next((r for r in self.runs if r.probe.pages == want), None)

    def _round(self, why: str) -> ProbeRun | None:
        """The run of a one-probe round (CONFIRM, CONTROL), if it ran."""
        return next((r for r in self.runs if r.probe.why == why), None)

    def _unconfirmed(self) -> bool:
        """The unit alone has not (yet, or at all) faulted with every candidate paged: nothing to narrow."""
        if self.confirmed:
            return False
        run = self._round(CONFIRM)
        return run is not None and not run.faulted

    def _never_clean(self) -> bool:
        """The name round ran, every probe of it ran, and every one faulted: nothing yet shows the fault needs a page."""
        runs = [r for r in self.runs if r.probe.why == NAME]
        return bool(runs) and not self.not_run and all(r.faulted for r in runs)

    def _window(self) -> tuple[int, int, ProbeRun | None]:
        """Halving: the candidates still in doubt (lo, hi), and the name-round run that said neither fault nor clean
        (it ended otherwise: narrowing stops there), if any."""
        lo, hi = 0, len(self.candidates)
        for run in (r for r in self.runs if r.probe.why == NAME):
            mid = (lo + hi) // 2
            if run.faulted:
                hi = mid
            elif run.clean:
                lo = mid
            else:
                return lo, hi, run
        return lo, hi, None

    def _left(self) -> tuple[str, ...]:
        """The candidates the reruns could not tell apart: all of them, or, halving, the window still in doubt."""
        if self.narrowing == HALVING:
            lo, hi, _ = self._window()
            return self.candidates[lo:hi]
        return self.candidates

    def _faults(self, name: str, side: str) -> bool | None:
        """Whether `name` alone on a `side` page faults: True, False, or None when no rerun says (not run, or it
        ended some other way). With one candidate the unit's own faulting run is that run on the faulting side."""
        if side == self.side and len(self.candidates) == 1 and name == self.candidates[0] and self.confirmed:
            return True
        run = self._run(name, side)
        if run is None or not (run.faulted or run.clean):
            return None
        return run.faulted

    def _named(self) -> list[str]:
        if self._unconfirmed() or (not self.confirmed and self._round(CONFIRM) is None):
            return []
        if self.narrowing == HALVING:
            lo, hi, _ = self._window()
            return [self.candidates[lo]] if hi - lo == 1 else []
        return [c for c in self.candidates if self._faults(c, self.side)]

    def not_a_page_fault(self) -> bool:
        """The control run (no page at all) faulted: the fault is not an access across a guard page."""
        control = self._round(CONTROL)
        return control is not None and control.faulted

    def conclude(self) -> list[Named]:
        """One Named per buffer the reruns name, or a single unnamed one listing the candidates and why."""
        if self.not_a_page_fault():
            return [self._unnamed("the case faults with no guard page at all: the fault is not an access across a "
                                  "guard page (a wild access, or a crash of its own)")]
        if not self.confirmed:
            confirm = self._round(CONFIRM)
            if confirm is None:
                return [self._unnamed(f"the unit alone did not run ({self.stopped or 'no reruns were made'})")]
            if not confirm.faulted:
                ended = "ran through" if confirm.clean else f"ended {confirm.status}: {confirm.message[:120]}"
                return [self._unnamed(f"the fault did not come back when the unit ran alone (it {ended})")]
        named = self._named()
        if not named:
            return [self._unnamed(self._why_unnamed())]
        return [self._direction(name) for name in named]

    def _why_unnamed(self) -> str:
        if self.narrowing == HALVING:
            lo, hi, unread = self._window()
            if unread is not None:
                return f"a halving rerun ended {unread.status}: {unread.message[:120]}"
            if hi - lo < 1:
                return "no candidate was recorded to narrow"
            return f"the reruns narrowed it to {hi - lo} candidates ({self.stopped or 'not planned'})"
        solo = [self._faults(c, self.side) for c in self.candidates]
        if all(s is False for s in solo):
            return ("no candidate faulted alone on its page: the fault needs several buffers on pages at once, or "
                    "is intermittent")
        unknown = [c for c, s in zip(self.candidates, solo) if s is None]
        return f"not every candidate could be rerun alone ({', '.join(unknown)}: {self._why_unknown(unknown)})"

    def _direction(self, name: str) -> Named:
        side, far = self.side, other(self.side)
        if self.narrowing == HALVING:
            here = f"the reruns that halved the {len(self.candidates)} candidates on their {side} pages"
        elif len(self.candidates) == 1:
            here = "the case's own run (the only buffer on a page)" if self.confirmed else "its rerun alone"
        else:
            here = f"its solo rerun on the {side} page"
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
        return Named("|".join(self._left()), UNTOLD, False, why)

    def to_json(self) -> dict[str, Any]:
        how = {} if (self.narrowing, self.confirmed) == (SOLO, True) else {"narrowing": self.narrowing,
                                                                           "confirmed": self.confirmed}
        return {"side": self.side, "candidates": list(self.candidates), "cap": self.cap, **how,
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
