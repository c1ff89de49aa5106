"""The adapter of the `fake_reports` scenario (tests/helpers/fake_kernels/fake_scenarios/fake_reports.py): CPU only, no
kernel. Variant `stray` writes what no expectation covers, into a padded-rows buffer's row padding and one
byte past the end of a flat one, so its case ends `finding` with two findings; `clean` writes only its rows."""
from __future__ import annotations

from typing import Any

ROWS, ROW_BYTES, STRIDE, USED = 8, 24, 32, 5


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo

    n = case.params["n"]
    scale = ctx.rows("scale", rows=ROWS, row_bytes=ROW_BYTES, row_stride=STRIDE, used_rows=USED, watch=True)
    out = ctx.tensor("out", (n,), torch.uint8, watch=True)
    scale[:USED].fill_(1)     # the used rows only: the unused ones keep their markers
    out.fill_(2)
    if case.variant == "stray":
        rows = ctx.arena.buffers["scale"]
        rows.storage[rows.layout.front + 2 * STRIDE + ROW_BYTES: rows.layout.front + 2 * STRIDE + ROW_BYTES + 4] = 7
        flat = ctx.arena.buffers["out"]
        flat.storage[flat.layout.front + n] = 9
    return RunInfo(kernel="fake_store", outputs={"out": out})
