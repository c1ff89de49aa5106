"""Padded-stride scale write: the MXFP8 pre-dispatch kernel writes scale bytes with packed addressing
(`token*G + g`) into a scale buffer whose rows are padded to 16 bytes (sglang deepseek_v4
mega_moe_pre_dispatch; the fix addresses `token*row_stride_bytes + g` and checks the stride on the host).

The packed writes stay inside the allocation, so no sanitizer sees them: only the guard markers in each
row's padding do (H=2304, 5 tokens in 8 rows: the 8 padding bytes of rows 0..3). The reverse mismatch (a
padded stride on a packed allocation) writes past the end, which memcheck sees. Hidden sizes with
H % 512 in {128, 256, 384} have padding; 2560, 4096 and 7168 have none and are clean in both modes.
Uninit mode sees the other side of the same bug: the packed writes fall short of the last tokens' scale bytes
(H=2304, 5 tokens: token 4's bytes 40..71 are never written), and the reverse mismatch skips a slice of every
row; `unwritten` derives those bytes from the same addressing model (`written`). The sglang adapter declares
no scale output (it compares the scale bytes with the model itself), so only our kernels expect them.
Every case runs the CUDA kernel (GPU) and its Triton twin (GPU, or CPU under TRITON_INTERPRET=1): our model of
the kernel. The REAL sglang kernel runs too (impl `sglang-<version>`, built from the published wheel by
kernels/pre_dispatch/sglang.py, `make upstream` fetches it), fed as its callers fed it: 0.5.18 a contiguous
scale view of G bytes per row over an allocation padded to 16-byte rows (what a padded consumer handed over:
the bug), 0.5.19 the padded view (the fix, sglang PR #36237). Each version's host-side refusal of the other
layout is a contract case (`refusal`): the kernel's own message expected; a refusal that disappears or
changes fails the case.
"""
from __future__ import annotations

from gpu_memsafety.placement import layout as L
from gpu_memsafety.model import TRACE, GUARD, MEMCHECK, OVERWRITE, UNINIT, UNWRITTEN, Expectation, ExpectedFinding
from gpu_memsafety.detectors.modes import MODES
from gpu_memsafety.scenario.definition import Case, Param, Scenario, grid
from gpu_memsafety.kernels.pre_dispatch import layout as PL

SGLANG_IMPLS = tuple(f"sglang-{v}" for v in PL.SGLANG_VERSIONS)
PADDED_HIDDEN = (2176, 2304, 2432)        # 12, 8, 4 bytes of padding per scale row
UNPADDED_HIDDEN = (2560, 4096, 7168)
TOKENS = ((5, 8), (8, 8), (1, 8), (37, 64))   # (num_tokens, padded_max): partial, full, single, larger
TOPK = 8


def _mode(case: Case) -> str:
    """How the kernel addresses scale rows: 'packed', 'strided', 'strided_on_packed', or 'refused' (nothing)."""
    version = PL.sglang_version(case.params["impl"])
    if version is None:
        return case.variant
    return "refused" if case.variant == "refusal" else PL.sglang_mode(version)


def _allocated_stride(case: Case) -> int:
    return PL.allocated_row_stride(case.params["impl"], case.variant, case.params["hidden"])


def _kernel_step(case: Case) -> int:
    hidden = case.params["hidden"]
    return PL.scale_row_bytes(hidden) if _mode(case) == "packed" else PL.padded_row_stride(hidden)


def written(case: Case) -> list[tuple[int, int]]:
    """Every scale byte the kernel writes, relative to the scale tensor (pure simulation of the addressing)."""
    if _mode(case) == "refused":
        return []
    g, step = PL.scale_row_bytes(case.params["hidden"]), _kernel_step(case)
    return L.merge_runs((t * step, t * step + g) for t in range(case.params["num_tokens"]))


# Where memcheck puts the scale buffer (its end is the allocation's end): what it can see past.
MEMCHECK_PLACEMENT = MODES["memcheck"].watch_placement


