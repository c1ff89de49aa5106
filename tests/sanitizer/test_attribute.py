"""gpu_memsafety.sanitizer.attribute: every sanitizer access lands on the right buffer, region and bytes, or is kept unattributed.

Attribution is what turns an address into "src, 12 bytes past the end, thread (104,0,0), t.py:5"; a mistake
here blames the wrong buffer or double-counts bytes. Pure (plain dicts and records), so it is checked with
hand-built buffer maps and, end to end, with the real H200 XML in tests/data/sanitizer/.
"""
from __future__ import annotations

from typing import Any

from pathlib import Path


from gpu_memsafety.placement import layout as L
from gpu_memsafety.sanitizer.attribute import NEAR_BEFORE_BYTES, NEAR_BYTES, WRAPS, Access, BufferRef, aggregate, guard_findings, locate
from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, OVERWRITE, ByteRange
from gpu_memsafety.sanitizer.parse import MEMORY_ACCESS, parse_xml
from gpu_memsafety.sanitizer.records import _access
from repo_paths import SANITIZER_DATA as DATA

BASE = 0x7F00_0000_0000


def buffer(name: str, tensor_addr: int, nbytes: int, *, placement: str = L.GUARDED, guard: int = 1024,
           rows: L.Rows | None = None, case_id: str = "case[a]") -> BufferRef:
    """A buffer-map entry as the worker records it (gpu_memsafety.placement.guard.GuardedBuffer.record)."""
    lay = L.plan(nbytes, placement=placement, guard=guard, rows=rows)
    rec = {"name": name, "tensor_addr": tensor_addr, "nbytes": nbytes, "alloc_base": tensor_addr - lay.front,
           "alloc_size": lay.total, "layout": lay.to_json()}
    return BufferRef.from_record(case_id, rec)


def read(address: int, size: int = 4, kernel: str = "k", **kw: object) -> Access:
    return Access(address=address, size=size, direction="read", kernel=kernel, **kw)  # type: ignore[arg-type]


def write(address: int, size: int = 4, kernel: str = "k", **kw: object) -> Access:
    return Access(address=address, size=size, direction="write", kernel=kernel, **kw)  # type: ignore[arg-type]


GUARDED = buffer("src", BASE, 4000)
FLUSH = buffer("src", BASE, 4000, placement=L.FLUSH_END)


# --------------------------------------------------------------------------------------------------- locate

def test_address_inside_the_allocation_belongs_to_its_buffer() -> None:
    assert locate(BASE + 10, [GUARDED]) is GUARDED
    assert locate(BASE - 1024, [GUARDED]) is GUARDED           # first byte of the front guard
    assert locate(BASE + 4000 + 1023, [GUARDED]) is GUARDED    # last byte of the back guard


def test_address_past_a_flush_end_tensor_within_near_bytes_belongs_to_it() -> None:
    assert not FLUSH.contains(BASE + 4000)
    assert locate(BASE + 4000, [FLUSH]) is FLUSH
    assert locate(BASE + 4000 + NEAR_BYTES - 1, [FLUSH]) is FLUSH


def test_address_far_past_the_end_or_far_before_the_allocation_is_unattributed() -> None:
    assert locate(BASE + 4000 + NEAR_BYTES + 4096, [FLUSH]) is None
    assert locate(FLUSH.tensor_addr - NEAR_BEFORE_BYTES - 1, [FLUSH]) is None
    assert locate(FLUSH.alloc_base - 1, [FLUSH]) is FLUSH       # an underrun beyond the front guard


EXACT = buffer("x", BASE, 4000, placement=L.EXACT)


def test_exact_placement_is_the_whole_allocation() -> None:
    assert (EXACT.alloc_base, EXACT.alloc_size) == (BASE, 4000)
    assert not EXACT.contains(BASE - 1) and not EXACT.contains(BASE + 4000)


