"""Shared-memory overread: DeepGEMM's SM90 paged-MQA-logits metadata scheduler reads `prefix_sum[batch_size]`.

`sm90_paged_mqa_logits_metadata` keeps one int32 per request (`align(batch_size, 32)` of them) in dynamic shared
memory. With every context length zero (vLLM's DeepSeek-V4 indexer during warmup and FULL CUDA-graph capture:
dummy length 1 divided by compress ratio 4) the work total is zero, every lane's binary search ends at
`q_idx == batch_size`, and the kernel reads `prefix_sum[batch_size]`: 4 bytes past the array when batch_size is a
multiple of 32 (capture sizes always are), an entry of the array otherwise. Production saw an illegal-address
error that killed every rank (vLLM issues #51970 on v0.27.1, #51499; DeepGEMM PR #399 for this SM90 kernel,
PR #353 for the former smxx kernel). The read lies in shared memory, which no guard marker, guard page or poison
pattern reaches: memcheck is the only detector ("Invalid __shared__ read"), and the harness places it at its
offset in the block's shared memory (buffer `__shared__`, region `shared`).

Versions: the REAL kernel from the DeepGEMM sources vLLM bundles (vllm/third_party/deep_gemm/include/,
unpacked by `make upstream`, built with DeepGEMM's JIT flags by kernels/paged_mqa_metadata/build.py): vLLM 0.27.1
(`q_idx = lo`, the bug) and vLLM 0.33.0 (early return on zero work, `q_idx = min(lo, batch_size - 1)`). sglang's
newest DeepGEMM build, sgl-deep-gemm 0.2.5, ships the 0.27.1 header byte for byte (still buggy on Hopper).

Shapes: batch 32 on 132 SMs (the H200's count; DeepGEMM PR #353 / TensorRT-LLM's "deterministic IMA at
batch_size=32"), batch 128 on 78 SMs (vLLM #51499's minimal repro on H20), batch 33 (not a multiple of 32: the
read stays inside the 64-entry array, clean on both) and batch 32 with 4096-token contexts (work to schedule: the
search never reaches batch_size, clean on both). Expected bytes and offsets come from layout.schedule, a
step-by-step model of the scheduler that also checks the kernel's output.
"""
from __future__ import annotations

from dataclasses import dataclass

from gpu_memsafety.model import MEMCHECK, OVERREAD, SHARED, SHARED_MEMORY, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case, Param, Scenario, Variant
from gpu_memsafety.kernels.paged_mqa_metadata import layout as L
from gpu_memsafety.kernels.paged_mqa_metadata.adapter import context_lengths

NAME = "paged_mqa_metadata_smem_read"
# (batch_size, context lengths, num_sms, tags, where the shape comes from)
SHAPES = (
    (32, "zeros", 132, ("smoke",), "DeepGEMM PR #353: all-zero context_lens at batch 32; the H200's 132 SMs"),
    (128, "zeros", 78, (), "vLLM #51499's repro: zeros((128, 1)), num_sms=78 (H20)"),
    (33, "zeros", 132, (), "batch not a multiple of 32: prefix_sum[33] is inside the 64-entry array"),
    (32, "long", 132, (), "4096-token contexts: work to schedule, the search stays below batch_size"),
)


@dataclass(frozen=True)
class Copy(Variant):
    vllm: str = L.VLLM_BUGGY


VARIANTS = (Copy("buggy", f"vLLM {L.VLLM_BUGGY}'s bundled DeepGEMM: q_idx = lo", vllm=L.VLLM_BUGGY),
            Copy("fixed", f"vLLM {L.VLLM_FIXED}'s bundled DeepGEMM: early return, q_idx clamped", vllm=L.VLLM_FIXED))


def _lens(case: Case) -> tuple[int, ...]:
    return context_lengths(case.params["lens"], case.params["batch_size"])


