"""The baseline as a report shows it: which findings a baseline accepted, and which of its entries are stale.

A run given `--gpu-memsafety-baseline FILE` records two things (gpu_memsafety.judge.baseline writes them): in each case
whose findings the baseline accepted, `details.baseline` (the accepted entries: finding key, reason,
upstream), and in `run.baseline` the file and its entries that matched nothing: `stale` (the case ran and the
finding is gone, or the case no longer exists) and `unchecked` (the case was not run to the end here, so
nothing is known). Every renderer reads them through these functions: an accepted case reads "accepted:
<reason>", never "known bug: clean", and stale entries are listed in every format.
"""
from __future__ import annotations

from typing import Any, Mapping

ACCEPTED = "baseline"     # the case details key


def accepted_entries(case: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The baseline entries that accepted this case's findings ([] when none did)."""
    details = case.get("details")
    entries = details.get(ACCEPTED) if isinstance(details, Mapping) else None
    return [e for e in entries if isinstance(e, Mapping)] if isinstance(entries, list) else []


def is_accepted(case: Mapping[str, Any]) -> bool:
    """An expected finding because a baseline accepted it, not because its scenario expects it."""
    return case.get("outcome") == "expected finding" and bool(accepted_entries(case))


def _reason(entry: Mapping[str, Any]) -> str:
    upstream = str(entry.get("upstream") or "")
    return str(entry.get("reason") or "no reason given") + (f" (upstream {upstream})" if upstream else "")


def accepted_reasons(case: Mapping[str, Any]) -> dict[str, str]:
    """Finding key -> 'accepted: <reason>' for the findings the baseline accepted."""
    return {str(e.get("finding", "")): f"accepted: {_reason(e)}" for e in accepted_entries(case)}


def accepted_text(case: Mapping[str, Any]) -> str:
    """'accepted: <reason>' (each distinct reason once), or '' when no baseline entry accepted the case."""
    reasons = list(dict.fromkeys(_reason(e) for e in accepted_entries(case)))
    return f"accepted: {'; '.join(reasons)}" if reasons else ""


def baseline_run(report: Mapping[str, Any]) -> Mapping[str, Any]:
    record = report["run"].get("baseline")
    return record if isinstance(record, Mapping) else {}


def stale_entries(report: Mapping[str, Any]) -> list[dict[str, str]]:
    """The baseline's entries that matched nothing although their case was checked, or whose case no longer
    exists: {case, finding, reason, upstream, why}. Listed so the file gets cleaned; they never fail the run."""
    return [_entry(e) for e in baseline_run(report).get("stale") or () if isinstance(e, Mapping)]


def unchecked_entries(report: Mapping[str, Any]) -> list[dict[str, str]]:
    return [_entry(e) for e in baseline_run(report).get("unchecked") or () if isinstance(e, Mapping)]


def _entry(e: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(e.get(k) or "") for k in ("case", "finding", "reason", "upstream", "why")}


def stale_line(entry: Mapping[str, str]) -> str:
    return f"{entry['case']}: {entry['finding']} ({entry['why'] or 'stale'})"
