"""Uninit mode: reads of never-written memory and unwritten outputs, found by running a case with two fill
patterns in every byte the host did not write (harness/gpu_memsafety/detectors/fillcheck.py in the worker, harness/gpu_memsafety/detectors/uninit.py for the
findings). The worker runs here on the CPU: the planted Triton kernels under TRITON_INTERPRET=1, and torch
stand-ins (tests/helpers/fake_kernels/fake_uninit_adapters.py) for the cases the planted ones do not cover."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.placement import layout as L
from gpu_memsafety.scenario import registry
from gpu_memsafety.detectors import uninit
from gpu_memsafety.detectors.fillcheck import READ_REFINE_RUNS
from gpu_memsafety.model import GUARD, UNINIT, UNINIT_READ, UNWRITTEN, DetectorRun, Outcome
from gpu_memsafety.util.paths import CHECKOUT as ROOT
from gpu_memsafety.judge.verdict import decide
from repo_paths import FAKE_DIR

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

N_FAKE = 1000        # fake_uninit's n


def _buffer(name: str, nbytes: int, rows: L.Rows | None = None) -> dict[str, Any]:
    return {"name": name, "layout": L.plan(nbytes, rows=rows).to_json()}


# ------------------------------------------------------------------------------------------ pure findings

def test_unwritten_output_bytes_become_one_finding_per_region_class() -> None:
    rows = L.Rows(rows=4, row_bytes=8, row_stride=16, used_rows=3)
    report = {"fills": [0xA5, 0x5A], "unwritten": {"scale": [[16, 24], [32, 40]]}}
    (f,) = uninit.never_written_findings(report, [_buffer("scale", rows.nbytes, rows)], kernel="k", arch="cpu",
                           describe=lambda b, s, e: f"{b} bytes {s}..{e - 1}")
    assert (f.detector, f.kind, f.buffer, f.region, f.bytes, f.count) == (UNINIT, UNWRITTEN, "scale", "inside", 16, 2)
    assert [(r.start, r.end, r.logical) for r in f.ranges] == [(16, 24, "scale bytes 16..23"), (32, 40, "scale bytes 32..39")]
    assert "0xa5/0x5a" in f.note


def test_a_read_names_the_buffer_its_bytes_and_what_they_changed() -> None:
    report = {"fills": [0xA5, 0x5A], "read": {"x": {"ranges": [[8, 16]], "effects": {
        "out": {"bytes": 4, "ranges": [[0, 4]]}, "output:total": {"elements": 1, "of": 1}}}},
        "nondeterministic": {"y": 3}}
    (f,) = uninit.never_written_findings(report, [_buffer("x", 16), _buffer("out", 16)])
    assert (f.kind, f.buffer, f.bytes, [(r.start, r.end) for r in f.ranges]) == (UNINIT_READ, "x", 8, [(8, 16)])
    assert "out bytes 0..3 (4 B)" in f.note and "total: 1 of 1 elements" in f.note and "y: 3" in f.note


def test_a_read_whose_bytes_were_overwritten_is_still_a_finding() -> None:
    report = {"read": {"out": {"ranges": [], "effects": {"output:total": {"elements": 1, "of": 1}}}}}
    (f,) = uninit.never_written_findings(report, [_buffer("out", 16)])
    assert (f.kind, f.buffer, f.bytes, f.exact) == (UNINIT_READ, "out", 0, False)


def test_differences_no_buffer_explains_are_never_dropped() -> None:
    report = {"unexplained": {"out": {"bytes": 4, "ranges": [[0, 4]]}}}
    (f,) = uninit.never_written_findings(report, [_buffer("out", 16)])
    assert (f.kind, f.buffer) == (UNINIT_READ, uninit.UNKNOWN_BUFFER) and "out bytes 0..3" in f.note


def test_without_declared_outputs_the_detector_says_what_it_did_not_check() -> None:
    assert "not checked" in uninit.checked_outputs({"outputs": []})
    assert "outputs out" in uninit.checked_outputs({"outputs": ["out"], "runs": 2, "fills": [0xA5, 0x5A]})


# ----------------------------------------------------------------------------- the worker, on the CPU

def _run_worker(tmp: Path, scenario: Any, cases: list[Any]) -> list[dict[str, Any]]:
    job = {"cases": [registry.case_job(scenario, c) for c in cases], "out_dir": str(tmp), "mode": "uninit", "watch_placement": L.GUARDED,
           "seed": 0, "guard": L.DEFAULT_GUARD, "flush_backend": "torch", "iterations": 1}
    (tmp / "job.json").write_text(json.dumps(job))
    env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(FAKE_DIR)]))
    proc = subprocess.run([sys.executable, "-m", "gpu_memsafety.engine.worker", str(tmp / "job.json")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads((tmp / f"{i}.json").read_text()) for i in range(len(cases))]


def _judged(scenario: Any, case: Any, res: dict[str, Any]) -> tuple[Outcome, list[Any]]:
    assert res["status"] == "ok", res
    found = uninit.never_written_findings(res["evidence"]["uninit"], res["buffers"], kernel=res["kernel"], arch=res["arch"])
    verdict = decide(scenario.expect(case), found, [DetectorRun(UNINIT, True, "two fills")])
    return verdict.outcome, found


@pytest.fixture(scope="module")
def planted_triton(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from gpu_memsafety.scenarios.planted_uninit import SCENARIO
    cases = [c for c in SCENARIO.build() if c.params["impl"] == "triton"]
    results = _run_worker(tmp_path_factory.mktemp("planted-uninit"), SCENARIO, cases)
    return {c.variant: (SCENARIO, c, r) for c, r in zip(cases, results)}


def test_accumulating_into_an_output_nobody_wrote_is_a_read_of_all_of_it(planted_triton: dict[str, Any]) -> None:
    outcome, found = _judged(*planted_triton["accumulate_empty"])
    assert outcome is Outcome.EXPECTED_FINDING
    (f,) = found
    assert (f.kind, f.buffer, f.region, f.bytes) == (UNINIT_READ, "out", "inside", 16000)
    assert f.exact, f.note                                  # the search confirmed all of out, edge to edge
    # A, B, A again, one per buffer (x, out); then the search for the bytes of out read (fillcheck._read_bytes)
    assert 5 < planted_triton["accumulate_empty"][2]["evidence"]["uninit"]["runs"] <= 5 + READ_REFINE_RUNS


def test_a_grid_one_block_short_leaves_the_last_block_unwritten(planted_triton: dict[str, Any]) -> None:
    outcome, found = _judged(*planted_triton["grid_short"])
    assert outcome is Outcome.EXPECTED_FINDING
    (f,) = found
    assert (f.kind, f.buffer, [(r.start, r.end) for r in f.ranges]) == (UNWRITTEN, "out", [(3 * 1024 * 4, 16000)])


@pytest.mark.parametrize("variant", ["accumulate_zeroed", "grid_full"])
def test_fixed_twins_are_clean_in_six_runs(planted_triton: dict[str, Any], variant: str) -> None:
    outcome, found = _judged(*planted_triton[variant])
    assert outcome is Outcome.CLEAN and not found
    report = planted_triton[variant][2]["evidence"]["uninit"]
    assert report["runs"] == 6 and report["extra_fills"] == [0x00, 0xFA, 0xFF]   # A, B, three extra fills, scrambled
    assert report["scrambled_markers"] == {}


@pytest.fixture(scope="module")
def fake_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    scenario = registry.load_source(registry.Source(str(FAKE_DIR / "fake_scenarios" / "fake_uninit.py")))
    cases = scenario.build()
    results = _run_worker(tmp_path_factory.mktemp("fake-uninit"), scenario, cases)
    return {c.variant: (scenario, c, r) for c, r in zip(cases, results)}


def test_an_input_the_host_wrote_half_of_names_the_unwritten_half(fake_results: dict[str, Any]) -> None:
    outcome, found = _judged(*fake_results["input_half_written"])
    assert outcome is Outcome.EXPECTED_FINDING, found
    (f,) = found
    assert (f.buffer, [(r.start, r.end) for r in f.ranges]) == ("x", [(2000, 4000)])
    assert "out bytes 2000..3999 (2000 B)" in f.note


def test_bytes_read_before_a_later_write_are_named_not_the_never_written_ones_nobody_read(
        fake_results: dict[str, Any]) -> None:
    """Held-out hs_f: decode attention ran before the launch that writes the current token's K/V slots, so it read
    them unwritten; the cache's tail stays never written but is never read. Named before: the tail (exact!), not
    the slots. Now the slots, found by filling parts of x, as a bound that here is exactly them."""
    outcome, found = _judged(*fake_results["read_then_written"])
    assert outcome is Outcome.EXPECTED_FINDING, found
    (f,) = found
    assert f.buffer == "x" and [(r.start, r.end) for r in f.ranges] == [(100 * 4, 108 * 4), (300 * 4, 308 * 4),
                                                                         (620 * 4, 628 * 4), (900 * 4, 908 * 4)]
    assert not f.exact and "read before a later write" in f.note and "a bound" in f.note


def test_never_written_bytes_the_kernel_did_not_read_are_not_named(fake_results: dict[str, Any]) -> None:
    """The host wrote half of x and the kernel read 100 elements of the other half: those 400 B, not the 2,000 B
    that were never written (named before, exact)."""
    outcome, found = _judged(*fake_results["input_partly_read"])
    assert outcome is Outcome.EXPECTED_FINDING, found
    (f,) = found
    assert [(r.start, r.end) for r in f.ranges] == [(2000, 2400)] and not f.exact


def test_bytes_copied_from_another_buffers_guard_are_seen(fake_results: dict[str, Any]) -> None:
    """Held-out ht_a: a mask-less copy past the end carries the source's guard bytes (the marker) into the
    destination's guard. The complementary-marker run gives 0x5A only to the buffers whose markers changed, so the
    copied 0xA5 bytes differ there too: 20 B, not the 4 whose value differed from the marker."""
    scenario, case, res = fake_results["guard_copy_overrun"]
    from gpu_memsafety.sanitizer.attribute import guard_findings
    [f] = guard_findings(res["evidence"][GUARD], kernel=res["kernel"], arch=res["arch"], buffers=res["buffers"])
    assert (f.buffer, f.region, f.bytes, f.exact) == ("out", "past_end", 20, True)
    assert decide(scenario.expect(case), [f], [DetectorRun(GUARD, True, "markers")]).outcome is Outcome.EXPECTED_FINDING
    assert res["evidence"][GUARD]["x"] == []                      # the source's own guard was only read


def test_a_read_seen_only_in_an_output_outside_the_arena(fake_results: dict[str, Any]) -> None:
    outcome, found = _judged(*fake_results["external_output"])
    assert outcome is Outcome.EXPECTED_FINDING, found
    assert "total: 1 of 1 elements" in found[0].note


def test_run_to_run_noise_is_set_aside_not_reported(fake_results: dict[str, Any]) -> None:
    outcome, found = _judged(*fake_results["nondeterministic"])
    report = fake_results["nondeterministic"][2]["evidence"]["uninit"]
    assert outcome is Outcome.CLEAN and not found
    assert report["nondeterministic"] == {"out": 4000} and report["runs"] == 4


@pytest.mark.parametrize("attempt", range(3))
def test_float_noise_in_other_elements_every_run_is_not_a_read(fake_results: dict[str, Any], attempt: int,
                                                               tmp_path: Path) -> None:
    """A split-k sum whose atomics round differently in other elements on every run (held-out on the H200: a
    correct atomic reduction was reported as reading never-written bytes of its input and output). The
    differences between the two fills stay within the run-to-run noise scale: clean."""
    scenario, case, _ = fake_results["sparse_noise"]
    result = _run_worker(tmp_path, scenario, [case])[0] if attempt else fake_results["sparse_noise"][2]
    outcome, found = _judged(scenario, case, result)
    assert outcome is Outcome.CLEAN and not found, found
    assert 0 < result["evidence"]["uninit"]["noise_scale"]["out"] <= 1.2e-6     # 1 + 1e-6 in fp32: one rounding step


def test_accumulating_into_never_written_output_is_found_through_float_noise(fake_results: dict[str, Any]) -> None:
    outcome, found = _judged(*fake_results["sparse_noise_accumulate"])
    assert outcome is Outcome.EXPECTED_FINDING, found
    (f,) = found
    assert (f.kind, f.buffer) == ("uninit_read", "out") and f.bytes == 4000


def test_a_clean_stand_in_is_clean(fake_results: dict[str, Any]) -> None:
    assert _judged(*fake_results["clean"])[0] is Outcome.CLEAN


def test_the_runner_in_uninit_mode_finds_both_planted_bugs_on_the_cpu(tmp_path: Path) -> None:
    """End to end through the engine: the uninit row of the mode table, the runner (TRITON_INTERPRET=1 on a
    machine without a GPU), the worker's fill runs and the judge. The CUDA twins need a GPU: not run here."""
    from gpu_memsafety.detectors.modes import MODES
    from gpu_memsafety.engine.runner import RunOptions, Runner
    from gpu_memsafety.scenarios.planted_uninit import SCENARIO
    runner = Runner(RunOptions(mode=MODES["uninit"], workdir=tmp_path, gpu_available=False))
    results = {r.variant + "-" + r.params["impl"]: r for r in runner.run([(SCENARIO, c) for c in SCENARIO.build()])}
    assert results["accumulate_empty-triton"].outcome is Outcome.EXPECTED_FINDING, results["accumulate_empty-triton"].message
    assert results["grid_short-triton"].outcome is Outcome.EXPECTED_FINDING, results["grid_short-triton"].message
    assert results["accumulate_zeroed-triton"].outcome is Outcome.CLEAN
    assert results["grid_full-triton"].outcome is Outcome.CLEAN
    detector = next(d for d in results["grid_full-triton"].detectors if d.detector == UNINIT)
    assert detector.ran and "outputs out" in detector.detail
    assert all(not results[f"{v}-cuda"].outcome.is_failure for v in ("accumulate_empty", "grid_short"))


