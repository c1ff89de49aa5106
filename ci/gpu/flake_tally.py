"""The flake tally (results/h200/flake-tally.md) from the H200 reports of the evidence-archive branch:

    git worktree add ../evidence-archive evidence-archive
    python3 ci/gpu/flake_tally.py ../evidence-archive/evidence/h200 > results/h200/flake-tally.md

Every report under H200_DIR/run*/ that is `make sanitize` in the default mode (complete) on the whole default
matrix (no --gpu-memsafety-scenario, -k or other selection in its argv, as many cases as the baseline) is one row: its workers,
wall time, status, failed cases, the cases whose outcome differs from the baseline (run 27's cold report), the cases
whose findings differ from the baseline's (by identity: detector, kind, kernel, buffer, region, and bytes where
exact) and the
memcheck records lost under load (each rerun alone by the judge: `details.memcheck_lost_record`).
"""
from __future__ import annotations

import gzip
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from project_json import jsonio  # noqa: E402  (the one strict JSON reader, by its path)

BASELINE = Path("run27-default-after-fix") / "cold" / "report.json.gz"     # relative to the H200 folder
SELECTING = ("--scenario", "--gpu-memsafety-scenario", "-k", "--lf", "--deselect")
FIRST_RUN = 27   # run 27 (ae963db) fixed the last flake found; earlier runs are the history that led there


@dataclass(frozen=True)
class Row:
    evidence: str
    run: str
    commit: str
    workers: int
    wall_s: float
    status: str
    failed: int
    outcome_differs: int
    findings_differ: int
    lost: int
    lost_found: int
    moved: tuple[str, ...] = ()   # "case identity: bytes in run 27 -> bytes here" where a count moved
    changed: tuple[str, ...] = ()  # "case: run 27 had these identities; now these" where they differ


def load(path: Path) -> dict:
    raw = path.read_bytes()
    return jsonio.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


def commit_of(evidence: Path) -> str:
    text = (evidence / "COMMAND.md").read_text() if (evidence / "COMMAND.md").is_file() else ""
    match = re.search(r"[Cc]ommit:?\s*`?([0-9a-f]{7,40})", text)
    return match.group(1)[:7] if match else "?"


def scope(doc: dict, cases: int) -> str:
    """"whole": `make sanitize` in the default mode on the whole default matrix; "some": the default mode on some
    scenarios (the lost-record runs at 16 workers); "": anything else (another mode, a held-out set)."""
    run = doc.get("run", {})
    argv = run.get("argv") or []
    if run.get("mode") != "complete" or not argv or argv[0] != "scenarios":
        return ""
    selected = any(a.split("=")[0] in SELECTING for a in argv)
    return "some" if selected else "whole" if len(doc.get("cases", [])) == cases else ""


def identity(finding: dict) -> str:
    """The finding's key by today's rule (gpu_memsafety.model.Finding.key: the count only where it is exact), also for
    a report written before that rule: a memcheck access into memory of no buffer of ours (unattributed) has had an
    inexact count since 660fc7d, so a count it stored then is left out here too."""
    exact = finding.get("exact", True) and not (finding["detector"] == "memcheck" and finding["buffer"] == "unattributed")
    head = ":".join(str(finding[k]) for k in ("detector", "kind", "kernel", "buffer", "region"))
    return f"{head}:{finding['bytes'] if exact else '~'}"


def keys(case: dict | None) -> frozenset[str]:
    return frozenset(identity(f) for f in (case or {}).get("findings", []))


def counts(case: dict | None) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for f in (case or {}).get("findings", []):
        out.setdefault(identity(f), []).append(f["bytes"])
    return {k: sorted(v) for k, v in out.items()}


def moved(base: dict | None, case: dict | None) -> list[str]:
    """The same identity with another byte count: "identity: 49152 -> 48640 B"."""
    was, now = counts(base), counts(case)
    return [f"{k}: {', '.join(map(str, was[k]))} -> {', '.join(map(str, now[k]))} B"
            for k in sorted(set(was) & set(now)) if len(was[k]) == len(now[k]) and was[k] != now[k]]


def changed(case_id: str, base: dict | None, case: dict | None) -> str:
    """A case whose findings differ by identity: "case: run 27 had A; now B" (only the identities that differ)."""
    was, now = keys(base), keys(case)
    return f"{case_id}: run 27 {', '.join(sorted(was - now)) or 'nothing more'}; now {', '.join(sorted(now - was)) or 'nothing more'}"