def oob(case: Case) -> tuple[tuple[int, int], ...]:
    p = case.params
    return L.oob_shared_ranges(_lens(case), p["num_sms"], fixed=L.FIXED[p["vllm"]])


def _cases() -> list[Case]:
    out = []
    for v in VARIANTS:
        for bs, lens, sms, tags, _ in SHAPES:
            params = {"vllm": v.vllm, "batch_size": bs, "lens": lens, "num_sms": sms,
                      "upstream": f"vLLM {v.vllm} (vllm/third_party/deep_gemm)"}
            out.append(Case(NAME, v.name, params, f"vllm{v.vllm}-bs{bs}-{lens}-sms{sms}", tags))
    return out


def _expect(case: Case) -> Expectation:
    p = case.params
    ranges = oob(case)
    smem = L.smem_bytes(p["batch_size"])
    if not ranges:
        why = ("the fix returns early on zero work and clamps q_idx" if L.FIXED[p["vllm"]] else
               f"the search ends below the array's end ({smem} B of shared memory)")
        return Expectation((), f"vLLM {p['vllm']}, batch {p['batch_size']}, {p['lens']} context lengths: {why}")
    # Bytes and offsets exact (every lane reads the same int32), the model's offsets in the block's own shared
    # memory (the kernel has no static shared memory, so the dynamic array starts it). The H200 decided the
    # convention (run 43): memcheck reported window offsets 1152 and 1536 for batches 32 and 128, the 1 KiB the
    # driver reserves on sm_90 plus 128 and 512, which the harness now takes off (sanitizer.attribute.reserved_shared).
    found = ExpectedFinding(OVERREAD, SHARED, (MEMCHECK,), region=SHARED_MEMORY, bytes=sum(e - s for s, e in ranges),
                            ranges=ranges, upstream=L.UPSTREAM_FIX)
    return Expectation((found,), f"vLLM {p['vllm']}: zero work, every lane reads prefix_sum[{p['batch_size']}], "
                                 f"shared bytes {ranges[0][0]}..{ranges[-1][1] - 1}, past the {smem}-byte array")


def _describe(case: Case, buffer: str, start: int, end: int) -> str:
    if buffer == SHARED:
        return L.describe_shared(case.params["batch_size"], start, end)
    if buffer == "schedule_metadata":
        first, last = start // 8, (end - 1) // 8
        return f"SM {first}" if first == last else f"SMs {first}..{last}"
    return ""


SCENARIO = Scenario(
    name=NAME,
    summary="DeepGEMM SM90 paged-MQA metadata reads prefix_sum[batch_size] in shared memory on all-zero lengths",
    adapter="gpu_memsafety.kernels.paged_mqa_metadata.adapter:run_case",
    params=(Param("vllm", str, choices=L.VERSIONS), Param("batch_size", int, low=1, high=1 << 14),
            Param("lens", str, choices=("zeros", "long")), Param("num_sms", int, low=1, high=1024),
            Param("upstream", str)),
    variants=VARIANTS,
    cases=_cases,
    expect=_expect,
    kernel=lambda case: f"{L.KERNEL} [vLLM {case.params['vllm']}]",
    needs_gpu=lambda case: True,
    describe=_describe,
    detectors=(MEMCHECK,),                 # shared memory: no marker, page or poison pattern reaches it
    isolated=lambda case: bool(oob(case)),  # a shared-window access names no buffer: the process that ran it does
    timeout_s=180.0,
    cost_s=lambda case: 8.0 if oob(case) else 0.3,   # one build per instantiation (~7 s, cached); a process alone
    upstream=L.UPSTREAM_FIX,
    notes=f"vllm/third_party/deep_gemm/include/{'deep_gemm/scheduler/sm90_paged_mqa_logits.cuh'} (vLLM "
          f"{L.VLLM_BUGGY} buggy, {L.VLLM_FIXED} fixed); issue {L.UPSTREAM_ISSUE}",
)
