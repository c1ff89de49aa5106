"""Progress for long steps (stress loops, bench parts, downloads) on stderr, never on stdout.

Why this exists: a stress run, a bench or a first download can take minutes, and a terminal that shows
nothing for minutes looks hung. On a terminal the bar is drawn by `rich` (the usual library for this); when
stderr is not a terminal (CI logs, pytest capture, a pipe) the same calls print plain lines instead, at most
one per tenth of the total (or one per `PLAIN_EVERY_S` when the total is unknown), so a log stays short.
`GPU_MEMSAFETY_PROGRESS=plain|rich|off` overrides the choice (e.g. plain lines in a terminal).

    from gpu_memsafety.util.progress import progress, copy_stream, watch
    with progress("stress K2880", total=runs, unit="runs") as bar:
        for ...:
            bar.advance(1, note=f"{crashes} crashed")
    copy_stream(response, out_file, "sgl-kernel 0.3.21 wheel", total=size)   # bytes, with a bar
    with watch("bench cases", total=n, count=lambda: len(list(out.glob("*.json")))):
        subprocess.run(child)                                                  # another process's progress

A step that ends with an exception is reported as stopped at its count, never as done.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any, BinaryIO, Protocol, TypeVar

ENV = "GPU_MEMSAFETY_PROGRESS"
STYLES = ("rich", "plain", "off")
PLAIN_STEPS = 10        # plain mode: one line per tenth of the total, so a log gets ~12 lines per step
PLAIN_EVERY_S = 30.0    # plain mode without a total: one line per half minute
BYTES = "bytes"         # the unit that is printed as KiB/MiB/GiB and drawn with rich's transfer columns
COPY_CHUNK = 1 << 20    # copy_stream's read size

T = TypeVar("T")


class Bar(Protocol):
    """What a caller gets from `progress()`."""

    def advance(self, n: float = 1, note: str | None = None) -> None: ...

    def update(self, completed: float, note: str | None = None) -> None: ...


def style(stream: IO[str] | None = None) -> str:
    """'rich' on a terminal, 'plain' otherwise; $GPU_MEMSAFETY_PROGRESS overrides (an unknown value is an error)."""
    chosen = os.environ.get(ENV, "").strip().lower()
    if chosen:
        if chosen not in STYLES:
            raise ValueError(f"{ENV}={chosen!r}: expected one of {', '.join(STYLES)}")
        return chosen
    stream = stream if stream is not None else sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):   # a closed or replaced stream
        tty = False
    return "rich" if tty else "plain"


def amount(value: float, unit: str) -> str:
    """`value` in its unit, bytes as B/KiB/MiB/GiB."""
    if unit != BYTES:
        return f"{value:g}" + (f" {unit}" if unit else "")
    for name, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:.1f} {name}"
    return f"{value:g} B"


class PlainBar:
    """Plain lines for logs: a start line, one line per PLAIN_STEPS-th of the total, and an end line."""

    def __init__(self, description: str, total: float | None, unit: str, stream: IO[str],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.description, self.total, self.unit, self.stream = description, total, unit, stream
        self.completed = 0.0
        self.note: str | None = None
        self._clock = clock
        self._started = self._now()
        self._last_step = 0
        self._last_time = self._started

    def _now(self) -> float:
        return self._clock()

    def line(self, state: str = "") -> str:
        if self.total:
            pct = 100.0 * self.completed / self.total
            done = amount(self.completed, self.unit if self.unit == BYTES else "")
            text = f"{self.description}: {done} of {amount(self.total, self.unit)} ({pct:.0f}%)"
        else:
            text = f"{self.description}: {amount(self.completed, self.unit)}"
        text += f" in {self._now() - self._started:.1f} s"
        if self.note:
            text += f", {self.note}"
        return text + (f" {state}" if state else "")

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def start(self) -> None:
        total = f" ({amount(self.total, self.unit)})" if self.total else ""
        self._print(f"{self.description}: started{total}")

    def advance(self, n: float = 1, note: str | None = None) -> None:
        self.update(self.completed + n, note)

    def update(self, completed: float, note: str | None = None) -> None:
        self.completed = completed
        if note is not None:
            self.note = note
        if self.total:
            step = int(PLAIN_STEPS * min(self.completed, self.total) / self.total)
            if step > self._last_step and self.completed < self.total:
                self._last_step = step
                self._print(self.line())
        elif self._now() - self._last_time >= PLAIN_EVERY_S:
            self._last_time = self._now()
            self._print(self.line())

    def finish(self, error: BaseException | None) -> None:
        if error is None:
            self._print(self.line("done"))
        else:
            self._print(self.line(f"stopped ({type(error).__name__})"))


class RichBar:
    """A rich bar on a terminal; left on screen when it ends so the last state stays readable. Bars opened
    while another is live (a bench part and its cases) share that one display, since rich draws one at a time."""

    _live: list[Any] = []        # [rich Progress, bars open on it]

    def __init__(self, description: str, total: float | None, unit: str, stream: IO[str]) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, Progress, SpinnerColumn,
                                   TaskProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)
        if not self._live:
            counts = (DownloadColumn(), TransferSpeedColumn()) if unit == BYTES else (MofNCompleteColumn(),)
            shown = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
                             *counts, TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[note]}"),
                             console=Console(file=stream))
            self._live[:] = [shown, 0]
        self.progress = self._live[0]
        self.task = self.progress.add_task(description, total=total, note="")
        self.description = description

    def start(self) -> None:
        if self._live[1] == 0:
            self.progress.start()
        self._live[1] += 1

    def advance(self, n: float = 1, note: str | None = None) -> None:
        self.progress.update(self.task, advance=n, **({"note": note} if note is not None else {}))

    def update(self, completed: float, note: str | None = None) -> None:
        self.progress.update(self.task, completed=completed, **({"note": note} if note is not None else {}))

    def finish(self, error: BaseException | None) -> None:
        if error is not None:
            self.progress.update(self.task, description=f"{self.description} [stopped: {type(error).__name__}]")
        self._live[1] -= 1
        if self._live[1] == 0:
            self.progress.stop()
            self._live.clear()


class NoBar:
    def advance(self, n: float = 1, note: str | None = None) -> None:
        pass

    def update(self, completed: float, note: str | None = None) -> None:
        pass


@contextmanager
def progress(description: str, total: float | None = None, unit: str = "",
             stream: IO[str] | None = None) -> Iterator[Bar]:
    """A bar (terminal) or plain lines (anything else) for one step; `total=None` when it is not known."""
    out = stream if stream is not None else sys.stderr
    kind = style(out)
    if kind == "off":
        yield NoBar()
        return
    bar: PlainBar | RichBar
    if kind == "rich":
        try:
            bar = RichBar(description, total, unit, out)
        except ImportError:   # rich is a pinned dependency; without it, plain lines rather than nothing
            bar = PlainBar(description, total, unit, out)
    else:
        bar = PlainBar(description, total, unit, out)
    bar.start()
    try:
        yield bar
    except BaseException as exc:
        bar.finish(exc)
        raise
    bar.finish(None)


def track(items: Iterable[T], description: str, total: int | None = None, unit: str = "",
          stream: IO[str] | None = None) -> Iterator[T]:
    """Yield `items`, advancing a bar by one for each."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with progress(description, total, unit, stream) as bar:
        for item in items:
            yield item
            bar.advance(1)


