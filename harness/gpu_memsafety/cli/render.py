"""`gpu-memsafety render REPORT -o DIR`: the whole report set again from one report.json.

    gpu-memsafety render reports/report.json -o rendered --pictures

Loads and validates the report (another runner's, last month's), then writes every format of the set
(report.json, junit.xml, summary.md, report.sarif, report.html, gl-code-quality-report.json) into DIR as one
set; `--pictures` also writes each finding's buffer picture as an SVG file and as text
(pictures/<case>-<n>.svg, pictures/<case>-<n>.txt), to attach or commit on their own. The exit status is 1
when the report was interrupted or checked nothing (the set is still written, the reason printed).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any, Mapping

from gpu_memsafety.report.document import unchecked_reasons
from gpu_memsafety.report.findings import case_findings
from gpu_memsafety.report.load import ReportError, load_report
from gpu_memsafety.report.render import visible
from gpu_memsafety.report.picture import BUFFERS, drawable, picture, strip
from gpu_memsafety.report.svg import picture_svg
from gpu_memsafety.report.write import ReportDirError, write_reports
from gpu_memsafety.util.fsutil import atomic_write_set

# Case ids become file names: anything but these characters is replaced, and the name is cut.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
NAME_CHARS = 120


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="gpu-memsafety render", description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path, help="a report.json")
    ap.add_argument("-o", "--out", type=Path, required=True, help="folder to write the set into")
    ap.add_argument("--pictures", action="store_true", help="also write each finding's picture (SVG and text)")
    args = ap.parse_args(argv)
    try:
        report = load_report(args.report)
        written = write_reports(report, args.out)
        if args.pictures:
            pictures = picture_files(report)
            atomic_write_set(args.out / "pictures", pictures)
            print(f"pictures: {len(pictures) // 2} in {args.out / 'pictures'}")
    except (ReportError, ReportDirError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for kind, path in written.items():
        print(f"{kind}: {path}")
    unchecked = unchecked_reasons(report)
    if unchecked:   # the set is written; the exit status still says the run it shows checked nothing complete
        print(visible(f"error: {args.report}: " + "; ".join(unchecked)), file=sys.stderr)
    return 1 if unchecked else 0


def picture_files(report: Mapping[str, Any]) -> dict[str, str]:
    """name -> text of every finding's picture, as SVG and as the terminal's strip."""
    files: dict[str, str] = {}
    for case in report["cases"]:
        records = case["details"].get(BUFFERS) if isinstance(case.get("details"), Mapping) else None
        stem = _UNSAFE.sub("_", case["id"])[:NAME_CHARS]
        for number, finding in enumerate(case_findings(case), 1):
            if not drawable(finding):
                continue
            pic = picture(finding, records.get(finding.buffer) if isinstance(records, Mapping) else None)
            files[f"{stem}-{number}.svg"] = picture_svg(pic) + "\n"
            files[f"{stem}-{number}.txt"] = f"{case['id']}\n{strip(pic)}\n"
    return files
