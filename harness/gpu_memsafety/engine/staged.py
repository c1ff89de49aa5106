"""A staged mode's run (the complete mode): each stage is a mode of one process kind, run over the cases whose
scenario uses one of its detectors, in order; then every case is judged once from all its stages.

The stages of one batch run back to back in the same runner (the same xdist worker, the same GPU), each with its
own processes: the sanitized stage (memcheck and the markers) first, then the unsanitized one (poison inside the
allocations, uninit), then racecheck and synccheck for the kernels that declare them. A case whose stage ended it
(crashed, timed out, unresolved, could not run, or the adapter said it does not apply here) runs no later stage.
What the stages hand on is the detectors' to decide (gpu_memsafety.detectors.base.Unit): this module names none.
- When a stage whose detector watches both ends of every covered buffer (Unit.watches_covered_ends: memcheck) ran
  under its sanitizer, the next stages are told (Job.covered_seen), and each case's buffer map from it goes into
  what the later stages know of the case (base.Earlier).
- A detector of a later stage may be left out for a case (Unit.left_out), its line saying why: poison, where
  memcheck watched every guard and no count of its needs checking, or where the interpreter's trace checked every
  access of the case's Triton launches (in a CPU run it was most of the time, about 80 interpreted runs of a case,
  each finding the trace's bytes again). Left out `alone`, the case runs in the mode of the stage less it.
- Earlier findings may ask a later detector to look again (Unit.recount: the buffers past whose ends memcheck saw
  an overread no expectation accepts; memcheck ends the kernel at its first bad access, so its count can be short,
  and poison's bound shows it: gpu_memsafety.detectors.memcheck.undercounts).
The one decision (gpu_memsafety.judge.decide, on `Staged` evidence: gpu_memsafety.judge.combine) gives the outcome.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from gpu_memsafety.detectors.base import Earlier
from gpu_memsafety.detectors.registry import UNITS
from gpu_memsafety.detectors.modes import MODES, Mode
from gpu_memsafety.judge.combine import StageResult, stops
from gpu_memsafety.judge.decide import Staged, decide
from gpu_memsafety.model import CaseResult

if TYPE_CHECKING:
    from gpu_memsafety.scenario.definition import Case, Scenario


class Parent(Protocol):
    """What a staged run needs of the runner that started it (gpu_memsafety.engine.runner.Runner, which calls `run`;
    each stage runs in a runner of the same type): its options, what its run is (judge.rules.Standing), its batches
    (engine.batches.Batches: what each case judged from evidence showed), the processes it lists, and its emit."""

    o: Any
    standing: Any
    batches: Any
    processes: list[dict[str, Any]]

    def run(self, items: Sequence[tuple["Scenario", "Case"]]) -> list[CaseResult]: ...

    def _emit(self, result: CaseResult) -> CaseResult: ...


def run(parent: Parent, items: Sequence[tuple["Scenario", "Case"]]) -> list[CaseResult]:
    """Every stage of parent's mode over `items`, then one result per case (emitted through parent)."""
    o = parent.o
    per_case: dict[str, list[StageResult]] = {case.id: [] for _, case in items}
    stopped: set[str] = set()
    covered_seen = False
    earlier: set[str] = set()      # detectors of the stages before this one
    maps: dict[str, list[dict[str, Any]]] = {}     # each case's buffer map from a stage that watched covered ends
    left: dict[str, dict[str, str]] = {}           # detectors a case needed no stage for, and why
    checked: dict[str, dict[str, int]] = {}        # launches each detector checked whole, per case (Unit.checked_whole)

    def known(s: "Scenario", c: "Case") -> Earlier:
        return Earlier(s, c, arch_of(per_case[c.id]), tuple(f for st in per_case[c.id] for f in st.result.findings),
                       maps.get(c.id) if covered_seen else None, checked.get(c.id, {}))

    for name in o.mode.stages:
        stage = MODES[name]
        without: dict[str, frozenset[str]] = {}    # case -> the detectors its stage runs without (Leave.alone)
        seen: dict[str, Earlier] = {}              # what the earlier stages learnt of each case (unchanged in this one)
        todo = []
        for s, c in items:
            if c.id in stopped:
                continue
            # A stage runs for a case when it brings a detector its scenario uses that no earlier stage ran, and
            # that detector has something to look at (Unit.left_out: an earlier one saw all it could).
            new = [d for d in stage.detectors if d in s.detectors and d not in earlier]
            seen[c.id] = known(s, c)
            for d in list(new):
                leave = UNITS[d].left_out(seen[c.id])
                if leave is None:
                    continue
                less = without.get(c.id, frozenset()) | {d}
                if leave.alone and _without(stage, less) is None:
                    continue            # no mode runs the stage less it: it runs
                new.remove(d)
                left.setdefault(c.id, {})[d] = leave.why
                if leave.alone:
                    without[c.id] = less
            if new:
                todo.append((s, c))
        earlier |= set(stage.detectors)
        if not todo:
            continue
        groups: dict[frozenset[str], list[tuple["Scenario", "Case"]]] = {}
        for s, c in todo:
            groups.setdefault(without.get(c.id, frozenset()), []).append((s, c))
        for less, cases in sorted(groups.items(), key=lambda g: sorted(g[0])):
            mode = _without(stage, less) if less else stage
            assert mode is not None
            workdir = o.workdir / name / ("lean-" + "-".join(sorted(less))) if less else o.workdir / name
            recount = {c.id: r for s, c in cases
                       if (r := tuple(dict.fromkeys(b for d in mode.detectors for b in UNITS[d].recount(seen[c.id]))))}
            runner = type(parent)(replace(o, mode=mode, workdir=workdir, on_result=None, covered_seen=covered_seen,
                                          recount=recount))
            for result in runner.run(cases):
                seen = runner.batches.seen.get(result.case_id)
                done = StageResult(name, result, seen.assessment if seen is not None else None)
                per_case[result.case_id].append(done)
                if stops(done):
                    stopped.add(result.case_id)
            for cid, judged in runner.batches.seen.items():
                if judged.checked:
                    checked.setdefault(cid, {}).update(judged.checked)
            parent.processes += [{**p, "stage": name} for p in runner.processes]
            if any(UNITS[d].watches_covered_ends for d in mode.detectors) and runner.standing.sanitize():
                covered_seen = True
                maps.update({cid: judged.buffers for cid, judged in runner.batches.seen.items()})
    machine = parent.standing.machine
    return [parent._emit(decide(Staged(o.mode.name, o.mode.detectors, scenario, case, per_case[case.id],
                                       gpu=machine.gpu, allow_unsupported=machine.allow_unsupported,
                                       left=left.get(case.id, {}))))
            for scenario, case in items]


def _without(stage: Mode, detectors: frozenset[str]) -> Mode | None:
    """The single-process mode that runs `stage`'s detectors less `detectors` (values less poison: uninit), or None
    when `stage` does not run them all or no mode is that."""
    if not detectors <= set(stage.detectors):
        return None
    want = tuple(d for d in stage.detectors if d not in detectors)
    return next((m for m in MODES.values() if m.detectors == want and not m.stages), None)


def arch_of(stages: Sequence[StageResult]) -> str:
    return next((s.result.arch for s in stages if s.result.arch), "")
