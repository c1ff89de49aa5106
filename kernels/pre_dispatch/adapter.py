"""Harness adapter for the MXFP8 pre-dispatch kernel: guarded buffers in, one launch, outputs out.

The scale buffer is the watched one: its rows are padded exactly as the real caller pads them (or packed,
for the reverse mismatch), and every padding byte, unused row and guard byte holds the marker.
impl `sglang-<version>` runs the real sglang kernel (kernels/pre_dispatch/sglang.py) on the same buffers, fed
as that version's callers fed it; its outputs are compared with our model's (the bit-exact torch reference,
kernels/pre_dispatch/ref.py) on the logical bytes.
"""
from __future__ import annotations

from typing import Any

from gpu_memsafety.errors import Unsupported
from gpu_memsafety.kernels.pre_dispatch import layout as PL

TOPK = 8


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo
    from gpu_memsafety.kernels.pre_dispatch.launch import launch

    p = case.params
    if p["impl"] != "triton" and ctx.device.type != "cuda":
        raise Unsupported("needs a CUDA GPU; torch.cuda.is_available() is False")
    version = PL.sglang_version(p["impl"])
    if version is not None:
        return _run_sglang(case, ctx, version)
    hidden, nt = p["hidden"], p["num_tokens"]
    x, ids, weights, q_out, scale, ids_out, weights_out = _buffers(case, ctx)

    def once() -> None:
        if case.variant == "strided_on_packed":
            # A caller that passes the padded stride for a buffer it allocated packed: the host check that
            # compares the stride with the tensor is what the fix adds, so it is bypassed to reproduce the bug.
            launch(p["impl"], x, ids, weights, q_out, scale, ids_out, weights_out, num_tokens=nt, mode="strided",
                   row_stride_bytes=PL.padded_row_stride(hidden), check=False)
        else:
            launch(p["impl"], x, ids, weights, q_out, scale, ids_out, weights_out, num_tokens=nt, mode=case.variant)

    once()
    return RunInfo(kernel=PL.kernel_name(p["impl"], "strided"),
                   outputs={"q": q_out[:nt].view(torch.int8), "scale": scale[:nt],
                            "ids": ids_out, "weights": weights_out}, relaunch=once)


def _buffers(case: Any, ctx: Any) -> tuple[Any, ...]:
    """x, top-k ids and weights (inputs), q, the watched scale rows, ids and weights out: guarded, as the caller
    lays them out (the scale allocation's row stride from PL.allocated_row_stride)."""
    import torch

    p = case.params
    hidden, nt, pm = p["hidden"], p["num_tokens"], p["padded_max"]
    g = PL.scale_row_bytes(hidden)
    stride = PL.allocated_row_stride(p["impl"], case.variant, hidden)
    x = ctx.tensor("x", (nt, hidden), torch.bfloat16)
    x.copy_(ctx.randn((nt, hidden)) * 3)
    ids = ctx.tensor("topk_ids", (nt, TOPK), torch.int32)
    ids.copy_(torch.randint(0, 256, (nt, TOPK), generator=ctx.generator(), dtype=torch.int32).to(ctx.device))
    weights = ctx.tensor("topk_weights", (nt, TOPK), torch.float32)
    weights.copy_(torch.rand((nt, TOPK), generator=ctx.generator()).to(ctx.device))
    q_out = ctx.tensor("q", (pm, hidden), torch.uint8)
    scale = ctx.rows("scale", rows=pm, row_bytes=g, row_stride=stride, used_rows=nt, dtype=torch.int32, watch=True)
    ids_out = ctx.tensor("ids_out", (pm, TOPK), torch.int64)
    weights_out = ctx.tensor("weights_out", (pm, TOPK), torch.float32)
    return x, ids, weights, q_out, scale, ids_out, weights_out


class ContractBroken(RuntimeError):
    """A version's host-side refusal disappeared or changed: reported as a failure, never as clean."""


