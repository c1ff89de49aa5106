"""gpu_memsafety.cli.bench on CPU: the JSON and Markdown it writes, targets never passed without a measurement,
a measuring child that dies is restarted after the case that killed it, and bad options are refused.

The numbers themselves only mean something on the GPU (results/h200/); here they must exist.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.cli.bench import parts as bench_parts, results as bench_results
from gpu_memsafety.scenario.registry import all_scenarios
from gpu_memsafety.util.paths import CHECKOUT as ROOT
from repo_paths import FAKE_DIR

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

FAKE_SCENARIOS = FAKE_DIR / "fake_scenarios"        # a scenario path; FAKE_DIR on PYTHONPATH for the adapter module
PLANTED_CLEAN = "planted_oob[clean-triton-n4000-x1]"


def run_bench(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(FAKE_DIR)]), CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, "-m", "gpu_memsafety", "--scenario-path", str(FAKE_SCENARIOS), "bench", "--out", str(out),
                           *args], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def cpu_bench(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench")
    proc = run_bench(out, "--parts", "bandwidth,cases", "--sizes-mib", "1", "--reps", "2",
                     "--case", "fake_faults[kill-n4000]", "--case", PLANTED_CLEAN, "--case", "fake_faults[clean-n4000]")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"doc": json.loads((out / "bench.json").read_text()), "md": (out / "bench.md").read_text(), "out": out,
            "stdout": proc.stdout, "stderr": proc.stderr}


def rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["case_id"]: r for r in doc["parts"]["cases"]["cases"]}


def test_child_killed_by_a_case_is_recorded_and_the_next_case_is_measured(cpu_bench: dict[str, Any]) -> None:
    r = rows(cpu_bench["doc"])
    assert r["fake_faults[kill-n4000]"]["status"] == "crashed"
    assert "exited with code -9" in r["fake_faults[kill-n4000]"]["message"]
    planted = r[PLANTED_CLEAN]
    assert planted["status"] == "ok"
    assert planted["bare"]["median_ms"] > 0 and planted["guard_launch"]["median_ms"] > 0
    assert planted["guard_changed_words"] == 0
    assert planted["poison"]["launches"] == 3            # baseline + src + dst
    assert set(planted["ratios"]) >= {"guard_kernel", "guard_launch", "poison"}


def test_progress_goes_to_stderr_as_plain_lines_when_not_a_terminal(cpu_bench: dict[str, Any]) -> None:
    err = cpu_bench["stderr"].splitlines()
    assert "bench inproc: started (3 cases)" in err
    assert any(line.startswith("bench inproc: 3 of 3 cases (100%)") and line.endswith("done") for line in err), err
    assert "bench inproc" not in cpu_bench["stdout"]


def test_adapter_without_a_relaunch_hook_is_an_error_that_says_so(cpu_bench: dict[str, Any]) -> None:
    r = rows(cpu_bench["doc"])["fake_faults[clean-n4000]"]
    assert r["status"] == "error" and "no relaunch hook" in r["message"]


def test_gpu_only_modes_say_they_did_not_run_and_why(cpu_bench: dict[str, Any]) -> None:
    planted = rows(cpu_bench["doc"])[PLANTED_CLEAN]
    for mode in ("guard_page", "memcheck"):
        assert planted[mode]["status"] == "not run" and "needs a CUDA GPU" in planted[mode]["message"]


def test_bandwidth_part_measures_copy_and_verify_on_the_same_size(cpu_bench: dict[str, Any]) -> None:
    (size,) = cpu_bench["doc"]["parts"]["bandwidth"]["sizes"]
    assert size["size_mib"] == 1 and size["copy_GBps"] > 0 and size["verify_all_markers_GBps"] > 0
    assert size["verify_vs_copy"] == pytest.approx(size["verify_all_markers_GBps"] / size["copy_GBps"])
    assert size["check_vs_copy"] == pytest.approx(size["check_all_markers_GBps"] / size["copy_GBps"])


def test_unmeasured_targets_are_not_measured_never_met(cpu_bench: dict[str, Any]) -> None:
    targets = cpu_bench["doc"]["targets"]
    assert all(t["status"] in ("not measured", "met", "missed") for t in targets)
    not_measured = [t for t in targets if t["status"] == "not measured"]
    # no gpt-oss case (GPU time, elapsed; each also with the CUDA-graph check), no buffer of 64 MiB (1 MiB only;
    # plain and graph), no batching, no scaling, no guard page on CPU
    assert len(not_measured) == 9 and all(t["why"] for t in not_measured)
    assert "| not measured:" in cpu_bench["md"]


def test_markdown_has_a_row_per_case(cpu_bench: dict[str, Any]) -> None:
    for cid in ("fake_faults[kill-n4000]", PLANTED_CLEAN, "fake_faults[clean-n4000]"):
        assert f"| {cid} |" in cpu_bench["md"]


@pytest.mark.parametrize("args,needle", [
    (["--parts", "bandwidth,nope"], "unknown nope"),
    (["--sizes-mib", "64,x"], "--sizes-mib"),
    (["--reps", "0"], "--reps"),
    (["--case", "planted_oob[nope]"], "no case with id"),
])
def test_bad_options_are_refused_with_the_option_named(tmp_path: Path, args: list[str], needle: str) -> None:
    proc = run_bench(tmp_path, *args)
    assert proc.returncode == 2 and needle in proc.stderr
    assert not (tmp_path / "bench.json").exists()


def _parts(guard: float | None = None, verify: float | None = None, speedup: float | None = None,
           page: float | None = None, scaling: float | None = None) -> dict[str, Any]:
    ratios: dict[str, float] = {}
    if guard is not None:
        for key in ("guard_launch", "guard_launch_gpu", "guard_launch_graph", "guard_launch_graph_gpu"):
            ratios[key] = guard
    if page is not None:
        ratios["guard_page"] = page
    return {"cases": {"cases": [{"case_id": "x", "tags": ["gpt-oss"], "ratios": ratios}]},
            "bandwidth": {"sizes": [] if verify is None else [
                {"size_mib": 64, "check_vs_copy": verify, "check_graph_vs_copy": verify},
                {"size_mib": 1, "check_vs_copy": 0.01, "check_graph_vs_copy": 0.01}]},
            "batching": {} if speedup is None else {"speedup": speedup},
            "scaling": {} if scaling is None else {"gpus": 2, "speedup": scaling, "same_outcomes": True}}


@pytest.mark.parametrize("values,expected", [
    ((1.04, 0.6, 3.5, 1.1, 1.9), ["met"] * 9),
    ((1.06, 0.4, 2.9, 1.3, 1.7), ["missed"] * 9),
    ((None, None, None, None, None), ["not measured"] * 9),
])
def test_targets_follow_the_issue_thresholds(values: tuple[Any, ...], expected: list[str]) -> None:
    assert [t["status"] for t in bench_results.evaluate_targets(_parts(*values))] == expected


def test_scaling_with_different_outcomes_is_not_a_measured_speedup() -> None:
    parts = {"scaling": {"gpus": 2, "speedup": 2.0, "same_outcomes": False}}
    [target] = [t for t in bench_results.evaluate_targets(parts) if t["target"].startswith("default matrix on all GPUs")]
    assert target["status"] == "not measured" and "different outcomes" in target["why"]


def test_small_buffers_do_not_count_for_the_bandwidth_target() -> None:
    [verify] = [t for t in bench_results.evaluate_targets(_parts(verify=0.6)) if t["target"].startswith("guard verification")]
    assert verify["measured"] == 0.6        # the 1 MiB row's 0.01 is below the 64 MiB floor and ignored


def test_sample_spreads_over_every_scenario_and_skips_isolated_cases() -> None:
    items = bench_parts.matrix_cases(all_scenarios())
    sample = bench_parts.spread_sample(items, 12)
    assert 3 <= len(sample) <= max(12, len({s.name for s, _ in items}))     # one per scenario at least
    assert {s.name for s, _ in sample} == {s.name for s, _ in items}
    assert not any(s.isolated(c) for s, c in sample)
    assert len({c.id for _, c in sample}) == len(sample)


def test_a_child_past_its_time_limit_is_killed_and_its_case_recorded(tmp_path: Path) -> None:
    """A hanging case: the child is killed at --child-timeout, that case is `crashed`, the next one is measured.
    The limit covers a whole child, its start-up included (Python, torch, the interpreter): 60 s leaves room for
    a start-up slowed by a loaded machine, so the hang is always reached and the next child always finishes
    its case (the hang costs the test those 60 s, idle)."""
    LIMIT = 60   # noqa: N806
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    env_extra = {"FAKE_FAULTS_DIR": str(pid_dir)}
    try:
        proc = subprocess.run([sys.executable, "-m", "gpu_memsafety", "--scenario-path", str(FAKE_SCENARIOS), "bench",
                               "--out", str(tmp_path / "b"), "--parts", "cases",
                               "--reps", "2", "--child-timeout", str(LIMIT), "--case", "fake_faults[hang-n4000]", "--case", PLANTED_CLEAN],
                              cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(FAKE_DIR)]),
                                                      CUDA_VISIBLE_DEVICES="", **env_extra),
                              capture_output=True, text=True, timeout=300)
    finally:
        sleeper = pid_dir / "sleeper.pid"                   # the hanging adapter's own child, orphaned by the kill
        if sleeper.exists():
            try:
                os.kill(int(sleeper.read_text()), 9)
            except ProcessLookupError:
                pass
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    r = rows(json.loads((tmp_path / "b" / "bench.json").read_text()))
    assert r["fake_faults[hang-n4000]"]["status"] == "crashed"
    assert f"killed after {LIMIT} s" in r["fake_faults[hang-n4000]"]["message"]
    assert r[PLANTED_CLEAN]["status"] == "ok"


def test_cache_part_counts_its_cases_on_stderr(tmp_path: Path) -> None:
    proc = run_bench(tmp_path, "--parts", "cache")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("bench cache: cold and warm start: ")]
    n = len(json.loads((tmp_path / "bench.json").read_text())["parts"]["cache"]["cases"])
    assert n >= 1 and lines[0].endswith(f"started ({n} cases)"), lines
    assert lines[-1].split(": ")[-1].startswith(f"{n} of {n} cases (100%)") and lines[-1].endswith("done"), lines


def test_measuring_child_runs_on_the_engine_worker(cpu_bench: dict[str, Any]) -> None:
    # The child's contexts are the worker's: each case's buffer map is on disk under its number, as the
    # engine writes it before a launch (a second engine beside the worker would write none).
    work = cpu_bench["out"] / "work" / "inproc"
    names = {b["name"] for b in json.loads((work / "1.buffers.json").read_text())["buffers"]}
    assert {"src", "dst"} <= names
    assert (work / "1.started").exists()


def _private_uses(tree: Any) -> list[str]:
    """Private names bench takes from another module: imported from one, or an attribute of anything but self."""
    import ast
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpu_memsafety"):
            found += [f"from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", "os")):   # os._exit
                found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_bench_uses_only_public_names_of_the_worker_and_the_arena() -> None:
    import ast

    from gpu_memsafety.engine import worker
    files = sorted((ROOT / "harness" / "gpu_memsafety" / "cli" / "bench").glob("*.py"))
    assert len(files) > 3
    for file in files:
        tree = ast.parse(file.read_text())
        assert _private_uses(tree) == [], file.name
        # and no copy of the worker's exit code for a lost context: bench takes worker.CONTEXT_LOST
        copies = [t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) for t in node.targets
                  if isinstance(t, ast.Name) and isinstance(node.value, ast.Constant)
                  and node.value.value == worker.CONTEXT_LOST]
        assert copies == [], file.name
    # the check itself sees what it forbids
    bad = ast.parse("from gpu_memsafety.engine.worker import _context_lost\ndef f(a):\n    a._allocate('x', None)\n")
    assert _private_uses(bad) == ["from gpu_memsafety.engine.worker import _context_lost", "line 3: ._allocate"]
