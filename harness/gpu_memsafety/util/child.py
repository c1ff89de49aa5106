"""The one child supervisor: start a child in a process group of its own, stop it at a deadline, collect it.

Why this exists: the harness starts children in six places (a scenario batch's worker, a host suite's batch, the
scenario-vetting child, compute-sanitizer's version probe, pip for upstream code, the bench's pytest runs), and a
child that outlives its step holds a GPU, a port or a lock. Each child here leads a process group of its own, so
one kill reaches whatever it started (a sanitizer's target, a shell's child); a kill is SIGKILL to that group and
then at most GRACE_S to collect it. Collection waits on the pid itself (os.waitpid), never through Popen.wait's
lock: a KeyboardInterrupt that lands inside Popen.wait(timeout) can leave that lock held, and every later wait then
blocks for good (tests/util/test_stop_signals.py). A `mark` (an environment variable every descendant inherits) lets
`util.procs.sweep` end what left the group (setsid, a daemon) once the child is done.

tests/util/test_child.py checks that no other module starts a child with subprocess.Popen or kills a process group.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Callable, Iterator, Mapping, Sequence

from gpu_memsafety.util import procs

# How long a child, once killed, may take to die before we stop waiting for it (one stuck in the GPU driver can take
# a while; the kill stands, only the wait ends, and the exit code is then unknown: None).
GRACE_S = 5.0
# How much of a child's output an Exit keeps (the end: where a failure says why).
TAIL_LINES = 40
# How often a waiting loop looks at the child.
POLL_S = 0.05


@dataclass
class Exit:
    """How a supervised child ended."""

    returncode: int | None          # None: not collected within GRACE_S of its kill
    timed_out: bool                 # killed at its deadline
    tail: str                       # the last TAIL_LINES lines of its output ("" when it went elsewhere)
    wall_s: float
    left_behind: list[procs.ProcessRecord] = field(default_factory=list)   # swept after it ended (`mark`)


class Child:
    """One started child, leading its own process group. Use it as a context manager: leaving the block by an
    exception (Ctrl-C, a stop signal raised as one) kills the group and collects the child before it propagates;
    leaving it in any way sweeps what carries `mark`."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
                 log: Path | None = None, log_stdout: bool = True, pipe: bool = False,
                 stdin: int | IO[bytes] | None = subprocess.DEVNULL, mark: tuple[str, str] | None = None,
                 before_exec: Callable[[], None] | None = None) -> None:
        """`log`: stdout and stderr into this file (`log_stdout=False`: stderr only, stdout to /dev/null); `pipe`:
        both into a pipe read by `lines()`; neither: inherited. `mark`: (key, value) set in the child's environment,
        and what `util.procs.sweep` ends after it."""
        self.started = time.monotonic()
        self.mark = mark
        self.log = log
        self._before = procs.snapshot() if mark is not None else None
        if mark is not None:
            procs.subreaper()           # an orphan below the child is handed to us, so the sweep can find it
            env = {**(os.environ if env is None else env), mark[0]: mark[1]}
        self._out: IO[bytes] | None = open(log, "wb") if log is not None else None
        try:
            self.proc = subprocess.Popen(
                list(argv), env=dict(env) if env is not None else None, cwd=cwd, stdin=stdin,
                stdout=subprocess.PIPE if pipe else self._out if log_stdout else subprocess.DEVNULL,
                stderr=subprocess.STDOUT if (pipe or (log is not None and log_stdout)) else self._out,
                start_new_session=True, preexec_fn=before_exec)
        except BaseException:
            self._close()
            raise
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.timed_out = False
        self.left_behind: list[procs.ProcessRecord] = []

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout_s: float | None) -> bool:
        """Wait for the child to end, at most `timeout_s` (None: for good); whether it ended. An exception while
        waiting kills it first."""
        try:
            self.proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    def lines(self) -> Iterator[str]:
        """The child's output line by line (`pipe=True`), the last TAIL_LINES kept for `tail()`."""
        assert self.proc.stdout is not None, "Child(pipe=True) has a pipe to read"
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace")
            self._tail.append(line.rstrip("\n"))
            yield line

    def kill(self, *, timed_out: bool = False) -> int | None:
        """SIGKILL to the child's process group (the child itself where the group is gone), then collect it within
        GRACE_S; its exit code (None when it did not die in time). `timed_out`: the kill is the deadline's."""
        self.timed_out = self.timed_out or timed_out
        kill_group(self.proc.pid)
        if self.proc.returncode is None:
            try:
                self.proc.kill()
            except OSError:
                pass
        return self.collect(GRACE_S)

    def stop(self) -> int | None:
        """Ask the child alone to end (SIGTERM: a pytest run then stops its workers and writes its reports), give it
        GRACE_S, then kill its group as `kill` does; its exit code."""
        if self.proc.poll() is None:
            try:
                self.proc.terminate()
            except OSError:
                pass
            self.collect(GRACE_S)
        return self.kill()

    def collect(self, timeout_s: float | None = None) -> int | None:
        """The exit code of a child that ended (or was killed), waiting at most `timeout_s` on its pid, without
        Popen's wait lock (the module's docstring says why)."""
        proc = self.proc
        give_up = None if timeout_s is None else time.monotonic() + timeout_s
        while proc.returncode is None:
            try:
                pid, status = os.waitpid(proc.pid, 0 if give_up is None else os.WNOHANG)
            except ChildProcessError:       # collected already (by Popen itself, or a waitpid elsewhere)
                return proc.returncode
            except InterruptedError:
                continue
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
            elif give_up is not None and time.monotonic() > give_up:
                break
            else:
                time.sleep(0.01)
        return proc.returncode

    def tail(self) -> str:
        """The end of the child's output: the log file's last lines, or the pipe's last lines read."""
        if self.log is not None:
            try:
                text = self.log.read_bytes()[-64 * 1024:].decode("utf-8", "replace")
            except OSError:
                return ""
            return "\n".join(text.splitlines()[-TAIL_LINES:])
        return "\n".join(self._tail)

    def exit(self) -> Exit:
        return Exit(self.proc.returncode, self.timed_out, self.tail(), time.monotonic() - self.started,
                    self.left_behind)

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if exc is not None:
                self.kill()
            self.sweep()
        finally:
            self._close()

    def sweep(self) -> list[procs.ProcessRecord]:
        """After the child ended: what is left in its process group and, with a `mark`, every orphan handed to us
        since it started that carries the mark, killed and named (util.procs.sweep). Once."""
        if self._before is not None and self.mark is not None:
            self.left_behind = procs.sweep(self.proc.pid, self._before, *self.mark)
            self._before = None
        return self.left_behind

    def _close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
        if getattr(self, "proc", None) is not None and self.proc.stdout is not None:
            self.proc.stdout.close()


def run(argv: Sequence[str], *, deadline_s: float | None, **start: Any) -> Exit:
    """Start `argv` (Child's keywords), wait at most `deadline_s` (None: for good), kill its group at the deadline;
    how it ended. An exception while waiting (Ctrl-C) kills the group and propagates."""
    with Child(argv, **start) as child:
        if not child.wait(deadline_s):
            child.kill(timed_out=True)
        child.sweep()
        return child.exit()


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Signal a whole process group (a supervised child's: it leads one); False when there is none to signal."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def leave_with_own_group() -> None:
    """From inside a supervised child (a worker whose supervisor is gone): kill its own process group, itself and
    whatever it started, when it leads a session of its own as this module starts it."""
    if os.getpgrp() == os.getsid(0):
        kill_group(os.getpgrp())

