"""GPU tests of the pre-dispatch kernels (run on the H200): the CUDA kernel against the bit-exact reference,
the CUDA and Triton kernels against each other byte for byte (the buggy variant's writes into row padding
included), and the kernel symbols a profiler sees against `kernel_name`.

Every output buffer sits in a byte storage filled with 0xA5 guard markers, so any byte a kernel should not
touch is checked too. Skipped, with the reason, where torch sees no CUDA device.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from gpu_memsafety.kernels.pre_dispatch import launch as pre_dispatch
from gpu_memsafety.kernels.pre_dispatch.layout import packed_write_bytes, padded_row_stride, scale_row_bytes, scale_write_end
from gpu_memsafety.kernels.pre_dispatch.ref import pre_dispatch_reference, sample_x

NO_GPU = "needs a CUDA GPU; found none (torch.cuda.is_available() is False)"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU)]

GUARD = 0xA5
FRONT_GUARD = 256     # bytes before the scale tensor (keeps its base 16-byte aligned)
BACK_GUARD = 256      # bytes after it: room for the reverse mismatch's overrun
TOP_K = 8


@dataclasses.dataclass(frozen=True)
class GpuCase:
    hidden: int
    num_tokens: int
    padded_max: int
    row_bytes: int | None = None          # physical scale row; None = padded_row_stride(hidden)

    @property
    def row(self) -> int:
        return self.row_bytes if self.row_bytes is not None else padded_row_stride(self.hidden)

    @property
    def id(self) -> str:
        return f"H{self.hidden}-T{self.num_tokens}-P{self.padded_max}-row{self.row}"


@dataclasses.dataclass
class Buffers:
    x: torch.Tensor
    topk_ids: torch.Tensor
    topk_weights: torch.Tensor
    q_out: torch.Tensor
    scale_store: torch.Tensor
    scale: torch.Tensor
    ids_out: torch.Tensor
    weights_out: torch.Tensor

    def launch(self, impl: str, case: GpuCase, *, mode: str, row_stride_bytes: int | None = None,
               check: bool = True) -> None:
        pre_dispatch.launch(impl, self.x, self.topk_ids, self.topk_weights, self.q_out, self.scale,
                            self.ids_out, self.weights_out, num_tokens=case.num_tokens, mode=mode,
                            row_stride_bytes=row_stride_bytes, check=check)
        torch.cuda.synchronize()

    def scale_body(self, case: GpuCase) -> torch.Tensor:
        """The scale tensor's own bytes as [padded_max, row] (CPU copy)."""
        body = self.scale_store[FRONT_GUARD: FRONT_GUARD + case.padded_max * case.row]
        return body.view(case.padded_max, case.row).cpu()


