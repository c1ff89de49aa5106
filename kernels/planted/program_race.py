"""Planted races between the program instances of one Triton launch: calibration for the trace's race check
(harness/gpu_memsafety/detectors/trace_race.py). Every access stays inside its tensor: only that check sees them.

Variants (n float32 elements, BLOCK per program):
- `slot_overlap`: each program writes the running sum of its slot, and one element more: the window is bounded
  by a constant (WIDTH = BLOCK + 1), not by the slot, so every program but the last stores into the first element
  of its neighbour's slot (a write-write race on `out`); `slot_clean` is its fixed twin (WIDTH = BLOCK);
  `slot_same_value` writes that element with the value the neighbour writes too (x * 2): identical values, a note,
  not a race.
- `inplace_smooth`: a 3-point smoothing run in place (`dst` is `x`): each program reads one element on either
  side of its slot, which its neighbours write (a read-write race on `x`); `smooth_clean` writes a second tensor.
- `unlocked_accumulate`: every program adds its slot into one shared row `acc` with a plain load and store (a
  read-write and write-write race on all of `acc`); `locked_accumulate` is the same under a spin lock
  (tl.atomic_cas ... tl.atomic_xchg, as Triton's layer-norm backward tutorial does): ordered, clean;
  `atomic_total` adds every slot's sum with tl.atomic_add: atomics are no race, clean.
Runs on the GPU and, with TRITON_INTERPRET=1, on the CPU (where the trace runs).
"""
from __future__ import annotations

import functools
from typing import Any

BLOCK = 128
ITEM = 4                   # float32
SLOTS = ("slot_overlap", "slot_clean", "slot_same_value")
SMOOTH = ("inplace_smooth", "smooth_clean")
SHARED_ROW = ("unlocked_accumulate", "locked_accumulate", "atomic_total")
VARIANTS = (*SLOTS, *SMOOTH, *SHARED_ROW)
KERNELS = {**{v: "planted_slot_scan" for v in SLOTS}, **{v: "planted_smooth" for v in SMOOTH},
           **{v: "planted_accumulate_row" for v in SHARED_ROW}}


@functools.cache
def _kernels() -> dict[str, Any]:
    import triton
    import triton.language as tl

    @triton.jit
    def planted_slot_scan(x, out, n, BLOCK: tl.constexpr, WIDTH: tl.constexpr, SPAN: tl.constexpr,
                          SAME: tl.constexpr):
        j = tl.arange(0, SPAN)
        offs = tl.program_id(0) * BLOCK + j
        mask = (j < WIDTH) & (offs < n)            # RACE (slot_overlap): bounded by WIDTH, not by the slot
        v = tl.load(x + offs, mask=mask, other=0.0)
        if SAME:
            result = v * 2.0
        else:
            result = tl.cumsum(v, 0)
        tl.store(out + offs, result, mask=mask)

    @triton.jit
    def planted_smooth(src, dst, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        left = tl.load(src + offs - 1, mask=mask & (offs >= 1), other=0.0)     # RACE (in place): the neighbour's
        mid = tl.load(src + offs, mask=mask, other=0.0)
        right = tl.load(src + offs + 1, mask=(offs + 1) < n, other=0.0)        # RACE (in place): the neighbour's
        tl.store(dst + offs, (left + mid + right) / 3.0, mask=mask)

    @triton.jit
    def planted_accumulate_row(x, acc, total, lock, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        offs = tl.program_id(0) * BLOCK + cols
        v = tl.load(x + offs, mask=offs < n, other=0.0)
        if MODE == 2:
            tl.atomic_add(total, tl.sum(v, 0))
        else:
            if MODE == 1:
                while tl.atomic_cas(lock, 0, 1) == 1:
                    pass
            current = tl.load(acc + cols)                                      # RACE (MODE 0): no lock
            tl.store(acc + cols, current + v)
            if MODE == 1:
                tl.atomic_xchg(lock, 0)

    return {"planted_slot_scan": planted_slot_scan, "planted_smooth": planted_smooth,
            "planted_accumulate_row": planted_accumulate_row}


def programs(n: int) -> int:
    return (n + BLOCK - 1) // BLOCK


def raced_bytes(variant: str, n: int) -> tuple[str, tuple[tuple[int, int], ...]]:
    """(tensor, byte runs) the variant's programs race on, from the kernels' own addressing: () when clean."""
    edges = [k * BLOCK for k in range(1, programs(n)) if k * BLOCK < n]
    if variant == "slot_overlap":
        return "out", tuple((e * ITEM, (e + 1) * ITEM) for e in edges)
    if variant == "inplace_smooth":
        return "x", tuple(((e - 1) * ITEM, (e + 1) * ITEM) for e in edges)
    if variant == "unlocked_accumulate" and programs(n) > 1:
        return "acc", ((0, BLOCK * ITEM),)
    return "", ()


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.errors import Unsupported
    from gpu_memsafety.scenario.context import RunInfo

    variant, n = case.variant, case.params["n"]
    if variant not in VARIANTS:
        raise Unsupported(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    kernels = _kernels()
    name = KERNELS[variant]
    x = ctx.tensor("x", (n,), torch.float32)
    # k squared: no element is the mean of its neighbours, so every smoothing write changes its element
    x.copy_((torch.arange(n, dtype=torch.float32) ** 2).to(ctx.device))
    grid = (programs(n),)
    if variant in SLOTS:
        out = ctx.tensor("out", (n,), torch.float32, watch=True)
        width = BLOCK if variant == "slot_clean" else BLOCK + 1
        span = 1 << (width - 1).bit_length()
        launch = lambda: kernels[name][grid](x, out, n, BLOCK=BLOCK, WIDTH=width, SPAN=span,  # noqa: E731
                                             SAME=variant == "slot_same_value")
        outputs = {"out": out}
    elif variant in SMOOTH:
        dst = x if variant == "inplace_smooth" else ctx.tensor("y", (n,), torch.float32, watch=True)
        launch = lambda: kernels[name][grid](x, dst, n, BLOCK=BLOCK)  # noqa: E731
        outputs = {"x": x} if dst is x else {"y": dst}
    else:
        acc = ctx.tensor("acc", (BLOCK,), torch.float32, watch=True)
        total = ctx.tensor("total", (1,), torch.float32)
        lock = ctx.tensor("lock", (1,), torch.int32)
        for t in (acc, total, lock):
            t.zero_()
        mode = SHARED_ROW.index(variant)
        launch = lambda: kernels[name][grid](x, acc, total, lock, n, BLOCK=BLOCK, MODE=mode)  # noqa: E731
        outputs = {"acc": acc, "total": total}
    launch()
    return RunInfo(kernel=name, outputs=outputs, relaunch=launch)
