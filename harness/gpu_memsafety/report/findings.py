"""The finding text: one finding as one line for people, or as `key = value` pairs for tool-like output.

Every renderer and the command-line tools (repro, baseline, the pytest failure text) describe a finding
through these functions, so a finding reads the same everywhere. The text is plain: each renderer escapes it
for its own format (terminal control characters, Markdown, XML).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from gpu_memsafety.model import GUARD, POISON, UNINIT, ByteRange, Finding
from gpu_memsafety.report.document import finding_from_json

# How many byte ranges one finding's description lists before summarising the rest.
RANGES_SHOWN = 4


def describe_finding(f: Finding) -> str:
    """One line for people: who read or wrote which bytes of what, from where, and where in logical terms."""
    text = f"{f.detector} {f.kind} of {f.buffer} {f.region}: {f.bytes:,} B in {_count_text(f)}"
    if f.kernel:
        text += f" by {f.kernel}"
    if f.source:
        text += f" ({f.source})"
    where = " ".join(p for p in (_coords("thread", f.first_thread), _coords("block", f.first_block)) if p)
    if where:
        text += f", {where}"
    if f.ranges:
        text += f"; ranges: {_ranges_text(f)}"
    if f.note:
        text += f"; {f.note}"
    extra = _details_text(f)
    if extra:
        text += f"; {extra}"
    return text


# Details the one-line text leaves out: the note says what `nearest` says, `source` names the file of `path`.
_NOT_IN_TEXT = ("nearest", "path")


def _details_text(f: Finding) -> str:
    """The detector's own words (zone, access, the sanitizer's text, a misaligned record's cause)."""
    return ", ".join(f"{k}: {v}" for k, v in f.details if k not in _NOT_IN_TEXT and v)


def _count_text(f: Finding) -> str:
    # guard and poison count changed ranges, uninit the ranges it names (unwritten or read before written),
    # the sanitizers and the guard page accesses
    unit = "changed range" if f.detector in (GUARD, POISON) else "range" if f.detector == UNINIT else "access"
    return f"{f.count:,} {unit}{'' if f.count == 1 else 'es' if unit == 'access' else 's'}"


def _coords(label: str, value: str) -> str:
    if not value:
        return ""
    return f"{label} {value if value.startswith('(') else f'({value})'}"


def _ranges_text(f: Finding) -> str:
    shown = [_range_text(r, f.region) for r in f.ranges[:RANGES_SHOWN]]
    hidden = len(f.ranges) - RANGES_SHOWN
    if hidden > 0:
        shown.append(f"and {hidden} more")
    return ", ".join(shown)


def _range_text(r: ByteRange, finding_region: str) -> str:
    text = f"{r.start:+d}..{r.end:+d}"
    if r.region and r.region != finding_region:
        text += f" {r.region}"
    return f"{text} ({r.logical})" if r.logical else text


def finding_fields(f: Finding) -> list[tuple[str, str]]:
    """A finding as `key = value` pairs (JUnit system-out, failure text)."""
    pairs = [("detector", f.detector), ("kind", f.kind), ("kernel", f.kernel), ("arch", f.arch),
             ("buffer", f.buffer), ("region", f.region), ("bytes", str(f.bytes)), ("count", str(f.count)),
             ("first_thread", f.first_thread), ("first_block", f.first_block), ("source", f.source)]
    pairs += [("range", _range_text(r, f.region)) for r in f.ranges]
    pairs.append(("note", f.note))
    pairs += [(k, v) for k, v in f.details if k != "nearest"]
    return [(k, v) for k, v in pairs if v]


def key_values(pairs: Iterable[tuple[str, str]]) -> str:
    pairs = list(pairs)
    width = max((len(k) for k, _ in pairs), default=0)
    return "\n".join(f"{k.ljust(width)} = {v}" for k, v in pairs)


def case_findings(case: Mapping[str, Any]) -> list[Finding]:
    return [finding_from_json(f) for f in case["findings"]]



def finding_signature(f: Finding) -> str:
    """What a finding is, without how much: 'memcheck overread of w_scale past_end' (groups like findings)."""
    return f"{f.detector} {f.kind} of {f.buffer} {f.region}"
