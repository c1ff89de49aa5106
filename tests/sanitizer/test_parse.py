"""gpu_memsafety.sanitizer.parse against real H200 output (tests/data/sanitizer/) and against damaged or hostile input."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpu_memsafety.sanitizer.parse import (
    API_ERROR,
    CHUNK_BYTES,
    INTERNAL_ERROR,
    MEMORY_ACCESS,
    OTHER,
    PROCESS_EXIT,
    HostileXMLError,
    parse_int,
    parse_text,
    parse_xml,
)
from repo_paths import SANITIZER_DATA as DATA


def read_bytes(name: str) -> bytes:
    return (DATA / name).read_bytes()


def read_text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def wrap(records: str) -> bytes:
    head = '<?xml version="1.0" encoding="utf-8"?>\n'
    return f"{head}<ComputeSanitizerOutput>{records}</ComputeSanitizerOutput>".encode()


# ------------------------------------------------------------------------------------------------ XML, real

def test_xml_triton_read_records_exact() -> None:
    result = parse_xml(read_bytes("memcheck-triton-read.xml"))
    assert (result.complete, result.problem, result.attached, result.summary_errors) == (True, "", True, None)
    assert [r.address for r in result.records] == [0x7FB656800FA0, 0x7FB656800FA4, 0x7FB656800FA8]
    assert [r.thread for r in result.records] == [(104, 0, 0), (105, 0, 0), (106, 0, 0)]
    for record in result.records:
        assert record.category == MEMORY_ACCESS
        assert (record.kind, record.level) == ("Precise", "Error")
        assert (record.direction, record.space, record.size) == ("read", "global", 4)
        assert record.block == (7, 0, 0)
        # the kernel's location, not the host stack's last frame (<module> in /tmp/t.py:7)
        assert (record.kernel, record.file, record.line, record.pc) == ("oob_k", "/tmp/t.py", 5, "0x100")
        assert record.error == "out of bounds"
        assert record.text == "Invalid __global__ read of size 4 bytes is out of bounds"


def test_xml_16_byte_vector_reads_exact() -> None:
    result = parse_xml(read_bytes("memcheck-triton-read-16B-context-destroyed.xml"))
    assert result.complete
    assert [r.address for r in result.records] == [0x7F7CB6800820, 0x7F7CB6800830, 0x7F7CB6800840]
    assert [r.thread for r in result.records] == [(2, 0, 0), (3, 0, 0), (4, 0, 0)]
    assert {(r.size, r.kernel, r.file, r.line, r.pc, r.block) for r in result.records} == {
        (16, "k", "/tmp/oob.py", 5, "0xa0", (0, 0, 0))
    }
    # the tensor was 2,080 bytes: the first bad read starts exactly at its end
    assert result.records[0].address - 2080 == 0x7F7CB6800000


# ------------------------------------------------------------------------------------------- XML, damaged

def _cut_inside_record(data: bytes, index: int) -> bytes:
    starts = [i for i in range(len(data)) if data.startswith(b"<record>", i)]
    return data[: starts[index] + 200]


def test_xml_truncated_mid_record_keeps_complete_records() -> None:
    data = read_bytes("memcheck-triton-read.xml")
    result = parse_xml(_cut_inside_record(data, 2))
    assert not result.complete
    assert [r.address for r in result.records] == [0x7FB656800FA0, 0x7FB656800FA4]
    assert "after 2 complete records" in result.problem and "line" in result.problem


def test_xml_truncated_in_first_record_has_no_records() -> None:
    result = parse_xml(_cut_inside_record(read_bytes("memcheck-triton-read.xml"), 0))
    assert (result.records, result.complete) == ((), False)
    assert "after 0 complete records" in result.problem


def test_xml_missing_root_end_is_incomplete() -> None:
    data = read_bytes("memcheck-triton-read.xml")
    cut = data[: data.rindex(b"</record>") + len(b"</record>")]
    result = parse_xml(cut)
    assert len(result.records) == 3 and not result.complete


def test_xml_empty_file_is_incomplete() -> None:
    result = parse_xml(b"")
    assert not result.complete and "empty" in result.problem


def test_xml_records_across_chunk_boundaries() -> None:
    data = read_bytes("memcheck-triton-read.xml")
    body = data[data.index(b"<record>"): data.rindex(b"</record>") + len(b"</record>")]
    many = wrap(body.decode() * 40)
    assert len(many) > 5 * CHUNK_BYTES
    result = parse_xml(many)
    assert result.complete and len(result.records) == 120
    assert {r.kernel for r in result.records} == {"oob_k"}


def test_xml_wrong_root_is_not_complete() -> None:
    result = parse_xml(b"<Other><record><kind>Precise</kind></record></Other>")
    assert not result.complete and "<Other>" in result.problem


def test_xml_undefined_entity_is_malformed_not_expanded() -> None:
    result = parse_xml(wrap("<record><kind>Api</kind><what><text>&foo;</text></what></record>"))
    assert not result.complete and result.records == ()
    assert "undefined entity" in result.problem


# ------------------------------------------------------------------------------------------ XML, hostile

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<ComputeSanitizerOutput><record><kind>Api</kind><what><text>&lol9;</text></what></record></ComputeSanitizerOutput>
"""

EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE ComputeSanitizerOutput [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<ComputeSanitizerOutput><record><kind>Api</kind><what><text>&xxe;</text></what></record></ComputeSanitizerOutput>
"""

EXTERNAL_DTD = b"""<?xml version="1.0"?>
<!DOCTYPE ComputeSanitizerOutput SYSTEM "http://example.invalid/evil.dtd">
<ComputeSanitizerOutput></ComputeSanitizerOutput>
"""


@pytest.mark.parametrize("data", [BILLION_LAUGHS, EXTERNAL_ENTITY, EXTERNAL_DTD], ids=["laughs", "xxe", "dtd"])
def test_xml_hostile_is_refused_quickly(data: bytes) -> None:
    """Refused before anything is expanded: this process's CPU time, not the wall clock (which a loaded machine
    stretches), stays far below what expanding a billion laughs takes."""
    start = time.process_time()
    with pytest.raises(HostileXMLError, match="DOCTYPE"):
        parse_xml(data)
    assert time.process_time() - start < 1.0


def test_xml_doctype_in_a_later_chunk_is_refused() -> None:
    padding = b"<!--" + b" " * (3 * CHUNK_BYTES) + b"-->\n"
    data = b'<?xml version="1.0"?>\n' + padding + EXTERNAL_ENTITY.split(b"\n", 1)[1]
    with pytest.raises(HostileXMLError):
        parse_xml(data)


# ----------------------------------------------------------------------------------- XML, other record kinds

# The Api record of NVIDIA's manual (Compute Sanitizer, "Error suppression"; the text is the manual's).
MANUAL_API_RECORD = """<record><kind>Api</kind><what>
  <text>Program hit cudaErrorMemoryAllocation (error 2) due to out of memory on CUDA API call to cudaMalloc.</text>
  <api>cudaMalloc</api><error>cudaErrorMemoryAllocation</error><message>out of memory</message><result>2</result>
