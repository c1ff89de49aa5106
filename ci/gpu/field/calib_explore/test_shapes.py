"""Explore's calibration (issue 50): eight planted bugs that trigger only at shapes the tests do not list (a block
tail read and written, a sequence shorter than a chunk, a column count that is not a power of two, a single expert,
an empty segment, a module-level length the test reads, and one a fixture makes its tensor with), each with a clean
twin (`*_fixed`, the same test with the kernel's mask right). Every listed case passes and is clean: without explore
nothing here is found. With `pytest --gpu-memsafety --gpu-memsafety-explore`, every bug must be found at the exact
bytes expected.py computes for the explored values, and no twin may show a finding at any shape (check.py judges a
report.json so). Without a GPU the kernels run in Triton's interpreter on CPU tensors (conftest.py)."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from expected import BLOCK, BT, LISTED, ROWS

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SEQ = 128          # test_module_constant_tail's length: a module-level constant (expected.SEQ)
ROWS_OF_FIXTURE = 256   # the length a fixture makes its tensor of (test_fixture_constant_write)


@triton.jit
def _tail_read(x_ptr, y_ptr, n, BLOCK: tl.constexpr, FIXED: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if FIXED:
        v = tl.load(x_ptr + o, mask=o < n, other=0.0)
    else:
        v = tl.load(x_ptr + o)                       # the whole last block: past the end when n % BLOCK
    tl.store(y_ptr + o, v * 2, mask=o < n)


@triton.jit
def _tail_write(out_ptr, n, BLOCK: tl.constexpr, FIXED: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if FIXED:
        tl.store(out_ptr + o, tl.full((BLOCK,), 1.0, tl.float32), mask=o < n)
    else:
        tl.store(out_ptr + o, tl.full((BLOCK,), 1.0, tl.float32))     # the whole last block


@triton.jit
def _seq_scale(x_ptr, y_ptr, cu_ptr, BT: tl.constexpr, FIXED: tl.constexpr):
    s = tl.program_id(0)
    c = tl.program_id(1)
    bos = tl.load(cu_ptr + s)
    length = tl.load(cu_ptr + s + 1) - bos
    o = c * BT + tl.arange(0, BT)
    if FIXED:
        m = o < length
    else:
        m = (o < length) | (c == 0)                  # the first chunk read whole: assumes BT tokens a sequence
    v = tl.load(x_ptr + bos + o, mask=m, other=0.0)
    tl.store(y_ptr + bos + o, v * 2, mask=o < length)


@triton.jit
def _row_scale(x_ptr, y_ptr, N, BLOCK: tl.constexpr, FIXED: tl.constexpr):
    r = tl.program_id(0)
    o = tl.arange(0, BLOCK)
    if FIXED:
        v = tl.load(x_ptr + r * N + o, mask=o < N, other=0.0)
    else:
        v = tl.load(x_ptr + r * N + o)               # BLOCK = next power of two: the last row's reads run past
    tl.store(y_ptr + r * N + o, v * 2, mask=o < N)


@triton.jit
def _expert_starts(counts_ptr, starts_ptr, E, BLOCK_E: tl.constexpr, FIXED: tl.constexpr):
    o = tl.arange(0, BLOCK_E)
    if FIXED:
        m = o < E
    else:
        m = (o < E) | (o < 2)                        # assumes at least two experts
    c = tl.load(counts_ptr + o, mask=m, other=0)
    starts = tl.cumsum(c, 0) - c
    tl.store(starts_ptr + o, starts, mask=o < E)


@triton.jit
def _segment_max(x_ptr, out_ptr, offsets_ptr, BLOCK: tl.constexpr, FIXED: tl.constexpr):
    s = tl.program_id(0)
    bos = tl.load(offsets_ptr + s)
    length = tl.load(offsets_ptr + s + 1) - bos
    o = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + bos + o, mask=o < length, other=float("-inf"))
    if FIXED:
        first = tl.load(x_ptr + bos, mask=length > 0, other=0.0)
    else:
        first = tl.load(x_ptr + bos)                 # the segment's first element: an empty one has none
    best = tl.maximum(tl.max(v, 0), first)
    tl.store(out_ptr + s, tl.where(length > 0, best, 0.0))


def block_tail_read(n: int, fixed: bool) -> None:
    x = torch.arange(n, dtype=torch.float32, device=DEVICE)
    y = torch.empty_like(x)
    _tail_read[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, FIXED=fixed)
    assert torch.equal(y, x * 2)


@pytest.mark.parametrize("n", LISTED["n"])
def test_block_tail_read(n: int) -> None:
    block_tail_read(n, False)


@pytest.mark.parametrize("n", LISTED["n"])
def test_block_tail_read_fixed(n: int) -> None:
    block_tail_read(n, True)


def block_tail_write(shape: tuple[int, int], fixed: bool) -> None:
    out = torch.zeros(shape, dtype=torch.float32, device=DEVICE)
    n = out.numel()
    _tail_write[(triton.cdiv(n, BLOCK),)](out, n, BLOCK=BLOCK, FIXED=fixed)
    assert torch.equal(out, torch.ones_like(out))


@pytest.mark.parametrize("shape", LISTED["shape"])
def test_block_tail_write(shape: tuple[int, int]) -> None:
    block_tail_write(shape, False)


@pytest.mark.parametrize("shape", LISTED["shape"])
def test_block_tail_write_fixed(shape: tuple[int, int]) -> None:
    block_tail_write(shape, True)


def shorter_than_a_chunk(cu_seqlens: list[int], fixed: bool) -> None:
    cu = torch.tensor(cu_seqlens, dtype=torch.int32, device=DEVICE)
    x = torch.randn(cu_seqlens[-1], device=DEVICE)
    y = torch.empty_like(x)
    longest = max(b - a for a, b in zip(cu_seqlens, cu_seqlens[1:]))
    grid = (len(cu_seqlens) - 1, max(triton.cdiv(longest, BT), 1))
    _seq_scale[grid](x, y, cu, BT=BT, FIXED=fixed)
    assert torch.equal(y, x * 2)


@pytest.mark.parametrize("cu_seqlens", LISTED["cu_seqlens"])
def test_shorter_than_a_chunk(cu_seqlens: list[int]) -> None:
    shorter_than_a_chunk(cu_seqlens, False)


@pytest.mark.parametrize("cu_seqlens", LISTED["cu_seqlens"])
def test_shorter_than_a_chunk_fixed(cu_seqlens: list[int]) -> None:
    shorter_than_a_chunk(cu_seqlens, True)


def non_power_of_two_columns(cols: int, fixed: bool) -> None:
    x = torch.randn(ROWS, cols, device=DEVICE)
    y = torch.empty_like(x)
    _row_scale[(ROWS,)](x, y, cols, BLOCK=triton.next_power_of_2(cols), FIXED=fixed)
    assert torch.equal(y, x * 2)


@pytest.mark.parametrize("cols", LISTED["cols"])
def test_non_power_of_two_columns(cols: int) -> None:
    non_power_of_two_columns(cols, False)


@pytest.mark.parametrize("cols", LISTED["cols"])
def test_non_power_of_two_columns_fixed(cols: int) -> None:
    non_power_of_two_columns(cols, True)


def one_expert(experts: int, fixed: bool) -> None:
    counts = torch.arange(1, experts + 1, dtype=torch.int32, device=DEVICE)
    starts = torch.empty_like(counts)
    block = max(triton.next_power_of_2(experts), 2)
    _expert_starts[(1,)](counts, starts, experts, BLOCK_E=block, FIXED=fixed)
    assert torch.equal(starts, (torch.cumsum(counts, 0) - counts).to(torch.int32))


@pytest.mark.parametrize("experts", LISTED["experts"])
def test_one_expert(experts: int) -> None:
    one_expert(experts, False)


@pytest.mark.parametrize("experts", LISTED["experts"])
def test_one_expert_fixed(experts: int) -> None:
    one_expert(experts, True)


def empty_segment(offsets: list[int], fixed: bool) -> None:
    x = torch.randn(offsets[-1], device=DEVICE)
    out = torch.empty(len(offsets) - 1, device=DEVICE)
    off = torch.tensor(offsets, dtype=torch.int32, device=DEVICE)
    longest = max(b - a for a, b in zip(offsets, offsets[1:]))
    _segment_max[(len(offsets) - 1,)](x, out, off, BLOCK=max(triton.next_power_of_2(longest), 2), FIXED=fixed)
    want = torch.stack([x[a:b].max() if b > a else torch.zeros((), device=DEVICE)
                        for a, b in zip(offsets, offsets[1:])])
    assert torch.equal(out, want)


@pytest.mark.parametrize("offsets", LISTED["offsets"])
def test_empty_segment(offsets: list[int]) -> None:
    empty_segment(offsets, False)


@pytest.mark.parametrize("offsets", LISTED["offsets"])
def test_empty_segment_fixed(offsets: list[int]) -> None:
    empty_segment(offsets, True)


def module_constant_tail(fixed: bool) -> None:
    x = torch.arange(SEQ, dtype=torch.float32, device=DEVICE)
    y = torch.empty_like(x)
    _tail_read[(triton.cdiv(SEQ, 32),)](x, y, SEQ, BLOCK=32, FIXED=fixed)
    assert torch.equal(y, x * 2)


def test_module_constant_tail() -> None:
    module_constant_tail(False)


def test_module_constant_tail_fixed() -> None:
    module_constant_tail(True)


@pytest.fixture
def zeros() -> torch.Tensor:
    return torch.zeros(ROWS_OF_FIXTURE, dtype=torch.float32, device=DEVICE)


def fixture_constant_write(out: torch.Tensor, fixed: bool) -> None:
    n = out.numel()
    _tail_write[(triton.cdiv(n, BLOCK),)](out, n, BLOCK=BLOCK, FIXED=fixed)
    assert torch.equal(out, torch.ones_like(out))


def test_fixture_constant_write(zeros: torch.Tensor) -> None:
    fixture_constant_write(zeros, False)


def test_fixture_constant_write_fixed(zeros: torch.Tensor) -> None:
    fixture_constant_write(zeros, True)
