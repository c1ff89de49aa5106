"""Standalone reproducer, no harness: state-spaces/mamba's `chunk_state_varlen` (Mamba-2 SSD, varlen final states)
reads `dA_cumsum` 4 bytes before its start when the FIRST sequence of `cu_seqlens` is empty (mamba at e9594ce1c732,
mamba_ssm/ops/triton/ssd_chunk_state.py, `_chunk_state_varlen_kernel`; unchanged since v2.2.0, 03a38fb). Found by
`pytest --gpu-memsafety` (trace, no GPU) running the library's own test_chunk_state_varlen calls with an empty
segment (its test draws every length from [1, 200)), 2026-12-07.

The kernel takes its sequence's last chunk as `pid_c = (end_idx - 1) // chunk_size` and loads the decay at the
sequence's last token, `dA_cumsum + (end_idx - pid_c * chunk_size - 1)`. For an empty sequence at the start,
end_idx = 0: the index is -1 (compiled Triton truncates (0 - 1) // chunk_size to 0; numpy floors it to -1 and shifts
the chunk by one, the same address either way), and head 0's program reads the 4 bytes before the tensor. The value
is not used (the sequence has no token: the state stays 0), so results are right: a silent read past an allocation's
start, until the tensor begins at unmapped memory. Empty segments are how static-shape batching pads cu_seqlens, and a
context-parallel rank with no token of a request gets one.

On a GPU:  PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python mamba_varlen_empty_first_sequence.py
           (memcheck: "Invalid __global__ read of size 4 bytes ... 4 bytes before the nearest allocation", in
           _chunk_state_varlen_kernel). It runs the library-level calls (as its test does) and the public
           mamba_chunk_scan_combined(..., cu_seqlens=..., return_varlen_states=True).
On a CPU:  TRITON_INTERPRET=1 python mamba_varlen_empty_first_sequence.py
           (Triton's interpreter; dA_cumsum is put 4 KiB into a buffer of its own and every load's addresses are
           checked against its start)
with mamba at e9594ce1c732 on PYTHONPATH. argv: the sequence lengths (default 0 5 70; `5 0 70`: the control, an
empty sequence that is not the first, reads nothing outside). Prints the bytes read before the start and exits 1
when there are any.
"""
import os
import sys

import torch
import torch.nn.functional as F

CPU = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if CPU else "cuda"

import numpy as np
import triton
from einops import rearrange

from mamba_ssm.ops.triton.ssd_chunk_state import _chunk_cumsum_fwd, _chunk_state_fwd, chunk_state_varlen
from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
from mamba_ssm.ops.triton.ssd_state_passing import _state_passing_fwd

before: set[int] = set()
watched: list[tuple[int, int]] = []
if CPU:
    import contextlib

    from triton.runtime import interpreter as I

    torch.cuda.device = lambda *args, **kwargs: contextlib.nullcontext()    # the launchers' `with` around each kernel

    # Triton's interpreter cannot time autotuner configs without a GPU: every config "takes" 0 ms, the first is kept
    triton.runtime.autotuner.Autotuner._bench = lambda self, *args, config=None, **kwargs: [0.0, 0.0, 0.0]
    load = I.InterpreterBuilder.create_masked_load

    def checked_load(self, ptrs, mask, *args, **kwargs):
        addrs = np.asarray(ptrs.data).astype(np.int64).ravel()
        live = np.asarray(mask.data).astype(bool).ravel() if mask is not None else np.ones_like(addrs, bool)
        live = np.broadcast_to(live, addrs.shape)
        for start, pad_start in watched:
            before.update(start - int(a) for a in addrs[live & (addrs < start) & (addrs >= pad_start)])
        return load(self, ptrs, mask, *args, **kwargs)
    I.InterpreterBuilder.create_masked_load = checked_load

lengths = [int(a) for a in sys.argv[1:]] or [0, 5, 70]
chunk_size, dstate, headdim, nheads, ngroups = 64, 16, 32, 2, 1
torch.manual_seed(0)
seqlens = torch.tensor(lengths, device=DEVICE)
cu_seqlens = F.pad(seqlens.cumsum(0), (1, 0))
total = int(seqlens.sum())
seq_idx = torch.cat([torch.full((n,), i, dtype=torch.int32, device=DEVICE) for i, n in enumerate(lengths)]).unsqueeze(0)
B = torch.randn(total, ngroups, dstate, device=DEVICE) / 5
C = torch.randn(total, ngroups, dstate, device=DEVICE) / 5
x = torch.randn(total, nheads, headdim, device=DEVICE)
A = -0.1 * torch.rand(nheads, device=DEVICE)
dt = F.softplus(torch.randn(total, nheads, device=DEVICE) - 4)

# The library's own test's calls (tests/ops/triton/test_ssd.py::test_chunk_state_varlen)
dA_cumsum, dt_rounded = _chunk_cumsum_fwd(dt.unsqueeze(0), A, chunk_size)
states = _chunk_state_fwd(B.unsqueeze(0), x.unsqueeze(0), dt_rounded, dA_cumsum, seq_idx=seq_idx)
states, _ = _state_passing_fwd(rearrange(states, "... p n -> ... (p n)"), dA_cumsum[:, :, :, -1], seq_idx=seq_idx,
                               chunk_size=chunk_size)
states = rearrange(states, "... (p n) -> ... p n", n=dstate).squeeze(0)
dA_cumsum = dA_cumsum.squeeze(0).contiguous()            # (nheads, nchunks, chunk_size): its own allocation
print(f"cu_seqlens {cu_seqlens.tolist()}; dA_cumsum {tuple(dA_cumsum.shape)} fp32, {dA_cumsum.nbytes} B")
if CPU:     # on the CPU, dA_cumsum is put 4 KiB into a buffer of its own: what is read below its start is this pad's
    pad = 1024
    buffer = torch.full((pad + dA_cumsum.numel(),), float("nan"))
    buffer[pad:] = dA_cumsum.reshape(-1)
    dA_cumsum = buffer[pad:].view(dA_cumsum.shape)
    watched.append((dA_cumsum.data_ptr(), buffer.data_ptr()))
final = chunk_state_varlen(B, x, dt_rounded.squeeze(0), dA_cumsum, cu_seqlens, states)
print(f"final states {tuple(final.shape)}; empty sequences' states all zero: "
      f"{bool((final[seqlens == 0] == 0).all())}")
if not CPU:
    # the public entry point, as a varlen Mamba-2 layer calls it (its dA_cumsum is internal)
    out, varlen_states = mamba_chunk_scan_combined(x.unsqueeze(0), dt.unsqueeze(0), A, B.unsqueeze(0), C.unsqueeze(0),
                                                   chunk_size, seq_idx=seq_idx, cu_seqlens=cu_seqlens,
                                                   return_varlen_states=True)
    torch.cuda.synchronize()
    print("ran; memcheck reports the reads (this process cannot see them)")
    sys.exit(0)
if before:
    print(f"_chunk_state_varlen_kernel read bytes -{max(before)}..-{min(before) - 3} BEFORE the start of dA_cumsum "
          f"({len(before)} 4-byte element(s))")
else:
    print("no read before the start of dA_cumsum")
sys.exit(1 if before else 0)
