"""Planted calibration kernels (the harness's own bugs with known bytes) and what their adapters share."""
from __future__ import annotations

from typing import Any, Sequence


def checked_case(case: Any, ctx: Any, variants: Sequence[str]) -> tuple[str, int, str]:
    """(impl, n, variant) of a planted case with an `impl` (triton or cuda) and an `n`: an unknown variant, or a
    CUDA kernel without a CUDA device, is Unsupported with what was needed and what was found."""
    from gpu_memsafety.errors import Unsupported
    impl, n, variant = case.params["impl"], case.params["n"], case.variant
    if variant not in variants:
        raise Unsupported(f"unknown variant {variant!r}; known: {', '.join(variants)}")
    if impl == "cuda" and ctx.device.type != "cuda":
        raise Unsupported("needs a CUDA GPU; torch.cuda.is_available() is False")
    return impl, n, variant