def test_output_bytes_copied_from_a_half_written_table_name_the_table_not_an_unwritten_output(
        fake_results: dict[str, Any]) -> None:
    """A CPU held-out case (session 8): a lookup into a table the host filled in part wrote the table's fill into
    out, which read as out's bytes left unwritten. One more run, with only out's fill changed, tells them apart:
    the bytes came from x, and x's never-written half is what was read."""
    outcome, found = _judged(*fake_results["lut_partly_written"])
    assert outcome is Outcome.EXPECTED_FINDING, found
    report = fake_results["lut_partly_written"][2]["evidence"]["uninit"]
    assert report["unwritten"] == {} and report["copied"] == {"out": [[0, 2000]]}
    (f,) = found
    assert (f.kind, f.buffer, [(r.start, r.end) for r in f.ranges]) == (UNINIT_READ, "x", [(2000, 4000)])


def test_output_bytes_never_written_stay_unwritten_after_the_extra_run(fake_results: dict[str, Any]) -> None:
    outcome, found = _judged(*fake_results["tail_unwritten"])
    assert outcome is Outcome.EXPECTED_FINDING, found
    report = fake_results["tail_unwritten"][2]["evidence"]["uninit"]
    assert report["unwritten"] == {"out": [[2000, 4000]]} and "copied" not in report and report["runs"] == 7


