"""The end of a run never blocks on GITHUB_STEP_SUMMARY and never writes over a user's own files: a FIFO as the
step summary is skipped with a warning; a report folder holding a summary.md or junit.xml the harness did not write
(no marker lists it) is refused, naming the file and the options that choose another folder."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from gpu_memsafety.report import build_report, emit_github
from gpu_memsafety.report.write import MARKER, ReportDirError, start_report_dir, write_reports


def report() -> dict:
    return build_report([], {"hostname": "h"}, started="s", finished="f", argv=[])


def test_a_fifo_as_step_summary_is_skipped_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    lines: list[str] = []
    done = threading.Event()

    def emit() -> None:
        emit_github(report(), lines.append, {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(fifo)})
        done.set()

    threading.Thread(target=emit, daemon=True).start()
    assert done.wait(20), "appending the summary to a FIFO blocked"
    assert any("could not append the summary" in line and "not written" in line for line in lines), lines


def test_a_fifo_with_a_reader_is_skipped_too(tmp_path: Path) -> None:
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        lines: list[str] = []
        emit_github(report(), lines.append, {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(fifo)})
        assert any("not a regular file" in line for line in lines), lines
        try:
            data = os.read(reader, 1)
        except BlockingIOError:
            data = b""
        assert data == b""   # nothing was written into it
    finally:
        os.close(reader)


def test_a_regular_step_summary_is_appended(tmp_path: Path) -> None:
    target = tmp_path / "summary.md"
    target.write_text("before\n")
    emit_github(report(), [].append, {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(target)})
    text = target.read_text()
    assert text.startswith("before\n") and "GPU memory safety" in text


@pytest.mark.parametrize("name", ["summary.md", "junit.xml", "report.json"])
def test_a_users_own_file_in_the_report_folder_is_not_overwritten(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / name).write_text("my own notes\n")
    for write in (lambda: write_reports(report(), folder),
                  lambda: start_report_dir(folder, run_id="r", started="s", argv=[], environment={})):
        with pytest.raises(ReportDirError) as info:
            write()
        said = str(info.value)
        assert str(folder / name) in said and "not written by gpu-memsafety" in said and "another folder" in said
        assert (folder / name).read_text() == "my own notes\n"


def test_the_harness_writes_over_its_own_set_again_and_again(tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    write_reports(report(), folder)
    assert (folder / MARKER).is_file()
    start_report_dir(folder, run_id="r2", started="s", argv=[], environment={})
    write_reports(report(), folder)
    (folder / "notes.txt").write_text("mine\n")     # a file outside the set is no concern of the harness
    write_reports(report(), folder)
    assert (folder / "notes.txt").read_text() == "mine\n"
