"""The DeepGEMM SM90 paged-MQA-logits metadata scheduler, as pure arithmetic: what it reads in shared memory.

Pure (no torch, no CUDA): the scenario's expectations and the adapter's output check come from here.

`sm90_paged_mqa_logits_metadata<kAlignedBatchSize, SPLIT_KV, kNumSMs, false>` (DeepGEMM
deep_gemm/include/deep_gemm/scheduler/sm90_paged_mqa_logits.cuh, one warp, one block) stores the running sum
of `ceil(context_len / SPLIT_KV)` in `prefix_sum`, the kernel's dynamic shared memory, which the host sizes
`align(batch_size, 32) * 4` bytes (csrc/jit_kernels/impls/sm90_fp8_mqa_logits.hpp: `num_smem_ints =
aligned_batch_size`). Each lane then binary-searches `prefix_sum[0, batch_size)` for the request that owns SM
`sm_idx`'s first segment, `q_idx = lo`, and reads `prefix_sum[q_idx]` and `prefix_sum[q_idx - 1]`. When every
context length is zero (a warmup or CUDA-graph capture batch), total work is zero, every search ends at
`lo == batch_size`, and `prefix_sum[batch_size]` is read: one int32 past the array when batch_size is a
multiple of 32 (the array holds exactly batch_size entries), inside it otherwise (an entry the prefix loop
wrote). The fix (vLLM's bundled DeepGEMM in 0.33.0; DeepGEMM PR #353 for the former smxx kernel, PR #399 for
this one) returns early when the total is zero and clamps `q_idx` to `batch_size - 1`.

`schedule` simulates the non-varlen branch step by step: the shared-memory indices read, and the
`(num_sms + 1) x 2` metadata it writes, the same for the buggy and the fixed kernel (the out-of-bounds value
only feeds a division whose dividend is zero).
"""
from __future__ import annotations

from dataclasses import dataclass

SPLIT_KV = 256              # the host's constexpr split_kv (sm90_paged_mqa_logits_metadata)
BLOCK_KV = 64               # the only block_kv the SM90 host path accepts (DG_HOST_ASSERT(block_kv == 64))
NUM_THREADS = 32            # one warp
INT_BYTES = 4

# The published copies: vLLM wheels bundle DeepGEMM's JIT sources (vllm/third_party/deep_gemm/include/).
VLLM_BUGGY = "0.27.1"       # vLLM issue #51970's version: `q_idx = lo`
VLLM_FIXED = "0.33.0"       # `if (total == 0)` early return and `q_idx = min(lo, batch_size - 1)`
VERSIONS = (VLLM_BUGGY, VLLM_FIXED)
FIXED = {VLLM_BUGGY: False, VLLM_FIXED: True}
# The fixed copy's kernel takes the host's `num_next_n_atoms` after `is_context_lens_2d`.
TAKES_NUM_ATOMS = {VLLM_BUGGY: False, VLLM_FIXED: True}
KERNEL = "sm90_paged_mqa_logits_metadata"
UPSTREAM_FIX = "deepseek-ai/DeepGEMM#399"
UPSTREAM_ISSUE = "vllm-project/vllm#51970"


def check_version(version: str) -> str:
    if version not in FIXED:
        raise ValueError(f"unknown vLLM version {version!r} for the DeepGEMM metadata kernel; known: {', '.join(VERSIONS)}")
    return version