def make_buffers(case: GpuCase, seed: int, q_dtype: torch.dtype = torch.uint8) -> Buffers:
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(seed + 1)
    store = torch.full((FRONT_GUARD + case.padded_max * case.row + BACK_GUARD,), GUARD, dtype=torch.uint8,
                       device=dev)
    scale = store.view(torch.int32).as_strided((case.padded_max, scale_row_bytes(case.hidden) // 4),
                                               (case.row // 4, 1), FRONT_GUARD // 4)
    return Buffers(
        x=sample_x(case.num_tokens, case.hidden, seed=seed, device=dev),
        topk_ids=torch.randint(0, 256, (case.num_tokens, TOP_K), generator=gen, dtype=torch.int32).to(dev),
        topk_weights=torch.rand(case.num_tokens, TOP_K, generator=gen).to(dev),
        q_out=torch.full((case.padded_max, case.hidden), GUARD, dtype=torch.uint8, device=dev).view(q_dtype),
        scale_store=store,
        scale=scale,
        ids_out=torch.full((case.padded_max, TOP_K), 0x5A5A5A5A, dtype=torch.int64, device=dev),
        weights_out=torch.full((case.padded_max, TOP_K), float("nan"), device=dev),
    )


STRIDED_CASES = [
    GpuCase(hidden, tokens, rows)
    for hidden in (2176, 2304, 2560, 7168, 9216)      # 9216: 1152 chunks, more than one pass of 1024 threads
    for tokens, rows in ((1, 4), (5, 8), (64, 64), (100, 128))
]


@pytest.mark.parametrize("case", STRIDED_CASES, ids=lambda c: c.id)
def test_cuda_strided_matches_reference(case: GpuCase) -> None:
    bufs = make_buffers(case, seed=case.hidden + case.num_tokens)
    bufs.launch("cuda", case, mode="strided")
    ref_q, ref_scale, ref_ids, ref_weights = pre_dispatch_reference(
        bufs.x, bufs.topk_ids, bufs.topk_weights, case.num_tokens, case.padded_max)
    n, groups = case.num_tokens, scale_row_bytes(case.hidden)
    cuda_q = bufs.q_out.cpu()
    assert torch.equal(cuda_q[:n], ref_q)
    assert bool((cuda_q[n:] == GUARD).all()), "fp8 rows of padded tokens must stay untouched"
    body = bufs.scale_body(case)
    assert torch.equal(body[:n, :groups], ref_scale)
    assert bool((body[:, groups:] == GUARD).all()), "row padding must stay untouched"
    assert bool((body[n:] == GUARD).all()), "scale rows of padded tokens must stay untouched"
    store = bufs.scale_store.cpu()
    assert bool((store[:FRONT_GUARD] == GUARD).all()) and bool((store[-BACK_GUARD:] == GUARD).all())
    assert torch.equal(bufs.ids_out.cpu(), ref_ids)
    assert torch.equal(bufs.weights_out.cpu(), ref_weights)


def test_cuda_accepts_float8_q_out() -> None:
    case = GpuCase(2304, 3, 4)
    bufs = make_buffers(case, seed=11, q_dtype=torch.float8_e4m3fn)
    bufs.launch("cuda", case, mode="strided")
    ref_q, _, _, _ = pre_dispatch_reference(bufs.x, bufs.topk_ids, bufs.topk_weights, 3, 4)
    assert torch.equal(bufs.q_out.view(torch.uint8)[:3].cpu(), ref_q)


@pytest.mark.parametrize("mode", ["packed", "strided"])
@pytest.mark.parametrize("case", [GpuCase(2304, 5, 8), GpuCase(2176, 37, 40), GpuCase(7168, 16, 16)],
                         ids=lambda c: c.id)
def test_cuda_and_triton_write_the_same_bytes(case: GpuCase, mode: str) -> None:
    cuda_bufs, tri_bufs = make_buffers(case, seed=5), make_buffers(case, seed=5)
    cuda_bufs.launch("cuda", case, mode=mode)
    tri_bufs.launch("triton", case, mode=mode)
    for name in ("q_out", "scale_store", "ids_out", "weights_out"):
        cuda_out, tri_out = getattr(cuda_bufs, name), getattr(tri_bufs, name)
        assert torch.equal(cuda_out.view(torch.uint8).cpu(), tri_out.view(torch.uint8).cpu()), name


@pytest.mark.parametrize("impl", ["cuda", "triton"])
def test_packed_writes_the_predicted_padding_bytes(impl: str) -> None:
    case = GpuCase(2304, 5, 8)
    bufs = make_buffers(case, seed=3)
    bufs.launch(impl, case, mode="packed")
    tensor = bufs.scale_store[FRONT_GUARD:].cpu()
    written = (tensor != GUARD).nonzero().flatten().tolist()
    assert written == list(range(360)), "packed writes bytes [0, 360): the last is 359 of 640"
    padding = [b for b in written if b % case.row >= 72]
    assert padding == [b for start, end in packed_write_bytes(2304, 5, 80) for b in range(start, end)]


@pytest.mark.parametrize("impl", ["cuda", "triton"])
def test_reverse_mismatch_writes_past_the_end(impl: str) -> None:
    case = GpuCase(2304, 8, 8, row_bytes=72)
    bufs = make_buffers(case, seed=9)
    bufs.launch(impl, case, mode="strided", row_stride_bytes=80, check=False)
    written = (bufs.scale_store[FRONT_GUARD:].cpu() != GUARD).nonzero().flatten().tolist()
    assert max(written) == 631 == scale_write_end(2304, 8, 80, "strided") - 1
    assert [b for b in written if b >= 576] == list(range(576, 632))


def test_kernel_names_match_what_the_profiler_sees() -> None:
    case = GpuCase(2304, 2, 4)
    bufs = make_buffers(case, seed=1)
    bufs.launch("cuda", case, mode="strided")   # build and compile outside the profiled region
    bufs.launch("triton", case, mode="strided")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        bufs.launch("cuda", case, mode="strided")
        bufs.launch("triton", case, mode="packed")
    names = {event.name for event in prof.events()}
    assert pre_dispatch.kernel_name("cuda", "strided") in names, sorted(names)
    assert pre_dispatch.kernel_name("triton", "packed") in names, sorted(names)
