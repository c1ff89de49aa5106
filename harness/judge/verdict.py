"""Verdicts: compare what the detectors that actually ran saw with what the scenario expects.

Rules (each a closed outcome, see model.Outcome):
- an expected finding is checked only against detectors that ran (and a past_end finding only the guard markers see only where
  its buffer had a back guard (each buffer's placement, from the worker's buffer map), or where its bytes lie in a guard-page buffer's alignment tail; and never by the guard
  page when its bytes all lie before that buffer's unmapped page: see `pages`); if none of its detectors ran, the case
  is UNSUPPORTED in this mode (it says which detector was needed), never clean;
- every expected finding matched and nothing else seen: EXPECTED_FINDING; nothing expected, nothing seen: CLEAN;
- an expected finding not seen by a detector that ran: UNEXPECTEDLY_CLEAN (a failure: the bug is gone or
  the harness went blind; for a known upstream bug it says the workaround may be retired);
- anything seen that no expectation covers: FINDING (a failure).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from gpu_memsafety.placement.layout import GUARD_PAGE_BACK, GUARDED, unguarded_regions
from gpu_memsafety.model import BEFORE_START, GUARD, GUARD_PAGE, PAST_END, DetectorRun, Expectation, ExpectedFinding, Finding, Outcome
from gpu_memsafety.engine.modes import NEEDS_WATCH


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    message: str
    unexpected: tuple[Finding, ...] = ()
    missing: tuple[str, ...] = ()


def decide(expectation: Expectation, findings: Sequence[Finding], detectors: Sequence[DetectorRun],
           placement: str = GUARDED, pages: Mapping[str, int] | None = None,
           placements: Mapping[str, str] | None = None) -> Verdict:
    """`placements`: where each buffer sat (its layout's placement, from the worker's buffer map); `placement` is
    where a buffer it does not name sat. A flush-end buffer has no back guard to be checked.
    `pages`: for each buffer that sat before a guard page, the offset from its first byte of the first unmapped
    byte (its size plus its alignment tail; the worker's buffer map). An expected finding whose bytes all lie
    before that offset cannot fault there: the guard page is dropped from its detectors (the guard markers still
    see a write into the tail), and if nothing else that ran can see it, it is not checked, never clean."""
    pages = dict(pages or {})
    where = _Placements(placements or {}, placement)
    ran = {d.detector for d in detectors if d.ran}
    if not ran:
        why = "; ".join(f"{d.detector}: {d.detail}" for d in detectors) or "no detector was requested"
        return Verdict(Outcome.UNSUPPORTED, f"no detector ran ({why})")
    before_page = [e for e in expectation.findings if _before_page(e, pages) and GUARD_PAGE in ran]
    seeable = [replace(e, detectors=tuple(d for d in e.detectors if d != GUARD_PAGE)) if e in before_page else e
               for e in expectation.findings]
    checkable = [e for e in seeable if ran.intersection(e.detectors) and _placed(e, where(e.buffer), pages)]
    unexpected = tuple(f for f in findings if not any(e.matches(f) or _in_tail(e, f, where(f.buffer)) for e in seeable))
    missing = tuple(e.describe() + _uncovered(e, ran, where) for e in checkable if not any(e.matches(f) for f in findings))
    if unexpected:
        lines = "; ".join(_short(f) for f in unexpected)
        extra = f"; also missing: {' | '.join(missing)}" if missing else ""
        return Verdict(Outcome.FINDING, f"unexpected: {lines}{extra}", unexpected, missing)
    if missing:
        upstream = [e.upstream for e in checkable if e.upstream]
        hint = f" (upstream {', '.join(upstream)} may be fixed: the workaround can be retired)" if upstream else ""
        return Verdict(Outcome.UNEXPECTEDLY_CLEAN, f"expected but not seen: {' | '.join(missing)}{hint}", (), missing)
    if expectation.findings and not checkable:
        if before_page:
            return Verdict(Outcome.UNSUPPORTED, "; ".join(
                f"{e.describe()}: its bytes lie in {e.buffer}'s alignment tail, before its guard page at byte "
                f"{pages[e.buffer]}, so not visible to guard_page in this placement" for e in before_page)
                + f" (ran: {', '.join(sorted(ran))})")
        needed = sorted({d for e in expectation.findings for d in e.detectors})
        if ran.intersection(needed):
            unplaced = [e for e in seeable if ran.intersection(e.detectors)]
            return Verdict(Outcome.UNSUPPORTED, "; ".join(_unguarded(e, where(e.buffer)) for e in unplaced)
                           + f" (ran: {', '.join(sorted(ran))})")
        why = f": {expectation.reason}" if expectation.reason else ""
        return Verdict(Outcome.UNSUPPORTED, f"the expected finding is visible only to {'/'.join(needed)}, which did not run here (ran: {', '.join(sorted(ran))}){why}")
    if checkable:
        return Verdict(Outcome.EXPECTED_FINDING, "; ".join(e.describe() for e in checkable))
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


def _uncovered(expected: ExpectedFinding, ran: set[str], where: "_Placements") -> str:
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
    guard = _GUARD_WORD.get(expected.region or "", "guard")
    return (f"{expected.describe()}: it lies {side} where only guard markers see it, and {expected.buffer}'s "
            f"placement ({placement}) has no {guard} there (at most an alignment tail past the end)")


def _placed(expected: ExpectedFinding, placement: str, pages: Mapping[str, int]) -> bool:
    """A write that only the guard markers can see needs marker bytes where it lands: a flush placement keeps
    no back guard (a guard page only its alignment tail, 0..255 B), an exact one no front guard either
    (layout.unguarded_regions), so there the expectation is not checked (see _in_tail) unless its bytes are
    known to lie in the tail before a guard page (the tail holds markers)."""
    if placement == GUARD_PAGE_BACK and _before_page(expected, pages):
        return True
    return not (expected.region in unguarded_regions(placement) and set(expected.detectors) <= {GUARD})


def _before_page(expected: ExpectedFinding, pages: Mapping[str, int]) -> bool:
    """Every expected byte lies before the buffer's unmapped page (in the tensor or its alignment tail): a guard
    page cannot fault on it. Unknown bytes (no ranges) are not assumed to."""
    page = pages.get(expected.buffer)
    if expected.region == BEFORE_START:   # the front-page pass puts a page right before the start (harness/detectors/pageprobe.py)
        return False
    return page is not None and expected.ranges is not None and all(hi <= page for _, hi in expected.ranges)


def _in_tail(expected: ExpectedFinding, finding: Finding, placement: str) -> bool:
    """Under a flush placement the guard markers see the part of a past_end write that lands in the
    alignment tail: a guard finding whose bytes all lie in the expected ones is that part, not a new bug."""
    if placement == GUARDED or finding.detector != GUARD or GUARD not in expected.detectors:
        return False
    if (expected.kind, expected.buffer, expected.region) != (finding.kind, finding.buffer, PAST_END) or finding.region != PAST_END:
        return False
    if expected.ranges is None:
        return True
    return all(any(lo <= r.start and r.end <= hi for lo, hi in expected.ranges) for r in finding.ranges)


def _short(f: Finding) -> str:
    return f"{f.detector} {f.kind} of {f.buffer}/{f.region} {f.bytes} B by {f.kernel or '?'}"
