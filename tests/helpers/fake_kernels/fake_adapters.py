"""Adapters that misbehave on purpose, for tests/engine/test_fault_injection.py (CPU only, no kernel at all).

Each variant of the `fake_faults` scenario picks one way for a case to go wrong inside the worker process:
hang forever, kill its own process or the pytest worker above it, raise, run out of memory, declare
itself unsupported, take a known time (`slow`), or never end after its result (`stuck_exit`); the others allocate
guarded buffers
like a real adapter and optionally plant a 1-byte overwrite past the end of `dst`.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpu_memsafety.errors import Unsupported

# Where the hanging adapter writes the pid of the child it starts (set by the test; inherited by the worker).
SLEEPER_PID_DIR = "FAKE_FAULTS_DIR"
SLOW_S = 0.1          # variant `slow`: seconds each run sleeps before its clean copy


def _hang() -> None:
    """Start a child that would outlive a careless kill, record its pid, then sleep forever."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    out = os.environ.get(SLEEPER_PID_DIR)
    if out:
        Path(out, "sleeper.pid").write_text(str(child.pid))
    while True:
        time.sleep(60)


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo

    variant, n = case.variant, case.params["n"]
    if variant == "hang":
        _hang()
    if variant == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if variant == "kill_pytest_worker":
        # Stands for the OOM killer taking the pytest-xdist worker: once per test run (a marker file), so
        # that the restarted worker can finish the remaining cases.
        marker = Path(os.environ.get(SLEEPER_PID_DIR, "."), "pytest-worker-killed")
        if not marker.exists():
            marker.write_text(str(os.getppid()))
            os.kill(os.getppid(), signal.SIGKILL)
            os._exit(1)
    if variant == "illegal_address":
        if ctx.device.type != "cuda":
            raise Unsupported("an illegal address needs a CUDA GPU; found none")
        _wild_store(ctx.tensor("dst", (n,), torch.uint8))
    if variant == "oom":
        # 1 EiB: a real allocation failure, CPU or GPU, whatever the machine's overcommit policy (past any address
        # space; 4 TiB was granted on the H200's host with overcommit, and filling its guards ran out the deadline)
        ctx.tensor("huge", (1 << 60,), torch.uint8)
    if variant == "raise":
        raise RuntimeError("planted adapter failure")
    if variant == "unsupported":
        raise Unsupported("needs a flux capacitor; found none")
    if variant in ("refused", "no_launch"):
        # A host-side refusal contract (as the real sglang kernel's, kernels/pre_dispatch/adapter.py): buffers
        # exist, nothing is launched; `no_launch` is the same without the refusal note, which memcheck can't pass.
        ctx.tensor("dst", (n,), torch.uint8, watch=True)
        notes = {"refused": "wrapper: buf row stride must be 16B-aligned"} if variant == "refused" else {}
        return RunInfo(kernel="fake_copy", launches=0, notes=notes)
    if variant == "far_write":
        # One buffer only, so that it is the nearest one to the far write the fake sanitizer reports.
        dst = ctx.tensor("dst", (n,), torch.uint8, watch=True)
        dst.fill_(3)
        return RunInfo(kernel="far_k", outputs={"dst": dst})
    if variant == "slow":
        time.sleep(SLOW_S)    # a clean case that takes a known wall time whatever the load (progress tests)
    if variant == "stuck_exit":
        # a clean case whose process never ends after its last result (an exit hook that hangs, as a sanitizer or
        # a library's teardown can)
        import atexit
        atexit.register(time.sleep, 600)
    src = ctx.tensor("src", (n,), torch.uint8, watch=True)
    dst = ctx.tensor("dst", (n,), torch.uint8)
    src.fill_(3)
    dst.copy_(src)
    if variant == "overwrite":
        buf = ctx.arena.buffers["dst"]
        buf.storage[buf.layout.front + n] = 0     # the first byte past dst's end
    return RunInfo(kernel="fake_copy", outputs={"dst": dst})


def _wild_store(dst: Any) -> None:
    """A Triton kernel that stores one byte 1 TiB past dst: an illegal address that ends the CUDA context."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def wild(ptr, offset):
        tl.store(ptr + offset, 1)

    wild[(1,)](dst, 1 << 40)
    torch.cuda.synchronize()
