"""Planted bugs in buffers the adapter does NOT watch (issue 20 item 1): calibration for "every buffer covered".

A small kernel with several inputs and one output, as users write them: out[i] = (x[i] + x[i+1]) * w[i // GROUP]
(a neighbour sum scaled per group of GROUP elements), and each group's count of valid elements into a scratch
workspace (one float per group, what a later pass would normalise by; 256.0 and 160.0 have no 0xA5 byte, so the
guard markers see every byte of a misplaced one). The adapter marks only the output `out` with watch=True, as a user naturally would; the
bugs are in the other buffers:
- clean: x[i+1] is masked off for the last element (the fixed twin);
- input_overread: the mask lets the last element read x[n], 4 bytes past the end of the input x;
- input_overwrite: each group's count lands one slot late, scratch[g + 1]: the last group writes 4 bytes past
  the end of the scratch buffer.
Triton here; its CUDA C++ twin is unwatched.cu (built by harness/gpu_memsafety/util/cuda_build.py). The Triton kernel runs on the CPU
under TRITON_INTERPRET=1 (guard and poison modes there: buffers keep their guards, so the planted accesses stay
inside the process's allocations).
"""
from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType
from typing import Any

from gpu_memsafety.errors import Unsupported

VARIANTS = ("clean", "input_overread", "input_overwrite")
GROUP = 256          # elements per group: one weight and one scratch slot each; also the launch's block size
ITEM = 4             # fp32
CU_PATH = Path(__file__).with_name("unwatched.cu")
BINDING = """
#include <torch/extension.h>
#include <cstdint>
void planted_unwatched_launch(uintptr_t, uintptr_t, uintptr_t, uintptr_t, long long, int, int, uintptr_t);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("launch", &planted_unwatched_launch);
}
"""
_CACHE: dict[str, Any] = {}


def groups(n: int) -> int:
    """Weights and scratch slots: one per started group of GROUP elements."""
    return -(-n // GROUP)


def _kernel() -> Any:
    if "k" in _CACHE:
        return _CACHE["k"]
    import triton
    import triton.language as tl

    @triton.jit
    def planted_unwatched(x, w, scratch, out, n, READ_PAST: tl.constexpr, SLOT_SHIFT: tl.constexpr,
                          BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        a = tl.load(x + offs, mask=offs < n, other=0.0)
        b = tl.load(x + offs + 1, mask=offs + 1 < n + READ_PAST, other=0.0)   # bug: READ_PAST = 1 reads x[n]
        y = (a + b) * tl.load(w + pid)
        tl.store(out + offs, y, mask=offs < n)
        tl.store(scratch + pid + SLOT_SHIFT, tl.sum((offs < n).to(tl.float32), axis=0))   # bug: SLOT_SHIFT = 1

    _CACHE["k"] = planted_unwatched
    return planted_unwatched


@functools.cache
def build(capability: tuple[int, int]) -> ModuleType:
    from gpu_memsafety.util.cuda_build import build_extension
    return build_extension("planted_unwatched", CU_PATH, BINDING, capability)


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.scenario.context import RunInfo

    impl, variant, n = case.params["impl"], case.variant, case.params["n"]
    if variant not in VARIANTS:
        raise Unsupported(f"unknown variant {variant!r}; known: {VARIANTS}")
    if impl == "cuda" and ctx.device.type != "cuda":
        raise Unsupported("needs a CUDA GPU; torch.cuda.is_available() is False")
    g = groups(n)
    # Inputs and the workspace unwatched, the output watched: what a user writes.
    x = ctx.tensor("x", (n,), torch.float32)
    w = ctx.tensor("w", (g,), torch.float32)
    scratch = ctx.tensor("scratch", (g,), torch.float32)
    out = ctx.tensor("out", (n,), torch.float32, watch=True)
    x.copy_(ctx.randn((n,), torch.float32))
    w.copy_((torch.arange(g, dtype=torch.float32) % 3 + 1).to(ctx.device))
    scratch.zero_()
    read_past = 1 if variant == "input_overread" else 0
    shift = 1 if variant == "input_overwrite" else 0
    if impl == "cuda":
        module = build(torch.cuda.get_device_capability(ctx.device))

        def once() -> None:
            stream = torch.cuda.current_stream(ctx.device).cuda_stream
            module.launch(x.data_ptr(), w.data_ptr(), scratch.data_ptr(), out.data_ptr(), n, read_past, shift, stream)
        name = "planted_unwatched_cuda"
    elif impl == "triton":
        kernel = _kernel()

        def once() -> None:
            kernel[(g,)](x, w, scratch, out, n, READ_PAST=read_past, SLOT_SHIFT=shift, BLOCK=GROUP)
        name = "planted_unwatched"
    else:
        raise Unsupported(f"unknown impl {impl!r}")
    once()
    return RunInfo(kernel=name, outputs={"out": out}, relaunch=once)
