"""The terminal rendering: what `make sanitize` prints after pytest's own summary.

Plain text (no colour, no TTY needed), short on a green run: the matrix, failing cases in full, one line per
kernel for its known bugs, one line per reason for cases not run, and the headline last, where the eye
lands. Foreign text is shown through `visible`, so a kernel's output cannot move the cursor or recolour the
terminal.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from gpu_memsafety.report.baselines import accepted_text, stale_line
from gpu_memsafety.report.document import FAILURE
from gpu_memsafety.report.findings import case_findings, describe_finding
from gpu_memsafety.report.render import Renderer, plural, pytest_counts, row_label, visible

# Case ids shown per group of cases not run (or never started) before "and N more".
IDS_SHOWN = 3


class TerminalRenderer(Renderer):
    """`failures=False`: the failing cases are not listed again (a host suite's run: pytest's own FAILURES section
    has each test's findings); `width`: every line within that many columns (wrapped under its own indent)."""

    name = "terminal"

    def __init__(self, failures: bool = True, width: int | None = None) -> None:
        self.show_failures = failures
        self.width = width

    def text(self, value: str) -> str:
        return visible(value, newlines=False)

    def render(self, report: Mapping[str, Any]) -> str:
        cases = report["cases"]
        parts = [self.matrix(report["matrix"], row_label(report)), self.failures(cases) if self.show_failures else "",
                 self.known_bugs(cases), self.accepted_cases(cases), self.stale_entries(report), self.not_run(cases),
                 self.never_started(report.get("not_run", [])), self.run_line(report), self.headline(report)]
        text = "\n\n".join(p for p in parts if p)
        if self.width:
            text = "\n".join(_wrap(line, self.width) for line in text.split("\n"))
        return text + "\n"

    def matrix(self, rows: Sequence[Mapping[str, Any]], first: str = "kernel") -> str:
        if not rows:
            return "no cases ran"
        head, lines = self.matrix_table(rows, first)
        table = [head, *((self.text(m.cells[0]), self.text(m.cells[1]), *m.cells[2:],
                          m.verdict.upper() if m.verdict == FAILURE else m.verdict) for m in lines)]
        widths = [max(len(line[i]) for line in table) for i in range(len(head))]
        text = ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in
                          enumerate(zip(line, widths))).rstrip() for line in table]
        # a row that ran nothing says why after its verdict, outside the columns (a long reason widens none)
        text = [t + (f"  ({self.text(m.reason)})" if m and m.reason else "") for t, m in zip(text, [None, *lines])]
        text.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(text)

    def failures(self, cases: Sequence[Mapping[str, Any]]) -> str:
        failing = self.failing(cases)
        if not failing:
            return ""
        blocks = [f"FAILED {plural(len(failing), 'case')}:"]
        for case in failing:
            blocks.append(f"  [{case['outcome']}] {self.text(case['id'])} ({self.text(case['arch'] or '-')})")
            blocks += [f"    {visible(line)}" for line in (case["message"] or "(no message)").splitlines()]
            blocks += [f"    - {self.text(describe_finding(f))}" for f in case_findings(case)]
        return "\n".join(blocks)

    def known_bugs(self, cases: Sequence[Mapping[str, Any]]) -> str:
        """One line per kernel: how many cases, what was found, the upstream issues."""
        groups = self.bug_groups(cases)
        if not groups:
            return ""
        lines = [f"Known bugs (expected findings), {plural(sum(len(g.cases) for g in groups), 'case')}:"]
        for g in groups:
            archs = f" ({', '.join(g.archs)})" if g.archs else ""
            upstream = f"; upstream {', '.join(g.upstreams)}" if g.upstreams else ""
            lines.append(self.text(f"  {g.kernel or '-'}{archs}: {plural(len(g.cases), 'case')}, "
                                   f"{g.what() or 'no findings recorded'}{upstream}"))
        return "\n".join(lines)

    def accepted_cases(self, cases: Sequence[Mapping[str, Any]]) -> str:
        """One line per case a baseline accepted: its reason, never "known bug"."""
        accepted = self.accepted(cases)
        if not accepted:
            return ""
        lines = [f"Accepted by the baseline, {plural(len(accepted), 'case')}:"]
        lines += [self.text(f"  {c['id']} ({c['arch'] or '-'}): {accepted_text(c)}") for c in accepted]
        return "\n".join(lines)

    def stale_entries(self, report: Mapping[str, Any]) -> str:
        stale = self.stale(report)
        if not stale:
            return ""
        lines = [f"Baseline: {plural(len(stale), 'stale entry')} (remove from the baseline file):"]
        return "\n".join(lines + [self.text(f"  {stale_line(e)}") for e in stale])

    def not_run(self, cases: Sequence[Mapping[str, Any]]) -> str:
        """One line per reason, a few ids each."""
        groups = self.skip_groups(cases)
        if not groups:
            return ""
        total = sum(len(g.ids) for g in groups)
        lines = [f"Not run, {plural(total, 'case')}:"]
        for g in groups:
            archs = ", ".join(g.archs) or "-"
            label = g.outcome.upper()
            if len(g.ids) == 1:
                lines.append(self.text(f"  {label} {g.ids[0]} ({archs}): {g.reason}"))
                continue
            lines.append(self.text(f"  {label} {plural(len(g.ids), 'case')} ({archs}): {g.reason}"))
            lines.append("      " + self._ids(g.ids))
        return "\n".join(lines)

    def never_started(self, ids: Sequence[str]) -> str:
        if not ids:
            return ""
        return f"Never started (the run was interrupted), {plural(len(ids), 'case')}:\n      {self._ids(ids)}"

    def _ids(self, ids: Sequence[str]) -> str:
        more = f", and {len(ids) - IDS_SHOWN} more" if len(ids) > IDS_SHOWN else ""
        return self.text(", ".join(ids[:IDS_SHOWN]) + more)

    def run_line(self, report: Mapping[str, Any]) -> str:
        run = report["run"]
        shard = run.get("shard")
        where = f", shard {shard['index']}/{shard['count']}" if isinstance(shard, dict) else ""
        return self.text(f"run {run.get('id') or '(no id)'}{where}, mode {run['mode'] or '-'}")

    def headline(self, report: Mapping[str, Any]) -> str:
        head = self.head(report)
        counts = ", ".join(f"{n:,} {label}" for label, n in report["summary"]["counts"].items() if n)
        text = head.word.upper() + head.text[len(head.word):]
        said = ", ".join(f"{n:,} {word}" for word, n in pytest_counts(report["cases"]).items())
        lines = [self.text(text), f"  outcomes: {counts or 'none'}; as pytest counts them: {said or 'nothing'}"]
        if head.detail:
            lines.append(self.text(f"  why: {head.detail}"))
        return "\n".join(lines)


def _wrap(line: str, width: int) -> str:
    if len(line) <= width:
        return line
    import textwrap
    indent = line[: len(line) - len(line.lstrip(" "))] + "    "
    return "\n".join(textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False))


def render_terminal(report: Mapping[str, Any], failures: bool = True, width: int | None = None) -> str:
    return TerminalRenderer(failures, width).render(report)
