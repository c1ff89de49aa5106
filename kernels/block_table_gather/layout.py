"""vLLM DeepSeek-V4's top-k block-table gather, as pure arithmetic: which bytes of `block_table` it reads.

Pure (no torch, no triton): the scenario's expectations and the adapter's output check come from here.

`_compute_global_topk_indices_and_lens_kernel` (vllm/models/deepseek_v4/common/ops/cache_utils.py; in 0.33.0 the
`kernel` of `ComputeGlobalTopkIndicesAndLensKernel`) runs one program per token: `req = token_to_req_indices[t]`,
and for every top-k entry `local >= 0` it loads `block_table[req * stride + local // block_size]` (int32) and
stores `block * block_size + local % block_size`. The load is masked by `local >= 0` only: no bound on `req`
against the table's rows, none on `local // block_size` against its columns (vLLM issue #55636; PR #55744,
open, adds both). A CUDA-graph padding token whose request index has no row (the table built for the real
requests only, as vLLM builds before main padded it to `num_reqs_padded` rows of NULL_BLOCK_ID) reads past the
table's end. Every published vLLM through 0.33.0 ships the unguarded kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

INT_BYTES = 4
NULL_BLOCK_ID = 0            # what vLLM main writes into the CUDA-graph padding rows (issue #55636's re-check)
VERSIONS = ("0.27.1", "0.33.0")
SOURCE = "vllm/models/deepseek_v4/common/ops/cache_utils.py"
# The kernel's name in each copy (Triton names the compiled kernel after the function).
KERNEL_NAMES = {"0.27.1": "_compute_global_topk_indices_and_lens_kernel", "0.33.0": "kernel"}
# Where it sits: a module-level function, or a class's staticmethod.
KERNEL_OWNER = {"0.27.1": None, "0.33.0": "ComputeGlobalTopkIndicesAndLensKernel"}
TRITON_BLOCK_SIZE = 1024     # the wrapper's constant
UPSTREAM = "vllm-project/vllm#55636"
UPSTREAM_FIX = "vllm-project/vllm#55744"


@dataclass(frozen=True)
class Gather:
    """One call: the top-k rows, the token -> request map, and the block table's shape."""

    topk: tuple[tuple[int, ...], ...]      # [num_tokens, topk] local indices (-1: no entry)
    token_to_req: tuple[int, ...]          # [num_tokens]
    rows: int                              # block-table rows
    stride: int                            # block-table columns (blocks per request)
    block_size: int

    def __post_init__(self) -> None:
        if len(self.topk) != len(self.token_to_req):
            raise ValueError(f"{len(self.topk)} top-k rows for {len(self.token_to_req)} tokens")
        if len({len(r) for r in self.topk}) > 1:
            raise ValueError("top-k rows of different lengths")
        if self.rows <= 0 or self.stride <= 0 or self.block_size <= 0:
            raise ValueError("rows, stride and block_size must be positive")

    @property
    def table_bytes(self) -> int:
        return self.rows * self.stride * INT_BYTES

    def element(self, token: int, local: int) -> int:
        """The block_table element (flat int32 index) the kernel loads for this entry."""
        return self.token_to_req[token] * self.stride + local // self.block_size

    def reads(self, token: int) -> list[tuple[int, int]]:
        """Byte ranges of block_table one token's program loads (masked entries load nothing)."""
        return [(self.element(token, x) * INT_BYTES, (self.element(token, x) + 1) * INT_BYTES)
                for x in self.topk[token] if x >= 0]

    def in_bounds(self, token: int) -> bool:
        return all(0 <= lo and hi <= self.table_bytes for lo, hi in self.reads(token))


def merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def outside(g: Gather) -> dict[str, list[tuple[int, int]]]:
    """Bytes read outside the table, by region ('past_end', 'before_start'), offsets from its first byte."""
    past = [r for t in range(len(g.topk)) for r in g.reads(t) if r[1] > g.table_bytes]
    before = [r for t in range(len(g.topk)) for r in g.reads(t) if r[0] < 0]
    out = {}
    if past:
        out["past_end"] = merge([(max(lo, g.table_bytes), hi) for lo, hi in past])
    if before:
        out["before_start"] = merge([(lo, min(hi, 0)) for lo, hi in before])
    return out


def slot_ids(g: Gather, table: list[list[int]], token: int) -> list[int]:
    """The kernel's output row for a token whose loads stay in the table: slot ids, -1 where no entry."""
    flat = [v for row in table for v in row]
    return [flat[g.element(token, x)] * g.block_size + x % g.block_size if x >= 0 else -1 for x in g.topk[token]]


def topk_len(g: Gather, token: int, valid: bool) -> int:
    return sum(1 for x in g.topk[token] if x >= 0) if valid else 0


def describe(g: Gather, start: int, end: int) -> str:
    """block_table bytes in the kernel's words: rows, columns, and which tokens' loads they are."""
    first, last = start // INT_BYTES, (end - 1) // INT_BYTES
    row, col = divmod(first, g.stride)
    lrow, lcol = divmod(last, g.stride)
    where = (f"row {row}, blocks {col}..{lcol}" if row == lrow else f"rows {row}..{lrow}") if first != last else \
        f"row {row}, block {col}"
    past = f"; row {row} is past the table's {g.rows} row(s)" if row >= g.rows else ""
    who = sorted({t for t in range(len(g.topk)) for lo, hi in g.reads(t) if lo < end and start < hi})
    return f"block_table {where}{past} (loaded for token(s) {', '.join(map(str, who))})" if who else f"block_table {where}{past}"
