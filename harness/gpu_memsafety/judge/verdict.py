"""Verdicts: compare what the detectors that actually ran saw with what the scenario expects.

Two steps, so that one case judged from several processes (the stages of the complete mode: memcheck and the
markers, then poison and uninit, then racecheck...) gets one verdict. `assess` looks at one process kind's
findings and detector runs: which expected findings it saw, which it could check and missed, which it could not
check here (and why), and what it saw that nothing expects. `conclude` adds the assessments of every process
kind of a case up: an expected finding is seen when any of them saw it, missed when one could check it and none
saw it, not checked when none could. `decide` is both for one process kind.

Rules (each a closed outcome, see model.Outcome):
- an expected finding is checked only against detectors that ran and can see it here (a detector the expectation
  names blind, with the reason, does not count; a past_end finding only the guard markers see only where its
  buffer had a back guard (each buffer's placement, from the worker's buffer map), or where its bytes lie in a
  guard-page buffer's alignment tail; and never by the guard page when its bytes all lie before that buffer's
  unmapped page: see `pages`); if none of its detectors ran, the case is UNSUPPORTED (it says which detector
  was needed, and why the others cannot see it), never clean;
- every expected finding matched and nothing else seen: EXPECTED_FINDING; nothing expected, nothing seen: CLEAN;
- an expected finding not seen by a detector that ran: UNEXPECTEDLY_CLEAN (a failure: the bug is gone or
  the harness went blind; for a known upstream bug it says the workaround may be retired);
- anything seen that no expectation covers: FINDING (a failure). A guard finding that is another allocation's
  overrun landing in a buffer's guard (gpu_memsafety.detectors.guard: details "victim") is covered by an expectation of
  that overrun (its culprit), never by one of the victim's own.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from gpu_memsafety.detectors.registry import UNITS
from gpu_memsafety.detectors.modes import NEEDS_WATCH
from gpu_memsafety.model import (BEFORE_START, IN_ALLOCATION, PAST_END, DetectorRun, Expectation, ExpectedFinding,
                                 Finding, Outcome)
from gpu_memsafety.placement.layout import GUARD_PAGE_BACK, GUARDED, PAGED, unguarded_regions

# Detectors that put buffers against an unmapped page: blind to bytes before it (the alignment tail)
ON_PAGES = frozenset(name for name, unit in UNITS.items() if unit.placement in PAGED)

# Why an expected finding could not be checked in a process kind, most specific first (conclude's message).
TAIL, UNGUARDED, BLIND = "tail", "unguarded", "blind"


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    message: str
    unexpected: tuple[Finding, ...] = ()
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Assessment:
    """What one process kind's detectors said about a case's expectation (indexes into expectation.findings)."""

    ran: frozenset[str]
    not_ran: str = ""                                      # the detector runs' reasons, when none ran
    seen: frozenset[int] = frozenset()
    missing: Mapping[int, str] = field(default_factory=dict)                 # checkable, not seen: its description
    unchecked: Mapping[int, tuple[str, str]] = field(default_factory=dict)   # (TAIL|UNGUARDED|BLIND, why)
    unexpected: tuple[Finding, ...] = ()


def decide(expectation: Expectation, findings: Sequence[Finding], detectors: Sequence[DetectorRun],
           placement: str = GUARDED, pages: Mapping[str, int] | None = None,
           placements: Mapping[str, str] | None = None) -> Verdict:
    """The verdict of one process kind: `assess`, then `conclude`."""
    return conclude(expectation, [assess(expectation, findings, detectors, placement, pages, placements)])


def assess(expectation: Expectation, findings: Sequence[Finding], detectors: Sequence[DetectorRun],
           placement: str = GUARDED, pages: Mapping[str, int] | None = None,
           placements: Mapping[str, str] | None = None) -> Assessment:
    """`placements`: where each buffer sat (its layout's placement, from the worker's buffer map); `placement` is
    where a buffer it does not name sat. A flush-end buffer has no back guard to be checked.
    `pages`: for each buffer that sat before a guard page, the offset from its first byte of the first unmapped
    byte (its size plus its alignment tail; the worker's buffer map). An expected finding whose bytes all lie
    before that offset cannot fault there: the guard page is dropped from its detectors (the guard markers still
    see a write into the tail), and if nothing else that ran can see it, it is not checked, never clean."""
    pages = dict(pages or {})
    where = _Placements(placements or {}, placement)
    ran = frozenset(d.detector for d in detectors if d.ran)
    if not ran:
        why = "; ".join(f"{d.detector}: {d.detail}" for d in detectors) or "no detector was requested"
        return Assessment(ran, not_ran=why)
    seen: set[int] = set()
    missing: dict[int, str] = {}
    unchecked: dict[int, tuple[str, str]] = {}
    seeable: list[ExpectedFinding] = []
    for i, e in enumerate(expectation.findings):
        tail = _before_page(e, pages) and bool(ON_PAGES & ran)
        able = tuple(d for d in e.detectors if not (tail and d in ON_PAGES))
        e = replace(e, detectors=able)
        seeable.append(e)
        if any(e.matches(f) for f in findings):
            seen.add(i)
        elif ran.intersection(e.detectors) and _placed(e, where(e.buffer), pages):
            missing[i] = e.describe() + _uncovered(e, ran, where)
        elif tail:
            unchecked[i] = (TAIL, f"{e.describe()}: its bytes lie in {e.buffer}'s alignment tail, before its guard page "
                                  f"at byte {pages[e.buffer]}, so not visible to guard_page in this placement")
        elif ran.intersection(e.detectors):
            unchecked[i] = (UNGUARDED, _unguarded(e, where(e.buffer)))
        else:
            unchecked[i] = (BLIND, _blind(e, ran))
    unexpected = tuple(f for f in findings if not any(_covers(e, f, where) for e in seeable))
    return Assessment(ran, "", frozenset(seen), missing, unchecked, unexpected)


def conclude(expectation: Expectation, assessments: Sequence[Assessment]) -> Verdict:
    """One verdict from the assessments of every process kind that ran for the case."""
    ran = frozenset().union(*(a.ran for a in assessments))
    if not ran:
        why = "; ".join(a.not_ran for a in assessments if a.not_ran) or "no detector was requested"
        return Verdict(Outcome.UNSUPPORTED, f"no detector ran ({why})")
    expected = expectation.findings
    seen = frozenset().union(*(a.seen for a in assessments))
    missing = {i: text for a in assessments for i, text in a.missing.items() if i not in seen}
    unchecked = {i: why for a in assessments for i, why in a.unchecked.items() if i not in seen and i not in missing}
    unexpected: list[Finding] = []
    for a in assessments:
        unexpected += [f for f in a.unexpected if f not in unexpected]
    missed = tuple(missing[i] for i in sorted(missing))
    if unexpected:
        lines = "; ".join(_short(f) for f in unexpected)
        extra = f"; also missing: {' | '.join(missed)}" if missed else ""
        return Verdict(Outcome.FINDING, f"unexpected: {lines}{extra}", tuple(unexpected), missed)
    if missed:
        upstream = [expected[i].upstream for i in sorted(missing) if expected[i].upstream]
        hint = f" (upstream {', '.join(upstream)} may be fixed: the workaround can be retired)" if upstream else ""
        return Verdict(Outcome.UNEXPECTEDLY_CLEAN, f"expected but not seen: {' | '.join(missed)}{hint}", (), missed)
    ran_words = f" (ran: {', '.join(sorted(ran))})"
    if expected and not seen:
        for category in (TAIL, UNGUARDED):
            reasons = [why for kind, why in unchecked.values() if kind == category]
            if reasons:
                return Verdict(Outcome.UNSUPPORTED, "; ".join(dict.fromkeys(reasons)) + ran_words)
        needed = sorted({d for e in expected for d in e.detectors})
        why = f": {expectation.reason}" if expectation.reason else ""
        blind = [why_ for kind, why_ in unchecked.values() if kind == BLIND and "cannot see" in why_]
        extra = f" ({'; '.join(dict.fromkeys(blind))})" if blind else ""
        return Verdict(Outcome.UNSUPPORTED, f"the expected finding is visible only to {'/'.join(needed) or 'no detector'}, "
                                            f"which did not run here{ran_words}{extra}{why}")
    if seen:
        words = "; ".join(expected[i].describe() for i in sorted(seen))
        if unchecked:
            words += "; not checked here: " + "; ".join(dict.fromkeys(why for _, why in unchecked.values()))
        return Verdict(Outcome.EXPECTED_FINDING, words)
    return Verdict(Outcome.CLEAN, f"clean under {', '.join(sorted(ran))}")


_SIDE = {PAST_END: "past the end", BEFORE_START: "before the start"}
_GUARD_WORD = {PAST_END: "back guard", BEFORE_START: "front guard"}


@dataclass(frozen=True)
class _Placements:
    """Each buffer's placement by name; `default` for a buffer the map does not name."""

    by_buffer: Mapping[str, str]
    default: str

    def __call__(self, buffer: str) -> str:
        return self.by_buffer.get(buffer, self.default)


def _covers(expected: ExpectedFinding, finding: Finding, where: _Placements) -> bool:
    """The finding is what `expected` describes: a match, the part of an expected write that lands in a flush
    placement's alignment tail, or another allocation's overrun into a buffer's guard that `expected` names as
    its culprit, or a read poison saw in a guard where an expected access to memory of no buffer of ours lands."""
    return (expected.matches(finding) or _in_tail(expected, finding, where(finding.buffer))
            or expected.matches_spill(finding) or expected.matches_landing(finding) or _seen_blind(expected, finding))


def _seen_blind(expected: ExpectedFinding, finding: Finding) -> bool:
    """A detector the expectation calls blind to this bug saw it all the same: the same bug, not another one, so
    it is covered (never unexpected) without counting as seen. Blind means "cannot be counted on to see it" (poison
    where the output rarely depends on the bytes read): a new poison pattern may make it see them (0x00 as an E8M0
    scale, where 0xFF, 0x7B and 0xFA changed nothing)."""
    blind = tuple(d for d, _ in expected.blind)
    return finding.detector in blind and replace(expected, detectors=blind, blind=()).matches(finding)


def _blind(expected: ExpectedFinding, ran: frozenset[str]) -> str:
    """Why the detectors that ran cannot check `expected`: each one the expectation names blind, with its reason;
    else that it needs others."""
    reasons = [f"{d} cannot see it here: {why}" for d, why in expected.blind if d in ran]
    if reasons:
        return f"{expected.describe()}: " + "; ".join(reasons)
    return f"{expected.describe()}: visible only to {'/'.join(expected.detectors) or 'no detector'}"


def _uncovered(expected: ExpectedFinding, ran: frozenset[str], where: _Placements) -> str:
    """Why a missed expectation outside a tensor may be a blind spot, not a vanished bug: the run covered some
    buffers but not this one (cover narrowed to watched buffers), and only detectors that need a covered buffer
    ran."""
    seeing = ran.intersection(expected.detectors)
    if (expected.region not in (PAST_END, BEFORE_START, None) or not seeing or not seeing <= NEEDS_WATCH
            or where(expected.buffer) != GUARDED or not any(p != GUARDED for p in where.by_buffer.values())):
        return ""
    return (f" [{expected.buffer} was not covered: it kept its guards inside its own allocation, where "
            f"{'/'.join(sorted(seeing))} cannot see; the run or the scenario narrowed cover to watched buffers]")


def _unguarded(expected: ExpectedFinding, placement: str) -> str:
    """Why an expectation only the guard markers could see is not checked: its buffer's placement keeps no marker
    bytes on that side (layout.unguarded_regions)."""
    side = _SIDE.get(expected.region or "", "outside the tensor")
    guard = _GUARD_WORD.get(expected.region or "", "marker guard")
    return (f"{expected.describe()}: it lies {side} where only guard markers see it, and {expected.buffer}'s "
            f"placement ({placement}) has no {guard} there (at most an alignment tail past the end)")


def _placed(expected: ExpectedFinding, placement: str, pages: Mapping[str, int]) -> bool:
    """A write that only the guard markers can see needs marker bytes where it lands: a flush placement keeps
    no back guard (a guard page only its alignment tail, 0..255 B), an exact one no front guard either
    (layout.unguarded_regions), so there the expectation is not checked (see _in_tail) unless its bytes are
    known to lie in the tail before a guard page (the tail holds markers)."""
    if placement == GUARD_PAGE_BACK and _before_page(expected, pages):
        return True
    return not (expected.region in unguarded_regions(placement) and set(expected.detectors) <= IN_ALLOCATION)


def _before_page(expected: ExpectedFinding, pages: Mapping[str, int]) -> bool:
    """Every expected byte lies before the buffer's unmapped page (in the tensor or its alignment tail): a guard
    page cannot fault on it. Unknown bytes (no ranges) are not assumed to."""
    page = pages.get(expected.buffer)
    if expected.region == BEFORE_START:   # the front-page pass puts a page right before the start (gpu_memsafety.detectors.pageprobe)
        return False
    return page is not None and expected.ranges is not None and all(hi <= page for _, hi in expected.ranges)


def _in_tail(expected: ExpectedFinding, finding: Finding, placement: str) -> bool:
    """Under a flush placement the guard markers see the part of a past_end write that lands in the
    alignment tail: a guard finding whose bytes all lie in the expected ones is that part, not a new bug."""
    if placement == GUARDED or finding.detector not in IN_ALLOCATION or finding.detector not in expected.detectors:
        return False
    if (expected.kind, expected.buffer, expected.region) != (finding.kind, finding.buffer, PAST_END) or finding.region != PAST_END:
        return False
    if expected.ranges is None:
        return True
    return all(any(lo <= r.start and r.end <= hi for lo, hi in expected.ranges) for r in finding.ranges)


def _short(f: Finding) -> str:
    return f"{f.detector} {f.kind} of {f.buffer}/{f.region} {f.bytes} B by {f.kernel or '?'}"
