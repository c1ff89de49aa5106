"""Byte layout of the pre-dispatch scale buffer, and which bytes the buggy kernel overwrites.

Pure arithmetic (no torch, triton or CUDA), shared by the adapter, the scenarios and the attribution code.
The scale buffer is int32 [padded_max, G/4], G = hidden / 32 UE8M0 bytes per token, with rows padded to
16 bytes (hidden 2304: 72 logical bytes in an 80-byte row). The buggy kernel addresses byte `token*G + g`
(packed); the fixed one `token*row_stride_bytes + g` (strided). Byte ranges are (start, end), end exclusive,
relative to the first byte of the scale tensor, like `gpu_memsafety.model.ByteRange`.
"""
from __future__ import annotations

from gpu_memsafety.upstream.catalogue import version_tuple

GROUP_SIZE = 32          # bf16 elements per UE8M0 scale byte
SCALE_ROW_ALIGN = 16     # bytes: the fixed kernel's rows start 16-byte aligned (TMA-friendly layout)
FP8_E4M3_MAX = 448.0     # largest finite float8 e4m3fn value
AMAX_FLOOR = 1e-10       # float32 floor on a group's absmax, so an all-zero group gets a finite scale

IMPLS = ("cuda", "triton")
MODES = ("packed", "strided")
MODE_CODES = {"packed": 0, "strided": 1}   # the kernels' `mode` argument

# Kernel symbols as compute-sanitizer prints them: the CUDA one is extern "C" (unmangled); Triton names
# its kernel after the jit function.
CUDA_KERNEL_NAME = "pre_dispatch_cuda_kernel"
TRITON_KERNEL_NAME = "pre_dispatch_triton_kernel"
_KERNEL_NAMES = {"cuda": CUDA_KERNEL_NAME, "triton": TRITON_KERNEL_NAME}

ByteRanges = list[tuple[int, int]]


def check_impl(impl: str) -> str:
    if impl not in IMPLS:
        raise ValueError(f"unknown impl {impl!r}; allowed: {', '.join(IMPLS)}")
    return impl


def mode_code(mode: str) -> int:
    if mode not in MODE_CODES:
        raise ValueError(f"unknown mode {mode!r}; allowed: {', '.join(MODES)}")
    return MODE_CODES[mode]


def kernel_name(impl: str, mode: str) -> str:
    """The kernel symbol the sanitizer reports; both modes run the same kernel (mode is an argument)."""
    mode_code(mode)
    return _KERNEL_NAMES[check_impl(impl)]


def scale_row_bytes(hidden: int) -> int:
    """G: logical UE8M0 bytes per token."""
    if hidden <= 0 or hidden % GROUP_SIZE:
        raise ValueError(f"hidden = {hidden} must be a positive multiple of {GROUP_SIZE}")
    return hidden // GROUP_SIZE


def scale_row_int32(hidden: int) -> int:
    """G/4: int32 columns of the scale buffer; G must be a multiple of 4 (hidden a multiple of 128)."""
    groups = scale_row_bytes(hidden)
    if groups % 4:
        raise ValueError(f"hidden = {hidden} gives G = {groups} scale bytes, not a multiple of 4 "
                         f"(hidden must be a multiple of {4 * GROUP_SIZE})")
    return groups // 4