def test_underread_of_an_exact_tensor_is_before_start_with_exact_bytes() -> None:
    [f] = aggregate([read(BASE - 4, size=4)], [EXACT])["case[a]"]
    assert (f.kind, f.buffer, f.region, f.bytes) == (OVERREAD, "x", "before_start", 4)
    assert [(r.start, r.end) for r in f.ranges] == [(-4, 0)]
    assert locate(BASE - NEAR_BEFORE_BYTES, [EXACT]) is EXACT


def test_between_two_exact_tensors_the_nearer_end_or_start_is_blamed() -> None:
    """The gap between a's end and b's start (memcheck's padding keeps it >= 1 MiB): a short overrun of a is
    a's, a short underrun of b is b's; at equal distance the overrun wins."""
    a = buffer("a", BASE, 4000, placement=L.EXACT)
    b = buffer("b", BASE + (2 << 20), 4000, placement=L.EXACT)
    assert locate(BASE + 4000 + 64, [a, b]) is a
    assert locate(BASE + (2 << 20) - 64, [a, b]) is b
    assert locate(BASE + (2 << 20) - NEAR_BEFORE_BYTES - 1, [a, b]) is a    # farther than an underrun reaches
    c = buffer("c", BASE + 4000 + 2 * 1000, 4000, placement=L.EXACT)        # 2,000 B gap: tie at the middle
    assert locate(BASE + 4000 + 1000, [a, c]) is a


def test_containing_allocation_wins_over_a_nearer_end() -> None:
    a = buffer("a", BASE, 4000, placement=L.FLUSH_END)
    b = buffer("b", BASE + 8192, 100)                          # b's allocation starts at BASE + 7168
    assert locate(BASE + 7200, [a, b]) is b


def test_past_several_ends_the_nearest_buffer_is_blamed() -> None:
    a = buffer("a", BASE, 4000, placement=L.FLUSH_END)
    b = buffer("b", BASE + (1 << 20), 4000, placement=L.FLUSH_END)
    assert locate(BASE + (1 << 20) + 4010, [a, b]) is b
    assert locate(BASE + 4010, [a, b]) is a


# ------------------------------------------------------------------------------------------------ aggregate

def test_overread_past_a_flush_end_is_past_end_with_exact_bytes() -> None:
    [f] = aggregate([read(BASE + 4000), read(BASE + 4004)], [FLUSH])["case[a]"]
    assert (f.detector, f.kind, f.buffer, f.region) == (MEMCHECK, OVERREAD, "src", "past_end")
    assert (f.bytes, f.count) == (8, 2)
    assert f.ranges == (ByteRange("past_end", 4000, 4008),)


def test_overlapping_accesses_count_their_bytes_once() -> None:
    accesses = [read(BASE + 4000, 16), read(BASE + 4008, 16), read(BASE + 4000, 16)]
    [f] = aggregate(accesses, [FLUSH])["case[a]"]
    assert (f.bytes, f.count) == (24, 3)
    assert f.ranges == (ByteRange("past_end", 4000, 4024),)


def test_disjoint_accesses_keep_separate_ranges() -> None:
    [f] = aggregate([read(BASE + 4100, 4), read(BASE + 4000, 4)], [FLUSH])["case[a]"]
    assert f.bytes == 8
    assert [(r.start, r.end) for r in f.ranges] == [(4000, 4004), (4100, 4104)]


def test_access_in_a_guard_is_named_by_the_guard() -> None:
    found = aggregate([write(BASE - 2, 1), write(BASE + 4000, 1)], [GUARDED])["case[a]"]
    assert sorted((f.region, f.kind, f.bytes, f.detail("zone")) for f in found) == [
        ("before_start", OVERWRITE, 1, "front_guard"), ("past_end", OVERWRITE, 1, "back_guard")]


