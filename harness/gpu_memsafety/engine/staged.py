"""A staged mode's run (the complete mode): each stage is a mode of one process kind, run over the cases whose
scenario uses one of its detectors, in order; then every case is judged once from all its stages.

The stages of one batch run back to back in the same runner (the same xdist worker, the same GPU), each with its
own processes: the sanitized stage (memcheck and the markers) first, then the unsanitized one (poison inside the
allocations, uninit), then racecheck and synccheck for the kernels that declare them. A case whose stage ended it
(crashed, timed out, unresolved, could not run, or the adapter said it does not apply here) runs no later stage.
When the memcheck stage ran under its sanitizer, the next stages are told (Job.covered_seen): poison then leaves
the guards of covered buffers to memcheck, which watched their ends, except where memcheck saw an overread no
expectation accepts (`recount`): memcheck ends the kernel at its first bad access, so a warp's later loads past
the end never run and its count can be short (held-out hu_a on the H200: 64 of the 128 B a rotary kernel read past
its cos/sin cache); poison's bound there shows it (gpu_memsafety.detectors.memcheck.undercounts). Without a GPU,
when the first stage's interpreter trace checked the case's Triton launches (every read of a marker byte, exact,
whatever its value), poison is left out the same way (`trace_covers`): in a CPU run it was most of the time, about
80 interpreted runs of a case, each finding the trace's bytes again. gpu_memsafety.judge.combine decides the outcome.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Sequence

from gpu_memsafety.detectors.poison import left_after_memcheck
from gpu_memsafety.engine.modes import MODES
from gpu_memsafety.judge.combine import StageResult, combine, stops
from gpu_memsafety.model import BEFORE_START, MEMCHECK, OVERREAD, PAST_END, POISON, TRACE, CaseResult

if TYPE_CHECKING:
    from gpu_memsafety.engine.runner import Runner
    from gpu_memsafety.scenario.definition import Case, Scenario


def run(parent: "Runner", items: Sequence[tuple["Scenario", "Case"]]) -> list[CaseResult]:
    """Every stage of parent's mode over `items`, then one result per case (emitted through parent)."""
    o = parent.o
    per_case: dict[str, list[StageResult]] = {case.id: [] for _, case in items}
    stopped: set[str] = set()
    covered_seen = False
    earlier: set[str] = set()      # detectors of the stages before this one
    maps: dict[str, list[dict[str, Any]]] = {}     # each case's buffer map from the memcheck stage
    left: dict[str, dict[str, str]] = {}           # detectors a case needed no stage for, and why
    recount: dict[str, tuple[str, ...]] = {}       # buffers whose memcheck overread count poison checks (JobCase)
    traced: dict[str, int] = {}                    # cases whose every access the trace saw: launches (trace_covers)
    s_of = {c.id: s for s, c in items}
    c_of = {c.id: c for s, c in items}
    for name in o.mode.stages:
        stage = MODES[name]
        lean = _without(stage, POISON)     # the stage less poison, for the cases the trace saw whole
        to_lean: set[str] = set()
        todo = []
        for s, c in items:
            # A stage runs for a case when it brings a detector its scenario uses that no earlier stage ran, and
            # that detector has something to look at (after memcheck, poison only at what memcheck cannot see).
            new = [d for d in stage.detectors if d in s.detectors and d not in earlier]
            seen = covered_seen and MEMCHECK in s.detectors and c.id in maps   # memcheck watched its covered buffers
            if POISON in new and seen and not left_after_memcheck(maps[c.id]) and not recount.get(c.id):
                new.remove(POISON)
                left.setdefault(c.id, {})[POISON] = (
                    "not run: memcheck watched both ends of every buffer of the case and none has row padding or "
                    "unused rows, so poison had nothing memcheck did not see")
            elif POISON in new and c.id in traced and lean is not None:
                new.remove(POISON)
                to_lean.add(c.id)
                left.setdefault(c.id, {})[POISON] = (
                    f"not run: the interpreter's trace checked every access of the case's {traced[c.id]} Triton "
                    "launch(es) to the byte, whatever the value read, so poison had nothing the trace did not see")
            if c.id not in stopped and new:
                todo.append((s, c))
        earlier |= set(stage.detectors)
        if not todo:
            continue
        groups = [(stage, [(s, c) for s, c in todo if c.id not in to_lean], o.workdir / name),
                  (lean, [(s, c) for s, c in todo if c.id in to_lean], o.workdir / name / "lean")]
        for mode, cases, workdir in groups:
            if not cases or mode is None:
                continue
            runner = type(parent)(replace(o, mode=mode, workdir=workdir, on_result=None, covered_seen=covered_seen,
                                          recount=recount if POISON in mode.detectors else {}))
            for result in runner.run(cases):
                done = StageResult(name, result, runner.judge.assessed.get(result.case_id))
                per_case[result.case_id].append(done)
                if stops(done):
                    stopped.add(result.case_id)
                elif MEMCHECK in mode.detectors:
                    mine = to_recount(s_of[result.case_id], c_of[result.case_id], result)
                    if mine:
                        recount[result.case_id] = mine
            if TRACE in mode.detectors:
                traced.update({cid: n for cid, n in runner.judge.traced.items()
                               if trace_covers(s_of[cid], c_of[cid], arch_of(per_case[cid]))})
            parent.processes += [{**p, "stage": name} for p in runner.processes]
            if MEMCHECK in mode.detectors and runner.judge.sanitize():
                covered_seen = True
                maps.update(runner.judge.buffer_maps)
    machine = parent.judge.machine
    return [parent._emit(combine(o.mode.name, o.mode.detectors, scenario, case, per_case[case.id], gpu=machine.gpu,
                                 allow_unsupported=machine.allow_unsupported, left=left.get(case.id, {})))
            for scenario, case in items]


