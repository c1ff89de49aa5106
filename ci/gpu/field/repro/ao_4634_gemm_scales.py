"""Standalone reproducer, no harness: pytorch/ao#4634 (the field campaign's control). The blockwise FP8 training GEMMs
load the per-row activation scales `a_s` (and `b_s`) without a mask: for M = 2 rows and BLOCK_SIZE_M = 64..256, each
program reads scale rows 2..BLOCK_SIZE_M-1, past the end of `a_s`.

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python ao_4634_gemm_scales.py
    (with torchao at 36027d82d1ad on PYTHONPATH; TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1 skips its C++ ops)

memcheck prints "Invalid __global__ read ... out of bounds" in triton_fp8_gemm_1x128_128x128_kernel. The plain run
prints the same maximum error as with the fix: the values read past the end are multiplied into rows that are
masked off at the store, so the bug is silent (until the read crosses into unmapped memory).
"""
import torch

from torchao.float8.config import e4m3_dtype
from torchao.prototype.blockwise_fp8_training.kernels import (
    triton_fp8_blockwise_act_quant_lhs, triton_fp8_blockwise_weight_quant_transposed_rhs,
    triton_fp8_gemm_1x128_128x128)

M, N, K = 2, 512, 128
torch.manual_seed(0)
A = torch.randn(M, K, dtype=torch.bfloat16, device="cuda")
B = torch.randn(N, K, dtype=torch.bfloat16, device="cuda")
A_q, A_s = triton_fp8_blockwise_act_quant_lhs(A, dtype=e4m3_dtype)
B_t_q, B_t_s = triton_fp8_blockwise_weight_quant_transposed_rhs(B, dtype=e4m3_dtype)
print(f"a_s: {tuple(A_s.shape)} {A_s.dtype}, {A_s.untyped_storage().nbytes()} B; "
      f"b_s: {tuple(B_t_s.shape)}, {B_t_s.untyped_storage().nbytes()} B")
C = triton_fp8_gemm_1x128_128x128(A_q, B_t_q, A_s, B_t_s, out_dtype=torch.bfloat16)
torch.cuda.synchronize()
print("max abs error vs bf16 matmul:", (C.float() - (A @ B.T).float()).abs().max().item())
