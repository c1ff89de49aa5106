"""Loading a report.json: read one file safely, check its structure and every field, recompute what is derived.

Reports travel between machines as CI artifacts, so a file is data to check, never code to run nor a source
of paths to open. Its size is bounded by what this machine can parse, not by a guess at how large a real run
gets; hostile structure (nesting deeper than any report, strings no UTF-8 writer can produce) is refused
before anything reads the fields. The summary and matrix in a file are recomputed from its cases and a file
whose stored ones disagree is refused: a reader never shows numbers the cases do not support. Each case is also
checked against itself (`_check_case_story`): a passing outcome must be what its own findings, detectors and
expectation give (a `clean` case lists no finding, expected clean and had a detector run; an `expected finding`
lists the findings it expected), and no case id appears twice: an edited or spliced file cannot read as a pass.
"""
from __future__ import annotations

import json
import os
import stat
from typing import Any, Callable, Mapping, Sequence

from gpu_memsafety.model import Outcome, key_bytes
from gpu_memsafety.util import jsonio
from gpu_memsafety.report import manifest
from gpu_memsafety.report.document import (
    NOT_APPLICABLE,
    REPORT_SCHEMA,
    STATUSES,
    UNSUPPORTED,
    VERDICTS,
    case_from_json,
    matrix,
    runner_arch,
    summarize,
)


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 0


