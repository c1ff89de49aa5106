"""The exit code of `pytest --gpu-memsafety` decided outside the process that runs the tests.

Why this exists: a guarded suite's tests (and its conftest.py files, its plugins, threads they start) run in the pytest
process, and code there can end that process whenever it likes, with the status it likes: a daemon thread calling
`os._exit(0)` right after the last test (before the reports are final), `atexit.register(os._exit, 0)` after pytest
returned 1 over a FAILED report, an exec, a signal. host/exit_guard.py names a test that does so while it runs; no
code inside the process can stop what runs after pytest returns. So the process that pytest started becomes a
watchdog before any of that code is imported (`start`, at pytest_load_initial_conftests): it forks, the child runs the
whole pytest session, and the watchdog only waits for it and decides the exit status:

- the child's session ended normally: pytest's own status (the report's story: host/Controller sets it), sent to the
  watchdog through a pipe the moment pytest decided it (`Verdict`, at the end of pytest_cmdline_main), before atexit
  handlers or interpreter shutdown can run. The status is that one, or the child's own exit status when pytest's was
  0 and the child's is not (a crash at shutdown is never hidden);
- the child ended before pytest decided (os._exit, an exec, a signal, a crash, at any moment): the child's status, and
  1 where that was 0 (pytest's "tests failed"), with a line on stderr saying so; the reports on disk then still say
  the run did not finish (status interrupted) or what was judged before the end.

The child runs in a process group of its own, given the terminal's foreground when the watchdog had it, so that a
terminal's Ctrl-C reaches it once; a signal sent to the watchdog (a CI job cancelled: SIGINT, SIGTERM, ...) is passed
on to the child, which stops as it would have; if the watchdog itself is killed, the child gets SIGTERM (Linux's
parent-death signal) and stops with its cleanup. Not started in an xdist worker, in a child the run starts, or
inside another pytest's test (PYTEST_CURRENT_TEST: pytester's in-process runs).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from typing import Any, Iterator

import pytest

from gpu_memsafety.util.signals import STOP_SIGNALS, signal_name

# The status of a run whose process ended with 0 before pytest decided its own (pytest.ExitCode.TESTS_FAILED).
FORCED_CODE = 1
PLUGIN_NAME = "gpu-memsafety-verdict"
_PR_SET_PDEATHSIG = 1


def wanted() -> bool:
    """This process is a run's own pytest (not an xdist worker, not inside another pytest's test) and can fork."""
    return (hasattr(os, "fork") and not os.environ.get("PYTEST_XDIST_WORKER")
            and not os.environ.get("PYTEST_CURRENT_TEST"))


def start(config: pytest.Config) -> None:
    """Fork. In the child (which runs the session) this returns, with the Verdict plugin registered; this process
    waits for the child and exits with the status decided (it never returns)."""
    read, write = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    foreground = _foreground()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _child_setup(parent, foreground)
        config.pluginmanager.register(Verdict(write), PLUGIN_NAME)
        return
    os.close(write)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)
    capture = config.pluginmanager.get_plugin("capturemanager")
    if capture is not None:           # this process writes to the real stderr, never into pytest's capture
        with contextlib.suppress(Exception):
            capture.suspend_global_capture(in_=True)
    os._exit(watch(pid, read, foreground))


class Verdict:
    """In the child: pytest's exit status, sent the moment pytest decided it (the end of pytest_cmdline_main)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @pytest.hookimpl(wrapper=True)
    def pytest_cmdline_main(self, config: pytest.Config) -> Iterator[Any]:
        status = yield
        self.send(int(status) if status is not None else 0)
        return status

    def send(self, status: int) -> None:
        with contextlib.suppress(OSError):
            os.write(self.fd, f"{status}\n".encode())
            os.close(self.fd)


def watch(pid: int, read: int, foreground: int | None) -> int:
    """Wait for the child, passing on every stop signal; the exit status of the run."""
    previous = {signum: signal.signal(signum, lambda s, f: _forward(pid, s)) for signum in (signal.SIGINT, *STOP_SIGNALS)
                if _catchable(signum)}
    try:
        status = _wait(pid)
    finally:
        for signum, handler in previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(signum, handler)
        if foreground is not None:
            _give_terminal(foreground, os.getpgrp())
    verdict = _read_verdict(read)
    return decide(verdict, status)


def decide(verdict: int | None, child_status: int) -> int:
    """The run's exit status from pytest's (None: the child ended before pytest decided) and the child's own."""
    if verdict is not None:
        return verdict if verdict != 0 else child_status
    code = child_status if child_status != 0 else FORCED_CODE
    _say(f"\ngpu-memsafety: the pytest process ended ({_how(child_status)}) before pytest decided the run's exit "
         f"status (os._exit, an exec or a signal in a test, a thread, a conftest.py or a plugin): the run did not "
         f"finish; the reports say what was judged before; exit status {code}"
         f"{' instead of 0' if child_status == 0 else ''}\n")
    return code


def _how(status: int) -> str:
    return f"signal {signal_name(status - 128)}" if status > 128 else f"exit status {status}"


def _wait(pid: int) -> int:
    while True:
        try:
            _, raw = os.waitpid(pid, 0)
        except ChildProcessError:
            return FORCED_CODE
        except InterruptedError:
            continue
        code = os.waitstatus_to_exitcode(raw)
        return 128 - code if code < 0 else code


def _read_verdict(read: int) -> int | None:
    os.set_blocking(read, False)
    try:
        data = os.read(read, 64)
    except OSError:
        return None
    finally:
        os.close(read)
    text = data.decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def _forward(pid: int, signum: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signum)


def _catchable(signum: int) -> bool:
    try:
        return signal.getsignal(signum) is not signal.SIG_IGN
    except (ValueError, OSError):
        return False


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, text.encode("utf-8", "replace"))


def _foreground() -> int | None:
    """This process's group when it has the terminal's foreground (stdin a terminal), else None."""
    try:
        if os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp():
            return os.getpgrp()
    except OSError:
        pass
    return None


def _give_terminal(to: int, own: int) -> None:
    """tcsetpgrp from a group that may be in the background: SIGTTOU ignored meanwhile, as shells do."""
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(0, to)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, previous)


def _child_setup(parent: int, foreground: int | None) -> None:
    """A group of its own (the terminal's foreground where the watchdog had it); SIGTERM when the watchdog dies."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    if foreground is not None:
        _give_terminal(os.getpgrp(), os.getpgrp())
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:        # the watchdog died before the parent-death signal was set
        os.kill(os.getpid(), signal.SIGTERM)