def test_findings_are_split_by_kind_kernel_and_buffer() -> None:
    other = buffer("dst", BASE + (16 << 20), 4000, placement=L.FLUSH_END)
    accesses = [read(BASE + 4000), write(BASE + 4000), read(BASE + 4000, kernel="k2"), read(other.end)]
    found = aggregate(accesses, [FLUSH, other])["case[a]"]
    assert sorted((f.kernel, f.kind, f.buffer) for f in found) == [
        ("k", OVERREAD, "dst"), ("k", OVERREAD, "src"), ("k", OVERWRITE, "src"), ("k2", OVERREAD, "src")]


def test_padding_writes_of_several_rows_are_one_finding_per_region_class() -> None:
    scale = buffer("scale", BASE, 640, rows=L.Rows(8, 72, 80, 5))
    [f] = aggregate([write(BASE + 72, 8), write(BASE + 232, 8)], [scale])["case[a]"]
    assert (f.region, f.bytes, f.count) == ("row_padding", 16, 2)
    assert [r.region for r in f.ranges] == ["row_padding[row 0]", "row_padding[row 2]"]
    assert f.detail("zone") == "padding"


def test_first_thread_block_and_source_come_from_the_first_access() -> None:
    accesses = [read(BASE + 4004, thread=(5, 0, 0), block=(2, 0, 0), source="a.py:3"),
                read(BASE + 4000, thread=(4, 0, 0), block=(2, 0, 0), source="a.py:3")]
    [f] = aggregate(accesses, [FLUSH])["case[a]"]
    assert (f.first_thread, f.first_block, f.source) == ("(5,0,0)", "(2,0,0)", "a.py:3")


def test_unattributed_access_is_kept_with_its_address() -> None:
    far = BASE + (64 << 20)
    found = aggregate([read(far, 4), read(far + 2, 4)], [FLUSH])
    assert set(found) == {""}
    [f] = found[""]
    assert (f.buffer, f.region, f.bytes, f.count) == ("unattributed", "unattributed", 6, 2)
    assert f.ranges == (ByteRange("unattributed", far, far + 6, logical=f"address {far:#x}"),)


def test_a_wild_access_count_is_at_least_and_its_key_leaves_the_count_out() -> None:
    """Memcheck sees a wild access only where it lands outside every live allocation; which of its addresses do
    depends on the process's memory layout (run 33: 49,152 B one run, 48,640 B the next, for the same split-k
    scratchpad write), so the count is a lower bound and the finding's identity (baselines, SARIF and Code Quality
    fingerprints) must not move with it. A finding placed on a buffer keeps its exact count in its key."""
    far = BASE + (64 << 20)
    [one] = aggregate([read(far, 4), read(far + 2, 4)], [FLUSH])[""]
    [other] = aggregate([read(far, 4)], [FLUSH])[""]
    assert (one.exact, other.exact) == (False, False) and one.note.startswith("at least")
    assert one.bytes != other.bytes and one.key() == other.key() and one.key().endswith(":unattributed:~")
    [placed] = aggregate([read(FLUSH.tensor_addr + FLUSH.nbytes, 4)], [FLUSH])["case[a]"]
    assert placed.exact and placed.key().endswith(":past_end:4")


def test_findings_are_keyed_by_the_case_that_owns_the_buffer() -> None:
    a = buffer("src", BASE, 4000, placement=L.FLUSH_END, case_id="s[one]")
    b = buffer("src", BASE + (16 << 20), 4000, placement=L.FLUSH_END, case_id="s[two]")
    found = aggregate([read(a.end), read(b.end), read(b.end + 4)], [a, b])
    assert {cid: [f.bytes for f in fs] for cid, fs in found.items()} == {"s[one]": [4], "s[two]": [8]}


def test_describe_and_arch_are_applied() -> None:
    calls = []

    def describe(case_id: str, name: str, start: int, end: int) -> str:
        calls.append((case_id, name, start, end))
        return f"{name}[{start}..{end - 1}]"

    [f] = aggregate([read(BASE + 4000)], [FLUSH], arch="sm_90", describe=describe)["case[a]"]
    assert f.arch == "sm_90"
    assert f.ranges[0].logical == "src[4000..4003]"
    assert calls == [("case[a]", "src", 4000, 4004)]


