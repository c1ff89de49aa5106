"""Baselines: findings a project has looked at and accepted for now, checked in beside the code.

A finding that no scenario expects fails the run, which is right for a regression gate but leaves a team
stuck when it adopts the harness on code that already has findings, or waits for an upstream fix. The
baseline file lists such findings by case id and Finding.key() (address-free, so stable across runs), each
with the reason and upstream issue. `compare` then splits a run's findings into new ones (these fail the
run), accepted ones, and accepted entries that did not show up (listed so the file gets cleaned, never
failing): stale when the case ran to the end or no longer exists, unchecked when it did not run to the end
here. `gpu-memsafety baseline write` writes a file from a report with every reason empty, and a run refuses
a file with an empty reason, so none is accepted without one. Findings of cases whose outcome is "expected finding" are already accepted by their scenario's
strict expectation, which names the upstream issue; the baseline does not have to repeat them.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Sequence

from gpu_memsafety.util.fsutil import atomic_write_text
from gpu_memsafety.model import DETECTORS, INEXACT_BYTES, CaseResult, Finding, Outcome, key_bytes
from gpu_memsafety.report import ReportError, FieldChecker, describe_finding, read_json_file, upstream_of, visible

BASELINE_SCHEMA = "gpu-memsafety-baseline/1"
# Hand-maintained lists of accepted findings stay small; anything near this is not a baseline.
MAX_BASELINE_BYTES = 16 * 1024 * 1024
# The reason `write` leaves: empty, to fill in (load_baseline refuses an empty reason).
DEFAULT_REASON = ""
# Outcomes after which a case's detectors ran to the end, so an accepted finding that is absent is really gone.
_CHECKED = (Outcome.CLEAN, Outcome.FINDING, Outcome.EXPECTED_FINDING, Outcome.UNEXPECTEDLY_CLEAN)


class BaselineError(ReportError):
    """A baseline file that cannot be used: names the file and says what is wrong."""


@dataclass(frozen=True)
class AcceptedFinding:
    case: str          # case id
    finding: str       # Finding.key()
    reason: str
    upstream: str = ""
    seen: str = ""     # the finding in words, written to help fill in the reason; never matched on

    def to_json(self) -> dict[str, str]:
        data = {"case": self.case, "finding": self.finding, "reason": self.reason, "upstream": self.upstream}
        return {**data, "seen": self.seen} if self.seen else data

    @property
    def fields(self) -> dict[str, str]:
        """The key's fields (Finding.key(): detector:kind:kernel:buffer:region:bytes; a kernel may hold ':')."""
        return key_fields(self.finding)

    def accepts(self, case: str, finding: Finding) -> bool:
        """Same case, and the same detector, kind, buffer and region, field by field (never a string that
        happens to read the same), and the same kernel and byte count. A finding whose count is not exact (its key
        reads `~` for bytes: model.key_bytes) is accepted whatever count the entry names: an entry written before
        such counts left the key names the count of one run, which the next identical run need not repeat."""
        if case != self.case:
            return False
        want = self.fields
        got = {"detector": finding.detector, "kind": finding.kind, "kernel": finding.kernel, "buffer": finding.buffer,
               "region": finding.region, "bytes": key_bytes(finding.bytes, finding.exact)}
        same = [k for k in KEY_FIELDS if want[k] == got[k]]
        return len(same) == len(KEY_FIELDS) or (not finding.exact and same == [k for k in KEY_FIELDS if k != "bytes"])


KEY_FIELDS = ("detector", "kind", "kernel", "buffer", "region", "bytes")


def key_fields(key: str) -> dict[str, str]:
    head = key.split(":", 2)
    tail = head[-1].rsplit(":", 3) if len(head) == 3 else []
    if len(head) != 3 or len(tail) != 4:
        raise ValueError(f"{key!r} is not detector:kind:kernel:buffer:region:bytes (Finding.key())")
    return dict(zip(KEY_FIELDS, [head[0], head[1], *tail]))


@dataclass(frozen=True)
class Baseline:
    accepted: tuple[AcceptedFinding, ...] = ()

    def entry(self, case: str, key: str) -> AcceptedFinding | None:
        return next((a for a in self.accepted if a.case == case and a.finding == key), None)

    def accepting(self, case: str, finding: Finding) -> AcceptedFinding | None:
        return next((a for a in self.accepted if a.accepts(case, finding)), None)


@dataclass(frozen=True)
class SeenFinding:
    """A finding of this run, with the case that produced it."""

    case: str
    finding: Finding

    @property
    def key(self) -> str:
        return self.finding.key()


