"""`gpu-memsafety simulate`: a measured run's wall time predicted for N GPUs from its own costs (cli/simulate.py)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from gpu_memsafety.cli import simulate
from gpu_memsafety.engine import schedule
from report_samples import unpacked

RUN18 = unpacked("run18-package-matrix-matrix")     # run 18's whole-matrix report on the H200 (tests/data/reports)


def _doc(n: int, seconds: float, restarts: int = 0) -> dict:
    processes = [{"startup_s": 2.0}] * (1 + restarts)
    return {"run": {"workers": 1, "batches": [{"name": "s.b001", "cases": n, "processes": processes,
                                                "gpu": {"uuid": "GPU-0"}}]},
            "cases": [{"id": f"s[v-{i}]", "scenario": "s", "outcome": "clean", "duration_s": seconds} for i in range(n)]}


def test_costs_come_from_the_report_restarts_included() -> None:
    costs = simulate.costs_of(_doc(4, 10.0, restarts=2))
    assert costs.per_process == 2.0 and costs.restarts == {"s": 0.5} and costs.stage_processes == {"s": 1}
    assert [j.cost for j in costs.jobs] == [11.0] * 4          # 10 s + half a restart of 2 s each


def test_a_staged_batch_pays_a_process_per_stage_and_a_process_its_exit() -> None:
    """Mode complete: each batch starts a sanitized and an unsanitized process. Those are not restarts (run 27's
    values processes used to count as such); a batch of the scenario pays both, and a process costs its start-up
    and its exit."""
    doc = _doc(4, 10.0)
    doc["run"]["batches"][0]["processes"] = [{"startup_s": 2.0, "exit_s": 0.5, "stage": "both"},
                                             {"startup_s": 2.0, "exit_s": 0.5, "stage": "values"},
                                             {"startup_s": 2.0, "exit_s": 0.5, "stage": "both"}]
    costs = simulate.costs_of(doc)
    assert costs.per_process == 2.5 and costs.stage_processes == {"s": 2} and costs.restarts == {"s": 0.25}
    assert costs.group_startup == {"s": 5.0}
    [batch] = schedule.plan(costs.jobs, 1, 32, costs.per_process, costs.group_startup)
    assert batch.cost == 5.0 + 4 * (10.0 + 0.25 * 2.5)


def test_more_gpus_never_slower_and_never_beyond_linear_or_the_longest_batch() -> None:
    costs = simulate.costs_of(_doc(64, 3.0))
    one = simulate.predict(costs, 1, 1)
    for n in (2, 4, 8):
        p = simulate.predict(costs, n, 1)
        assert one.wall_s / n - 1e-9 <= p.wall_s <= one.wall_s
        assert p.wall_s >= p.longest_batch_s


@pytest.mark.e2e
def test_the_command_on_a_committed_h200_report(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "gpu_memsafety", "simulate", str(RUN18), "--gpus", "1,2,4"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [l for l in proc.stdout.splitlines() if " GPU(s), " in l]
    assert [l.split(" GPU(s)")[0] for l in lines] == ["1", "2", "4"]
    bad = subprocess.run([sys.executable, "-m", "gpu_memsafety", "simulate", str(tmp_path / "none.json")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "error:" in bad.stderr
