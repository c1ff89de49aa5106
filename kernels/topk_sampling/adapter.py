"""Harness adapter for FlashInfer's top-k sampling with per-request thresholds and a row map (`indices`).

The call is flashinfer issue #5339's: `probs` of a few requests (each row [0.5, 0.25, 0.125, 0.125]), a
per-request `top_k` of one entry per row, and `indices` asking for more samples than there are rows. Every
tensor comes from the context; `top_k` is watched (the bug reads past its end). The samples are checked
against what top-k allows for the row they were drawn from (a sample outside the k most likely tokens of a row
whose own k the fixed kernel applied is a broken contract), and every `valid` flag must be set.
"""
from __future__ import annotations

from typing import Any

from gpu_memsafety.errors import Unsupported
from gpu_memsafety.kernels.topk_sampling import layout as L

ROW = (0.5, 0.25, 0.125, 0.125)


class SampleMismatch(RuntimeError):
    """A sample the row's own threshold forbids, or an invalid flag (a failure, never clean)."""


def call(case: Any) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """rows, top_k per row, indices of the case (pure)."""
    p = case.params
    rows, samples = p["rows"], p["samples"]
    top_k = tuple((1, 2, 4)[i % 3] for i in range(rows))
    indices = tuple(rows - 1 - (i % rows) for i in range(samples))     # every row, last row first
    return rows, top_k, indices


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo
    from gpu_memsafety.kernels.topk_sampling import build

    if ctx.device.type != "cuda":
        raise Unsupported("needs a CUDA GPU; torch.cuda.is_available() is False")
    version = case.params["flashinfer"]
    rows, top_k_values, index_values = call(case)
    n = len(index_values)
    probs = ctx.tensor("probs", (rows, len(ROW)), torch.float32)
    probs.copy_(torch.tensor([ROW] * rows, dtype=torch.float32).to(ctx.device))
    top_k = ctx.tensor("top_k", (rows,), torch.int32, watch=True)
    top_k.copy_(torch.tensor(top_k_values, dtype=torch.int32).to(ctx.device))
    indices = ctx.tensor("indices", (n,), torch.int32)
    indices.copy_(torch.tensor(index_values, dtype=torch.int32).to(ctx.device))
    output = ctx.tensor("output", (n,), torch.int32)
    valid = ctx.tensor("valid", (n,), torch.bool)

    def once() -> None:
        build.launch(version, probs, output, valid, indices, top_k)

    once()
    if not L.BY_POSITION[version]:
        samples, flags = output.cpu().tolist(), valid.cpu().tolist()
        for pos, (row, token, ok) in enumerate(zip(index_values, samples, flags)):
            k = top_k_values[row]
            if not ok or not 0 <= token < k:      # the row's k most likely tokens are 0..k-1
                raise SampleMismatch(f"flashinfer {version}: output {pos} (row {row}, k={k}) sampled token {token}, "
                                     f"valid={ok}")
    return RunInfo(kernel=f"{L.KERNEL} [flashinfer {version}]", outputs={"output": output, "valid": valid},
                   relaunch=once)