def to_recount(scenario: "Scenario", case: "Case", result: CaseResult) -> tuple[str, ...]:
    """The buffers past whose ends memcheck saw an overread that no expectation of the case accepts: a bug the
    scenario does not know (a user's own kernel, a held-out one), whose byte count is all the report says of it.
    Poison surveys their guards in the next stage; where its bound holds a byte memcheck's ranges do not, memcheck's
    count is at least (memcheck.undercounts). An expected finding is left as it is: its expectation already judges
    its count (the last-expert scale reads, where a poison survey of a gpt-oss shape would cost seconds)."""
    expected = _expected(scenario, case, result.arch) or ()
    out: list[str] = []
    for f in result.findings:
        if f.detector != MEMCHECK or f.kind != OVERREAD or f.region not in (PAST_END, BEFORE_START) or f.buffer in out:
            continue
        if any(e.matches(f) for e in expected):
            continue
        out.append(f.buffer)
    return tuple(out)


def _without(stage: Any, detector: str) -> Any:
    """The single-process mode that runs `stage`'s detectors less `detector` (values less poison: uninit), or None
    when `stage` does not run it or no mode is that."""
    if detector not in stage.detectors:
        return None
    want = tuple(d for d in stage.detectors if d != detector)
    return next((m for m in MODES.values() if m.detectors == want and not m.stages), None)


def arch_of(stages: Sequence[StageResult]) -> str:
    return next((s.result.arch for s in stages if s.result.arch), "")


def trace_covers(scenario: "Scenario", case: "Case", arch: str) -> bool:
    """Whether the interpreter's trace, having run on the case (its launches checked), saw all poison could: every
    read of a marker byte by an interpreted Triton kernel, exact, whatever its value (poison's regions are marker
    bytes only). Not where an expectation needs poison and says the trace cannot see it (a read made by a torch
    op: ExpectedFinding.blind), nor where the expectation cannot be read."""
    expected = _expected(scenario, case, arch)
    return expected is not None and not any(POISON in e.detectors and TRACE not in e.detectors for e in expected)


def _expected(scenario: "Scenario", case: "Case", arch: str) -> tuple[Any, ...] | None:
    """The case's expected findings, None when its expectation cannot be read (the verdict reports that; what asks
    here then does the costlier safe thing: every unexpected overread is recounted, poison runs)."""
    try:
        return tuple(scenario.expectation(case, arch).findings)
    except Exception:      # noqa: BLE001 - user code never breaks the plan
        return None
