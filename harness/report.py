"""Run reports: the documents that CI systems and people read after a run.

One run gives one `report.json` (schema `gpu-memsafety-report/1`, documented in docs/report-schema.md) and
three renderings of it: a terminal table, JUnit XML for CI test tabs, and Markdown for GitHub job summaries.
Every renderer takes the JSON document, not CaseResult objects, so that a report loaded from disk (another
runner's, last night's) renders exactly like a fresh one. Loading validates the file before anything reads
it: reports travel between machines as CI artifacts, so a file is data to check, never code to run nor a
source of paths to open.
"""
from __future__ import annotations

import json
import os
import re
import stat
import xml.etree.ElementTree as ET
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypedDict

from harness import __version__
from harness.fsutil import atomic_write_text
from harness.model import (
    GUARD,
    OVERREAD,
    OVERWRITE,
    POISON,
    ByteRange,
    CaseResult,
    DetectorRun,
    Finding,
    Outcome,
)

REPORT_SCHEMA = "gpu-memsafety-report/1"
# A full nightly sweep (thousands of cases, every finding with its ranges) is a few MiB; a file past
# 64 MiB is not one of ours, and reading it whole would only let a broken artifact exhaust a CI runner.
MAX_REPORT_BYTES = 64 * 1024 * 1024

# Row verdicts, best first; a merged cell takes the worst of its rows, except that "unsupported" only
# stands when nothing ran at all (an architecture where some cases ran is judged by those).
OK, KNOWN_BUG, FAILURE, UNSUPPORTED = "ok", "known bug", "failure", "unsupported"
VERDICTS = (UNSUPPORTED, OK, KNOWN_BUG, FAILURE)

# The report's own status line: "empty" when no case was checked (none ran, or all were unsupported),
# because a run that checked nothing must never read as a pass.
PASSED, FAILED, EMPTY = "passed", "failed", "empty"

# How many byte ranges one finding's description lists before summarising the rest.
RANGES_SHOWN = 4
# GitHub caps a job summary at 1 MiB; past these the Markdown points at report.json instead.
MARKDOWN_CASES_SHOWN = 50
MARKDOWN_MESSAGE_LINES = 40
# A JUnit failure's `message` attribute is one line in CI tabs; the full text goes in the element body.
JUNIT_MESSAGE_CHARS = 200


class ReportError(ValueError):
    """A report file that cannot be used: names the file and says what is wrong with it."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(f"{os.fspath(path)}: {problem}")
        self.path = os.fspath(path)
        self.problem = problem


class KindTotals(TypedDict):
    findings: int   # Finding records of this kind
    bytes: int      # sum of their distinct bytes
    accesses: int   # sum of their counts (sanitizer records or changed ranges)


class MatrixRow(TypedDict):
    kernel: str
    arch: str
    cases: int
    failed: int
    overreads: KindTotals
    overwrites: KindTotals
    verdict: str


# --------------------------------------------------------------------------------------------- build


def build_report(
    results: list[CaseResult],
    environment: Mapping[str, Any],
    *,
    started: str,
    finished: str,
    argv: list[str],
    mode: str | None = None,
) -> dict[str, Any]:
    """The report.json document of one run; `mode` defaults to the cases' modes joined with '+'."""
    return {
        "schema": REPORT_SCHEMA,
        "environment": dict(environment),
        "run": {
            "started": started,
            "finished": finished,
            "argv": list(argv),
            "mode": mode if mode is not None else run_mode(results),
            "harness_version": __version__,
        },
        "summary": summarize(results),
        "cases": [result.to_json() for result in results],
        "matrix": matrix(results),
    }


def run_mode(results: Iterable[CaseResult]) -> str:
    return "+".join(sorted({r.mode for r in results if r.mode}))


