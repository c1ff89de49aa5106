"""triton_kernels (the copy sglang-kernel 0.4.6.post1 ships; ci/gpu/field/fetch.sh triton_kernels) without a GPU, at
the shapes its own tests (triton's python/triton_kernels/tests/test_topk.py, test_compaction.py: not in the wheel)
run and at their boundaries: one row, a row count one past a 32-row block, one column, 2 and 13 and 67 experts,
k = 1, a device-side row count smaller than the tensor (rows the kernels must skip), provided indices.
Tensors on the CPU, kernels in Triton's interpreter (this folder's conftest sets TRITON_INTERPRET=1):

    cd ci/gpu/field/cpu && PYTHONPATH=$REPO/.field/triton_kernels python -m pytest --gpu-memsafety -q \\
        test_triton_kernels_edges.py
"""
from __future__ import annotations

import pytest
import torch

from triton_kernels.compaction import compaction
from triton_kernels.topk import topk


@pytest.mark.parametrize("n_rows", [1, 31, 33])
@pytest.mark.parametrize("n_cols,k", [(1, 1), (2, 2), (13, 4), (33, 8), (67, 2), (32, 1)])
@pytest.mark.parametrize("apply_softmax", [True, False])
def test_topk(n_rows: int, n_cols: int, k: int, apply_softmax: bool) -> None:
    torch.manual_seed(0)
    x = torch.randn(n_rows, n_cols, requires_grad=True)
    result = topk(x, k, apply_softmax=apply_softmax)
    result.vals.backward(torch.randn_like(result.vals))


@pytest.mark.parametrize("n_rows,n_valid", [(33, 1), (40, 33), (5, 0)])
def test_topk_device_row_count(n_rows: int, n_valid: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(n_rows, 13, requires_grad=True)
    result = topk(x, 4, apply_softmax=True, n_rows=torch.tensor([n_valid], dtype=torch.int32))
    result.vals.backward(torch.randn_like(result.vals))


@pytest.mark.parametrize("n_rows", [1, 7])
@pytest.mark.parametrize("k", [1, 4])
def test_topk_provided_indices(n_rows: int, k: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(n_rows, 67, requires_grad=True)
    indices = torch.argsort(x.detach(), 1, descending=True)[:, :k].contiguous().to(torch.int16)
    result = topk(x, k, apply_softmax=True, y_indx=indices)
    result.vals.backward(torch.randn_like(result.vals))


@pytest.mark.parametrize("n_rows,k,words", [(1, 1, 1), (3, 4, 1), (5, 8, 2)])
def test_compaction(n_rows: int, k: int, words: int) -> None:
    torch.manual_seed(0)
    yi = torch.stack([torch.randperm(32 * words)[:k] for _ in range(n_rows)]).to(torch.int32)
    yv = torch.randn(n_rows, k)
    bitmask = torch.randint(0, 2**31 - 1, (n_rows, words), dtype=torch.int32)
    compaction(yv, yi, bitmask)