# Parsing JSON takes several times the file's size in memory; a file larger than an eighth of this machine's
# memory cannot be read here whoever wrote it (and at least 256 MiB is always allowed). The harness's own
# reports stay far below: a full nightly sweep with every finding is tens of MiB.
MAX_REPORT_BYTES = max(256 << 20, _physical_memory() // 8)
# No report nests deeper than ~8 levels (cases[i].findings[j].ranges[k]); free-form `details` get some room.
MAX_JSON_DEPTH = 64


class ReportError(ValueError):
    """A report file that cannot be used: names the file and says what is wrong with it."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(f"{os.fspath(path)}: {problem}")
        self.path = os.fspath(path)
        self.problem = problem


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
        data = jsonio.loads(text)
    except jsonio.DuplicateKeyError as exc:
        raise error(path, f"not usable JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise error(path, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                          "truncated or not a JSON file?") from None
    except ValueError as exc:
        raise error(path, f"not strict JSON: {exc}") from None
    except RecursionError:
        raise error(path, f"JSON nested too deeply (more than {MAX_JSON_DEPTH} levels)") from None
    _check_structure(data, lambda problem: error(path, problem))
    return data


def _check_structure(data: Any, fail: Callable[[str], ReportError]) -> None:
    """Depth at most MAX_JSON_DEPTH; no lone surrogate (a \\udXXX escape) in any string or key: such text
    cannot be written back as UTF-8, so it would fail a merge or a render half way through."""
    stack: list[tuple[Any, int, str]] = [(data, 1, "")]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, (dict, list)) and depth > MAX_JSON_DEPTH:
            raise fail(f"JSON nested too deeply (more than {MAX_JSON_DEPTH} levels, at {where or 'top level'})")
        if isinstance(value, dict):
            for key, item in value.items():
                _check_text(key, f"{where}.{key!r} (key)", fail)
                stack.append((item, depth + 1, f"{where}.{key}" if where else key))
        elif isinstance(value, list):
            stack.extend((item, depth + 1, f"{where}[{i}]") for i, item in enumerate(value))
        elif isinstance(value, str):
            _check_text(value, where, fail)


def _check_text(text: str, where: str, fail: Callable[[str], ReportError]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise fail(f"{where or 'top level'}: bad unicode: lone surrogate \\u{ord(text[exc.start]):04x} "
                   "(not text any UTF-8 writer produces)") from None


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
        raise error(path, f"too large: more than {limit:,} bytes ({_limit_reason(limit)})")
    return raw


def _check_regular(path: str | os.PathLike[str], info: os.stat_result, limit: int,
                   error: Callable[..., ReportError]) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise error(path, "is a directory, not a report file")
    if not stat.S_ISREG(info.st_mode):
        raise error(path, "not a regular file")
    if info.st_size > limit:
        raise error(path, f"too large: {info.st_size:,} bytes, the limit is {limit:,} ({_limit_reason(limit)})")


def _limit_reason(limit: int) -> str:
    if limit == MAX_REPORT_BYTES:
        return "an eighth of this machine's memory: parsing needs several times the file's size"
    return "the limit for this kind of file"


def validate_report(data: Any, source: str | os.PathLike[str] = "<report>") -> dict[str, Any]:
    """Check that `data` is a report of this schema; returns it, raises ReportError(source, ...)."""
    check = FieldChecker(source)
    doc = check.obj(data, "top level")
    check.schema(doc, REPORT_SCHEMA, "report")
    check.obj(check.field(doc, "environment", dict, ""), "environment")
    run = check.field(doc, "run", dict, "")
    _check_run(check, run)
    cases = check.field(doc, "cases", list, "")
    for index, case in enumerate(cases):
        _check_case(check, case, f"cases[{index}]")
    not_run = _check_strings(check, doc, "not_run", "") if "not_run" in doc else []
    _check_unique_ids(check, cases, not_run)
    summary = check.field(doc, "summary", dict, "")
    _check_summary(check, summary, cases)
    rows = check.field(doc, "matrix", list, "")
    for index, row in enumerate(rows):
        _check_row(check, row, f"matrix[{index}]")
    _check_derived(check, doc, not_run, str(run.get("interrupted") or ""))
    return doc


def _check_derived(check: "FieldChecker", doc: Mapping[str, Any], not_run: Sequence[str],
                   interrupted: str) -> None:
    """The stored summary and matrix must be what the cases give: a file edited by hand, or cut and patched,
    would otherwise show numbers its cases do not support."""
    results = [case_from_json(c) for c in doc["cases"]]
    derived = summarize(results, not_run=not_run, interrupted=interrupted)
    stored = doc["summary"]
    derived["counts"] = {label: n for label, n in derived["counts"].items() if n}
    stored = {**stored, "counts": {label: n for label, n in stored["counts"].items() if n}}
    for key, value in derived.items():  # counts compared without zeros: a writer that knew fewer outcomes is fine
        if key in stored and stored[key] != value:
            raise check.fail(f"summary.{key}", f"says {stored[key]!r} but the cases give {value!r} "
                                               "(edited or truncated?)")
    # A writer before cases without an architecture counted on the runner's gave them rows of their own: either
    # way of grouping is the cases' own, any other matrix was edited.
    fallback = runner_arch(doc["environment"]) if isinstance(doc["environment"], Mapping) else ""
    groupings = [matrix(results, arch) for arch in dict.fromkeys([fallback, ""])]
    problems = [_matrix_problem(check, doc["matrix"], rows) for rows in groupings]
    if all(problems):
        # say what differs from the grouping the file's rows follow (the same kernel and arch keys), if one does
        keys = [(r.get("kernel"), r.get("arch")) for r in doc["matrix"] if isinstance(r, Mapping)]
        same = [p for p, rows in zip(problems, groupings) if [(r["kernel"], r["arch"]) for r in rows] == keys]
        raise (same or problems)[0]  # type: ignore[misc]


def _matrix_problem(check: "FieldChecker", stored: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> Exception | None:
    """Why the stored matrix is not the one the cases give (an error to raise), or None when it is."""
    if len(rows) != len(stored):
        return check.fail("matrix", f"has {len(stored)} rows but the cases give {len(rows)} (edited or truncated?)")
    for index, (row, expected) in enumerate(zip(stored, rows)):
        for key in ("kernel", "arch", "cases", "failed", "verdict", "overreads", "overwrites"):
            if key == "verdict" and (row[key], expected[key]) == (UNSUPPORTED, NOT_APPLICABLE):
                continue   # written before rows whose cases all do not apply read "not applicable"
            if row[key] != expected[key]:
                return check.fail(f"matrix[{index}].{key}", f"says {row[key]!r} but the cases give {expected[key]!r} "
                                                            "(edited?)")
    return None


def _check_strings(check: "FieldChecker", obj: Mapping[str, Any], key: str, where: str) -> list[str]:
    values = check.field(obj, key, list, where)
    path = f"{where}.{key}" if where else key
    for index, value in enumerate(values):
        if not isinstance(value, str):
            raise check.fail(f"{path}[{index}]", f"expected string, got {_type_name(value)}")
    return values


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
    _check_strings(check, run, "argv", "run")
    for key in ("id", "harness_version"):  # optional: reports before run ids lack them
        if key in run:
            check.field(run, key, str, "run")
    if run.get("interrupted") is not None:  # "" or null: the run went to the end
        check.field(run, "interrupted", str, "run")
    if run.get("shard") is not None:
        _check_shard(check, check.field(run, "shard", dict, "run"))
    if "root" in run:
        check.field(run, "root", str, "run")
    for key, value in (check.field(run, "scenarios", dict, "run").items() if "scenarios" in run else ()):
        site = check.obj(value, f"run.scenarios.{key}")
        check.field(site, "file", str, f"run.scenarios.{key}")
        check.count(site, "line", f"run.scenarios.{key}")
    if run.get("baseline") is not None:
        _check_baseline(check, check.field(run, "baseline", dict, "run"))


def _check_baseline(check: FieldChecker, record: Mapping[str, Any]) -> None:
    """run.baseline (gpu_memsafety.judge.baseline.BaselineDiff.to_report): the file and the entries that matched nothing."""
    check.field(record, "file", str, "run.baseline")
    for key in ("entries", "accepted"):
        check.count(record, key, "run.baseline")
    for key in ("stale", "unchecked"):
        for index, entry in enumerate(check.field(record, key, list, "run.baseline")):
            where = f"run.baseline.{key}[{index}]"
            entry = check.obj(entry, where)
            for field in ("case", "finding", "reason", "why"):
                check.field(entry, field, str, where)


def _check_shard(check: FieldChecker, shard: Mapping[str, Any]) -> None:
    index, count = check.count(shard, "index", "run.shard"), check.count(shard, "count", "run.shard")
    if not 1 <= index <= count:
        raise check.fail("run.shard", f"shard {index}/{count}: the index must be between 1 and the count")
    for key in ("group", "selection"):  # what the shards of one run share (gpu_memsafety.report.merge)
        if key in shard:
            check.field(shard, key, str, "run.shard")
    if "manifest" in shard:
        _check_manifest(check, check.field(shard, "manifest", dict, "run.shard"), str(shard.get("group") or ""))


_MANIFEST_STRINGS = ("group", "group_source", "matrix_hash", "mode", "cover", "harness_version", "commit", "cost_hash")


def _check_manifest(check: FieldChecker, found: Mapping[str, Any], group: str) -> None:
    """run.shard.manifest (gpu_memsafety.report.manifest): its fields, and its matrix against its own hash."""
    where = "run.shard.manifest"
    for key in _MANIFEST_STRINGS:
        check.field(found, key, str, where)
    ids = _check_strings(check, found, "matrix", where)
    if len(set(ids)) != len(ids):
        raise check.fail(f"{where}.matrix", "names a case twice")
    if manifest.ids_hash(ids) != found["matrix_hash"]:
        raise check.fail(f"{where}.matrix_hash", "is not the hash of the matrix's case ids (edited?)")
    if found["group"] != group:
        raise check.fail(f"{where}.group", f"is {found['group']!r} but run.shard.group is {group!r}")


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
    _check_case_story(check, case, outcome, where)


# The expectation text of a case that expects nothing (model.Expectation.describe()).
EXPECTED_CLEAN = "clean"


def _check_case_story(check: FieldChecker, case: Mapping[str, Any], outcome: Outcome, where: str) -> None:
    """A case that does not fail must be what its own record gives (the judge's rules, judge/verdict.py):
    clean = nothing expected, nothing seen, something ran (and nothing that should have run could not); expected
    finding = something seen, by detectors that ran, that the case expected (or a baseline accepted). A failing
    outcome needs no such check: it fails whatever else the record says."""
    if outcome not in (Outcome.CLEAN, Outcome.EXPECTED_FINDING):
        return
    label = outcome.label
    ran = {d["detector"] for d in case["detectors"] if d["ran"]}
    if not ran:
        raise check.fail(f"{where}.outcome", f"is '{label}' but no detector ran (a case nothing checked never passes)")
    missing = [d["detector"] for d in case["detectors"] if d.get("missing") and not d["ran"]]
    # A case judged on what ran where part could not (mode complete without a GPU: memcheck) says so in
    # details.partial, and the headline says partial (report.render): only a detector named there may be missing.
    partial = (case.get("details") or {}).get("partial") or {}
    unsaid = [d for d in missing if not isinstance(partial, Mapping) or d not in partial]
    if unsaid:
        raise check.fail(f"{where}.outcome", f"is '{label}' but {', '.join(unsaid)} should have run and could not")
    unseen = sorted({f["detector"] for f in case["findings"]} - ran)
    if unseen:
        raise check.fail(f"{where}.findings", f"name detector(s) {', '.join(unseen)}, which did not run "
                                              f"(ran: {', '.join(sorted(ran))})")
    if outcome is Outcome.CLEAN:
        if case["findings"]:
            raise check.fail(f"{where}.outcome", f"is 'clean' but the case lists {len(case['findings'])} finding(s)")
        if case["expected"] != EXPECTED_CLEAN:
            raise check.fail(f"{where}.outcome", f"is 'clean' but the case expected {case['expected']!r} "
                                                 "(an expected finding not seen is 'unexpectedly clean')")
        return
    if not case["findings"]:
        raise check.fail(f"{where}.outcome", "is 'expected finding' but the case lists no finding")
    if case["expected"] == EXPECTED_CLEAN and not _baseline_accepted(case["details"]):
        raise check.fail(f"{where}.outcome", "is 'expected finding' but the case expected clean and no baseline "
                                             "accepted its findings (details.baseline.accepted)")


def _baseline_accepted(details: Mapping[str, Any]) -> bool:
    """details.baseline as judge.rules.apply_baseline writes it: one entry per accepted finding, its key in `finding`."""
    baseline = details.get("baseline")
    return isinstance(baseline, list) and bool(baseline) and all(
        isinstance(entry, Mapping) and isinstance(entry.get("finding"), str) and entry["finding"] for entry in baseline)


def _check_unique_ids(check: FieldChecker, cases: Sequence[Mapping[str, Any]], not_run: Sequence[str]) -> None:
    """One record per case: a case twice (spliced files) would count twice, or hide a failure behind a pass."""
    seen: dict[str, str] = {}
    for where, case_id in [*((f"cases[{i}]", c["id"]) for i, c in enumerate(cases)),
                           *((f"not_run[{i}]", cid) for i, cid in enumerate(not_run))]:
        if case_id in seen:
            raise check.fail(f"{where}.id" if where.startswith("cases") else where,
                             f"case {case_id!r} appears twice (also at {seen[case_id]}): one record per case")
        seen[case_id] = where


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
    if "key" in finding:   # written since baselines got a command; must be the finding's own
        head = ":".join(str(finding[k]) for k in ("detector", "kind", "kernel", "buffer", "region"))
        expected = f"{head}:{key_bytes(finding['bytes'], bool(finding.get('exact', True)))}"
        # a report written before inexact counts left the key (model.key_bytes) carries the count there
        if check.field(finding, "key", str, where) not in (expected, f"{head}:{finding['bytes']}"):
            raise check.fail(f"{where}.key", f"is {finding['key']!r} but the finding's fields give {expected!r} "
                                             "(edited?)")
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
    if "missing" in run:
        check.field(run, "missing", bool, where)


def _check_summary(check: FieldChecker, summary: Mapping[str, Any], cases: Sequence[Any]) -> None:
    total = check.count(summary, "total", "summary")
    check.count(summary, "failed", "summary")
    for key in ("ran", "skipped", "not_run"):
        if key in summary:
            check.count(summary, key, "summary")
    status = check.field(summary, "status", str, "summary")
    if status not in STATUSES:
        raise check.fail("summary.status", f"unknown status {status!r} (known: {', '.join(STATUSES)})")
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
    if "reason" in row:
        check.field(row, "reason", str, where)
    for kind in ("overreads", "overwrites"):
        _check_totals(check, check.field(row, kind, dict, where), f"{where}.{kind}")
    for kind, totals in (check.field(row, "kinds", dict, where) if "kinds" in row else {}).items():
        _check_totals(check, check.obj(totals, f"{where}.kinds.{kind}"), f"{where}.kinds.{kind}")


def _check_totals(check: FieldChecker, totals: Mapping[str, Any], where: str) -> None:
    for key in ("findings", "bytes", "accesses"):
        check.count(totals, key, where)


