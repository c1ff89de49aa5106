"""The JUnit XML rendering, for CI test tabs: one testsuite per scenario, one testcase per case.

Failing outcomes are `failure` (type = the outcome label), cases not run are `skipped` with the reason, and
the cases an interrupted run never started are `error` (type `not started`), so a test tab never shows an
interrupted run as complete. Findings go to `system-out` as `key = value` blocks; the run (its id included)
and the environment are properties of every suite. Every testcase has `file` and `line` (the kernel's
source line a sanitizer named, else the scenario's definition: gpu_memsafety.report.locate), which test
reporters use to annotate the source, and properties for its kernel, architecture, upstream source and
version, the upstream issue, and a baseline's reason where one accepted it. A baseline's stale entries are a
`baseline` suite of skipped testcases, one per entry: seen in the test tab, never a failure.
"""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any, Mapping, Sequence

from gpu_memsafety.report.baselines import accepted_text, baseline_run, stale_entries, stale_line
from gpu_memsafety.report.document import outcome_ran, upstream_of
from gpu_memsafety.report.findings import case_findings, describe_finding, finding_fields, key_values
from gpu_memsafety.report.locate import case_site, home_site, relative, rerun_command
from gpu_memsafety.report.render import Renderer, clip, first_line, headline, visible

# A failure's `message` attribute is one line in CI tabs; the full text goes in the element body.
JUNIT_MESSAGE_CHARS = 200
NOT_STARTED = "not started"
BASELINE_SUITE = "baseline"
# A version in an upstream source's words: "sglang 0.5.18", "triton_kernels from sgl-kernel 0.3.21".
_VERSION = re.compile(r"\b(\d+\.\d+(?:\.\d+)?(?:[.-]?(?:post|dev|rc|a|b)\d+)?)\b")

