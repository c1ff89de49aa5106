"""Last-expert OOB read: triton_kernels' mxfp4 MoE matmul on Hopper reads weight scales past the last expert.

On sm_90, `opt_flags_nvidia.compute_block_k` forces block_k = 128 for mxfp4 weights, and the HOPPER_SCALE
branch loads the scales with no K mask. The Hopper scale layout pads the K groups only to a multiple of 2,
so K = 2880 stores 90 groups while the kernel walks cdiv(2880, 128) = 23 tiles = 92 groups: every row reads
2 groups (64 bytes per 32-row block) past its end, and only the last expert's last row leaves the tensor.
sglang's fix pads the scale to round_up(K, 128)/32 groups with E8M0 127 before the swizzle, on sm90 only.
Upstream triton has not fixed the unmasked load (triton-lang/triton#10772; PR #10190 masks values only).

Expectations: `unpadded` with K % 128 != 0 and an odd tile walk -> memcheck (and guard-page, poison)
overread of `w_scale` past its end; `padded`, and every K where the walk stays inside the stored groups
(K % 128 == 0, or K = 2912 whose 91 groups round up to 92), -> clean. The expected byte count past the end
comes from the layout model in kernels/mxfp4/layout.py (64 B for K = 2880); memcheck ends the kernel at the
first bad warp, so the report gives the bytes it saw and the finding is matched on buffer and region.

Batched mode (x [E, M, K], no routing) gave thousands of memcheck errors with and without the pad on the
H200. Answer, measured on the H200 (evidence/h200/run3-last-expert): a second real bug, not a harness
mistake. With the library's split-k (5 for E=4, M=64, N=256) the kernel writes 40,960 bytes outside every
buffer we own, padded or not: the split-k scratchpad is [split_k, 1, M, N] fp32 with no batch axis while each
expert writes slot expert + split (read from this copy's code). With split_k forced to 1 the writes vanish and
only the 64 B scale overread remains, which the pad removes. The `batched*` variants pin both answers.
"""
from __future__ import annotations

from harness.model import GUARD_PAGE, MEMCHECK, OVERREAD, OVERWRITE, POISON, Expectation, ExpectedFinding
from harness.scenario import Case, Param, Scenario
from kernels.mxfp4 import layout as L

UPSTREAM = "triton-lang/triton#10772"
GPT_OSS = {"20b": 32, "120b": 128}
HIDDEN = 2880
SWEEP_K = (2688, 2752, 2816, 2880, 2912, 2944, 3008, 3072)


def _case(variant: str, label: str, E: int, N: int, K: int, tags: tuple[str, ...], tokens: int = 64, top_k: int = 2) -> Case:
    return Case("last_expert_oob_read", variant, {"E": E, "N": N, "K": K, "tokens": tokens, "top_k": top_k}, label, tags)


def _cases() -> list[Case]:
    cases = []
    for variant in ("unpadded", "padded"):
        cases.append(_case(variant, "K2880-E4-N256", 4, 256, HIDDEN, ("smoke",)))
        for model, E in GPT_OSS.items():
            shapes = {"gateup": (2 * HIDDEN, HIDDEN), "down": (HIDDEN, HIDDEN),
                      "gateup-tp4": (2 * HIDDEN // 4, HIDDEN), "down-tp4": (HIDDEN, 768)}
            for proj, (N, K) in shapes.items():
                cases.append(_case(variant, f"gptoss{model}-{proj}-K{K}-E{E}-N{N}", E, N, K, ("gpt-oss",)))
        for K in SWEEP_K:
            if K != HIDDEN:
                cases.append(_case(variant, f"sweep-K{K}-E4-N256", 4, 256, K, ("sweep",)))
    for variant in ("batched_unpadded", "batched_padded", "batched_splitk1_unpadded", "batched_splitk1_padded"):
        cases.append(_case(variant, "K2880-E4-N256-M64", 4, 256, HIDDEN, ("batched",)))
    return cases


def _padded(case: Case) -> bool:
    return case.variant in ("padded", "batched_padded", "batched_splitk1_padded")


def overread_bytes(case: Case) -> int:
    p = case.params
    return L.expected_overread_bytes(p["E"], p["N"], p["K"], padded=_padded(case))


def _expect(case: Case) -> Expectation:
    found = []
    past = overread_bytes(case)
    if past:
        found.append(ExpectedFinding(OVERREAD, "w_scale", (MEMCHECK, GUARD_PAGE, POISON), region="past_end",
                                     upstream=UPSTREAM))
    if case.variant in ("batched_unpadded", "batched_padded"):
        # Second bug (this triton_kernels copy): batched split-k writes expert + split slots of a scratchpad
        # that has no batch axis (fixed upstream by triton PRs #8252/#8327). The scratchpad is allocated inside
        # triton_kernels, so the writes are attributed to no buffer of ours.
        found.append(ExpectedFinding(OVERWRITE, "unattributed", (MEMCHECK,), upstream="triton-lang/triton#8327"))
    why = (f"walks {L.groups_walked(case.params['K'])} K groups, {'pads to' if _padded(case) else 'stores'} "
           f"{L.stored_groups(case.params['K'], padded=_padded(case))}: {past} B read past the end")
    return Expectation(tuple(found), why)


def _describe(case: Case, buffer: str, start: int, end: int) -> str:
    if buffer != "w_scale":
        return ""
    p = case.params
    return L.describe_range(L.scale_layout(p["E"], p["N"], p["K"], padded=_padded(case)), start, end)


SCENARIO = Scenario(
    name="last_expert_oob_read",
    summary="triton_kernels mxfp4 MoE matmul on Hopper reads weight scales past the last expert (K % 128 != 0)",
    adapter="kernels.mxfp4.adapter:run_case",
    params=(Param("E", int, low=1, high=1024), Param("N", int, low=32, high=65536), Param("K", int, low=32, high=65536),
            Param("tokens", int, low=1, high=1 << 16), Param("top_k", int, low=1, high=16)),
    variants=("unpadded", "padded", "batched_unpadded", "batched_padded", "batched_splitk1_unpadded", "batched_splitk1_padded"),
    cases=_cases,
    expect=_expect,
    kernel=lambda case: "_matmul_ogs",
    needs_gpu=lambda case: True,
    describe=_describe,
    timeout_s=300.0,
    upstream=UPSTREAM,
    isolated=lambda case: case.variant.startswith("batched"),   # its scratchpad writes hit no buffer of ours
)
