"""state-spaces/mamba's varlen Mamba-2 state kernels (e9594ce1c732; ci/gpu/field/fetch.sh mamba) without a GPU, called
as its own tests/ops/triton/test_ssd.py::test_chunk_state_varlen calls them, at the segment boundaries that test never
draws (its lengths come from [1, 200)): an empty first, middle and last sequence, one token, a chunk and a chunk + 1.
An empty first sequence makes `_chunk_state_varlen_kernel` read 4 B before `dA_cumsum` (campaign 2's finding,
ci/gpu/field/repro/mamba_varlen_empty_first_sequence.py): declared, so the run says `expected finding`, or
`unexpectedly clean` once it is fixed. `-p cuda_on_cpu` puts the test's tensors on the CPU:

    cd ci/gpu/field/cpu && PYTHONPATH=$REPO/.field/mamba:$PWD python -m pytest -p cuda_on_cpu --gpu-memsafety -q \\
        test_mamba_varlen_edges.py
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from einops import rearrange

from mamba_ssm.ops.triton.ssd_chunk_state import _chunk_cumsum_fwd, _chunk_state_fwd, chunk_state_varlen
from mamba_ssm.ops.triton.ssd_state_passing import _state_passing_fwd

FINDING = "campaign 2: mamba chunk_state_varlen, empty first sequence (not reported upstream)"
EMPTY_FIRST = pytest.mark.gpu_memsafety(expect={"kind": "overread", "region": "before_start", "bytes": 4},
                                        issue=FINDING)


@pytest.mark.parametrize("seqlens", [pytest.param((0, 5, 70), marks=EMPTY_FIRST), (5, 0, 70), (5, 70, 0),
                                     (1, 64, 65)])
def test_chunk_state_varlen_segments(seqlens: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    chunk_size, dstate, headdim, nheads, ngroups = 64, 16, 32, 2, 1
    lengths = torch.tensor(seqlens, device="cuda")
    cu_seqlens = F.pad(lengths.cumsum(0), (1, 0))
    total = int(lengths.sum())
    seq_idx = torch.cat([torch.full((n,), i, dtype=torch.int32, device="cuda")
                         for i, n in enumerate(seqlens)]).unsqueeze(0)
    B = torch.randn(total, ngroups, dstate, device="cuda") / 5
    x = torch.randn(total, nheads, headdim, device="cuda")
    A = -0.1 * torch.rand(nheads, device="cuda")
    dt = F.softplus(torch.randn(total, nheads, device="cuda") - 4)
    dA_cumsum, dt_rounded = _chunk_cumsum_fwd(dt.unsqueeze(0), A, chunk_size)
    states = _chunk_state_fwd(B.unsqueeze(0), x.unsqueeze(0), dt_rounded, dA_cumsum, seq_idx=seq_idx)
    states, _ = _state_passing_fwd(rearrange(states, "... p n -> ... (p n)"), dA_cumsum[:, :, :, -1],
                                   seq_idx=seq_idx, chunk_size=chunk_size)
    states = rearrange(states, "... (p n) -> ... p n", n=dstate).squeeze(0)
    final = chunk_state_varlen(B, x, dt_rounded.squeeze(0), dA_cumsum.squeeze(0), cu_seqlens, states)
    assert (final[lengths == 0] == 0).all()         # an empty sequence's state: zero (no initial state)