class JUnitRenderer(Renderer):
    name = "junit"
    filename = "junit.xml"

    def text(self, value: str) -> str:
        return visible(value)   # escapes every character XML 1.0 cannot carry too

    def render(self, report: Mapping[str, Any]) -> str:
        cases = list(report["cases"]) + [_not_started_case(i) for i in report.get("not_run", [])]
        if not cases and not report["run"]["finished"]:
            cases = [_unfinished_case(report)]
        root = ET.Element("testsuites", self.suite_attrs("gpu-memsafety", cases))
        by_scenario: dict[str, list[Mapping[str, Any]]] = {}
        for case in cases:
            by_scenario.setdefault(case["scenario"], []).append(case)
        for scenario, members in by_scenario.items():
            suite = ET.SubElement(root, "testsuite", self.suite_attrs(scenario, members))
            self.properties(suite, report)
            for case in members:
                self.case(suite, case, report["run"])
        self.stale_suite(root, report)
        ET.indent(root)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"

    def suite_attrs(self, name: str, cases: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        return {
            "name": self.text(name),
            "tests": str(len(cases)),
            "failures": str(sum(1 for c in cases if c["failed"])),
            "errors": str(sum(1 for c in cases if c["outcome"] == NOT_STARTED)),
            "skipped": str(sum(1 for c in cases if c["outcome"] != NOT_STARTED and not outcome_ran(c["outcome"]))),
            "time": f"{sum(c['duration_s'] for c in cases):.3f}",
        }

    def properties(self, suite: ET.Element, report: Mapping[str, Any]) -> None:
        props = ET.SubElement(suite, "properties")
        items = [("headline", headline(report).text), *(("run." + k, v) for k, v in report["run"].items()),
                 *report["environment"].items()]
        for key, value in items:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            ET.SubElement(props, "property", {"name": self.text(str(key)), "value": self.text(text)})

    def case(self, suite: ET.Element, case: Mapping[str, Any], run: Mapping[str, Any]) -> None:
        attrs = {"name": self.text(case["id"]), "classname": self.text(f"memsafety.{case['scenario']}"),
                 "time": f"{case['duration_s']:.3f}"}
        site = case_site(case, run) if case.get("findings") else home_site(case, run)
        if site is not None:
            attrs.update(file=self.text(site.file), line=str(site.line))
        element = ET.SubElement(suite, "testcase", attrs)
        self.case_properties(element, case)
        if case["outcome"] == NOT_STARTED:
            ET.SubElement(element, "error", {"type": NOT_STARTED, "message": self.text(case["message"])})
        elif case["failed"]:
            failure = ET.SubElement(element, "failure", {
                "type": self.text(case["outcome"]),
                "message": self.text(self.short(case["message"] or case["outcome"])),
            })
            failure.text = self.text(_failure_text(case))
        elif not outcome_ran(case["outcome"]):
            ET.SubElement(element, "skipped", {"message": self.text(self.short(case["message"] or case["outcome"]))})
        if case["findings"]:
            ET.SubElement(element, "system-out").text = self.text(_findings_text(case))

    def case_properties(self, element: ET.Element, case: Mapping[str, Any]) -> None:
        source = str((case.get("params") or {}).get("upstream") or "")
        version = _VERSION.search(source)
        pairs = [("kernel", str(case.get("kernel") or "")), ("arch", str(case.get("arch") or "")),
                 ("upstream.source", source), ("upstream.version", version.group(1) if version else ""),
                 ("upstream.issue", upstream_of(case) if "expected" in case else ""),
                 ("baseline", accepted_text(case))]
        pairs = [(k, v) for k, v in pairs if v]
        if pairs:
            props = ET.SubElement(element, "properties")
            for key, value in pairs:
                ET.SubElement(props, "property", {"name": key, "value": self.text(value)})

    def stale_suite(self, root: ET.Element, report: Mapping[str, Any]) -> None:
        """One skipped testcase per stale baseline entry, at the baseline file."""
        stale = stale_entries(report)
        if not stale:
            return
        suite = ET.SubElement(root, "testsuite", {"name": BASELINE_SUITE, "tests": str(len(stale)), "failures": "0",
                                                   "errors": "0", "skipped": str(len(stale)), "time": "0.000"})
        for key in ("tests", "skipped"):   # the top level counts every testcase
            root.set(key, str(int(root.get(key, "0")) + len(stale)))
        file = relative(baseline_run(report).get("file"), report["run"].get("root"))
        for entry in stale:
            attrs = {"name": self.text(f"stale: {entry['case']}: {entry['finding']}"),
                     "classname": f"memsafety.{BASELINE_SUITE}", "time": "0.000"}
            if file:
                attrs.update(file=self.text(file), line="1")
            element = ET.SubElement(suite, "testcase", attrs)
            ET.SubElement(element, "skipped", {"message": self.text(f"stale baseline entry: {stale_line(entry)}; "
                                                                   "remove it from the baseline")})

    def short(self, text: str) -> str:
        return clip(first_line(text), JUNIT_MESSAGE_CHARS)


def _not_started_case(case_id: str) -> dict[str, Any]:
    return {"id": case_id, "scenario": case_id.partition("[")[0], "outcome": NOT_STARTED, "failed": False,
            "duration_s": 0.0, "findings": [], "message": "the run was interrupted before this case started"}


def _unfinished_case(report: Mapping[str, Any]) -> dict[str, Any]:
    """The one entry of the set written when a run starts: a test tab shows an error until the run replaces it."""
    return {"id": f"run {report['run'].get('id', '')}".strip(), "scenario": "gpu-memsafety", "outcome": NOT_STARTED,
            "failed": False, "duration_s": 0.0, "findings": [], "message": headline(report).text}


def case_fields(case: Mapping[str, Any]) -> list[tuple[str, str]]:
    pairs = [("case", case["id"]), ("scenario", case["scenario"]), ("variant", case["variant"]),
             ("kernel", case["kernel"]), ("arch", case["arch"]), ("mode", case["mode"]),
             ("outcome", case["outcome"]), ("expected", case["expected"]),
             ("upstream", upstream_of(case)), ("findings", str(len(case["findings"]))),
             ("test", _test_text(case)), ("rerun", rerun_command(case))]
    return [(k, v) for k, v in pairs if v]


def _test_text(case: Mapping[str, Any]) -> str:
    """A host suite's test function, `file:line` (details.where)."""
    where = (case.get("details") or {}).get("where")
    if not isinstance(where, Mapping):
        return ""
    return str(where.get("test") or (f"{where['file']}:{where.get('line')}" if where.get("file") else ""))


def _failure_text(case: Mapping[str, Any]) -> str:
    text = key_values(case_fields(case))
    return f"{text}\n\n{case['message']}" if case["message"] else text


def _findings_text(case: Mapping[str, Any]) -> str:
    blocks = [f"# {describe_finding(f)}\n{key_values(finding_fields(f))}" for f in case_findings(case)]
    return "\n\n".join(blocks)


def render_junit(report: Mapping[str, Any]) -> str:
    return JUnitRenderer().render(report)
