"""An access made inside an inlined device function (atomicAdd, a helper): the kernel is the outermost device
frame, the line the kernel author's, and the function of the access is kept (`inlined`). Shared-memory offsets are
counted from the block's own shared memory, past what the driver reserves.

Data: tests/data/sanitizer/memcheck-shared-atomic-inlined.{xml,txt}, compute-sanitizer 2025.3.1 on the H200
(ci/gpu/probes/shared_atomic.cu: an atomicAdd at byte 240 of 240 B of dynamic shared memory, through the
helper `bump`). Found by held-out hx_d on the H200 (run 45): the finding named kernel `atomicAdd` at
device_atomic_functions.hpp:107, offset 1264."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpu_memsafety.model import MEMCHECK, OVERWRITE, SHARED, SHARED_MEMORY
from gpu_memsafety.sanitizer.attribute import reserved_shared
from gpu_memsafety.sanitizer.parse import parse_text, parse_xml
from gpu_memsafety.sanitizer.parse.record import MEMORY_ACCESS, Frame, device_frames, toolkit_header
from gpu_memsafety.sanitizer.records import place_sanitizer_records
from gpu_memsafety.scenario.definition import Case

from tests.judge.test_judge import N, memcheck_run, scenario, worker
from repo_paths import SANITIZER_DATA as DATA


def _access(records):
    [rec] = [r for r in records if r.category == MEMORY_ACCESS]
    return rec


def test_the_xml_names_the_kernel_the_users_line_and_the_inlined_function() -> None:
    rec = _access(parse_xml((DATA / "memcheck-shared-atomic-inlined.xml").read_bytes()).records)
    assert (rec.kernel, Path(rec.file).name, rec.line) == ("probe_align_count", "shared_atomic.cu", 5)
    assert rec.inlined == "atomicAdd at device_atomic_functions.hpp:107"
    assert (rec.space, rec.direction, rec.size, rec.address) == ("shared", "atomic", 4, 0x4F0)


def test_the_text_says_the_same() -> None:
    rec = _access(parse_text((DATA / "memcheck-shared-atomic-inlined.txt").read_text()).records)
    assert (rec.kernel, rec.file, rec.line) == ("probe_align_count", "shared_atomic.cu", 5)
    assert rec.inlined == "atomicAdd(int *, int) at device_atomic_functions.hpp:107"


def test_without_a_device_stack_the_access_is_the_kernels_own() -> None:
    where = Frame("oob_k", "/tmp/t.py", 5, "0x100")
    assert device_frames(where, ()) == {"kernel": "oob_k", "file": "/tmp/t.py", "line": 5, "pc": "0x100"}
    # a stack of the kernel alone: nothing inlined
    assert device_frames(where, (where,))["inlined"] == ""


def test_every_frame_in_the_toolkit_keeps_the_innermost_line() -> None:
    where = Frame("atomicAdd", "/usr/local/cuda-13.0/include/sm_60_atomic_functions.hpp", 9, "0x10")
    got = device_frames(where, (Frame("k", "/opt/cuda/targets/x86_64-linux/include/cub/x.cuh", 3),))
    assert (got["kernel"], got["line"]) == ("k", 9)


@pytest.mark.parametrize("path, header", [
    ("/usr/local/cuda/targets/x86_64-linux/include/device_atomic_functions.hpp", True),
    ("/usr/local/cuda-12.4/include/cuda_fp16.hpp", True),
    ("/venv/lib/python3.12/site-packages/nvidia/cu13/include/cuda_bf16.hpp", True),
    ("/work/kernels/moe_align.cu", False),
    ("/root/.cache/deep_gemm/include/deep_gemm/impls/sm90_paged_mqa_logits.cuh", False),
])
def test_toolkit_headers(path: str, header: bool) -> None:
    assert toolkit_header(path) is header


def test_reserved_shared_memory_by_arch() -> None:
    assert [reserved_shared(a) for a in ("sm_90", "sm_90a", "sm_80", "sm_100", "sm_120", "sm_75", "cpu", "")] == \
        [1024, 1024, 1024, 1024, 1024, 0, None, None]


def test_the_shared_atomic_is_a_finding_of_the_kernel_at_its_own_shared_offset() -> None:
    """In a batch of two cases the record goes to the case whose kernel made it (by the kernel's name: with
    `atomicAdd` for a name it went to no case), at byte 240, with the window offset and the inlined function."""
    run = memcheck_run(*parse_xml((DATA / "memcheck-shared-atomic-inlined.xml").read_bytes()).records)
    mine, other = Case("fake", "v", {"n": N}, "mine"), Case("fake", "v", {"n": N}, "other")
    sc = scenario()
    results = {0: replace(worker(kernel="probe_align_count"), case_id=mine.id),
               1: replace(worker(kernel="another_kernel"), case_id=other.id)}
    placed = place_sanitizer_records([(sc, mine), (sc, other)], results, run)
    assert placed.alone == [] and list(placed.findings) == [mine.id]
    [f] = placed.findings[mine.id]
    assert (f.detector, f.kind, f.buffer, f.region, f.bytes, f.kernel, f.source) == \
        (MEMCHECK, OVERWRITE, SHARED, SHARED_MEMORY, 4, "probe_align_count", "shared_atomic.cu:5")
    assert [(r.start, r.end) for r in f.ranges] == [(240, 244)]
    assert "window offset 0x4f0" in f.ranges[0].logical
    assert f.detail("inlined") == "atomicAdd at device_atomic_functions.hpp:107" and f.detail("access") == "atomic"


def test_an_unknown_arch_keeps_the_window_offset() -> None:
    run = memcheck_run(*parse_xml((DATA / "memcheck-shared-atomic-inlined.xml").read_bytes()).records)
    case = Case("fake", "v", {"n": N}, "mine")
    placed = place_sanitizer_records([(scenario(), case)], {0: replace(worker(kernel="probe_align_count"),
                                                                       case_id=case.id, arch="")}, run)
    [f] = placed.findings[case.id]
    assert [(r.start, r.end, r.logical) for r in f.ranges] == [(0x4F0, 0x4F4, "shared-window offset 0x4f0")]


@pytest.mark.parametrize("name, header", [("device_atomic_functions.hpp", True), ("sm_60_atomic_functions.hpp", True),
                                          ("cuda_fp16.hpp", True), ("moe_align.cu", False), ("device_utils.cuh", False)])
def test_toolkit_header_names_without_a_folder(name: str, header: bool) -> None:
    assert toolkit_header(name) is header