def _layout(case: Case, placement: str) -> L.GuardLayout:
    g, stride = PL.scale_row_bytes(case.params["hidden"]), _allocated_stride(case)
    rows = L.Rows(case.params["padded_max"], g, stride, case.params["num_tokens"])
    return L.plan(rows.nbytes, placement=placement, rows=rows)


def _outside(case: Case, placement: str) -> dict[str, list[tuple[int, int]]]:
    """Written bytes that land on marker bytes or past the end, per region class."""
    lay = _layout(case, placement)
    out: dict[str, list[tuple[int, int]]] = {}
    for lo, hi in written(case):
        for start, end, region in L.split_by_region(lay, lo, hi):
            cls = L.region_class(region)
            if cls != "inside":
                out.setdefault(cls, []).append((start, end))
    return out


def unwritten(case: Case) -> list[tuple[int, int]]:
    """The logical scale bytes of the used rows (token t's G bytes at t * allocated stride) that the kernel's
    addressing never reaches: packed writes into padded rows fall short of the last tokens' bytes, padded
    writes into packed rows skip a slice of every row. What uninit mode finds still holding its fill (nothing
    when the host refuses the layout: nothing is launched, nothing is an output)."""
    if _mode(case) == "refused":
        return []
    g, stride, nt = PL.scale_row_bytes(case.params["hidden"]), _allocated_stride(case), case.params["num_tokens"]
    done = written(case)
    left: list[tuple[int, int]] = []
    for lo, hi in ((t * stride, t * stride + g) for t in range(nt)):
        for w_lo, w_hi in done:
            if w_hi <= lo or w_lo >= hi:
                continue
            if w_lo > lo:
                left.append((lo, w_lo))
            lo = max(lo, w_hi)
        if lo < hi:
            left.append((lo, hi))
    return L.merge_runs(left)


def _expect(case: Case) -> Expectation:
    guarded = _outside(case, L.GUARDED)
    flush = _outside(case, MEMCHECK_PLACEMENT)
    found = []
    upstream = PL.SGLANG_FIX if PL.sglang_version(case.params["impl"]) else ""
    for region, spans in guarded.items():
        found.append(ExpectedFinding(OVERWRITE, "scale", (GUARD,), region=region, bytes=sum(e - s for s, e in spans),
                                     ranges=tuple(spans), upstream=upstream))
    if any(hi > _layout(case, MEMCHECK_PLACEMENT).allocation_end for _, hi in flush.get(L.PAST_END, ())):
        # Past the exact allocation (beyond the alignment tail, which only the markers see). memcheck
        # ends the kernel at its first bad store, so it reports some of these bytes, not all.
        found.append(ExpectedFinding(OVERWRITE, "scale", (MEMCHECK,), region="past_end"))
    version = PL.sglang_version(case.params["impl"])
    never = unwritten(case) if version is None else []
    if never:
        # Our kernels' adapter declares the scale rows an output, so uninit mode sees the bytes the addressing
        # skips (the sglang adapter compares them with the model itself and declares no scale output).
        found.append(ExpectedFinding(UNWRITTEN, "scale", (UNINIT,), region="inside", bytes=sum(e - s for s, e in never),
                                     ranges=tuple(never), upstream=upstream))
    if _mode(case) == "refused":
        return Expectation((), f"sglang {version}'s host wrapper refuses the other version's scale layout: "
                               f"{PL.SGLANG_REFUSALS[version]!r} (contract; nothing is launched)")
    why = {"packed": "packed addressing into padded rows (the bug)", "strided": "strided addressing (the fix)",
           "strided_on_packed": "padded stride on a packed allocation (reverse mismatch)"}[_mode(case)]
    if version is not None:
        why = f"sglang {version}, {why}"
    return Expectation(tuple(found), why)


