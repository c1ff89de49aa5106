"""Harness adapter for triton_kernels' mxfp4 MoE matmul (the last-expert OOB read), per triton_kernels copy.

The weight scale's swizzled storage is the watched buffer: the harness places it so that its last byte is
the last byte of its allocation (memcheck: the overread leaves the allocation on every run), flush against
an unmapped page (guard-page mode: the overread faults in hardware), or inside guards in a poison pattern.
The copy a case runs (params `tk`: A, C or D, see gpu_memsafety.cli.upstream.TRITON_KERNELS_COPIES) is the one
`make upstream` unpacked into .vendor/; one that is missing could not run (it fails a GPU runner, saying how to
get it); one that needs a newer triton than this machine's is `not applicable`, with what was needed and found. Everything else (quantization, pad, swizzle,
routing, the call) is kernels/mxfp4/moe.py.
"""
from __future__ import annotations

from typing import Any, Mapping

from gpu_memsafety.upstream import catalogue as U
from gpu_memsafety.errors import NotApplicable, Unsupported


def copy_label(tk: str) -> str:
    """'triton_kernels from sglang-kernel 0.4.6.post1' for copy C: what reports name."""
    return f"triton_kernels from {U.artifact(U.TRITON_KERNELS_COPIES[tk]).label}"


def copy_problem(tk: str) -> str:
    """Why copy `tk` does not apply with the installed triton ("" when it does): read from the package metadata
    only (no import), so the planner can ask it too (such a case is over in a moment: not applicable)."""
    import importlib.metadata as metadata

    try:
        triton_version: str | None = metadata.version("triton")
    except metadata.PackageNotFoundError:
        triton_version = None
    return U.triton_problem(U.artifact(U.TRITON_KERNELS_COPIES[tk]), triton_version)


def locate(tk: str) -> Any:
    """The copy's triton_kernels, imported (switching from another copy this process used), or Unsupported."""
    from gpu_memsafety.kernels.mxfp4.triton_kernels_locator import load_copy

    art = U.artifact(U.TRITON_KERNELS_COPIES[tk])
    problem = copy_problem(tk)
    if problem:   # a copy made for a newer triton does not apply here: not applicable, never a failure
        raise NotApplicable(f"{copy_label(tk)}: {problem}")
    folder = U.unpacked(art)
    if folder is None:
        raise Unsupported(U.how_to_get(art))
    return load_copy(folder / "triton_kernels")


def run(p: Mapping[str, Any], ctx: Any, *, batched: bool, split_k1: bool) -> Any:
    """One case of scenarios/last_expert_oob_read.py (params E, N, K, tokens, top_k, tk, pad): the batched (3-D)
    matmul, split_k pinned to 1 or left to triton_kernels, or the routed one; the scenario passes its
    variant's typed fields."""
    import torch

    from gpu_memsafety.scenario.context import RunInfo
    from gpu_memsafety.kernels.mxfp4 import moe as M

    M.check_device(ctx.device)
    located = locate(p["tk"])

    def alloc_scale(nbytes: int) -> Any:
        return ctx.tensor("w_scale", (nbytes,), torch.uint8, watch=True)

    prepared = M.prepare(p["E"], p["N"], p["K"], pad=p["pad"], seed=ctx.seed, device=ctx.device,
                         alloc_scale=alloc_scale, located=located)
    flags: dict[str, Any] = {}
    if batched:
        split_k = 1 if split_k1 else None
        x = M.make_batched_input(prepared, p["tokens"], seed=ctx.seed)
        once = lambda: M.run_batched(prepared, x, split_k=split_k, on_flags=flags.update)  # noqa: E731
        counts: tuple[int, ...] = (p["tokens"],) * p["E"]
    else:
        routing = M.route(prepared, p["tokens"], p["top_k"], seed=ctx.seed)
        x = M.make_tokens(prepared, p["tokens"], seed=ctx.seed)
        once = lambda: M.run(prepared, x, routing, on_flags=flags.update)  # noqa: E731
        counts = routing.expert_counts
    y = once()
    notes = {"api": prepared.api_gen, "triton_kernels": prepared.located.describe(), "upstream": copy_label(p["tk"]),
             "pad": prepared.pad, "hopper_layout_model": prepared.hopper_model,
             "scale_storage_bytes": prepared.layout.nbytes, "expected_overread_bytes": prepared.layout.overread_bytes,
             "expert_rows": list(counts), "opt_flags": {k: str(v) for k, v in flags.items()}}
    return RunInfo(kernel=kernel_label(prepared.api_gen, p["tk"]), outputs={"y": y}, notes=notes, relaunch=once)


def kernel_label(api_gen: str, tk: str) -> str:
    return f"{'_matmul_ogs' if api_gen == 'matmul_ogs' else '_matmul'} [{copy_label(tk)}]"
