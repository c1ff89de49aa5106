"""A CPU stand-in for the guard allocator and for compute-sanitizer, for the host-suite tests (tests only).

Loaded into a small host suite's pytest run with `-p host_fake` (this folder on PYTHONPATH): it answers the plugin's
hooks (fixtures/hookspecs.py) with a FakeAllocator and one fake GPU, so `--gpu-memsafety` runs its whole pipeline on
the CPU: tagging, the teardown check, breaks, children, reports. The suite's tests reach the allocator through
`host_fake.CURRENT` (None without the flag, so the same suite also runs plain):

    block = host_fake.allocate(100)        # 100 bytes, 256 B of 0xA5 before, the tail and 256 B after
    block.write(100, b"xx")                # two bytes past the end: a guard finding
    host_fake.read(block, 104, 4)          # memcheck mode: an access memcheck would report (4 B past the end)

A read is written to $HOST_FAKE_EVENTS in order with the fences; `FAKE_MEMCHECK` (a fake compute-sanitizer) turns
that file into the XML a real run would write: an out-of-bounds record per access outside its allocation, an API
error record per fence.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.host.allocator import (BEFORE_TESTS, FRONT_GUARD, MARKER, Allocation, CheckResult, Counters,
                                               GuardHit, capture_stack)

CURRENT: "FakeAllocator | None" = None
BASE = 0x7F0000000000
SPACING = 1 << 20                      # fake allocations 1 MiB apart (memcheck's padding)
EVENTS_ENV = "HOST_FAKE_EVENTS"


class FakeBlock:
    def __init__(self, owner: "FakeAllocator", alloc: Allocation) -> None:
        self.owner = owner
        self.alloc = alloc
        tail = -alloc.size % 256 + 256
        self.data = bytearray([MARKER]) * (FRONT_GUARD + alloc.size + tail)
        self.painted = owner.placement == "markers"
        if not self.painted:
            self.data = bytearray(alloc.size)

    def write(self, offset: int, payload: bytes) -> None:
        """Bytes written at `offset` from the tensor's first byte (negative: before it)."""
        start = (FRONT_GUARD if self.painted else 0) + offset
        self.data[start:start + len(payload)] = payload

    def free(self) -> None:
        self.owner.free(self)


class FakeAllocator:
    def __init__(self, placement: str) -> None:
        self.placement = placement
        self.describe = f"fake guard allocator ({placement})"
        self.arch = "sm_fake"
        self.test = BEFORE_TESTS
        self.live: dict[int, FakeBlock] = {}
        self.freed: list[FakeBlock] = []
        self.by_test: dict[str, list[Allocation]] = {}
        self.next_id = 1
        self.captures = 0
        self.window: tuple[int, int] | None = None
        self.closed = False

    def allocate(self, size: int) -> FakeBlock:
        ident = self.next_id
        self.next_id += 1
        stack = tuple(f for f in capture_stack(limit=16) if not f.file.endswith("host_fake.py"))[:8]
        alloc = Allocation(ident, size, 0, self.test, stack, BASE + ident * SPACING)
        block = FakeBlock(self, alloc)
        self.live[ident] = block
        self.by_test.setdefault(self.test, []).append(alloc)
        return block

    def free(self, block: FakeBlock) -> None:
        self.live.pop(block.alloc.id, None)
        block.alloc = replace(block.alloc, freed_in=self.test)
        self.freed.append(block)

    def capture_allocation(self) -> None:
        self.captures += 1

    # -- GuardAllocator
    def begin(self, test: str) -> None:
        self.test = test

    def set_page_window(self, lo: int, hi: int) -> None:
        self.window = (lo, hi)

    def check(self) -> CheckResult:
        result = CheckResult()
        for block, live in [*((b, True) for b in self.live.values()), *((b, False) for b in self.freed)]:
            if not block.painted:
                continue
            front = bytes(block.data[:FRONT_GUARD])
            back = bytes(block.data[FRONT_GUARD + block.alloc.size:])
            if any(v != MARKER for v in front + back):
                result.hits.append(GuardHit(block.alloc, front, back, live))
                block.data[:FRONT_GUARD] = bytes([MARKER]) * FRONT_GUARD
                block.data[FRONT_GUARD + block.alloc.size:] = bytes([MARKER]) * len(back)
        self.freed.clear()
        return result

    def counters(self) -> Counters:
        return Counters(allocations=self.next_id - 1, live=len(self.live), quarantined=len(self.freed),
                        capture_allocations=self.captures)

    def allocations_of(self, test: str) -> list[Allocation]:
        made = self.by_test.pop(test, [])
        freed = {b.alloc.id: b.alloc for b in self.freed}
        live = {b.alloc.id: b.alloc for b in self.live.values()}
        return [live.get(a.id) or freed.get(a.id) or a for a in made]

    def fence(self) -> None:
        _event({"kind": "fence"})

    def close(self) -> None:
        self.closed = True


