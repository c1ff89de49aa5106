"""Adapter for triton_kernels' MoE matmul with mxfp4 weights on Hopper (the last-expert OOB read).

Why this exists: it is the only code that touches triton_kernels and the GPU for this scenario. It builds
expert weights the way sglang does (bf16 -> mxfp4 along K, optional sm90 scale pad to round_up(K,128)/32
groups of byte 127, Hopper value and scale swizzle with num_warps=8), moves the swizzled scale storage into
a buffer the harness allocates (so the storage ends flush with its allocation and memcheck sees the
overread), routes tokens so the last expert is used, and launches the matmul.
The byte arithmetic it must agree with lives in `gpu_memsafety.kernels.mxfp4.layout` (pure); `prepare` checks the real
storage against it and stops loudly on any difference.

API generations: `matmul_ogs` (copy A, sgl-kernel 0.3.21) and `matmul` (copy C, sglang-kernel 0.4.6.post1, the
copy sglang 0.5.18/0.5.19 pin; copy D, sglang-kernel 0.4.10). Both are called as sglang calls them: the
library's default layouts for the device (`make_default_matmul_mxfp4_w_layout` / `..._w_scale_layout`,
num_warps=8; Hopper swizzles on sm_90), the pad as the chosen policy applies it, and for `matmul` sglang's
routing (topk -> ragged metadata, gather = col_sorted // top_k) and PrecisionConfig(b_mx_scale=...).
On sm_90 the swizzled scale storage is checked against `gpu_memsafety.kernels.mxfp4.layout` before anything runs; on other
architectures the library's own layout is used as it is and the case reports what it finds.
torch, triton and triton_kernels are imported inside functions: importing this module needs none of them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from gpu_memsafety.kernels.mxfp4 import layout as L
from gpu_memsafety.errors import Unsupported
from gpu_memsafety.kernels.mxfp4.triton_kernels_locator import Located, find_triton_kernels

if TYPE_CHECKING:
    import torch

# The HOPPER_SCALE layout (the one gpu_memsafety.kernels.mxfp4.layout models) is what triton_kernels picks on sm90 only.
HOPPER = (9, 0)
# 64 tokens, top-2, last expert forced: 35 memcheck records unpadded and 0 padded on the H200 (results/h200/run3-last-expert.md).
DEFAULT_TOKENS = 64
DEFAULT_TOP_K = 2

ScaleAllocator = Callable[[int], "torch.Tensor"]
FlagsCallback = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Prepared:
    """Quantized, swizzled expert weights whose scale storage sits in the harness's buffer."""

    E: int
    N: int
    K: int
    padded: bool
    pad: str                    # the pad policy: "none", "sglang", "vllm" (gpu_memsafety.kernels.mxfp4.layout.PAD_POLICIES)
    device: Any                 # torch.device
    hopper_model: bool          # the storage was checked against gpu_memsafety.kernels.mxfp4.layout (sm_90)
    api_gen: str
    layout: L.ScaleLayout
    w: Any                      # triton_kernels Tensor, HOPPER_VALUE layout, logical [E, K, N] fp4
    w_scale: Any                # triton_kernels Tensor, HOPPER_SCALE layout, storage in alloc_scale's buffer
    precision_config: Any
    located: Located


@dataclass(frozen=True)
class Routing:
    routing_data: Any           # matmul_ogs: RoutingData; matmul: RaggedTensorMetadata
    gather_indx: Any
    n_tokens: int
    expert_counts: tuple[int, ...]   # rows each expert got (last one > 0 when forced)


@dataclass(frozen=True)
class RouteParts:
    routing_data: Any
    gather_indx: Any
    hist: Any


# --- the two API generations -------------------------------------------------------------------------------
class _Api(Protocol):
    gen: str
    matmul_module: str
    opt_flags_module: str

    def swizzle(self, q: Any, s: Any, layout: L.ScaleLayout) -> tuple[Any, Any]: ...
    def precision_config(self, w_scale: Any) -> Any: ...
    def route(self, logits: Any, top_k: int) -> RouteParts: ...
    def matmul(self, x: Any, w: Any, pc: Any, routing: Routing | None) -> Any: ...


