"""CPU tests of the pre-dispatch kernel adapter (padded-stride scale write scenario).

What runs here: the bit-exact reference against hand-computed bytes, the pure layout helpers, the host
checks, the CUDA build's error path and a standalone nvcc compile of kernels/pre_dispatch/pre_dispatch.cu, and the Triton
kernel itself under Triton's interpreter, compared byte for byte with the reference.

The interpreter runs in ONE child process started with TRITON_INTERPRET=1 (this file run as a script).
The variable only counts if it is set before triton is first imported (triton.language's own helpers are
jit functions fixed at that import), and in a pytest process something else may already have imported
triton; a child process makes the result independent of test order. The parent builds every case (inputs,
and output buffers inside byte storages filled with 0xA5 guard markers), the child launches the kernel and
saves the storages back, and the tests compare here. This process never imports triton.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]   # tests/kernels/ -> the checkout
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from gpu_memsafety.kernels.pre_dispatch import cuda as pre_dispatch_cuda, launch as pre_dispatch  # noqa: E402
from gpu_memsafety.errors import Unsupported  # noqa: E402
from gpu_memsafety.util.build_errors import KernelBuildError  # noqa: E402
from gpu_memsafety.kernels.pre_dispatch.layout import (  # noqa: E402
    CUDA_KERNEL_NAME,
    TRITON_KERNEL_NAME,
    packed_write_bytes,
    padded_row_stride,
    scale_row_bytes,
    scale_write_end,
)
from gpu_memsafety.kernels.pre_dispatch.ref import (  # noqa: E402
    e4m3_bytes_torch,
    pre_dispatch_reference,
    sample_x,
    ue8m0_exponent_torch,
)

GUARD = 0xA5              # marker byte around and inside every output buffer
FRONT_GUARD = 64          # bytes before the scale tensor: a multiple of 16 keeps its base aligned
BACK_GUARD = 128          # bytes after it: room for the reverse mismatch's overrun (56 bytes for 8 rows)
TOP_K = 4
CHILD_TIMEOUT_S = 120     # one interpreter process for all cases; about 5 s here


# ---------------------------------------------------------------------------------------------------------
# Cases and buffers (shared by this process and the interpreter child)

@dataclasses.dataclass(frozen=True)
class Case:
    """One launch: shapes, the variant, and how the scale buffer is laid out in its guarded storage."""

    hidden: int
    num_tokens: int
    padded_max: int
    mode: str = "strided"
    scale_row_bytes: int | None = None      # physical bytes per scale row; None = padded_row_stride(hidden)
    row_stride_bytes: int | None = None     # told to the kernel; None = from scale_out.stride(0)
    check: bool = True
    front_guard: int = FRONT_GUARD
    q_fp8: bool = False                     # q_out as torch.float8_e4m3fn rather than uint8
    inputs: str = "random"                  # "random" or "tricky" (hand-built token, hidden 128)

    @property
    def id(self) -> str:
        row = self.physical_row_bytes
        extra = f"-stride{self.row_stride_bytes}" if self.row_stride_bytes is not None else ""
        return (f"{self.mode}-H{self.hidden}-T{self.num_tokens}-P{self.padded_max}-row{row}{extra}"
                f"{'-fp8' if self.q_fp8 else ''}{'-' + self.inputs if self.inputs != 'random' else ''}")

    @property
    def physical_row_bytes(self) -> int:
        return self.scale_row_bytes if self.scale_row_bytes is not None else padded_row_stride(self.hidden)


# One token of hidden 128 (4 groups) whose bytes are worked out by hand in test_reference_tricky_token.
TRICKY_GROUPS = [
    [448.0, 1.0625, 1.1875, -1.0625, 272.0, 304.0, 2**-10, 3 * 2**-10, 5 * 2**-10, 15 * 2**-10,
     1.0703125, -0.0],                        # absmax 448: scale 1, values rounded as they are
    [1.0, 0.5, -0.25],                        # absmax 1: scale 2^-8
    [],                                       # all zero: absmax floor 1e-10
    [2**-20, -(2**-21)],                      # tiny power of two: scale 2^-28
]
TRICKY_Q = [
    [0x7E, 0x38, 0x3A, 0xB8, 0x78, 0x7A, 0x00, 0x02, 0x02, 0x08, 0x39, 0x80],
    [0x78, 0x70, 0xE8],
    [],
    [0x78, 0xF0],
]
TRICKY_SCALE = [127, 119, 85, 99]


def tricky_x() -> torch.Tensor:
    x = torch.zeros(1, 128)
    for group, values in enumerate(TRICKY_GROUPS):
        x[0, group * 32: group * 32 + len(values)] = torch.tensor(values)
    return x.to(torch.bfloat16)


def scale_view(store: torch.Tensor, case: Case) -> torch.Tensor:
    """The int32 [padded_max, G/4] scale tensor inside its guarded byte storage."""
    quads = scale_row_bytes(case.hidden) // 4
    words = store.view(torch.int32)
    return words.as_strided((case.padded_max, quads), (case.physical_row_bytes // 4, 1),
                            case.front_guard // 4)


def build_buffers(case: Case, seed: int) -> dict[str, Any]:
    """Inputs, and outputs pre-filled with markers, as plain tensors (torch.save keeps no mixed views)."""
    x = tricky_x() if case.inputs == "tricky" else sample_x(case.num_tokens, case.hidden, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    scale_bytes = case.front_guard + case.padded_max * case.physical_row_bytes + BACK_GUARD
    return {
        "x": x,
        "topk_ids": torch.randint(0, 256, (case.num_tokens, TOP_K), generator=gen, dtype=torch.int32),
        "topk_weights": torch.rand(case.num_tokens, TOP_K, generator=gen),
        "q_out": torch.full((case.padded_max, case.hidden), GUARD, dtype=torch.uint8),
        "scale_store": torch.full((scale_bytes,), GUARD, dtype=torch.uint8),
        "ids_out": torch.full((case.padded_max, TOP_K), 0x5A5A5A5A, dtype=torch.int64),
        "weights_out": torch.full((case.padded_max, TOP_K), float("nan")),
    }


def launch_case(case: Case, buffers: dict[str, Any]) -> None:
    q_out = buffers["q_out"].view(torch.float8_e4m3fn) if case.q_fp8 else buffers["q_out"]
    pre_dispatch.launch(
        "triton", buffers["x"], buffers["topk_ids"], buffers["topk_weights"], q_out,
        scale_view(buffers["scale_store"], case), buffers["ids_out"], buffers["weights_out"],
        num_tokens=case.num_tokens, mode=case.mode, row_stride_bytes=case.row_stride_bytes, check=case.check,
    )


def child_main(cases_path: str, results_path: str) -> None:
    """Interpreter child: launch every case on its buffers and save them back with any error text."""
    from gpu_memsafety.kernels.pre_dispatch import triton_twin as pre_dispatch_triton

    runs = torch.load(cases_path)
    for run in runs:
        case = Case(**run["case"])
        try:
            launch_case(case, run["buffers"])
            run["error"] = ""
        except Exception as exc:  # reported per case by the parent
            run["error"] = f"{type(exc).__name__}: {exc}"
    meta = {"interpreter": pre_dispatch_triton.interpreter_active(),
            "kernel_fn_name": pre_dispatch_triton.pre_dispatch_triton_kernel.fn.__name__}
    torch.save({"runs": runs, "meta": meta}, results_path)


# ---------------------------------------------------------------------------------------------------------
# The interpreter child, run once per module

STRIDED_CASES = [
    Case(hidden, tokens, rows)
    for hidden in (2304, 2560)
    for tokens, rows in ((1, 4), (3, 8), (8, 8))
] + [
    Case(2304, 0, 4),
    Case(2176, 3, 4, q_fp8=True),
    Case(128, 1, 2, inputs="tricky"),
]
PACKED_CASES = [Case(2304, 5, 8, mode="packed"), Case(2176, 3, 4, mode="packed"), Case(2432, 4, 4, mode="packed")]
# The reverse mismatch: a packed 72-byte-row allocation told a padded stride of 80, host checks off.
REVERSE_CASE = Case(2304, 8, 8, scale_row_bytes=72, row_stride_bytes=80, check=False)
ALL_CASES = STRIDED_CASES + PACKED_CASES + [REVERSE_CASE]


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run all cases in one TRITON_INTERPRET=1 child; map case id -> run (case, buffers, error)."""
    work = tmp_path_factory.mktemp("interp")
    cases_path, results_path = work / "cases.pt", work / "results.pt"
    runs = [{"case": dataclasses.asdict(case), "buffers": build_buffers(case, seed)}
            for seed, case in enumerate(ALL_CASES)]
    torch.save(runs, cases_path)
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, __file__, str(cases_path), str(results_path)], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    if proc.returncode != 0:
        pytest.fail(f"interpreter child failed\nreturncode = {proc.returncode}\n"
                    f"--- stdout tail ---\n{proc.stdout[-3000:]}\n--- stderr tail ---\n{proc.stderr[-3000:]}")
    results = torch.load(results_path)
    assert results["meta"]["interpreter"], "child ran without Triton's interpreter"
    by_id = {Case(**run["case"]).id: run for run in results["runs"]}
    by_id["meta"] = results["meta"]
    return by_id


