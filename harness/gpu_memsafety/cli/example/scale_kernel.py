"""A Triton kernel that scales a float32 vector, `out = x * factor`, and its fixed twin.

`scale_buggy` stores one element too many: its store mask is `offs <= n` where it should be `offs < n`,
so the program that covers the end writes out[n], the 4 bytes just past the tensor. `scale_fixed` is
the same kernel with the right mask. Replace both with your own kernel (keep the buggy one if you have
it: a known bug is a test that the harness still sees it).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def scale_buggy(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x * factor, mask=offs <= n)      # off by one: also writes out[n]


@triton.jit
def scale_fixed(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x * factor, mask=offs < n)


def scale(x: torch.Tensor, out: torch.Tensor, factor: float, *, buggy: bool) -> str:
    """Launch one of the two kernels over `x` into `out`; returns the kernel's name."""
    n = x.numel()
    kernel = scale_buggy if buggy else scale_fixed
    grid = (triton.cdiv(n + 1, BLOCK),)      # one program more than needed when n % BLOCK == 0: as in production
    kernel[grid](x, out, n, factor, BLOCK=BLOCK)
    return "scale_buggy" if buggy else "scale_fixed"
