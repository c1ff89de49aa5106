"""CPU tests: the DeepGEMM SM90 metadata scheduler model, the scenario's expectation table, the launcher source."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpu_memsafety.model import MEMCHECK, OVERREAD, SHARED, SHARED_MEMORY
from gpu_memsafety.kernels.paged_mqa_metadata import build as B
from gpu_memsafety.kernels.paged_mqa_metadata import layout as L
from gpu_memsafety.scenarios import paged_mqa_metadata_smem_read as S


def test_aligned_batch_and_shared_bytes():
    assert [L.aligned_batch_size(b) for b in (1, 32, 33, 128)] == [32, 32, 64, 128]
    assert L.smem_bytes(32) == 128 and L.smem_bytes(33) == 256
    with pytest.raises(ValueError):
        L.aligned_batch_size(0)


@pytest.mark.parametrize("bs,sms", [(32, 132), (128, 78), (64, 8)])
def test_all_zero_lengths_read_one_int_past_the_array_when_batch_is_a_multiple_of_32(bs, sms):
    zeros = (0,) * bs
    assert L.oob_shared_ranges(zeros, sms, fixed=False) == ((4 * bs, 4 * bs + 4),)
    assert L.oob_shared_ranges(zeros, sms, fixed=True) == ()
    # same output either way: the stray value only divides a zero offset
    assert L.schedule(zeros, sms, fixed=False).metadata == L.schedule(zeros, sms, fixed=True).metadata \
        == ((bs, 0),) * (sms + 1)


def test_unaligned_batch_reads_inside_the_array():
    sched = L.schedule((0,) * 33, 132, fixed=False)
    assert 33 in sched.shared_reads and sched.out_of_bounds(33) == ()


@pytest.mark.parametrize("lens,sms", [((4096,) * 32, 132), ((300, 0, 1000, 7, 0), 8), ((1, 2, 3) * 11, 5)])
def test_schedule_with_work_stays_in_bounds_and_covers_every_segment_once(lens, sms):
    for fixed in (False, True):
        sched = L.schedule(lens, sms, fixed=fixed)
        assert sched.out_of_bounds(len(lens)) == ()
        prefix = L.prefix_sums(lens)
        total = prefix[-1]
        q, r = divmod(total, sms)
        for sm, (q_idx, split) in enumerate(sched.metadata[:-1]):
            seg = sm * q + max(0, sm - (sms - r))
            before = prefix[q_idx - 1] if q_idx else 0
            assert before + split == seg, (sm, q_idx, split, seg)   # (request, split) names SM sm's first segment
        assert sched.metadata[-1] == (len(lens), 0)


def _case(variant: str, bs: int, lens: str):
    return next(c for c in S.SCENARIO.cases() if c.variant == variant and c.params["batch_size"] == bs
                and c.params["lens"] == lens)


def test_expectation_table():
    cases = S.SCENARIO.cases()
    assert len(cases) == 2 * len(S.SHAPES)
    expected = {c.id for c in cases if not S.SCENARIO.expect(c).clean}
    assert expected == {_case("buggy", 32, "zeros").id, _case("buggy", 128, "zeros").id}
    (f,) = S.SCENARIO.expect(_case("buggy", 128, "zeros")).findings
    assert (f.kind, f.buffer, f.region, f.detectors, f.bytes) == (OVERREAD, SHARED, SHARED_MEMORY, (MEMCHECK,), 4)
    assert S.oob(_case("buggy", 128, "zeros")) == ((512, 516),)
    assert f.upstream == "deepseek-ai/DeepGEMM#399"
    assert all(S.SCENARIO.isolated(c) == (c.id in expected) for c in cases)
    assert S.SCENARIO.detectors == (MEMCHECK,)


def test_describe_names_the_prefix_entry():
    case = _case("buggy", 32, "zeros")
    assert S.SCENARIO.describe(case, SHARED, 128, 132) == "prefix_sum[32]: past the 32-entry (128 B) dynamic shared array"


def test_launcher_source_and_command():
    old = B.launcher_source(128, 78, num_atoms_arg=False)
    new = B.launcher_source(128, 78, num_atoms_arg=True)
    assert "sm90_paged_mqa_logits_metadata<128, 256, 78, false>" in old
    assert "kSmemSize = 512" in old and "<<<1, 32, kSmemSize" in old
    assert "true, context_lens" in old and "true, num_next_n_atoms, context_lens" in new
    assert old.index("#include <cuda_bf16.h>") < old.index(f"#include <{B.HEADER}>")
    cmd = B.compile_command("nvcc", (9, 0), Path("/inc"), Path("a.cu"), Path("a.so"))
    assert "--gpu-architecture=sm_90a" in cmd and "-I/inc" in cmd and "-shared" in cmd
    assert set(B.DG_FLAGS) <= set(cmd) and "-lineinfo" in cmd


def test_signature_probe():
    assert not B.takes_num_atoms("void sm90_paged_mqa_logits_metadata(const uint32_t batch_size, const uint32_t next_n, "
                                 "const bool is_context_lens_2d, const uint32_t* context_lens) {")
    assert B.takes_num_atoms("void sm90_paged_mqa_logits_metadata(const uint32_t batch_size, const uint32_t next_n, "
                             "const bool is_context_lens_2d, const uint32_t num_next_n_atoms, const uint32_t* c) {")


def test_missing_vendor_is_unsupported_with_how_to_get(tmp_path):
    from gpu_memsafety.errors import Unsupported
    with pytest.raises(Unsupported, match="make upstream"):
        B.include_dir("0.27.1", vendor=tmp_path)


@pytest.mark.parametrize("batch, window", [(32, 1152), (128, 1536)])
def test_the_h200s_shared_window_offsets_meet_the_pinned_bytes(batch, window):
    """H200 run 43 reported the read of prefix_sum[batch] at these window offsets (1 KiB reserved + 4 * batch):
    placed on sm_90 they are the expectation's bytes exactly, named in the kernel's words; the judge says expected."""
    from dataclasses import replace

    from gpu_memsafety.detectors.modes import MODES
    from gpu_memsafety.engine.batches import Batch, Batches
    from gpu_memsafety.judge.rules import Standing
    from gpu_memsafety.model import Outcome
    from gpu_memsafety.sanitizer.parse import MEMORY_ACCESS, SanitizerRecord

    from tests.judge.test_judge import GPU, memcheck_run, worker

    case = _case("buggy", batch, "zeros")
    rec = SanitizerRecord(MEMORY_ACCESS, "Invalid __shared__ read of size 4 bytes", kind="Precise", direction="read",
                          space="shared", size=4, address=window, kernel="sm90_paged_mqa_logits_metadata",
                          file="/x/sm90_paged_mqa_logits.cuh", line=113, thread=(0, 0, 0), block=(0, 0, 0))
    res = replace(worker(kernel="sm90_paged_mqa_logits_metadata"), case_id=case.id)
    judged = Batches(Standing(MODES["memcheck"], GPU)).judge_batch([(S.SCENARIO, case)], Batch(results={0: res},
                                                                                     sanitizer=memcheck_run(rec)))
    [result] = judged.done
    [f] = result.findings
    assert [(r.start, r.end) for r in f.ranges] == list(S.oob(case)) == [(4 * batch, 4 * batch + 4)]
    assert f.ranges[0].logical.startswith(f"prefix_sum[{batch}]: past the {batch}-entry")
    assert result.outcome is Outcome.EXPECTED_FINDING and not result.failed, result.message
