"""Uninit mode on the padded-stride scale write (scenarios/padded_stride_scale_write.py): packed addressing into
padded rows never reaches the last tokens' scale bytes (H=2304, 5 tokens in 8 rows: token 4's bytes 40..71), a
padded stride on a packed allocation skips a slice of every row; both are `unwritten` of `scale`, derived from
the scenario's own model of the addressing (`written`), and the fixed variant stays clean. Seen on the H200 in
run 12; here the Triton twin runs under TRITON_INTERPRET=1 through the real runner in uninit mode."""
from __future__ import annotations


import pytest

from gpu_memsafety.scenario import registry
from gpu_memsafety.model import UNINIT, UNWRITTEN, Outcome
from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
from gpu_memsafety.kernels.pre_dispatch import layout as PL
from gpu_memsafety.scenarios import padded_stride_scale_write as P

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)


def _brute(case: registry.Case) -> set[int]:
    """Byte by byte, independently of the interval arithmetic: used rows' logical bytes nobody writes."""
    g, stride = PL.scale_row_bytes(case.params["hidden"]), P._allocated_stride(case)
    logical = {t * stride + c for t in range(case.params["num_tokens"]) for c in range(g)}
    done = {b for lo, hi in P.written(case) for b in range(lo, hi)}
    return logical - done


def test_unwritten_bytes_follow_from_the_addressing_model_for_every_case() -> None:
    for case in P.SCENARIO.build():
        never = {b for lo, hi in P.unwritten(case) for b in range(lo, hi)}
        assert never == (_brute(case) if P._mode(case) != "refused" else set()), case.id
        found = [e for e in P.SCENARIO.expect(case).findings if e.kind == UNWRITTEN]
        if PL.sglang_version(case.params["impl"]) is None and never:
            [e] = found
            assert (e.buffer, e.region, e.detectors, e.bytes) == ("scale", "inside", (UNINIT,), len(never))
        else:
            assert found == [], case.id
        if case.variant == "strided" or case.params["hidden"] in P.UNPADDED_HIDDEN and case.variant == "packed":
            assert never == set(), case.id      # the fix, and rows without padding: every byte written


def test_packed_five_of_eight_leaves_token_4s_last_bytes_unwritten() -> None:
    _, case = registry.find_case("padded_stride_scale_write[packed-cuda-H2304-T5of8]")
    assert P.unwritten(case) == [(4 * 80 + 40, 4 * 80 + 72)]
    assert "token 4's scale bytes 40..71 (32 B) never written" in P._describe(case, "scale", 360, 392)


IDS = ("padded_stride_scale_write[packed-triton-H2304-T5of8]", "padded_stride_scale_write[strided-triton-H2304-T5of8]",
       "padded_stride_scale_write[strided_on_packed-triton-H2304-T5of8]",
       "padded_stride_scale_write[packed-triton-H2560-T5of8]")


@pytest.fixture(scope="module")
def uninit_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    items = [registry.find_case(i) for i in IDS]
    runner = Runner(RunOptions(mode=MODES["uninit"], workdir=tmp_path_factory.mktemp("padded-uninit")))
    return {r.case_id: r for r in runner.run(items)}


def test_uninit_mode_finds_the_bytes_packed_addressing_never_writes(uninit_run: dict[str, object]) -> None:
    result = uninit_run[IDS[0]]
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    [f] = [f for f in result.findings if f.detector == UNINIT]
    assert (f.kind, f.buffer, f.region, f.bytes) == (UNWRITTEN, "scale", "inside", 32)
    assert [(r.start, r.end) for r in f.ranges] == [(360, 392)]
    assert "token 4's scale bytes 40..71" in f.ranges[0].logical


def test_the_reverse_mismatch_skips_a_slice_of_every_row(uninit_run: dict[str, object]) -> None:
    result = uninit_run[IDS[2]]
    assert result.outcome is Outcome.EXPECTED_FINDING, result.message
    [f] = [f for f in result.findings if f.detector == UNINIT]
    # token t's 72 B written at t * 80 in rows 72 B apart: 8 B before each write (t = 1..4) are skipped
    assert [(r.start, r.end) for r in f.ranges] == [(72 * t + 8 * (t - 1), 72 * t + 8 * t) for t in range(1, 5)]


@pytest.mark.parametrize("index", [1, 3])
def test_the_fix_and_rows_without_padding_stay_clean(uninit_run: dict[str, object], index: int) -> None:
    result = uninit_run[IDS[index]]
    assert result.outcome is Outcome.CLEAN, result.message
    assert result.findings == []