def test_no_accesses_no_findings() -> None:
    assert aggregate([], [FLUSH]) == {}


# ------------------------------------------------------------------------- straddling, kinds, misaligned

def test_an_access_that_starts_inside_and_ends_past_the_end_is_past_end_of_the_bytes_beyond() -> None:
    """A 16-byte vector load at 3992 of a 4,000-byte tensor: 8 bytes inside, 8 past the end."""
    [f] = aggregate([read(BASE + 3992, 16)], [FLUSH])["case[a]"]
    assert (f.kind, f.region, f.bytes, f.count) == (OVERREAD, "past_end", 8, 1)
    assert f.ranges == (ByteRange("past_end", 4000, 4008),)
    assert f.detail("zone") == "past_allocation"


def test_an_access_that_starts_before_the_start_and_ends_inside_is_before_start_of_the_bytes_before() -> None:
    [f] = aggregate([write(BASE - 4, 16)], [GUARDED])["case[a]"]
    assert (f.kind, f.region, f.bytes) == (OVERWRITE, "before_start", 4)
    assert f.ranges == (ByteRange("before_start", -4, 0),)


def test_a_straddle_across_the_allocation_end_is_one_past_end_finding_naming_both_zones() -> None:
    page = buffer("src", BASE, 4000, placement=L.GUARD_PAGE_BACK)
    [f] = aggregate([read(BASE + 4088, 16)], [page])["case[a]"]
    assert (f.region, f.bytes) == ("past_end", 16)
    assert f.detail("zone") == "alignment_tail, past_allocation"


def test_an_atomic_past_the_end_is_an_overwrite_with_the_access_kept() -> None:
    atomic = Access(address=BASE + 4000, size=4, direction="atomic", kernel="k", text="Invalid __global__ atomic of size 4 bytes")
    [f] = aggregate([atomic], [FLUSH])["case[a]"]
    assert (f.kind, f.region, f.bytes) == (OVERWRITE, "past_end", 4)
    assert f.detail("access") == "atomic"
    assert f.detail("sanitizer") == "Invalid __global__ atomic of size 4 bytes"


def test_a_misaligned_access_is_its_own_kind_never_an_overread() -> None:
    """The kernel's own arithmetic: a 16-byte load at tensor offset 8 of an aligned tensor."""
    acc = Access(address=BASE + 8, size=16, direction="read", kernel="k", misaligned=True,
                 text="Invalid __global__ read of size 16 bytes")
    [f] = aggregate([acc], [FLUSH])["case[a]"]
    assert (f.kind, f.region, f.bytes) == ("misaligned", "inside", 16)
    assert "kernel's own address" in f.detail("misaligned")
    assert "harness" not in f.detail("misaligned")


def test_a_misaligned_record_caused_by_a_misplaced_tensor_says_the_harness_caused_it() -> None:
    """The pre-issue-19 placement: 4,008 bytes at offset 1112; every aligned-to-the-tensor 16-byte load is
    misaligned in memory. The finding must say the harness's placement did it."""
    old = BufferRef("case[a]", "x", BASE + 1112, 4008, BASE, 5120, L.GuardLayout(nbytes=4008, front=1024, back=0, placement=L.GUARDED))
    acc = Access(address=BASE + 1112 + 32, size=16, direction="read", kernel="k", misaligned=True)
    [f] = aggregate([acc], [old])["case[a]"]
    assert f.kind == "misaligned"
    assert "the harness's placement caused this" in f.detail("misaligned")


# ------------------------------------------------------------------------------------------------- strays

Y = 0x7F00_8000_0000


