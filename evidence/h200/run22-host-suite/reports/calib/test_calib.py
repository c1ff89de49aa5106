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
def _copy(src, dst, n, extra: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n + extra, other=0.0)
    tl.store(dst + offs, x, mask=offs < n + extra)


def _run(extra: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    _copy[(triton.cdiv(N + extra, BLOCK),)](x, y, N, extra, BLOCK=BLOCK)
    return x, y


def test_clean_copy() -> None:
    x, y = _run(0)
    assert torch.equal(x, y)


def test_store_one_past_the_end() -> None:
    """markers: 4 B written past y's end; memcheck: that write and the 4 B read past x's end. The result is right."""
    x, y = _run(1)
    assert torch.equal(x, y)


@pytest.mark.gpu_memsafety(expect=[{"kind": "overwrite", "bytes": 4, "region": "past_end"},
                                   {"kind": "overread", "bytes": 4, "region": "past_end"}],
                           issue="planted: the calibration's own off-by-one")
def test_known_off_by_one() -> None:
    """The same bug, declared: an expected finding in markers mode (its overread not checkable there) and memcheck."""
    x, y = _run(1)
    assert torch.equal(x, y)


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
