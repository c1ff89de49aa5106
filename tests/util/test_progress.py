"""harness/gpu_memsafety/util/progress.py: plain lines when stderr is not a terminal, a rich bar on one, honest endings."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from gpu_memsafety.util import progress as P
from repo_paths import FAKE_DIR


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_style_follows_the_stream_and_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(P.ENV, raising=False)
    assert P.style(io.StringIO()) == "plain"
    assert P.style(Tty()) == "rich"
    monkeypatch.setenv(P.ENV, "plain")
    assert P.style(Tty()) == "plain"
    monkeypatch.setenv(P.ENV, "bogus")
    with pytest.raises(ValueError, match="GPU_MEMSAFETY_PROGRESS='bogus'.*rich, plain, off"):
        P.style(Tty())


def test_plain_lines_one_per_tenth_and_a_done_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(P.ENV, raising=False)
    out = io.StringIO()
    with P.progress("stress K2880", total=200, unit="runs", stream=out) as bar:
        for i in range(200):
            bar.advance(1, note=f"{i // 50} crashed")
    lines = out.getvalue().splitlines()
    assert lines[0] == "stress K2880: started (200 runs)"
    assert len(lines) == 1 + 9 + 1, lines          # start, 10%..90%, done: never one line per run
    assert lines[1].startswith("stress K2880: 20 of 200 runs (10%)")
    assert lines[-1].startswith("stress K2880: 200 of 200 runs (100%)")
    assert lines[-1].endswith("3 crashed done")


def test_a_step_that_raises_is_reported_stopped_not_done(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(P.ENV, raising=False)
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt), P.progress("bench", total=4, stream=out) as bar:
        bar.advance(1)
        raise KeyboardInterrupt
    last = out.getvalue().splitlines()[-1]
    assert "1 of 4 (25%)" in last and last.endswith("stopped (KeyboardInterrupt)") and "done" not in last


def test_unknown_total_prints_by_time(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    out = io.StringIO()
    bar = P.PlainBar("download", None, P.BYTES, out, clock=lambda: now[0])
    bar.start()
    for _ in range(5):
        now[0] += P.PLAIN_EVERY_S / 2
        bar.advance(3 << 20)
    bar.finish(None)
    lines = out.getvalue().splitlines()
    assert lines[0] == "download: started"
    assert lines[1:] == ["download: 6.0 MiB in 30.0 s", "download: 12.0 MiB in 60.0 s", "download: 15.0 MiB in 75.0 s done"]


def test_copy_stream_copies_everything_and_refuses_a_short_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(P.ENV, raising=False)
    data = bytes(range(256)) * 20000            # 5 MB: several chunks
    dst, log = io.BytesIO(), io.StringIO()
    assert P.copy_stream(io.BytesIO(data), dst, "wheel", total=len(data), stream=log) == len(data)
    assert dst.getvalue() == data
    assert log.getvalue().splitlines()[-1].startswith("wheel: 4.9 MiB of 4.9 MiB (100%)")
    with pytest.raises(OSError, match="wheel: got 10 bytes, expected 11"):
        P.copy_stream(io.BytesIO(b"x" * 10), io.BytesIO(), "wheel", total=11, stream=io.StringIO())


def test_rich_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(P.ENV, raising=False)
    out = Tty()
    assert list(P.track(range(7), "cases", stream=out)) == list(range(7))
    text = out.getvalue()
    assert "cases" in text and "7/7" in text and "started" not in text    # drawn by rich, not plain lines


def test_off_prints_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(P.ENV, "off")
    out = io.StringIO()
    assert list(P.track([1, 2], "x", stream=out)) == [1, 2]
    assert out.getvalue() == ""


def test_watch_follows_work_counted_elsewhere(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(P.ENV, raising=False)
    import time
    out = io.StringIO()
    with P.watch("bench inproc", 10, lambda: len(list(tmp_path.glob("*.json"))), interval=0.01, stream=out):
        for i in range(10):
            (tmp_path / f"{i}.json").write_text("{}")
            time.sleep(0.03)
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("bench inproc: 10 of 10 (100%)") and lines[-1].endswith("done")
    assert len(lines) > 3      # polled while the block ran, not only at its end


def test_watch_skips_a_count_that_cannot_be_read_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(P.ENV, raising=False)
    import time
    reads = iter(["", "", "3", "4"])
    out = io.StringIO()
    with P.watch("stress", 4, lambda: int(next(reads, "4")), interval=0.01, stream=out):
        time.sleep(0.2)
    assert out.getvalue().splitlines()[-1].startswith("stress: 4 of 4 (100%)")


def test_nested_rich_bars_share_one_display(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(P.ENV, raising=False)
    out = Tty()
    with P.progress("bench parts", 2, stream=out) as parts:
        with P.progress("bench cases", 3, stream=out) as cases:     # rich alone refuses a second live display
            cases.advance(3)
        parts.advance(2)
    assert "bench parts" in out.getvalue() and "bench cases" in out.getvalue()
    assert P.RichBar._live == []


@pytest.mark.e2e
def test_repro_stress_counts_runs_on_stderr_while_they_run() -> None:
    """The worker's own count is read while it runs: lines between the start and the end. The case sleeps 0.1 s
    per run (fake_faults[slow]), so 40 runs take 4 s of wall time however a loaded machine schedules them (a
    real kernel's 40 runs could all land between two reads, 0.5 s apart, in one burst of CPU time)."""
    import os
    import subprocess
    import sys

    from gpu_memsafety.util.paths import CHECKOUT as ROOT
    fake = FAKE_DIR
    env = {k: v for k, v in os.environ.items() if k != P.ENV}
    proc = subprocess.run([sys.executable, "-m", "gpu_memsafety", "--scenario-path", str(fake / "fake_scenarios"), "repro",
                           "fake_faults[slow-n4000]", "--mode", "stress", "--loop", "40"], cwd=str(ROOT),
                          env=dict(env, CUDA_VISIBLE_DEVICES="", PYTHONPATH=os.pathsep.join([str(ROOT), str(fake)])),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    err = [line for line in proc.stderr.splitlines() if line.startswith("stress fake_faults[")]
    assert err[0].endswith("started (40 runs)"), err
    assert err[-1].split(": ", 1)[1].startswith("40 of 40 runs (100%)") and err[-1].endswith(", 0 crashed done"), err
    assert "crashed in 0 of 40 runs" in proc.stdout
    middle = [line.split(": ", 1)[1].split(" of ")[0] for line in err[1:-1]]
    assert middle and all(0 < int(n) < 40 for n in middle), err   # read while it ran, not only the end
    assert "started (40 runs)" not in proc.stdout