def summarize(results: Sequence[CaseResult]) -> dict[str, Any]:
    counts = {outcome.label: 0 for outcome in Outcome}
    for result in results:
        counts[result.outcome.label] += 1
    failed = sum(1 for r in results if r.failed)
    checked = len(results) - counts[Outcome.UNSUPPORTED.label]
    return {
        "total": len(results),
        "failed": failed,
        "counts": counts,
        "status": FAILED if failed else (PASSED if checked else EMPTY),
    }


def matrix(results: Sequence[CaseResult]) -> list[MatrixRow]:
    """One row per (case kernel, case arch); findings count in the row of the case that produced them."""
    groups: dict[tuple[str, str], list[CaseResult]] = {}
    for result in results:
        groups.setdefault((result.kernel, result.arch), []).append(result)
    return [_matrix_row(kernel, arch, cases) for (kernel, arch), cases in sorted(groups.items())]


def _matrix_row(kernel: str, arch: str, cases: Sequence[CaseResult]) -> MatrixRow:
    findings = [f for case in cases for f in case.findings]
    return {
        "kernel": kernel,
        "arch": arch,
        "cases": len(cases),
        "failed": sum(1 for c in cases if c.failed),
        "overreads": kind_totals(findings, OVERREAD),
        "overwrites": kind_totals(findings, OVERWRITE),
        "verdict": row_verdict([c.outcome for c in cases]),
    }


def kind_totals(findings: Iterable[Finding], kind: str) -> KindTotals:
    chosen = [f for f in findings if f.kind == kind]
    return {
        "findings": len(chosen),
        "bytes": sum(f.bytes for f in chosen),
        "accesses": sum(f.count for f in chosen),
    }


def row_verdict(outcomes: Sequence[Outcome]) -> str:
    if any(o.is_failure for o in outcomes):
        return FAILURE
    if all(o is Outcome.UNSUPPORTED for o in outcomes):
        return UNSUPPORTED
    if any(o is Outcome.EXPECTED_FINDING for o in outcomes):
        return KNOWN_BUG
    return OK


def worst_verdict(verdicts: Iterable[str]) -> str:
    """The verdict of several rows of one (kernel, arch): 'unsupported' only if every row is."""
    return max(verdicts, key=VERDICTS.index, default=UNSUPPORTED)


def upstream_of(case: Mapping[str, Any]) -> str:
    """The upstream issue of a case's expectation: details['upstream'], else '(upstream X)' in `expected`."""
    details = case.get("details")
    if isinstance(details, Mapping) and isinstance(details.get("upstream"), str):
        return str(details["upstream"])
    found = re.search(r"upstream ([^\s);]+)", str(case.get("expected", "")))
    return found.group(1) if found else ""


# ---------------------------------------------------------------------------------------------- load


