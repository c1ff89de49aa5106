"""CPU tests of gpu_memsafety.kernels.mxfp4.layout: the K pad, the Hopper scale storage, and the kernel's walk past it.

Three independent views must agree: the closed formulas of the module, a brute-force model of the
`_matmul_ogs` HOPPER_SCALE pointer arithmetic (below), and the real HopperMXScaleLayout swizzle of the
vendored triton_kernels (run on the CPU with torch; skipped only when no copy is available).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import pytest

from gpu_memsafety.kernels.mxfp4 import layout as L


# --- the K pad ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PadCase:
    K: int
    groups: int
    tiles: int
    walked: int
    padded_to: int
    needs_pad: bool
    why: str = ""

    @property
    def id(self) -> str:
        return f"K{self.K}"


PAD_CASES = [
    PadCase(2880, 90, 23, 92, 92, True, "gpt-oss hidden: 90 groups, the walk covers 92"),
    PadCase(2944, 92, 23, 92, 92, False, "already a multiple of 128"),
    PadCase(3072, 96, 24, 96, 96, False, "multiple of 128"),
    PadCase(2816, 88, 22, 88, 88, False, "multiple of 128"),
    PadCase(2848, 89, 23, 92, 92, True, "89 groups -> align-2 gives 90, walk 92"),
    PadCase(2912, 91, 23, 92, 92, False, "91 groups -> align-2 gives 92 = walk: no pad needed"),
    PadCase(1472, 46, 12, 48, 48, True, "gpt-oss TP-2 intermediate 1440 rounded to 64"),
    PadCase(768, 24, 6, 24, 24, False, "gpt-oss TP-4 intermediate 720 rounded to 64"),
]


@pytest.mark.parametrize("case", PAD_CASES, ids=lambda c: c.id)
def test_pad_accounting(case: PadCase) -> None:
    assert L.k_groups(case.K) == case.groups
    assert L.k_tiles(case.K) == case.tiles
    assert L.groups_walked(case.K) == case.walked
    assert L.padded_groups(case.K) == case.padded_to
    assert L.needs_pad(case.K) is case.needs_pad
    assert L.stored_groups(case.K, padded=True) == case.padded_to


def test_multiples_of_128_never_need_a_pad() -> None:
    for K in range(128, 16384 + 1, 128):
        assert not L.needs_pad(K), K
        assert L.expected_overread_bytes(2, 256, K) == 0, K


def test_needs_pad_matches_the_group_arithmetic() -> None:
    for K in range(32, 8192 + 1, 32):
        stored = L.round_up(K // 32, 2)
        assert L.needs_pad(K) is (stored % 4 != 0), K
        assert L.expected_overread_bytes(2, 256, K) == 32 * (L.groups_walked(K) - stored), K
        assert L.expected_overread_bytes(2, 256, K, padded=True) == 0, K


# --- storage byte accounting -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShapeCase:
    name: str
    E: int
    N: int
    K: int
    rows: int
    row_bytes: int
    nbytes: int
    nbytes_padded: int
    overread: int

    @property
    def id(self) -> str:
        return f"{self.name}-E{self.E}-N{self.N}-K{self.K}"


SHAPES = [
    ShapeCase("h200-repro", 4, 256, 2880, 8, 2880, 92_160, 94_208, 64),
    ShapeCase("20b-gate-up", 32, 5760, 2880, 184, 2880, 16_957_440, 17_334_272, 64),
    ShapeCase("20b-down", 32, 2880, 2880, 96, 2880, 8_847_360, 9_043_968, 64),
    ShapeCase("120b-gate-up", 128, 5760, 2880, 184, 2880, 67_829_760, 69_337_088, 64),
    ShapeCase("120b-down", 128, 2880, 2880, 96, 2880, 35_389_440, 36_175_872, 64),
    ShapeCase("120b-tp4-gate-up", 128, 1536, 2880, 48, 2880, 17_694_720, 18_087_936, 64),
    ShapeCase("120b-tp4-down", 128, 2880, 768, 96, 768, 9_437_184, 9_437_184, 0),
]


@pytest.mark.parametrize("case", SHAPES, ids=lambda c: c.id)
def test_scale_storage_bytes(case: ShapeCase) -> None:
    plain = L.scale_layout(case.E, case.N, case.K, padded=False)
    padded = L.scale_layout(case.E, case.N, case.K, padded=True)
    assert (plain.rows, plain.row_bytes, plain.nbytes) == (case.rows, case.row_bytes, case.nbytes)
    assert plain.storage_shape == (case.E, case.row_bytes, case.rows)
    assert plain.storage_strides == (case.rows * case.row_bytes, 1, case.row_bytes)
    assert padded.nbytes == case.nbytes_padded
    assert plain.overread_bytes == case.overread
    assert padded.overread_bytes == 0
    assert L.expected_overread_bytes(case.E, case.N, case.K) == case.overread


def test_shapes_of_the_h200_repro() -> None:
    plain = L.scale_layout(4, 256, 2880, padded=False)
    padded = L.scale_layout(4, 256, 2880, padded=True)
    assert plain.checkpoint_shape == (4, 256, 90) == padded.checkpoint_shape
    assert plain.matmul_shape == (4, 90, 256)
    assert padded.matmul_shape == (4, 92, 256)
    assert (plain.walked_row_bytes, plain.row_overrun) == (2944, 64)
    assert (padded.row_bytes, padded.row_overrun) == (2944, 0)


def test_block_n_below_256_cannot_compile_with_8_warps() -> None:
    with pytest.raises(L.LayoutError, match="BLOCK_N"):
        L.scale_layout(4, 128, 2880, padded=False)
    assert L.scale_layout(4, 128, 2880, padded=False, num_warps=4).block_n == 128


# --- a brute-force model of the kernel's unmasked scale loads ------------------------------------------------
def kernel_scale_offsets(layout: L.ScaleLayout) -> np.ndarray:
    """Every byte offset `_matmul_ogs` loads (HOPPER_SCALE branch), written from the kernel, not the formulas.

    WMxScale + expt_id*stride_e + offs_k_scale*stride_k + offs_n_scale*stride_n, with
    offs_n_scale = (pid_n*SCALE_BLOCK_N + arange(SCALE_BLOCK_N)) % N and
    offs_k_scale = 128*tile + arange(128), for every expert, pid_n < cdiv(N, BLOCK_N), tile < cdiv(K, 128).
    """
    stride_e, stride_k, stride_n = layout.storage_strides
    scale_block_n = layout.block_n // 32
    grid_n = L.cdiv(layout.N, layout.block_n)
    rows = (np.arange(grid_n * scale_block_n) % layout.N)[:, None]
    ks = np.arange(layout.k_tiles * (layout.block_k // 32) * 32)[None, :]
    per_expert = (rows * stride_n + ks * stride_k).ravel()
    return np.unique((np.arange(layout.E)[:, None] * stride_e + per_expert[None, :]).ravel())


WALK_SHAPES = [(2, 256, K) for K in (2880, 2848, 2912, 2944, 1472, 768)] + [(3, 300, 2880), (2, 512, 2880),
                                                                              (2, 5760, 2880)]


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("shape", WALK_SHAPES, ids=lambda s: f"E{s[0]}-N{s[1]}-K{s[2]}")
def test_overread_matches_a_model_of_the_kernel_walk(shape: tuple[int, int, int], padded: bool) -> None:
    layout = L.scale_layout(*shape, padded=padded)
    offsets = kernel_scale_offsets(layout)
    past = offsets[offsets >= layout.nbytes] - layout.nbytes
    assert offsets.min() >= 0
    assert past.tolist() == list(range(layout.overread_bytes))
    assert [p.offset for p in L.overread_map(*shape, padded)] == (past + layout.nbytes).tolist()


def test_overread_map_of_the_h200_repro() -> None:
    places = L.overread_map(4, 256, 2880, False)
    assert len(places) == 64
    assert {(p.expert, p.row) for p in places} == {(3, 7)}
    assert [p.col for p in places] == list(range(2880, 2944))
    assert {p.kind for p in places} == {L.PAST_END}
    want_n = set(range(112, 128)) | set(range(240, 256))
    assert {(p.n, p.k_group) for p in places} == {(n, g) for n in want_n for g in (90, 91)}
    assert L.overread_map(4, 256, 2880, True) == ()


def test_locate_inside_the_storage() -> None:
    plain = L.scale_layout(4, 256, 2880, padded=False)
    first, last = L.locate_scale_byte(plain, 0), L.locate_scale_byte(plain, plain.nbytes - 1)
    assert (first.expert, first.n, first.k_group, first.kind) == (0, 0, 0, L.SCALE)
    assert (last.expert, last.row, last.col, last.n, last.k_group, last.kind) == (3, 7, 2879, 255, 89, L.SCALE)
    padded = L.scale_layout(4, 256, 2880, padded=True)
    assert L.locate_scale_byte(padded, 45 * 64).kind == L.K_PAD_SM90   # row 0, groups 90/91
    wide = L.scale_layout(1, 300, 2880, padded=False)
    assert L.locate_scale_byte(wide, 9 * wide.row_bytes).n == 272          # row 9: a=1, warp 1
    assert L.locate_scale_byte(wide, 15 * wide.row_bytes).kind == L.N_PAD  # row 15 starts at n = 368 >= 300
    with pytest.raises(L.LayoutError):
        L.locate_scale_byte(plain, plain.nbytes + 64)
    with pytest.raises(L.LayoutError):
        L.locate_scale_byte(plain, -1)


def test_describe_range_names_the_logical_place() -> None:
    layout = L.scale_layout(4, 256, 2880, padded=False)
    text = L.describe_range(layout, layout.nbytes, layout.nbytes + 64)
    assert text.startswith("expert 3, n 112..255 (32 distinct), k group 90..91 of 90 stored / 92 walked")
    assert text.endswith(L.PAST_END)
    assert "no scale byte" in L.describe_range(layout, layout.nbytes + 64, layout.nbytes + 80)


# --- the value storage, the opt-flags estimate, kernel names -------------------------------------------------
def test_value_storage_bytes() -> None:
    v = L.ValueLayout(4, 256, 2880)
    assert v.storage_shape == (4, 5760, 64)
    assert v.storage_strides == (368_640, 1, 5760)
    assert v.nbytes == 4 * 256 * 1440
    assert L.ValueLayout(2, 300, 2880).storage_shape == (2, 5760, 76)


def test_opt_flags_estimate() -> None:
    routed = L.estimate_opt_flags(64 * 2, 256, 2880, 4)        # 64 tokens, top-2, 4 experts
    assert (routed.block_m, routed.block_n, routed.block_k, routed.split_k) == (32, 256, 128, 5)
    batched = L.estimate_opt_flags(64, 256, 2880, 4)           # x [4, 64, 2880]
    assert (batched.block_m, batched.split_k) == (16, 5)
    big = L.estimate_opt_flags(64 * 4, 5760, 2880, 32)         # gpt-oss-20b, 64 tokens, top-4
    assert (big.block_m, big.split_k) == (16, 1)


def test_batched_split_k_overwrite() -> None:
    assert L.batched_split_k_overwrite_bytes(4, 64, 256, 5) == 3 * 64 * 256 * 4
    assert L.batched_split_k_overwrite_bytes(4, 64, 256, 2) == 3 * 64 * 256 * 4
    assert L.batched_split_k_overwrite_bytes(4, 64, 256, 1) == 0
    assert L.batched_split_k_overwrite_bytes(1, 64, 256, 5) == 0


def test_kernel_names() -> None:
    parsed = L.parse_kernel_name("_matmul_ogs_NNT_fp32xbf16xmxfp4_32x256x128x5")
    assert parsed == L.KernelName("_matmul_ogs", "NNT", "fp32", "bf16", "mxfp4", 32, 256, 128, 5, "")
    swiglu = L.parse_kernel_name("_matmul_NNT_bf16xbf16xmxfp4_32x256x128x1_swiglu")
    assert swiglu is not None and (swiglu.base, swiglu.split_k, swiglu.suffix) == ("_matmul", 1, "swiglu")
    assert L.parse_kernel_name("_p_matmul_ogs_NNT_bf16xbf16xmxfp4_128x256x128x1").base == "_p_matmul_ogs"
    assert L.parse_kernel_name("oob_k") is None
    assert L.parse_kernel_name("_reduce_grouped") is None
    assert L.is_matmul_kernel("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x256x128x1", "matmul_ogs")
    assert not L.is_matmul_kernel("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x256x128x1", "matmul")
    assert L.is_matmul_kernel("_matmul_NNT_bf16xbf16xmxfp4_16x256x128x1", "matmul")


# --- against the real swizzle of the vendored triton_kernels (torch on the CPU) ------------------------------
@pytest.fixture(scope="module")
def tk():
    """The vendored triton_kernels, imported for this module only."""
    from gpu_memsafety.errors import Unsupported
    from gpu_memsafety.kernels.mxfp4.triton_kernels_locator import find_triton_kernels

    saved_path = list(sys.path)
    before = {n for n in sys.modules if n.startswith("triton_kernels")}
    try:
        located = find_triton_kernels(sources=("vendor", "env", "importable"))
    except Unsupported as exc:
        pytest.skip(f"no triton_kernels to compare with (run `make upstream`): {exc}")
    if located.api_gen != "matmul_ogs":
        pytest.skip(f"comparison written for the matmul_ogs copy; found {located.describe()}")
    yield located
    sys.path[:] = saved_path
    for name in [n for n in sys.modules if n.startswith("triton_kernels") and n not in before]:
        del sys.modules[name]


SWIZZLE_CASES = [(2, 256, 2880, False), (2, 300, 2880, True), (2, 512, 2848, False), (1, 256, 1472, True)]


@pytest.mark.parametrize("case", SWIZZLE_CASES, ids=lambda c: f"E{c[0]}-N{c[1]}-K{c[2]}-{'pad' if c[3] else 'nopad'}")
def test_locate_agrees_with_the_real_swizzle(tk, case: tuple[int, int, int, bool]) -> None:
    import torch
    from triton_kernels.tensor import convert_layout, wrap_torch_tensor
    from triton_kernels.tensor_details.layout import HopperMXScaleLayout

    E, N, K, padded = case
    layout = L.scale_layout(E, N, K, padded=padded)
    G = layout.logical_groups
    ids = torch.arange(1, E * N * G + 1, dtype=torch.int32).reshape(E, N, G)   # 0 is left for the pads
    swz = convert_layout(wrap_torch_tensor(ids.transpose(-2, -1)), HopperMXScaleLayout, mx_axis=1, num_warps=8)
    data = swz.storage.data
    assert (tuple(data.shape), tuple(data.stride())) == (layout.storage_shape, layout.storage_strides)
    flat = data.mT.contiguous().reshape(-1).tolist()   # memory order: the buffer under the transposed view
    assert len(flat) == layout.nbytes
    for offset, value in enumerate(flat):
        place = L.locate_scale_byte(layout, offset)
        if value == 0:
            assert place.kind in (L.N_PAD, L.K_PAD_ALIGN), place
            continue
        e, rest = divmod(value - 1, N * G)
        assert (place.expert, place.n, place.k_group) == (e, *divmod(rest, G)), place
        assert place.kind == (L.SCALE if place.k_group < layout.k_groups else L.K_PAD_SM90), place


def test_value_layout_agrees_with_the_real_swizzle(tk) -> None:
    import torch
    from triton_kernels.tensor import FP4, convert_layout, wrap_torch_tensor
    from triton_kernels.tensor_details.layout import HopperMXValueLayout

    for E, N, K in [(2, 256, 2880), (2, 300, 2880)]:
        q = torch.zeros((E, N, K // 2), dtype=torch.uint8)
        w = convert_layout(wrap_torch_tensor(q.transpose(-2, -1), dtype=FP4), HopperMXValueLayout, mx_axis=1)
        v = L.ValueLayout(E, N, K)
        assert (tuple(w.storage.data.shape), tuple(w.storage.data.stride())) == (v.storage_shape, v.storage_strides)
