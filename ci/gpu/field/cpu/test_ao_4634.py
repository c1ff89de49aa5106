"""The field campaign's control, pytorch/ao#4634, on a machine without a GPU: pytorch/ao's real blockwise FP8
training kernels (torchao at 36027d82d1ad on PYTHONPATH, ci/gpu/field/fetch.sh ao) run in Triton's interpreter, and
`pytest --gpu-memsafety` (the bare flag: the trace there) must find their unmasked scale loads. The library's own
tests need CUDA (`skipif(not torch.cuda.is_available())`), so these call the same functions the same way, on CPU
tensors, with shapes of the suite's BLOCKWISE_SIZE_MNK kind:

- M = 2 rows: every BLOCK_SIZE_M config (64, 128, 256; the autotuner's six, each run once untimed) loads a_s rows
  2..BLOCK_SIZE_M-1 past the 8 B of `A_s`: 1,016 B past its end in all; b_s 4 B past `B_t_s`'s 4 B. Declared with
  the marker, so the run says `expected finding`, or `unexpectedly clean` when the bug is gone.
- M = N = 256: every block is full, nothing is read past an end: clean (the control's own negative).

    cd ci/gpu/field/cpu && PYTHONPATH=$REPO/.field/ao python -m pytest --gpu-memsafety -q
"""
from __future__ import annotations

import pytest
import torch

from torchao.float8.config import e4m3_dtype
from torchao.prototype.blockwise_fp8_training.kernels import (
    triton_fp8_blockwise_act_quant_lhs, triton_fp8_blockwise_act_quant_rhs,
    triton_fp8_blockwise_act_quant_transposed_lhs, triton_fp8_blockwise_weight_quant_transposed_rhs,
    triton_fp8_gemm_1x128_128x1, triton_fp8_gemm_1x128_128x128)

ISSUE = "pytorch/ao#4634"


def _gemm_128x128(M: int, N: int, K: int) -> None:
    torch.manual_seed(0)
    A = torch.randn(M, K, dtype=torch.bfloat16)
    B = torch.randn(N, K, dtype=torch.bfloat16)
    A_q, A_s = triton_fp8_blockwise_act_quant_lhs(A, dtype=e4m3_dtype)
    B_t_q, B_t_s = triton_fp8_blockwise_weight_quant_transposed_rhs(B, dtype=e4m3_dtype)
    C = triton_fp8_gemm_1x128_128x128(A_q, B_t_q, A_s, B_t_s, out_dtype=torch.bfloat16)
    assert not C.isnan().any()


@pytest.mark.gpu_memsafety(expect=[{"kind": "overread", "region": "past_end", "bytes": 1016, "size": 8},
                                   {"kind": "overread", "region": "past_end", "bytes": 4, "size": 4}], issue=ISSUE)
def test_gemm_1x128_128x128_two_rows() -> None:
    _gemm_128x128(2, 128, 128)


def test_gemm_1x128_128x128_full_blocks() -> None:
    _gemm_128x128(256, 256, 128)


@pytest.mark.gpu_memsafety(expect={"kind": "overread", "region": "past_end"}, issue=ISSUE)
def test_gemm_1x128_128x1_two_rows() -> None:
    torch.manual_seed(0)
    M, N, K = 2, 128, 128
    A = torch.randn(K, M, dtype=torch.bfloat16)
    B = torch.randn(K, N, dtype=torch.bfloat16)
    A_t_q, A_t_s = triton_fp8_blockwise_act_quant_transposed_lhs(A, dtype=e4m3_dtype)
    B_q, B_s = triton_fp8_blockwise_act_quant_rhs(B, dtype=e4m3_dtype)
    C = triton_fp8_gemm_1x128_128x1(A_t_q, B_q, A_t_s, B_s, out_dtype=torch.bfloat16)
    assert not C.isnan().any()