def test_a_far_write_of_a_case_that_ran_alone_is_named_from_its_nearest_buffer() -> None:
    """A wrapped int32 offset lands 2,147,450,881 B before y: in a process that ran only this case, the
    record is this case's, relative to y."""
    y = buffer("y", Y, 4096, placement=L.FLUSH_END, case_id="planted[far]")
    x = buffer("x", Y + (64 << 20), 4096, placement=L.FLUSH_END, case_id="planted[far]")
    far = Y - 2_147_450_881
    found = aggregate([write(far, 4), write(far + 4, 4)], [y, x], stray_case="planted[far]")
    assert list(found) == ["planted[far]"]
    [f] = found["planted[far]"]
    assert (f.kind, f.buffer, f.region, f.bytes, f.count) == (OVERWRITE, "y", "before_start", 8, 2)
    assert f.ranges == (ByteRange("before_start", -2_147_450_881, -2_147_450_873),)
    assert "2,147,450,881 B before y" in f.note and f.detail("nearest") == f.note


def test_a_far_read_past_the_end_by_an_unsigned_wrap_is_named_after_the_end() -> None:
    y = buffer("y", Y, 4096, placement=L.FLUSH_END, case_id="c")
    [f] = aggregate([read(Y + 4096 + (1 << 32) + 10)], [y], stray_case="c")["c"]
    assert (f.buffer, f.region) == ("y", "past_end")
    assert "4,294,967,307 B after the end of y" in f.note
    assert "4,294,967,296 B back it would be y's byte 4,106" in f.note


def test_the_wrapped_write_names_the_byte_it_meant() -> None:
    y = buffer("y", Y, 4096, placement=L.FLUSH_END, case_id="c")
    [f] = aggregate([write(Y - (1 << 31) + 8)], [y], stray_case="c")["c"]
    assert "2,147,483,640 B before y" in f.note and "2,147,483,648 B further it would be y's byte 8" in f.note


def test_a_stray_that_is_no_wrapped_offset_from_any_buffer_stays_unattributed_but_is_its_cases() -> None:
    """The batched split-k writes of last_expert_oob_read land in an allocation triton_kernels made: a
    nearest buffer would say nothing true, so they stay unattributed (and still belong to their case)."""
    y = buffer("y", Y, 4096, placement=L.FLUSH_END, case_id="c")
    for address in (Y + (1 << 30), Y - (64 << 20), Y + 4096 + NEAR_BYTES + (1 << 20)):
        [f] = aggregate([write(address)], [y], stray_case="c")["c"]
        assert (f.buffer, f.region, f.kind) == ("unattributed", "unattributed", OVERWRITE), hex(address - Y)
    assert WRAPS == (1 << 31, 1 << 32, 1 << 33, 1 << 34, 1 << 35)


def test_a_stray_from_a_batch_of_several_cases_is_no_cases() -> None:
    """Without stray_case nobody knows which case made it: it comes back under "" (the runner reruns the
    batch one case per process) and no case's findings hold it."""
    a = buffer("y", Y, 4096, placement=L.FLUSH_END, case_id="a")
    b = buffer("y", Y + (1 << 30), 4096, placement=L.FLUSH_END, case_id="b")
    found = aggregate([write(Y - 2_147_450_881), read(a.end)], [a, b])
    assert set(found) == {"", "a"}
    assert [f.kind for f in found["a"]] == [OVERREAD]


# -------------------------------------------------------------------------------------------- guard_findings

