"""Each case of a report is checked against itself (issue 27, item 3): a passing outcome must be what the case's
own findings, detectors and expectation give, and no case id appears twice. The review merged a `clean` case that
listed findings, and the same case id twice, into a passed table; every reader (load_report: merge, baselines,
cost files, re-rendering) now refuses such a file, naming the case and the contradiction."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from gpu_memsafety.judge.rules import apply_baseline
from gpu_memsafety.model import GUARD, MEMCHECK, OVERWRITE, CaseResult, DetectorRun, Finding, Outcome
from gpu_memsafety.report import ReportError, build_report, report_json_text, validate_report
from gpu_memsafety.report.merge import main

EXPECTED = "overwrite of dst/past_end, 1 B, seen by guard"


def finding() -> Finding:
    return Finding(GUARD, OVERWRITE, "dst", "past_end", bytes=1, kernel="copy", arch="sm_90")


def report() -> dict[str, Any]:
    ran = [DetectorRun(GUARD, True, ""), DetectorRun(MEMCHECK, True, "")]
    results = [
        CaseResult("s[clean-n1]", "s", "clean", {}, "copy", "sm_90", "both", Outcome.CLEAN, "clean", detectors=ran),
        CaseResult("s[bug-n1]", "s", "bug", {}, "copy", "sm_90", "both", Outcome.EXPECTED_FINDING, EXPECTED,
                   findings=[finding()], detectors=ran),
        CaseResult("s[crash-n1]", "s", "crash", {}, "copy", "sm_90", "both", Outcome.CRASHED, EXPECTED,
                   message="worker died"),
    ]
    return json.loads(report_json_text(build_report(results, {"archs": ["sm_90"]}, started="s", finished="f",
                                                    argv=[])))


def rebuilt(doc: dict[str, Any]) -> dict[str, Any]:
    """The edited cases with a summary and matrix recomputed to match (as a careful forger would)."""
    from gpu_memsafety.report import case_from_json
    results = [case_from_json(c) for c in doc["cases"]]
    fresh = build_report(results, doc["environment"], started="s", finished="f", argv=[], not_run=doc["not_run"])
    return json.loads(report_json_text(fresh))


def edit(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    doc = copy.deepcopy(report())
    change(doc)
    return rebuilt(doc)


def clean(doc: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in doc["cases"] if c["outcome"] == "clean")


def known(doc: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in doc["cases"] if c["outcome"] == "expected finding")


CONTRADICTIONS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "clean with findings": (lambda d: clean(d)["findings"].append(finding().to_json()),
                            r"cases\[0\]\.outcome: is 'clean' but the case lists 1 finding"),
    "clean expecting a bug": (lambda d: clean(d).update(expected=EXPECTED),
                              r"is 'clean' but the case expected 'overwrite of dst"),
    "clean with nothing run": (lambda d: clean(d).update(detectors=[]), r"is 'clean' but no detector ran"),
    "clean missing a detector": (lambda d: clean(d)["detectors"].append({"detector": "memcheck", "ran": False,
                                                                         "detail": "", "missing": True}),
                                 r"is 'clean' but memcheck should have run and could not"),
    "partial for another detector": (lambda d: (clean(d)["detectors"].append({"detector": "memcheck", "ran": False,
                                                                              "detail": "", "missing": True}),
                                                 clean(d)["details"].update(partial={"poison": "no GPU"})),
                                     r"is 'clean' but memcheck should have run and could not"),
    "known bug without findings": (lambda d: known(d).update(findings=[]),
                                   r"is 'expected finding' but the case lists no finding"),
    "known bug expecting clean": (lambda d: known(d).update(expected="clean"),
                                  r"expected clean and no baseline accepted its findings"),
    "finding by a detector that did not run": (lambda d: known(d).update(detectors=[
        {"detector": "memcheck", "ran": True, "detail": ""}]), r"name detector\(s\) guard, which did not run"),
    "a case twice": (lambda d: d["cases"].append(copy.deepcopy(d["cases"][2])),
                     r"cases\[3\]\.id: case 's\[crash-n1\]' appears twice \(also at cases\[2\]\)"),
    "a case both run and not run": (lambda d: d["not_run"].append("s[clean-n1]"),
                                    r"not_run\[0\]: case 's\[clean-n1\]' appears twice"),
}


@pytest.mark.parametrize("name", CONTRADICTIONS)
def test_a_case_that_contradicts_itself_is_refused_by_every_reader(name: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    change, message = CONTRADICTIONS[name]
    doc = edit(change)
    with pytest.raises(ReportError, match=message):
        validate_report(doc)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    assert main([str(path), "-o", str(tmp_path / "out")]) == 2
    assert "harness merge: error:" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_the_untouched_report_and_its_failing_cases_are_accepted() -> None:
    doc = report()
    assert validate_report(doc)["summary"]["status"] == "failed"
    known(doc)["findings"] = []            # a failing case may say anything: it fails either way
    doc["cases"][2]["findings"] = [finding().to_json()]
    validate_report(rebuilt({**doc, "cases": [c for c in doc["cases"] if c["outcome"] != "expected finding"]}))


def test_a_finding_a_baseline_accepted_is_recorded_and_reads_back() -> None:
    """apply_baseline turns a FINDING on a case expected clean into an expected finding; the case records which
    findings the baseline accepted, so its reader can tell it from an edited one."""
    from gpu_memsafety.judge.baseline import baseline_from_results
    result = CaseResult("s[clean-n1]", "s", "clean", {}, "copy", "sm_90", "both", Outcome.FINDING, "clean",
                        findings=[finding()], detectors=[DetectorRun(GUARD, True, "")], message="unexpected")
    baseline = baseline_from_results([copy.deepcopy(result)])
    accepted = apply_baseline(result, baseline)
    assert accepted.outcome is Outcome.EXPECTED_FINDING
    assert [e["finding"] for e in accepted.details["baseline"]] == [finding().key()]
    doc = build_report([accepted], {}, started="s", finished="f", argv=[])
    assert validate_report(json.loads(report_json_text(doc)))["summary"]["status"] == "passed"


def test_a_case_judged_on_what_ran_says_partial_and_so_does_the_headline() -> None:
    """Mode complete without a GPU: poison saw the expected read, memcheck could not run. The case is an expected
    finding marked partial (details.partial names memcheck); every reader accepts it and the headline says
    'passed, partial', never a plain pass (a CPU run of planted_inside refused its own report before)."""
    from gpu_memsafety.report.render import headline

    def partial_memcheck(d: dict[str, Any]) -> None:
        for case in (clean(d), known(d)):
            case["detectors"].append({"detector": "memcheck", "ran": False, "detail": "needs a CUDA GPU", "missing": True})
            case["details"]["partial"] = {"memcheck": "needs a CUDA GPU; found none"}
        d["cases"] = [c for c in d["cases"] if c["outcome"] != "crashed"]
    doc = validate_report(edit(partial_memcheck))
    assert doc["summary"]["status"] == "passed"
    head = headline(doc)
    assert head.partial and "partial" in head.word