@contextmanager
def watch(description: str, total: float | None, count: Callable[[], float], unit: str = "",
          interval: float = 0.5, stream: IO[str] | None = None) -> Iterator[Bar]:
    """A bar for work another process does: `count()` (e.g. result files written so far) is polled every
    `interval` seconds while the block runs, and once more at its end. A count that cannot be read yet
    (a file being written) is skipped until the next poll."""
    with progress(description, total, unit, stream) as bar:
        stop = threading.Event()

        def poll() -> None:
            while not stop.wait(interval):
                _update(bar, count)

        thread = threading.Thread(target=poll, name="progress-watch", daemon=True)
        thread.start()
        try:
            yield bar
        finally:
            stop.set()
            thread.join()
            _update(bar, count)


def _update(bar: Bar, count: Callable[[], float]) -> None:
    try:
        bar.update(count())
    except (OSError, ValueError):
        pass


def copy_stream(src: BinaryIO, dst: BinaryIO, description: str, total: int | None = None,
                stream: IO[str] | None = None) -> int:
    """Copy bytes from `src` to `dst` (e.g. an HTTP response into a file) with a bar; returns bytes copied.
    `total` (e.g. Content-Length) gives a percentage; a copy that ends short of it raises OSError."""
    copied = 0
    with progress(description, total, BYTES, stream) as bar:
        while chunk := src.read(COPY_CHUNK):
            dst.write(chunk)
            copied += len(chunk)
            bar.advance(len(chunk))
        if total is not None and copied != total:
            raise OSError(f"{description}: got {copied} bytes, expected {total}")
    return copied
