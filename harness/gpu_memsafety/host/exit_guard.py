"""A test that ends the pytest process itself (os._exit, an exec) in a mode whose tests run in that process.

In markers mode the tests run in the process pytest runs: a test that calls `os._exit(0)` ends it at once, without
pytest's session finish, its exit status or any report; the shell sees 0 and the job is green while the reports on
disk still say "did not finish". Nothing after the call can run in Python (no atexit, no finally), so the guard sits
before it: while a test runs, `os._exit` / `posix._exit` and the exec family (`os.execv`, `os.execve`, and through
them execl/execlp/execvp/...) are replaced by a function that

1. calls `on_end(test, how)`, with which the controller writes the reports (status interrupted, the reason naming
   the test, the results of the tests that finished) and pytest's output capture is suspended,
2. says on stderr which test ended the process and how (`os._exit(0)`),
3. ends the process with the code asked for, or 1 (pytest's "tests failed") where that was 0 or an exec: a run
   that did not finish never exits 0.

Between tests (pytest's own code, xdist's), and in a child process a test forked (multiprocessing's fork start
method ends its children with os._exit), the real functions are called unchanged. What no Python-level guard can
catch is a C extension calling `_exit` or `exit` directly: the reports then stay "did not finish" (their status
interrupted, which every command that judges a report reads), and the exit status is decided outside this process
(host/watchdog.py: the child's status, or 1 where it was 0).
"""
from __future__ import annotations

import os
import posix
import sys
from typing import Any, Callable

# The status a run that a test ended exits with when that test asked for 0 (pytest.ExitCode.TESTS_FAILED).
FORCED_CODE = 1
_EXITS = ("_exit",)
_EXECS = ("execv", "execve")


class ExitGuard:
    """Installed once per process; `running(nodeid)` / `running(None)` around each test."""

    def __init__(self, on_end: Callable[[str, str], None]) -> None:
        self.on_end = on_end
        self.test: str | None = None
        self.pid = os.getpid()
        self.saved: list[tuple[Any, str, Any]] = []
        self.ending = False

    def running(self, nodeid: str | None) -> None:
        self.test, self.pid = nodeid, os.getpid()

    def _guarding(self) -> bool:
        """A test runs, in this process: a child a test forked (multiprocessing's fork ends with os._exit) ends
        itself, not the run."""
        return self.test is not None and os.getpid() == self.pid

    def install(self) -> None:
        if self.saved:
            return
        # one wrapper per function, put in both os and posix (os's are posix's)
        wrappers = {name: self._exit_wrapper(getattr(posix, name)) for name in _EXITS}
        wrappers.update({name: self._exec_wrapper(name, getattr(posix, name)) for name in _EXECS if hasattr(posix, name)})
        for module in (os, posix):
            for name, wrapper in wrappers.items():
                self._patch(module, name, wrapper)

    def uninstall(self) -> None:
        for module, name, original in reversed(self.saved):
            setattr(module, name, original)
        self.saved.clear()

    def _patch(self, module: Any, name: str, replacement: Any) -> None:
        self.saved.append((module, name, getattr(module, name)))
        setattr(module, name, replacement)

    def _end(self, how: str, code: int) -> None:
        """Report the test that ends the process, then end it with a non-zero code where `code` is 0."""
        real_exit = next(o for m, n, o in self.saved if m is posix and n == "_exit") if self.saved else posix._exit
        test, self.test = self.test, None
        if not self.ending and test is not None:
            self.ending = True
            forced = code if code != 0 else FORCED_CODE
            message = (f"\ngpu-memsafety: test {test} ended the pytest process with {how}: the run did not finish "
                       f"(the tests after it never ran); exit code {forced}{' instead of 0' if code == 0 else ''}\n")
            try:
                self.on_end(test, how)
            except BaseException as exc:   # noqa: BLE001 - the process ends either way; say what was lost
                try:
                    os.write(2, f"gpu-memsafety: the reports could not be written ({exc!r})\n".encode("utf-8", "replace"))
                except OSError:
                    pass
            try:
                os.write(2, message.encode("utf-8", "replace"))
            except OSError:
                pass
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:  # noqa: BLE001 - a closed stream must not keep the process alive
                pass
            real_exit(forced)
        real_exit(code)

    def _exit_wrapper(self, original: Callable[[int], Any]) -> Callable[..., Any]:
        def _exit(code: int = 0, *args: Any) -> Any:
            if not self._guarding():
                return original(code, *args)
            try:
                value = int(code)
            except (TypeError, ValueError):
                value = FORCED_CODE
            self._end(f"os._exit({code!r})", value)
        return _exit

    def _exec_wrapper(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def execv(path: Any, *args: Any) -> Any:
            if not self._guarding():
                return original(path, *args)
            self._end(f"os.{name}({os.fsdecode(path) if isinstance(path, (str, bytes)) else path!r}, ...) (the "
                      f"process replaced by another program)", FORCED_CODE)
        return execv
