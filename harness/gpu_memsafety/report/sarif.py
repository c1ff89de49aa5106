"""The SARIF 2.1.0 rendering (`report.sarif`), for code-scanning tools (GitHub code scanning, IDE viewers).

One rule per detector and finding kind that the report holds (`memcheck/overread`, `guard/overwrite`, ...),
and one per failing outcome that has no finding of its own (`outcome/unexpectedly-clean`, `outcome/crashed`,
...), so that every failing case is a result somewhere. One result per finding, located at the kernel's
source line when the sanitizer named one inside the run's root, else at the scenario's definition
(gpu_memsafety.report.locate); its buffer and kernel are a logical location, its byte ranges and the
scenario's words for them are properties. A known bug (a finding its case expects, of a case that does not fail)
and a finding the baseline accepts are left out of the results, every one of them, and counted in the run's
properties (`knownFindings`: how many, and the cases): GitHub code scanning reads neither `suppressions` nor
`baselineState`, so each would open an alert, and SARIF 2.1.0 §3.27.23 does not allow some results with
`suppressions` and others without; report.json, the HTML and the summary keep them. Stale baseline entries are
tool execution notifications. `partialFingerprints` carry the case id and Finding.key(), stable across runs.

The log is validated against the SARIF 2.1.0 JSON schema in the tests (tests/data/sarif/).
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from gpu_memsafety.report.baselines import accepted_reasons, stale_entries
from gpu_memsafety.report.document import upstream_of
from gpu_memsafety.report.findings import case_findings, describe_finding
from gpu_memsafety.report.locate import Site, finding_or_case_site, home_site, relative, rerun_command
from gpu_memsafety.report.render import Renderer, first_line, headline, visible

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
ROOT_ID = "SRCROOT"
FINGERPRINT = "gpuMemsafetyFinding/v1"
TOOL = "gpu-memsafety"
# What each detector is, for its rules' descriptions.
DETECTOR_WORDS = {
    "guard": "0xA5 guard-marker bytes around the buffer changed",
    "memcheck": "compute-sanitizer memcheck reported the access",
    "guard_page": "the access faulted on an unmapped page next to the buffer",
    "poison": "the output changed when the bytes around the buffer changed",
    "uninit": "the result depends on bytes nobody wrote",
    "racecheck": "compute-sanitizer racecheck reported a shared-memory hazard",
    "synccheck": "compute-sanitizer synccheck reported invalid barrier use",
    "trace": "Triton's interpreter placed the access outside the memory the kernel was given",
}


class SarifRenderer(Renderer):
    name = "sarif"
    filename = "report.sarif"

    def text(self, value: str) -> str:
        return visible(value)

    def render(self, report: Mapping[str, Any]) -> str:
        return json.dumps(self.log(report), indent=2, ensure_ascii=False) + "\n"

    def log(self, report: Mapping[str, Any]) -> dict[str, Any]:
        run = report["run"]
        rules: dict[str, dict[str, Any]] = {}
        known: list[str] = []
        results = [r for case in report["cases"] for r in self.case_results(case, run, rules, known)]
        ordered = sorted(rules)
        index = {rule: i for i, rule in enumerate(ordered)}
        for result in results:
            result["ruleIndex"] = index[result["ruleId"]]
        sarif_run: dict[str, Any] = {
            "tool": {"driver": {"name": TOOL, "version": self.text(str(run.get("harness_version") or "0")),
                                "rules": [rules[r] for r in ordered]}},
            "invocations": [self.invocation(report)],
            "results": results,
            "properties": {"headline": self.text(headline(report).text), "status": report["summary"]["status"],
                           "runId": self.text(str(run.get("id", ""))), "mode": self.text(str(run.get("mode", ""))),
                           "knownFindings": {"count": len(known), "cases": sorted(set(known)),
                                             "why": "known bugs and baseline-accepted findings: not alerts; every "
                                                    "one is in report.json"}},
        }
        if run.get("id"):
            sarif_run["automationDetails"] = {"id": f"{TOOL}/{self.text(str(run.get('mode') or 'run'))}/{self.text(run['id'])}"}
        root = run.get("root")
        if isinstance(root, str) and root.startswith("/"):
            sarif_run["originalUriBaseIds"] = {ROOT_ID: {"uri": "file://" + _uri_path(root.rstrip("/") + "/")}}
        return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [sarif_run]}

    # ---------------------------------------------------------------------------------------- results

    def case_results(self, case: Mapping[str, Any], run: Mapping[str, Any], rules: dict[str, dict[str, Any]],
                     known: list[str]) -> list[dict[str, Any]]:
        """The case's results; the ids of its known (expected or accepted) findings, left out, go to `known`."""
        out = []
        accepted = accepted_reasons(case)
        for raw, finding in zip(case["findings"], case_findings(case)):
            if not case["failed"] and (finding.key() in accepted or case["outcome"] == "expected finding"):
                known.append(self.text(case["id"]))
                continue
            rule = f"{finding.detector}/{finding.kind}"
            rules.setdefault(rule, _finding_rule(finding.detector, finding.kind))
            site = finding_or_case_site(raw, case, run)
            result = self.result(case, rule, f"{case['id']}: {describe_finding(finding)}", site)
            home = home_site(case, run)
            if site is not None and home is not None and home != site:
                # the kernel's line is where it happened; the test (or scenario) that made it happen is related
                result["relatedLocations"] = [{"id": 1, "message": {"text": f"the {home.what} that ran it"},
                                               "physicalLocation": _physical(home)}]
            logical = [{"name": self.text(finding.buffer), "kind": "variable",
                        "fullyQualifiedName": self.text(f"{finding.kernel or case['kernel']}::{finding.buffer}")}]
            result.setdefault("locations", [{}])[0]["logicalLocations"] = logical
            result["partialFingerprints"] = {FINGERPRINT: self.text(f"{case['id']}|{finding.key()}")}
            result["properties"].update({"buffer": self.text(finding.buffer), "region": self.text(finding.region),
                                         "bytes": finding.bytes, "key": self.text(finding.key()),
                                         "ranges": [{"region": self.text(r.region), "start": r.start, "end": r.end,
                                                     "logical": self.text(r.logical)} for r in finding.ranges]})
            out.append(result)
        if case["failed"] and not case["findings"]:
            rule = "outcome/" + case["outcome"].replace(" ", "-")
            rules.setdefault(rule, _outcome_rule(case["outcome"]))
            first = first_line(case["message"] or "") or case["outcome"]
            out.append(self.result(case, rule, f"{case['id']}: {case['outcome']}: {first}",
                                   home_site(case, run)))
        return out

    def result(self, case: Mapping[str, Any], rule: str, message: str, site: Site | None) -> dict[str, Any]:
        result: dict[str, Any] = {"ruleId": rule, "level": "error" if case["failed"] else "note",
                                  "message": {"text": self.text(message)},
                                  "properties": {"case": self.text(case["id"]), "scenario": self.text(case["scenario"]),
                                                 "kernel": self.text(case["kernel"]), "arch": self.text(case["arch"]),
                                                 "outcome": case["outcome"]}}
        upstream = upstream_of(case)
        if upstream:
            result["properties"]["upstream"] = self.text(upstream)
        rerun = rerun_command(case)
        if rerun:
            result["properties"]["rerun"] = self.text(rerun)
        if site is not None:
            result["locations"] = [{"physicalLocation": _physical(site)}]
        return result

    def invocation(self, report: Mapping[str, Any]) -> dict[str, Any]:
        run, status = report["run"], report["summary"]["status"]
        invocation: dict[str, Any] = {
            "executionSuccessful": bool(run["finished"]) and status != "interrupted",
            "toolExecutionNotifications": [*self.run_notification(report),
                                           *(self.stale_notification(entry, run) for entry in stale_entries(report))],
            "properties": {"argv": [self.text(a) for a in run["argv"]], "interrupted": self.text(str(run.get("interrupted") or ""))},
        }
        for key, field in (("started", "startTimeUtc"), ("finished", "endTimeUtc")):
            if run.get(key):
                invocation[field] = self.text(run[key])
        return invocation

    def run_notification(self, report: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A run that did not finish (an error) or checked nothing (a warning) says so: never an empty, green log."""
        head = headline(report)
        if head.status not in ("interrupted", "empty"):
            return []
        words = head.text + (f" ({head.detail})" if head.detail else "")
        return [{"level": "error" if head.status == "interrupted" else "warning", "message": {"text": self.text(words)}}]

    def stale_notification(self, entry: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
        note: dict[str, Any] = {"level": "warning", "message": {"text": self.text(
            f"stale baseline entry: {entry['case']}: {entry['finding']} ({entry['why']}); remove it from the baseline")}}
        baseline = run.get("baseline") if isinstance(run.get("baseline"), Mapping) else {}
        file = relative(baseline.get("file"), run.get("root")) if baseline else ""
        if file:
            note["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": _uri_path(file), "uriBaseId": ROOT_ID}}}]
        return note


def _physical(site: Site) -> dict[str, Any]:
    return {"artifactLocation": {"uri": _uri_path(site.file), "uriBaseId": ROOT_ID}, "region": {"startLine": site.line}}


def _finding_rule(detector: str, kind: str) -> dict[str, Any]:
    what = DETECTOR_WORDS.get(detector, f"detector {detector}")
    return {"id": f"{detector}/{kind}", "name": _camel(f"{detector} {kind}"),
            "shortDescription": {"text": f"{kind} seen by {detector}"},
            "fullDescription": {"text": f"A GPU kernel's {kind} that its test (or scenario) does not expect: {what}."},
            "defaultConfiguration": {"level": "error"},
            "properties": {"detector": detector, "kind": kind, "tags": ["memory-safety", "gpu"]}}


def _outcome_rule(outcome: str) -> dict[str, Any]:
    return {"id": "outcome/" + outcome.replace(" ", "-"), "name": _camel(f"case {outcome}"),
            "shortDescription": {"text": f"a case whose outcome is '{outcome}'"},
            "fullDescription": {"text": f"The case ended '{outcome}', a failure of the run with no finding of its own "
                                        "(its message says why)."},
            "defaultConfiguration": {"level": "error"}, "properties": {"outcome": outcome}}


def _camel(words: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in words.replace("_", " ").replace("-", " ").split())


def _uri_path(path: str) -> str:
    """A path as a URI reference: every character outside the unreserved set and '/' percent-encoded."""
    from urllib.parse import quote
    return quote(path, safe="/")


def render_sarif(report: Mapping[str, Any]) -> str:
    return SarifRenderer().render(report)
