"""GitLab's code-quality report (`gl-code-quality-report.json`), for merge-request widgets.

A JSON array of issues in the subset of the Code Climate format GitLab reads: `description`, `check_name`,
`fingerprint` (unique and stable across runs: a hash of the case id and Finding.key(), so GitLab tells a new
finding from one it saw on the target branch), `severity` and `location` (`path`, `lines.begin`). A finding of
a failing case is `critical`; a failing case with no finding of its own (crashed, unexpectedly clean, ...) is
`major` under `outcome/<outcome>`; a known bug or a finding a baseline accepted is `info`, so the widget
lists it without calling it new; a stale baseline entry is `minor` at the baseline file; a run that did not
finish is a `blocker` and one that checked nothing `major` (`run/interrupted`, `run/empty`), so an empty
list always means a run that finished and checked something. Each issue's `content` names the run id. GitLab needs a
location for every issue: the kernel's source line, else the scenario's definition
(gpu_memsafety.report.locate), else the report itself (`report.json`, line 1).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from gpu_memsafety.report.baselines import accepted_reasons, baseline_run, stale_entries, stale_line
from gpu_memsafety.report.findings import case_findings, describe_finding
from gpu_memsafety.report.locate import Site, finding_or_case_site, home_site, relative, rerun_command
from gpu_memsafety.report.document import EMPTY, INTERRUPTED
from gpu_memsafety.report.render import Renderer, headline, visible

BLOCKER, CRITICAL, MAJOR, MINOR, INFO = "blocker", "critical", "major", "minor", "info"
FALLBACK_PATH = "report.json"
RERUN = "_rerun"          # held on an issue until its body is written


class CodeQualityRenderer(Renderer):
    name = "codequality"
    filename = "gl-code-quality-report.json"

    def text(self, value: str) -> str:
        return visible(value, newlines=False)

    def render(self, report: Mapping[str, Any]) -> str:
        return json.dumps(self.issues(report), indent=2, ensure_ascii=False) + "\n"

    def issues(self, report: Mapping[str, Any]) -> list[dict[str, Any]]:
        run = report["run"]
        out = []
        for case in report["cases"]:
            accepted = accepted_reasons(case)
            for raw, finding in zip(case["findings"], case_findings(case)):
                if case["failed"]:
                    severity, why = CRITICAL, ""
                else:
                    severity = INFO
                    why = accepted.get(finding.key()) or "known bug: " + str(case["expected"])
                text = f"{case['id']}: {describe_finding(finding)}" + (f" [{why}]" if why else "")
                out.append(self.issue(f"{finding.detector}/{finding.kind}", text, severity,
                                      f"{case['id']}|{finding.key()}", finding_or_case_site(raw, case, run)))
                out[-1][RERUN] = rerun_command(case)
            if case["failed"] and not case["findings"]:
                first = next(iter((case["message"] or "").strip().splitlines()), "")
                out.append(self.issue("outcome/" + case["outcome"].replace(" ", "-"),
                                      f"{case['id']}: {case['outcome']}" + (f": {first}" if first else ""), MAJOR,
                                      f"{case['id']}|{case['outcome']}", home_site(case, run)))
        head = headline(report)
        if head.status in (INTERRUPTED, EMPTY):     # a run that did not finish or checked nothing is never green
            out.insert(0, self.issue("run/" + head.status, head.text + (f" ({head.detail})" if head.detail else ""),
                                     BLOCKER if head.status == INTERRUPTED else MAJOR, f"run|{run.get('id', '')}",
                                     None))
        baseline = relative(baseline_run(report).get("file"), run.get("root"))
        for entry in stale_entries(report):
            out.append(self.issue("baseline/stale", f"stale baseline entry: {stale_line(entry)}; remove it", MINOR,
                                  f"stale|{entry['case']}|{entry['finding']}",
                                  Site(baseline, 1, "baseline") if baseline else None))
        run_id = str(run.get("id") or "")
        for issue in out:
            rerun = issue.pop(RERUN, "")
            issue["content"] = {"body": self.text(f"gpu-memsafety run {run_id or '(no id)'}"
                                                  + (f"; run it again alone: {rerun}" if rerun else ""))}
        return out

    def issue(self, check: str, description: str, severity: str, identity: str, site: Site | None) -> dict[str, Any]:
        return {"description": self.text(description), "check_name": self.text(check),
                "fingerprint": hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest(),
                "severity": severity,
                "location": {"path": site.file if site else FALLBACK_PATH,
                             "lines": {"begin": site.line if site else 1}}}


def render_codequality(report: Mapping[str, Any]) -> str:
    return CodeQualityRenderer().render(report)
