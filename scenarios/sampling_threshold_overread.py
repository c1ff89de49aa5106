"""Data-dependent overread: FlashInfer's top-k sampling reads the per-request threshold by output position.

`top_k_sampling_from_probs(probs, top_k, indices=...)` samples output `i` from probs row `indices[i]`. Up to
flashinfer-python 0.7.1, `TopKSamplingFromProbKernel` reads `top_k[i]` (the output position) before it resolves
the row: with more outputs than rows (several samples per request, `len(indices) > probs.size(0)`), every
position past the rows reads past the end of `top_k`, whose length the host checks against probs only
(flashinfer issue #5339). 0.7.2 reads `top_k[indices[i]]`. Which bytes are read depends on the call's shape and
row map, not on the grid's bounds.

Versions: the REAL kernel from the flashinfer-python wheels (include/flashinfer/sampling.cuh and its closure,
unpacked by `make upstream`, built by kernels/topk_sampling/build.py as csrc/sampling.cu calls it): 0.7.1
(buggy) and 0.7.2 (fixed).

Shapes: 3 rows, 4 samples (one read, top_k[3], 4 bytes past the 12-byte tensor: exact bytes and offsets);
3 rows, 3,000 samples (the issue's shape: positions 3..2999 read 11,988 bytes past the end; only the fixed copy
runs in the matrix: the buggy one ran past 240 s under memcheck on the H200, see HANGS_UNDER_MEMCHECK); 3 rows, 3 samples (as many
samples as rows: clean on both). The threshold read from past the end is a huge k on every guard pattern (0xA5..
or 0xFF.. as uint32), so sampling is not truncated either way and poison cannot tell: memcheck and the guard page
see it.
"""
from __future__ import annotations

from dataclasses import dataclass

from gpu_memsafety.model import TRACE, GUARD, GUARD_PAGE, MEMCHECK, OVERREAD, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case, Param, Scenario, Variant
from gpu_memsafety.kernels.topk_sampling import layout as L
from gpu_memsafety.kernels.topk_sampling.adapter import call

NAME = "sampling_threshold_overread"
SHAPES = ((3, 4, ("smoke",)), (3, 3000, ()), (3, 3, ()))      # rows, samples, tags


@dataclass(frozen=True)
class Copy(Variant):
    flashinfer: str = "0.7.1"


VARIANTS = (Copy("buggy", "flashinfer-python 0.7.1: top_k[bx]", flashinfer="0.7.1"),
            Copy("fixed", "flashinfer-python 0.7.2: top_k[indices[bx]]", flashinfer="0.7.2"))


def past(case: Case) -> tuple[tuple[int, int], ...]:
    rows, _, indices = call(case)
    return L.past_end(indices, rows, case.params["flashinfer"])


def _cases() -> list[Case]:
    return [Case(NAME, v.name, {"flashinfer": v.flashinfer, "rows": rows, "samples": n,
                                "upstream": f"flashinfer-python {v.flashinfer}"},
                 f"fi{v.flashinfer}-rows{rows}-samples{n}", tags)
            for v in VARIANTS for rows, n, tags in SHAPES if (v.name, n) not in HANGS_UNDER_MEMCHECK]


# Measured on the H200 (compute-sanitizer 2025.3.1, results/h200/run20-upstream-scenarios.md): the buggy kernel on the
# issue's 3,000-sample shape ran past 240 s under memcheck (2,997 bad reads, one record each) and was killed; the
# 4-sample shape shows the same read exactly. Kept out of the matrix until the harness bounds memcheck's records.
HANGS_UNDER_MEMCHECK = {("buggy", 3000)}


def _expect(case: Case) -> Expectation:
    p = case.params
    spans = past(case)
    if not spans:
        how = "by row" if not L.BY_POSITION[p["flashinfer"]] else "by position, no position past the rows"
        return Expectation((), f"flashinfer {p['flashinfer']}: {p['samples']} samples of {p['rows']} rows, top_k read {how}")
    exact = len(spans) == 1 and spans[0][1] - spans[0][0] == L.INT_BYTES
    nbytes = sum(hi - lo for lo, hi in spans)
    found = ExpectedFinding(OVERREAD, "top_k", (MEMCHECK, GUARD_PAGE), region="past_end",
                            bytes=nbytes if exact else None, ranges=spans if exact else None, upstream=L.UPSTREAM)
    return Expectation((found,), f"flashinfer {p['flashinfer']}: {p['samples']} samples of {p['rows']} rows read "
                                 f"top_k by position: {nbytes} B past its {4 * p['rows']} B")


SCENARIO = Scenario(
    name=NAME,
    summary="FlashInfer top-k sampling reads per-request top_k by output position, past its end (indices)",
    adapter="gpu_memsafety.kernels.topk_sampling.adapter:run_case",
    params=(Param("flashinfer", str, choices=L.VERSIONS), Param("rows", int, low=1, high=1 << 16),
            Param("samples", int, low=1, high=1 << 20), Param("upstream", str)),
    variants=VARIANTS,
    cases=_cases,
    expect=_expect,
    kernel=lambda case: f"{L.KERNEL} [flashinfer {case.params['flashinfer']}]",
    needs_gpu=lambda case: True,
    describe=lambda case, buffer, start, end: L.describe(case.params["rows"], start, end) if buffer == "top_k" else "",
    detectors=(GUARD, MEMCHECK, GUARD_PAGE, TRACE),
    timeout_s=90.0,                 # ~1 s a case warm, ~30 s with the first build of a version (nvcc)
    cost_s=lambda case: 0.5,        # plus one build per version (~30 s, cached across runs)
    upstream=L.UPSTREAM,
    notes="flashinfer/data/include/flashinfer/sampling.cuh (flashinfer-python 0.7.1 buggy, 0.7.2 fixed)",
)