class _OgsApi:
    """triton_kernels with `matmul_ogs` (triton <= 3.6): the code that runs on the H200."""

    gen = "matmul_ogs"
    matmul_module = "triton_kernels.matmul_ogs"
    opt_flags_module = "triton_kernels.matmul_ogs_details.opt_flags"

    def swizzle(self, q: Any, s: Any, layout: L.ScaleLayout) -> tuple[Any, Any]:
        from triton_kernels.tensor import FP4, convert_layout, wrap_torch_tensor
        from triton_kernels.tensor_details import layout as tk_layout

        # [E, N, K/2] -> [E, K/2, N] views, so that the K (mx) axis is axis 1 as the matmul wants it. This API
        # returns (layout class, options): Hopper value/scale layouts with mx_axis=1 on sm_90.
        value_cls, value_opts = tk_layout.make_default_matmul_mxfp4_w_layout(mx_axis=1)
        scale_cls, scale_opts = tk_layout.make_default_matmul_mxfp4_w_scale_layout(mx_axis=1,
                                                                                   num_warps=layout.num_warps)
        w = convert_layout(wrap_torch_tensor(q.transpose(-2, -1), dtype=FP4), value_cls, **value_opts)
        ws = convert_layout(wrap_torch_tensor(s.transpose(-2, -1)), scale_cls, **scale_opts)
        return w, ws

    def precision_config(self, w_scale: Any) -> Any:
        from triton_kernels.matmul_ogs import FlexCtx, PrecisionConfig
        from triton_kernels.numerics import InFlexData

        return PrecisionConfig(weight_scale=w_scale, flex_ctx=FlexCtx(rhs_data=InFlexData()))

    def route(self, logits: Any, top_k: int) -> RouteParts:
        from triton_kernels.routing import routing

        routing_data, gather, _scatter = routing(logits, top_k)
        return RouteParts(routing_data, gather, routing_data.expt_hist)

    def matmul(self, x: Any, w: Any, pc: Any, routing: Routing | None) -> Any:
        from triton_kernels.matmul_ogs import matmul_ogs

        if routing is None:
            return matmul_ogs(x, w, None, precision_config=pc)
        return matmul_ogs(x, w, None, routing.routing_data, gather_indx=routing.gather_indx, precision_config=pc)


