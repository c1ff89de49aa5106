"""Standalone reproducer, no harness: state-spaces/mamba's Mamba-3 SISO forward reads `DT` and `Trap` past their ends
when the LAST sequence of `cu_seqlens` is empty and input states are given (mamba at e9594ce1c732,
mamba_ssm/ops/triton/mamba3/mamba3_siso_fwd.py:367-368, `mamba3_siso_fwd_kernel`; since the Mamba-3 release 5235bdc,
v2.3.2). Found by `pytest --gpu-memsafety` (trace, no GPU) running the calls of mamba's own
tests/ops/triton/test_mamba3_siso.py (test_mamba3_siso_combined_varlen: 8 sequences of 2,345+ tokens) with an empty
segment, 2026-12-07.

With input states, each (head, sequence) program first steps the SSM state with the input K/V states, using the
sequence's first token's dt and trap: `dt_scalar = tl.load(dt_ptr)`, `trap_scalar = tl.load(trap_ptr)`, unmasked,
whatever the sequence's length. For an empty sequence `dt_ptr` points at the next sequence's first token (a wrong
value, inside the tensor), and for an empty LAST sequence at the end of the head's row: for the last head, past the
end of `DT` (fp32, 4 B) and `Trap` (bf16, 2 B). Repeated trailing offsets are how static-shape batching pads
`cu_seqlens`. (The empty sequence's state then takes a step it should not: wrong final states too.)

On a GPU:  PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python mamba3_varlen_empty_last_sequence.py
           (memcheck: invalid __global__ reads of 4 and 2 bytes just past two allocations, in mamba3_siso_fwd_kernel)
On a CPU:  TRITON_INTERPRET=1 python mamba3_varlen_empty_last_sequence.py
           (Triton's interpreter; DT and Trap are put at the start of buffers of their own and every load's addresses
           are checked against their ends. Mamba-3's kernels use PTX approximations, bf16 constants, CUDA tensors and
           the compute capability, which Triton's interpreter and a CPU lack: this takes ci/gpu/field/cpu's
           interpreter_gaps and cuda_on_cpu, which only let the kernels run there; the check is this file's own.)
with mamba at e9594ce1c732 on PYTHONPATH (and, on a CPU, ci/gpu/field/cpu). argv: the sequence lengths (default 3 0;
`0 3`: the control, an empty first sequence, reads inside the tensors). Prints the bytes read past the ends and exits
1 when there are any.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

CPU = os.environ.get("TRITON_INTERPRET") == "1"
past: dict[str, set[int]] = {"DT": set(), "Trap": set()}
watched: dict[str, tuple[int, int]] = {}
if CPU:
    import numpy as np
    import triton
    from triton.runtime import interpreter as I

    import cuda_on_cpu
    import interpreter_gaps
    cuda_on_cpu.pytest_configure(None)          # device="cuda" tensors made on the CPU; torch.cuda calls do nothing
    interpreter_gaps.install()                  # cos/sin/tanh.approx.f32 and bf16 constants in the interpreter
    # Triton's interpreter cannot time autotuner configs without a GPU: every config "takes" 0 ms, the first is kept
    triton.runtime.autotuner.Autotuner._bench = lambda self, *args, config=None, **kwargs: [0.0, 0.0, 0.0]
    load = I.InterpreterBuilder.create_masked_load

    def checked_load(self, ptrs, mask, *args, **kwargs):
        addrs = np.asarray(ptrs.data).astype(np.int64).ravel()
        live = np.asarray(mask.data).astype(bool).ravel() if mask is not None else np.ones_like(addrs, bool)
        live = np.broadcast_to(live, addrs.shape)
        for name, (end, pad_end) in watched.items():
            past[name].update(int(a) - end for a in addrs[live & (addrs >= end) & (addrs < pad_end)])
        return load(self, ptrs, mask, *args, **kwargs)
    I.InterpreterBuilder.create_masked_load = checked_load

from mamba_ssm.ops.triton.mamba3.mamba3_siso_combined import mamba3_siso_combined


def own(t: torch.Tensor, name: str) -> torch.Tensor:
    """On a CPU, `t` at the start of a buffer of its own with 4 KiB after it: what is read past its end is the pad's."""
    if not CPU:
        return t
    flat = torch.zeros(t.numel() + 4096 // t.element_size(), dtype=t.dtype)
    flat[:t.numel()] = t.reshape(-1)
    out = flat[:t.numel()].view(t.shape)
    watched[name] = (out.data_ptr() + out.nbytes, flat.data_ptr() + flat.nbytes)
    return out


lengths = [int(a) for a in sys.argv[1:]] or [3, 0]
nheads, nheads_qk, hd_qk, hd_v, chunk = 2, 1, 32, 16, 64
cu = torch.tensor([0] + torch.cumsum(torch.tensor(lengths), 0).tolist(), dtype=torch.int32, device="cuda")
T, S = sum(lengths), len(lengths)
torch.manual_seed(0)
bf = torch.bfloat16
Q = F.rms_norm(torch.randn(1, T, nheads_qk, hd_qk, device="cuda", dtype=bf), (hd_qk,))
K = F.rms_norm(torch.randn(1, T, nheads_qk, hd_qk, device="cuda", dtype=bf), (hd_qk,))
V = torch.randn(1, T, nheads, hd_v, device="cuda", dtype=bf)
dt = torch.exp(torch.rand(1, nheads, T, device="cuda") * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
ADT = -torch.empty(1, nheads, T, device="cuda").uniform_(1.0, 16.0) * dt
DT = own(dt.contiguous(), "DT")
Trap = own(torch.empty(1, nheads, T, device="cuda", dtype=bf).uniform_(0.0, 1.0), "Trap")
Q_bias, K_bias = (torch.randn(nheads, hd_qk, device="cuda", dtype=bf) for _ in range(2))
Angles = torch.randn(1, T, nheads, hd_qk // 4, device="cuda", dtype=bf) * 0.1
D = torch.ones(nheads, device="cuda")
Z = torch.randn(1, T, nheads, hd_v, device="cuda", dtype=bf)
states = (torch.randn(S, nheads, hd_qk // 4, device="cuda"), torch.randn(S, nheads, hd_v, hd_qk, device="cuda"),
          torch.randn(S, nheads, hd_qk, device="cuda"), torch.randn(S, nheads, hd_v, device="cuda"))
print(f"cu_seqlens {cu.tolist()}; DT {tuple(DT.shape)} fp32 {DT.nbytes} B, Trap {tuple(Trap.shape)} bf16 {Trap.nbytes} B")
out = mamba3_siso_combined(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D, Z, states, chunk_size=chunk,
                           return_final_states=True, cu_seqlens=cu)
if not CPU:
    torch.cuda.synchronize()
    print("ran; memcheck reports the reads (this process cannot see them)")
    sys.exit(0)
for name, offsets in past.items():
    print(f"{name}: " + (f"read bytes {min(offsets)}..{max(offsets) + (3 if name == 'DT' else 1)} past its end"
                         if offsets else "no read past its end"))
sys.exit(1 if any(past.values()) else 0)
