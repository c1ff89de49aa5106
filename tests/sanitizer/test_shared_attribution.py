"""Memcheck records of shared-memory accesses: placed at their shared-window offset, never against a buffer."""
from __future__ import annotations

from gpu_memsafety.model import MEMCHECK, OVERREAD, SHARED, SHARED_MEMORY, UNATTRIBUTED
from gpu_memsafety.placement import layout as L
from gpu_memsafety.sanitizer.attribute import SHARED_WINDOW, Access, BufferRef, aggregate
from gpu_memsafety.sanitizer.parse import MEMORY_ACCESS, parse_text
from gpu_memsafety.sanitizer.records import _access

TEXT = """========= COMPUTE-SANITIZER
========= Invalid __shared__ read of size 4 bytes
=========     at void deep_gemm::sched::sm90_paged_mqa_logits_metadata<32u, 256u, 132u, false>(unsigned int, unsigned int, bool, const unsigned int *, const unsigned int *, unsigned int *)+0x2b0 in sm90_paged_mqa_logits.cuh:113
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x80 is out of bounds
=========
========= Invalid __shared__ read of size 4 bytes
=========     at void deep_gemm::sched::sm90_paged_mqa_logits_metadata<32u, 256u, 132u, false>(unsigned int, unsigned int, bool, const unsigned int *, const unsigned int *, unsigned int *)+0x2b0 in sm90_paged_mqa_logits.cuh:113
=========     by thread (1,0,0) in block (0,0,0)
=========     Address 0x80 is out of bounds
=========
========= ERROR SUMMARY: 2 errors
"""


def shared_read(address: int, thread: int = 0) -> Access:
    return Access(address=address, size=4, direction="read", kernel="k", thread=(thread, 0, 0), block=(0, 0, 0),
                  space="shared")


def a_buffer() -> BufferRef:
    lay = L.plan(128, placement=L.GUARDED, guard=1024)
    rec = {"name": "context_lens", "tensor_addr": 0x80, "nbytes": 128, "alloc_base": 0x80 - lay.front,
           "alloc_size": lay.total, "layout": lay.to_json()}
    return BufferRef.from_record("case[a]", rec)


def test_a_parsed_shared_read_keeps_its_space():
    records = [r for r in parse_text(TEXT).records if r.category == MEMORY_ACCESS]
    assert len(records) == 2
    acc = _access(records[0])
    assert (acc.space, acc.address, acc.size, acc.direction) == ("shared", 0x80, 4, "read")


def test_shared_reads_are_the_shared_window_of_the_case_that_ran_alone():
    # a global buffer whose bytes hold the same number must not take the shared read
    found = aggregate([shared_read(0x80, t) for t in range(32)], [a_buffer()], stray_case="case[a]",
                      describe=lambda case, name, lo, hi: f"{name} {lo}..{hi}")
    (f,) = found["case[a]"]
    assert (f.detector, f.kind, f.buffer, f.region, f.bytes, f.count) == (MEMCHECK, OVERREAD, SHARED, SHARED_MEMORY, 4, 32)
    assert [(r.region, r.start, r.end, r.logical) for r in f.ranges] == [(SHARED_MEMORY, 128, 132, "__shared__ 128..132")]
    assert f.detail("space") == "shared"


def test_a_generic_shared_address_is_reduced_to_its_window_offset():
    (f,) = aggregate([shared_read(0x7FFF_0100_0080)], [], stray_case="c")["c"]
    assert [(r.start, r.end) for r in f.ranges] == [(0x80, 0x84)]
    assert SHARED_WINDOW == 1 << 24


def test_shared_reads_of_a_batch_of_several_cases_are_strays():
    (f,) = aggregate([shared_read(0x80)], [a_buffer()])[""]
    assert (f.buffer, f.region) == (SHARED, SHARED_MEMORY)
    assert f.buffer != UNATTRIBUTED
