"""The bare flag's calibration (issue 41): planted reads and writes of known width and place, each declared with the
bytes `pytest --gpu-memsafety` (no mode: the complete set) must report, so the run's verdicts say it: `expected
finding` when the bytes are right, `finding` or `unexpectedly clean` when they are not. In a plain run (H200, field
call 1) the first three tests pass silently and test_read_4_before_start ends the CUDA context (the read lands before
a fresh segment of torch's caching allocator: an illegal address), so every later test fails with it. Triton only (no nvcc build in the budget); the CUDA shared-memory cases are the default
scenario matrix's (planted_shared, planted_race). Without a GPU the same tests run on the CPU in Triton's interpreter
(conftest.py sets TRITON_INTERPRET=1 there), and the bare flag's trace must report the same bytes
(tests/host/test_host_trace.py runs it so on every CPU test run).

N = 1000 fp32 elements: 4,000 B, ending 96 B before a 256-byte boundary."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

N = 1000
BLOCK = 1024
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _synchronize() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


@triton.jit
def _copy_shifted(src, dst, n, shift: tl.constexpr, BLOCK: tl.constexpr):
    """dst[i] = src[i + shift] for i < n: `shift` elements read past src's end (before its start when negative)."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(src + offs + shift, mask=offs < n, other=0.0)
    tl.store(dst + offs, x, mask=offs < n)


@triton.jit
def _fill_shifted(dst, n, shift: tl.constexpr, BLOCK: tl.constexpr):
    """dst[i + shift] = 1 for i < n: `shift` elements written past dst's end (before its start when negative)."""
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs + shift, tl.full((BLOCK,), 1.0, tl.float32), mask=offs < n)


@triton.jit
def _vector_tail(src, dst, BLOCK: tl.constexpr):
    """Unmasked: reads src[0 .. BLOCK) where src holds BLOCK - 2 elements: the last 8 B past its end, in the same
    16-byte-aligned vector load as 8 B inside it."""
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs))


@triton.jit
def _wide_read(src, dst, idx):
    """One 8-byte load at element `idx` of an int64 view."""
    tl.store(dst, tl.load(src + idx))


def _grid() -> tuple[int]:
    return (1,)


def test_clean() -> None:
    src = torch.arange(N, dtype=torch.float32, device=DEVICE)
    dst = torch.empty_like(src)
    _copy_shifted[_grid()](src, dst, N, 0, BLOCK=BLOCK)
    assert torch.equal(dst, src)


@pytest.mark.gpu_memsafety(expect={"kind": "overread", "bytes": 4, "region": "past_end", "size": 4000})
def test_read_4_past_end() -> None:
    src = torch.arange(N, dtype=torch.float32, device=DEVICE)
    dst = torch.empty_like(src)
    _copy_shifted[_grid()](src, dst, N, 1, BLOCK=BLOCK)
    assert torch.equal(dst[: N - 1], src[1:])


@pytest.mark.gpu_memsafety(expect={"kind": "overread", "bytes": 64, "region": "past_end", "size": 4000})
def test_read_64_past_end() -> None:
    src = torch.arange(N, dtype=torch.float32, device=DEVICE)
    dst = torch.empty_like(src)
    _copy_shifted[_grid()](src, dst, N, 16, BLOCK=BLOCK)
    assert torch.equal(dst[: N - 16], src[16:])


@pytest.mark.gpu_memsafety(expect={"kind": "overread", "bytes": 4, "region": "before_start", "size": 4000})
def test_read_4_before_start() -> None:
    src = torch.arange(N, dtype=torch.float32, device=DEVICE)
    dst = torch.empty_like(src)
    _copy_shifted[_grid()](src, dst, N, -1, BLOCK=BLOCK)
    assert torch.equal(dst[1:], src[: N - 1])


@pytest.mark.gpu_memsafety(expect={"kind": "overwrite", "bytes": 4, "region": "past_end", "size": 4000})
def test_write_4_past_end() -> None:
    out = torch.zeros(N, dtype=torch.float32, device=DEVICE)
    _fill_shifted[_grid()](out, N, 1, BLOCK=BLOCK)
    assert torch.equal(out[1:], torch.ones(N - 1, device=DEVICE))


@pytest.mark.gpu_memsafety(expect={"kind": "overwrite", "bytes": 8, "region": "before_start", "size": 4000})
def test_write_8_before_start() -> None:
    out = torch.zeros(N, dtype=torch.float32, device=DEVICE)
    _fill_shifted[_grid()](out, N, -2, BLOCK=BLOCK)
    assert torch.equal(out[: N - 2], torch.ones(N - 2, device=DEVICE))


@pytest.mark.gpu_memsafety(expect={"kind": "overread", "bytes": 8, "region": "past_end", "size": 4088})
def test_vector_read_8_past_end() -> None:
    src = torch.ones(1022, dtype=torch.float32, device=DEVICE)        # 4,088 B: BLOCK - 2 elements
    dst = torch.empty(1024, dtype=torch.float32, device=DEVICE)
    _vector_tail[_grid()](src, dst, BLOCK=BLOCK)
    assert torch.equal(dst[:1022], src)


@pytest.mark.gpu_memsafety(expect={"kind": "overread", "bytes": 4, "region": "past_end", "size": 4004})
def test_wide_read_straddling_the_end() -> None:
    """An 8-byte load at 4000..4007 of a 4,004-byte tensor: 4 of its 8 B past the end (the finding says its width)."""
    raw = torch.zeros(1001, dtype=torch.float32, device=DEVICE)
    dst = torch.zeros(1, dtype=torch.int64, device=DEVICE)
    as_int64 = torch.empty(0, dtype=torch.int64, device=DEVICE).set_(raw.untyped_storage(), 0, (500,), (1,))
    _wide_read[_grid()](as_int64, dst, 500)
    _synchronize()


@pytest.mark.gpu_memsafety(expect=[{"kind": "overread", "bytes": 4, "region": "past_end", "size": 4000},
                                   {"kind": "overwrite", "bytes": 4, "region": "past_end", "size": 4000}])
def test_read_and_write_in_one_test() -> None:
    src = torch.arange(N, dtype=torch.float32, device=DEVICE)
    dst = torch.empty_like(src)
    _copy_shifted[_grid()](src, dst, N, 1, BLOCK=BLOCK)
    _fill_shifted[_grid()](dst, N, 1, BLOCK=BLOCK)
    _synchronize()
