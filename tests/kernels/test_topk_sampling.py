"""CPU tests: the FlashInfer top-k threshold read model, the scenario's expectation table, the launcher."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpu_memsafety.model import TRACE, GUARD_PAGE, MEMCHECK, OVERREAD
from gpu_memsafety.kernels.topk_sampling import build as B
from gpu_memsafety.kernels.topk_sampling import layout as L
from gpu_memsafety.kernels.topk_sampling.adapter import call
from gpu_memsafety.scenarios import sampling_threshold_overread as S


def test_by_position_reads_past_the_rows_by_row_does_not():
    indices = (2, 2, 2, 2)
    assert L.threshold_reads(indices, "0.7.1") == [0, 1, 2, 3]
    assert L.threshold_reads(indices, "0.7.2") == [2, 2, 2, 2]
    assert L.past_end(indices, 3, "0.7.1") == ((12, 16),)
    assert L.past_end(indices, 3, "0.7.2") == ()
    assert L.past_end((0,) * 3000, 3, "0.7.1") == ((12, 12000),)
    with pytest.raises(ValueError):
        L.past_end((3,), 3, "0.7.2")          # an index must name a row


def test_the_call_covers_every_row():
    case = next(c for c in S.SCENARIO.cases() if c.params["samples"] == 4 and c.variant == "buggy")
    rows, top_k, indices = call(case)
    assert (rows, top_k, indices) == (3, (1, 2, 4), (2, 1, 0, 2))


def test_expectation_table():
    cases = S.SCENARIO.cases()
    assert len(cases) == 5          # the buggy 3,000-sample case is out of the matrix (S.HANGS_UNDER_MEMCHECK)
    found = {c.id: S.SCENARIO.expect(c) for c in cases}
    assert [c.id for c in cases if not found[c.id].clean] == [
        "sampling_threshold_overread[buggy-fi0.7.1-rows3-samples4]"]
    (small,) = found["sampling_threshold_overread[buggy-fi0.7.1-rows3-samples4]"].findings
    assert (small.kind, small.buffer, small.region, small.bytes, small.ranges) == (OVERREAD, "top_k", "past_end", 4, ((12, 16),))
    assert set(small.detectors) == {MEMCHECK, GUARD_PAGE, TRACE} and small.upstream == "flashinfer-ai/flashinfer#5339"
    big_case = S.Case(S.NAME, "buggy", {"flashinfer": "0.7.1", "rows": 3, "samples": 3000,
                                        "upstream": "flashinfer-python 0.7.1"}, "fi0.7.1-rows3-samples3000")
    (big,) = S.SCENARIO.expect(big_case).findings    # still modelled: only kept out of the run
    assert big.bytes is None and big.ranges is None and big.region == "past_end"


def test_describe():
    case = S.SCENARIO.cases()[0]
    assert S.SCENARIO.describe(case, "top_k", 12, 16) == \
        "top_k[3]: past the 3 per-request thresholds (read by output position 3..3)"


def test_launcher_and_command():
    assert "TopKSamplingFromProb<float, int32_t>" in B.LAUNCHER and "/*deterministic=*/true" in B.LAUNCHER
    assert f"#include <{B.HEADER}>" in B.LAUNCHER
    cmd = B.compile_command("nvcc", (9, 0), Path("/inc"), Path("a.cu"), Path("a.so"))
    assert "-gencode=arch=compute_90a,code=sm_90a" in cmd and "-use_fast_math" in cmd and "-I/inc" in cmd


def test_missing_vendor_is_unsupported_with_how_to_get(tmp_path):
    from gpu_memsafety.errors import Unsupported
    with pytest.raises(Unsupported, match="make upstream"):
        B.include_dir("0.7.1", vendor=tmp_path)
