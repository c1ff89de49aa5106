"""Harness adapter for DeepGEMM's SM90 paged-MQA-logits metadata kernel, as vLLM's wheels ship it.

The inputs are what vLLM's DeepSeek-V4 indexer hands `get_paged_mqa_logits_metadata` during warmup and CUDA-graph
capture (vLLM issues #51970, #51499): `context_lens` [batch, 1] int32, all zero when every dummy sequence length
divided by the compress ratio rounds to zero; `schedule_metadata` [num_sms + 1, 2] int32 is the tensor the host
allocates for the result. Both come from the context (guarded, and exact allocations under memcheck); the bug is a
read of the kernel's dynamic shared memory, which no guard marker or page can see, only memcheck.
The output is checked against the pure model (layout.schedule): a copy whose schedule differs is a broken
contract, never a pass.
"""
from __future__ import annotations

from typing import Any

from gpu_memsafety.errors import NotApplicable, Unsupported
from gpu_memsafety.kernels.paged_mqa_metadata import layout as L


class ScheduleMismatch(RuntimeError):
    """The kernel's schedule differs from the model's: the model or the copy changed (a failure, never clean)."""


def context_lengths(kind: str, batch_size: int) -> tuple[int, ...]:
    """'zeros': every length 0 (warmup / capture); 'long': every request 4096 tokens (work to schedule)."""
    if kind == "zeros":
        return (0,) * batch_size
    if kind == "long":
        return (4096,) * batch_size
    raise ValueError(f"unknown context-length kind {kind!r}; known: zeros, long")


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo
    from gpu_memsafety.kernels.paged_mqa_metadata import build

    p = case.params
    version, bs, num_sms = p["vllm"], p["batch_size"], p["num_sms"]
    if ctx.device.type != "cuda":
        raise Unsupported("needs a CUDA GPU; torch.cuda.is_available() is False")
    major, minor = torch.cuda.get_device_capability(ctx.device)
    if major != 9:
        raise NotApplicable(f"DeepGEMM runs this metadata kernel on SM90 only (the host dispatches sm100/sm120 "
                            f"kernels elsewhere); this GPU is sm_{major}{minor}")
    sms = torch.cuda.get_device_properties(ctx.device).multi_processor_count
    if num_sms > sms:
        raise Unsupported(f"num_sms = {num_sms} (the upstream report's GPU) exceeds this GPU's {sms} SMs: DeepGEMM's "
                          f"set_num_sms refuses it")
    lens = context_lengths(p["lens"], bs)
    context_lens = ctx.tensor("context_lens", (bs, 1), torch.int32)
    context_lens.copy_(torch.tensor(lens, dtype=torch.int32).view(bs, 1).to(ctx.device))
    metadata = ctx.tensor("schedule_metadata", (num_sms + 1, 2), torch.int32, watch=True)

    def once() -> None:
        build.launch(version, context_lens, metadata, num_sms)

    once()
    want = L.schedule(lens, num_sms, fixed=L.FIXED[version]).metadata
    got = tuple(tuple(int(v) for v in row) for row in metadata.cpu().tolist())
    if got != want and ctx.results_checkable:   # under memcheck the stopped kernel leaves the fill
        bad = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
        raise ScheduleMismatch(f"vLLM {version}'s {L.KERNEL} wrote {got[bad]} for SM {bad}; the model says {want[bad]}")
    return RunInfo(kernel=f"{L.KERNEL} [vLLM {version}]", outputs={"schedule_metadata": metadata}, relaunch=once,
                   notes={"smem_bytes": L.smem_bytes(bs), "aligned_batch_size": L.aligned_batch_size(bs)})
