"""The race check's calibration (issue 50): planted races between the program instances of one launch, each
declared with the bytes `pytest --gpu-memsafety` must report where the trace runs (no GPU: Triton's interpreter,
conftest.py sets TRITON_INTERPRET=1), and their clean twins. No access leaves its tensor: memcheck, the markers and
the pages see nothing here; on a GPU the declared races are said not to be checkable in that mode.

4 programs of 16 fp32 elements over 64: a program's slot is elements [16 p, 16 p + 16)."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

N, BLOCK, PROGRAMS = 64, 16, 4
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def _window_sum(src, dst, n, BLOCK: tl.constexpr, WIDTH: tl.constexpr, SPAN: tl.constexpr):
    """dst over the program's window of WIDTH elements: the running sum of src there. WIDTH is a constant, not the
    slot: WIDTH = BLOCK + 1 stores into the first element of the next program's slot."""
    j = tl.arange(0, SPAN)
    offs = tl.program_id(0) * BLOCK + j
    mask = (j < WIDTH) & (offs < n)
    tl.store(dst + offs, tl.cumsum(tl.load(src + offs, mask=mask, other=0.0), 0), mask=mask)


@triton.jit
def _average_next(x, y, n, BLOCK: tl.constexpr):
    """y[i] = (x[i] + x[i + 1]) / 2: in place (y is x), x[16 p + 16] is the next program's, which it overwrites."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    nxt = tl.load(x + offs + 1, mask=offs + 1 < n, other=0.0)
    cur = tl.load(x + offs, mask=offs < n, other=0.0)
    tl.store(y + offs, (cur + nxt) / 2, mask=offs < n)


def _squares() -> torch.Tensor:
    return (torch.arange(N, dtype=torch.float32) ** 2).to(DEVICE)


# elements 16, 32, 48: the first of slots 1..3, written by two programs each: 3 x 4 B
@pytest.mark.gpu_memsafety(expect="race", region="inside", bytes=12)
def test_window_one_past_the_slot():
    dst = torch.zeros(N, device=DEVICE)
    _window_sum[(PROGRAMS,)](_squares(), dst, N, BLOCK=BLOCK, WIDTH=BLOCK + 1, SPAN=2 * BLOCK)


def test_window_clean():
    src, dst = _squares(), torch.zeros(N, device=DEVICE)
    _window_sum[(PROGRAMS,)](src, dst, N, BLOCK=BLOCK, WIDTH=BLOCK, SPAN=BLOCK)
    assert torch.allclose(dst, torch.cumsum(src.view(PROGRAMS, BLOCK), 1).flatten())


# elements 16, 32, 48: read by the program before, written by their own: 3 x 4 B
@pytest.mark.gpu_memsafety(expect="race", region="inside", bytes=12)
def test_average_in_place():
    x = _squares()
    _average_next[(PROGRAMS,)](x, x, N, BLOCK=BLOCK)


def test_average_clean():
    x, y = _squares(), torch.empty(N, device=DEVICE)
    _average_next[(PROGRAMS,)](x, y, N, BLOCK=BLOCK)
    assert torch.allclose(y[:-1], (x[:-1] + x[1:]) / 2)
