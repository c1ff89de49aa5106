"""Where a case or a finding points in the source, for the formats that annotate a file and a line.

GitHub annotations, SARIF, GitLab code quality and JUnit's `file`/`line` all want one place in the
repository. A finding seen by a sanitizer knows the kernel's source line (its record's file, kept in the
finding's details as `path`, and the line in `source`); every case knows its scenario's definition (the run's
`run.scenarios`, written by the pytest plugin: file and line of the scenario's definition). The kernel's line
wins where it lies inside the run's root (`run.root`, the pytest rootdir); otherwise the scenario file.

Paths are computed as text from the report, never opened: a report from another machine only names files.
`definition_site` is the one function here that reads a file: the plugin calls it on its own scenario files
when it writes the run's record.
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

# A scenario file is read this far looking for its definition (scenario files are short).
MAX_SCENARIO_BYTES = 1 << 20
KERNEL, SCENARIO, TEST = "kernel", "scenario", "test"


@dataclass(frozen=True)
class Site:
    file: str        # relative to the run's root, '/'-separated
    line: int        # 1-based
    what: str        # KERNEL (the kernel's source line: the sanitizer's, the trace's), SCENARIO (the scenario's
                     # definition) or TEST (a host suite's test function: the case's details.where)


def relative(path: Any, root: Any) -> str:
    """`path` relative to `root` ('/'-separated, normalised), or "" when it is not inside it. A relative path
    is taken as relative to the root already, unless it climbs out of it."""
    if not isinstance(path, str) or not path or "\x00" in path:
        return ""
    norm = posixpath.normpath(path.replace("\\", "/"))
    if not norm.startswith("/"):
        return "" if norm == ".." or norm.startswith("../") else norm
    if not isinstance(root, str) or not root.startswith("/"):
        return ""
    base = posixpath.normpath(root)
    if base == "/":
        return norm.lstrip("/")
    return norm[len(base) + 1:] if norm.startswith(base + "/") else ""


def _line_of(source: Any) -> int:
    """12 from 'kernel.cu:12'; 0 when the source names no line."""
    match = re.search(r":(\d+)$", source) if isinstance(source, str) else None
    return int(match.group(1)) if match and int(match.group(1)) > 0 else 0


def finding_site(finding: Mapping[str, Any], run: Mapping[str, Any]) -> Site | None:
    """The kernel's source line of a finding, when its record named a file inside the run's root."""
    details = finding.get("details")
    path = details.get("path") if isinstance(details, Mapping) else None
    line = _line_of(finding.get("source"))
    rel = relative(path, run.get("root"))
    return Site(rel, line, KERNEL) if rel and line else None


def scenario_site(scenario: str, run: Mapping[str, Any]) -> Site | None:
    scenarios = run.get("scenarios")
    record = scenarios.get(scenario) if isinstance(scenarios, Mapping) else None
    if not isinstance(record, Mapping):
        return None
    rel = relative(record.get("file"), run.get("root"))
    line = record.get("line")
    if not rel:
        return None
    return Site(rel, line if isinstance(line, int) and not isinstance(line, bool) and line > 0 else 1, SCENARIO)


def test_site(case: Mapping[str, Any], run: Mapping[str, Any]) -> Site | None:
    """A host suite's test function (`pytest --gpu-memsafety`: the case's details.where, file and line)."""
    details = case.get("details")
    where = details.get("where") if isinstance(details, Mapping) else None
    if not isinstance(where, Mapping):
        return None
    rel = relative(where.get("file"), run.get("root"))
    line = where.get("line")
    return Site(rel, line if isinstance(line, int) and not isinstance(line, bool) and line > 0 else 1, TEST) \
        if rel else None


def rerun_command(case: Mapping[str, Any]) -> str:
    """The command that runs a host suite's test again alone, in its mode (details.where.rerun); "" for others."""
    details = case.get("details")
    where = details.get("where") if isinstance(details, Mapping) else None
    return str(where.get("rerun") or "") if isinstance(where, Mapping) else ""


def home_site(case: Mapping[str, Any], run: Mapping[str, Any]) -> Site | None:
    """Where a case is defined: a host suite's test function, else the scenario's definition."""
    return test_site(case, run) or scenario_site(str(case.get("scenario", "")), run)


def case_site(case: Mapping[str, Any], run: Mapping[str, Any]) -> Site | None:
    """The first finding's kernel line, else where the case is defined (home_site), else None (nothing known)."""
    for finding in case.get("findings") or ():
        site = finding_site(finding, run) if isinstance(finding, Mapping) else None
        if site is not None:
            return site
    return home_site(case, run)


def finding_or_case_site(finding: Mapping[str, Any], case: Mapping[str, Any], run: Mapping[str, Any]) -> Site | None:
    return finding_site(finding, run) or home_site(case, run)


# ---------------------------------------------------------------------------------- writing the record


_DEFINITION = re.compile(r"^SCENARIO\s*(:[^=]*)?=|=\s*Scenario\s*\(")


def definition_site(file: str | Path, name: str, root: str | Path) -> dict[str, Any]:
    """{"file", "line"} of a scenario's definition: the line naming it (`name="..."`), else the first
    `SCENARIO =` or `= Scenario(`, else line 1; the file relative to `root` when inside it, else absolute."""
    path = Path(file)
    line = 1
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_SCENARIO_BYTES).decode("utf-8", "replace")
    except OSError:
        text = ""
    lines = text.splitlines()
    named = re.compile(r"""\bname\s*=\s*["']""" + re.escape(name) + r"""["']""")
    for pattern in (named, _DEFINITION):
        hit = next((i for i, t in enumerate(lines) if pattern.search(t)), None)
        if hit is not None:
            line = hit + 1
            break
    shown = relative(path.resolve().as_posix(), Path(root).resolve().as_posix()) or path.resolve().as_posix()
    return {"file": shown, "line": line}
