"""The stop signals at their default action in a child process the tests signal, whatever the test run inherited.

A process that starts with a signal ignored keeps it ignored: Python installs no KeyboardInterrupt handler for an
ignored SIGINT, and the harness leaves an ignored SIGTERM or SIGHUP alone (util/signals.py: `nohup` means it). A
test run started in the background of a non-interactive shell inherits SIGINT ignored, one under `nohup` SIGHUP
ignored; every process it starts would too, and a test that sends that signal would wait for an end that never
comes (fresh-clone runs: library-SIGINT under `&`, library-SIGHUP under `nohup`). Pass as Popen's preexec_fn.
"""
from __future__ import annotations

import signal

from gpu_memsafety.util.signals import STOP_SIGNALS as _HARNESS_STOP_SIGNALS

STOP_SIGNALS = (signal.SIGINT, *_HARNESS_STOP_SIGNALS)


def default_stop_signals() -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
