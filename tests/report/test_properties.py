"""Property-based tests (issue 27, item 6) for what reads other machines' files: the report loader, merge, and the
sanitizer-output parsers. Whatever the input, they never crash (only their own refusal, naming the problem),
and no edit of a failed report, no truncation or insertion in a failing sanitizer log, reads as a pass.

Examples are derandomized (the same ones every run: the suite stays deterministic, item 7) and no example
database is written (a read-only checkout stays untouched); hypothesis still shrinks any counterexample."""
from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, OVERWRITE, ByteRange, CaseResult, DetectorRun, Finding, Outcome
from gpu_memsafety.report import (PASSED, ReportError, build_report, cases_from_report, read_json_file,
                                  report_json_text, summarize, validate_report)
from gpu_memsafety.report.merge import merge_reports
from gpu_memsafety.sanitizer.parse import HostileXMLError, ParseResult, parse_text, parse_xml
from repo_paths import SANITIZER_DATA as DATA

PROPERTIES = settings(max_examples=150, derandomize=True, database=None, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20)


def failed_report() -> dict[str, Any]:
    """A report as the harness writes it, that failed: a crashed case beside a clean one and a known bug."""
    ran = [DetectorRun(GUARD, True, ""), DetectorRun(MEMCHECK, True, "")]
    known = Finding(MEMCHECK, OVERREAD, "src", "past_end", bytes=4, count=1, kernel="copy", arch="sm_90",
                    ranges=(ByteRange("past_end", 64, 68),))
    wild = Finding(GUARD, OVERWRITE, "dst", "past_end", bytes=1, kernel="copy", arch="sm_90")
    results = [
        CaseResult("s[clean-n64]", "s", "clean", {"n": 64}, "copy", "sm_90", "both", Outcome.CLEAN, "clean",
                   detectors=ran, message="clean under guard, memcheck", duration_s=0.5),
        CaseResult("s[bug-n64]", "s", "bug", {"n": 64}, "copy", "sm_90", "both", Outcome.EXPECTED_FINDING,
                   "overread of src/past_end, 4 B, seen by memcheck", findings=[known], detectors=ran, duration_s=0.5),
        CaseResult("s[wild-n64]", "s", "wild", {"n": 64}, "copy", "sm_90", "both", Outcome.FINDING, "clean",
                   findings=[wild], detectors=ran, message="unexpected: guard overwrite of dst", duration_s=0.5),
        CaseResult("s[crash-n64]", "s", "crash", {"n": 64}, "copy", "sm_90", "both", Outcome.CRASHED, "clean",
                   message="worker exited with code -9", duration_s=0.0),
    ]
    doc = build_report(results, {"hostname": "h200", "archs": ["sm_90"]}, started="s", finished="f", argv=["x"])
    return json.loads(report_json_text(doc))


FAILED = failed_report()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, prefix + (index,))
    return found


PATHS = _paths(FAILED)


@st.composite
def edited(draw: st.DrawFn) -> dict[str, Any]:
    """The failed report with one place replaced by arbitrary JSON, or removed."""
    doc = copy.deepcopy(FAILED)
    path = draw(st.sampled_from(PATHS))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if draw(st.booleans()):
        parent[path[-1]] = draw(JSON)
    else:
        del parent[path[-1]]
    return doc


def status_of(doc: dict[str, Any]) -> str:
    """The status a reader shows: recomputed from the cases, as every reader does."""
    return str(summarize(cases_from_report(doc), not_run=doc.get("not_run", []),
                         interrupted=str(doc["run"].get("interrupted") or ""))["status"])


@PROPERTIES
@given(JSON)
def test_arbitrary_json_is_refused_with_a_report_error_never_a_crash(data: Any) -> None:
    try:
        validate_report(data)
    except ReportError:
        pass


@PROPERTIES
@given(st.binary(max_size=3000))
def test_arbitrary_bytes_are_refused_with_a_report_error_never_a_crash(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "report.json")
        path.write_bytes(raw)
        try:
            validate_report(read_json_file(path), path)
        except ReportError:
            pass


@PROPERTIES
@given(edited())
def test_no_edit_of_a_failed_report_reads_as_passed(doc: dict[str, Any]) -> None:
    assert status_of(FAILED) != PASSED
    try:
        checked = validate_report(doc)
    except ReportError:
        return
    assert status_of(checked) != PASSED and checked["summary"]["status"] != PASSED


@PROPERTIES
@given(edited())
def test_no_edit_of_a_failed_report_merges_as_passed(doc: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "edited.json")
        try:
            path.write_text(json.dumps(doc, allow_nan=False))
        except (ValueError, UnicodeEncodeError):
            return
        try:
            merged = merge_reports([path])
        except ReportError:
            return
        assert merged["summary"]["status"] != PASSED


# ------------------------------------------------------------------------------------------ sanitizer output

def _xml(name: str) -> bytes:
    return (DATA / name).read_bytes()


FAILING_XML = _xml("memcheck-triton-read.xml")
FAILING_TEXT = (DATA / "memcheck-triton-read.txt").read_text()


def reads_clean(result: ParseResult) -> bool:
    """What a pass looks like to the judge: the whole output read, no record in it."""
    return result.complete and not result.records


def test_the_recorded_outputs_are_failing_ones() -> None:
    assert parse_xml(FAILING_XML).records and parse_text(FAILING_TEXT).records


@PROPERTIES
@given(st.binary(max_size=4000))
def test_arbitrary_bytes_never_crash_the_xml_parser(raw: bytes) -> None:
    try:
        assert isinstance(parse_xml(raw), ParseResult)
    except HostileXMLError:
        pass


@PROPERTIES
@given(st.text(max_size=4000))
def test_arbitrary_text_never_crashes_the_text_parser(text: str) -> None:
    assert isinstance(parse_text(text), ParseResult)


@PROPERTIES
@given(st.integers(0, len(FAILING_XML)), st.binary(max_size=200))
def test_a_failing_xml_cut_or_spliced_anywhere_never_reads_clean(at: int, junk: bytes) -> None:
    for data in (FAILING_XML[:at], FAILING_XML[:at] + junk + FAILING_XML[at:]):
        try:
            assert not reads_clean(parse_xml(data)), data[max(0, at - 80):at + 80]
        except HostileXMLError:
            pass


@PROPERTIES
@given(st.integers(0, len(FAILING_TEXT)), st.text(max_size=200))
def test_a_failing_text_log_cut_or_spliced_anywhere_never_reads_clean(at: int, junk: str) -> None:
    for text in (FAILING_TEXT[:at], FAILING_TEXT[:at] + junk + FAILING_TEXT[at:]):
        assert not reads_clean(parse_text(text)), text[max(0, at - 80):at + 80]
