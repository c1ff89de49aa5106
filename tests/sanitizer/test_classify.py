"""gpu_memsafety.sanitizer.parse.classify: every kind of record compute-sanitizer's tools document gets one word, and the
memory-access kinds become the right finding kind (issue 19: an atomic past the end is a write, a
misaligned access is its own kind, never an overread).

Recorded H200 output (tests/data/sanitizer/) covers reads, writes and the process-exit record; racecheck and
synccheck files there are fabricated from public logs (see that README). No recorded atomic, misaligned,
hardware-exception, malloc/free, leak or initcheck output exists in the repository: those records are
written here in the format memcheck's text output uses for the recorded ones (header, "at", "by thread",
"Address ... is ..."), each marked as constructed, and the device script ci/gpu/findings_check.sh
records real ones for the atomic and misaligned cases.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from gpu_memsafety.placement import layout as L
from gpu_memsafety.sanitizer import parse
from gpu_memsafety.sanitizer.attribute import BufferRef, aggregate
from gpu_memsafety.model import MISALIGNED, OVERREAD, OVERWRITE
from gpu_memsafety.sanitizer.records import _access
from repo_paths import SANITIZER_DATA as DATA

P = "========= "


def text_records(body: str) -> tuple[parse.SanitizerRecord, ...]:
    lines = [P + "COMPUTE-SANITIZER", *(P + line for line in body.strip("\n").splitlines()), P + "ERROR SUMMARY: 1 error"]
    result = parse.parse_text("\n".join(lines) + "\n")
    assert result.complete, result.problem
    return result.records


# ------------------------------------------------------------------------------------------ recorded output

def test_recorded_reads_writes_and_exit_records() -> None:
    reads = parse.parse_xml((DATA / "memcheck-triton-read.xml").read_bytes()).records
    assert {parse.classify(r) for r in reads} == {parse.READ}
    text = parse.parse_text((DATA / "memcheck-triton-and-nvrtc-write.txt").read_text()).records
    assert [parse.classify(r) for r in text] == [parse.WRITE] * 3
    aborted = parse.parse_text((DATA / "memcheck-mxfp4-overread-target-aborted.txt").read_text()).records
    kinds = {parse.classify(r) for r in aborted}
    assert parse.READ in kinds and parse.OTHER not in kinds, kinds


@pytest.mark.parametrize("name, kind", [("racecheck-analysis-fabricated.txt", parse.HAZARD),
                                        ("racecheck-hazard-fabricated.txt", parse.HAZARD),
                                        ("synccheck-fabricated.txt", parse.SYNC_ERROR)])
def test_racecheck_and_synccheck_records(name: str, kind: str) -> None:
    records = parse.parse_text((DATA / name).read_text()).records
    kinds = {parse.classify(r) for r in records}
    assert kind in kinds and parse.OTHER not in kinds, kinds


# --------------------------------------------------------------------------------- constructed, every kind

CONSTRUCTED = {
    parse.ATOMIC: """
Invalid __global__ atomic of size 4 bytes
    at planted_atomic_past_end+0x90 in planted_cuda.cu:40
    by thread (0,0,0) in block (3,0,0)
    Access to 0x7fb656800fa0 is out of bounds
""",
    parse.MISALIGNED: """
Invalid __global__ read of size 16 bytes
    at vec16_copy+0x70 in planted_cuda.cu:20
    by thread (1,0,0) in block (0,0,0)
    Address 0x7fb656800458 is misaligned
""",
    parse.HARDWARE_EXCEPTION: """
Warp Illegal Address
    at k+0x70 in k.cu:9
    by thread (0,0,0) in block (0,0,0)
""",
    parse.MALLOC_FREE: """
Malloc/Free error encountered : Double free
    at k+0x70 in k.cu:9
    by thread (0,0,0) in block (0,0,0)
""",
    parse.LEAK: """
Leaked 1,024 bytes at 0x7fb656800000
""",
    parse.UNINITIALIZED_READ: """
Uninitialized __global__ memory read of size 4 bytes
    at acc+0x50 in acc.cu:7
    by thread (0,0,0) in block (0,0,0)
    Address 0x7fb656800000
""",
    parse.UNUSED_MEMORY: """
