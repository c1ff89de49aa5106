"""What each case of the reports under a folder came to: `python3 ci/gpu/summarize.py DIR` prints, for every
DIR/*/report.json, its status and counts, every case's outcome and message, and every finding's kind, buffer,
region, bytes, source, ranges and note (the device scripts' summary.txt)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from project_json import jsonio  # noqa: E402  (the one strict JSON reader, by its path)


def main(folder: str) -> None:
    for report in sorted(Path(folder).glob("*/report.json")):
        data = jsonio.loads(report.read_text())
        summary = data.get("summary", {})
        print(f"== {report.parent.name}: {summary.get('status')} {summary.get('counts')}")
        for case in data.get("cases", []):
            print(f"  {case['id']}: {case['outcome']} ({case.get('duration_s', 0)} s) {case['message'][:200]!r}")
            for f in case.get("findings", []):
                print(f"    {f['detector']} {f['kind']} {f['buffer']}/{f['region']} {f['bytes']} B x{f['count']} "
                      f"kernel={f['kernel']} source={f['source']!r} "
                      f"ranges={[(r['start'], r['end']) for r in f['ranges']][:8]}")
                print(f"      {f['note'][:300]}")


if __name__ == "__main__":
    main(sys.argv[1])
