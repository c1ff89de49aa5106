"""Data-dependent overread: vLLM DeepSeek-V4's Triton top-k mapper loads block-table rows no request owns.

`compute_global_topk_indices_and_lens` maps each token's local top-k indices to KV-cache slots through
`block_table[token_to_req_indices[t]]`. Its load is masked only by `local >= 0`: neither the request index nor the
block column is bounded. During CUDA-graph capture the padding tokens point at requests past the real ones; a
table built for the real requests only (vLLM before main padded it) is read past its end, which killed every TP
rank with an illegal address (vLLM issues #55637, #55636). The address depends on the data (the request map and
the top-k entries), not on the grid: a class of bug the other scenarios lack.

Versions: the REAL kernel, taken unchanged out of vllm/models/deepseek_v4/common/ops/cache_utils.py of the vLLM
wheels (kernels/block_table_gather/vllm_kernel.py; `make upstream` unpacks the file): vLLM 0.27.1 and 0.33.0,
the newest, which still has the unguarded load. No published vLLM bounds it (PR #55744, open, adds
`req_idx < num_reqs` and `block_indices < block_table_stride`): every copy is expected to read past the end on
the `unpadded` and `column_overrun` calls, and the day a release bounds the load these cases turn `unexpectedly
clean` and say so. The clean case is the producer's fix vLLM main adopted: `padded` builds the table to every
token's request, NULL_BLOCK_ID in the padding rows.

Expectations come from kernels/block_table_gather/layout.py, which computes every element each program loads.
The issue-shaped calls are exact: the padding token's one entry (5) loads element 4 of a 4-element table, bytes
16..19 past its end (the column overrun's entry 257 loads the same element); memcheck, the guard page and poison
(the loaded value becomes a slot id) each see it. The capture-shaped call (5 padding tokens x 512 entries) is
matched on buffer and region: memcheck ends the kernel at its first bad load.
"""
from __future__ import annotations

from dataclasses import dataclass

from gpu_memsafety.model import TRACE, GUARD, GUARD_PAGE, MEMCHECK, OVERREAD, POISON, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case, Param, Scenario, Variant
from gpu_memsafety.kernels.block_table_gather import cases as C
from gpu_memsafety.kernels.block_table_gather import layout as L

NAME = "block_table_row_gather"


@dataclass(frozen=True)
class Policy(Variant):
    """How the producer built the table (cases.py)."""


VARIANTS = (Policy("unpadded", "table rows for the real requests only: padding tokens index past it (the bug)"),
            Policy("padded", "table built to every token's request, NULL_BLOCK_ID rows (vLLM main's producer)"),
            Policy("column_overrun", "a top-k entry past its row's blocks on the last row (the missing column bound)"))


def _cases() -> list[Case]:
    out = []
    for version in L.VERSIONS:
        for policy in C.POLICIES:
            for shape in C.SHAPES:
                if policy == "column_overrun" and shape != "issue":
                    continue
                g, real = C.gather(shape, policy)
                params = {"vllm": version, "shape": shape, "real_reqs": real, "upstream": f"vLLM {version}"}
                tags = ("smoke",) if shape == "issue" and policy != "column_overrun" else ()
                out.append(Case(NAME, policy, params, f"vllm{version}-{shape}", tags))
    return out


def _expect(case: Case) -> Expectation:
    g = C.gather_of(case)
    found = []
    exact = case.params["shape"] == "issue"
    for region, spans in L.outside(g).items():
        nbytes = sum(hi - lo for lo, hi in spans)
        found.append(ExpectedFinding(OVERREAD, "block_table", (MEMCHECK, GUARD_PAGE, POISON), region=region,
                                     bytes=nbytes if exact else None, ranges=tuple(spans) if exact else None,
                                     upstream=L.UPSTREAM))
    rows = f"a {g.rows}-row table, tokens -> requests {list(g.token_to_req)[:8]}"
    if not found:
        return Expectation((), f"vLLM {case.params['vllm']}, {case.variant}: {rows}: every load stays in the table")
    spans = L.outside(g)
    total = sum(hi - lo for s in spans.values() for lo, hi in s)
    return Expectation(tuple(found), f"vLLM {case.params['vllm']}, {case.variant}: {rows}: {total} B of block_table "
                                     f"loaded past its end ({', '.join(f'{r}: {s[:3]}' for r, s in spans.items())})")


def _describe(case: Case, buffer: str, start: int, end: int) -> str:
    return L.describe(C.gather_of(case), start, end) if buffer == "block_table" else ""


SCENARIO = Scenario(
    name=NAME,
    summary="vLLM DeepSeek-V4 top-k mapper loads block-table rows of requests the table does not have",
    adapter="gpu_memsafety.kernels.block_table_gather.adapter:run_case",
    params=(Param("vllm", str, choices=L.VERSIONS), Param("shape", str, choices=C.SHAPES),
            Param("real_reqs", int, low=1, high=1 << 16), Param("upstream", str)),
    variants=VARIANTS,
    cases=_cases,
    expect=_expect,
    kernel=lambda case: f"{L.KERNEL_NAMES[case.params['vllm']]} [vLLM {case.params['vllm']}]",
    needs_gpu=lambda case: True,
    describe=_describe,
    detectors=(GUARD, MEMCHECK, GUARD_PAGE, POISON, TRACE),
    timeout_s=180.0,
    cost_s=lambda case: 0.4 if L.outside(C.gather_of(case)) else 0.2,
    upstream=L.UPSTREAM,
    notes=f"{L.SOURCE} (vLLM {', '.join(L.VERSIONS)}: unguarded; fix proposed in {L.UPSTREAM_FIX}, unmerged)",
)