def _event(data: dict[str, Any]) -> None:
    path = os.environ.get(EVENTS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(data) + "\n")


def allocate(size: int) -> Any:
    """A block from the fake allocator, or a plain bytearray-backed block when the plugin is off."""
    if CURRENT is None:
        return _Plain(size)
    return CURRENT.allocate(size)


def read(block: Any, offset: int, size: int) -> None:
    """A read of `size` bytes at `offset` from the block's first byte, as a kernel would make it (memcheck mode)."""
    if CURRENT is not None:
        _event({"kind": "access", "address": block.alloc.ptr + offset, "size": size, "direction": "read",
                "base": block.alloc.ptr, "nbytes": block.alloc.size})


class _Plain:
    def __init__(self, size: int) -> None:
        self.data = bytearray(size + 512)

    def write(self, offset: int, payload: bytes) -> None:
        self.data[256 + offset: 256 + offset + len(payload)] = payload

    def free(self) -> None:
        pass


@pytest.hookimpl(optionalhook=True)
def pytest_gpu_memsafety_make_allocator(config: pytest.Config, placement: str) -> FakeAllocator:
    global CURRENT
    CURRENT = FakeAllocator(placement)
    return CURRENT


@pytest.hookimpl(optionalhook=True)
def pytest_gpu_memsafety_devices(config: pytest.Config) -> list[str]:
    return ["fake0"]


@pytest.hookimpl(optionalhook=True)
def pytest_gpu_memsafety_sanitizer(config: pytest.Config) -> Any:
    path = os.environ.get("HOST_FAKE_SANITIZER")
    if not path:
        return None
    from gpu_memsafety.sanitizer.tool import SanitizerInfo
    return SanitizerInfo(path=path, version="2025.3.1", source="test")


# A fake compute-sanitizer: runs the target with HOST_FAKE_EVENTS set, then writes the XML memcheck would: an
# out-of-bounds record for each access outside its allocation, an API error (cudaSetDevice, 101) for each fence.
FAKE_MEMCHECK = f'''#!{sys.executable}
import json, os, subprocess, sys
from pathlib import Path
args = sys.argv[1:]
xml_path = None
i = 0
while i < len(args) and args[i].startswith("--"):
    if args[i] == "--xml":
        i += 1
        continue
    if args[i] == "--save":
        xml_path = Path(args[i + 1].replace("%%", "%"))
    i += 2
target = args[i:]
events = xml_path.with_name("events.jsonl")
print("========= COMPUTE-SANITIZER", flush=True)
code = subprocess.call(target, env=dict(os.environ, {EVENTS_ENV}=str(events)))
records = []
lines = events.read_text().splitlines() if events.exists() else []
for line in lines:
    e = json.loads(line)
    if e["kind"] == "fence":
        records.append("<record><kind>Api</kind><level>Error</level><what><text>Program hit cudaErrorInvalidDevice "
                       "(error 101) due to invalid device ordinal on CUDA API call to cudaSetDevice.</text>"
                       "<api>cudaSetDevice</api><error>cudaErrorInvalidDevice</error><result>101</result></what></record>")
    elif not (e["base"] <= e["address"] and e["address"] + e["size"] <= e["base"] + e["nbytes"]):
        records.append("<record><kind>Precise</kind><level>Error</level><what>"
                       f"<text>Invalid __global__ read of size {{e['size']}} bytes is out of bounds</text>"
                       f"<space>__global__</space><size>{{e['size']}}</size><direction>read</direction>"
                       f"<error>out of bounds</error><address>{{e['address']:#x}}</address></what>"
                       "<where><func>fake_kernel</func><path>/fake/k.py</path><line>7</line></where></record>")
xml_path.write_text('<?xml version="1.0"?>\\n<ComputeSanitizerOutput>\\n' + "".join(records) + "</ComputeSanitizerOutput>\\n")
print(f"========= ERROR SUMMARY: {{len(records)}} error{{'' if len(records) == 1 else 's'}}", flush=True)
sys.exit(86 if records else code)
'''


def install_fake_memcheck(directory: Path) -> Path:
    script = directory / "fake-compute-sanitizer"
    script.write_text(FAKE_MEMCHECK)
    script.chmod(0o755)
    return script
