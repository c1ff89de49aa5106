"""Bit-exact PyTorch reference for the pre-dispatch kernel (CUDA and Triton versions).

Float32 math as the kernels do it: absmax per 32-element group, floored at 1e-10f; raw = absmax / 448
(IEEE float32 division); the UE8M0 byte e is raw's biased exponent, plus one when raw is not a power of two
(so 2^(e-127) is the smallest power of two >= raw); values are x * 2^(127-e) (exact), clipped to +-448 and
rounded to nearest-even float8 e4m3fn. Inputs must be finite (NaN and inf give unspecified bytes).
"""
from __future__ import annotations

import torch

from .layout import AMAX_FLOOR, FP8_E4M3_MAX, GROUP_SIZE, scale_row_bytes

_EXP_MASK = 0xFF
_MANTISSA_MASK = 0x7FFFFF


def ue8m0_exponent_torch(amax: torch.Tensor) -> torch.Tensor:
    """UE8M0 byte (int32) for float32 group absmax values, as `cast_to_ue8m0(max(amax, 1e-10f) / 448.0f)`."""
    floor = torch.tensor(AMAX_FLOOR, dtype=torch.float32)
    raw = torch.maximum(amax.float(), floor) / torch.tensor(FP8_E4M3_MAX, dtype=torch.float32)
    bits = raw.view(torch.int32)
    return ((bits >> 23) & _EXP_MASK) + ((bits & _MANTISSA_MASK) != 0).to(torch.int32)


def inverse_scale_torch(exponent: torch.Tensor) -> torch.Tensor:
    """2^(127-e) as float32, built from its bits like the kernels do."""
    return ((254 - exponent.to(torch.int32)) << 23).view(torch.float32)


def e4m3_bytes_torch(values: torch.Tensor) -> torch.Tensor:
    """Float32 values -> float8 e4m3fn bytes (uint8): clip to +-448, round to nearest even."""
    clipped = torch.clamp(values.float(), -FP8_E4M3_MAX, FP8_E4M3_MAX)
    return clipped.to(torch.float8_e4m3fn).view(torch.uint8)


def quantize_torch(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """bf16 [n, hidden] -> (fp8 bytes uint8 [n, hidden], UE8M0 bytes uint8 [n, hidden/32])."""
    rows, hidden = x.shape
    groups = x.float().reshape(rows, scale_row_bytes(hidden), GROUP_SIZE)
    exponent = ue8m0_exponent_torch(groups.abs().amax(dim=-1))
    scaled = groups * inverse_scale_torch(exponent).unsqueeze(-1)
    return e4m3_bytes_torch(scaled).reshape(rows, hidden), exponent.to(torch.uint8)


def pre_dispatch_reference(
    x: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
    num_tokens: int,
    padded_max: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(q uint8 [num_tokens, H], scale bytes uint8 [num_tokens, G], ids int64 [P, topk], weights f32 [P, topk]).

    Rows num_tokens..padded_max-1 of ids are -1 and of weights 0; the kernels leave the fp8 and scale rows
    of those padded tokens unwritten, so the reference returns only the first num_tokens rows of both.
    """
    if not 0 <= num_tokens <= padded_max:
        raise ValueError(f"need 0 <= num_tokens <= padded_max; got num_tokens = {num_tokens}, "
                         f"padded_max = {padded_max}")
    x_cpu = x[:num_tokens].detach().to("cpu", torch.bfloat16)
    q, scale = quantize_torch(x_cpu)
    topk = topk_ids.shape[1]
    ids = torch.full((padded_max, topk), -1, dtype=torch.int64)
    weights = torch.zeros((padded_max, topk), dtype=torch.float32)
    ids[:num_tokens] = topk_ids[:num_tokens].detach().cpu().to(torch.int64)
    weights[:num_tokens] = topk_weights[:num_tokens].detach().cpu().float()
    return q, scale, ids, weights


def sample_x(rows: int, hidden: int, *, seed: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """bf16 tokens that reach every rounding path: groups spanning 1e-4..1e4, an all-zero group (amax floor),
    a group whose absmax is 3.5 = 448 * 2^-7 (scale exactly a power of two, values reaching 448), and, since
    bf16 has 8 significant bits and e4m3 4, many exact round-to-nearest-even ties, subnormal ones included.
    """
    gen = torch.Generator().manual_seed(seed)
    groups = scale_row_bytes(hidden)
    magnitude = 10.0 ** (torch.rand(rows, groups, 1, generator=gen) * 8 - 4)
    x = torch.randn(rows, groups, GROUP_SIZE, generator=gen) * magnitude
    if groups > 2:
        x[:, 1] = 0.0
        x[:, 2] = x[:, 2].clamp(-3.0, 3.0)
        x[:, 2, 5] = -3.5
    return x.reshape(rows, hidden).to(device=device, dtype=torch.bfloat16)
