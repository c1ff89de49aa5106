"""Writing a run's report set into a report directory: report.json and its renderings (junit.xml, summary.md,
report.sarif, report.html, gl-code-quality-report.json).

The directory is checked before anything runs (`start_report_dir`, called by the pytest plugin at configure
time): a path that is a file, cannot be created or written, or sits on a nearly full disk stops the run at
once with the reason, instead of after an hour of GPU time. The same call replaces the previous run's reports
with a "did not finish" set carrying this run's id, so that a run killed without a chance to write (SIGKILL,
a lost machine) never leaves the previous run's green reports looking like this run's. The final set is
written with `atomic_write_set`: the previous complete set or the new one, never a mix.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from gpu_memsafety.util.fsutil import atomic_write_set
from gpu_memsafety.report.codequality import CodeQualityRenderer
from gpu_memsafety.report.document import build_report
from gpu_memsafety.report.html import HtmlRenderer
from gpu_memsafety.report.junit import JUnitRenderer
from gpu_memsafety.report.load import ReportError, validate_report
from gpu_memsafety.report.markdown import MarkdownRenderer
from gpu_memsafety.report.render import Renderer
from gpu_memsafety.report.sarif import SarifRenderer

REPORT_JSON = "report.json"
RENDERERS: tuple[Renderer, ...] = (JUnitRenderer(), MarkdownRenderer(), SarifRenderer(), HtmlRenderer(),
                                   CodeQualityRenderer())
REPORT_FILES = {"json": REPORT_JSON, **{r.name: r.filename for r in RENDERERS}}
# Free space a report directory needs before a run starts: a full nightly sweep's set is a few MiB, and a
# disk this close to full would fail the final write after the whole run.
MIN_FREE_BYTES = 16 << 20
NOT_FINISHED = "the run has not finished: these reports were written when it started (still running, or killed)"


class ReportDirError(Exception):
    """A report directory that cannot take reports: names the directory and says why."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(f"{os.fspath(path)}: {problem}")
        self.path = os.fspath(path)
        self.problem = problem


def report_json_text(report: Mapping[str, Any]) -> str:
    """Strict JSON (NaN refused here rather than written into a file no strict reader accepts)."""
    return json.dumps(report, indent=2, allow_nan=False) + "\n"


def render_files(report: Mapping[str, Any]) -> dict[str, str]:
    """file name -> text of every file of the set."""
    return {REPORT_JSON: report_json_text(report), **{r.filename: r.render(report) for r in RENDERERS}}


def render_files_names() -> list[str]:
    return [REPORT_JSON, *(r.filename for r in RENDERERS)]


def write_reports(report: Mapping[str, Any], directory: str | os.PathLike[str]) -> dict[str, Path]:
    """Validate, render, then write the set atomically; keys: json and each renderer's name (REPORT_FILES).

    A failure to write (disk full, I/O error) raises ReportDirError saying that the previous set was kept. A
    document that fails its own checks (a bug in the harness) is not lost either: it is written as it was built to
    report.invalid.json beside the set, and ReportDirError names it and the check that failed."""
    try:
        validate_report(report)
    except ReportError as exc:
        kept = _keep_invalid(report, directory)
        raise ReportDirError(directory, f"the run's report failed its own checks ({exc}): a harness bug, please "
                                        f"report it; {kept}") from exc
    texts = render_files(report)
    check_owned(directory, texts)
    texts[MARKER] = _marker_text(texts)
    try:
        written = atomic_write_set(directory, texts)
    except OSError as exc:
        raise ReportDirError(directory, f"the reports could not be written ({exc.strerror or exc}); the directory "
                                        "holds the previous complete set, or none") from exc
    return {key: written[name] for key, name in REPORT_FILES.items()}


INVALID_JSON = "report.invalid.json"
# Written with every set: the files of the folder that the harness wrote, and so may write over. A file of the set
# that is there and not listed (the user's own summary.md or junit.xml) is never overwritten without a word.
MARKER = ".gpu-memsafety-reports.json"
MARKER_SCHEMA = "gpu-memsafety-report-files/1"


def _marker_text(texts: Mapping[str, str]) -> str:
    return json.dumps({"schema": MARKER_SCHEMA, "files": sorted(n for n in texts if n != MARKER)}, indent=1) + "\n"


def owned_files(directory: str | os.PathLike[str]) -> set[str]:
    """The names the marker of `directory` lists: what the harness itself wrote there (none without a marker)."""
    from gpu_memsafety.util import jsonio
    try:
        data = jsonio.loads((Path(directory) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    files = data.get("files") if isinstance(data, dict) and data.get("schema") == MARKER_SCHEMA else None
    return {f for f in files if isinstance(f, str)} if isinstance(files, list) else set()


def check_owned(directory: str | os.PathLike[str], names: Sequence[str] | Mapping[str, str]) -> None:
    """Refuse to write over a file of the set that the harness did not write (no marker lists it)."""
    folder = Path(directory)
    owned = owned_files(folder)
    foreign = [name for name in names if name != MARKER and name not in owned
               and ((folder / name).is_symlink() or (folder / name).exists())]
    if foreign:
        raise ReportDirError(folder / foreign[0], f"exists and was not written by gpu-memsafety (no {MARKER} beside it "
                                                  f"lists it{'; nor ' + ', '.join(foreign[1:]) if foreign[1:] else ''}): "
                                                  "it is left as it is; choose another folder for the reports "
                                                  "(--report-dir, --gpu-memsafety-report-dir, render -o) or move it away")


def _keep_invalid(report: Mapping[str, Any], directory: str | os.PathLike[str]) -> str:
    """Write the document that failed validation as it is (every result the run judged), saying where."""
    path = Path(directory) / INVALID_JSON
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    except (OSError, TypeError, ValueError) as exc:
        return f"the document could not be kept either ({exc})"
    return f"the whole document, as built, is in {path}"


def check_report_dir(directory: str | os.PathLike[str], *, min_free: int = MIN_FREE_BYTES) -> Path:
    """Create `directory` if needed and check that reports can be written there; raises ReportDirError."""
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise ReportDirError(path, "is not a directory (a file is in the way); give a directory for the reports")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportDirError(path, f"cannot create the directory: {exc.strerror or exc}") from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=path)
    except OSError as exc:
        raise ReportDirError(path, f"cannot write there: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(probe)
    try:
        stats = os.statvfs(path)
    except OSError:
        return path
    free = stats.f_bavail * stats.f_frsize
    if free < min_free:
        raise ReportDirError(path, f"the disk is full or nearly: {free:,} bytes free, reports need at least "
                                   f"{min_free:,}")
    return path


def start_report_dir(directory: str | os.PathLike[str], *, run_id: str, started: str, argv: Sequence[str],
                     environment: Mapping[str, Any], mode: str = "") -> Path:
    """Check the directory, then replace any previous reports with this run's "did not finish" set."""
    path = check_report_dir(directory)
    check_owned(path, render_files_names())
    placeholder = build_report([], environment, started=started, finished="", argv=list(argv), mode=mode,
                               run_id=run_id, interrupted=NOT_FINISHED)
    write_reports(placeholder, path)
    return path