def padded_row_stride(hidden: int) -> int:
    """Bytes per scale row in the padded layout: G rounded up to 16."""
    groups = scale_row_bytes(hidden)
    return -(-groups // SCALE_ROW_ALIGN) * SCALE_ROW_ALIGN


def scale_row_step(hidden: int, mode: str, row_stride_bytes: int) -> int:
    """Bytes between the first scale bytes of consecutive tokens, as the kernel addresses them."""
    return scale_row_bytes(hidden) if mode_code(mode) == 0 else row_stride_bytes


def scale_write_end(hidden: int, num_tokens: int, row_stride_bytes: int, mode: str) -> int:
    """One past the last scale byte the kernel writes (0 when there are no tokens).

    Strided with a padded stride on a packed allocation (the reverse mismatch, hidden 2304, 8 tokens,
    stride 80) ends at 632: byte 631 of a 576-byte buffer.
    """
    if num_tokens <= 0:
        return 0
    step = scale_row_step(hidden, mode, row_stride_bytes)
    return (num_tokens - 1) * step + scale_row_bytes(hidden)


def packed_write_bytes(hidden: int, num_tokens: int, row_stride_bytes: int) -> ByteRanges:
    """Bytes the buggy (packed) kernel writes outside the logical places of a `row_stride_bytes` layout.

    The packed kernel writes bytes [0, num_tokens*G). Of those, a guard check on the padded layout sees
    the ones in a row's padding (offset in row >= G) or in a row at or past num_tokens. Hidden 2304,
    5 tokens, stride 80: [(72, 80), (152, 160), (232, 240), (312, 320)]; row 4 keeps stale bytes 40..71.
    """
    groups = scale_row_bytes(hidden)
    if row_stride_bytes <= 0:
        raise ValueError(f"row_stride_bytes = {row_stride_bytes} must be positive")
    written_end = max(num_tokens, 0) * groups
    ranges: ByteRanges = []
    for row in range(max(num_tokens, 0)):
        start = row * row_stride_bytes + groups
        _append_range(ranges, start, min(start + row_stride_bytes - groups, written_end))
    _append_range(ranges, max(num_tokens, 0) * row_stride_bytes, written_end)
    return ranges


def _append_range(ranges: ByteRanges, start: int, end: int) -> None:
    if end <= start:
        return
    if ranges and ranges[-1][1] >= start:
        ranges[-1] = (ranges[-1][0], max(ranges[-1][1], end))
    else:
        ranges.append((start, end))


def check_scale_layout(*, hidden: int, stride0: int, row_stride_bytes: int, base_address: int) -> None:
    """The fixed host wrapper's checks on the scale buffer; ValueError names the failed check and its numbers.

    stride0 is scale_out.stride(0) in int32 elements; row_stride_bytes is what the kernel will be told.
    """
    quads = scale_row_int32(hidden)
    where = f"(hidden = {hidden}, G = {4 * quads} scale bytes per token)"
    if row_stride_bytes != stride0 * 4:
        raise ValueError(f"scale_out check failed: row_stride_bytes == stride(0) * 4: row_stride_bytes = "
                         f"{row_stride_bytes} but scale_out rows are {stride0 * 4} bytes apart "
                         f"(stride(0) = {stride0} int32) {where}")
    if stride0 < quads:
        raise ValueError(f"scale_out check failed: stride(0) >= G/4: stride(0) = {stride0} int32 < "
                         f"G/4 = {quads}, rows would overlap {where}")
    if row_stride_bytes % SCALE_ROW_ALIGN:
        raise ValueError(f"scale_out check failed: row stride bytes % {SCALE_ROW_ALIGN} == 0: row stride = "
                         f"{row_stride_bytes} bytes, {row_stride_bytes} % {SCALE_ROW_ALIGN} = "
                         f"{row_stride_bytes % SCALE_ROW_ALIGN} {where}")
    if base_address % SCALE_ROW_ALIGN:
        raise ValueError(f"scale_out check failed: base address % {SCALE_ROW_ALIGN} == 0: base = "
                         f"{base_address:#x}, {base_address:#x} % {SCALE_ROW_ALIGN} = "
                         f"{base_address % SCALE_ROW_ALIGN} {where}")


# --- the real sglang kernel (kernels/pre_dispatch/sglang.py), by version ------------------------------------
SGLANG_VERSIONS = ("0.5.18", "0.5.19")
SGLANG_FIXED_FROM = "0.5.19"          # sglang PR #36237: strided addressing and host stride checks
SGLANG_FIX = "sgl-project/sglang#36237"
SGLANG_KERNEL_NAME = "mega_moe_pre_dispatch_kernel"
# Each version's host-side refusal of the other version's scale layout, in the kernel's own words
# (mega_moe_pre_dispatch.cuh: 0.5.18 line 168, TensorMatcher with no strides; 0.5.19 line 221).
SGLANG_REFUSALS = {
    "0.5.18": "Tensor is not contiguous as expected",
    "0.5.19": "buf_x_sf row stride must be 16B-aligned",
}


def sglang_version(impl: str) -> str | None:
    """'0.5.18' for impl 'sglang-0.5.18'; None for our own kernels ('cuda', 'triton')."""
    return impl.removeprefix("sglang-") if impl.startswith("sglang-") else None


def sglang_mode(version: str) -> str:
    """The addressing a version's kernel uses: 'packed' (0.5.12 .. 0.5.18, token*G + g) or 'strided' (0.5.19+)."""
    return "strided" if version_tuple(version) >= version_tuple(SGLANG_FIXED_FROM) else "packed"


def allocated_row_stride(impl: str, variant: str, hidden: int) -> int:
    """Bytes per row of the scale allocation a case's caller made: padded to 16 bytes, except in the reverse
    mismatch (`strided_on_packed`) and in a fixed sglang version's `refusal` case (a packed allocation, as
    pre-fix callers made it)."""
    version = sglang_version(impl)
    packed = variant == "strided_on_packed" or (variant == "refusal" and version is not None
                                                and sglang_mode(version) == "strided")
    return scale_row_bytes(hidden) if packed else padded_row_stride(hidden)
