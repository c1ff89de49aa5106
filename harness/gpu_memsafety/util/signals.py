"""The signals that stop a run (SIGINT, SIGTERM, SIGHUP, SIGQUIT and every other catchable one: STOP_SIGNALS) end it
through Python's cleanup, never around it.

Why this exists: every child process the harness starts (a worker, a vetting child, a host test's batch, a bench
run) runs in a session of its own, so that its whole process group (a sanitizer and its target, what a test
started) can be killed at once; and temporary folders are removed by `with`/`finally`. Both happen only when the
parent ends through an exception. SIGINT raises KeyboardInterrupt by default; SIGTERM (a cancelled CI job,
`kill`, a time limit), SIGHUP (a closed terminal or ssh session), SIGQUIT (Ctrl-\\), SIGUSR1/2, SIGALRM and the rest
end a Python process at once by default: no `finally` runs, the children in their own sessions live on and the
temporary folders stay. Here they raise
`Stopped`, a KeyboardInterrupt, so every path that cleans up after Ctrl-C cleans up after them too.

`stop_as_interrupt()` installs that for the whole process (the command line's main, the pytest plugin's configure);
`stopping()` for one block (around each child a function waits for, so that a library caller's process is covered
too). A handler someone else installed is left alone, and so is an ignored signal (`nohup`). Only the main thread can
set handlers: elsewhere both do nothing.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

# The signals that stop a run besides SIGINT (already KeyboardInterrupt), in the order they are installed: every
# signal a process can catch whose default action ends it, and that arrives from outside (kill, a terminal, a time
# limit), not from a fault of the code itself (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS: the
# faulting instruction or abort() would only run again). SIGKILL and SIGSTOP cannot be caught; SIGPIPE and SIGXFSZ
# Python ignores already (an ignored signal is left alone).
_STOP_NAMES = ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGXCPU",
               "SIGIO", "SIGPWR", "SIGSTKFLT")
_REALTIME = (tuple(range(signal.SIGRTMIN, signal.SIGRTMAX + 1))
             if hasattr(signal, "SIGRTMIN") and hasattr(signal, "SIGRTMAX") else ())
STOP_SIGNALS = tuple(dict.fromkeys([*(getattr(signal, n) for n in _STOP_NAMES if hasattr(signal, n)), *_REALTIME]))
# The names of the signals that stopped this process through `Stopped`, in order (for reports: "interrupted by").
RECEIVED: list[str] = []


def signal_name(signum: int) -> str:
    """SIGTERM, ..., SIGRTMIN+3 (the real-time signals between SIGRTMIN and SIGRTMAX have no name of their own)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        low = getattr(signal, "SIGRTMIN", None)
        return f"SIGRTMIN+{signum - low}" if low is not None and signum > low else f"signal {signum}"


class Stopped(KeyboardInterrupt):
    """A stop signal, raised where the main thread was: cleans up like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        self.signame = signal_name(signum)
        super().__init__(f"signal {self.signame}")


def _raise(signum: int, frame: Any) -> None:
    RECEIVED.append(signal_name(signum))
    raise Stopped(signum)


def _installable(signum: int) -> bool:
    """Ours may go in: the default action is in place (not ignored, no handler of someone else's)."""
    try:
        return signal.getsignal(signum) in (signal.SIG_DFL, None)
    except (ValueError, OSError):
        return False


def stop_as_interrupt() -> list[int]:
    """For the rest of this process, every STOP_SIGNALS signal raises Stopped (where their default action was in place);
    the signals it took over."""
    if threading.current_thread() is not threading.main_thread():
        return []
    taken = []
    for signum in STOP_SIGNALS:
        if _installable(signum):
            signal.signal(signum, _raise)
            taken.append(signum)
    return taken


@contextlib.contextmanager
def stopping() -> Iterator[None]:
    """Within the block, every STOP_SIGNALS signal raises Stopped (where their default action was in place); restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = []
    for signum in STOP_SIGNALS:
        if _installable(signum):
            saved.append((signum, signal.signal(signum, _raise)))
    try:
        yield
    finally:
        for signum, previous in reversed(saved):
            signal.signal(signum, previous)
