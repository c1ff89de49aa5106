"""How a verdict reads in pytest's own output, on both paths: `failure_text`, the failure of a case that did not
pass, and the one-line reasons under a case whose verdict is not a plain pass (a known bug's xfail reason; a suite
test's summary line). Control characters from the suite, the kernels or the tools are shown as escapes
(gpu_memsafety.report.visible).

A scenario case's failure is a `key = value` block (scenario, case, kernel, arch, mode, outcome, expected, each
detector, each finding), then the head and tail of its message (the tool output).

A suite test's failure (a verdict that keeps the test's own result beside it, details["test"]): by default each finding is said once, in a few lines of at most LINE_WIDTH columns: what was read or written, where
in the kernel, the tensor, the bytes, the test and the command that runs it again alone. `-v` gives everything: the
finding's every field, the allocation's stack and the whole verdict. What every test shares (no GPU here) is said
once, at the top of the run, not here.
"""
from __future__ import annotations

import textwrap
from typing import Any, Mapping

from gpu_memsafety.model import CaseResult, Finding

FINDING_LINES = 12
MESSAGE_LINES = 40          # a scenario case's message longer than this shows its head and tail
LINE_WIDTH = 120
INDENT = "    "


class CaseFailure(Exception):
    """A scenario case that did not pass, raised in its pytest item (its report's text is failure_text)."""

    def __init__(self, result: CaseResult) -> None:
        from gpu_memsafety.util.neutral import visible
        super().__init__(visible(result.message))   # pytest may print it as it is
        self.result = result


def known_bug_reason(result: CaseResult) -> str:
    """The one-line xfail reason of an expected finding: a baseline's reason where one accepted it ("accepted:
    <reason>"), else the upstream issue, else the expectation."""
    from gpu_memsafety.report import accepted_text, upstream_of, visible
    data = result.to_json()
    upstream = upstream_of(data)
    said = accepted_text(data) or (f"known bug {upstream}" if upstream else f"known bug: {result.expected}")
    return visible(said, newlines=False)


def is_suite_test(result: CaseResult) -> bool:
    """Whether the verdict is a suite test's: it keeps the test's own result beside it (judge.suite)."""
    return "test" in result.details


def failure_text(result: CaseResult, verbose: int = 0, root: str = "") -> str:
    """The text of a case's failure for its verdict. A scenario case: its key = value block, then the head and tail
    of its message. A suite test: short (each finding once, lines within LINE_WIDTH), or with `verbose` everything
    the report holds."""
    from gpu_memsafety.report import visible
    if not is_suite_test(result):
        return visible(_case_block(result))
    if verbose > 0:
        return visible(_everything(result, root))
    own = result.details.get("test", {})
    lines = [head_line(result)]
    several = len(result.findings) > 1
    for finding in result.findings:
        lines += _finding_lines(finding, root, several)
    if not result.findings:
        lines.append(f"{INDENT}{result.message}")
    where = result.details.get("where") or {}
    if where.get("test"):
        lines.append(f"{INDENT}test: {where['test']} (the test itself {own.get('outcome', '?')})")
    if where.get("rerun"):
        lines.append(f"{INDENT}rerun: {where['rerun']}")
    return visible("\n".join(wrap(line) for line in lines))


def _case_block(result: CaseResult) -> str:
    """A scenario case: key = value block, then the findings, then the head and tail of the message (tool output)."""
    from gpu_memsafety.report import describe_finding
    lines = [f"scenario = {result.scenario}", f"case = {result.case_id}", f"kernel = {result.kernel}",
             f"arch = {result.arch}", f"mode = {result.mode}", f"outcome = {result.outcome.label}",
             f"expected = {result.expected}"]
    lines += [f"detector {d.detector} = {'ran' if d.ran else 'did not run'}: {d.detail}" for d in result.detectors]
    lines += [f"finding = {describe_finding(f)}" for f in result.findings]
    message = result.message.splitlines()
    shown = message if len(message) <= MESSAGE_LINES else message[:15] + ["..."] + message[-20:]
    return "\n".join(lines + [""] + shown)