def test_guard_ranges_become_overwrite_findings_per_buffer_and_region_class() -> None:
    guard = {
        "scale": [{"region": "row_padding[row 0]", "start": 72, "end": 80}, {"region": "row_padding[row 1]", "start": 152, "end": 160},
                  {"region": "unused_row[5]", "start": 400, "end": 404}],
        "dst": [{"region": "past_end", "start": 4000, "end": 4001, "logical": "dst[4000]"}],
        "x": [],
    }
    lay = L.plan(4000, placement=L.GUARD_PAGE_BACK)
    buffers = [{"name": "dst", "layout": lay.to_json()}]
    found = {(f.buffer, f.region): f for f in guard_findings(guard, kernel="k", arch="cpu", buffers=buffers)}
    assert set(found) == {("scale", "row_padding"), ("scale", "unused_row"), ("dst", "past_end")}
    pad = found[("scale", "row_padding")]
    assert (pad.detector, pad.kind, pad.bytes, pad.count, pad.kernel, pad.arch) == (GUARD, OVERWRITE, 16, 2, "k", "cpu")
    assert found[("dst", "past_end")].ranges == (ByteRange("past_end", 4000, 4001, "dst[4000]"),)
    assert found[("dst", "past_end")].detail("zone") == "alignment_tail"


def test_a_write_that_reaches_a_guards_outer_edge_is_counted_as_at_least_never_exact() -> None:
    """Held-out hp_a on the H200: a 4,400 B row written past the end changed the whole 1 KiB back guard; the guard
    said 1,024 B, exact. Changed marker bytes up to the guard's outer edge are a lower bound; short of it, a count."""
    lay = L.plan(26400, placement=L.GUARDED, guard=1024)
    buffers = [{"name": "out", "layout": lay.to_json()}]
    [whole] = guard_findings({"out": [{"region": "past_end", "start": 26400, "end": 26400 + 1024}]},
                             kernel="k", arch="sm_90", buffers=buffers)
    assert (whole.bytes, whole.exact) == (1024, False) and "at least" in whole.note
    [front] = guard_findings({"out": [{"region": "before_start", "start": -1024, "end": -1000}]},
                             kernel="k", arch="sm_90", buffers=buffers)
    assert not front.exact
    [short] = guard_findings({"out": [{"region": "past_end", "start": 26400, "end": 26400 + 600}]},
                             kernel="k", arch="sm_90", buffers=buffers)
    assert (short.bytes, short.exact, short.note) == (600, True, "")


def test_changed_guard_bytes_are_widened_to_the_buffers_whole_elements_and_then_inexact() -> None:
    """Held-out round 2 on the CPU: an atomic add on the int32 one past the end changed 1 byte of the marker word
    (counted 1 B of 4), and fp32 stores into an fp16 buffer's back guard left two bytes that happened to be 0xA5
    (598 B of 600). A store writes whole elements: the changed bytes widen to the elements they fall in."""
    lay = L.plan(4000, placement=L.GUARDED, guard=1024)
    hist = [{"name": "hist", "layout": lay.to_json(), "dtype": "int32", "itemsize": 4}]
    [f] = guard_findings({"hist": [{"region": "past_end", "start": 4000, "end": 4001}]}, kernel="k", arch="cpu",
                         buffers=hist)
    assert (f.bytes, f.exact, [(r.start, r.end) for r in f.ranges]) == (4, False, [(4000, 4004)])
    assert "1 B changed, 4 B in whole 4-byte elements" in f.note
    out = [{"name": "out", "layout": lay.to_json(), "dtype": "float16"}]          # an older map: no itemsize
    runs = [{"region": "past_end", "start": 4000, "end": 4100}, {"region": "past_end", "start": 4101, "end": 4301},
            {"region": "past_end", "start": 4302, "end": 4600}]
    [g] = guard_findings({"out": runs}, kernel="k", arch="cpu", buffers=out)
    assert (g.bytes, g.count, [(r.start, r.end) for r in g.ranges]) == (600, 1, [(4000, 4600)])
    # whole elements already, or a byte-typed buffer: the count stands, exact
    [h] = guard_findings({"hist": [{"region": "past_end", "start": 4000, "end": 4008}]}, kernel="k", arch="cpu",
                         buffers=hist)
    assert (h.bytes, h.exact) == (8, True)
    raw = [{"name": "hist", "layout": lay.to_json(), "dtype": "uint8"}]
    [u] = guard_findings({"hist": [{"region": "past_end", "start": 4000, "end": 4001}]}, kernel="k", arch="cpu",
                         buffers=raw)
    assert (u.bytes, u.exact) == (1, True)
    # before the start: widened inside the front guard only
    [b] = guard_findings({"hist": [{"region": "before_start", "start": -2, "end": -1}]}, kernel="k", arch="cpu",
                         buffers=hist)
    assert [(r.start, r.end) for r in b.ranges] == [(-4, 0)]