def _describe(case: Case, buffer: str, start: int, end: int) -> str:
    if buffer != "scale":
        return ""
    g, stride = PL.scale_row_bytes(case.params["hidden"]), _allocated_stride(case)
    step = _kernel_step(case)
    row, col = divmod(start, stride)
    token, tbyte = divmod(start, step)
    if start >= case.params["padded_max"] * stride:
        return f"{start - case.params['padded_max'] * stride}..{end - 1 - case.params['padded_max'] * stride} B past the end (token {token}'s scale bytes {tbyte}..{tbyte + end - start - 1})"
    if col < g and row < case.params["num_tokens"] and not any(lo < end and start < hi for lo, hi in written(case)):
        return f"row {row}: token {row}'s scale bytes {col}..{col + end - start - 1} ({end - start} B) never written"
    place = f"row {row}: padding bytes {col}..{col + end - start - 1}" if col >= g else f"row {row}: bytes {col}..{col + end - start - 1}"
    shift = row * stride - token * step if step else 0
    return f"{place} ({end - start} B); token {token}'s scale bytes {tbyte}..{tbyte + end - start - 1} land {abs(shift) if shift else 0} B {'early' if shift > 0 else 'late' if shift < 0 else 'in place'}"


def upstream_source(impl: str) -> str:
    """What the case runs, named with its upstream source and version (reports show it)."""
    version = PL.sglang_version(impl)
    if version is not None:
        return f"sglang {version}"
    return f"ours ({impl}): model of sglang 0.5.18 (packed) / 0.5.19 (strided)"


def _cases() -> list[Case]:
    cases = []
    for impl in ("cuda", "triton", *SGLANG_IMPLS):
        version = PL.sglang_version(impl)
        for p in grid(hidden=PADDED_HIDDEN + UNPADDED_HIDDEN, tokens=TOKENS):
            nt, pm = p["tokens"]
            params = {"impl": impl, "hidden": p["hidden"], "num_tokens": nt, "padded_max": pm,
                      "upstream": upstream_source(impl)}
            tags = ("smoke",) if (p["hidden"], nt, pm) in ((2304, 5, 8), (2560, 5, 8)) else ()
            label = f"{impl}-H{p['hidden']}-T{nt}of{pm}"
            if version is not None:
                cases.append(Case("padded_stride_scale_write", PL.sglang_mode(version), params, label, tags))
                if p["hidden"] in (2304, 2176) and (nt, pm) == (5, 8):
                    cases.append(Case("padded_stride_scale_write", "refusal", params, label, tags))
                continue
            for variant in ("packed", "strided"):
                cases.append(Case("padded_stride_scale_write", variant, params, label, tags))
            if p["hidden"] in (2304, 2176) and pm == 8:
                cases.append(Case("padded_stride_scale_write", "strided_on_packed", params, label, tags))
    return cases


def _kernel(case: Case) -> str:
    version = PL.sglang_version(case.params["impl"])
    if version is not None:
        return f"{PL.SGLANG_KERNEL_NAME} [sglang {version}]"
    return PL.kernel_name(case.params["impl"], "strided")


SCENARIO = Scenario(
    name="padded_stride_scale_write",
    summary="MXFP8 pre-dispatch: packed scale addressing into 16-byte-padded rows (sglang deepseek_v4)",
    adapter="gpu_memsafety.kernels.pre_dispatch.adapter:run_case",
    params=(Param("impl", str, choices=("cuda", "triton", *SGLANG_IMPLS)), Param("hidden", int, low=128, high=65536),
            Param("num_tokens", int, low=1, high=1 << 20), Param("padded_max", int, low=1, high=1 << 20),
            Param("upstream", str)),
    variants=("packed", "strided", "strided_on_packed", "refusal"),
    cases=_cases,
    expect=_expect,
    kernel=_kernel,
    needs_gpu=lambda case: case.params["impl"] != "triton",
    describe=_describe,
    detectors=(GUARD, MEMCHECK, "guard_page", "poison", UNINIT, TRACE),
    timeout_s=300.0,
    upstream=PL.SGLANG_FIX,
    cost_s=0.85,           # seconds per case in a warm worker, all stages of mode complete: mean 0.85 on the H200 (run 24)
    notes="sglang python/sglang/kernels/jit/csrc/deepseek_v4/mega_moe_pre_dispatch.cuh (0.5.18 buggy, 0.5.19 fixed)",
)
