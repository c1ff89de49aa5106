"""CI annotations: GitHub Actions workflow commands, and the job summary appended where GitHub reads it.

With `GITHUB_ACTIONS=true` (set on every GitHub runner) the pytest plugin prints, after its own summary, one
`::error file=F,line=L,title=T::MESSAGE` line per failing case, at the kernel's source line the sanitizer named
when it lies in the checkout, else at the scenario's definition (gpu_memsafety.report.locate), and one
`::warning` per stale baseline entry at the baseline file, and one for the run itself when it did not finish
(an error) or checked nothing (a warning); GitHub shows them on the run and, for files of the
commit, on the diff (a step shows its first 10 errors; summary.md lists every case). It also appends summary.md
to `$GITHUB_STEP_SUMMARY` itself, so a workflow needs no step for it.

Workflow commands are lines on standard output that GitHub parses: every foreign string is escaped as GitHub
documents (`%`, CR and LF in the message; also `:` and `,` in a property), so a kernel's message cannot end the
command early or start another one.
"""
from __future__ import annotations

import errno
import os
import stat
from typing import Any, Callable, Mapping

from gpu_memsafety.report.baselines import baseline_run, stale_entries, stale_line
from gpu_memsafety.report.findings import case_findings, describe_finding
from gpu_memsafety.report.locate import case_site, relative, rerun_command
from gpu_memsafety.report.markdown import render_markdown
from gpu_memsafety.report.document import EMPTY, INTERRUPTED
from gpu_memsafety.report.render import first_line, headline, visible

# A message's text is cut here (GitHub shows annotations in a narrow column; summary.md has everything).
MESSAGE_CHARS = 1000


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, *, file: str = "", line: int = 0, title: str = "") -> str:
    props = [f"file={escape_property(file)}"] if file else []
    if file and line:
        props.append(f"line={line}")
    if title:
        props.append(f"title={escape_property(visible(title, newlines=False))}")
    head = f"::{level}" + (" " + ",".join(props) if props else "")
    text = visible(message)
    return f"{head}::{escape_data(text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS - 3] + '...')}"


def github_annotations(report: Mapping[str, Any]) -> list[str]:
    """One ::error per failing case, one ::warning per stale baseline entry."""
    run = report["run"]
    head = headline(report)
    lines = []
    if head.status in (INTERRUPTED, EMPTY):    # the run as a whole: did not finish, or checked nothing
        lines.append(command("error" if head.status == INTERRUPTED else "warning",
                             head.text + (f"\n{head.detail}" if head.detail else ""),
                             title=f"gpu-memsafety: {head.word}"))
    for case in report["cases"]:
        if not case["failed"]:
            continue
        site = case_site(case, run)
        findings = [describe_finding(f) for f in case_findings(case)]
        rerun = rerun_command(case)
        message = "\n".join([first_line(case["message"]) or case["outcome"], *findings,
                             *([f"rerun: {rerun}"] if rerun else [])])
        lines.append(command("error", message, file=site.file if site else "", line=site.line if site else 0,
                             title=f"gpu-memsafety: {case['outcome']}: {case['id']} ({case['arch'] or '-'})"))
    for case_id in report.get("not_run", []):
        lines.append(command("error", "the run was interrupted before this case started",
                             title=f"gpu-memsafety: not started: {case_id}"))
    baseline = relative(baseline_run(report).get("file"), run.get("root"))
    for entry in stale_entries(report):
        lines.append(command("warning", f"stale baseline entry: {stale_line(entry)}; remove it from the baseline",
                             file=baseline, title="gpu-memsafety: stale baseline entry"))
    return lines


def emit_github(report: Mapping[str, Any], write_line: Callable[[str], None],
                environ: Mapping[str, str] | None = None) -> bool:
    """On GitHub Actions: print the annotations, append summary.md to $GITHUB_STEP_SUMMARY. False elsewhere."""
    env = os.environ if environ is None else environ
    if env.get("GITHUB_ACTIONS") != "true":
        return False
    for line in github_annotations(report):
        write_line(line)
    target = env.get("GITHUB_STEP_SUMMARY", "")
    if not target:
        write_line("::warning title=gpu-memsafety::GITHUB_STEP_SUMMARY is not set: the job summary was not written")
        return True
    try:
        append_summary(target, render_markdown(report) + "\n")
    except OSError as exc:
        write_line(command("warning", f"could not append the summary to GITHUB_STEP_SUMMARY ({target}): "
                                      f"{exc.strerror or exc}; the job summary was not written", title="gpu-memsafety"))
    return True


def append_summary(target: str, text: str) -> None:
    """Append to the step summary file, never blocking: it is opened without waiting (O_NONBLOCK: a FIFO with no
    reader would hold the end of the run forever) and must be a regular file, else OSError says what it is."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(target, flags, 0o666)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a socket): skipped")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "a", encoding="utf-8", closefd=False) as handle:
            handle.write(text)
    finally:
        os.close(fd)
