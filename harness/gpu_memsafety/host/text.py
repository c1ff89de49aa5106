"""How a host-suite verdict reads in pytest's own output: the teardown error of a test with a finding, and the one
line under a test whose verdict is not a plain clean (known bug, not applicable). Control characters from the suite
or the kernels are shown as escapes (gpu_memsafety.report.visible)."""
from __future__ import annotations

from gpu_memsafety.model import CaseResult

FINDING_LINES = 12


def failure_text(result: CaseResult) -> str:
    from gpu_memsafety.report import describe_finding, visible
    test = result.details.get("test", {})
    lines = [f"gpu-memsafety: {result.outcome.label} ({result.mode} mode)", f"test = {result.case_id}",
             f"arch = {result.arch or '-'}", f"test itself = {test.get('outcome', '?')}",
             f"expected = {result.expected}"]
    for finding in result.findings:
        lines.append(f"finding = {describe_finding(finding)}")
        if finding.detail("tensor"):
            lines.append(f"    tensor: {finding.detail('tensor')}")
        stack = finding.detail("stack")
        if stack:
            lines += [f"    allocated at: {s}" for s in stack.splitlines()[:FINDING_LINES]]
        made = finding.detail("allocated_in")
        if made:
            lines.append(f"    allocated in: {made}")
    lines += ["", result.message]
    return visible("\n".join(lines))


def summary_line(result: CaseResult) -> str:
    from gpu_memsafety.report import visible
    return visible(f"gpu-memsafety ({result.mode}): {result.outcome.label}: {result.message}", newlines=False)
