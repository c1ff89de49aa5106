"""Run by tests/placement/test_markcheck.py in a subprocess with TRITON_INTERPRET=1: the one-launch Triton marker
check (harness/gpu_memsafety/placement/markcheck.py) against an independent numpy count and against the torch path, on random
layouts and random corruptions. Prints one JSON line of mismatches (empty lists when all agree)."""
from __future__ import annotations

import json
import random

import numpy as np
import torch

from gpu_memsafety.detectors import trace_fidelity
from gpu_memsafety.placement.guard import Arena
from gpu_memsafety.placement.markcheck import WORD, Span, SpanTable

trace_fidelity.install()    # the interpreter as a case worker has it (its fence installs this): numpy 2.4's int()


def reference(span: Span, memory: np.ndarray, base: int) -> int:
    """Changed words (word spans) or bytes (byte spans), counted by hand from a host copy."""
    size = WORD if span.words else 1
    changed = 0
    for r in range(span.rows):
        start = span.addr - base + r * span.stride
        row = memory[start : start + span.width]
        if size == 1:
            changed += int((row != span.marker).sum())
        else:
            changed += int((row.reshape(-1, size) != span.marker).any(axis=1).sum())
    return changed


def build(checker: str, guard: int, trial: int) -> Arena:
    """The same random layout for a given trial: plain tensors and row buffers of every width class."""
    arena = Arena(torch.device("cpu"), guard=guard, checker=checker)
    rng = random.Random(trial)
    for i in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            arena.tensor(f"t{i}", (rng.randint(1, 5000),), torch.uint8)
        else:
            row_bytes = rng.choice([72, 90, 30, 13, 64, 3])
            stride = row_bytes + rng.choice([0, 1, 6, 8, 16])
            rows = rng.randint(1, 40)
            arena.rows(f"r{i}", rows=rows, row_bytes=row_bytes, row_stride=stride, used_rows=rng.randint(0, rows))
    return arena


def corrupt(arenas: tuple[Arena, ...], seed: int) -> None:
    """The same random bytes overwritten in each arena (inside and outside the marker spans)."""
    for name in arenas[0].buffers:
        for arena in arenas:
            st = arena.buffers[name].storage
            poke = random.Random(seed * 100 + len(name))
            for _ in range(poke.randint(0, 6)):
                st[poke.randrange(st.numel())] = poke.randrange(256)


def main() -> None:
    rng = random.Random(7)
    problems: list[str] = []
    checked = 0
    for trial in range(40):
        guard = rng.choice([16, 64, 1024])
        a, b = build("triton", guard, trial), build("torch", guard, trial)
        corrupt((a, b), trial)
        spans = [Span.of(v, buf.marker) for buf in a.buffers.values() for v in buf.marker_views()]
        counts = SpanTable(spans, torch.device("cpu")).count().sum(dim=1).tolist()
        for span, got in zip(spans, counts):
            owner = next(buf for buf in a.buffers.values() if buf.storage.data_ptr() <= span.addr < buf.storage.data_ptr() + buf.storage.numel())
            want = reference(span, owner.storage.numpy(), owner.storage.data_ptr())
            checked += 1
            if got != want:
                problems.append(f"trial {trial}: span {span}: kernel {got}, reference {want}")
        if a.verify() != b.verify():
            problems.append(f"trial {trial}: verify differs: triton {a.verify()} torch {b.verify()}")
        rearmed = SpanTable(spans, torch.device("cpu")).count(rearm=True).sum(dim=1).tolist()
        if rearmed != counts:
            problems.append(f"trial {trial}: check-and-rearm counted {rearmed}, check counted {counts}")
        if any(SpanTable(spans, torch.device("cpu")).count().sum(dim=1).tolist()):
            problems.append(f"trial {trial}: markers not restored by check-and-rearm")
        b.check_and_rearm()
        if any(b.verify().values()):
            problems.append(f"trial {trial}: markers not restored by the torch path's check_and_rearm")
        corrupt((a, b), trial + 1000)             # fresh damage, for fill_markers to repair
        a.fill_markers()
        b.fill_markers()
        if any(a.verify().values()) or any(b.verify().values()):
            problems.append(f"trial {trial}: markers not restored by fill_markers")
    print(json.dumps({"problems": problems, "spans_checked": checked}))


if __name__ == "__main__":
    main()