def finished_run(interpreted: dict[str, Any], case: Case) -> dict[str, Any]:
    run = interpreted[case.id]
    assert run["error"] == "", f"case = {case.id}\nerror = {run['error']}"
    return dict(run["buffers"])


def changed_bytes(store: torch.Tensor) -> list[int]:
    return (store != GUARD).nonzero().flatten().tolist()


def ranges_of(offsets: list[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for offset in offsets:
        if ranges and ranges[-1][1] == offset:
            ranges[-1] = (ranges[-1][0], offset + 1)
        else:
            ranges.append((offset, offset + 1))
    return ranges


@pytest.mark.e2e
@pytest.mark.parametrize("case", STRIDED_CASES, ids=lambda c: c.id)
def test_triton_strided_matches_reference(interpreted: dict[str, Any], case: Case) -> None:
    out = finished_run(interpreted, case)
    ref_q, ref_scale, ref_ids, ref_weights = pre_dispatch_reference(
        out["x"], out["topk_ids"], out["topk_weights"], case.num_tokens, case.padded_max)
    n, groups, row = case.num_tokens, scale_row_bytes(case.hidden), case.physical_row_bytes
    tri_q = out["q_out"]
    assert torch.equal(tri_q[:n], ref_q)
    assert bool((tri_q[n:] == GUARD).all()), "fp8 rows of padded tokens must stay untouched"
    store = out["scale_store"]
    body = store[case.front_guard: case.front_guard + case.padded_max * row].view(case.padded_max, row)
    assert torch.equal(body[:n, :groups], ref_scale)
    assert bool((body[:, groups:] == GUARD).all()), "row padding must stay untouched"
    assert bool((body[n:] == GUARD).all()), "scale rows of padded tokens must stay untouched"
    assert bool((store[: case.front_guard] == GUARD).all()) and bool((store[-BACK_GUARD:] == GUARD).all())
    assert torch.equal(out["ids_out"], ref_ids)
    assert torch.equal(out["weights_out"], ref_weights)


@pytest.mark.e2e
@pytest.mark.parametrize("case", PACKED_CASES, ids=lambda c: c.id)
def test_triton_packed_writes_the_predicted_padding_bytes(interpreted: dict[str, Any], case: Case) -> None:
    out = finished_run(interpreted, case)
    _, ref_scale, _, _ = pre_dispatch_reference(
        out["x"], out["topk_ids"], out["topk_weights"], case.num_tokens, case.padded_max)
    groups, row = scale_row_bytes(case.hidden), case.physical_row_bytes
    tensor = out["scale_store"][case.front_guard:]
    written = changed_bytes(tensor)
    assert written == list(range(case.num_tokens * groups)), "packed writes bytes [0, num_tokens*G)"
    assert torch.equal(tensor[: case.num_tokens * groups], ref_scale.flatten())
    outside_logical = [b for b in written if b % row >= groups or b // row >= case.num_tokens]
    assert ranges_of(outside_logical) == packed_write_bytes(case.hidden, case.num_tokens, row)
    assert outside_logical, "the case must overwrite some padding"


@pytest.mark.e2e
def test_triton_reverse_mismatch_writes_past_the_end(interpreted: dict[str, Any]) -> None:
    case = REVERSE_CASE
    out = finished_run(interpreted, case)
    _, ref_scale, _, _ = pre_dispatch_reference(
        out["x"], out["topk_ids"], out["topk_weights"], case.num_tokens, case.padded_max)
    size = case.padded_max * case.physical_row_bytes
    assert size == 576
    written = changed_bytes(out["scale_store"][case.front_guard:])
    assert max(written) == 631 == scale_write_end(2304, 8, 80, "strided") - 1
    assert [b for b in written if b >= size] == list(range(576, 632))
    body = out["scale_store"][case.front_guard: case.front_guard + 8 * 80].view(8, 80)
    assert torch.equal(body[:, :72], ref_scale)


@pytest.mark.e2e
def test_triton_kernel_name_is_the_jit_function(interpreted: dict[str, Any]) -> None:
    assert interpreted["meta"]["kernel_fn_name"] == TRITON_KERNEL_NAME
    assert pre_dispatch.kernel_name("triton", "packed") == TRITON_KERNEL_NAME
    assert pre_dispatch.kernel_name("cuda", "strided") == CUDA_KERNEL_NAME


# ---------------------------------------------------------------------------------------------------------
# The reference

def test_reference_tricky_token() -> None:
    ids = torch.tensor([[3, 1, 4, 1]], dtype=torch.int32)
    weights = torch.tensor([[0.5, 0.25, 0.125, 0.125]])
    q, scale, out_ids, out_weights = pre_dispatch_reference(tricky_x(), ids, weights, 1, 3)
    assert scale.tolist() == [TRICKY_SCALE]
    for group, expected in enumerate(TRICKY_Q):
        got = q[0, group * 32: (group + 1) * 32].tolist()
        assert got[: len(expected)] == expected, f"group {group}"
        assert got[len(expected):] == [0] * (32 - len(expected)), f"group {group} zeros"
    assert out_ids.tolist() == [[3, 1, 4, 1], [-1] * 4, [-1] * 4]
    assert out_weights.tolist() == [[0.5, 0.25, 0.125, 0.125], [0.0] * 4, [0.0] * 4]


def test_reference_zero_group_uses_the_amax_floor() -> None:
    # 1e-10f / 448 lies in [2^-43, 2^-42) and is no power of two: exponent 127 - 43 + 1 = 85.
    x = torch.zeros(2, 128, dtype=torch.bfloat16)
    x[1, :32] = 1e-20        # below the floor too
    q, scale, _, _ = pre_dispatch_reference(x, torch.zeros(2, 1, dtype=torch.int32), torch.zeros(2, 1), 2, 2)
    assert scale.tolist() == [[85] * 4, [85] * 4]
    assert int(q.abs().max()) == 0


def test_e4m3_bytes_clip_out_of_range_values() -> None:
    # The kernel's scaling keeps |x * 2^(127-e)| <= 448, so its clip only guards the boundary itself.
    values = torch.tensor([500.0, -1e6, 448.0, 464.0, -448.0, 1e30])
    assert e4m3_bytes_torch(values).tolist() == [0x7E, 0xFE, 0x7E, 0x7E, 0xFE, 0x7E]


def test_scaled_values_never_exceed_448() -> None:
    x = sample_x(4, 2304, seed=7).float().reshape(4, 72, 32)
    exponent = ue8m0_exponent_torch(x.abs().amax(-1))
    scaled = x * torch.exp2(127.0 - exponent.double()).float().unsqueeze(-1)
    assert float(scaled.abs().max()) <= 448.0


def _exact_ue8m0(amax: float) -> int:
    """Smallest e with 2^(e-127) >= max(amax, 1e-10f) / 448, in exact rational arithmetic."""
    floor = float(np.float32(1e-10))
    ratio = Fraction(max(amax, floor)) / 448
    t = ratio.numerator.bit_length() - ratio.denominator.bit_length()
    while Fraction(2) ** t < ratio:
        t += 1
    while Fraction(2) ** (t - 1) >= ratio:
        t -= 1
    return 127 + t


def test_ue8m0_exponent_is_exact_for_every_positive_bf16() -> None:
    bits = torch.arange(1, 0x7F80, dtype=torch.int32).to(torch.int16)   # every positive finite bf16
    amax = bits.view(torch.bfloat16).float()
    got = ue8m0_exponent_torch(amax).tolist()
    expected = [_exact_ue8m0(a) for a in amax.tolist()]
    mismatches = [(a, g, e) for a, g, e in zip(amax.tolist(), got, expected) if g != e]
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:5]}"


def _e4m3_oracle(values: np.ndarray) -> np.ndarray:
    """Independent float32 -> e4m3fn: nearest entry of the decoded code table, ties to the even code."""
    codes = np.arange(0x7F)   # 0x00..0x7E: every non-negative finite e4m3fn value
    exp, man = codes >> 3, codes & 7
    table = np.where(exp == 0, man / 8.0 * 2.0**-6, (1 + man / 8.0) * 2.0 ** (exp - 7.0))
    mag = np.minimum(np.abs(values.astype(np.float64)), 448.0)
    hi = np.clip(np.searchsorted(table, mag), 1, len(table) - 1)
    lo = hi - 1
    d_lo, d_hi = mag - table[lo], table[hi] - mag
    pick = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    return (pick | np.where(np.signbit(values), 0x80, 0)).astype(np.uint8)


def test_torch_e4m3_cast_rounds_to_nearest_even() -> None:
    exps = np.arange(-14, 10, dtype=np.int64) + 127
    mantissas = np.arange(0, 1 << 23, 1 << 14, dtype=np.int64)     # includes every e4m3 tie pattern
    grid = ((exps[:, None] << 23) | mantissas[None, :]).ravel()
    rng = np.random.default_rng(3)
    random = rng.integers(0x3A000000, 0x43E00001, 200_000)        # 2^-11 .. 448
    bits = np.concatenate([grid, random, np.arange(0, 4096)]).astype(np.uint32)
    values = np.concatenate([bits.view(np.float32), -bits.view(np.float32)])
    got = e4m3_bytes_torch(torch.from_numpy(values)).numpy()
    expected = _e4m3_oracle(values)
    bad = np.nonzero(got != expected)[0]
    assert bad.size == 0, f"{bad.size} mismatches, first values {values[bad[:5]]}"


# ---------------------------------------------------------------------------------------------------------
# Pure layout helpers

@pytest.mark.parametrize(("hidden", "groups", "row", "padding"), [
    (2176, 68, 80, 12), (2304, 72, 80, 8), (2432, 76, 80, 4),
    (2560, 80, 80, 0), (4096, 128, 128, 0), (7168, 224, 224, 0),
])
def test_layout_helpers(hidden: int, groups: int, row: int, padding: int) -> None:
    assert scale_row_bytes(hidden) == groups
    assert padded_row_stride(hidden) == row
    assert row - groups == padding
    predicted = packed_write_bytes(hidden, 5, row)
    if padding == 0:
        assert predicted == []
    else:
        assert predicted == [(r * row + groups, min((r + 1) * row, 5 * groups)) for r in range(5)
                             if r * row + groups < 5 * groups]


def test_packed_write_bytes_for_the_design_example() -> None:
    assert packed_write_bytes(2304, 5, 80) == [(72, 80), (152, 160), (232, 240), (312, 320)]
    assert scale_write_end(2304, 5, 80, "packed") == 360          # last byte 359 of 640
    assert scale_write_end(2304, 8, 80, "strided") == 632         # last byte 631 of 576: past the end
    assert scale_write_end(2304, 0, 80, "strided") == 0
    assert packed_write_bytes(2304, 5, 72) == []                   # packed allocation: nothing to see


def test_packed_write_bytes_with_rows_shorter_than_g() -> None:
    # stride 16 < G = 72: everything from row num_tokens on belongs to rows nobody asked for.
    assert packed_write_bytes(2304, 2, 16) == [(32, 144)]


def test_layout_helpers_reject_bad_sizes() -> None:
    with pytest.raises(ValueError, match="hidden = 100 must be a positive multiple of 32"):
        scale_row_bytes(100)
    with pytest.raises(ValueError, match="row_stride_bytes = 0 must be positive"):
        packed_write_bytes(2304, 1, 0)


# ---------------------------------------------------------------------------------------------------------
# Adapter: host checks and argument errors (raised before any kernel module is imported)

def _launch_args(case: Case) -> tuple[list[torch.Tensor], torch.Tensor]:
    buffers = build_buffers(case, seed=0)
    scale = scale_view(buffers["scale_store"], case)
    return [buffers["x"], buffers["topk_ids"], buffers["topk_weights"], buffers["q_out"], scale,
            buffers["ids_out"], buffers["weights_out"]], scale


def test_host_check_refuses_unpadded_rows() -> None:
    args, _ = _launch_args(Case(2304, 2, 2, scale_row_bytes=72))
    with pytest.raises(ValueError, match=r"row stride bytes % 16 == 0: row stride = 72 bytes, 72 % 16 = 8"):
        pre_dispatch.launch("triton", *args, num_tokens=2, mode="strided")


def test_host_check_refuses_overlapping_rows() -> None:
    args, _ = _launch_args(Case(2304, 2, 2, scale_row_bytes=64))
    with pytest.raises(ValueError, match=r"stride\(0\) >= G/4: stride\(0\) = 16 int32 < G/4 = 18"):
        pre_dispatch.launch("triton", *args, num_tokens=2, mode="strided")


def test_host_check_refuses_misaligned_base() -> None:
    args, scale = _launch_args(Case(2304, 2, 2, front_guard=4))
    assert scale.data_ptr() % 16 == 4
    with pytest.raises(ValueError, match=r"base address % 16 == 0: base = 0x[0-9a-f]+, .* % 16 = \d+"):
        pre_dispatch.launch("triton", *args, num_tokens=2, mode="strided")


def test_host_check_refuses_a_stride_the_buffer_does_not_have() -> None:
    args, _ = _launch_args(Case(2304, 8, 8, scale_row_bytes=72))
    with pytest.raises(ValueError, match=r"row_stride_bytes = 80 but scale_out rows are 72 bytes apart"):
        pre_dispatch.launch("triton", *args, num_tokens=8, mode="strided", row_stride_bytes=80)


def test_unknown_impl_and_mode() -> None:
    args, _ = _launch_args(Case(2304, 1, 1))
    with pytest.raises(ValueError, match="unknown impl 'hip'; allowed: cuda, triton"):
        pre_dispatch.launch("hip", *args, num_tokens=1, mode="strided")
    with pytest.raises(ValueError, match="unknown mode 'tiled'; allowed: packed, strided"):
        pre_dispatch.launch("triton", *args, num_tokens=1, mode="tiled")
    with pytest.raises(ValueError, match="unknown mode"):
        pre_dispatch.kernel_name("cuda", "tiled")


def test_cuda_without_gpu_is_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    args, _ = _launch_args(Case(2304, 1, 1))
    with pytest.raises(Unsupported, match=r"^needs a CUDA GPU; torch.cuda.is_available\(\) is False$"):
        pre_dispatch.launch("cuda", *args, num_tokens=1, mode="strided")


def test_cuda_impl_refuses_cpu_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    args, _ = _launch_args(Case(2304, 1, 1))
    with pytest.raises(ValueError, match="impl 'cuda' needs CUDA tensors; the buffers are on cpu"):
        pre_dispatch.launch("cuda", *args, num_tokens=1, mode="strided")


@pytest.mark.parametrize(("index", "replacement", "message"), [
    (0, torch.zeros(1, 2304), "x: dtype must be torch.bfloat16; got torch.float32"),
    (0, torch.zeros(1, 2300, dtype=torch.bfloat16), "hidden = 2300 must be a positive multiple of 32"),
    (0, torch.zeros(1, 2336, dtype=torch.bfloat16), "G = 73 scale bytes, not a multiple of 4"),
    (3, torch.zeros(1, 2304, dtype=torch.int8), "q_out: dtype must be torch.uint8 or torch.float8_e4m3fn"),
    (5, torch.zeros(2, TOP_K, dtype=torch.int64), r"weights_out: shape must be \(2, 4\); got \(1, 4\)"),
    (2, torch.zeros(1, 3), r"topk_weights: shape must be \(1, 4\); got \(1, 3\)"),
])
def test_structural_errors(index: int, replacement: torch.Tensor, message: str) -> None:
    args, _ = _launch_args(Case(2304, 1, 1))
    args[index] = replacement
    with pytest.raises(ValueError, match=message):
        pre_dispatch.launch("triton", *args, num_tokens=1, mode="strided")


def test_num_tokens_above_padded_max() -> None:
    args, _ = _launch_args(Case(2304, 1, 1))
    with pytest.raises(ValueError, match="need 0 <= num_tokens <= padded_max; got num_tokens = 2"):
        pre_dispatch.launch("triton", *args, num_tokens=2, mode="strided")


# ---------------------------------------------------------------------------------------------------------
# CUDA build: error path, cache key, and a standalone compile of the kernel source

def test_build_failure_raises_kernel_build_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from torch.utils import cpp_extension

    from gpu_memsafety.util import cuda_build

    output = "x" * 10_000 + "\npre_dispatch.cu(42): error: expected a \";\"\n"
    calls: list[dict[str, Any]] = []

    def failing_load(**kwargs: Any) -> None:
        calls.append(kwargs)
        raise RuntimeError(f"Error building extension 'gpu_memsafety_pre_dispatch': {output}")

    monkeypatch.setenv(cuda_build.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(cpp_extension, "load", failing_load)
    monkeypatch.setattr(cuda_build, "toolchain_problem", lambda: "")    # nvcc and ninja are there: the source fails
    pre_dispatch_cuda.build.cache_clear()
    with pytest.raises(KernelBuildError) as info:
        pre_dispatch_cuda.build((9, 0))
    build_dir = Path(calls[0]["build_directory"])
    text = str(info.value)
    assert 'pre_dispatch.cu(42): error: expected a ";"' in text and len(text) < 5000
    assert f"build_dir = {build_dir}" in text
    assert build_dir.parent == tmp_path / "cuda" and build_dir.name.startswith("pre_dispatch-")
    assert {"-lineinfo", "-gencode=arch=compute_90,code=sm_90"} <= set(calls[0]["extra_cuda_cflags"])
    assert (build_dir / "pre_dispatch.cu").read_text() == pre_dispatch_cuda.CU_PATH.read_text()

    (build_dir / "lock").touch()          # torch's baton, as a build killed half-way leaves it
    with pytest.raises(KernelBuildError):
        pre_dispatch_cuda.build((9, 0))
    assert calls[1]["build_directory"] == str(build_dir), "same source and device: same cache entry"
    assert not (build_dir / "lock").exists(), "a stale baton must not block later builds"
    with pytest.raises(KernelBuildError):
        pre_dispatch_cuda.build((10, 0))
    assert calls[2]["build_directory"] != str(build_dir)
    pre_dispatch_cuda.build.cache_clear()


NVCC = shutil.which("nvcc") or next((p for p in ["/usr/local/cuda/bin/nvcc"] if os.path.exists(p)), None)


@pytest.mark.e2e
@pytest.mark.skipif(NVCC is None, reason="needs nvcc (CUDA toolkit); found none on PATH or in /usr/local/cuda")
def test_cuda_source_compiles_standalone(tmp_path: Path) -> None:
    obj = tmp_path / "pre_dispatch.o"
    proc = subprocess.run([str(NVCC), "-std=c++17", "-arch=sm_90", "-lineinfo", "-c",
                           str(pre_dispatch_cuda.CU_PATH), "-o", str(obj)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"nvcc failed\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert CUDA_KERNEL_NAME.encode() in obj.read_bytes()


if __name__ == "__main__":
    child_main(sys.argv[1], sys.argv[2])