def test_bytes_written_with_the_markers_own_value_are_seen_by_a_run_with_the_complementary_marker(
        fake_results: dict[str, Any]) -> None:
    """Held-out hr_a (session 9): bf16 values 0xA5A5 stored past the end; the marker check saw 4 of the 16 bytes and
    called the count exact. One more run with scrambled markers (never 0xA5) sees the rest."""
    from gpu_memsafety.sanitizer.attribute import guard_findings
    scenario, case, res = fake_results["marker_valued_overrun"]
    [f] = guard_findings(res["evidence"][GUARD], kernel=res["kernel"], arch=res["arch"], buffers=res["buffers"])
    assert (f.buffer, f.region, f.bytes, f.exact) == ("out", "past_end", 16, True)
    assert [(r.start, r.end) for r in f.ranges] == [(4000, 4016)]
    assert decide(scenario.expect(case), [f], [DetectorRun(GUARD, True, "markers")]).outcome is Outcome.EXPECTED_FINDING
    report = fake_results["marker_valued_overrun"][2]["evidence"]["uninit"]
    assert report["runs"] == 7 and report["scrambled_markers"] == {"out": 16}   # A, B, 3 extra fills, 2 scrambled
    clean = fake_results["clean"][2]["evidence"]["uninit"]
    assert clean["runs"] == 6 and clean["scrambled_markers"] == {}              # one run per case, whatever A saw