def test_guard_findings_use_the_scenarios_words_when_given() -> None:
    guard = {"dst": [{"region": "past_end", "start": 4000, "end": 4001}]}
    [f] = guard_findings(guard, kernel="k", arch="cpu", case_id="c[x]",
                         describe=lambda cid, name, s, e: f"{cid}:{name}:{s}:{e}")
    assert f.ranges[0].logical == "c[x]:dst:4000:4001"


# ------------------------------------------------------------------------------------ real H200 XML, end to end

def _accesses(name: str) -> list[Access]:
    parsed = parse_xml((DATA / name).read_bytes())
    assert parsed.complete
    return [_access(r) for r in parsed.records if r.category == MEMORY_ACCESS]


def test_h200_xml_overread_past_a_4000_byte_tensor() -> None:
    """memcheck-triton-read.xml: three 4-byte reads at 0x7fb656800fa0/fa4/fa8 by threads 104..106 of block 7,
    oob_k at t.py:5; the tensor is 4,000 bytes at 0x7fb656800000 and ends at 0x7fb656800fa0."""
    src = buffer("src", 0x7FB656800000, 4000, placement=L.FLUSH_END, case_id="planted_oob[overread]")
    assert src.end == 0x7FB656800FA0
    found = aggregate(_accesses("memcheck-triton-read.xml"), [src], arch="sm_90")
    assert list(found) == ["planted_oob[overread]"]
    [f] = found["planted_oob[overread]"]
    assert (f.detector, f.kind, f.buffer, f.region, f.kernel, f.arch) == (MEMCHECK, OVERREAD, "src", "past_end", "oob_k", "sm_90")
    assert (f.bytes, f.count) == (12, 3)
    assert f.ranges == (ByteRange("past_end", 4000, 4012),)
    assert (f.first_thread, f.first_block, f.source) == ("(104,0,0)", "(7,0,0)", "t.py:5")


def test_h200_xml_16_byte_reads_past_a_2080_byte_tensor() -> None:
    """memcheck-triton-read-16B-context-destroyed.xml: 16-byte reads at 0x7f7cb6800820/830/840 by threads 2..4
    of block 0, kernel k at oob.py:5; the tensor is 2,080 (0x820) bytes at 0x7f7cb6800000."""
    x = buffer("x", 0x7F7CB6800000, 2080, placement=L.FLUSH_END)
    [f] = aggregate(_accesses("memcheck-triton-read-16B-context-destroyed.xml"), [x])["case[a]"]
    assert (f.buffer, f.region, f.kernel) == ("x", "past_end", "k")
    assert (f.bytes, f.count) == (48, 3)
    assert f.ranges == (ByteRange("past_end", 2080, 2128),)
    assert (f.first_thread, f.first_block, f.source) == ("(2,0,0)", "(0,0,0)", "oob.py:5")


def test_h200_xml_against_a_guarded_buffer_lands_in_the_back_guard() -> None:
    src = buffer("src", 0x7FB656800000, 4000, guard=1024)
    [f] = aggregate(_accesses("memcheck-triton-read.xml"), [src])["case[a]"]
    assert (f.region, f.bytes, f.detail("zone")) == ("past_end", 12, "back_guard")
    assert f.detail("sanitizer") == "Invalid __global__ read of size 4 bytes is out of bounds"
    assert f.detail("access") == "read"