@dataclass
class BaselineDiff:
    new: list[SeenFinding] = field(default_factory=list)                  # not accepted: fail the run
    accepted: list[tuple[SeenFinding, AcceptedFinding]] = field(default_factory=list)
    expected: list[SeenFinding] = field(default_factory=list)             # covered by a scenario expectation
    disappeared: list[AcceptedFinding] = field(default_factory=list)      # case checked, finding gone
    removed: list[AcceptedFinding] = field(default_factory=list)          # the case no longer exists
    unchecked: list[AcceptedFinding] = field(default_factory=list)        # case absent or did not finish

    @property
    def failed(self) -> bool:
        return bool(self.new)

    def to_json(self) -> dict[str, Any]:
        return {
            "failed": self.failed,
            "new": [_seen_json(s) for s in self.new],
            "accepted": [{**_seen_json(s), "reason": a.reason, "upstream": a.upstream} for s, a in self.accepted],
            "expected": [_seen_json(s) for s in self.expected],
            "disappeared": [a.to_json() for a in self.disappeared],
            "removed": [a.to_json() for a in self.removed],
            "unchecked": [a.to_json() for a in self.unchecked],
        }

    def to_report(self, file: str, entries: int) -> dict[str, Any]:
        """`run.baseline` of a report (gpu_memsafety.report.baselines reads it): the file, how many entries it
        has and accepted here, and the entries that matched nothing: stale (with why) and unchecked."""
        stale = ([{**a.to_json(), "why": "the case ran and this finding is gone"} for a in self.disappeared]
                 + [{**a.to_json(), "why": "no such case any more"} for a in self.removed])
        return {"file": file, "entries": entries, "accepted": len(self.accepted), "stale": stale,
                "unchecked": [{**a.to_json(), "why": "the case did not run to the end here"} for a in self.unchecked]}


def _seen_json(seen: SeenFinding) -> dict[str, str]:
    return {"case": seen.case, "finding": seen.key}


# ---------------------------------------------------------------------------------------------- load


def load_baseline(path: str | os.PathLike[str], *, require_reasons: bool = True) -> Baseline:
    """Read and validate a baseline file; raises BaselineError naming the file and the problem. An empty reason
    is refused unless `require_reasons` is False (rewriting a file that still has some to fill in)."""
    data = read_json_file(path, limit=MAX_BASELINE_BYTES, error=BaselineError)
    check = FieldChecker(path, BaselineError)
    doc = check.obj(data, "top level")
    check.schema(doc, BASELINE_SCHEMA, "baseline")
    entries = [_entry(check, item, f"accepted[{i}]", require_reasons)
               for i, item in enumerate(check.field(doc, "accepted", list, ""))]
    _reject_duplicates(check, entries)
    return Baseline(tuple(entries))


def _entry(check: FieldChecker, item: Any, where: str, require_reasons: bool = True) -> AcceptedFinding:
    item = check.obj(item, where)
    case, finding, reason = (check.field(item, key, str, where) for key in ("case", "finding", "reason"))
    upstream = check.field(item, "upstream", str, where) if "upstream" in item else ""
    seen = check.field(item, "seen", str, where) if "seen" in item else ""
    for key, value in (("case", case), ("finding", finding), ("reason", reason)):
        if not value.strip() and (key != "reason" or require_reasons):
            raise check.fail(f"{where}.{key}", "is empty" + (
                f"; say why this finding is accepted ({seen or finding}): `baseline write` leaves every reason empty "
                "to be filled in" if key == "reason" else ""))
    _check_key(check, finding, f"{where}.finding")
    return AcceptedFinding(case, finding, reason, upstream, seen)


def _check_key(check: FieldChecker, key: str, where: str) -> None:
    """An accepted finding names its detector, kind, buffer and region: a key that does not is refused."""
    try:
        fields = key_fields(key)
    except ValueError as exc:
        raise check.fail(where, str(exc)) from None
    if fields["detector"] not in DETECTORS:
        raise check.fail(where, f"detector {fields['detector']!r} is not one of {', '.join(DETECTORS)}")
    for name in ("kind", "buffer", "region"):
        if not fields[name].strip():
            raise check.fail(where, f"names no {name}: an accepted finding must match on detector, kind, buffer and region")
    if not fields["bytes"].isdigit() and fields["bytes"] != INEXACT_BYTES:
        raise check.fail(where, f"bytes {fields['bytes']!r} is not a count (or {INEXACT_BYTES!r}: a count that is "
                                "not exact)")


def _reject_duplicates(check: FieldChecker, entries: Sequence[AcceptedFinding]) -> None:
    seen: set[tuple[str, str]] = set()
    for index, entry in enumerate(entries):
        if (entry.case, entry.finding) in seen:
            raise check.fail(f"accepted[{index}]", f"repeats case {entry.case!r} finding {entry.finding!r}")
        seen.add((entry.case, entry.finding))


# ------------------------------------------------------------------------------------------- compare