def load_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a report.json; raises ReportError naming the file and the problem."""
    return validate_report(read_json_file(path), path)


def read_json_file(
    path: str | os.PathLike[str],
    *,
    limit: int = MAX_REPORT_BYTES,
    error: Callable[[str | os.PathLike[str], str], ReportError] = ReportError,
) -> Any:
    """Parse one regular file of strict JSON (no NaN), at most `limit` bytes; every problem is `error`."""
    raw = _read_bounded(path, limit, error)
    if not raw.strip():
        raise error(path, "empty file; expected a JSON document")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(path, f"not UTF-8 text (byte {exc.start}); expected a JSON document") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise error(path, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                          "truncated or not a JSON file?") from None
    except ValueError as exc:
        raise error(path, f"not strict JSON: {exc}") from None
    except RecursionError:
        raise error(path, "JSON nested too deeply") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _read_bounded(path: str | os.PathLike[str], limit: int, error: Callable[..., ReportError]) -> bytes:
    # O_NONBLOCK: opening a FIFO named by mistake must fail the type check, not hang the job.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise error(path, f"cannot open: {exc.strerror or exc}") from None
    try:
        _check_regular(path, os.fstat(fd), limit, error)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(limit + 1)
    if len(raw) > limit:
        raise error(path, f"too large: more than {limit:,} bytes")
    return raw


def _check_regular(path: str | os.PathLike[str], info: os.stat_result, limit: int,
                   error: Callable[..., ReportError]) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise error(path, "is a directory, not a report file")
    if not stat.S_ISREG(info.st_mode):
        raise error(path, "not a regular file")
    if info.st_size > limit:
        raise error(path, f"too large: {info.st_size:,} bytes, the limit is {limit:,}")


def validate_report(data: Any, source: str | os.PathLike[str] = "<report>") -> dict[str, Any]:
    """Check that `data` is a report of this schema; returns it, raises ReportError(source, ...)."""
    check = FieldChecker(source)
    doc = check.obj(data, "top level")
    check.schema(doc, REPORT_SCHEMA, "report")
    check.obj(check.field(doc, "environment", dict, ""), "environment")
    _check_run(check, check.field(doc, "run", dict, ""))
    cases = check.field(doc, "cases", list, "")
    for index, case in enumerate(cases):
        _check_case(check, case, f"cases[{index}]")
    _check_summary(check, check.field(doc, "summary", dict, ""), cases)
    for index, row in enumerate(check.field(doc, "matrix", list, "")):
        _check_row(check, row, f"matrix[{index}]")
    return doc


_TYPE_NAMES = {dict: "object", list: "array", str: "string", int: "integer", bool: "true/false",
               float: "number"}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


class FieldChecker:
    """Field-by-field checks that name the file and the JSON path of the first thing wrong."""

    def __init__(self, source: str | os.PathLike[str], error: Callable[..., ReportError] = ReportError):
        self.source = source
        self.error = error

    def fail(self, where: str, problem: str) -> ReportError:
        return self.error(self.source, f"{where}: {problem}" if where else problem)

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a JSON object, got {_type_name(value)}")
        return value

    def field(self, obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
        path = f"{where}.{key}" if where else key
        if key not in obj:
            raise self.fail(where or "top level", f"missing field '{key}'")
        value = obj[key]
        if not _is_kind(value, kind):
            raise self.fail(path, f"expected {_TYPE_NAMES[kind]}, got {_type_name(value)}")
        return value

    def count(self, obj: Mapping[str, Any], key: str, where: str) -> int:
        value: int = self.field(obj, key, int, where)
        if value < 0:
            raise self.fail(f"{where}.{key}" if where else key, f"negative count {value}")
        return value

    def schema(self, doc: Mapping[str, Any], expected: str, what: str) -> None:
        if "schema" not in doc:
            raise self.fail("", f"no 'schema' field: not a gpu-memsafety {what} (expected '{expected}')")
        if doc["schema"] != expected:
            raise self.fail("", f"schema is {doc['schema']!r}; expected '{expected}'")


def _is_kind(value: Any, kind: type) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind)


def _check_run(check: FieldChecker, run: Mapping[str, Any]) -> None:
    for key in ("started", "finished", "mode"):
        check.field(run, key, str, "run")
    argv = check.field(run, "argv", list, "run")
    for index, arg in enumerate(argv):
        if not isinstance(arg, str):
            raise check.fail(f"run.argv[{index}]", f"expected string, got {_type_name(arg)}")


_CASE_STRINGS = ("id", "scenario", "variant", "kernel", "arch", "mode", "expected", "outcome", "message")


def _check_case(check: FieldChecker, case: Any, where: str) -> None:
    case = check.obj(case, where)
    for key in _CASE_STRINGS:
        check.field(case, key, str, where)
    check.field(case, "params", dict, where)
    check.field(case, "details", dict, where)
    check.field(case, "duration_s", float, where)
    failed = check.field(case, "failed", bool, where)
    outcome = _check_outcome(check, case["outcome"], f"{where}.outcome")
    if failed != outcome.is_failure:
        raise check.fail(f"{where}.failed", f"is {str(failed).lower()} but outcome '{outcome.label}' "
                                            f"{'is' if outcome.is_failure else 'is not'} a failure")
    for index, finding in enumerate(check.field(case, "findings", list, where)):
        _check_finding(check, finding, f"{where}.findings[{index}]")
    for index, run in enumerate(check.field(case, "detectors", list, where)):
        _check_detector_run(check, run, f"{where}.detectors[{index}]")


def _check_outcome(check: FieldChecker, label: str, where: str) -> Outcome:
    try:
        return Outcome.from_label(label)
    except ValueError:
        known = ", ".join(o.label for o in Outcome)
        raise check.fail(where, f"unknown outcome {label!r} (known: {known})") from None


_FINDING_STRINGS = ("detector", "kind", "buffer", "region", "kernel", "arch", "first_thread",
                    "first_block", "source", "note")


def _check_finding(check: FieldChecker, finding: Any, where: str) -> None:
    finding = check.obj(finding, where)
    for key in _FINDING_STRINGS:
        check.field(finding, key, str, where)
    check.count(finding, "bytes", where)
    check.count(finding, "count", where)
    for index, byte_range in enumerate(check.field(finding, "ranges", list, where)):
        _check_range(check, byte_range, f"{where}.ranges[{index}]")


def _check_range(check: FieldChecker, byte_range: Any, where: str) -> None:
    byte_range = check.obj(byte_range, where)
    check.field(byte_range, "region", str, where)
    check.field(byte_range, "logical", str, where)
    start = check.field(byte_range, "start", int, where)
    if check.field(byte_range, "end", int, where) < start:
        raise check.fail(where, "end is before start")


def _check_detector_run(check: FieldChecker, run: Any, where: str) -> None:
    run = check.obj(run, where)
    check.field(run, "detector", str, where)
    check.field(run, "ran", bool, where)
    check.field(run, "detail", str, where)


def _check_summary(check: FieldChecker, summary: Mapping[str, Any], cases: Sequence[Any]) -> None:
    total = check.count(summary, "total", "summary")
    check.count(summary, "failed", "summary")
    status = check.field(summary, "status", str, "summary")
    if status not in (PASSED, FAILED, EMPTY):
        raise check.fail("summary.status", f"unknown status {status!r}")
    counts = check.field(summary, "counts", dict, "summary")
    for label in counts:
        _check_outcome(check, label, f"summary.counts.{label}")
        check.count(counts, label, "summary.counts")
    if total != len(cases):
        raise check.fail("summary.total", f"says {total} cases but the file holds {len(cases)} "
                                          "(truncated or edited?)")


def _check_row(check: FieldChecker, row: Any, where: str) -> None:
    row = check.obj(row, where)
    check.field(row, "kernel", str, where)
    check.field(row, "arch", str, where)
    check.count(row, "cases", where)
    check.count(row, "failed", where)
    verdict = check.field(row, "verdict", str, where)
    if verdict not in VERDICTS:
        raise check.fail(f"{where}.verdict", f"unknown verdict {verdict!r} (known: {', '.join(VERDICTS)})")
    for kind in ("overreads", "overwrites"):
        totals = check.obj(check.field(row, kind, dict, where), f"{where}.{kind}")
        for key in ("findings", "bytes", "accesses"):
            check.count(totals, key, f"{where}.{kind}")


def cases_from_report(report: Mapping[str, Any]) -> list[CaseResult]:
    """The CaseResults of a validated report (for baselines and re-rendering)."""
    return [_case_from_json(case) for case in report["cases"]]


def _case_from_json(case: Mapping[str, Any]) -> CaseResult:
    result = CaseResult.from_json({**case, "findings": [], "detectors": []})
    result.findings = [finding_from_json(f) for f in case["findings"]]
    result.detectors = [DetectorRun(d["detector"], d["ran"], d["detail"]) for d in case["detectors"]]
    return result


def finding_from_json(data: Mapping[str, Any]) -> Finding:
    """Finding.from_json that ignores fields this version does not know (a newer writer's additions)."""
    known = {f.name for f in fields(Finding)}
    range_keys = {f.name for f in fields(ByteRange)}
    ranges = tuple(ByteRange(**{k: v for k, v in r.items() if k in range_keys}) for r in data["ranges"])
    return Finding(**{**{k: v for k, v in data.items() if k in known}, "ranges": ranges})


# ------------------------------------------------------------------------------------------ findings


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
    return text


def _count_text(f: Finding) -> str:
    unit = "changed range" if f.detector in (GUARD, POISON) else "access"
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
    return [(k, v) for k, v in pairs if v]


def _key_values(pairs: Iterable[tuple[str, str]]) -> str:
    pairs = list(pairs)
    width = max((len(k) for k, _ in pairs), default=0)
    return "\n".join(f"{k.ljust(width)} = {v}" for k, v in pairs)


def _case_findings(case: Mapping[str, Any]) -> list[Finding]:
    return [finding_from_json(f) for f in case["findings"]]


# ---------------------------------------------------------------------------------------- terminal


def render_terminal(report: Mapping[str, Any]) -> str:
    """Plain text (no colour, no TTY needed): the matrix, then failing, then unsupported cases."""
    parts = [_terminal_matrix(report["matrix"]), _terminal_failures(report["cases"]),
             _terminal_known_bugs(report["cases"]), _terminal_unsupported(report["cases"]),
             _summary_line(report["summary"])]
    return "\n\n".join(p for p in parts if p) + "\n"


_MATRIX_HEAD = ("kernel", "arch", "cases", "failed", "overreads", "overwrites", "bytes", "verdict")


def _matrix_cells(row: Mapping[str, Any]) -> tuple[str, ...]:
    read, write = row["overreads"], row["overwrites"]
    return (row["kernel"] or "-", row["arch"] or "-", str(row["cases"]), str(row["failed"]),
            f"{read['findings']:,}", f"{write['findings']:,}", f"{read['bytes'] + write['bytes']:,}",
            row["verdict"].upper() if row["verdict"] == FAILURE else row["verdict"])


def _terminal_matrix(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "no cases ran"
    table = [_MATRIX_HEAD, *(_matrix_cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(_MATRIX_HEAD))]
    lines = ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in
                       enumerate(zip(line, widths))).rstrip() for line in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _terminal_failures(cases: Sequence[Mapping[str, Any]]) -> str:
    failing = [c for c in cases if c["failed"]]
    if not failing:
        return ""
    blocks = [f"FAILED {plural(len(failing), 'case')}:"]
    for case in failing:
        blocks.append(f"  [{case['outcome']}] {case['id']} ({case['arch'] or '-'})")
        blocks += [f"    {line}" for line in (case["message"] or "(no message)").splitlines()]
        blocks += [f"    - {describe_finding(f)}" for f in _case_findings(case)]
    return "\n".join(blocks)


def _terminal_known_bugs(cases: Sequence[Mapping[str, Any]]) -> str:
    known = [c for c in cases if c["outcome"] == Outcome.EXPECTED_FINDING.label]
    lines = [f"  {c['id']}: {describe_finding(f)}" + _upstream_suffix(c)
             for c in known for f in _case_findings(c)]
    return "\n".join(["Known bugs (expected findings):", *lines]) if lines else ""


def _upstream_suffix(case: Mapping[str, Any]) -> str:
    upstream = upstream_of(case)
    return f" [upstream {upstream}]" if upstream else ""


def _terminal_unsupported(cases: Sequence[Mapping[str, Any]], shown: int = 3) -> str:
    """One line per distinct reason (a CPU-only machine has one reason for a hundred cases), a few ids each."""
    skipped = [c for c in cases if c["outcome"] == Outcome.UNSUPPORTED.label]
    groups: dict[tuple[str, str], list[str]] = {}
    for c in skipped:
        groups.setdefault((c["arch"] or "-", _first_line(c["message"]) or "no reason given"), []).append(c["id"])
    lines = []
    for (arch, reason), ids in groups.items():
        if len(ids) == 1:
            lines.append(f"  UNSUPPORTED {ids[0]} ({arch}): {reason}")
            continue
        more = f", and {len(ids) - shown} more" if len(ids) > shown else ""
        lines.append(f"  UNSUPPORTED {plural(len(ids), 'case')} ({arch}): {reason}\n      {', '.join(ids[:shown])}{more}")
    return "\n".join([f"Unsupported {plural(len(skipped), 'case')}:", *lines]) if lines else ""


def _summary_line(summary: Mapping[str, Any]) -> str:
    counts = ", ".join(f"{n} {label}" for label, n in summary["counts"].items() if n)
    verdict = {PASSED: "PASSED", FAILED: "FAILED", EMPTY: "NOTHING CHECKED"}[summary["status"]]
    return f"{verdict}: {summary['total']} cases ({counts or 'none'}), {summary['failed']} failed"


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# ------------------------------------------------------------------------------------------- junit

# Characters XML 1.0 cannot carry at all (sanitizer output may hold ANSI escapes or NULs).
_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    return _XML_INVALID.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def render_junit(report: Mapping[str, Any]) -> str:
    """JUnit XML: one testsuite per scenario, one testcase per case; failures, skips, findings in system-out."""
    cases = report["cases"]
    root = ET.Element("testsuites", _suite_attrs("gpu-memsafety", cases))
    by_scenario: dict[str, list[Mapping[str, Any]]] = {}
    for case in cases:
        by_scenario.setdefault(case["scenario"], []).append(case)
    for scenario, members in by_scenario.items():
        suite = ET.SubElement(root, "testsuite", _suite_attrs(scenario, members))
        _junit_properties(suite, report)
        for case in members:
            _junit_case(suite, case)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite_attrs(name: str, cases: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return {
        "name": _xml_text(name),
        "tests": str(len(cases)),
        "failures": str(sum(1 for c in cases if c["failed"])),
        "errors": "0",
        "skipped": str(sum(1 for c in cases if c["outcome"] == Outcome.UNSUPPORTED.label)),
        "time": f"{sum(c['duration_s'] for c in cases):.3f}",
    }


def _junit_properties(suite: ET.Element, report: Mapping[str, Any]) -> None:
    props = ET.SubElement(suite, "properties")
    items = [("run." + k, v) for k, v in report["run"].items()] + list(report["environment"].items())
    for key, value in items:
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        ET.SubElement(props, "property", {"name": _xml_text(str(key)), "value": _xml_text(text)})


def _junit_case(suite: ET.Element, case: Mapping[str, Any]) -> None:
    element = ET.SubElement(suite, "testcase", {
        "name": _xml_text(case["id"]),
        "classname": _xml_text(f"memsafety.{case['scenario']}"),
        "time": f"{case['duration_s']:.3f}",
    })
    if case["failed"]:
        failure = ET.SubElement(element, "failure", {
            "type": case["outcome"],
            "message": _xml_text(_short(case["message"] or case["outcome"])),
        })
        failure.text = _xml_text(_failure_text(case))
    elif case["outcome"] == Outcome.UNSUPPORTED.label:
        ET.SubElement(element, "skipped", {"message": _xml_text(_short(case["message"] or "unsupported"))})
    if case["findings"]:
        ET.SubElement(element, "system-out").text = _xml_text(_findings_text(case))


def _short(text: str) -> str:
    line = _first_line(text)
    return line if len(line) <= JUNIT_MESSAGE_CHARS else line[: JUNIT_MESSAGE_CHARS - 3] + "..."


def case_fields(case: Mapping[str, Any]) -> list[tuple[str, str]]:
    pairs = [("case", case["id"]), ("scenario", case["scenario"]), ("variant", case["variant"]),
             ("kernel", case["kernel"]), ("arch", case["arch"]), ("mode", case["mode"]),
             ("outcome", case["outcome"]), ("expected", case["expected"]),
             ("upstream", upstream_of(case)), ("findings", str(len(case["findings"])))]
    return [(k, v) for k, v in pairs if v]


def _failure_text(case: Mapping[str, Any]) -> str:
    text = _key_values(case_fields(case))
    return f"{text}\n\n{case['message']}" if case["message"] else text


def _findings_text(case: Mapping[str, Any]) -> str:
    blocks = [f"# {describe_finding(f)}\n{_key_values(finding_fields(f))}" for f in _case_findings(case)]
    return "\n\n".join(blocks)


# ---------------------------------------------------------------------------------------- markdown

_VERDICT_ICONS = {OK: "✅", KNOWN_BUG: "⚠️", FAILURE: "❌", UNSUPPORTED: "➖"}


def verdict_badge(verdict: str) -> str:
    return f"{_VERDICT_ICONS.get(verdict, '')} {verdict}".strip()


def md_cell(text: str) -> str:
    """Text safe inside a GitHub table cell: no pipes, newlines or HTML tags (kernel templates use <>)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(text.replace("|", "\\|").split())


def md_table(head: Sequence[str], rows: Iterable[Sequence[str]], *, right: int = 0) -> str:
    """A pipe table; columns from index `right` on are right-aligned (0: none)."""
    align = ["---:" if right and i >= right else "---" for i in range(len(head))]
    lines = [head, align, *rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def md_code_block(text: str) -> str:
    """A fenced block that no backtick run inside `text` can close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def md_upstream(upstream: str) -> str:
    match = re.fullmatch(r"([\w.-]+/[\w.-]+)#(\d+)", upstream)
    if not match:
        return md_cell(upstream)
    return f"[{upstream}](https://github.com/{match.group(1)}/issues/{match.group(2)})"


def render_markdown(report: Mapping[str, Any]) -> str:
    """A GitHub job summary: headline, matrix, failing cases, known bugs, unsupported cases."""
    cases = report["cases"]
    sections = [_md_headline(report), _md_matrix(report["matrix"]), _md_failures(cases),
                _md_known_bugs(cases), _md_unsupported(cases), _md_run(report)]
    return "\n\n".join(s for s in sections if s) + "\n"


def _md_headline(report: Mapping[str, Any]) -> str:
    summary = report["summary"]
    icon, word = {PASSED: ("✅", "passed"), FAILED: ("❌", "FAILED"), EMPTY: ("⚠️", "checked nothing")}[
        summary["status"]]
    counts = ", ".join(f"{n} {label}" for label, n in summary["counts"].items() if n) or "no cases"
    return (f"## {icon} GPU memory safety: {word}\n\n"
            f"{summary['total']} cases, {summary['failed']} failed ({counts}).")


def _md_matrix(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return ""
    head = ("kernel", "arch", "cases", "failed", "overreads", "overwrites", "bytes", "verdict")
    body = [(md_cell(r["kernel"] or "-"), md_cell(r["arch"] or "-"), *_matrix_cells(r)[2:7],
             verdict_badge(r["verdict"])) for r in rows]
    return "### Kernel × architecture\n\n" + md_table(head, body)


def _md_failures(cases: Sequence[Mapping[str, Any]]) -> str:
    failing = [c for c in cases if c["failed"]]
    if not failing:
        return ""
    blocks = [f"### Failing cases ({len(failing)})"]
    blocks += [_md_failure(c) for c in failing[:MARKDOWN_CASES_SHOWN]]
    blocks.append(_md_more(len(failing)))
    return "\n\n".join(b for b in blocks if b)


def _md_failure(case: Mapping[str, Any]) -> str:
    lines = [f"- **{md_cell(case['id'])}** ({md_cell(case['arch'] or '-')}): {case['outcome']}"]
    lines += [f"  - {md_cell(describe_finding(f))}" for f in _case_findings(case)]
    message = _clip_lines(case["message"], MARKDOWN_MESSAGE_LINES)
    if message:
        lines.append("\n" + _indent(md_code_block(message), "  "))
    return "\n".join(lines)


def _md_more(shown_of: int) -> str:
    hidden = shown_of - MARKDOWN_CASES_SHOWN
    return f"... and {hidden} more in report.json." if hidden > 0 else ""


def _clip_lines(text: str, limit: int) -> str:
    lines = text.strip("\n").splitlines()
    if len(lines) <= limit:
        return "\n".join(lines)
    half = limit // 2
    return "\n".join([*lines[:half], f"... ({len(lines) - limit} lines cut) ...", *lines[-half:]])


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def _md_known_bugs(cases: Sequence[Mapping[str, Any]]) -> str:
    known = [c for c in cases if c["outcome"] == Outcome.EXPECTED_FINDING.label]
    if not known:
        return ""
    body = [(md_cell(c["id"]), md_cell(c["arch"] or "-"), md_cell(describe_finding(f)),
             md_upstream(upstream_of(c)) or "-")
            for c in known[:MARKDOWN_CASES_SHOWN] for f in _case_findings(c)]
    table = md_table(("case", "arch", "finding", "upstream"), body)
    return "\n\n".join(s for s in (f"### Known bugs: expected findings ({plural(len(known), 'case')})", table,
                                   _md_more(len(known))) if s)


def _md_unsupported(cases: Sequence[Mapping[str, Any]]) -> str:
    skipped = [c for c in cases if c["outcome"] == Outcome.UNSUPPORTED.label]
    if not skipped:
        return ""
    body = [(md_cell(c["id"]), md_cell(c["arch"] or "-"), md_cell(_first_line(c["message"]) or "no reason given"))
            for c in skipped[:MARKDOWN_CASES_SHOWN]]
    table = md_table(("case", "arch", "why"), body)
    return "\n\n".join(s for s in (f"### Unsupported ({len(skipped)})", table, _md_more(len(skipped))) if s)


def _md_run(report: Mapping[str, Any]) -> str:
    run, env = report["run"], report["environment"]
    pairs = [("started", run["started"]), ("finished", run["finished"]), ("mode", run["mode"]),
             *((str(k), env_text(v)) for k, v in env.items())]
    body = "\n".join(f"- {md_cell(k)}: {md_cell(v)}" for k, v in pairs if v)
    return f"<details><summary>Run and environment</summary>\n\n{body}\n\n</details>"


def env_text(value: Any) -> str:
    """An environment value as short text: lists joined, objects as `key value` pairs."""
    if isinstance(value, list):
        return ", ".join(env_text(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {env_text(v)}" for k, v in value.items())
    return "" if value is None else str(value)


# ------------------------------------------------------------------------------------------- write

REPORT_FILES = {"json": "report.json", "junit": "junit.xml", "markdown": "summary.md"}


def report_json_text(report: Mapping[str, Any]) -> str:
    """Strict JSON (NaN refused here rather than written into a file no strict reader accepts)."""
    return json.dumps(report, indent=2, allow_nan=False) + "\n"


def write_reports(report: Mapping[str, Any], directory: str | os.PathLike[str]) -> dict[str, Path]:
    """Validate, then write report.json, junit.xml and summary.md atomically; keys: json, junit, markdown."""
    validate_report(report)
    texts = {"json": report_json_text(report), "junit": render_junit(report), "markdown": render_markdown(report)}
    return {key: atomic_write_text(Path(directory) / REPORT_FILES[key], text) for key, text in texts.items()}
