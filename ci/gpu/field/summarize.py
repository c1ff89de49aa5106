"""One step of the field campaign as a few lines: pytest's own counts, the verdicts of a guarded run, its findings.

    python ci/gpu/field/summarize.py SUITE STEP RC LOG [REPORT_DIR]

Reads pytest's final line from LOG and, where the step was guarded, REPORT_DIR/report.json (every case's outcome;
each finding with its test, detector, kind, buffer, tensor name, region, bytes and kernel)."""
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any


sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
from project_json import jsonio  # noqa: E402  (the one strict JSON reader, by its path)

FINAL = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in ([\d.]+)s")


def pytest_counts(log: Path) -> str:
    if not log.exists():
        return "no log"
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    for line in reversed(lines):
        m = FINAL.search(line.strip("= "))
        if m:
            return f"{m.group(1)} in {m.group(2)} s"
    return "no pytest summary line (killed?)"


def main(argv: list[str]) -> int:
    suite, step, rc, log = argv[1:5]
    report_dir = Path(argv[5]) if len(argv) > 5 else None
    wall = ""
    if Path(log).exists():
        m = re.search(r"wall_s=(\d+)", Path(log).read_text(encoding="utf-8", errors="replace"))
        wall = m.group(1) if m else ""
    print(f"{suite} {step}: rc={rc} wall_s={wall} pytest: {pytest_counts(Path(log))}")
    report = report_dir / "report.json" if report_dir else None
    if report is None or not report.exists():
        if step != "plain":
            print(f"  no report.json in {report_dir}")
        return 0
    doc = jsonio.loads(report.read_text(encoding="utf-8"))
    cases = doc.get("cases", [])
    outcomes = Counter(c.get("outcome", "?") for c in cases)
    status = doc.get("summary", {}).get("status", "?")
    print(f"  report: status={status} " + ", ".join(f"{k}={v}" for k, v in sorted(outcomes.items())))
    explored = [c for c in cases if "@{" in str(c.get("id", ""))]      # an explored instance: node id @ {changes}
    if explored:
        verdicts = Counter(c.get("outcome", "?") for c in explored)
        print(f"  explored variants: {len(explored)} (" + ", ".join(f"{k}={v}" for k, v in sorted(verdicts.items()))
              + f") of {len(cases) - len(explored)} tests")
    reasons = Counter(c.get("message", "")[:90] for c in cases if c.get("outcome") in ("not applicable", "could not run",
                                                                                         "crashed", "unresolved"))
    for reason, count in reasons.most_common(4):
        print(f"  {count} x {reason}")
    for case in cases:
        for f in case.get("findings", []):
            d = f.get("details", {})
            d = d if isinstance(d, dict) else dict(d)
            ranges = ",".join(f"{r.get('start')}..{r.get('end')}" for r in f.get("ranges", [])[:3])
            print(f"  FINDING {case.get('id')} [{case.get('outcome')}]: {f.get('detector')} {f.get('kind')} "
                  f"{f.get('buffer')} {f.get('region')} {f.get('bytes')} B [{ranges}] kernel={f.get('kernel')} "
                  f"src={f.get('source')} tensor={d.get('tensor', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