</what><hostStack></hostStack></record>"""


def test_xml_api_record_from_manual() -> None:
    result = parse_xml(wrap(MANUAL_API_RECORD))
    (record,) = result.records
    assert record.category == API_ERROR
    assert (record.api, record.error, record.result) == ("cudaMalloc", "cudaErrorMemoryAllocation", 2)
    assert record.text.startswith("Program hit cudaErrorMemoryAllocation")
    assert record.address is None


def test_xml_unknown_kind_is_other_with_text_and_details() -> None:
    unknown = ("<record><kind>Hazard</kind><level>Warning</level><what><text>some hazard</text>"
               "<accessAddress>0x10</accessAddress><nested><a>1</a></nested></what></record>")
    (record,) = parse_xml(wrap(unknown)).records
    assert (record.category, record.kind, record.level, record.text) == (OTHER, "Hazard", "Warning", "some hazard")
    assert ("accessAddress", "0x10") in record.details and ("nested/a", "1") in record.details


def test_xml_precise_without_access_fields_is_other() -> None:
    (record,) = parse_xml(wrap("<record><kind>Precise</kind><what><text>odd</text></what></record>")).records
    assert record.category == OTHER


def test_xml_unexpected_top_level_element_becomes_other_record() -> None:
    result = parse_xml(wrap("<futureFinding><x>1</x></futureFinding>"))
    (record,) = result.records
    assert record.category == OTHER and "futureFinding" in record.text


# --------------------------------------------------------------------------------------------- text, real

def test_text_triton_read_exact() -> None:
    result = parse_text(read_text("memcheck-triton-read.txt"))
    memory = result.of(MEMORY_ACCESS)
    assert [r.address for r in memory] == [0x7FB656800FA0, 0x7FB656800FA4, 0x7FB656800FA8]
    assert [r.thread for r in memory] == [(104, 0, 0), (105, 0, 0), (106, 0, 0)]
    assert [r.alloc_distance for r in memory] == [1, 5, 9]
    for r in memory:
        assert (r.kernel, r.file, r.line, r.pc, r.block) == ("oob_k", "t.py", 5, "0x100", (7, 0, 0))
        assert (r.direction, r.space, r.size, r.error) == ("read", "global", 4, "out of bounds")
        assert (r.alloc_relation, r.alloc_address, r.alloc_size) == ("after", 0x7FB656800000, 4000)
        # "1 bytes after" is the first byte past the end
        assert r.address == r.alloc_address + r.alloc_size - 1 + r.alloc_distance
    assert [r.category for r in result.records] == [MEMORY_ACCESS] * 3 + [PROCESS_EXIT]
    assert result.summary_errors == 6 and result.not_printed == 3
    assert not result.complete and "3 errors were not printed" in result.problem
    assert result.attached is True


def test_text_triton_and_nvrtc_write_exact() -> None:
    result = parse_text(read_text("memcheck-triton-and-nvrtc-write.txt"))
    assert (result.complete, result.problem, result.summary_errors, result.attached) == (True, "", 3, True)
    got = [(r.kernel, r.file, r.line, r.thread, r.block, r.address, r.alloc_distance) for r in result.records]
    assert got == [
        ("wr", "w.py", 4, (104, 0, 0), (7, 0, 0), 0x7FE3EE800FA0, 1),
        ("wr", "w.py", 4, (105, 0, 0), (7, 0, 0), 0x7FE3EE800FA4, 5),
        ("oob_cu", "6df39407943b05969cfb36949b6dcbfbe6bf1170.cubin.cu", 1, (232, 0, 0), (3, 0, 0),
         0x7FE3EE801FA0, 1),
    ]
    assert {r.direction for r in result.records} == {"write"}


def test_text_wheel_without_subreaper_never_attached() -> None:
    result = parse_text(read_text("cpu-wheel-13.0.85-no-subreaper.txt"))
    assert [r.category for r in result.records] == [INTERNAL_ERROR, INTERNAL_ERROR]
    assert result.attached is False and not result.complete
    assert "terminated before first instrumented API call" in result.problem
    assert result.summary_errors is None


def test_text_internal_error_keeps_continuation_lines() -> None:
    result = parse_text(read_text("cpu-wheel-13.5.25-no-gpu.txt"))
    first = result.records[0]
    assert first.category == INTERNAL_ERROR
    assert "didn't terminate successfully" in first.text and "Unified Memory" in first.text
    assert result.attached is False


# ---------------------------------------------------------------------------------------- text, other forms

P = "========="


def lines(*body: str) -> str:
    return "\n".join(f"{P} {b}" if b else f"{P} " for b in body) + "\n"


def test_text_address_form_and_thousands_separators() -> None:
    text = lines(
        "COMPUTE-SANITIZER",
        "Invalid __shared__ write of size 1,024 bytes",
        "    at void foo<int>(int *, int)+0x60 in k.cu:12",
        "    by thread (1,2,3) in block (4,5,6)",
        "    Address 0x7f0000001000 is out of bounds",
        "    and is 2,048 bytes before the nearest allocation at 0x7f0000001800 of size 1,048,576 bytes",
        "",
        "ERROR SUMMARY: 1,234 errors",
    )
    result = parse_text(text)
    (r,) = result.records
    assert (r.space, r.direction, r.size, r.address) == ("shared", "write", 1024, 0x7F0000001000)
    assert (r.kernel, r.pc, r.file, r.line) == ("void foo<int>(int *, int)", "0x60", "k.cu", 12)
    assert (r.thread, r.block) == ((1, 2, 3), (4, 5, 6))
    assert (r.alloc_relation, r.alloc_distance, r.alloc_size) == ("before", 2048, 1_048_576)
    assert r.address == r.alloc_address - r.alloc_distance
    assert result.summary_errors == 1234 and result.complete


def test_text_location_without_file() -> None:
    (r,) = parse_text(lines("Invalid __global__ read of size 4 bytes", "    at mult(int *, int *, int)+0x60",
                            "", "ERROR SUMMARY: 1 error")).records
    assert (r.kernel, r.pc, r.file, r.line) == ("mult(int *, int *, int)", "0x60", "", None)


def test_text_api_error_is_not_a_memory_error() -> None:
    text = lines(
        "Invalid __global__ read of size 4 bytes",
        "    Access to 0x10 is out of bounds",
        "",
        'Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call '
        "to cudaDeviceSynchronize.",
        "    Saved host backtrace up to driver entry point at error",
        "        Host Frame: cudaDeviceSynchronize [0x1] in libcudart.so",
        "",
        "ERROR SUMMARY: 2 errors",
    )
    result = parse_text(text)
    assert len(result.of(MEMORY_ACCESS)) == 1 and result.summary_errors == 2
    (api,) = result.of(API_ERROR)
    assert (api.api, api.error, api.result) == ("cudaDeviceSynchronize", "cudaErrorLaunchFailure", 719)


def test_text_without_summary_is_incomplete() -> None:
    result = parse_text(lines("COMPUTE-SANITIZER", "Invalid __global__ read of size 4 bytes",
                              "    Access to 0x10 is out of bounds"))
    assert len(result.records) == 1 and not result.complete
    assert "ERROR SUMMARY" in result.problem


def test_text_unknown_header_is_other_with_details() -> None:
    result = parse_text(lines("Uninitialized __global__ memory read of size 4 bytes",
                              "    by thread (122,0,0) in block (0,0,0)", "    something new", "",
                              "ERROR SUMMARY: 1 error"))
    (r,) = result.records
    assert r.category == OTHER and r.thread == (122, 0, 0)
    assert ("line", "something new") in r.details


def test_text_target_output_is_ignored_and_prefix_configurable() -> None:
    text = "Traceback (most recent call last):\nERROR SUMMARY: 99 errors\nError: not ours\n## ERROR SUMMARY: 0 errors\n"
    result = parse_text(text, prefix="##")
    assert result.records == () and result.summary_errors == 0 and result.complete


def test_text_process_exit_with_code() -> None:
    (r,) = parse_text(lines("Target application returned error code 3", "ERROR SUMMARY: 1 error")).records
    assert (r.category, r.result) == (PROCESS_EXIT, 3)


@pytest.mark.parametrize("raw,value", [("4", 4), ("4,000", 4000), ("0x1F", 31), ("", None), ("abc", None),
                                       (None, None)])
def test_parse_int(raw: str | None, value: int | None) -> None:
    assert parse_int(raw) == value


def test_text_api_error_without_quotes() -> None:
    (r,) = parse_text(lines("Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to invalid argument on CUDA API call "
                            "to cuMemFree_v2.", "", "ERROR SUMMARY: 1 error")).records
    assert (r.category, r.api, r.error, r.result) == (API_ERROR, "cuMemFree_v2", "CUDA_ERROR_INVALID_VALUE", 1)