def head_line(result: CaseResult) -> str:
    """The failure's first line, which pytest's short summary shows after the test's id."""
    n = len(result.findings)
    if not n:
        return f"gpu-memsafety: {result.outcome.label} ({result.mode})"
    first = result.findings[0]
    more = f"; and {n - 1} more finding{'s' if n > 2 else ''}" if n > 1 else ""
    return f"gpu-memsafety: {result.outcome.label} ({first.detector}): {_what(first)}{more}"


def _what(f: Finding) -> str:
    from gpu_memsafety.model import UNATTRIBUTED
    by = f" by {f.kernel}" if f.kernel else ""
    at = f" at {f.source}" if f.source else ""
    if f.buffer == UNATTRIBUTED:
        return f"{f.kind}, {f.bytes:,} B outside every tensor the kernel was given{by}{at}"
    return f"{f.kind} of {f.buffer}, {f.bytes:,} B {_region_words(f.region)}{by}{at}"


def _region_words(region: str) -> str:
    return {"past_end": "past its end", "before_start": "before its start"}.get(region, f"({region})")


def _finding_lines(f: Finding, root: str, several: bool) -> list[str]:
    lines = [f"{INDENT}- {f.detector}: {_what(f)}"] if several else []
    sub = INDENT + ("  " if several else "")
    path = f.detail("path")
    if path:
        lines.append(f"{sub}kernel: {_relative(path, root)}:{f.source.rsplit(':', 1)[-1]}")
    if f.detail("tensor"):
        lines.append(f"{sub}tensor: {f.detail('tensor')}")
    if f.ranges:
        from gpu_memsafety.report.findings import RANGES_SHOWN
        from gpu_memsafety.model import UNATTRIBUTED
        shown = [(f"{r.start:+,}..{r.end:+,}" if r.region != UNATTRIBUTED or not r.logical else "")
                 + (f" ({r.logical})" if r.logical and r.region != UNATTRIBUTED else r.logical)
                 for r in f.ranges[:RANGES_SHOWN]]
        more = f", and {len(f.ranges) - RANGES_SHOWN} more" if len(f.ranges) > RANGES_SHOWN else ""
        size = f" of a {int(f.detail('size')):,} B allocation" if f.detail("size").isdigit() else ""
        lines.append(f"{sub}bytes{size}: {', '.join(shown)}{more}")
    stack = f.detail("stack")
    if stack:
        lines.append(f"{sub}allocated at: {stack.splitlines()[0]}")
    return lines


def _relative(path: str, root: str) -> str:
    from gpu_memsafety.report.locate import relative
    return relative(path, root) or path


def wrap(line: str, width: int = LINE_WIDTH) -> str:
    """One line, within `width` columns: continued under its own indent."""
    if len(line) <= width:
        return line
    indent = line[: len(line) - len(line.lstrip(" "))] + "  "
    return "\n".join(textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False))


def _everything(result: CaseResult, root: str) -> str:
    from gpu_memsafety.report import describe_finding
    test = result.details.get("test", {})
    where: Mapping[str, Any] = result.details.get("where") or {}
    lines = [head_line(result), f"test = {result.case_id}", f"mode = {result.mode}",
             f"arch = {result.arch or '-'}", f"test itself = {test.get('outcome', '?')}",
             f"expected = {result.expected}"]
    lines += [f"{key} = {where[key]}" for key in ("test", "rerun") if where.get(key)]
    for finding in result.findings:
        lines.append(f"finding = {describe_finding(finding)}")
        if finding.detail("path"):
            lines.append(f"    kernel: {_relative(finding.detail('path'), root)}:{finding.source.rsplit(':', 1)[-1]}")
        if finding.detail("tensor"):
            lines.append(f"    tensor: {finding.detail('tensor')}")
        stack = finding.detail("stack")
        if stack:
            lines += [f"    allocated at: {s}" for s in stack.splitlines()[:FINDING_LINES]]
        made = finding.detail("allocated_in")
        if made:
            lines.append(f"    allocated in: {made}")
    lines += ["", result.message]
    return "\n".join(lines)


def summary_line(result: CaseResult, verbose: int = 0) -> str:
    from gpu_memsafety.report import visible
    text = visible(f"gpu-memsafety ({result.mode}): {result.outcome.label}: {result.message}", newlines=False)
    return text if verbose > 0 else visible(wrap(text))     # a wrap's new line may start with `::`: neutral again
