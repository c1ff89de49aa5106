"""Triton version of the pre-dispatch kernel: same arguments, same two addressing modes, same bytes.

It runs compiled on a GPU, and on CPU tensors through Triton's interpreter. The interpreter writes through
raw pointers into the tensors' real storage, so a packed scale write into padded rows lands in the row
padding exactly as on the GPU, where guard markers see it. For CPU tensors `launch` runs the interpreter
when TRITON_INTERPRET=1 was set before triton was first imported (triton.language's own helpers are
jit functions, fixed at that import), and refuses CPU tensors otherwise.

Float8 rounding is done with integer arithmetic (round to nearest even), and the scale division with
`div_rn`, so the compiled kernel and the interpreter give the same bits as kernels/pre_dispatch/ref.py.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from .layout import GROUP_SIZE, TRITON_KERNEL_NAME, scale_row_bytes

assert GROUP_SIZE == 32, "pre_dispatch_triton_kernel hard-codes 32-element groups"


@triton.jit
def _e4m3_rne_bits(v):
    """float32 already clipped to +-448 -> float8 e4m3fn bits (int32), round to nearest even."""
    bits = v.to(tl.int32, bitcast=True)
    sign = tl.where(bits < 0, 0x80, 0)
    mag = bits & 0x7FFFFFFF
    exp = mag >> 23
    # Normal e4m3 (|v| >= 2^-6, fp32 biased exponent >= 121): keep 3 of 23 mantissa bits, rebias 127 -> 7.
    normal = ((mag + 0x7FFFF + ((mag >> 20) & 1)) >> 20) - (120 << 3)
    # Subnormal e4m3 (steps of 2^-9): round the full significand shifted right by 141 - exp.
    significand = (mag & 0x7FFFFF) | 0x800000
    shift = tl.maximum(tl.minimum(141 - exp, 31), 1)   # 21..31 where this branch is taken
    one = tl.full(v.shape, 1, tl.int32)
    subnormal = (significand + (one << (shift - 1)) - 1 + ((significand >> shift) & 1)) >> shift
    return tl.where(exp >= 121, normal, subnormal) | sign


@triton.jit
def pre_dispatch_triton_kernel(
    x_ptr,              # bf16 bits as int16 [>= num_tokens, HIDDEN]
    topk_ids_ptr,       # int32 [>= num_tokens, top_k]
    topk_weights_ptr,   # float32 [>= num_tokens, top_k]
    q_ptr,              # uint8 e4m3fn bytes [padded_max, HIDDEN]
    scale_ptr,          # uint8 view of the scale buffer, rows row_stride_bytes apart
    ids_out_ptr,        # int64 [padded_max, top_k]
    weights_out_ptr,    # float32 [padded_max, top_k]
    num_tokens,
    top_k,
    mode,               # 0 packed (the bug), 1 strided (the fix)
    row_stride_bytes,
    HIDDEN: tl.constexpr,
    GROUPS_POW2: tl.constexpr,
    TOPK_POW2: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    k = tl.arange(0, TOPK_POW2)
    k_mask = k < top_k
    NUM_GROUPS: tl.constexpr = HIDDEN // 32
    if row < num_tokens:
        g = tl.arange(0, GROUPS_POW2)
        j = tl.arange(0, 32)
        offs = g[:, None] * 32 + j[None, :]
        g_mask = g < NUM_GROUPS
        raw = tl.load(x_ptr + row * HIDDEN + offs, mask=g_mask[:, None], other=0)
        xf = (raw.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)
        amax = tl.max(tl.abs(xf), axis=1)
        ratio = tl.math.div_rn(tl.maximum(amax, 1e-10), 448.0).to(tl.int32, bitcast=True)
        e = ((ratio >> 23) & 0xFF) + ((ratio & 0x7FFFFF) != 0).to(tl.int32)
        inv = ((254 - e) << 23).to(tl.float32, bitcast=True)
        scaled = tl.minimum(tl.maximum(xf * inv[:, None], -448.0), 448.0)
        q = _e4m3_rne_bits(scaled).to(tl.uint8)
        tl.store(q_ptr + row * HIDDEN + offs, q, mask=g_mask[:, None])
        # The seeded bug: packed addressing ignores the buffer's padded row stride.
        step = tl.where(mode == 0, NUM_GROUPS, row_stride_bytes).to(tl.int64)
        tl.store(scale_ptr + row * step + g, e.to(tl.uint8), mask=g_mask)
        ids = tl.load(topk_ids_ptr + row * top_k + k, mask=k_mask, other=0)
        weights = tl.load(topk_weights_ptr + row * top_k + k, mask=k_mask, other=0.0)
        tl.store(ids_out_ptr + row * top_k + k, ids.to(tl.int64), mask=k_mask)
        tl.store(weights_out_ptr + row * top_k + k, weights, mask=k_mask)
    else:
        tl.store(ids_out_ptr + row * top_k + k, tl.full([TOPK_POW2], -1, tl.int64), mask=k_mask)
        tl.store(weights_out_ptr + row * top_k + k, tl.zeros([TOPK_POW2], tl.float32), mask=k_mask)


def interpreter_active() -> bool:
    """Whether this process's Triton runs kernels in its interpreter (TRITON_INTERPRET=1 at import)."""
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(pre_dispatch_triton_kernel, InterpretedFunction)


def launch(
    x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, q_out: torch.Tensor,
    scale_out: torch.Tensor, ids_out: torch.Tensor, weights_out: torch.Tensor, *,
    num_tokens: int, mode_code: int, row_stride_bytes: int,
) -> None:
    """Launch one program per padded row; tensors already validated by gpu_memsafety.kernels.pre_dispatch."""
    padded_max, hidden = q_out.shape
    if padded_max == 0:
        return
    top_k = ids_out.shape[1]
    if x.device.type == "cpu" and not interpreter_active():
        raise RuntimeError(f"{TRITON_KERNEL_NAME} on CPU tensors runs only in Triton's "
                           "interpreter: set TRITON_INTERPRET=1 before triton is first imported "
                           "(this process imported it without)")
    kernel: Any = pre_dispatch_triton_kernel
    kernel[(padded_max,)](
        x.view(torch.int16), topk_ids, topk_weights, q_out.view(torch.uint8),
        scale_out.view(torch.uint8), ids_out, weights_out,
        num_tokens, top_k, mode_code, row_stride_bytes,
        HIDDEN=hidden,
        GROUPS_POW2=triton.next_power_of_2(scale_row_bytes(hidden)),
        TOPK_POW2=triton.next_power_of_2(top_k),
    )