def compare(results: Sequence[CaseResult], baseline: Baseline, *,
            known_cases: Collection[str] | None = None) -> BaselineDiff:
    """Split this run's findings against the baseline; see BaselineDiff for the lists. `known_cases`: every case
    id that exists (all scenarios); an entry of a case not among them and not in this run was removed."""
    diff = BaselineDiff()
    by_case: dict[str, list[Finding]] = {}
    for result in results:
        for finding in result.findings:
            seen = SeenFinding(result.case_id, finding)
            by_case.setdefault(seen.case, []).append(finding)
            _place(diff, seen, baseline.accepting(seen.case, finding), result.outcome)
    checked = {r.case_id for r in results if r.outcome in _CHECKED}
    ran = {r.case_id for r in results}
    for entry in baseline.accepted:
        if any(entry.accepts(entry.case, finding) for finding in by_case.get(entry.case, ())):
            continue
        if entry.case in checked:
            diff.disappeared.append(entry)
        elif known_cases is not None and entry.case not in ran and entry.case not in known_cases:
            diff.removed.append(entry)
        else:
            diff.unchecked.append(entry)
    return diff


def _place(diff: BaselineDiff, seen: SeenFinding, entry: AcceptedFinding | None, outcome: Outcome) -> None:
    if entry is not None:
        diff.accepted.append((seen, entry))
    elif outcome is Outcome.EXPECTED_FINDING:
        diff.expected.append(seen)
    else:
        diff.new.append(seen)


def run_record(path: Path, results: Sequence[CaseResult], known_cases: Collection[str], root: Path) -> dict[str, Any]:
    """`run.baseline` of a run given `--baseline path`: the file (relative to the run's root when inside it) and
    its entries that matched nothing. `known_cases`: every case id the run's scenarios have."""
    baseline = load_baseline(path)
    diff = compare(results, baseline, known_cases=known_cases)
    shown, base = path.resolve(), root.resolve()
    return diff.to_report(shown.relative_to(base).as_posix() if shown.is_relative_to(base) else shown.as_posix(),
                          len(baseline.accepted))


def render_diff(diff: BaselineDiff) -> str:
    """Plain text for the terminal: what fails, what is accepted, what the baseline can lose."""
    v = _one_line   # case ids, keys, reasons and kernel names come from the report and the baseline file
    sections = [
        _section("NEW findings (not in the baseline; these fail the run)",
                 [f"{v(s.case)}: {v(describe_finding(s.finding))}\n      key = {v(s.key)}" for s in diff.new]),
        _section("Accepted by the baseline",
                 [v(f"{s.case}: {s.key} (accepted: {a.reason}{_up(a.upstream)})") for s, a in diff.accepted]),
        _section("STALE entries: the case ran and the finding is gone (remove them from the baseline)",
                 [v(f"{a.case}: {a.finding}") for a in diff.disappeared]),
        _section("STALE entries: no such case any more (remove them from the baseline)",
                 [v(f"{a.case}: {a.finding}") for a in diff.removed]),
        _section("Accepted entries not checked (case absent or did not finish)",
                 [v(f"{a.case}: {a.finding}") for a in diff.unchecked]),
    ]
    return "\n\n".join(s for s in sections if s) + "\n" if any(sections) else "baseline: nothing to report\n"


def _one_line(text: str) -> str:
    """Foreign text as one visible line: a newline in a key or a reason can never start a line of its own."""
    return visible(text, newlines=False)


def _section(title: str, lines: Sequence[str]) -> str:
    return "\n".join([f"{title}:", *(f"  {line}" for line in lines)]) if lines else ""


def _up(upstream: str) -> str:
    return f"; upstream {upstream}" if upstream else ""


# --------------------------------------------------------------------------------------------- write


def baseline_from_results(
    results: Sequence[CaseResult],
    *,
    previous: Baseline | None = None,
    reason: str = DEFAULT_REASON,
    include_expected: bool = False,
) -> Baseline:
    """Accept every finding of a run; reasons and upstream issues of `previous` entries are kept."""
    entries: dict[tuple[str, str], AcceptedFinding] = {}
    for result in results:
        if result.outcome is Outcome.EXPECTED_FINDING and not include_expected:
            continue
        for finding in result.findings:
            key = (result.case_id, finding.key())
            old = previous.entry(*key) if previous else None
            seen = describe_finding(finding)
            entries[key] = (AcceptedFinding(old.case, old.finding, old.reason, old.upstream, seen) if old
                            else AcceptedFinding(*key, reason, upstream_of(result.to_json()), seen))
    return Baseline(tuple(entries[key] for key in sorted(entries)))


def baseline_json(baseline: Baseline) -> dict[str, Any]:
    return {"schema": BASELINE_SCHEMA, "accepted": [a.to_json() for a in baseline.accepted]}


def write_baseline(
    results: Sequence[CaseResult],
    path: str | os.PathLike[str],
    *,
    previous: Baseline | None = None,
    reason: str = DEFAULT_REASON,
    include_expected: bool = False,
) -> Path:
    """(Re)create a baseline file from a run, atomically, sorted by case and key so diffs stay small."""
    baseline = baseline_from_results(results, previous=previous, reason=reason, include_expected=include_expected)
    return atomic_write_text(path, json.dumps(baseline_json(baseline), indent=2) + "\n")
