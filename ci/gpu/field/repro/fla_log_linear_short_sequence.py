"""Standalone reproducer, no harness: fla's log-linear attention reads `level_scales` past its end for a sequence of
at most 32 tokens (fla-org/flash-linear-attention at bc3b101dcb71, fla/ops/log_linear_attn/chunk.py:171, and the
backward's twin at :991). Found by `pytest --gpu-memsafety` (trace, no GPU) on fla's own
tests/ops/test_log_linear_attn.py::test_chunk_varlen[H4-D64-cu_seqlens[0, 15]-torch.float32], 2026-12-05.

The gather is `level_scales + ((bos + tl.minimum(i_t * BT + i_idx, T - 1)) * H + i_h) * L + b_llut`. The fix of
#1142 (PR #1143) clamps the row of a dead row (past the sequence's end) to T - 1, but not its level `b_llut`,
the chunk's level table (BT = 64: levels 0..6). With L = ceil(log2 T) + 1 levels in the tensor, L <= 6 whenever
T <= 32, so a dead row's levels L..6 address past the last row's L entries: at the last sequence's last token and
last head, past the end of the tensor (T = 15, L = 5: 2 levels, 8 B; every row's other excess lands in the next
row, inside the tensor). The values are discarded (dead rows), so results are right: a silent read, until the
tensor ends at unmapped memory. #1142's own test (test_chunk_partial_last_chunk) uses T = 70 and 200 (L >= 8).

On a GPU:  PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python fla_log_linear_short_sequence.py
           (memcheck: "Invalid __global__ read of size 4 ... out of bounds" in chunkwise_fwd_kernel)
On a CPU:  TRITON_INTERPRET=1 python fla_log_linear_short_sequence.py
           (Triton's interpreter; every load's addresses are checked against level_scales' storage below. Plain
           Triton 3.6 cannot run fla's kernels to their end (a loop variable's `.to()`), so this takes one piece of
           the harness, gpu_memsafety.detectors.trace_fidelity, which only makes the interpreter run them as
           compiled Triton does; the check is this file's own.)
with fla at bc3b101dcb71 on PYTHONPATH. Prints the bytes read past the end and exits 1 when there are any.
"""
import os
import sys

import torch

CPU = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if CPU else "cuda"
if CPU:      # fla's device detection says "cuda" on torch >= 2.4; its tensors go to the CPU here
    import fla.utils as _utils
    import fla.utils._device as _device
    for _module in (_utils, _device):
        _module.device, _module.device_torch_lib = "cpu", torch.cpu

import numpy as np
import triton
from fla.ops.log_linear_attn import chunk_log_linear_attn

past: set[int] = set()
if CPU:
    from triton.runtime import interpreter as I

    from gpu_memsafety.detectors import trace_fidelity
    trace_fidelity.install()
    # Triton's interpreter cannot time autotuner configs without a GPU: every config "takes" 0 ms, the first is kept
    triton.runtime.autotuner.Autotuner._bench = lambda self, *args, config=None, **kwargs: [0.0, 0.0, 0.0]
    load = I.InterpreterBuilder.create_masked_load
    watched: list[tuple[int, int]] = []

    def checked_load(self, ptrs, mask, *args, **kwargs):
        addrs = np.asarray(ptrs.data).astype(np.int64).ravel()
        live = np.asarray(mask.data).astype(bool).ravel() if mask is not None else np.ones_like(addrs, bool)
        for start, end in watched:
            past.update(int(a) - end for a in addrs[live & (addrs >= end) & (addrs < end + 4096)])
        return load(self, ptrs, mask, *args, **kwargs)
    I.InterpreterBuilder.create_masked_load = checked_load

T, H, D = int(sys.argv[1]) if len(sys.argv) > 1 else 15, 4, 64     # argv: T (33 or more: L >= 7, the control)
L = int(np.ceil(np.log2(T))) + 1          # 5 levels, as fla's test sizes it
torch.manual_seed(42)
cu_seqlens = torch.LongTensor([0, T]).to(DEVICE)
x = torch.randn(1, T, H, D, device=DEVICE)
dt = torch.nn.functional.softplus(torch.randn(1, T, H, device=DEVICE) - 4)
g = -torch.exp(torch.rand(H, device=DEVICE)) * dt
q = torch.randn(1, T, 1, D, device=DEVICE)
k = torch.randn(1, T, 1, D, device=DEVICE)
v = x * dt.unsqueeze(-1)
level_scales = torch.randn(1, T, H, L, device=DEVICE)      # its own allocation: its end is the storage's end
if CPU:
    watched.append((level_scales.data_ptr(), level_scales.data_ptr() + level_scales.untyped_storage().nbytes()))
print(f"level_scales: {tuple(level_scales.shape)} fp32, {level_scales.untyped_storage().nbytes()} B")
for t in (q, k, v, g, level_scales):
    t.requires_grad_()
found = {}
out, _ = chunk_log_linear_attn(q, k, v, g, level_scales, cu_seqlens=cu_seqlens)
found["forward (chunkwise_fwd_kernel)"], past = set(past), set()
out.sum().backward()
found["backward (chunkwise_bwd_kernel_diag)"] = past
if not CPU:
    torch.cuda.synchronize()
    print("ran; memcheck reports the reads (this process cannot see them)")
    sys.exit(0)
for where, offsets in found.items():
    print(f"{where}: " + (f"read bytes {min(offsets)}..{max(offsets) + 3} past the end of level_scales "
                          f"({len(offsets)} addresses)" if offsets else "no read past the end of level_scales"))
sys.exit(1 if any(found.values()) else 0)