class _MatmulApi:
    """triton_kernels with `matmul` (copies C and D): as sglang 0.5.19's mxfp4.py / triton_kernels_moe.py call it."""

    gen = "matmul"
    matmul_module = "triton_kernels.matmul"
    opt_flags_module = "triton_kernels.matmul_details.opt_flags"

    def swizzle(self, q: Any, s: Any, layout: L.ScaleLayout) -> tuple[Any, Any]:
        # Layouts are instances in this API; mx_axis counts from the end ([E, K, N]: -2 is K). sglang passes the
        # padded scale as it is (shape [E, padded groups, N]); so do we.
        from triton_kernels.tensor import FP4, convert_layout, wrap_torch_tensor
        from triton_kernels.tensor_details import layout as tk_layout

        value_layout = tk_layout.make_default_matmul_mxfp4_w_layout(mx_axis=-2)
        scale_layout = tk_layout.make_default_matmul_mxfp4_w_scale_layout(mx_axis=-2, num_warps=layout.num_warps)
        w = convert_layout(wrap_torch_tensor(q.transpose(-2, -1), dtype=FP4), value_layout)
        ws = convert_layout(wrap_torch_tensor(s.transpose(-2, -1)), scale_layout)
        return w, ws

    def precision_config(self, w_scale: Any) -> Any:
        # Field names moved between versions (weight_scale -> b_mx_scale; b_microblock_size in newer ones).
        from triton_kernels.matmul import FlexCtx, PrecisionConfig
        from triton_kernels.numerics import InFlexData

        names = {f.name for f in dataclasses.fields(PrecisionConfig)}
        kwargs: dict[str, Any] = {"flex_ctx": FlexCtx(rhs_data=InFlexData())}
        kwargs["b_mx_scale" if "b_mx_scale" in names else "weight_scale"] = w_scale
        if "b_microblock_size" in names:
            kwargs["b_microblock_size"] = L.MX_BLOCK
        return PrecisionConfig(**kwargs)

    def route(self, logits: Any, top_k: int) -> RouteParts:
        # sglang's routing() for this API (srt/layers/moe/topk.py): topk gives a sparse matrix; rows sorted by
        # expert come from its mask metadata.
        from triton_kernels.tensor import make_ragged_tensor_metadata
        from triton_kernels.topk import topk

        sparse = topk(logits, top_k, apply_softmax=True)
        col_sorted = sparse.mask_metadata.col_sorted_indx
        ragged = make_ragged_tensor_metadata(sparse.mask_metadata.col_sum, logits.shape[0] * top_k)
        return RouteParts(ragged, col_sorted // top_k, sparse.mask_metadata.col_sum)

    def matmul(self, x: Any, w: Any, pc: Any, routing: Routing | None) -> Any:
        from triton_kernels.matmul import matmul

        if routing is None:
            return matmul(x, w, None, precision_config=pc)
        return matmul(x, w, None, a_ragged_metadata=routing.routing_data, gather_indx=routing.gather_indx,
                      precision_config=pc)


_APIS: dict[str, _Api] = {"matmul_ogs": _OgsApi(), "matmul": _MatmulApi()}


def _api(gen: str) -> _Api:
    return _APIS[gen]


def check_device(device: Any) -> tuple[int, int]:
    """The compute capability of `device`; Unsupported unless it is a CUDA device. Every architecture runs:
    one without an expectation reports what it finds."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        raise Unsupported(f"needs a CUDA GPU (triton_kernels' matmul is GPU-only); got {dev} "
                          f"(cuda available: {torch.cuda.is_available()})")
    return tuple(torch.cuda.get_device_capability(dev))  # type: ignore[return-value]


# --- weights -----------------------------------------------------------------------------------------------
def prepare(E: int, N: int, K: int, *, pad: str, seed: int, device: Any, alloc_scale: ScaleAllocator,
            quantize: str = "triton", located: Located | None = None) -> Prepared:
    """Random bf16 experts -> mxfp4 along K -> pad (policy) -> default swizzle -> scale copied into alloc_scale.

    quantize="triton" uses triton_kernels' downcast_to_mxfp kernel (needs the GPU, what sglang's checkpoints
    went through); "torch" its pure-torch reference (slower, rounding not checked to be identical), which
    lets everything up to the launch run on the CPU.
    """
    import torch

    fill = L.pad_groups(pad, K)
    padded = fill is not None
    layout = L.scale_layout(E, N, K, padded=padded)
    if fill is not None and fill[0] != layout.logical_groups:
        raise L.LayoutError(f"pad policy {pad!r} pads K={K} to {fill[0]} groups; the layout model has "
                            f"{layout.logical_groups}")
    dev = torch.device(device)
    hopper = quantize == "triton" and check_device(dev) == HOPPER
    found = located or find_triton_kernels()
    api = _api(found.api_gen)
    q, s = quantize_experts(E, N, K, seed=seed, device=dev, method=quantize)
    if fill is not None:
        s = pad_scale_groups(s, fill[0], fill[1])
    w, ws = api.swizzle(q, s, layout)
    del q, s
    ws = _move_scale(ws, layout if hopper or quantize != "triton" else None, alloc_scale)
    return Prepared(E, N, K, padded, pad, dev, hopper, found.api_gen, layout, w, ws, api.precision_config(ws),
                    found)


def quantize_experts(E: int, N: int, K: int, *, seed: int, device: Any, method: str = "triton") -> tuple[Any, Any]:
    """(values [E, N, K/2] uint8, scales [E, N, K/32] uint8) of random bf16 experts, quantized along K."""
    import torch

    if method not in ("triton", "torch"):
        raise ValueError(f"quantize must be 'triton' or 'torch', got {method!r}")
    mxfp = importlib.import_module("triton_kernels.numerics_details.mxfp")
    downcast = mxfp.downcast_to_mxfp if method == "triton" else mxfp.downcast_to_mxfp_torch
    gen = torch.Generator(device=device).manual_seed(seed)
    w = torch.randn((E, N, K), generator=gen, device=device, dtype=torch.bfloat16)
    q, s = downcast(w, torch.uint8, axis=-1)
    return q.contiguous(), s.contiguous()


def pad_scale_groups(s: Any, groups: int, value: int = L.E8M0_ONE) -> Any:
    """Pad [E, N, G] scales to `groups` along K with byte `value` (sglang: E8M0 127 = 1.0; vLLM: 0)."""
    import torch.nn.functional as F

    extra = groups - s.shape[-1]
    if extra < 0:
        raise ValueError(f"cannot pad {s.shape[-1]} groups down to {groups}")
    return F.pad(s, (0, extra), value=value) if extra else s


def _move_scale(ws: Any, layout: L.ScaleLayout | None, alloc_scale: ScaleAllocator) -> Any:
    """The same triton_kernels Tensor (layout object, shape, strides) over a copy in alloc_scale's buffer;
    checked against the Hopper layout model first when one is given."""
    data = ws.storage.data
    if layout is not None:
        _check_against_layout(data, layout)
    moved = _copy_into(data, alloc_scale)
    return dataclasses.replace(ws, storage=dataclasses.replace(ws.storage, data=moved))


def _check_against_layout(data: Any, layout: L.ScaleLayout) -> None:
    import torch

    got = (data.dtype, tuple(data.shape), tuple(data.stride()))
    want = (torch.uint8, layout.storage_shape, layout.storage_strides)
    if got != want:
        raise RuntimeError(f"swizzled scale storage does not match gpu_memsafety.kernels.mxfp4.layout:\n"
                           f"  layout = E={layout.E} N={layout.N} K={layout.K} padded={layout.padded}\n"
                           f"  found = dtype {got[0]}, shape {got[1]}, strides {got[2]}\n"
                           f"  expected = dtype {want[0]}, shape {want[1]}, strides {want[2]}")


def _copy_into(data: Any, alloc: ScaleAllocator) -> Any:
    """Copy a permuted-dense tensor into alloc's 1-D uint8 buffer; the same view over it."""
    order = sorted(range(data.dim()), key=lambda d: data.stride(d), reverse=True)
    dense = data.permute(order)
    if not dense.is_contiguous():
        raise RuntimeError(f"scale storage with strides {tuple(data.stride())} is not a permuted dense tensor")
    nbytes = dense.numel() * dense.element_size()
    buf = alloc(nbytes)
    _check_buffer(buf, nbytes, data)
    target = buf.view(dense.shape)
    target.copy_(dense)
    moved = target.permute([order.index(d) for d in range(data.dim())])
    if tuple(moved.shape) != tuple(data.shape) or not _same_strides(moved, data):
        raise RuntimeError(f"relocated scale has shape {tuple(moved.shape)} strides {tuple(moved.stride())}, "
                           f"expected {tuple(data.shape)} {tuple(data.stride())}")
    return moved


