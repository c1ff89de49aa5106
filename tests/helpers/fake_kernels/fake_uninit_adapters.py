"""Adapters for tests/helpers/fake_kernels/fake_scenarios/fake_uninit.py: torch ops on the CPU standing in for kernels
that read bytes nobody wrote (uninit-mode tests). Each "kernel" is one torch expression."""
from __future__ import annotations

from typing import Any

import torch

from gpu_memsafety.scenario.context import RunInfo


def run_case(case: Any, ctx: Any) -> Any:
    n = case.params["n"]
    x = ctx.tensor("x", (n,), torch.float32)
    out = ctx.tensor("out", (n,), torch.float32, watch=True)
    if case.variant == "input_half_written":
        x[: n // 2] = 1.0                   # the host writes only the first half of the input
        out.copy_(x * 2)                    # the "kernel" reads all of it
        return RunInfo(kernel="fake_scale", outputs={"out": out})
    if case.variant == "lut_partly_written":
        # A lookup into a table the host filled for its first half only: out is written everywhere, but half of
        # it with bytes copied from the never-written half of the table (held out on the CPU, session 8: this
        # was reported as out's bytes left unwritten, and the table never named).
        x[: n // 2] = 1.0
        out.copy_(x.flip(0))
        return RunInfo(kernel="fake_lookup", outputs={"out": out})
    if case.variant == "marker_valued_overrun":
        # Four floats stored past the end, the middle two with the marker's own bits (0xA5A5A5A5: held-out hr_a, bf16
        # values 0xA5A5 past the end): the marker check alone sees 8 of the 16 bytes.
        x.fill_(1.0)
        out.copy_(x)
        marker = torch.tensor([0xA5A5A5A5 - (1 << 32)], dtype=torch.int32).view(torch.float32).item()
        out.as_strided((n + 4,), (1,))[n:] = torch.tensor([3.0, marker, marker, 5.0])
        return RunInfo(kernel="fake_overrun", outputs={"out": out})
    if case.variant == "read_then_written":
        # Decode attention run before the launch that writes the current token's K/V (held-out hs_f): the slots
        # are read while nobody has written them, then written; the cache's tail is never written and never read.
        slots = torch.zeros(n, dtype=torch.bool)
        for lo, hi in ((100, 108), (300, 308), (620, 628), (900, 908)):
            slots[lo:hi] = True
        history = ~slots & (torch.arange(n) < 950)
        x[history] = 1.0                          # the host writes the history, not the slots, not the tail
        out.copy_(x * 2)
        out[950:] = 0.0
        x[slots] = 5.0                            # the later launch writes the slots
        return RunInfo(kernel="fake_attention", outputs={"out": out})
    if case.variant == "flags_unwritten":
        # Presence flags the host wrote for the first half only (held-out hv_e): a bool reads 0xA5 and 0x5A both as
        # true, so runs A and B agree; the 0x00 fill reads false and changes the second half of out.
        flags = ctx.tensor("flags", (n,), torch.bool)
        flags[: n // 2] = True
        x.fill_(1.0)
        out.copy_(torch.where(flags, x * 2, x))
        return RunInfo(kernel="fake_flags", outputs={"out": out})
    if case.variant == "min_unreset":
        # A running min over negative log-probs whose slots were never reset (held-out hv_h): as fp32 0xA5A5A5A5
        # (-2.9e-16) and 0x5A5A5A5A (+1.5e16) both lie above every value; 0xFA's -6.5e35 wins the min.
        running = ctx.tensor("running", (n,), torch.float32)
        x.fill_(-3.0)
        out.copy_(torch.minimum(running, x))
        return RunInfo(kernel="fake_min", outputs={"out": out})
    if case.variant == "times_zero":
        # An epilogue `out = out * add + acc` with add = 0.0 on a never-written output (held-out hw_f): every finite
        # fill times 0 is 0; only a NaN fill (0xFF) reaches the result.
        x.fill_(1.0)
        out.copy_(out * 0.0 + x)
        return RunInfo(kernel="fake_epilogue", outputs={"out": out})
    if case.variant == "input_partly_read":
        # the host writes half of x; the kernel reads 100 elements of the other half, not all of it
        x[: n // 2] = 1.0
        out.zero_()
        out[: n // 2 + 100] = x[: n // 2 + 100] * 2
        return RunInfo(kernel="fake_partial", outputs={"out": out})
    if case.variant == "guard_copy_overrun":
        # A mask-less copy five elements past the end (held-out ht_a): four of them carry x's own back-guard bytes
        # (the marker) into out's back guard, the fifth a value; the marker check alone sees the fifth.
        x.fill_(1.0)
        out.copy_(x)
        out.as_strided((n + 4,), (1,))[n:] = x.as_strided((n + 4,), (1,))[n:]
        out.as_strided((n + 5,), (1,))[n + 4] = 3.0
        return RunInfo(kernel="fake_copy_past", outputs={"out": out})
    if case.variant == "tail_unwritten":
        x.fill_(1.0)
        out[: n // 2] = x[: n // 2]        # the grid covers half of out: its second half is never written
        return RunInfo(kernel="fake_half_grid", outputs={"out": out})
    x.fill_(1.0)
    if case.variant in ("sparse_noise", "sparse_noise_accumulate"):
        # A split-k sum whose float atomics land in another order on every run: a few elements round
        # differently each time, different ones every run. The _accumulate twin also adds into out, which
        # nobody zeroed (the bug: its result depends on the fill).
        jitter = torch.zeros(n)
        jitter[torch.randperm(n)[: n // 8]] = 1e-6
        if case.variant == "sparse_noise":
            out.zero_()
        out += x + jitter
        return RunInfo(kernel="fake_splitk", outputs={"out": out})
    if case.variant == "external_output":
        total = torch.zeros(1, dtype=torch.float32)
        total += out.sum()                  # reads out, which nobody wrote; the result is not in the arena
        out.copy_(x)
        return RunInfo(kernel="fake_sum", outputs={"total": total})
    if case.variant == "nondeterministic":
        out.copy_(torch.rand(n))            # differs from run to run whatever the fill: not judged
        return RunInfo(kernel="fake_noise", outputs={"out": out})
    out.copy_(x)                            # clean
    return RunInfo(kernel="fake_copy", outputs={"out": out})
