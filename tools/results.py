"""One short summary per measured run, generated from the run's full outputs (kept on the `evidence-archive`
branch, not on the product's branches): its title, the commit it ran at, its command, and its figures.

    git worktree add ../evidence-archive evidence-archive
    python3 tools/results.py ../evidence-archive/evidence results --history .

reads every RUN folder EVIDENCE/<machine>/<run>/ that has a COMMAND.md and writes results/<machine>/<run>.md:
  - the title (COMMAND.md's first heading) and the commit(s) COMMAND.md names ("Commit: abc1234", "at abc1234"),
    and with --history the commit that added its COMMAND.md (the run is at or before it);
  - the command: COMMAND.md's first indented code block (or its first `Command` line);
  - the figures: COMMAND.md's table rows and bold sentences, the totals of its score*.txt files, the per-run lines
    of runs.txt, the section lines of summary.txt, and each report.json's status and counts.
Every list is capped (the summaries stay short); what was cut says how much. A run folder without COMMAND.md is
named on stderr and skipped (exit status 1), never summarised from guesses. Standard library only."""
from __future__ import annotations

import argparse
import gzip
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from project_json import jsonio  # noqa: E402  (the one strict JSON reader, by its path)

ARCHIVE = "evidence-archive"
COMMIT = re.compile(r"(?:\bCommit:?\s*|\bat\s+|\bcommit\s+)`?([0-9a-f]{7,40})\b")
CAP = 25


@dataclass
class Summary:
    machine: str
    run: str
    title: str
    commits: list[str]
    command: list[str]
    recorded_in: str = ""
    figures: dict[str, list[str]] = field(default_factory=dict)

    def render(self) -> str:
        out = [f"# {self.title}", "",
               f"Run: `{self.machine}/{self.run}`; full outputs: branch `{ARCHIVE}`, folder "
               f"`evidence/{self.machine}/{self.run}/`.",
               f"Commit: {', '.join(self.commits) if self.commits else 'not named in COMMAND.md'}"]
        if self.recorded_in:
            out.append(f"Recorded in: {self.recorded_in} (the commit that added its COMMAND.md; the run is at or before it)")
        out.append("")
        out += ["Command:", ""] + ([f"    {c}" for c in self.command] or ["    (COMMAND.md shows none)"]) + [""]
        for name, lines in self.figures.items():
            if lines:
                out += [f"## {name}", ""] + lines + [""]
        return "\n".join(out).rstrip() + "\n"


def capped(lines: list[str], cap: int = CAP) -> list[str]:
    return lines if len(lines) <= cap else lines[:cap] + [f"... ({len(lines) - cap} more lines in the archive)"]


def command_block(text: str) -> list[str]:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("    ") and line.strip() and (i == 0 or not lines[i - 1].strip()):
            block = []
            for more in lines[i:]:
                if more.startswith("    ") or (not more.strip() and block and block[-1] != ""):
                    block.append(more[4:].rstrip())
                else:
                    break
            return [b for b in block if b][:12]
    for line in lines:
        if re.match(r"\s*(Command|Commands?)\b", line):
            return [line.strip()]
    return []


def report_line(path: Path, run_dir: Path) -> str | None:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    try:
        doc = jsonio.loads(raw)
    except jsonio.DuplicateKeyError as exc:
        raise ValueError(f"{path}: {exc}: refused (which value is meant?)") from None
    except ValueError:
        return None
    if not isinstance(doc, dict) or "summary" not in doc:
        return None
    summary = doc["summary"]
    counts = {k: v for k, v in (summary.get("counts") or {}).items() if v}
    wall = doc.get("run", {}).get("duration_s")
    wall_text = f", {wall:.1f} s" if isinstance(wall, (int, float)) else ""
    return (f"- `{path.relative_to(run_dir)}`: {summary.get('status')}, {summary.get('total')} cases{wall_text}: "
            + ", ".join(f"{k} {v}" for k, v in counts.items()))


def summarise(run_dir: Path) -> Summary:
    text = (run_dir / "COMMAND.md").read_text(errors="replace")
    heading = next((line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")), run_dir.name)
    commits = list(dict.fromkeys(COMMIT.findall(text)))[:6]
    figures: dict[str, list[str]] = {}
    lines = text.splitlines()
    figures["Figures (COMMAND.md)"] = capped(
        [line.rstrip() for line in lines if line.startswith("|") or ("**" in line and not line.startswith("#"))])
    for score in sorted(run_dir.glob("score*.txt")):
        body = score.read_text(errors="replace").splitlines()
        start = next((i for i, line in enumerate(body) if line.startswith("== totals")), None)
        if start is not None:
            figures[f"Totals ({score.name})"] = ["    " + line for line in capped(body[start:], 10)]
    runs = run_dir / "runs.txt"
    if runs.is_file():
        figures["Runs (runs.txt)"] = ["    " + line for line in capped(
            [line for line in runs.read_text(errors="replace").splitlines() if line.strip()])]
    for name in ("summary.txt", "summary.md"):
        path = run_dir / name
        if path.is_file():
            heads = [line for line in path.read_text(errors="replace").splitlines() if line.startswith("== ")]
            figures[f"Sections ({name})"] = ["    " + line for line in capped(heads)]
    reports = sorted([*run_dir.rglob("report.json"), *run_dir.rglob("report.json.gz")])
    figures["Reports"] = capped([r for r in (report_line(p, run_dir) for p in reports) if r])
    return Summary(run_dir.parent.name, run_dir.name, heading, commits, command_block(text), figures=figures)


def recorded_in(history: Path | None, machine: str, run: str) -> str:
    """The commit of `history`'s HEAD history that added evidence/<machine>/<run>/COMMAND.md, or ""."""
    if history is None:
        return ""
    proc = subprocess.run(["git", "-C", str(history), "log", "--diff-filter=A", "--format=%h", "--",
                           f"evidence/{machine}/{run}/COMMAND.md"], capture_output=True, text=True)
    found = proc.stdout.split()
    return found[-1] if proc.returncode == 0 and found else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evidence", type=Path, help="the evidence/ folder of the evidence-archive branch")
    parser.add_argument("out", type=Path, help="where results/<machine>/<run>.md go")
    parser.add_argument("--history", type=Path, default=None,
                        help="a checkout whose history held evidence/ (names the commit that recorded each run)")
    args = parser.parse_args(argv)
    status = 0
    for run_dir in sorted(p for p in args.evidence.glob("*/*") if p.is_dir()):
        if not (run_dir / "COMMAND.md").is_file():
            print(f"results: {run_dir} has no COMMAND.md: not summarised (write one, then run again)", file=sys.stderr)
            status = 1
            continue
        try:
            summary = summarise(run_dir)
        except ValueError as exc:       # a report.json that names a key twice: refused, never read as its last value
            print(f"results: {exc}", file=sys.stderr)
            status = 1
            continue
        summary.recorded_in = recorded_in(args.history, summary.machine, summary.run)
        target = args.out / summary.machine / f"{summary.run}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(summary.render())
    return status


if __name__ == "__main__":
    sys.exit(main())
