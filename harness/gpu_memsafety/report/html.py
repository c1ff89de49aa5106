"""The HTML rendering (`report.html`): one self-contained page to open from a CI artifact.

No network at all: the style and the script are inline, and the page's Content-Security-Policy allows only
those two (by their SHA-256), so nothing is fetched and no other script can run even if a string escaped its
escaping. What it shows: the headline; the kernel x architecture table (a row per kernel, a column per
architecture, each cell its verdict and counts; a click filters the cases to that kernel); the baseline's
stale entries; then every case, failing ones first, filterable by outcome, kernel, detector and id, each
with its message and, for each finding, the picture of its buffer (gpu_memsafety.report.picture, drawn by
gpu_memsafety.report.svg); the run and environment last. Foreign text is HTML-escaped after `visible`.
"""
from __future__ import annotations

import base64
import hashlib
from typing import Any, Mapping, Sequence

from gpu_memsafety.report.baselines import accepted_text, is_accepted, stale_entries, stale_line, unchecked_entries
from gpu_memsafety.report.document import FAILURE, KNOWN_BUG, NOT_APPLICABLE, OK, UNSUPPORTED, outcome_ran, upstream_of
from gpu_memsafety.report.findings import case_findings, describe_finding
from gpu_memsafety.report.picture import BUFFERS, drawable, picture
from gpu_memsafety.report.render import Renderer, environment_pairs, plural, row_kinds, row_label
from gpu_memsafety.report.svg import picture_svg, text

# Findings drawn per case (a case with more lists the rest as text: a page must stay light to open).
PICTURES_PER_CASE = 8
# Case order: failing first, then what a reader checks next.
_ORDER = {"expected finding": 1, "clean": 3}