def test_h200_xml_with_a_map_of_other_addresses_is_unattributed_not_dropped() -> None:
    elsewhere = buffer("src", 0x7F0000000000, 4000, placement=L.FLUSH_END)
    found = aggregate(_accesses("memcheck-triton-read.xml"), [elsewhere])
    [f] = found[""]
    assert (f.buffer, f.bytes, f.count) == ("unattributed", 12, 3)
    assert f.ranges[0].start == 0x7FB656800FA0


def test_near_bytes_covers_a_2_mib_guard_granule() -> None:
    assert NEAR_BYTES > 2 << 20


def test_a_memcheck_count_the_guard_shows_short_is_at_least_and_one_nothing_contradicts_stays_exact() -> None:
    """Held-out hp_a on the H200: memcheck reported 816 B of a 4,400 B row written past the end (it ends the kernel at
    its first error); the guard markers saw their whole 1,024 B guard. The memcheck count is then inexact."""
    from dataclasses import replace as _replace

    from gpu_memsafety.detectors.memcheck import undercounts
    from gpu_memsafety.model import POISON, Finding as F
    mc = F(detector=MEMCHECK, kind=OVERWRITE, buffer="out", region="past_end", bytes=816, count=204, kernel="k", arch="sm_90")
    gd = F(detector=GUARD, kind=OVERWRITE, buffer="out", region="past_end", bytes=1024, count=1, kernel="k", arch="sm_90",
           exact=False)
    short, guard = undercounts([mc, gd])
    assert (short.bytes, short.exact) == (816, False) and "guard saw at least 1024 B" in short.note
    assert guard == gd
    # the guard saw no more: memcheck's count stands; a poison bound (widened) or a victim's guard proves nothing
    assert undercounts([mc, _replace(gd, bytes=816)])[0].exact
    assert undercounts([mc, _replace(gd, detector=POISON, kind=OVERWRITE)])[0].exact
    assert undercounts([mc, _replace(gd, details=(("victim", "x"),))])[0].exact
    assert undercounts([mc, _replace(gd, region="before_start")])[0].exact


def test_a_memcheck_overread_count_a_poison_bound_shows_short_is_at_least() -> None:
    """Held-out hu_a on the H200: a rotary kernel read 128 B past its cos/sin cache; memcheck saw the 64 B of the sin
    halves (2080..2112, 2144..2176), the warps never reaching their cos loads. Poison's bound (each end a byte whose
    change changed the output) holds 2048, which memcheck's ranges do not: memcheck's count is at least."""
    from gpu_memsafety.detectors.memcheck import undercounts
    from gpu_memsafety.model import POISON, ByteRange, Finding as F
    mc = F(detector=MEMCHECK, kind=OVERREAD, buffer="cache", region="past_end", bytes=64, count=16, kernel="k",
           arch="sm_90", ranges=(ByteRange("past_end", 2080, 2112), ByteRange("past_end", 2144, 2176)))
    po = F(detector=POISON, kind=OVERREAD, buffer="cache", region="past_end", bytes=128, count=1, kernel="k",
           arch="sm_90", exact=False, ranges=(ByteRange("past_end", 2048, 2176),))
    short, bound = undercounts([mc, po])
    assert (short.bytes, short.exact) == (64, False) and "poison saw 128 B here (2048..2176)" in short.note
    assert bound == po
    # a bound inside memcheck's ranges at both ends proves nothing (it may name bytes memcheck did not, between them)
    inside = F(detector=POISON, kind=OVERREAD, buffer="cache", region="past_end", bytes=96, count=1, kernel="k",
               arch="sm_90", exact=False, ranges=(ByteRange("past_end", 2080, 2176),))
    assert undercounts([mc, inside])[0].exact
    # another buffer, region or kind: nothing
    for other in (_r(po, buffer="x"), _r(po, region="before_start"), _r(po, kind=OVERWRITE)):
        assert undercounts([mc, other])[0].exact


def _r(f: Any, **changes: Any) -> Any:
    from dataclasses import replace as _replace
    return _replace(f, **changes)