Unused memory in allocation 0x7fb656800000 of size 4,000 bytes
""",
}


@pytest.mark.parametrize("kind", sorted(CONSTRUCTED))
def test_each_constructed_record_kind_is_classified_and_keeps_its_words(kind: str) -> None:
    [record] = text_records(CONSTRUCTED[kind])
    assert parse.classify(record) == kind
    assert record.text.startswith(CONSTRUCTED[kind].strip().splitlines()[0])


def test_every_record_kind_has_a_test() -> None:
    tested = set(CONSTRUCTED) | {parse.READ, parse.WRITE, parse.HAZARD, parse.SYNC_ERROR, parse.API_ERROR,
                                 parse.PROCESS_EXIT, parse.INTERNAL_ERROR, parse.OTHER}
    assert tested == set(parse.RECORD_KINDS)


@pytest.mark.parametrize("word, kind", [("read", "read"), ("Write", "write"), ("atomic", "atomic"),
                                        ("Atomic", "atomic"), ("reduction", "atomic"), ("prefetch", "")])
def test_xml_direction_words(word: str, kind: str) -> None:
    assert parse.normalize_direction(word) == kind


def test_xml_misaligned_access_is_misaligned_whatever_its_direction() -> None:
    xml = ('<?xml version="1.0"?><ComputeSanitizerOutput><record><kind>Precise</kind><level>Error</level><what>'
           "<text>Invalid __global__ read of size 16 bytes is misaligned</text><space>__global__</space><size>16</size>"
           "<direction>read</direction><error>misaligned</error><address>0x7fb656800458</address></what>"
           "<where><func>k</func><path>k.cu</path><line>3</line><pc>0x10</pc></where></record></ComputeSanitizerOutput>")
    [record] = parse.parse_xml(xml.encode()).records
    assert parse.classify(record) == parse.MISALIGNED


def test_api_and_internal_and_unknown_records() -> None:
    api = parse.SanitizerRecord(category=parse.API_ERROR, text="Program hit cudaErrorLaunchFailure")
    internal = parse.SanitizerRecord(category=parse.INTERNAL_ERROR, text="Error: Internal Sanitizer Error")
    unknown = parse.SanitizerRecord(category=parse.OTHER, text="Something new the tool says")
    assert [parse.classify(r) for r in (api, internal, unknown)] == [parse.API_ERROR, parse.INTERNAL_ERROR, parse.OTHER]


# --------------------------------------------------------------------------- kinds become the right findings

def buffer_at(addr: int, nbytes: int) -> BufferRef:
    lay = L.plan(nbytes, placement=L.FLUSH_END)
    rec = {"name": "out", "tensor_addr": addr, "nbytes": nbytes, "alloc_base": addr - lay.front,
           "alloc_size": lay.total, "layout": lay.to_json()}
    return BufferRef.from_record("c", rec)


def test_an_atomic_past_the_end_becomes_an_overwrite_with_the_tools_words() -> None:
    [record] = text_records(CONSTRUCTED[parse.ATOMIC])
    [f] = aggregate([_access(record)], [buffer_at(0x7FB656800000, 4000)])["c"]
    assert (f.kind, f.region, f.bytes) == (OVERWRITE, "past_end", 4)
    assert (f.detail("access"), f.detail("sanitizer")) == ("atomic", "Invalid __global__ atomic of size 4 bytes")


def test_a_misaligned_read_becomes_a_misaligned_finding_not_an_overread() -> None:
    [record] = text_records(CONSTRUCTED[parse.MISALIGNED])
    [f] = aggregate([_access(record)], [buffer_at(0x7FB656800000, 4000)])["c"]
    assert f.kind == MISALIGNED != OVERREAD
    assert (f.region, f.bytes, f.detail("access")) == ("inside", 16, "read")
    assert "kernel's own address" in f.detail("misaligned")


def test_reports_show_the_detectors_own_words() -> None:
    from gpu_memsafety.report.findings import describe_finding, finding_fields
    [record] = text_records(CONSTRUCTED[parse.ATOMIC])
    [f] = aggregate([_access(record)], [buffer_at(0x7FB656800000, 4000)])["c"]
    line = describe_finding(f)
    assert "overwrite of out past_end: 4 B" in line
    assert "access: atomic" in line and "zone: past_allocation" in line
    assert "sanitizer: Invalid __global__ atomic of size 4 bytes" in line
    assert ("access", "atomic") in finding_fields(f)
