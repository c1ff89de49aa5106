"""Guard pages on a real GPU (issue 20 items 1 and 4; run on the H200 by ci/gpu/guardpage_check.sh): the
front-page placement really starts the tensor on the first mapped byte after an unmapped granule, the back page
really ends it before one, and in guard_page mode, with every buffer on a page, the reruns name the one buffer
and its side: planted_pages' b read past its end (past_end), a read before its start (before_start), Triton and
CUDA, the fixed twins clean. Skipped, with the reason, where torch sees no CUDA device."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gpu_memsafety.placement import layout as L
from gpu_memsafety.model import BEFORE_START, GUARD_PAGE, PAST_END, Outcome
from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
from gpu_memsafety.scenarios.planted_pages import SCENARIO

NO_GPU = "needs a CUDA GPU; found none (torch.cuda.is_available() is False)"
pytestmark = [pytest.mark.e2e, pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU)]


def test_front_and_back_pages_sit_where_the_layout_says() -> None:
    from gpu_memsafety.placement import vmm
    from gpu_memsafety.placement.guard import Arena
    device = torch.device("cuda")
    arena = Arena(device, page_allocators=dict(vmm.ALLOCATORS))
    back = arena.tensor("back", (4000,), torch.uint8, placement=L.GUARD_PAGE_BACK)
    front = arena.tensor("front", (4000,), torch.uint8, placement=L.GUARD_PAGE_FRONT)
    rb, rf = (arena.buffers[n] for n in ("back", "front"))
    gran = rf.keepalive.reserve_size - rf.keepalive.mapped_size
    assert rf.tensor_addr == rf.alloc_base == rf.keepalive.reserve_base + gran      # an unmapped granule before it
    assert rf.tensor_addr % L.ALIGN == 0 and rb.tensor_addr % L.ALIGN == 0
    assert rb.alloc_base + rb.alloc_size - rb.tensor_addr == 4096                   # tail 96 B, then the page
    assert L.paged_buffers(arena.buffer_map()) == {"back": "back", "front": "front"}
    back.fill_(1), front.fill_(2)
    torch.cuda.synchronize()
    assert int(back.sum()) == 4000 and int(front.sum()) == 8000
    assert arena.verify() == {"back": [], "front": []}
    for buf in (rb, rf):
        buf.keepalive.close()


def test_guard_page_mode_names_the_buffer_and_its_side(tmp_path: Path) -> None:
    runner = Runner(RunOptions(mode=MODES["guard_page"], workdir=tmp_path, gpu_available=True))
    results = {f"{r.variant}-{r.params['impl']}": r for r in runner.run([(SCENARIO, c) for c in SCENARIO.build()])}
    for impl in ("triton", "cuda"):
        for variant, buffer, region in (("read_past_end", "b", PAST_END), ("read_before_start", "a", BEFORE_START)):
            result = results[f"{variant}-{impl}"]
            assert result.outcome is Outcome.EXPECTED_FINDING, (variant, impl, result.message)
            [f] = [f for f in result.findings if f.detector == GUARD_PAGE]
            assert (f.buffer, f.region, f.detail("named")) == (buffer, region, "yes"), f
            assert set(f.detail("candidates").split("|")) == {"a", "b", "out"}, f      # every buffer was on a page
            assert result.details["guard_page_reruns"]["runs"], result.details
        for twin in ("read_past_end_fixed", "read_before_start_fixed"):
            result = results[f"{twin}-{impl}"]
            assert result.outcome is Outcome.CLEAN, (twin, impl, result.message)
            assert [p["placement"] for p in result.details["passes"]] == [L.GUARD_PAGE_BACK, L.GUARD_PAGE_FRONT]
