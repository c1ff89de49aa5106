"""Calibration of `pytest --gpu-memsafety` on a GPU (ours, beside the upstream suite the device script runs): every
test says what each mode must report for it. Run plain, every test passes: the planted bugs are silent."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

N = 1000            # 4,000 B of fp32: the tensor ends 96 B before its 256-byte boundary
BLOCK = 256


@triton.jit
def _fill(dst, n, extra: tl.constexpr, BLOCK: tl.constexpr):
    """dst[i] = i + 1 for i < n + extra: with extra = 1, 4 B written past dst's end (no load: memcheck, which ends a
    kernel at its first bad access, sees the write itself; the value 1001.0 is not the 0xA5 marker)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, (offs + 1).to(tl.float32), mask=offs < n + extra)


@triton.jit
def _shift(src, dst, n, extra: tl.constexpr, BLOCK: tl.constexpr):
    """dst[i] = src[i + extra] for i < n: with extra = 1, 4 B read past src's end, every write inside dst."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs + extra, mask=offs < n, other=0.0)
    tl.store(dst + offs, x, mask=offs < n)


def _filled(extra: int) -> torch.Tensor:
    y = torch.empty(N, dtype=torch.float32, device="cuda")
    _fill[(triton.cdiv(N + extra, BLOCK),)](y, N, extra, BLOCK=BLOCK)
    return y


def _shifted(extra: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    _shift[(triton.cdiv(N, BLOCK),)](x, y, N, extra, BLOCK=BLOCK)
    return x, y


EXPECTED = torch.arange(1, N + 1, dtype=torch.float32)


def test_clean_fill() -> None:
    assert torch.equal(_filled(0).cpu(), EXPECTED)


def test_store_one_past_the_end() -> None:
    """markers and memcheck: 4 B written past the end of `alloc 4000 B` (bytes 4000..4003). The result is right."""
    assert torch.equal(_filled(1).cpu(), EXPECTED)


def test_read_one_past_the_end() -> None:
    """memcheck: 4 B read past the end of x (bytes 4000..4003); markers: clean (they see writes only)."""
    x, y = _shifted(1)
    assert torch.equal(y[: N - 1], x[1:])


@pytest.mark.gpu_memsafety(expect="overwrite", bytes=4, region="past_end", size=N * 4,
                           issue="planted: the calibration's own off-by-one")
def test_known_off_by_one() -> None:
    """The store past the end, declared: an expected finding in markers and memcheck mode."""
    assert torch.equal(_filled(1).cpu(), EXPECTED)


def test_memory_stats_break() -> None:
    """A pluggable allocator has no memory statistics (pytorch#133281): not applicable; own result from a plain run."""
    x = torch.ones(10, device="cuda")
    assert torch.cuda.memory_allocated() >= x.numel() * 4


def test_cudnn_benchmark_break() -> None:
    """cudnn.benchmark asks the allocator for cacheInfo (pytorch#98481): not applicable; own result from a plain run."""
    torch.backends.cudnn.benchmark = True
    try:
        conv = torch.nn.Conv2d(3, 8, 3).cuda()
        out = conv(torch.randn(2, 3, 16, 16, device="cuda"))
        assert out.shape == (2, 8, 14, 14)
    finally:
        torch.backends.cudnn.benchmark = False


def test_graph_capture_break() -> None:
    """Allocations during a CUDA graph capture are not guarded (pytorch#163257): not applicable."""
    x = torch.ones(64, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        y = x * 2
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = x * 2
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2)


def test_cpu_only() -> None:
    """No CUDA memory: nothing to guard (not applicable)."""
    assert torch.arange(4).sum().item() == 6
