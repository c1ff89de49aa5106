"""Harness adapter for vLLM DeepSeek-V4's block-table gather (compute_global_topk_indices_and_lens).

Every tensor the kernel touches comes from the context: the top-k indices, the token -> request map, the
is-valid flags, the block table (watched: the bug reads past its end) and both outputs. The shape of the call
(rows of the table, the request of each token, the top-k entries) is the case's `gather` (cases.py), built
from the upstream report. Tokens whose loads stay in the table are checked against the pure model
(layout.slot_ids): a copy that computes something else is a broken contract, never a pass.
"""
from __future__ import annotations

from typing import Any

from gpu_memsafety.errors import Unsupported
from gpu_memsafety.kernels.block_table_gather import layout as L
from gpu_memsafety.kernels.block_table_gather.cases import gather_of


class SlotMismatch(RuntimeError):
    """The kernel's slot ids for an in-bounds token differ from the model's (a failure, never clean)."""


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo
    from gpu_memsafety.kernels.block_table_gather import vllm_kernel

    if ctx.device.type != "cuda":
        raise Unsupported("needs a CUDA GPU; torch.cuda.is_available() is False")
    version = case.params["vllm"]
    g = gather_of(case)
    gen = ctx.generator()
    tokens, width = len(g.topk), len(g.topk[0])
    topk = ctx.tensor("topk_indices", (tokens, width), torch.int32)
    topk.copy_(torch.tensor(g.topk, dtype=torch.int32).to(ctx.device))
    req = ctx.tensor("token_to_req_indices", (tokens,), torch.int32)
    req.copy_(torch.tensor(g.token_to_req, dtype=torch.int32).to(ctx.device))
    valid = ctx.tensor("is_valid_token", (tokens,), torch.bool)
    valid_rows = [r < case.params["real_reqs"] for r in g.token_to_req]
    valid.copy_(torch.tensor(valid_rows, dtype=torch.bool).to(ctx.device))
    table_values = torch.randint(1, 1 << 16, (g.rows, g.stride), generator=gen, dtype=torch.int32)
    table_values[case.params["real_reqs"]:] = L.NULL_BLOCK_ID     # padding rows, when the producer pads
    table = ctx.tensor("block_table", (g.rows, g.stride), torch.int32, watch=True)
    table.copy_(table_values.to(ctx.device))
    slots = ctx.tensor("global_topk_indices", (tokens, width), torch.int32)
    lens = ctx.tensor("topk_lens", (tokens,), torch.int32)

    def once() -> None:
        vllm_kernel.launch(version, slots, lens, topk, req, table, g.block_size, valid)

    once()
    host = table_values.tolist()
    got_slots, got_lens = slots.cpu().tolist(), lens.cpu().tolist()
    for t in range(tokens if ctx.results_checkable else 0):   # memcheck stops the kernel: nothing to check
        if g.in_bounds(t) and got_slots[t] != L.slot_ids(g, host, t):
            raise SlotMismatch(f"vLLM {version}: token {t}'s slot ids {got_slots[t][:8]}... differ from the model's "
                               f"{L.slot_ids(g, host, t)[:8]}...")
        if got_lens[t] != L.topk_len(g, t, valid_rows[t]):
            raise SlotMismatch(f"vLLM {version}: token {t}'s topk_len {got_lens[t]}, the model says "
                               f"{L.topk_len(g, t, valid_rows[t])}")
    return RunInfo(kernel=f"{L.KERNEL_NAMES[version]} [vLLM {version}]",
                   outputs={"global_topk_indices": slots, "topk_lens": lens}, relaunch=once)