def _check_buffer(buf: Any, nbytes: int, like: Any) -> None:
    import torch

    if not isinstance(buf, torch.Tensor):
        raise TypeError(f"alloc_scale must return a torch.Tensor, got {type(buf).__name__}")
    problems = []
    if buf.dtype != torch.uint8 or buf.dim() != 1 or not buf.is_contiguous():
        problems.append(f"dtype {buf.dtype}, {buf.dim()}-D, contiguous {buf.is_contiguous()} (want 1-D uint8)")
    if buf.numel() != nbytes:
        problems.append(f"{buf.numel()} bytes (want exactly {nbytes})")
    if buf.device != like.device:
        problems.append(f"on {buf.device} (want {like.device})")
    if problems:
        raise ValueError("alloc_scale returned " + "; ".join(problems))


def _same_strides(a: Any, b: Any) -> bool:
    return all(size <= 1 or sa == sb for size, sa, sb in zip(a.shape, a.stride(), b.stride()))


# --- routing and launches ----------------------------------------------------------------------------------
def make_logits(E: int, n_tokens: int, *, seed: int, device: Any, force_last_expert: bool = True) -> Any:
    """Router logits [n_tokens, E] (bf16, as sglang's router gives); forced: every token ranks the last first."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    logits = torch.randn((n_tokens, E), generator=gen, device=device, dtype=torch.float32)
    if force_last_expert:
        logits[:, E - 1] = logits.max() + 1.0   # 1.0 survives bf16 rounding at these magnitudes
    return logits.to(torch.bfloat16)


def route(prepared: Prepared, n_tokens: int = DEFAULT_TOKENS, top_k: int = DEFAULT_TOP_K, *, seed: int,
          force_last_expert: bool = True) -> Routing:
    """Top-k routing with triton_kernels' own helpers; the last expert gets every token when forced."""
    check_device(prepared.device)
    if not 1 <= top_k <= prepared.E:
        raise ValueError(f"top_k must be in 1..{prepared.E}, got {top_k}")
    logits = make_logits(prepared.E, n_tokens, seed=seed, device=prepared.device,
                         force_last_expert=force_last_expert)
    parts = _api(prepared.api_gen).route(logits, top_k)
    counts = tuple(int(c) for c in parts.hist.tolist())
    if force_last_expert and counts[-1] != n_tokens:
        raise RuntimeError(f"routing gave the last expert {counts[-1]} of {n_tokens} tokens (counts {counts})")
    return Routing(parts.routing_data, parts.gather_indx, n_tokens, counts)


