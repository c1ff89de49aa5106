"""How much the trace may copy for one interpreted launch (detectors/trace_host.py), decided before it copies.

Why this exists: without a GPU the trace copies every CPU storage a Triton launch's tensors use into a mapping of
its own with guard bytes on either side. A suite's tensor can be as large as the machine allows, and the copy needs
as much again: under an address-space limit (RLIMIT_AS, a CI container's) a 4 GiB tensor's copy failed inside the
harness, the test failed with the harness's own error, and pytest then spent minutes rendering the storage in the
traceback. So a launch whose copies would pass COPY_MAX_BYTES, or the address space this process has left, is not
copied: it runs as a plain interpreted launch (under the fence, which still stops a stray access), and its test's
verdict says it was not checked and why, never clean.
"""
from __future__ import annotations

import resource
from pathlib import Path

# The most the trace copies for one launch (every storage of its tensors, with their guards): an interpreted
# kernel over more than this would take hours on a CPU anyway, and the copy doubles the memory it needs.
COPY_MAX_BYTES = 2 << 30


def address_space_left() -> int | None:
    """Bytes this process may still map under RLIMIT_AS (None: no limit, or it cannot be read)."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ValueError, OSError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        status = Path("/proc/self/status").read_text()
        used = next(int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmSize:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return max(0, soft - used)


def refusal(copy_bytes: int, guard_bytes: int, copies: int) -> str:
    """Why a launch whose copies hold `copy_bytes` (in `copies` storages, each with guard_bytes either side) is not
    copied, or "" when it may be."""
    need = copy_bytes + 2 * guard_bytes * copies
    if need > COPY_MAX_BYTES:
        return (f"its tensors' storages ({copy_bytes:,} B) are over the trace's copy bound ({COPY_MAX_BYTES:,} B "
                f"with guards, host/copy_bound.COPY_MAX_BYTES)")
    left = address_space_left()
    if left is not None and need > left:
        return (f"copying its tensors' storages ({need:,} B with guards) needs more than the address space this "
                f"process has left under RLIMIT_AS ({left:,} B)")
    return ""
