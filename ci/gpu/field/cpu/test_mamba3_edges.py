"""state-spaces/mamba's Mamba-3 SISO kernels (e9594ce1c732; ci/gpu/field/fetch.sh mamba) without a GPU, called as its
own tests/ops/triton/test_mamba3_siso.py calls them, with that file's input builder, at small and boundary shapes: its
tests are not parametrized and run batch 16 to 128 with 2,345 tokens, too large for Triton's interpreter. One token,
63 and 65 tokens around the 64-token chunk, head dims 48/24 (not powers of two), varlen with a one-token sequence
and with an empty one (the last: campaign 2's finding, declared).
Forward and step kernels only: the backward asserts CUDA tensors and atomically adds bf16, which the interpreter
cannot (numpy has no bf16 atomics); on a GPU the library's own tests run it.
`-p cuda_on_cpu` puts the `device="cuda"` tensors on the CPU; `-p interpreter_gaps` computes the kernels' PTX
approximations and bf16 constants there (MAMBA_TREE: the mamba tree, for its test module):

    cd ci/gpu/field/cpu && MAMBA_TREE=$REPO/.field/mamba PYTHONPATH=$REPO/.field/mamba:$PWD python -m pytest \
        -p cuda_on_cpu -p interpreter_gaps --gpu-memsafety -q test_mamba3_edges.py
"""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.environ["MAMBA_TREE"], "tests/ops/triton"))
from test_mamba3_siso import create_mamba3_siso_inputs
from mamba_ssm.ops.triton.mamba3.mamba3_siso_combined import mamba3_siso_combined
from mamba_ssm.ops.triton.mamba3.mamba3_siso_step import mamba3_siso_step


@pytest.mark.parametrize("seqlen", [1, 63, 65])
@pytest.mark.parametrize("hqk,hv", [(32, 16), (48, 24)])
def test_combined(seqlen, hqk, hv):
    torch.manual_seed(0)
    inp = create_mamba3_siso_inputs(1, seqlen, 2, 1, hqk, hv, torch.bfloat16, "cuda", has_D=True, has_Z=True,
                                    has_input_states=True, requires_grad=False)
    out = mamba3_siso_combined(inp['Q'], inp['K'], inp['V'], inp['ADT'], inp['DT'], inp['Trap'], inp['Q_bias'],
                               inp['K_bias'], inp['Angles'], inp['D'], inp['Z'], inp['Input_States'], chunk_size=64,
                               return_final_states=True)


@pytest.mark.parametrize("lens", [(1, 5), (3, 64, 65), (70,)])
def test_varlen(lens):
    torch.manual_seed(0)
    cu = torch.tensor([0] + torch.cumsum(torch.tensor(lens), 0).tolist(), dtype=torch.int32)
    T = sum(lens)
    inp = create_mamba3_siso_inputs(1, T, 2, 1, 32, 16, torch.bfloat16, "cuda", has_D=True, has_Z=True,
                                    has_input_states=True, cu_seqlens=cu, requires_grad=False)
    out = mamba3_siso_combined(inp['Q'], inp['K'], inp['V'], inp['ADT'], inp['DT'], inp['Trap'], inp['Q_bias'],
                               inp['K_bias'], inp['Angles'], inp['D'], inp['Z'], inp['Input_States'], chunk_size=64,
                               return_final_states=True, cu_seqlens=cu)


@pytest.mark.parametrize("batch,hqk,hv", [(1, 32, 16), (3, 48, 24)])
def test_step(batch, hqk, hv):
    torch.manual_seed(0)
    inp = create_mamba3_siso_inputs(batch, 2, 2, 1, hqk, hv, torch.bfloat16, "cuda", has_D=True, has_Z=True,
                                    has_input_states=True)
    st = inp['Input_States']
    for s in range(2):
        o, st = mamba3_siso_step(inp['Q'][:, s].contiguous(), inp['K'][:, s].contiguous(), inp['V'][:, s].contiguous(),
                                 inp['ADT'][:, :, s].contiguous(), inp['DT'][:, :, s].contiguous(),
                                 inp['Trap'][:, :, s].contiguous(), inp['Q_bias'], inp['K_bias'],
                                 inp['Angles'][:, s].contiguous(), inp['D'], inp['Z'][:, s].contiguous(), st)


EMPTY_LAST = pytest.mark.gpu_memsafety(
    expect=[{"kind": "overread", "region": "past_end", "bytes": 4}, {"kind": "overread", "region": "past_end", "bytes": 2}],
    issue="campaign 2: Mamba-3 SISO varlen forward, empty last sequence with input states (not reported upstream)")


@pytest.mark.parametrize("lens", [(0, 5), (5, 0, 3), pytest.param((3, 0), marks=EMPTY_LAST)])
def test_varlen_empty_sequence(lens):
    """An empty segment in cu_seqlens (static-shape padding repeats the last offset): the last one makes the forward
    read DT and Trap past their ends (ci/gpu/field/repro/mamba3_varlen_empty_last_sequence.py)."""
    torch.manual_seed(0)
    cu = torch.tensor([0] + torch.cumsum(torch.tensor(lens), 0).tolist(), dtype=torch.int32)
    inp = create_mamba3_siso_inputs(1, sum(lens), 2, 1, 32, 16, torch.bfloat16, "cuda", has_D=True, has_Z=True,
                                    has_input_states=True, cu_seqlens=cu, requires_grad=False)
    mamba3_siso_combined(inp['Q'], inp['K'], inp['V'], inp['ADT'], inp['DT'], inp['Trap'], inp['Q_bias'],
                         inp['K_bias'], inp['Angles'], inp['D'], inp['Z'], inp['Input_States'], chunk_size=64,
                         return_final_states=True, cu_seqlens=cu)