_VERDICT_CLASS = {OK: "ok", KNOWN_BUG: "known", FAILURE: "fail", UNSUPPORTED: "skip", NOT_APPLICABLE: "skip"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1180px;padding:12px 20px;color:#1b1b1b}
h1{font-size:20px;margin:8px 0}h2{font-size:16px;margin:22px 0 8px;border-bottom:1px solid #ddd}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:320px;white-space:pre-wrap}
table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}.matrix tr[data-filter-kernel]{cursor:pointer}.matrix tr[data-filter-kernel]:hover{background:#f0f6ff}
.v{display:inline-block;border-radius:4px;padding:0 6px;font-weight:600}
.v.ok{background:#dafbe1}.v.known{background:#fff8c5}.v.fail{background:#ffebe9;color:#a40e26}.v.skip{background:#eaeef2}
.passed{color:#1a7f37}.failed,.interrupted{color:#a40e26}.empty{color:#9a6700}
form{display:flex;gap:12px;flex-wrap:wrap;align-items:end;background:#f6f8fa;padding:8px;border:1px solid #d0d7de}
label{display:flex;flex-direction:column;font-size:12px}select,input{font-size:13px;padding:2px}
details.case{border:1px solid #d0d7de;border-radius:4px;margin:4px 0;padding:2px 8px}
details.case>summary{cursor:pointer;padding:2px 0}details.case[open]{background:#fcfcfd}
.finding{margin:10px 0}.finding p{margin:4px 0}svg.buffer-picture{max-width:100%;height:auto;border:1px solid #eee}
.muted{color:#57606a}.why{color:#57606a;font-size:12px}dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}
dt{color:#57606a}dd{margin:0}
"""

SCRIPT = """
(function () {
  var form = document.getElementById('filters');
  var cases = Array.prototype.slice.call(document.querySelectorAll('details.case'));
  var shown = document.getElementById('shown');
  function keep(c) {
    var o = form.outcome.value, k = form.kernel.value, d = form.detector.value, q = form.q.value.toLowerCase();
    if (o === '*failing' ? c.dataset.failed !== '1' : (o !== '' && c.dataset.outcome !== o)) return false;
    if (k !== '' && c.dataset.kernel !== k) return false;
    if (d !== '' && (' ' + c.dataset.detectors + ' ').indexOf(' ' + d + ' ') < 0) return false;
    return q === '' || c.dataset.id.toLowerCase().indexOf(q) >= 0;
  }
  function apply() {
    var n = 0;
    cases.forEach(function (c) { var ok = keep(c); c.hidden = !ok; if (ok) n += 1; });
    shown.textContent = n + ' of ' + cases.length + ' cases shown';
  }
  form.addEventListener('input', apply);
  form.addEventListener('change', apply);
  form.addEventListener('submit', function (e) { e.preventDefault(); });
  Array.prototype.forEach.call(document.querySelectorAll('[data-filter-kernel]'), function (row) {
    row.addEventListener('click', function () {
      form.kernel.value = row.dataset.filterKernel; form.outcome.value = ''; apply();
      document.getElementById('cases').scrollIntoView();
    });
  });
  apply();
})();
"""


def _sha(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


CSP = f"default-src 'none'; style-src {_sha(CSS)}; script-src {_sha(SCRIPT)}; img-src data:; form-action 'none'"


class HtmlRenderer(Renderer):
    name = "html"
    filename = "report.html"

    def text(self, value: str) -> str:
        return text(value)

    def render(self, report: Mapping[str, Any]) -> str:
        head = self.head(report)
        body = [self.header(report), self.matrix(report["matrix"], row_label(report)), self.baseline(report), self.cases(report),
                self.environment(report)]
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                f"<title>GPU memory safety: {self.text(head.text)}</title><style>{CSS}</style></head>\n<body>\n"
                + "\n".join(b for b in body if b) + f"\n<script>{SCRIPT}</script>\n</body></html>\n")

    def header(self, report: Mapping[str, Any]) -> str:
        head, run = self.head(report), report["run"]
        shard = run.get("shard")
        where = f", shard {shard['index']}/{shard['count']}" if isinstance(shard, dict) else ""
        lines = [f"<h1 class=\"{self.text(head.status)}\" id=\"headline\">"
                 f"GPU memory safety: {self.text(head.text)}</h1>"]
        if head.detail:
            lines.append(f"<p><b>Why:</b> {self.text(head.detail)}</p>")
        run_id = self.text(str(run.get('id') or 'without id'))
        lines.append(f"<p class=\"muted\">run <code>{run_id}</code>{self.text(where)}, "
                     f"mode {self.text(run['mode'] or '-')}, started {self.text(run['started'] or '-')}, "
                     f"finished {self.text(run['finished'] or '(not finished)')}</p>")
        return "\n".join(lines)

    # ------------------------------------------------------------------------------------------ matrix

    def matrix(self, rows: Sequence[Mapping[str, Any]], first: str = "kernel") -> str:
        title = f"{first[:1].upper() + first[1:]} × architecture"
        if not rows:
            return f"<h2>{title}</h2><p>No case has a result.</p>"
        archs = sorted({r["arch"] for r in rows})
        kernels = sorted({r["kernel"] for r in rows})
        cell = {(r["kernel"], r["arch"]): r for r in rows}
        head = "".join(f"<th>{self.text(a or '-')}</th>" for a in archs)
        lines = [f"<h2>{title}</h2><table class=\"matrix\"><tr><th>{first}</th>{head}</tr>"]
        for kernel in kernels:
            cells = "".join(self.matrix_cell(cell.get((kernel, a))) for a in archs)
            lines.append(f"<tr data-filter-kernel=\"{self.text(kernel)}\" title=\"show this {first}'s cases\">"
                         f"<td><code>{self.text(kernel or '-')}</code></td>{cells}</tr>")
        lines.append(f"</table><p class=\"why\">A click on a row shows that {first}'s cases below.</p>")
        return "\n".join(lines)

    def matrix_cell(self, row: Mapping[str, Any] | None) -> str:
        if row is None:
            return "<td class=\"muted\">-</td>"
        kinds = ", ".join(f"{t['findings']:,} {k}" for k, t in row_kinds(row).items() if t["findings"])
        counts = f"{plural(row['cases'], 'case')}" + (f", {row['failed']:,} failed" if row["failed"] else "")
        reason = f"<div class=\"why\">{self.text(row['reason'])}</div>" if row.get("reason") else ""
        return (f"<td>{self.badge(row['verdict'], _VERDICT_CLASS.get(row['verdict'], 'skip'))}"
                f"<div>{counts}</div><div class=\"why\">{self.text(kinds)}</div>{reason}</td>")

    def badge(self, word: str, cls: str) -> str:
        return f"<span class=\"v {cls}\">{self.text(word)}</span>"

    # ---------------------------------------------------------------------------------------- baseline

    def baseline(self, report: Mapping[str, Any]) -> str:
        stale, unchecked = stale_entries(report), unchecked_entries(report)
        if not stale and not unchecked:
            return ""
        parts = ["<h2 id=\"baseline\">Baseline</h2>"]
        if stale:
            items = "".join(f"<li><code>{self.text(stale_line(e))}</code></li>" for e in stale)
            parts.append(f"<p>{plural(len(stale), 'stale entry')} (remove from the baseline file)</p><ul>{items}</ul>")
        if unchecked:
            items = "".join(f"<li><code>{self.text(stale_line(e))}</code></li>" for e in unchecked)
            parts.append(f"<details><summary>{plural(len(unchecked), 'entry')} not checked by this run "
                         f"(case not run to the end)</summary><ul>{items}</ul></details>")
        return "\n".join(parts)

    # ------------------------------------------------------------------------------------------- cases

    def cases(self, report: Mapping[str, Any]) -> str:
        cases = sorted(report["cases"], key=_order)
        outcomes = list(dict.fromkeys(c["outcome"] for c in cases))
        kernels = sorted({c["kernel"] for c in cases})
        detectors = sorted({f["detector"] for c in cases for f in c["findings"]})
        form = ("<form id=\"filters\">"
                + self.select("outcome", [("", "all outcomes"), ("*failing", "failing")] + [(o, o) for o in outcomes])
                + self.select("kernel", [("", f"all {row_label(report)}s")] + [(k, k or "-") for k in kernels])
                + self.select("detector", [("", "any finding or none")] + [(d, d) for d in detectors]
                              + [("-", "no finding")])
                + "<label>case id contains<input name=\"q\" type=\"search\" autocomplete=\"off\"></label>"
                + "<output id=\"shown\"></output></form>")
        never = "".join(f"<li><code>{self.text(i)}</code></li>" for i in report.get("not_run", []))
        never_html = f"<h3>Never started (the run was interrupted)</h3><ul>{never}</ul>" if never else ""
        body = "\n".join(self.case(c, report["run"]) for c in cases)
        return f"<h2 id=\"cases\">Cases</h2>{form}{never_html}\n<div id=\"case-list\">{body}</div>"

    def select(self, name: str, options: Sequence[tuple[str, str]]) -> str:
        opts = "".join(f"<option value=\"{self.text(v)}\">{self.text(label)}</option>" for v, label in options)
        return f"<label>{name}<select name=\"{name}\">{opts}</select></label>"

    def case(self, case: Mapping[str, Any], run: Mapping[str, Any]) -> str:
        findings = case_findings(case)
        detectors = " ".join(sorted({f.detector for f in findings})) or "-"
        accepted = accepted_text(case)
        word = "accepted" if is_accepted(case) else case["outcome"]
        cls = "fail" if case["failed"] else "known" if case["outcome"] == "expected finding" else \
            "ok" if outcome_ran(case["outcome"]) else "skip"
        count = f" · {plural(len(findings), 'finding')}" if findings else ""
        attrs = (f"class=\"case\" data-id=\"{self.text(case['id'])}\" data-outcome=\"{self.text(case['outcome'])}\" "
                 f"data-failed=\"{1 if case['failed'] else 0}\" data-kernel=\"{self.text(case['kernel'])}\" "
                 f"data-detectors=\"{self.text(detectors)}\"")
        summary = (f"<summary>{self.badge(word, cls)} <code>{self.text(case['id'])}</code> "
                   f"<span class=\"muted\">{self.text(case['arch'] or '-')}{count}</span></summary>")
        facts = [("kernel", case["kernel"]), ("mode", case["mode"]), ("expected", case["expected"]),
                 ("upstream", upstream_of(case)), ("source", str(case["params"].get("upstream") or "")),
                 ("baseline", accepted), ("seconds", f"{case['duration_s']:.1f}")]
        dl = "".join(f"<dt>{k}</dt><dd>{self.text(v)}</dd>" for k, v in facts if v)
        message = f"<pre>{self.text(case['message'])}</pre>" if case["message"] else ""
        records = case["details"].get(BUFFERS) if isinstance(case["details"], Mapping) else None
        pics = [self.finding(f, records, i < PICTURES_PER_CASE) for i, f in enumerate(findings)]
        return f"<details {attrs}>{summary}<dl>{dl}</dl>{message}{''.join(pics)}</details>"

    def finding(self, finding: Any, records: Any, draw: bool) -> str:
        words = f"<p><code>{self.text(describe_finding(finding))}</code></p>"
        if not draw or not drawable(finding):
            return f"<div class=\"finding\">{words}</div>"
        record = records.get(finding.buffer) if isinstance(records, Mapping) else None
        return f"<div class=\"finding\">{words}{picture_svg(picture(finding, record))}</div>"

    # ------------------------------------------------------------------------------------- environment

    def environment(self, report: Mapping[str, Any]) -> str:
        run = report["run"]
        pairs = [("run id", str(run.get("id", ""))), ("argv", " ".join(run["argv"])),
                 *environment_pairs(report["environment"])]
        rows = "".join(f"<tr><th>{self.text(k)}</th><td>{self.text(v)}</td></tr>" for k, v in pairs if v)
        return f"<h2>Run and environment</h2><details><summary>show</summary><table>{rows}</table></details>"


def _order(case: Mapping[str, Any]) -> tuple[int, str]:
    if case["failed"]:
        return 0, case["id"]
    if is_accepted(case):
        return 2, case["id"]
    return _ORDER.get(case["outcome"], 4), case["id"]


def render_html(report: Mapping[str, Any]) -> str:
    return HtmlRenderer().render(report)
