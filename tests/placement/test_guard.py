"""gpu_memsafety.placement.guard on CPU tensors: guard markers report exactly the bytes a planted write changed.

The marker check is the one detector that sees writes inside an allocation (row padding, unused rows), so
it must name the region and the exact offsets, find nothing after a clean write of the whole logical tensor,
and place flush-end tensors on the last byte of their allocation. Writes are planted through the raw byte
storage, as an out-of-bounds kernel would make them.
"""
from __future__ import annotations

import pytest
import torch

from gpu_memsafety.placement import layout as L
from gpu_memsafety.placement.guard import DEFAULT_MARKER, Arena, GuardedBuffer, Paint
from gpu_memsafety.model import ByteRange

CPU = torch.device("cpu")


def arena(**kwargs: object) -> Arena:
    return Arena(CPU, **kwargs)  # type: ignore[arg-type]


def poke(buf: GuardedBuffer, offset: int, length: int = 1, value: int = 0) -> None:
    """Write `length` bytes at `offset` relative to the tensor's first byte (negative: front guard)."""
    start = buf.layout.front + offset
    buf.storage[start : start + length] = value


def padded_scale(a: Arena, **kwargs: object) -> torch.Tensor:
    """H=2304's scale buffer: int32 [8, 18] (72 bytes) in rows 80 bytes apart, 5 rows used."""
    return a.rows("scale", rows=8, row_bytes=72, row_stride=80, used_rows=5, dtype=torch.int32, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------- allocation

def test_tensor_view_sits_between_the_guards() -> None:
    a = arena(guard=64)
    t = a.tensor("x", (1000,), torch.float32)
    buf = a.buffers["x"]
    assert (t.shape, t.dtype) == (torch.Size([1000]), torch.float32)
    assert buf.storage.numel() == 256 + 4000 + 64        # the front guard rounded up to 256 B: aligned start
    assert t.data_ptr() == buf.storage.data_ptr() + 256 == buf.tensor_addr
    assert t.is_contiguous()


def test_fresh_buffer_holds_the_marker_everywhere() -> None:
    a = arena()
    a.tensor("x", (100,), torch.uint8)
    assert bool((a.buffers["x"].storage == DEFAULT_MARKER).all())


def test_same_name_twice_is_refused() -> None:
    a = arena()
    a.tensor("x", (4,), torch.uint8)
    with pytest.raises(ValueError, match=r"buffer 'x' allocated twice"):
        a.tensor("x", (4,), torch.uint8)


# ------------------------------------------------------------------------------------------ planted writes

def test_untouched_buffer_verifies_clean() -> None:
    a = arena()
    a.tensor("x", (4000,), torch.uint8)
    assert a.verify() == {"x": []}


def test_clean_write_of_the_whole_logical_tensor_finds_nothing() -> None:
    a = arena()
    a.tensor("x", (4000,), torch.uint8).fill_(0)
    padded_scale(a)[:5].fill_(0)                      # every logical byte of every used row
    assert a.verify() == {"x": [], "scale": []}


def test_one_byte_past_the_end_is_back_guard_n_to_n_plus_1() -> None:
    a = arena()
    a.tensor("x", (4000,), torch.uint8)
    poke(a.buffers["x"], 4000)
    assert a.verify()["x"] == [ByteRange("past_end", 4000, 4001)]


def test_one_byte_before_the_start_is_front_guard_minus_1_to_0() -> None:
    a = arena()
    a.tensor("x", (4000,), torch.uint8)
    poke(a.buffers["x"], -1)
    assert a.verify()["x"] == [ByteRange("before_start", -1, 0)]


def test_write_straddling_both_ends_reports_only_the_guard_bytes() -> None:
    a = arena()
    a.tensor("x", (100,), torch.uint8)
    buf = a.buffers["x"]
    poke(buf, -3, 6)
    poke(buf, 98, 7)
    assert a.verify()["x"] == [ByteRange("before_start", -3, 0), ByteRange("past_end", 100, 105)]


def test_last_byte_of_the_back_guard_is_seen() -> None:
    a = arena(guard=32)
    a.tensor("x", (10,), torch.uint8)
    poke(a.buffers["x"], 10 + 31)
    assert a.verify()["x"] == [ByteRange("past_end", 41, 42)]


def test_padding_bytes_72_to_79_of_row_2_are_offsets_232_to_240() -> None:
    a = arena()
    padded_scale(a)
    poke(a.buffers["scale"], 2 * 80 + 72, 8)
    assert a.verify()["scale"] == [ByteRange("row_padding[row 2]", 232, 240)]


def test_padded_row_view_addresses_only_logical_bytes() -> None:
    a = arena()
    scale = padded_scale(a)
    assert scale.shape == (8, 18) and scale.stride() == (20, 1)
    scale[2].fill_(0)                                  # logical bytes of row 2 through the view
    assert a.verify()["scale"] == []
    assert bool((a.buffers["scale"].body()[232:240] == DEFAULT_MARKER).all())


def test_one_byte_in_an_unused_row() -> None:
    a = arena()
    padded_scale(a)
    poke(a.buffers["scale"], 6 * 80 + 3)
    assert a.verify()["scale"] == [ByteRange("unused_row[6]", 483, 484)]


def test_writing_an_unused_row_through_the_view_is_its_logical_bytes() -> None:
    a = arena()
    padded_scale(a)[6].fill_(0)
    assert a.verify()["scale"] == [ByteRange("unused_row[6]", 480, 552)]


def test_packed_writes_of_5_tokens_are_found_in_four_paddings() -> None:
    a = arena()
    padded_scale(a)
    flat = a.buffers["scale"].body()
    for token in range(5):
        flat[token * 72 : token * 72 + 72] = 1        # the bug: token*G + g into 80-byte rows
    assert a.verify()["scale"] == [ByteRange("row_padding[row 0]", 72, 80), ByteRange("row_padding[row 1]", 152, 160),
                                   ByteRange("row_padding[row 2]", 232, 240), ByteRange("row_padding[row 3]", 312, 320)]


def test_run_from_last_padding_into_unused_rows_is_cut_per_region() -> None:
    a = arena()
    padded_scale(a)
    poke(a.buffers["scale"], 392, 100)                # 392..492
    assert a.verify()["scale"] == [ByteRange("row_padding[row 4]", 392, 400), ByteRange("unused_row[5]", 400, 480),
                                   ByteRange("unused_row[6]", 480, 492)]


def test_refill_restores_the_markers() -> None:
    a = arena()
    a.tensor("x", (16,), torch.uint8)
    poke(a.buffers["x"], 16)
    a.refill()
    assert a.verify() == {"x": []}


# ------------------------------------------------------------------------------------------------- marker

def test_configurable_marker_fills_and_is_checked() -> None:
    a = arena(paint=Paint(marker=0x5A))
    a.tensor("x", (64,), torch.uint8)
    buf = a.buffers["x"]
    assert bool((buf.storage == 0x5A).all())
    poke(buf, 64, 1, value=0x5A)                      # writing the marker itself is invisible
    poke(buf, 65, 1, value=DEFAULT_MARKER)            # the default marker is a change here
    assert a.verify()["x"] == [ByteRange("past_end", 65, 66)]


def test_per_buffer_marker() -> None:
    a = arena(paint=Paint(marker_for={"y": 0xFF}))
    a.tensor("x", (8,), torch.uint8)
    a.tensor("y", (8,), torch.uint8)
    assert a.buffers["x"].marker == DEFAULT_MARKER and a.buffers["y"].marker == 0xFF
    y = a.buffers["y"]
    assert bool((y.storage[: y.layout.front] == 0xFF).all()) and bool((y.storage[y.layout.front + 8 :] == 0xFF).all())
    assert bool((y.body() == DEFAULT_MARKER).all())     # the tensor's own bytes: the base marker


def test_refill_with_a_new_marker() -> None:
    a = arena()
    a.tensor("x", (8,), torch.uint8)
    a.refill(0x00)
    poke(a.buffers["x"], 8, 1, value=DEFAULT_MARKER)
    assert a.verify()["x"] == [ByteRange("past_end", 8, 9)]


# ------------------------------------------------------------------------------------------ dtype, shape

@pytest.mark.parametrize("dtype, itemsize", [(torch.bfloat16, 2), (torch.int32, 4), (torch.float32, 4),
                                             (torch.int64, 8), (torch.uint8, 1)])
def test_any_dtype_and_multi_dim_shape(dtype: torch.dtype, itemsize: int) -> None:
    a = arena()
    t = a.tensor("x", (3, 5, 7), dtype)
    nbytes = 3 * 5 * 7 * itemsize
    assert (t.shape, t.dtype, t.is_contiguous()) == (torch.Size([3, 5, 7]), dtype, True)
    assert a.buffers["x"].layout.nbytes == nbytes
    t.fill_(0)
    assert a.verify()["x"] == []
    poke(a.buffers["x"], nbytes, 2)
    assert a.verify()["x"] == [ByteRange("past_end", nbytes, nbytes + 2)]


def test_rows_with_a_row_size_not_a_multiple_of_the_dtype_are_refused() -> None:
    with pytest.raises(L.LayoutError, match=r"scale: row_bytes 70 and row_stride 80 must be multiples of 4"):
        arena().rows("scale", rows=2, row_bytes=70, row_stride=80, used_rows=2, dtype=torch.int32)


def test_bogus_dtype_error_names_the_buffer_and_the_dtype() -> None:
    """An adapter typo (a string instead of a torch.dtype) must say which buffer and which value."""
    with pytest.raises((TypeError, ValueError)) as info:
        arena().tensor("topk_ids", (4, 8), "bf16")  # type: ignore[arg-type]
    message = str(info.value)
    assert "dtype" in message
    assert "topk_ids" in message and "bf16" in message, f"unclear error: {message}"


def test_guard_not_a_multiple_of_the_itemsize_is_a_clear_error_or_works() -> None:
    """RunOptions.guard is user configuration; a guard of 3 bytes must not end in a bare torch view error."""
    try:
        t = arena(guard=3).tensor("x", (4,), torch.int32)
    except L.LayoutError as exc:
        assert "guard" in str(exc)
    else:
        assert t.data_ptr() % 4 == 0


# --------------------------------------------------------------------------------------- flush-end placement

def test_flush_end_tensor_starts_aligned_and_ends_on_the_allocations_last_byte() -> None:
    """Issue 19: 4,008 bytes used to start at offset 1112 (misaligned for 16-byte loads). Now the allocation
    is exactly 1024 + 4008 bytes: aligned start, and the first byte past the end is outside it."""
    a = arena(placement=L.FLUSH_END)
    t = a.tensor("x", (1002,), torch.float32)
    buf = a.buffers["x"]
    assert buf.layout.back == 0
    assert (t.data_ptr() - buf.storage.data_ptr(), buf.storage.numel()) == (1024, 5032)
    assert t.data_ptr() + 4008 == buf.storage.data_ptr() + buf.storage.numel()
    assert (buf.alloc_base, buf.alloc_size) == (buf.storage.data_ptr(), buf.storage.numel())


def test_guard_page_tensor_starts_aligned_and_its_alignment_tail_holds_markers() -> None:
    """A guard-page allocation ends on a page: the 88 bytes after a 4,008-byte tensor up to the next 256 B
    boundary are markers, so a write there is seen."""
    a = arena(placement=L.GUARD_PAGE_BACK)
    t = a.tensor("x", (1002,), torch.float32)
    buf = a.buffers["x"]
    assert (t.data_ptr() - buf.storage.data_ptr(), buf.layout.tail, buf.storage.numel()) == (1024, 88, 5120)
    assert t.data_ptr() + 4008 + 88 == buf.storage.data_ptr() + buf.storage.numel()
    assert a.verify()["x"] == []
    poke(buf, 4008 + 87)
    assert a.verify()["x"] == [ByteRange("past_end", 4095, 4096)]


def test_flush_end_still_checks_its_front_guard() -> None:
    a = arena(placement=L.FLUSH_END)
    a.tensor("x", (4000,), torch.uint8)
    buf = a.buffers["x"]
    poke(buf, -1)
    assert a.verify()["x"] == [ByteRange("before_start", -1, 0)]
    assert buf.layout.marker_spans() == [(-buf.layout.front, 0, "front_guard")]


def test_flush_end_padded_rows_keep_their_padding_markers() -> None:
    a = arena(placement=L.FLUSH_END)
    scale = padded_scale(a)
    buf = a.buffers["scale"]
    assert scale.data_ptr() + 640 == buf.storage.data_ptr() + buf.storage.numel()
    poke(buf, 232, 8)
    assert a.verify()["scale"] == [ByteRange("row_padding[row 2]", 232, 240)]


def test_placement_can_be_chosen_per_tensor() -> None:
    a = arena()
    a.tensor("watched", (100,), torch.uint8, placement=L.FLUSH_END)
    a.tensor("other", (100,), torch.uint8)
    assert a.buffers["watched"].layout.placement == L.FLUSH_END
    assert a.buffers["other"].layout.placement == L.GUARDED


def test_page_allocators_are_used_only_for_their_page_placements() -> None:
    calls: list[int] = []
    fronts: list[int] = []

    def fake_vmm(total: int, device: torch.device) -> tuple[torch.Tensor, int, int, str, object]:
        calls.append(total)
        storage = torch.empty(total, dtype=torch.uint8, device=device)
        return storage, storage.data_ptr(), total, "vmm", "keep"

    def fake_front(total: int, device: torch.device) -> tuple[torch.Tensor, int, int, str, object]:
        fronts.append(total)
        return fake_vmm(total, device)

    a = arena(page_allocators={L.GUARD_PAGE_BACK: fake_vmm, L.GUARD_PAGE_FRONT: fake_front})
    a.tensor("plain", (10,), torch.uint8)
    a.tensor("flush", (10,), torch.uint8, placement=L.FLUSH_END)
    a.tensor("page", (10,), torch.uint8, placement=L.GUARD_PAGE_BACK)
    a.tensor("front", (10,), torch.uint8, placement=L.GUARD_PAGE_FRONT)
    assert calls == [L.DEFAULT_GUARD + L.ALIGN, L.ALIGN]   # only the pages asked; 10 B + 246 B of alignment tail
    assert fronts == [L.ALIGN]                            # the front page: no front guard, the same tail
    assert [a.buffers[n].backend for n in ("plain", "flush", "page", "front")] == ["torch", "torch", "vmm", "vmm"]
    assert a.buffers["page"].keepalive == "keep"
    assert a.buffers["front"].tensor_addr == a.buffers["front"].storage.data_ptr()   # first byte = first mapped byte
    assert [L.page_side(r) for r in a.buffer_map()] == ["", "", "back", "front"]
    assert L.paged_buffers(a.buffer_map()) == {"page": "back", "front": "front"}


# ------------------------------------------------------------------------------------------------ buffer map

def test_buffer_map_record_describes_the_allocation() -> None:
    a = arena(guard=64)
    t = a.tensor("x", (2, 3), torch.bfloat16)
    [rec] = a.buffer_map()
    assert rec["name"] == "x"
    assert rec["tensor_addr"] == t.data_ptr()
    assert rec["alloc_base"] == rec["tensor_addr"] - 256
    assert (rec["nbytes"], rec["alloc_size"]) == (12, 256 + 12 + 64)
    assert (rec["dtype"], rec["shape"], rec["stride"]) == ("bfloat16", [2, 3], [3, 1])
    assert L.GuardLayout.from_json(rec["layout"]) == a.buffers["x"].layout


# ------------------------------------------------------------------------------- fast clean check (words)

@pytest.mark.parametrize("row_bytes,row_stride", [(72, 80), (90, 96), (30, 32), (13, 16), (3, 7)])
def test_every_padding_byte_is_seen_whatever_word_size_the_check_uses(row_bytes: int, row_stride: int) -> None:
    """Padding widths of 8, 6, 2, 3 and 4 bytes take the int64, int16 and byte paths; each byte counts."""
    for col in range(row_bytes, row_stride):
        a = arena(guard=64)
        a.rows("scale", rows=6, row_bytes=row_bytes, row_stride=row_stride, used_rows=4)
        buf = a.buffers["scale"]
        poke(buf, 2 * row_stride + col)
        assert a.verify()["scale"] == [ByteRange("row_padding[row 2]", 2 * row_stride + col, 2 * row_stride + col + 1)]


def test_changed_counts_stay_on_the_device_and_count_words() -> None:
    a = arena(guard=64)
    a.tensor("x", (100,), torch.uint8)
    a.tensor("y", (64,), torch.uint8)
    counts = a.changed_counts()
    assert counts is not None and counts.tolist() == [0, 0, 0, 0]
    poke(a.buffers["y"], 64, length=9)       # 9 bytes past y's end span two 8-byte words
    assert a.changed_counts().tolist() == [0, 0, 0, 2]


def test_fill_markers_restores_the_guards_and_keeps_the_tensor() -> None:
    a = arena(guard=64)
    t = a.tensor("x", (16,), torch.uint8)
    t.fill_(7)
    poke(a.buffers["x"], 16, length=4)
    a.fill_markers()
    assert a.verify() == {"x": []}
    assert t.tolist() == [7] * 16


def test_arena_without_buffers_verifies_to_nothing() -> None:
    assert arena().verify() == {} and arena().changed_counts() is None


def test_poisoned_buffer_differs_from_the_others_only_in_its_marker_bytes() -> None:
    """Poison mode: bytes a kernel leaves unwritten inside the tensor must read the same in both runs."""
    a = arena(guard=64, paint=Paint(marker_for={"scale": 0xFF}))
    a.rows("scale", rows=4, row_bytes=72, row_stride=80, used_rows=3)
    buf = a.buffers["scale"]
    body = buf.body().view(4, 80)
    assert bool((body[:3, :72] == DEFAULT_MARKER).all())          # the tensor: the arena's base marker
    assert bool((body[:3, 72:] == 0xFF).all()) and bool((body[3] == 0xFF).all())
    assert bool((buf.storage[:64] == 0xFF).all()) and a.verify() == {"scale": []}


def test_allocate_takes_an_exact_layout_and_tells_the_owner() -> None:
    told = []
    a = Arena(torch.device("cpu"), on_change=lambda: told.append(1))
    lay = L.plan(100, guard=64)
    buf = a.allocate("x", lay)
    assert buf.layout == lay and a.buffers["x"] is buf and told == [1]
    assert bool((buf.storage == DEFAULT_MARKER).all())
    assert a.verify() == {"x": []}
    with pytest.raises(ValueError, match="allocated twice"):
        a.allocate("x", lay)


def test_fill_spans_start_those_bytes_in_the_span_fill_and_keep_the_markers() -> None:
    """uninit's search for the bytes read (fillcheck._read_bytes): only the given spans of the tensor start in the
    second fill; the rest starts in the arena's fill, and row padding keeps its marker even inside a span."""
    arena = Arena(torch.device("cpu"), paint=Paint(fill_spans={"x": [(8, 16), (100, 120)]}, span_fill=0x5A))
    x = arena.rows("x", rows=2, row_bytes=96, row_stride=112, used_rows=2)
    body = arena.buffers["x"].body()
    assert set(body[8:16].tolist()) == {0x5A} and set(body[0:8].tolist()) == {DEFAULT_MARKER}
    assert set(body[100:112].tolist()) == {DEFAULT_MARKER}          # row 0's padding: a marker, not the fill
    assert set(body[112:120].tolist()) == {0x5A} and x.shape == (2, 96)
    assert arena.verify() == {"x": []}
    with pytest.raises(L.LayoutError, match="fill span 0..300 is not inside its 224 tensor bytes"):
        Arena(torch.device("cpu"), paint=Paint(fill_spans={"y": [(0, 300)]})).tensor("y", (224,), torch.uint8)


def test_scrambled_markers_see_what_leaves_a_uniform_marker_as_it_was() -> None:
    """Held-out round 8: KV blocks copied by their padded stride carry row padding onto row padding (hv_c); an atomic
    min onto the int32 past the end leaves 0xA5A5A5A5 (negative) the min (hv_g). The uniform marker's check sees
    neither; the scrambled markers (per buffer and position, 0x00..0x7F) see both, byte for byte."""
    import torch as _t

    from gpu_memsafety.placement.guard import Arena as _Arena, scramble_bytes

    def act(arena: "_Arena") -> None:
        kv = arena.rows("kv", rows=4, row_bytes=16, row_stride=32, used_rows=4, dtype=_t.uint8)
        grid = arena.buffers["kv"].body().view(4, 32)
        grid[3, 16:] = grid[1, 16:].clone()                     # row 1's padding copied onto row 3's
        arena.tensor("counts", (4,), _t.int32)
        c = arena.buffers["counts"]
        past = c.storage[c.layout.front + 16 : c.layout.front + 20].view(_t.int32)
        past.copy_(_t.minimum(past, _t.tensor([32], dtype=_t.int32)))   # atomic_min(counts[4], 32)
        assert kv.shape == (4, 16)

    plain = _Arena(_t.device("cpu"), guard=64)
    act(plain)
    assert plain.verify() == {"kv": [], "counts": []}
    scrambled = _Arena(_t.device("cpu"), guard=64, paint=Paint(scramble=1))
    assert scrambled.scrambled_changes() == {}
    act(scrambled)
    seen = {name: [(r.start, r.end) for r in runs] for name, runs in scrambled.scrambled_changes().items()}
    # a few bytes may hold the same scrambled value by chance (1 in 128): never more than a few of the 16 and 4
    kv = seen["kv"]
    assert kv and all(112 <= lo < hi <= 128 for lo, hi in kv) and sum(hi - lo for lo, hi in kv) >= 12, kv
    assert seen["counts"] and all(16 <= lo < hi <= 20 for lo, hi in seen["counts"]), seen
    b = scramble_bytes("kv", -64, 192, _t.device("cpu"))
    assert int(b.max()) < 0x80 and 0xA5 not in b.tolist()