def _run_sglang(case: Any, ctx: Any, version: str) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo
    from gpu_memsafety.kernels.pre_dispatch import sglang as S
    from gpu_memsafety.kernels.pre_dispatch.ref import pre_dispatch_reference

    p = case.params
    hidden, nt, pm = p["hidden"], p["num_tokens"], p["padded_max"]
    g = PL.scale_row_bytes(hidden)
    mode = PL.sglang_mode(version)
    refusal = case.variant == "refusal"
    capability = tuple(torch.cuda.get_device_capability(ctx.device))
    S.load(version, capability)              # build (or reuse) before any buffer exists: Unsupported says why not
    # The allocation as this case's caller made it (PL.allocated_row_stride). The view handed over: the one this
    # version's callers passed, or in `refusal` the other one.
    stride = PL.allocated_row_stride(p["impl"], case.variant, hidden)
    x, ids, weights, q_out, scale, ids_out, weights_out = _buffers(case, ctx)
    contiguous = scale.as_strided((pm, g // 4), (g // 4, 1))      # G bytes per row over the same allocation
    padded = scale.as_strided((pm, g // 4), (stride // 4, 1))
    view = (padded if mode == "packed" else contiguous) if refusal else (contiguous if mode == "packed" else padded)
    kernel = f"{PL.SGLANG_KERNEL_NAME} [sglang {version}]"

    def once() -> None:
        S.launch(version, x, ids, weights, q_out.view(torch.int8), view, ids_out, weights_out)

    if refusal:
        expected = PL.SGLANG_REFUSALS[version]
        try:
            once()
        except RuntimeError as exc:    # tvm-ffi raises the wrapper's RuntimeCheck / TensorMatcher error so
            if expected not in str(exc):
                raise ContractBroken(f"sglang {version} refused the {'padded' if mode == 'packed' else 'contiguous'} "
                                     f"scale view with another message than {expected!r}: {exc}") from exc
            return RunInfo(kernel=kernel, launches=0, notes={"upstream": f"sglang {version}", "refused": str(exc)})
        raise ContractBroken(f"sglang {version} accepted a {'padded' if mode == 'packed' else 'contiguous'} scale "
                             f"view it refused before ({expected!r}): the host-side contract changed")
    once()
    # Our model (the bit-exact reference) on the logical bytes: quantized values, scale bytes per token, top-k.
    ref_q, ref_s, ref_ids, ref_w = pre_dispatch_reference(x, ids, weights, nt, pm)
    got_s = _scale_rows(scale, nt, g, stride, g if mode == "packed" else stride)
    mismatch = [name for name, got, want in (("quantized values", q_out[:nt].cpu(), ref_q),
                                             ("scale bytes", got_s, ref_s.reshape(nt, g)),
                                             ("top-k ids", ids_out.cpu(), ref_ids),
                                             ("top-k weights", weights_out.cpu(), ref_w))
                if not torch.equal(got, want.to(got.dtype))]
    if mismatch:
        raise ContractBroken(f"sglang {version}'s outputs differ from the model (kernels/pre_dispatch/ref.py) on the "
                             f"logical bytes: {', '.join(mismatch)}")
    return RunInfo(kernel=kernel, outputs={"q": q_out[:nt].view(torch.int8), "ids": ids_out, "weights": weights_out},
                   notes={"upstream": f"sglang {version}", "model_bit_exact": True}, relaunch=once)


def _scale_rows(scale: Any, nt: int, g: int, stride: int, step: int) -> Any:
    """Token t's G scale bytes as the kernel wrote them (at t*step), read from the allocation's bytes."""
    import torch

    flat = scale.as_strided((scale.shape[0] * stride // 4,), (1,)).view(torch.uint8).cpu()
    return torch.stack([flat[t * step:t * step + g] for t in range(nt)]) if nt else flat[:0].reshape(0, g)
