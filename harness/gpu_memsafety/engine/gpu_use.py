"""Who uses a GPU right now, so that one rerun can have it to itself.

Memcheck now and then ends a kernel and writes no record of the access that made it end it (records.lost_record).
On the H200 this happened only under load: 0-3 cases per full run at 8 and 16 workers. Each such case is rerun in a
process of its own, and at 8 workers that rerun always found the record. At 16 workers, run 38 lost the record in
that rerun too: `unpadded-tkA-sweep-K2752`, rerun at a load average of 15.2 on 16 cores. That case was unresolved
and failed the run. A third run has the GPU to itself: no other process of ours runs on it meanwhile (memcheck's batch
rule, Unit.batch_rule, says which runs need that).

A readers-writer lock made of two `flock`s per GPU, in a per-user folder of the temporary directory, so that every
run of the harness on this machine takes part:
- every worker process of ours holds the use lock shared while it runs (`using(..., exclusive=False)`);
- a run that must be alone takes the gate exclusively first. New processes then wait at the gate, which gives the
  lone run precedence: flock does not queue, and at 16 workers some process is nearly always running. It then
  takes the use lock exclusively, once the processes already running have ended.
Waits are bounded. A process that waited too long runs anyway, and the returned Held says so: the lone run's record
names it, and its verdict never claims it ran alone. A hung process therefore delays the others by `wait_s` at most,
never for good. The kernel drops a lock when its holder dies, however it dies.
"""
from __future__ import annotations

import errno
import fcntl
import os
import re
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

DIR_ENV = "GPU_MEMSAFETY_GPU_USE_DIR"   # where the lock files go (tests; default: a per-user temporary folder)
POLL_S = 0.05
# How long an ordinary process waits for a lone run to end before it runs anyway (a lone run is one case: seconds).
SHARED_WAIT_S = 300.0


@dataclass(frozen=True)
class Held:
    exclusive: bool        # asked to be alone on the GPU
    alone: bool            # it was: every other process of ours waited (for exclusive: the lock was got)
    waited_s: float
    gpu: str = ""

    def to_json(self) -> dict[str, object]:
        return {"gpu": self.gpu, "exclusive": self.exclusive, "alone": self.alone, "waited_s": round(self.waited_s, 2)}


def lock_dir() -> Path:
    return Path(os.environ.get(DIR_ENV) or Path(tempfile.gettempdir()) / f"gpu-memsafety-{os.getuid()}" / "gpu-use")


def _paths(gpu: str) -> tuple[Path, Path]:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", gpu) or "default"
    folder = lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}.gate", folder / f"{name}.use"


def _lock(fd: int, how: int, deadline: float) -> bool:
    """flock `how` on fd, polling until `deadline` (time.monotonic); whether it was got."""
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


@contextmanager
def using(gpu: str | None, *, exclusive: bool, wait_s: float = SHARED_WAIT_S) -> Iterator[Held]:
    """Hold `gpu` (its UUID; None: no GPU, nothing to share) for one process's run: shared, or alone."""
    if not gpu:
        yield Held(exclusive, False, 0.0)
        return
    gate_path, use_path = _paths(gpu)
    gate = os.open(gate_path, os.O_RDWR | os.O_CREAT, 0o644)
    use = os.open(use_path, os.O_RDWR | os.O_CREAT, 0o644)
    start = time.monotonic()
    deadline = start + wait_s
    try:
        if exclusive:
            got = _lock(gate, fcntl.LOCK_EX, deadline) and _lock(use, fcntl.LOCK_EX, deadline)
            if not got:
                fcntl.flock(gate, fcntl.LOCK_UN)     # running anyway, beside the others: they need not wait for it
        else:
            # past the gate (a lone run waiting or running holds it), then the use lock beside the others
            passed = _lock(gate, fcntl.LOCK_SH, deadline)
            got = _lock(use, fcntl.LOCK_SH, deadline) if passed else False
            if passed:
                fcntl.flock(gate, fcntl.LOCK_UN)
        yield Held(exclusive, got if exclusive else False, time.monotonic() - start, gpu)
    finally:
        os.close(use)           # closing drops the locks
        os.close(gate)
