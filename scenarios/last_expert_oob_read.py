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
H200. Answer, measured on the H200 (results/h200/run3-last-expert.md): a second real bug, not a harness
mistake. With the library's split-k (5 for E=4, M=64, N=256) the kernel writes 40,960 bytes outside every
buffer we own, padded or not: the split-k scratchpad is [split_k, 1, M, N] fp32 with no batch axis while each
expert writes slot expert + split (read from this copy's code). With split_k forced to 1 the writes vanish and
only the 64 B scale overread remains, which the pad removes. The `batched*` variants pin both answers.

Copies and pads: every case runs one triton_kernels copy (`tk`), unpacked by `make upstream` from the wheel
users install: A = sgl-kernel 0.3.21 (matmul_ogs API), C = sglang-kernel 0.4.6.post1 (matmul API; the copy
sglang 0.5.18/0.5.19 pin, whose _matmul.py HOPPER_SCALE load is the crash site quoted in sglang PR #36456),
D = sglang-kernel 0.4.10 (matmul; values masked after the load, the load itself still unmasked; needs
triton >= 3.8, `unsupported` with what was found where it cannot run). Each under three pad policies:
`unpadded`; `padded`, sglang's (E8M0 127 up to round_up(K,128)/32 groups, sglang PR #36456); `padded_vllm`,
vLLM's (0 up to a multiple of 4 groups, vLLM PR #47910). The batched variants run on copy A (its bug).

Architectures: sm_90 is what was measured. sm_100: expected clean by construction: on Blackwell triton_kernels
picks BlackwellMXScaleLayout, which pads the K groups to a multiple of 8 (90 -> 96 for K = 2880) while block_k
stays <= 256 (8 groups), so the unmasked BLACKWELL_SCALE load walks no further than the stored groups; and the
persistent sm_100 path loads scales through TMA, which bounds-checks. A report from a Blackwell runner checks
that claim. Any other architecture runs with no expectation and reports what it finds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_memsafety.upstream import catalogue as U
from gpu_memsafety.model import TRACE, GUARD, GUARD_PAGE, MEMCHECK, OVERREAD, OVERWRITE, POISON, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case, Param, Scenario, Variant
from gpu_memsafety.kernels.mxfp4 import layout as L
from gpu_memsafety.kernels.mxfp4.adapter import copy_problem

UPSTREAM = "triton-lang/triton#10772"
SGLANG_PAD = "sgl-project/sglang#36456"
GPT_OSS = {"20b": 32, "120b": 128}
HIDDEN = 2880
SWEEP_K = (2688, 2752, 2816, 2880, 2912, 2944, 3008, 3072)
COPIES = tuple(U.TRITON_KERNELS_COPIES)                    # "A", "C", "D"


@dataclass(frozen=True)
class MoeVariant(Variant):
    """pad: the weight-scale pad policy (none, sglang, vllm); batched: the batched (3-D) matmul instead of the
    routed one; split_k1: the batched call pinned to split_k = 1."""

    pad: str = "none"
    batched: bool = False
    split_k1: bool = False

    @property
    def scratchpad_bug(self) -> bool:
        """Batched split-k writes a scratchpad that has no batch axis (the second bug): batched, split_k free."""
        return self.batched and not self.split_k1


VARIANTS = (MoeVariant("unpadded"), MoeVariant("padded", pad="sglang"), MoeVariant("padded_vllm", pad="vllm"),
            MoeVariant("batched_unpadded", batched=True), MoeVariant("batched_padded", pad="sglang", batched=True),
            MoeVariant("batched_splitk1_unpadded", batched=True, split_k1=True),
            MoeVariant("batched_splitk1_padded", pad="sglang", batched=True, split_k1=True))
BY_NAME = {v.name: v for v in VARIANTS}
MEASURED_ARCH = "sm_90"
CLEAN_BY_CONSTRUCTION = {
    "sm_100": ("expected clean by construction on sm_100: triton_kernels uses BlackwellMXScaleLayout, which pads the "
               "K groups to a multiple of 8 (K=2880: 90 -> 96) with block_k <= 256, so the unmasked BLACKWELL_SCALE "
               "load stays inside the stored groups (and the persistent path loads scales by TMA); not yet measured"),
}


def upstream_source(tk: str) -> str:
    return f"triton_kernels from {U.artifact(U.TRITON_KERNELS_COPIES[tk]).label}"


def _case(variant: str, label: str, tk: str, E: int, N: int, K: int, tags: tuple[str, ...], tokens: int = 64,
          top_k: int = 2) -> Case:
    params = {"E": E, "N": N, "K": K, "tokens": tokens, "top_k": top_k, "tk": tk, "pad": BY_NAME[variant].pad,
              "upstream": upstream_source(tk)}
    return Case("last_expert_oob_read", variant, params, f"tk{tk}-{label}", tags)


def _cases() -> list[Case]:
    cases = []
    for tk in COPIES:
        for variant in ("unpadded", "padded", "padded_vllm"):
            cases.append(_case(variant, "K2880-E4-N256", tk, 4, 256, HIDDEN, ("smoke",)))
            for model, E in GPT_OSS.items():
                shapes = {"gateup": (2 * HIDDEN, HIDDEN), "down": (HIDDEN, HIDDEN),
                          "gateup-tp4": (2 * HIDDEN // 4, HIDDEN), "down-tp4": (HIDDEN, 768)}
                for proj, (N, K) in shapes.items():
                    cases.append(_case(variant, f"gptoss{model}-{proj}-K{K}-E{E}-N{N}", tk, E, N, K, ("gpt-oss",)))
            for K in SWEEP_K:
                if K != HIDDEN:
                    cases.append(_case(variant, f"sweep-K{K}-E4-N256", tk, 4, 256, K, ("sweep",)))
    for v in VARIANTS:
        if v.batched:
            cases.append(_case(v.name, "K2880-E4-N256-M64", "A", 4, 256, HIDDEN, ("batched",)))
    return cases


def _padded(case: Case) -> bool:
    return case.params["pad"] != "none"


def overread_bytes(case: Case) -> int:
    p = case.params
    return L.expected_overread_bytes(p["E"], p["N"], p["K"], padded=_padded(case))


def _expect(case: Case) -> Expectation:
    """sm_90, as measured (and the default where no GPU ran)."""
    found = []
    past = overread_bytes(case)
    pad = case.params["pad"]
    if past:
        # Seen by every detector that sees a read past the end (memcheck, the guard page, poison), except poison
        # where the output cannot depend on the bytes read.
        found.append(ExpectedFinding(OVERREAD, "w_scale", region="past_end", upstream=UPSTREAM, blind=_poison_blind(case)))
    if SCENARIO.variant(case).scratchpad_bug:
        # Second bug (this triton_kernels copy): batched split-k writes expert + split slots of a scratchpad
        # that has no batch axis (fixed upstream by triton PRs #8252/#8327). The scratchpad is allocated inside
        # triton_kernels, so the writes are attributed to no buffer of ours.
        # Where the overrun lands in a buffer of ours (w_scale's front guard, when it is allocated right after the
        # scratchpad), the guard markers report it as this overrun's, naming w_scale as the victim (detectors.guard).
        found.append(ExpectedFinding(OVERWRITE, "unattributed", upstream="triton-lang/triton#8327"))
    fix = f" ({L.PAD_SOURCES[pad]})" if pad != "none" else ""
    why = (f"{upstream_source(case.params['tk'])}, pad {pad}{fix}: walks {L.groups_walked(case.params['K'])} K groups, "
           f"{'pads to' if _padded(case) else 'stores'} {L.stored_groups(case.params['K'], padded=_padded(case))}: "
           f"{past} B read past the end")
    return Expectation(tuple(found), why)


def _poison_blind(case: Case) -> tuple[tuple[str, str], ...]:
    """Why poison cannot see this case's read past the end, derived from the layout model: copy D masks the values
    it loaded (triton PR #10190: a poisoned scale never reaches the output); and the bytes past the end stand for
    the scales of the last expert's last swizzled row, whose output rows may all be padding (n >= N: computed,
    never stored; N = 2880, the gpt-oss `down` shapes)."""
    p = case.params
    if p["tk"] == "D":
        return ((POISON, "this copy masks the loaded scale values after the unmasked load (triton PR #10190): a "
                         "poisoned byte never reaches the output"),)
    if not L.overread_outputs(p["E"], p["N"], p["K"], _padded(case)):
        lay = L.scale_layout(p["E"], p["N"], p["K"], padded=_padded(case))
        ns = sorted({pl.n for pl in L.overread_map(p["E"], p["N"], p["K"], _padded(case))})
        return ((POISON, f"the {lay.overread_bytes} B read past the end stand for the scales of output rows n "
                         f"{ns[0]}..{ns[-1]}, all >= N={p['N']} (swizzle padding: computed, never stored), so the "
                         f"output does not depend on them"),)
    return ()


def expect_on_arch(case: Case, arch: str) -> Expectation:
    if arch == MEASURED_ARCH:
        return _expect(case)
    if arch in CLEAN_BY_CONSTRUCTION:
        return Expectation((), f"{upstream_source(case.params['tk'])}: {CLEAN_BY_CONSTRUCTION[arch]}")
    return Expectation((), f"no expectation recorded for {arch} (measured: {MEASURED_ARCH}; by construction: "
                           f"{', '.join(CLEAN_BY_CONSTRUCTION)}): the case runs and reports what it finds")


def _describe(case: Case, buffer: str, start: int, end: int) -> str:
    if buffer != "w_scale":
        return ""
    p = case.params
    return L.describe_range(L.scale_layout(p["E"], p["N"], p["K"], padded=_padded(case)), start, end)


def run_case(case: Case, ctx: Any) -> Any:
    """The adapter: kernels/mxfp4/adapter.py's launcher, told the variant's typed fields."""
    from gpu_memsafety.kernels.mxfp4.adapter import run
    v = SCENARIO.variant(case)
    return run(case.params, ctx, batched=v.batched, split_k1=v.split_k1)


def _kernel(case: Case) -> str:
    api = "_matmul_ogs" if case.params["tk"] == "A" else "_matmul"
    return f"{api} [{upstream_source(case.params['tk'])}]"


def _cost(case: Case) -> float:
    """Seconds per case in a warm worker in mode complete, from the H200 (run 24, 8 workers on one GPU): gpt-oss
    shapes 2.2-3.8 s (mean), the sweep and small shapes 1.0-1.6 s, a batched case 2-6 s (alone, its own start-up
    besides). An expected overread ends its sanitized process (memcheck's kill of the kernel leaves Imprecise
    records that destroy the context), and the rest of its batch starts again in a fresh one: about 4 s more.
    A case of a copy the installed triton cannot import is over at once (not applicable: mxfp4.adapter)."""
    if copy_problem(case.params["tk"]):
        return 0.05
    if SCENARIO.variant(case).batched:
        return 4.0
    return (3.0 if "gpt-oss" in case.tags else 1.3) + (4.0 if overread_bytes(case) else 0.0)


SCENARIO = Scenario(
    name="last_expert_oob_read",
    summary="triton_kernels mxfp4 MoE matmul on Hopper reads weight scales past the last expert (K % 128 != 0)",
    adapter=run_case,
    params=(Param("E", int, low=1, high=1024), Param("N", int, low=32, high=65536), Param("K", int, low=32, high=65536),
            Param("tokens", int, low=1, high=1 << 16), Param("top_k", int, low=1, high=16),
            Param("tk", str, choices=COPIES), Param("pad", str, choices=L.PAD_POLICIES), Param("upstream", str)),
    variants=VARIANTS,
    cases=_cases,
    expect=_expect,
    expect_on_arch=expect_on_arch,
    kernel=_kernel,
    needs_gpu=lambda case: True,
    describe=_describe,
    timeout_s=300.0,
    cost_s=_cost,
    upstream=UPSTREAM,
    isolated=lambda case: SCENARIO.variant(case).batched,   # its scratchpad writes hit no buffer of ours
    # No uninit: the one buffer the adapter allocates through the context (w_scale) is written whole by the host
    # before the launch (kernels/mxfp4/moe.py _move_scale), so there are no never-written bytes for it to follow.
    detectors=(GUARD, MEMCHECK, GUARD_PAGE, POISON, TRACE),
)
