"""memcheck records of a host-suite child, placed by test and allocation (gpu_memsafety.host.records): by the fences
in the sanitizer's own output, and by address where the fences do not match (ambiguous tests rerun alone)."""
from __future__ import annotations

from gpu_memsafety.host.records import attribute_records
from gpu_memsafety.host.allocator import Allocation, Frame
from gpu_memsafety.sanitizer.parse import parse_xml

A, B = "t.py::test_a", "t.py::test_b"


def access(address: int, size: int = 4, direction: str = "read") -> str:
    return ("<record><kind>Precise</kind><level>Error</level><what>"
            f"<text>Invalid __global__ {direction} of size {size} bytes is out of bounds</text><space>__global__</space>"
            f"<size>{size}</size><direction>{direction}</direction><error>out of bounds</error>"
            f"<address>{address:#x}</address></what><where><func>k</func><path>/k.py</path><line>3</line></where></record>")


FENCE = ("<record><kind>Api</kind><level>Error</level><what><text>Program hit cudaErrorInvalidDevice (error 101) due to "
         "invalid device ordinal on CUDA API call to cudaSetDevice.</text><api>cudaSetDevice</api>"
         "<error>cudaErrorInvalidDevice</error><result>101</result></what></record>")


def xml(*records: str):
    return parse_xml(("<?xml version='1.0'?><ComputeSanitizerOutput>" + "".join(records)
                      + "</ComputeSanitizerOutput>").encode()).records


# Same address, same size, one allocation per test (the driver reused the address): only the fences tell them apart.
ALLOCS = [Allocation(1, 4000, 0, A, (Frame("/s/t.py", 5, "test_a"),), 0x1000, freed_in=A),
          Allocation(2, 4000, 0, B, (Frame("/s/t.py", 9, "test_b"),), 0x1000, freed_in=B)]


def test_fences_give_each_record_to_the_test_that_made_it() -> None:
    records = xml(FENCE, FENCE, access(0x1000 + 4000), access(0x1000 + 4004), FENCE)
    out = attribute_records(records, [A, B], [A, B], ALLOCS, arch="sm_90")
    assert out.how.startswith("fences") and list(out.findings) == [B]
    (f,) = out.findings[B]
    assert (f.kind, f.buffer, f.region, f.bytes, f.count) == ("overread", "alloc 4000 B at t.py line 9", "past_end", 8, 2)
    assert f.detail("size") == "4000" and "t.py:9 in test_b" in f.detail("stack")


def test_records_after_the_last_fence_belong_to_the_test_that_was_running() -> None:
    records = xml(FENCE, FENCE, access(0x1000 + 4000))
    out = attribute_records(records, [A, B], [A], ALLOCS)
    assert list(out.findings) == [B]


def test_without_matching_fences_an_address_two_tests_explain_reruns_both_alone() -> None:
    out = attribute_records(xml(access(0x1000 + 4000)), [A, B], [A, B], ALLOCS)
    assert out.how.startswith("addresses") and not out.findings and out.alone == [A, B]


def test_without_fences_an_address_one_test_explains_is_that_tests() -> None:
    allocs = [ALLOCS[0], Allocation(2, 64, 0, B, (), 0x900000, freed_in=B)]
    out = attribute_records(xml(access(0x900000 + 64)), [A, B], [A, B], allocs)
    assert list(out.findings) == [B] and out.findings[B][0].bytes == 4


def test_a_free_not_seen_ends_where_a_later_test_reuses_the_address() -> None:
    """The earlier allocation's free was not recorded (freed_in ""), and B's tensor took its address: a record in B
    is B's allocation, not A's stale one (explore's variants on a GPU, run 56: `inside` an earlier variant's block)."""
    allocs = [Allocation(1, 252, 0, A, (Frame("/s/t.py", 5, "test_a"),), 0x1000),
              Allocation(2, 12, 0, B, (Frame("/s/t.py", 9, "test_b"),), 0x1000, freed_in=B)]
    out = attribute_records(xml(FENCE, FENCE, access(0x1000 + 12), FENCE), [A, B], [A, B], allocs, arch="sm_90")
    (f,) = out.findings[B]
    assert (f.buffer, f.region, f.bytes) == ("alloc 12 B at t.py line 9", "past_end", 4)
    # without fences, by address: the record is B's alone (A's block was gone before B made its own)
    out = attribute_records(xml(access(0x1000 + 12)), [A, B], [A, B], allocs)
    assert out.alone == [] and [f.buffer for f in out.findings[B]] == ["alloc 12 B at t.py line 9"]


def test_an_allocation_no_later_one_overlaps_stays_alive_to_the_end() -> None:
    allocs = [Allocation(1, 64, 0, A, (Frame("/s/t.py", 5, "test_a"),), 0x1000),
              Allocation(2, 64, 0, B, (Frame("/s/t.py", 9, "test_b"),), 0x2000, freed_in=B)]
    out = attribute_records(xml(FENCE, FENCE, access(0x1000 + 64), FENCE), [A, B], [A, B], allocs, arch="sm_90")
    (f,) = out.findings[B]
    assert f.buffer == "alloc 64 B at t.py line 5"      # a module fixture's tensor, read past its end in test_b
