"""Every buffer covered by default (issue 20 item 1): which buffers get the mode's watch placement, how a scenario
or a run narrows that to the watched ones, and how the verdict and the judge follow each buffer's placement.

CPU only. The placement is checked on the buffer map the worker writes (each layout's placement); the end-to-end
tests run real worker processes under a fake compute-sanitizer that does what memcheck does with an access one
byte past a buffer: report it only when the byte lies outside the buffer's allocation.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

from gpu_memsafety import job as J
from gpu_memsafety.placement import layout as L
from gpu_memsafety.scenario.context import RunContext
from gpu_memsafety.placement.guard import Arena
from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, OVERWRITE, ByteRange, DetectorRun, Expectation, ExpectedFinding, Finding, Outcome
from gpu_memsafety.cover import COVER_ALL, COVER_OPTIONS, COVER_SCENARIO, COVER_WATCHED, covers, resolve_cover
from gpu_memsafety.detectors.modes import MODES
from gpu_memsafety.scenario.definition import Case, Param, Scenario, ScenarioError
from gpu_memsafety.judge.verdict import decide

from fake_sanitizer import memcheck as fake_memcheck_lookup

CPU = torch.device("cpu")


def context(watch_placement: str, cover: str = COVER_ALL) -> RunContext:
    return RunContext(CPU, Arena(CPU), watch_placement=watch_placement, cover=cover)


def allocate(ctx: RunContext) -> None:
    """What an adapter does: inputs unwatched, the output watched, a padded rows buffer unwatched."""
    ctx.tensor("x", (1000,), torch.float32)
    ctx.tensor("w", (24,), torch.uint8)
    ctx.rows("scale", rows=4, row_bytes=72, row_stride=80, used_rows=3)
    ctx.tensor("out", (1000,), torch.float32, watch=True)


# -------------------------------------------------------------------------------------------- the decision

def test_the_one_decision_every_buffer_under_all_only_watched_ones_under_watched() -> None:
    assert covers(COVER_ALL, watch=False) and covers(COVER_ALL, watch=True)
    assert covers(COVER_WATCHED, watch=True) and not covers(COVER_WATCHED, watch=False)
    with pytest.raises(ValueError, match="cover 'some' is not one of all, watched"):
        covers("some", watch=True)


def test_the_run_option_overrides_the_scenario_unless_it_defers_to_it() -> None:
    assert COVER_OPTIONS == (COVER_SCENARIO, COVER_ALL, COVER_WATCHED)
    assert resolve_cover(COVER_SCENARIO, COVER_WATCHED) == COVER_WATCHED
    assert resolve_cover(COVER_SCENARIO, COVER_ALL) == COVER_ALL
    assert resolve_cover(COVER_ALL, COVER_WATCHED) == COVER_ALL
    assert resolve_cover(COVER_WATCHED, COVER_ALL) == COVER_WATCHED
    with pytest.raises(ValueError, match="cover option 'everything' is not one of scenario, all, watched"):
        resolve_cover("everything", COVER_ALL)


def test_every_buffer_is_its_own_exact_allocation_in_memcheck_placement_by_default() -> None:
    ctx = context(MODES["memcheck"].placement(sanitized=True))
    allocate(ctx)
    placements = L.placements(ctx.arena.buffer_map())
    assert placements == {"x": L.EXACT, "w": L.EXACT, "scale": L.EXACT, "out": L.EXACT}
    assert all(b.layout.front == 0 and b.layout.back == 0 and b.layout.total == b.layout.nbytes
               for b in ctx.arena.buffers.values())
    assert ctx.covered == {"x", "w", "scale", "out"} and ctx.watched == {"out"}
    assert sorted(L.covered_buffers(ctx.arena.buffer_map())) == ["out", "scale", "w", "x"]


def test_narrowed_to_watched_only_the_watched_buffer_is_placed_for_memcheck() -> None:
    ctx = context(MODES["both"].placement(sanitized=True), cover=COVER_WATCHED)
    allocate(ctx)
    placements = L.placements(ctx.arena.buffer_map())
    assert placements == {"x": L.GUARDED, "w": L.GUARDED, "scale": L.GUARDED, "out": L.EXACT}
    # an unwatched buffer keeps its back guard inside its own allocation: memcheck cannot see past its end
    x = ctx.arena.buffers["x"].layout
    assert x.back == L.DEFAULT_GUARD and x.allocation_end > x.nbytes
    assert ctx.covered == {"out"}


def test_guard_page_mode_covers_every_buffer_too() -> None:
    ctx = context(MODES["guard_page"].placement(sanitized=False))
    allocate(ctx)
    assert set(L.placements(ctx.arena.buffer_map()).values()) == {L.GUARD_PAGE_BACK}


@pytest.mark.parametrize("mode", ["guard", "poison", "uninit", "racecheck", "synccheck"])
def test_modes_that_need_no_watched_buffer_cover_nothing(mode: str) -> None:
    ctx = context(MODES[mode].placement(sanitized=True))
    allocate(ctx)
    assert set(L.placements(ctx.arena.buffer_map()).values()) == {L.GUARDED} and not ctx.covered


def test_a_case_whose_scenario_uses_no_detector_that_needs_cover_keeps_its_guards() -> None:
    both, page = MODES["both"], MODES["guard_page"]
    assert both.case_placement(L.EXACT, (GUARD, MEMCHECK)) == L.EXACT
    assert both.case_placement(L.EXACT, (GUARD, "uninit")) == L.GUARDED
    assert page.case_placement(L.GUARD_PAGE_BACK, (GUARD, "guard_page")) == L.GUARD_PAGE_BACK
    assert page.case_placement(L.GUARD_PAGE_BACK, (GUARD, MEMCHECK)) == L.GUARDED


def test_a_sanitizer_mode_without_its_sanitizer_covers_nothing() -> None:
    ctx = context(MODES["both"].placement(sanitized=False))
    allocate(ctx)
    assert not ctx.covered


# --------------------------------------------------------------------------------------- scenario field

def fake_scenario(**extra: Any) -> Scenario:
    return Scenario(name="fake", summary="fake", adapter="x:y", params=(Param("n", int),), variants=("v",),
                    cases=lambda: [Case("fake", "v", {"n": 1}, "n1")], expect=lambda case: Expectation(),
                    kernel=lambda case: "k", needs_gpu=lambda case: False, **extra)


def test_scenario_cover_defaults_to_all_and_accepts_watched() -> None:
    assert fake_scenario().cover == COVER_ALL
    assert fake_scenario(cover=COVER_WATCHED).cover == COVER_WATCHED


@pytest.mark.parametrize("bad", ["scenario", "none", "", None, True])
def test_a_bad_scenario_cover_names_the_field(bad: Any) -> None:
    with pytest.raises(ScenarioError, match=r"scenario 'fake', field 'cover': .* is not one of 'all', 'watched'") as info:
        fake_scenario(cover=bad)
    assert info.value.field == "cover"


# --------------------------------------------------------------------------------- verdict per buffer

GUARD_RAN = [DetectorRun(GUARD, True, "markers verified")]
BOTH_RAN = GUARD_RAN + [DetectorRun(MEMCHECK, True, "compute-sanitizer")]
# A past_end write into an unwatched buffer's back guard: only the guard markers see it.
SCRATCH_WRITE = ExpectedFinding(OVERWRITE, "scratch", (GUARD,), region="past_end", bytes=4, ranges=((4000, 4004),))


def guard_write(buffer: str = "scratch") -> Finding:
    return Finding(GUARD, OVERWRITE, buffer, "past_end", 4, ranges=(ByteRange("past_end", 4000, 4004),), kernel="k")


def test_a_guard_only_past_end_write_on_a_still_guarded_buffer_is_judged_in_a_narrowed_run() -> None:
    """cover=watched in `both` mode: `out` is an exact allocation, `scratch` kept its back guard. The write into
    scratch's back guard is checked (seen: expected finding; not seen: unexpectedly clean), not waved away
    as 'no back guard' as the mode-wide placement used to."""
    narrowed = {"out": L.EXACT, "scratch": L.GUARDED}
    expected = Expectation((SCRATCH_WRITE,))
    assert decide(expected, [guard_write()], BOTH_RAN, placements=narrowed).outcome is Outcome.EXPECTED_FINDING
    assert decide(expected, [], BOTH_RAN, placements=narrowed).outcome is Outcome.UNEXPECTEDLY_CLEAN


def test_the_same_write_on_a_covered_buffer_is_not_applicable_naming_the_buffer_and_its_placement() -> None:
    covered = {"out": L.EXACT, "scratch": L.EXACT}
    v = decide(Expectation((SCRATCH_WRITE,)), [], BOTH_RAN, placements=covered)
    assert v.outcome is Outcome.UNSUPPORTED, v.message
    assert "scratch's placement (exact) has no back guard" in v.message, v.message
    before = ExpectedFinding(OVERWRITE, "scratch", (GUARD,), region="before_start", bytes=4, ranges=((-4, 0),))
    v = decide(Expectation((before,)), [], BOTH_RAN, placements=covered)
    assert v.outcome is Outcome.UNSUPPORTED and "scratch's placement (exact) has no front guard" in v.message, v.message
    assert decide(Expectation((before,)), [], BOTH_RAN, placements={"out": L.EXACT, "scratch": L.GUARDED}
                  ).outcome is Outcome.UNEXPECTEDLY_CLEAN


def test_a_buffer_the_map_does_not_name_takes_the_default_placement() -> None:
    expected = Expectation((SCRATCH_WRITE,))
    assert decide(expected, [], BOTH_RAN, placements={"out": L.FLUSH_END}).outcome is Outcome.UNEXPECTEDLY_CLEAN
    assert decide(expected, [], BOTH_RAN, placements={"out": L.GUARDED},
                  placement=L.FLUSH_END).outcome is Outcome.UNSUPPORTED


def test_a_memcheck_expectation_missed_on_an_uncovered_buffer_says_it_was_not_covered() -> None:
    read = ExpectedFinding(OVERREAD, "x", (MEMCHECK,), region="past_end", bytes=4, ranges=((4000, 4004),))
    v = decide(Expectation((read,)), [], BOTH_RAN, placements={"out": L.FLUSH_END, "x": L.GUARDED})
    assert v.outcome is Outcome.UNEXPECTEDLY_CLEAN
    assert "x was not covered" in v.message, v.message
    v = decide(Expectation((read,)), [], BOTH_RAN, placements={"out": L.FLUSH_END, "x": L.FLUSH_END})
    assert v.outcome is Outcome.UNEXPECTEDLY_CLEAN and "not covered" not in v.message


# ------------------------------------------------------------------------------------- worker results

def test_worker_result_says_what_it_covered_from_its_buffer_map() -> None:
    ctx = context(L.FLUSH_END, cover=COVER_WATCHED)
    allocate(ctx)
    res = J.WorkerResult(case_id="c", status=J.OK, buffers=ctx.arena.buffer_map(), watched=sorted(ctx.watched),
                         cover=ctx.cover)
    again = J.WorkerResult.from_json(json.loads(json.dumps(res.to_json())))
    assert again.cover == COVER_WATCHED and again.covered == ["out"]
    job = J.Job(cases=(), out_dir="/tmp/x", mode="memcheck", watch_placement=L.FLUSH_END, cover=COVER_WATCHED)
    assert J.Job.from_json(json.loads(json.dumps(job.to_json()))).cover == COVER_WATCHED
    assert J.Job.from_json({k: v for k, v in job.to_json().items() if k != "cover"}).cover == COVER_SCENARIO


# ------------------------------------------------------------- end to end: worker processes, fake memcheck

from repo_paths import FAKE_DIR  # noqa: E402


@pytest.fixture()
def fake_memcheck(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("PYTHONPATH", str(FAKE_DIR))
    yield lambda accesses: fake_memcheck_lookup(tmp_path, accesses)


def run_clean_case(tmp_path: Path, sanitizer: Any, cover: str, mode: str = "memcheck") -> Any:
    from gpu_memsafety.scenario import registry
    from gpu_memsafety.engine.runner import RunOptions, Runner
    scenario = registry.load_source(registry.Source(str(FAKE_DIR / "fake_scenarios" / "fake_faults.py"), None, "tests"))
    case = next(c for c in scenario.build() if c.id == "fake_faults[clean-n4000]")
    runner = Runner(RunOptions(mode=MODES[mode], workdir=tmp_path / f"runs-{cover}", gpu_available=True,
                               sanitizer=sanitizer, cover=cover, timeout_scale=0.2))
    [result] = runner.run([(scenario, case)])
    return result


@pytest.mark.e2e
def test_narrowing_really_narrows_memcheck_misses_a_read_past_an_unwatched_buffer(tmp_path: Path, fake_memcheck: Any) -> None:
    """fake_faults' clean case allocates src (watch=True) and dst (unwatched). The same read one byte past dst is
    outside dst's allocation when every buffer is covered (a finding), and inside its back guard when the run
    narrows cover to watched buffers (memcheck cannot see it: clean)."""
    sanitizer = fake_memcheck([("dst", 0, 1, "read")])
    seen = run_clean_case(tmp_path, sanitizer, COVER_SCENARIO)        # fake_faults does not narrow: all
    assert seen.outcome is Outcome.FINDING, seen.message
    assert [(f.detector, f.kind, f.buffer, f.region, f.bytes) for f in seen.findings] == [(MEMCHECK, OVERREAD, "dst", "past_end", 1)]
    assert seen.details["cover"] == {"cover": COVER_ALL, "covered": ["src", "dst"], "watched": ["src"]}
    missed = run_clean_case(tmp_path, sanitizer, COVER_WATCHED)
    assert missed.outcome is Outcome.CLEAN, missed.message
    assert missed.details["cover"] == {"cover": COVER_WATCHED, "covered": ["src"], "watched": ["src"]}


@pytest.mark.e2e
def test_the_watched_buffer_is_seen_either_way(tmp_path: Path, fake_memcheck: Any) -> None:
    sanitizer = fake_memcheck([("src", 0, 1, "read")])
    for cover in (COVER_ALL, COVER_WATCHED):
        result = run_clean_case(tmp_path, sanitizer, cover)
        assert result.outcome is Outcome.FINDING and result.findings[0].buffer == "src", (cover, result.message)


def test_a_failing_case_reruns_with_the_runs_cover() -> None:
    """The rerun command a failing case prints (and `repro --keep`'s rerun.sh) keeps a narrowed run narrowed."""
    from gpu_memsafety.scenario import registry
    from gpu_memsafety.cli.repro import rerun_argv, rerun_command
    scenario, case = registry.find_case("planted_oob[overread-triton-n4000-x1]")
    assert rerun_argv(scenario, case, "memcheck")[-2:] == ["--mode", "memcheck"]
    assert rerun_argv(scenario, case, "memcheck", cover=COVER_WATCHED)[-4:] == ["--mode", "memcheck", "--cover", "watched"]
    assert rerun_command(scenario, case, "both", COVER_ALL).endswith("--mode both --cover all")


@pytest.mark.e2e
def test_an_unknown_run_cover_is_refused_before_anything_runs(tmp_path: Path) -> None:
    from gpu_memsafety.engine.runner import RunOptions, Runner
    with pytest.raises(ValueError, match="cover 'most' is not one of scenario, all, watched"):
        Runner(RunOptions(mode=MODES["memcheck"], workdir=tmp_path, cover="most"))
