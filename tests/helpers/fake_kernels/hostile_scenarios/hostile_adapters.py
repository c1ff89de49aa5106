"""Adapters that leave processes running (tests/scenario/test_scenario_isolation.py). Each process carries the marker
in $HOSTILE_MARKER on its command line, so the test can look for survivors."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

MARKER_ENV = "HOSTILE_MARKER"


def _sleeper(tag: str) -> list[str]:
    return [sys.executable, "-c", "import time, sys; time.sleep(300)", f"{os.environ.get(MARKER_ENV, 'hostile')}-{tag}"]


def _daemon(tag: str) -> None:
    """Fork twice, the grandchild in a session of its own: no process group kill reaches it, its parent is gone.
    Returns once the grandchild runs its own command: the pipe's write end closes on exec (os.pipe's descriptors are
    close-on-exec), so the read sees end-of-file only after the exec. Without that wait, a short case could end
    while the grandchild was still a copy of the worker, and be reaped under the worker's command line."""
    argv = _sleeper(tag)
    ready, written = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready)
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execv(argv[0], argv)
        os._exit(0)
    os.close(written)
    os.read(ready, 1)
    os.close(ready)
    os.waitpid(pid, 0)


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo

    if case.variant == "child":
        subprocess.Popen(_sleeper("child"))
    if case.variant in ("daemon", "daemon_then_die"):
        _daemon(case.variant)
    if case.variant == "daemon_then_die":
        os._exit(3)
    dst = ctx.tensor("dst", (case.params["n"],), torch.uint8, watch=True)
    dst.fill_(1)
    return RunInfo(kernel="fake_copy", outputs={"dst": dst})