def aligned_batch_size(batch_size: int) -> int:
    """align(batch_size, 32): the kernel's kAlignedBatchSize."""
    if batch_size <= 0:
        raise ValueError(f"batch_size = {batch_size} must be positive (the host asserts batch_size > 0)")
    return -(-batch_size // 32) * 32


def smem_bytes(batch_size: int) -> int:
    """Dynamic shared memory of the non-varlen launch: one int32 per aligned request."""
    return aligned_batch_size(batch_size) * INT_BYTES


def num_next_n_atoms(next_n: int) -> int:
    """ceil(next_n / atom), atom = 2 for next_n >= 2 else 1 (both copies, non-varlen)."""
    atom = 2 if next_n >= 2 else 1
    return -(-next_n // atom)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Schedule:
    metadata: tuple[tuple[int, int], ...]     # (q_atom_idx, kv_split_idx) per SM, then the end sentinel
    shared_reads: frozenset[int]              # prefix_sum indices the second phase reads

    def out_of_bounds(self, batch_size: int) -> tuple[int, ...]:
        """Indices read at or past the array's aligned_batch_size entries."""
        end = aligned_batch_size(batch_size)
        return tuple(sorted(i for i in self.shared_reads if i >= end))


def prefix_sums(context_lens: tuple[int, ...]) -> list[int]:
    """prefix_sum[0, aligned): the running sum of ceil(len / SPLIT_KV); entries past batch_size repeat the total."""
    bs = len(context_lens)
    out, total = [], 0
    for i in range(aligned_batch_size(bs)):
        total += ceil_div(context_lens[i], SPLIT_KV) if i < bs else 0
        out.append(total)
    return out


def schedule(context_lens: tuple[int, ...], num_sms: int, *, next_n: int = 1, fixed: bool) -> Schedule:
    """The non-varlen branch, step by step. context_lens: the last column of the [batch, next_n] tensor."""
    bs = len(context_lens)
    if num_sms <= 0:
        raise ValueError(f"num_sms = {num_sms} must be positive")
    if any(c < 0 for c in context_lens):
        raise ValueError("context lengths are unsigned in the kernel; a negative one is not a case")
    prefix = prefix_sums(context_lens)
    natoms = num_next_n_atoms(next_n)
    total = prefix[-1] * natoms
    end = (bs * natoms, 0)
    if fixed and total == 0:
        return Schedule(tuple([end] * (num_sms + 1)), frozenset())
    q, r = divmod(total, num_sms)
    pivot = num_sms - r
    reads: set[int] = set()
    meta = []
    for sm in range(num_sms):
        seg = sm * q + (sm - pivot if sm > pivot else 0)
        lo, hi = 0, bs
        while lo < hi:
            mid = (lo + hi) // 2
            reads.add(mid)
            if prefix[mid] * natoms <= seg:
                lo = mid + 1
            else:
                hi = mid
        q_idx = min(lo, bs - 1) if fixed else lo
        if q_idx == 0:
            reads.add(0)
            offset, segs = seg, prefix[0]
        else:
            reads.update((q_idx, q_idx - 1))
            offset = seg - prefix[q_idx - 1] * natoms
            # prefix_sum[batch_size] past the array holds whatever shared memory held: it only reaches here
            # with total == 0, where offset is 0 and the atom and split come out 0 whatever it was.
            segs = prefix[q_idx] - prefix[q_idx - 1] if q_idx < len(prefix) else None
        if segs is None:
            if offset != 0:
                raise AssertionError(f"out-of-bounds prefix_sum[{q_idx}] feeds a nonzero offset {offset}")
            atom = split = 0
        else:
            atom, split = (offset // segs, offset % segs) if segs > 0 else (0, 0)
        meta.append((q_idx * natoms + atom, split))
    meta.append(end)
    return Schedule(tuple(meta), frozenset(reads))


def oob_shared_ranges(context_lens: tuple[int, ...], num_sms: int, *, fixed: bool, next_n: int = 1) -> tuple[tuple[int, int], ...]:
    """Byte ranges of the dynamic shared memory read past its end (offsets in the block's own shared memory)."""
    sched = schedule(context_lens, num_sms, next_n=next_n, fixed=fixed)
    return tuple((i * INT_BYTES, (i + 1) * INT_BYTES) for i in sched.out_of_bounds(len(context_lens)))


def describe_shared(batch_size: int, start: int, end: int) -> str:
    """Offsets in the block's shared memory in the kernel's words."""
    n = aligned_batch_size(batch_size)
    first, last = start // INT_BYTES, (end - 1) // INT_BYTES
    where = f"prefix_sum[{first}]" if first == last else f"prefix_sum[{first}..{last}]"
    if first >= n:
        return f"{where}: past the {n}-entry ({n * INT_BYTES} B) dynamic shared array"
    return f"{where} of {n}"
