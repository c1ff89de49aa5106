"""Processes that code under test started and must not outlive the step that started them: list, kill, reap.

Why this exists: a scenario's adapter (or a scenario file at import) may start a process, on purpose or through
a library, and a process that outlives its case holds a GPU, a port or a lock, or keeps writing into the run's
files after the report said the run was over. The harness cannot stop such code from starting processes, but
it can find every one of them and end it: a process made a *child subreaper* (Linux prctl
PR_SET_CHILD_SUBREAPER) becomes the parent of every orphan below it, so even a daemon that forked twice and
left its session is still one of its children. `stray_children` lists them, `reap` kills and waits for them
and says what they were, so a case's details can name them.

Linux only (/proc, prctl); elsewhere nothing is found and nothing is claimed (`subreaper` returns False).
"""
from __future__ import annotations

import ctypes
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, TypedDict

PR_SET_CHILD_SUBREAPER = 36
# How many rounds `reap` makes: killing a process can hand its own children (reparented) to us; a tree deeper
# than this is left to the process group kill that follows every worker.
REAP_ROUNDS = 16
# A command line shown in a case's details is cut here (an argv can be megabytes).
COMMAND_SHOWN = 200
# How long a killed process may take to die before we stop waiting for it (one stuck in the GPU driver can take
# a while; the kill stands, only the wait ends).
WAIT_S = 5.0


class ProcessRecord(TypedDict):
    pid: int
    command: str


@dataclass(frozen=True)
class Snapshot:
    """This process's children at one moment, and the moment (clock ticks since boot, as /proc counts)."""

    pids: frozenset[int]
    ticks: int


def snapshot() -> Snapshot:
    return Snapshot(frozenset(children()), now_ticks())


def now_ticks() -> int:
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    return int(uptime * os.sysconf("SC_CLK_TCK"))


def start_ticks(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (/proc/PID/stat field 22); None when it is gone."""
    stat = _stat(pid)
    try:
        return int(stat[19]) if stat is not None else None
    except (IndexError, ValueError):
        return None


def _started_since(pid: int, ticks: int) -> bool:
    started = start_ticks(pid)
    return started is not None and started >= ticks - 1     # one tick of slack: the clock's resolution


def carries(pid: int, key: str, value: str) -> bool:
    """Whether `pid`'s environment has key=value (what every descendant of a worker inherits, unless it clears it)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{key}={value}".encode() in raw.split(b"\0")


def subreaper() -> bool:
    """Make this process the reaper of orphans below it; False where the kernel (or the platform) says no."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def children(pid: int | None = None) -> list[int]:
    """The live (not zombie) children of `pid` (default: this process), from /proc."""
    pid = os.getpid() if pid is None else pid
    found = _children_files(pid)
    if found is None:
        found = [p for p, parent in _parents().items() if parent == pid]
    return sorted(p for p in set(found) if _alive(p))


def _children_files(pid: int) -> list[int] | None:
    """/proc/PID/task/TID/children of every thread; None when the kernel lacks them (CONFIG_PROC_CHILDREN)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tasks:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/children").read_text()
        except FileNotFoundError:
            return None
        except OSError:
            continue
        found += [int(p) for p in text.split()]
    return found


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                parents[int(entry)] = int(stat[1])
    return parents


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name: state, ppid, pgrp, session, ..."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def running() -> list[int]:
    """Every live process this one can see in /proc."""
    pids = [int(e) for e in (os.listdir("/proc") if os.path.isdir("/proc") else []) if e.isdigit()]
    return sorted(p for p in pids if _alive(p))


def group_members(pgid: int) -> list[int]:
    """Live processes whose process group is `pgid` (what a worker's group kill would end)."""
    members = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[0] not in ("Z", "X") and int(stat[2]) == pgid:
                members.append(int(entry))
    return sorted(members)


def describe(pid: int) -> ProcessRecord:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        raw = b""
    command = raw.replace(b"\0", b" ").decode(errors="replace").strip() or "?"
    if len(command) > COMMAND_SHOWN:
        command = command[:COMMAND_SHOWN] + "..."
    return {"pid": pid, "command": command}


def stray_children(before: Snapshot) -> list[int]:
    """This process's live children that were not among `before` and started after it was taken: what the step
    since `before` started (or what was handed to us as its orphans). An unrelated orphan of something older,
    handed to a subreaper meanwhile, started before: it is not the step's."""
    return [p for p in children() if p not in before.pids and _started_since(p, before.ticks)]


def sweep(pgid: int, before: Snapshot, key: str, value: str) -> list[ProcessRecord]:
    """After a child that led process group `pgid` ended (or was killed): whatever is still in its group (what it
    started), and every orphan handed to this process (a subreaper) since `before` that carries `key=value` in its
    environment (set in the child's: its descendants inherit it, a daemon that left the group included), killed and
    named. Nothing else this process has as a child is touched."""
    ours = [p for p in stray_children(before) if carries(p, key, value)]
    return reap([*group_members(pgid), *ours])


def reap(pids: Iterable[int]) -> list[ProcessRecord]:
    """SIGKILL each of `pids` and everything below it, wait for those that are (or become) our children, and
    return what each was, first the ones named, then their descendants. Only the named processes are waited
    for, never "any child": a Popen elsewhere in this process must still get its own child's exit status."""
    records: list[ProcessRecord] = []
    seen: set[int] = set()
    todo = list(pids)
    began = now_ticks()
    for _ in range(REAP_ROUNDS):
        tree = [p for p in _with_descendants(todo) if p not in seen]
        if not tree:
            break
        for pid in tree:
            seen.add(pid)
            records.append(describe(pid))
        for pid in tree:
            _kill(pid)
        for pid in tree:
            _wait(pid)
        # what the tree forked while it was being killed, handed to us (a subreaper) as orphans; never an older child
        todo = [p for p in children() if p not in seen and _started_since(p, began)]
    return records


def _with_descendants(pids: Iterable[int]) -> list[int]:
    out: list[int] = []
    stack = list(pids)
    while stack:
        pid = stack.pop(0)
        if pid in out or not _alive(pid):
            continue
        out.append(pid)
        stack.extend(children(pid))
    return out


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait(pid: int, timeout_s: float = WAIT_S) -> None:
    """Collect `pid` if it is our child (a process stuck in the kernel is given up on after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return                      # not our child: its own parent (or init) collects it
        except InterruptedError:
            continue
        if done or time.monotonic() > deadline:
            return
        time.sleep(0.01)

