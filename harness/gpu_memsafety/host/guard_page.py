"""The guard page on a pytest suite (`--gpu-memsafety=pages`) after a fault: which allocation of the test, and on which
side, by rerunning it alone. The host face of detectors/guard_page.py: the reruns are planned by the same planner
(detectors/pageprobe.py) and the finding is the same (`fault_finding`).

A guard-page fault ends the CUDA context and names neither the allocation nor the side. The test's allocations are
known only from its run, by their order in the test, and the allocator shim pages a window of that order; so the
planner confirms the fault with the test alone (the suite's child ran other tests first), halves the window of
allocations on the faulting side until one is left (a suite test may make dozens: one each would not fit the
cap), tells its side from the other page, and runs a control with no page when nothing yet shows the fault needs
one. At most MAX_PROBES children per test; what could not be narrowed is named as candidates. `probe` runs the
children through the callable it is given.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from gpu_memsafety.detectors import pageprobe as P
from gpu_memsafety.detectors.guard_page import fault_finding
from gpu_memsafety.host import children
from gpu_memsafety.host.allocations import allocation_details
from gpu_memsafety.detectors.suite_modes import PAGES
from gpu_memsafety.model import OVERREAD, Finding
from gpu_memsafety.host.allocator import EXACT, PAGE_AFTER, PAGE_BEFORE, Allocation

MAX_PROBES = 10
UNTOLD = P.UNTOLD
PLACEMENT = {P.BACK: PAGE_AFTER, P.FRONT: PAGE_BEFORE}     # the shim's placement for a side of the planner
RunChild = Callable[[children.Plan], children.Output]


@dataclass
class ProbeRun:
    faulted: bool
    allocations: list[Allocation]


def name(index: int) -> str:
    """A test's allocation as a candidate of the planner: its place in the test's order."""
    return f"allocation {index}"


def plan_of(probe: P.Probe, test: str, candidates: Sequence[str]) -> children.Plan:
    """The child that runs one probe: the test alone, no page (control), every allocation paged on a side (confirm),
    or a window of them (a half, or one allocation on the other side)."""
    if probe.why == P.CONTROL:
        return children.Plan(PAGES, (test,), EXACT, None)
    sides = {side for _, side in probe.pages}
    side = sides.pop() if len(sides) == 1 else P.BACK
    if probe.why == P.CONFIRM:
        return children.Plan(PAGES, (test,), PLACEMENT[side], None)
    where = sorted(candidates.index(c) for c, _ in probe.pages)
    if sides or where != list(range(where[0], where[-1] + 1)):
        raise ValueError(f"probe {probe.label!r} is not a window of the test's allocations on one side")
    return children.Plan(PAGES, (test,), PLACEMENT[side], (where[0], where[-1] + 1))


def _run(run_child: RunChild, plan: children.Plan) -> ProbeRun:
    out = run_child(plan)
    end = out.ended.get(plan.tests[0])
    faulted = end is None or bool(end.get("context_lost"))
    return ProbeRun(faulted, [Allocation.from_json(a) for a in (end or {}).get("allocations", ())])


def probe(run_child: RunChild, test: str, allocations: Sequence[Allocation], arch: str) -> list[Finding]:
    """Findings for a test whose run with back pages faulted (none when the control run faults too)."""
    known = list(allocations)
    probing = P.Probing(P.BACK, tuple(name(i) for i in range(len(known))), cap=MAX_PROBES, narrowing=P.HALVING,
                        confirmed=False)
    while probes := probing.next_round():
        for one in probes:
            run = _run(run_child, plan_of(one, test, probing.candidates))
            probing.record([probing.ran(one, P.FAULTED if run.faulted else P.CLEAN, 0.0, "")])
            if one.why == P.CONFIRM and len(run.allocations) > len(known):
                known = run.allocations
                probing.widen([name(i) for i in range(len(known))])
    if probing.not_a_page_fault():
        return []
    reruns = "; ".join(f"{r.probe.label}: {r.status}" for r in probing.runs)
    by_name = {name(i): a for i, a in enumerate(known)}
    return [_finding(test, n, [by_name[c] for c in n.buffer.split("|") if c in by_name], reruns, arch)
            for n in probing.conclude()]


def _finding(test: str, named: P.Named, allocations: Sequence[Allocation], reruns: str, arch: str) -> Finding:
    if named.named and len(allocations) == 1:
        [alloc] = allocations
        buffer = alloc.label
        how = f"hardware fault on {alloc.label}'s guard page: {named.how}"
        details = (("access", "read or write"), ("direction", named.how), ("reruns", reruns),
                   *allocation_details(alloc, test))
    else:
        buffer = "|".join(dict.fromkeys(a.label for a in allocations)) or "(unknown allocation)"
        how = (f"hardware fault on the guard page of one of {len(allocations)} allocation(s) (not told apart): "
               f"{named.how}")
        details = (("access", "read or write"), ("reruns", reruns))
    return fault_finding(OVERREAD, buffer, named.region, f"{how}; no sanitizer", arch=arch, details=details)
