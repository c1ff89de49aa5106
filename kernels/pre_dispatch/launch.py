"""Adapter for the padded-stride scale write scenario: one `launch` for the CUDA and the Triton kernel.

The kernel quantizes bf16 tokens to float8 e4m3fn with one UE8M0 byte per 32 elements and copies the
top-k ids and weights into padded buffers (kernels/pre_dispatch/pre_dispatch.cu says what it does byte by byte). The
harness hands in the buffers, possibly views into larger guarded byte buffers, and picks the variant:
mode "packed" is the buggy addressing (token*G + g), "strided" the fix (token*row_stride_bytes + g).
`check=True` runs the fixed host wrapper's checks on the scale buffer (strided mode only); check=False with
an explicit row_stride_bytes reproduces the reverse mismatch (padded stride on a packed allocation).

The pure layout helpers are re-exported from gpu_memsafety.kernels.pre_dispatch.layout, which imports no torch. The
kernel modules (and triton, or the CUDA build) are imported only when a launch needs them.
"""
from __future__ import annotations

from types import ModuleType
from typing import Sequence

import torch

from gpu_memsafety.errors import Unsupported
from .layout import (
    IMPLS,
    MODES,
    check_impl,
    check_scale_layout,
    kernel_name,
    mode_code,
    packed_write_bytes,
    padded_row_stride,
    scale_row_bytes,
    scale_row_int32,
    scale_write_end,
)

__all__ = [
    "IMPLS", "MODES", "NO_CUDA", "check_scale_layout", "kernel_name", "launch", "packed_write_bytes",
    "padded_row_stride", "scale_row_bytes", "scale_write_end",
]

NO_CUDA = "needs a CUDA GPU; torch.cuda.is_available() is False"
X_ALIGN = 16       # bytes: the CUDA kernel loads x in 16-byte vectors
Q_ALIGN = 8        # bytes: the CUDA kernel stores 8 fp8 bytes at a time
Q_DTYPES = (torch.uint8, torch.float8_e4m3fn)


def launch(
    impl: str,
    x: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
    q_out: torch.Tensor,
    scale_out: torch.Tensor,
    ids_out: torch.Tensor,
    weights_out: torch.Tensor,
    *,
    num_tokens: int,
    mode: str,
    row_stride_bytes: int | None = None,
    check: bool = True,
) -> None:
    """Run the kernel once: one CTA/program per row of the padded buffers, asynchronously on GPU.

    scale_out is int32 [padded_max, G/4] with unit column stride; its rows may be longer than G bytes.
    row_stride_bytes defaults to scale_out.stride(0) * 4. Raises ValueError for unknown impl/mode, buffers
    of the wrong dtype/shape/device, or (check=True, strided) a scale layout the fixed wrapper refuses;
    Unsupported when impl "cuda" finds no GPU.
    """
    check_impl(impl)
    code = mode_code(mode)
    if impl == "cuda" and not torch.cuda.is_available():
        raise Unsupported(NO_CUDA)
    hidden = validate_buffers(impl, x, topk_ids, topk_weights, q_out, scale_out, ids_out, weights_out,
                              num_tokens=num_tokens)
    stride = scale_out.stride(0) * 4 if row_stride_bytes is None else int(row_stride_bytes)
    if stride <= 0:
        raise ValueError(f"row_stride_bytes = {stride} must be positive")
    if check and mode == "strided":
        check_scale_layout(hidden=hidden, stride0=scale_out.stride(0), row_stride_bytes=stride,
                           base_address=scale_out.data_ptr())
    _kernel_module(impl).launch(x, topk_ids, topk_weights, q_out, scale_out, ids_out, weights_out,
                                num_tokens=num_tokens, mode_code=code, row_stride_bytes=stride)


def validate_buffers(
    impl: str, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, q_out: torch.Tensor,
    scale_out: torch.Tensor, ids_out: torch.Tensor, weights_out: torch.Tensor, *, num_tokens: int,
) -> int:
    """Structural checks every launch needs (both variants); returns hidden."""
    _expect_same_device(impl, x=x, topk_ids=topk_ids, topk_weights=topk_weights, q_out=q_out,
                        scale_out=scale_out, ids_out=ids_out, weights_out=weights_out)
    _expect("x", x, (torch.bfloat16,), contiguous=True, align=X_ALIGN)
    _expect("topk_ids", topk_ids, (torch.int32,), contiguous=True)
    _expect("ids_out", ids_out, (torch.int64,), contiguous=True)
    hidden, quads = x.shape[1], scale_row_int32(x.shape[1])
    padded_max, top_k = ids_out.shape[0], topk_ids.shape[1]
    if not 0 <= num_tokens <= padded_max:
        raise ValueError(f"need 0 <= num_tokens <= padded_max; got num_tokens = {num_tokens}, "
                         f"padded_max = {padded_max} (ids_out rows)")
    if top_k < 1:
        raise ValueError(f"top_k = {top_k} must be at least 1")
    _expect_rows("x", x, num_tokens)
    _expect_rows("topk_ids", topk_ids, num_tokens)
    _expect("topk_weights", topk_weights, (torch.float32,), shape=topk_ids.shape, contiguous=True)
    _expect("ids_out", ids_out, (torch.int64,), shape=(padded_max, top_k))
    _expect("weights_out", weights_out, (torch.float32,), shape=(padded_max, top_k), contiguous=True)
    _expect("q_out", q_out, Q_DTYPES, shape=(padded_max, hidden), contiguous=True, align=Q_ALIGN)
    _expect("scale_out", scale_out, (torch.int32,), shape=(padded_max, quads))
    if scale_out.stride(1) != 1:
        raise ValueError(f"scale_out: column stride must be 1 int32; got stride {tuple(scale_out.stride())}")
    return hidden


def _expect(
    name: str, tensor: torch.Tensor, dtypes: Sequence[torch.dtype], *, shape: Sequence[int] | None = None,
    contiguous: bool = False, align: int = 1,
) -> None:
    if tensor.dtype not in dtypes:
        raise ValueError(f"{name}: dtype must be {' or '.join(map(str, dtypes))}; got {tensor.dtype}")
    if tensor.dim() != 2:
        raise ValueError(f"{name}: must be 2-D; got shape {tuple(tensor.shape)}")
    if shape is not None and tuple(tensor.shape) != tuple(shape):
        raise ValueError(f"{name}: shape must be {tuple(shape)}; got {tuple(tensor.shape)}")
    if contiguous and not tensor.is_contiguous():
        raise ValueError(f"{name}: must be contiguous; got stride {tuple(tensor.stride())}")
    if tensor.data_ptr() % align:
        raise ValueError(f"{name}: base address {tensor.data_ptr():#x} must be {align}-byte aligned")


def _expect_rows(name: str, tensor: torch.Tensor, num_tokens: int) -> None:
    if tensor.shape[0] < num_tokens:
        raise ValueError(f"{name}: needs at least num_tokens = {num_tokens} rows; got {tensor.shape[0]}")


def _expect_same_device(impl: str, **tensors: torch.Tensor) -> None:
    devices = {name: tensor.device for name, tensor in tensors.items()}
    if len(set(devices.values())) != 1:
        listed = ", ".join(f"{name} on {device}" for name, device in devices.items())
        raise ValueError(f"all buffers must be on one device; got {listed}")
    device = devices["x"]
    if impl == "cuda" and device.type != "cuda":
        raise ValueError(f"impl 'cuda' needs CUDA tensors; the buffers are on {device}")


def _kernel_module(impl: str) -> ModuleType:
    if impl == "cuda":
        from . import cuda

        return cuda
    from . import triton_twin

    return triton_twin