def make_tokens(prepared: Prepared, n_tokens: int = DEFAULT_TOKENS, *, seed: int) -> Any:
    """Activations x [n_tokens, K] bf16."""
    return _randn((n_tokens, prepared.K), seed=seed, device=prepared.device)


def make_batched_input(prepared: Prepared, M: int, *, seed: int) -> Any:
    """Activations x [E, M, K] bf16 for the batched mode."""
    return _randn((prepared.E, M, prepared.K), seed=seed, device=prepared.device)


def _randn(shape: tuple[int, ...], *, seed: int, device: Any) -> Any:
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(shape, generator=gen, device=device, dtype=torch.bfloat16)


def run(prepared: Prepared, x: Any, routing: Routing, *, on_flags: FlagsCallback | None = None) -> Any:
    """Routed matmul (gather of the top-k rows, as sglang's gate-up GEMM), then a device synchronize."""
    import torch

    if tuple(x.shape) != (routing.n_tokens, prepared.K):
        raise ValueError(f"x has shape {tuple(x.shape)}, expected ({routing.n_tokens}, {prepared.K})")
    api = _api(prepared.api_gen)
    with _recording_flags(api, on_flags):
        y = api.matmul(x, prepared.w, prepared.precision_config, routing)
    torch.cuda.synchronize(prepared.device)
    return y


# --- the batched mode ---------------------------------------------------------------------------------------
def run_batched(prepared: Prepared, x: Any, *, split_k: int | None = None,
                on_flags: FlagsCallback | None = None) -> Any:
    """x [E, M, K] against the E experts in one matmul on 3-D x, no routing; returns [E, M, N].

    split_k forces opt_flags' split_k for this call (None: the library's choice, 5 for E=4, M=64, N=256, whose
    scratchpad has no batch axis in the matmul_ogs copy: the second bug the `batched` variants pin).
    """
    import torch

    if x.dim() != 3 or x.shape[0] != prepared.E or x.shape[2] != prepared.K:
        raise ValueError(f"x must be [E={prepared.E}, M, K={prepared.K}], got {tuple(x.shape)}")
    if split_k is not None and split_k < 1:
        raise ValueError(f"split_k must be >= 1, got {split_k}")
    api = _api(prepared.api_gen)
    constraints = {} if split_k is None else {"split_k": split_k}
    with _opt_flag_constraints(api, constraints), _recording_flags(api, on_flags):
        y = api.matmul(x, prepared.w, prepared.precision_config, None)
    torch.cuda.synchronize(prepared.device)
    return y


@contextlib.contextmanager
def _opt_flag_constraints(api: _Api, constraints: dict[str, int]) -> Iterator[None]:
    """Apply opt_flags constraints for one call, then restore whatever was set before."""
    if not constraints:
        yield
        return
    mod = importlib.import_module(api.opt_flags_module)
    scoped = getattr(mod, "scoped_opt_flags_constraints", None)
    if scoped is not None:
        with scoped(constraints):
            yield
        return
    saved = dict(getattr(mod, "_opt_flags_constraints", {}))
    mod.update_opt_flags_constraints(constraints)
    try:
        yield
    finally:
        mod.reset_opt_flags_constraints()
        mod.update_opt_flags_constraints(saved)


@contextlib.contextmanager
def _recording_flags(api: _Api, on_flags: FlagsCallback | None) -> Iterator[None]:
    """Hand the opt flags the matmul chose (block sizes, split_k, warps) to on_flags, once per matmul call."""
    if on_flags is None:
        yield
        return
    mod = importlib.import_module(api.matmul_module)
    original = mod.make_opt_flags

    def spy(*args: Any, **kwargs: Any) -> Any:
        flags = original(*args, **kwargs)
        on_flags(_flags_dict(flags))
        return flags

    mod.make_opt_flags = spy
    try:
        yield
    finally:
        mod.make_opt_flags = original


def _flags_dict(flags: Any) -> dict[str, Any]:
    plain = (int, float, str, bool, type(None))
    return {f.name: getattr(flags, f.name) for f in dataclasses.fields(flags)
            if isinstance(getattr(flags, f.name), plain)}
