"""The guard page on a pytest suite (`--gpu-memsafety=pages`) after a fault: which allocation of the test, and on which
side, by rerunning it alone. The host face of detectors/guard_page.py (its finding: `fault_finding`).

A guard-page fault ends the CUDA context and names neither the allocation nor the side. The test runs again alone
in fresh children: with no page at all (control: a fault there is not a guard-page access, and nothing is named),
with the page before every allocation (a fault: before_start), and, on the side that faulted, with the page on
half of its allocations at a time (by their order in the test: the shim's page window) until one is left. At most
MAX_PROBES children per test; what could not be narrowed is named as candidates. Planning is pure; `probe` runs the
children through the callable it is given.

Why not the scenario path's planner (detectors/pageprobe.py): a scenario knows its buffers by name before it runs
and pages each alone (the name round, capped at MAX_RERUNS), then the other side, then a control when needed; a
test's allocations are known only from its run, by their order, and the allocator shim pages a window of that
order, so a suite with dozens of allocations is narrowed by halving windows, control first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from gpu_memsafety.host import children
from gpu_memsafety.host.allocations import allocation_details
from gpu_memsafety.host.modes import PAGES
from gpu_memsafety.detectors.guard_page import fault_finding
from gpu_memsafety.model import BEFORE_START, OVERREAD, PAST_END, Finding
from gpu_memsafety.placement.allocator import EXACT, PAGE_AFTER, PAGE_BEFORE, Allocation

MAX_PROBES = 10
UNTOLD = f"{BEFORE_START}|{PAST_END}"
RunChild = Callable[[children.Plan], children.Output]


@dataclass
class ProbeRun:
    label: str
    faulted: bool
    allocations: list[Allocation]


def _run(run_child: RunChild, test: str, placement: str, window: tuple[int, int] | None, label: str) -> ProbeRun:
    out = run_child(children.Plan(PAGES, (test,), placement, window))
    end = out.ended.get(test)
    faulted = end is None or bool(end.get("context_lost"))
    allocs = [Allocation.from_json(a) for a in (end or {}).get("allocations", ())]
    return ProbeRun(label, faulted, allocs)


def probe(run_child: RunChild, test: str, allocations: Sequence[Allocation], arch: str) -> list[Finding]:
    """Findings for a test whose run with back pages faulted (none when the control run faults too)."""
    runs: list[ProbeRun] = [_run(run_child, test, EXACT, None, "no page (control)")]
    if runs[0].faulted:
        return []
    front = _run(run_child, test, PAGE_BEFORE, None, "page before every allocation")
    back = _run(run_child, test, PAGE_AFTER, None, "page after every allocation (again, alone)")
    runs += [front, back]
    sides = [s for s, r in ((PAST_END, back), (BEFORE_START, front)) if r.faulted]
    if not sides:
        return [_finding(test, None, UNTOLD, runs, allocations, arch, "the fault did not come back when the test ran alone")]
    region = sides[0] if len(sides) == 1 else UNTOLD
    placement = PAGE_AFTER if sides[0] == PAST_END else PAGE_BEFORE
    known = max((r.allocations for r in runs), key=len)
    lo, hi = 0, max(len(known), len(allocations))
    while hi - lo > 1 and len(runs) < MAX_PROBES:
        mid = (lo + hi) // 2
        half = _run(run_child, test, placement, (lo, mid), f"{sides[0]} page on allocations {lo}..{mid - 1}")
        runs.append(half)
        lo, hi = (lo, mid) if half.faulted else (mid, hi)
    named = known[lo] if hi - lo == 1 and lo < len(known) else None
    return [_finding(test, named, region, runs, known[lo:hi] or list(allocations), arch, "")]


def _finding(test: str, named: Allocation | None, region: str, runs: list[ProbeRun], candidates: Sequence[Allocation],
             arch: str, note: str) -> Finding:
    reruns = "; ".join(f"{r.label}: {'fault' if r.faulted else 'ok'}" for r in runs)
    if named is not None:
        buffer = named.label
        how = f"hardware fault on {named.label}'s guard page ({'both sides' if region == UNTOLD else region})"
        details = (("access", "read or write"), ("reruns", reruns), *allocation_details(named, test))
    else:
        buffer = "|".join(dict.fromkeys(a.label for a in candidates)) or "(unknown allocation)"
        how = f"hardware fault on the guard page of one of {len(candidates)} allocation(s) (not told apart)"
        details = (("access", "read or write"), ("reruns", reruns))
    return fault_finding(OVERREAD, buffer, region, f"{how}; no sanitizer{': ' + note if note else ''}", arch=arch,
                         details=details)
