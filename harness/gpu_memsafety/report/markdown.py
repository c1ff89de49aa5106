"""The Markdown rendering: `summary.md`, for `$GITHUB_STEP_SUMMARY` and people.

The first line is the headline: what ran, what did not and why ("passed: 57 ran, 95 not run (...)"). Then
the kernel x architecture matrix, the cases an interrupted run never started, failing cases in full, known
bugs one row per kernel (every finding in a collapsed section), cases not run one row per reason, and the run
and environment collapsed (the compute-sanitizer search list in its own collapsed section).

Text from kernels, adapters and other machines' files is escaped: Markdown links and images cannot form
(brackets escaped), HTML cannot (`<`, `>`, `&` as entities), tables cannot break (pipes escaped, newlines
folded), control characters are shown as escapes, and code blocks get a fence no backtick run inside closes.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

from gpu_memsafety.report.baselines import accepted_text, stale_line
from gpu_memsafety.report.document import (EMPTY, FAILED, FAILURE, INTERRUPTED, KNOWN_BUG, NOT_APPLICABLE, OK, PASSED,
                                     UNSUPPORTED, upstream_of)
from gpu_memsafety.report.findings import case_findings, describe_finding
from gpu_memsafety.report.render import Renderer, environment_pairs, plural, row_label, sanitizer_searched, visible

# GitHub caps a job summary at 1 MiB; past these the Markdown points at report.json instead.
MARKDOWN_CASES_SHOWN = 50
MARKDOWN_MESSAGE_LINES = 40
# Ids listed per group of cases not run before "and N more".
IDS_SHOWN = 5

_VERDICT_ICONS = {OK: "✅", KNOWN_BUG: "⚠️", FAILURE: "❌", UNSUPPORTED: "➖", NOT_APPLICABLE: "➖"}
_STATUS_ICONS = {PASSED: "✅", FAILED: "❌", EMPTY: "⚠️", INTERRUPTED: "❌"}

# Characters Markdown gives a meaning to inline: emphasis, code, links and images, tables, strikethrough;
# an underscore only at a word's edge (inside a word, as in sm_90, it cannot start emphasis); @ (e-mail autolinks).
_MD_PUNCTUATION = re.compile(r"([\\`*\[\]|~@]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))")


# Bare URLs GitHub would turn into links (its autolink extension): the scheme's colon or www's dot escaped.
_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|mailto)(:)|\b(www)(\.)")


def md_text(text: str) -> str:
    """Foreign text safe inline and inside a table cell: one line, no Markdown, HTML or control characters,
    and no link: neither [text](url), ![image](url), <url> nor a bare URL becomes one."""
    text = visible(" ".join(text.split()), newlines=False)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_PUNCTUATION.sub(r"\\\1", text)
    return _AUTOLINK.sub(lambda m: f"{m.group(1) or m.group(3)}\\{m.group(2) or m.group(4)}", text)



def md_table(head: Sequence[str], rows: Iterable[Sequence[str]], *, right: int = 0) -> str:
    """A pipe table; columns from index `right` on are right-aligned (0: none). Cells must be md_text already."""
    align = ["---:" if right and i >= right else "---" for i in range(len(head))]
    lines = [head, align, *rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def md_code_block(text: str) -> str:
    """A fenced block that no backtick run inside `text` can close early; control characters escaped."""
    text = visible(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def md_details(summary: str, body: str) -> str:
    """A collapsed section; `summary` must be md_text already."""
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def md_upstream(upstream: str) -> str:
    """A link for `owner/repo#N` (the only shape turned into a link), escaped text otherwise."""
    match = re.fullmatch(r"([\w.-]+/[\w.-]+)#(\d+)", upstream)
    if not match:
        return md_text(upstream)
    return f"[{upstream}](https://github.com/{match.group(1)}/issues/{match.group(2)})"


def verdict_badge(verdict: str) -> str:
    return f"{_VERDICT_ICONS.get(verdict, '')} {md_text(verdict)}".strip()


class MarkdownRenderer(Renderer):
    name = "markdown"
    filename = "summary.md"

    def text(self, value: str) -> str:
        return md_text(value)

    def render(self, report: Mapping[str, Any]) -> str:
        cases = report["cases"]
        sections = [self.headline(report), self.matrix(report["matrix"], row_label(report)),
                    self.never_started(report.get("not_run", [])), self.failures(cases),
                    self.known_bugs(cases), self.accepted_cases(cases), self.stale_entries(report),
                    self.not_run(cases), self.run(report)]
        return "\n\n".join(s for s in sections if s) + "\n"

    def headline(self, report: Mapping[str, Any]) -> str:
        head = self.head(report)
        summary, run = report["summary"], report["run"]
        counts = ", ".join(f"{n:,} {label}" for label, n in summary["counts"].items() if n) or "no cases"
        icon = "⚠️" if head.partial else _STATUS_ICONS.get(head.status, "")    # never a plain pass with part not run
        lines = [f"## {icon} GPU memory safety — {md_text(head.text)}", ""]
        if head.detail:
            lines += [f"**Why:** {md_text(head.detail)}", ""]
        shard = run.get("shard")
        where = f", shard {shard['index']}/{shard['count']}" if isinstance(shard, dict) else ""
        lines.append(f"{plural(summary['total'], 'case')} with a result ({md_text(counts)}); "
                     f"run `{md_text(str(run.get('id') or 'without id'))}`{where}.")
        return "\n".join(lines)

    def matrix(self, rows: Sequence[Mapping[str, Any]], first: str = "kernel") -> str:
        if not rows:
            return ""
        head, lines = self.matrix_table(rows, first)
        body = [(md_text(m.cells[0]), md_text(m.cells[1]), *m.cells[2:],
                 verdict_badge(m.verdict) + (f": {md_text(m.reason)}" if m.reason else "")) for m in lines]
        return f"### {first[:1].upper() + first[1:]} × architecture\n\n" + md_table(head, body)

    def never_started(self, ids: Sequence[str]) -> str:
        if not ids:
            return ""
        items = "\n".join(f"- {md_text(i)}" for i in ids)
        title = f"Never started: the run was interrupted ({len(ids):,})"
        return f"### {title}\n\n" + (items if len(ids) <= IDS_SHOWN else md_details("the case ids", items))

    def failures(self, cases: Sequence[Mapping[str, Any]]) -> str:
        failing = self.failing(cases)
        if not failing:
            return ""
        blocks = [f"### Failing cases ({len(failing):,})"]
        blocks += [self.failure(c) for c in failing[:MARKDOWN_CASES_SHOWN]]
        blocks.append(_more(len(failing)))
        return "\n\n".join(b for b in blocks if b)

    def failure(self, case: Mapping[str, Any]) -> str:
        lines = [f"- **{md_text(case['id'])}** ({md_text(case['arch'] or '-')}): {md_text(case['outcome'])}"]
        lines += [f"  - {md_text(describe_finding(f))}" for f in case_findings(case)]
        message = _clip_lines(case["message"], MARKDOWN_MESSAGE_LINES)
        if message:
            lines.append("\n" + _indent(md_code_block(message), "  "))
        return "\n".join(lines)

    def known_bugs(self, cases: Sequence[Mapping[str, Any]]) -> str:
        """One row per kernel; every case's findings in a collapsed table below."""
        groups = self.bug_groups(cases)
        if not groups:
            return ""
        total = sum(len(g.cases) for g in groups)
        rows = [(md_text(g.kernel or "-"), md_text(", ".join(g.archs) or "-"), f"{len(g.cases):,}",
                 md_text(g.what() or "no findings recorded"), ", ".join(md_upstream(u) for u in g.upstreams) or "-")
                for g in groups]
        table = md_table(("kernel", "arch", "cases", "findings", "upstream"), rows)
        shown = [c for g in groups for c in g.cases][:MARKDOWN_CASES_SHOWN]
        detail_rows = [(md_text(c["id"]), md_text(c["arch"] or "-"), md_text(describe_finding(f)),
                        md_upstream(upstream_of(c)) or "-") for c in shown for f in case_findings(c)]
        details = md_table(("case", "arch", "finding", "upstream"), detail_rows)
        more = _more(total)
        return "\n\n".join([f"### Known bugs: expected findings ({plural(total, 'case')})", table,
                            md_details(f"Every known-bug finding, case by case ({total:,})",
                                       details + (f"\n\n{more}" if more else ""))])

    def accepted_cases(self, cases: Sequence[Mapping[str, Any]]) -> str:
        accepted = self.accepted(cases)
        if not accepted:
            return ""
        rows = [(md_text(c["id"]), md_text(c["arch"] or "-"), md_text(accepted_text(c)))
                for c in accepted[:MARKDOWN_CASES_SHOWN]]
        more = _more(len(accepted))
        return (f"### Accepted by the baseline ({plural(len(accepted), 'case')})\n\n"
                + md_table(("case", "arch", "why"), rows) + (f"\n\n{more}" if more else ""))

    def stale_entries(self, report: Mapping[str, Any]) -> str:
        stale = self.stale(report)
        if not stale:
            return ""
        items = "\n".join(f"- {md_text(stale_line(e))}" for e in stale)
        return f"### Baseline: {plural(len(stale), 'stale entry')} (remove from the baseline file)\n\n{items}"

    def not_run(self, cases: Sequence[Mapping[str, Any]]) -> str:
        groups = self.skip_groups(cases)
        if not groups:
            return ""
        total = sum(len(g.ids) for g in groups)
        rows = [(md_text(g.reason), md_text(g.outcome), md_text(", ".join(g.archs) or "-"), f"{len(g.ids):,}",
                 md_text(", ".join(g.ids[:IDS_SHOWN]) + (f", and {len(g.ids) - IDS_SHOWN} more"
                                                        if len(g.ids) > IDS_SHOWN else "")))
                for g in groups]
        return f"### Not run ({total:,})\n\n" + md_table(("why", "outcome", "arch", "cases", "case ids"), rows)

    def run(self, report: Mapping[str, Any]) -> str:
        run, env = report["run"], report["environment"]
        pairs = [("run id", str(run.get("id", ""))), ("started", run["started"]), ("finished", run["finished"]),
                 ("mode", run["mode"]), *environment_pairs(env)]
        body = "\n".join(f"- {md_text(k)}: {md_text(v)}" for k, v in pairs if v)
        searched = sanitizer_searched(env.get("compute_sanitizer"))
        if searched:
            body += "\n\n" + md_details(f"Where compute-sanitizer was searched ({len(searched)} places)",
                                        "\n".join(f"- {md_text(p)}" for p in searched))
        return md_details("Run and environment", body)


def _more(shown_of: int) -> str:
    hidden = shown_of - MARKDOWN_CASES_SHOWN
    return f"... and {hidden:,} more in report.json." if hidden > 0 else ""


def _clip_lines(text: str, limit: int) -> str:
    lines = text.strip("\n").splitlines()
    if len(lines) <= limit:
        return "\n".join(lines)
    half = limit // 2
    return "\n".join([*lines[:half], f"... ({len(lines) - limit} lines cut) ...", *lines[-half:]])


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def render_markdown(report: Mapping[str, Any]) -> str:
    return MarkdownRenderer().render(report)