@pytest.mark.parametrize("variant, fill, buffer", [("flags_unwritten", 0x00, "flags"), ("min_unreset", 0xFA, "running"),
                                                    ("times_zero", 0xFF, "out")])
def test_a_read_the_two_fills_agree_on_is_found_by_an_extra_fill(fake_results: dict[str, Any], variant: str,
                                                                 fill: int, buffer: str) -> None:
    """Held-out round 8: presence flags the host wrote only for live requests (hv_e: 0xA5 and 0x5A both read true),
    a running min never reset (hv_h: both above every log-prob); round 9: a never-written output multiplied by 0
    (hw_f: only NaN survives). Runs A and B agree; an extra fill does not."""
    scenario, case, res = fake_results[variant]
    outcome, found = _judged(scenario, case, res)
    assert outcome is Outcome.EXPECTED_FINDING, found
    report = res["evidence"]["uninit"]
    assert report["fills"] == [0xA5, 0x5A] and report["read_fill"] == fill and report["extra_fills"][-1] == fill
    assert [(f.buffer, f.kind) for f in found] == [(buffer, UNINIT_READ)]
    assert f"seen with fill {fill:#04x}" in found[0].note
    if variant == "flags_unwritten":
        [f] = found
        assert (f.bytes, [(r.start, r.end) for r in f.ranges]) == (N_FAKE - N_FAKE // 2, [(N_FAKE // 2, N_FAKE)])