def rows(root: Path, baseline: Path | None = None, want: str = "whole") -> list[Row]:
    """One Row per report of scope `want`; a run of some scenarios is compared on the cases both ran."""
    base = {c["id"]: c for c in load(baseline or root / BASELINE)["cases"]}
    out = []
    for path in sorted(root.glob("run*/*/report.json*"),
                       key=lambda p: (int(re.match(r"run(\d+)", p.parts[-3]).group(1)), p.parent.name)):
        if int(re.match(r"run(\d+)", path.parts[-3]).group(1)) < FIRST_RUN:
            continue
        doc = load(path)
        if scope(doc, len(base)) != want:
            continue
        cases = {c["id"]: c for c in doc["cases"]}
        ids = set(base) & set(cases) if want == "some" else set(base) | set(cases)
        lost = [c for c in cases.values() if c.get("details", {}).get("memcheck_lost_record")]
        out.append(Row(
            evidence=path.parts[-3], run=path.parent.name, commit=commit_of(path.parents[1]),
            workers=int(doc["run"].get("workers") or 0), wall_s=float(doc["run"].get("wall_s") or 0),
            status=doc["summary"]["status"], failed=sum(1 for c in cases.values() if c["failed"]),
            outcome_differs=sum(1 for i in ids if (base.get(i) or {}).get("outcome") != (cases.get(i) or {}).get("outcome")),
            findings_differ=sum(1 for i in ids if keys(base.get(i)) != keys(cases.get(i))),
            lost=len(lost), lost_found=sum(1 for c in lost if not c["failed"] and c.get("findings")),
            moved=tuple(f"{i} {m}" for i in sorted(ids) for m in moved(base.get(i), cases.get(i))),
            changed=tuple(changed(i, base.get(i), cases.get(i)) for i in sorted(ids)
                          if keys(base.get(i)) != keys(cases.get(i)))))
    return out


def _table(table: list[Row]) -> list[str]:
    lines = [
        "| evidence | run | commit | workers | wall s | status | failed | outcome differs from run 27 | findings differ from run 27 (identity) | lost records (rerun alone, found) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(f"| {r.evidence} | {r.run} | {r.commit} | {r.workers} | {r.wall_s:g} | {r.status} | {r.failed} | "
                     f"{r.outcome_differs} | {r.findings_differ} | {r.lost} ({r.lost_found}) |")
    return lines


def render(table: list[Row], some: list[Row] = ()) -> str:
    lines = [
        "# Flake tally: every `make sanitize` (mode complete) on the full default matrix since ae963db (H200, one GPU)",
        "",
        "Generated by `python3 ci/gpu/flake_tally.py H200_DIR > results/h200/flake-tally.md` from the archived reports",
        "(H200_DIR: evidence/h200 of the evidence-archive branch),",
        "each compared case by case with run 27's cold report: its outcome, and its findings by identity (detector, kind,",
        "kernel, buffer, region, and the byte count where it is exact: Finding.key() since 660fc7d, applied to the older",
        "reports too). A lost memcheck record is rerun alone by the judge and judged on the rerun",
        "(`details.memcheck_lost_record`), never on the lost record.",
        "",
    ]
    lines += _table(table)
    lines.append("")
    for label, pick in (("Default workers (8)", lambda r: r.workers == 8),
                        ("Twice the workers (16)", lambda r: r.workers == 16),
                        ("Other worker counts", lambda r: r.workers not in (8, 16))):
        sel = [r for r in table if pick(r)]
        if sel:
            lines.append(f"- {label}: {len(sel)} runs, {sum(r.failed for r in sel)} failed cases, "
                         f"{sum(r.outcome_differs for r in sel)} outcomes differing, "
                         f"{sum(r.findings_differ for r in sel)} cases whose findings differ.")
    lost = sum(r.lost for r in table)
    lines.append(f"- Lost memcheck records: {lost} in {len(table)} runs; "
                 f"{sum(r.lost_found for r in table)} of them rerun alone and found.")
    if some:
        lines += ["", "## Runs of the two scenarios that lose memcheck records (the default mode, some scenarios)", "",
                  "The same columns, compared on the cases both ran. Not counted above.", ""]
        lines += _table(list(some))
        lines += ["", f"- {len(some)} runs: {sum(r.status != 'passed' for r in some)} not passed "
                      f"({', '.join(f'{r.evidence}/{r.run}: {r.status}' for r in some if r.status != 'passed') or 'none'}); "
                      f"{sum(r.lost for r in some)} lost records, {sum(r.lost_found for r in some)} of them found on a "
                      "rerun."]
    moved = sorted({m for r in table for m in r.moved})
    changes = sorted({c for r in table for c in r.changed})
    if changes:
        lines += ["", "Findings that differ from run 27's by identity (the column above), and the runs where they did:", ""]
        lines += [f"- {c} ({', '.join(f'{r.evidence}/{r.run}' for r in table if c in r.changed)})" for c in changes]
    if moved:
        lines += ["", "Byte counts that moved from run 27's, under the same identity (so not a difference above):", ""]
        lines += [f"- {m} ({', '.join(f'{r.evidence}/{r.run}' for r in table if m in r.moved)})" for m in moved]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python3 ci/gpu/flake_tally.py H200_DIR (the evidence/h200 folder of the evidence-archive "
              "branch: git worktree add ../evidence-archive evidence-archive)", file=sys.stderr)
        return 2
    root = Path(argv[0])
    sys.stdout.write(render(rows(root), rows(root, want="some")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
