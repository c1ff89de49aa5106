"""sglang 0.5.19's Triton attention kernels (decode, extend, prefill; ci/gpu/field/fetch.sh sglang) without a GPU
and without the server stack (`-p sglang_on_cpu`), called as sglang's test/srt/test_triton_attention_kernels.py calls
them, at boundary shapes: one token, one past a 64-token block, an empty KV sequence beside a full one, a sequence with
no prefix, head dims 13, 80 and 576/512 (MLA), one KV head for 16 query heads, one and four KV splits.
fp32 tensors on the CPU, kernels in Triton's interpreter (this folder's conftest sets TRITON_INTERPRET=1):

    cd ci/gpu/field/cpu && PYTHONPATH=$REPO/.field/sglang:$PWD python -m pytest -p sglang_on_cpu --gpu-memsafety -q \
        test_sglang_attention_edges.py
"""
import pytest
import torch
from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd
from sglang.kernels.ops.attention.prefill_attention import context_attention_fwd

dt = torch.float32


@pytest.mark.parametrize("seq_lens", [(1,), (1, 33), (64, 65), (5, 0)])
@pytest.mark.parametrize("hq,hkv,d,dv", [(4, 4, 13, 13), (4, 1, 64, 64), (16, 2, 80, 80), (2, 1, 576, 512)])
@pytest.mark.parametrize("splits", [1, 4])
def test_decode(seq_lens, hq, hkv, d, dv, splits):
    torch.manual_seed(0)
    B = len(seq_lens)
    total = sum(seq_lens)
    max_kv_splits = 8
    q = torch.randn(B, hq, d, dtype=dt)
    kb = torch.randn(max(total, 1), hkv, d, dtype=dt)
    vb = torch.randn(max(total, 1), hkv, dv, dtype=dt)
    o = torch.zeros(B, hq, dv, dtype=dt)
    kv_indptr = torch.zeros(B + 1, dtype=torch.int32)
    kv_indptr[1:] = torch.cumsum(torch.tensor(seq_lens), 0)
    kv_indices = torch.arange(total, dtype=torch.int64)
    logits = torch.empty(B, hq, max_kv_splits, dv, dtype=torch.float32)
    lse = torch.empty(B, hq, max_kv_splits, dtype=torch.float32)
    nsplit = torch.full((B,), splits, dtype=torch.int32)
    decode_attention_fwd(q, kb, vb, o, kv_indptr, kv_indices, logits, lse, nsplit, max_kv_splits, d ** -0.5, 1.0, 1.0)


@pytest.mark.parametrize("prefix,extend", [((0,), (1,)), ((1, 0), (1, 3)), ((7, 64), (65, 1)), ((3,), (129,))])
@pytest.mark.parametrize("hq,hkv,d", [(2, 2, 13), (4, 1, 80), (2, 1, 128)])
@pytest.mark.parametrize("causal", [True, False])
def test_extend(prefix, extend, hq, hkv, d, causal):
    torch.manual_seed(0)
    B = len(prefix)
    pre = torch.tensor(prefix, dtype=torch.int32)
    ext = torch.tensor(extend, dtype=torch.int32)
    seq = pre + ext
    start = torch.zeros(B, dtype=torch.int32)
    start[1:] = torch.cumsum(seq[:-1], 0)
    total = int(seq.sum())
    kb = torch.randn(total, hkv, d, dtype=dt)
    vb = torch.randn(total, hkv, d, dtype=dt)
    ne = int(ext.sum())
    ke = torch.empty(ne, hkv, d, dtype=dt)
    ve = torch.empty(ne, hkv, d, dtype=dt)
    qe = torch.randn(ne, hq, d, dtype=dt)
    se = torch.zeros(B, dtype=torch.int32)
    se[1:] = torch.cumsum(ext[:-1], 0)
    for i in range(B):
        ke[se[i]:se[i] + ext[i]] = kb[start[i] + pre[i]:start[i] + seq[i]]
        ve[se[i]:se[i] + ext[i]] = vb[start[i] + pre[i]:start[i] + seq[i]]
    kv_indptr = torch.zeros(B + 1, dtype=torch.int32)
    kv_indptr[1:] = torch.cumsum(pre, 0)
    kv_indices = torch.cat([torch.arange(int(start[i]), int(start[i] + pre[i])) for i in range(B)]).to(torch.int32)
    qo_indptr = torch.zeros(B + 1, dtype=torch.int32)
    qo_indptr[1:] = torch.cumsum(ext, 0)
    o = torch.empty(ne, hq, d, dtype=dt)
    extend_attention_fwd(qe, ke, ve, o, kb, vb, qo_indptr, kv_indptr, kv_indices, None, causal, None,
                         int(ext.max()), 1.0, 1.0)


@pytest.mark.parametrize("seq_lens", [(1,), (1, 2), (63, 65), (129,)])
@pytest.mark.parametrize("heads,kvh,d", [(2, 2, 13), (4, 2, 80), (2, 1, 128)])
@pytest.mark.parametrize("causal", [True, False])
def test_context(seq_lens, heads, kvh, d, causal):
    torch.manual_seed(0)
    T = sum(seq_lens)
    q = torch.randn(T, heads, d, dtype=dt)
    k = torch.randn(T, kvh, d, dtype=dt)
    v = torch.randn(T, kvh, d, dtype=dt)
    o = torch.zeros(T, heads, d, dtype=dt)
    st = torch.zeros(len(seq_lens), dtype=torch.int32)
    st[1:] = torch.cumsum(torch.tensor(seq_lens[:-1]), 0)
    context_attention_fwd(q, k, v, o, st, torch.tensor(seq_lens, dtype=torch.int32), max(seq_lens), is_causal=causal)
