"""Headlines count what ran as ran, and every message of issue 42 says what happened and what to do next.

- a CPU run of mode both: the cases the guard markers (and the trace) checked while memcheck could not run are
  counted as ran (partial), not as "not run" (`make sanitize-quick` on a CPU said "2 ran, 389 not run");
- a collection error stops the run: the reports say so, never "interrupted (Ctrl-C)";
- an unknown scenario names the ways to add one (`--scenario-path`, `--gpu-memsafety-scenario-path`);
- `repro` of a case that could not run here exits non-zero;
- `new` suggests a command that works where it was run (no `make sanitize` without the Makefile);
- `list` prints the user's own scenarios before the bundled ones.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_memsafety.cli.repro import NOT_CHECKED
from gpu_memsafety.scenario import registry
from gpu_memsafety.util.paths import CHECKOUT as ROOT

from tests.scenario.test_own_scenarios import write_scenario

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith("PYTEST") and k not in ("PYTHONPATH", registry.ENV_VAR)}   # CUDA_VISIBLE_DEVICES stays: conftest.py


def run(args: list[str], cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=str(cwd), env=env(), capture_output=True, text=True,
                          timeout=timeout)


def test_a_cpu_run_of_mode_both_counts_the_cases_the_markers_checked_as_ran(tmp_path: Path) -> None:
    proc = run(["-m", "pytest", "scenarios", "-p", "no:cacheprovider", "-q", "--gpu-memsafety-mode", "both",
                "--gpu-memsafety-scenario", "planted_oob", "--gpu-memsafety-report-dir", str(tmp_path)])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "report.json").read_text())
    checked = [c for c in doc["cases"] if any(d["ran"] for d in c["detectors"])]
    assert len(checked) >= 6, [c["outcome"] for c in doc["cases"]]
    assert doc["summary"]["ran"] == len(checked)
    headline = (tmp_path / "summary.md").read_text().splitlines()[0]
    assert f"passed, partial: {len(checked)} ran" in headline, headline
    assert f"memcheck did not run on {len(checked)}" in headline, headline
    for case in checked:
        assert case["outcome"] in ("clean", "expected finding"), case["id"]
        assert "memcheck" in case["details"]["partial"]


def test_a_collection_error_is_not_reported_as_ctrl_c(tmp_path: Path) -> None:
    broken = tmp_path / "test_broken.py"
    broken.write_text("import no_such_module_anywhere\n")
    proc = run(["-m", "pytest", str(ROOT / "scenarios" / "planted_oob.py"), str(broken), "-p", "no:cacheprovider",
                "-q", "--gpu-memsafety-mode", "guard", "--gpu-memsafety-report-dir", str(tmp_path / "r")])
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    why = doc["run"]["interrupted"]
    assert "Ctrl-C" not in why and why.startswith("stopped: 1 error during collection"), why
    assert "--continue-on-collection-errors" in why
    assert "Ctrl-C" not in (tmp_path / "r" / "summary.md").read_text()


def test_an_unknown_scenario_says_how_to_add_ones_own() -> None:
    proc = run(["-m", "gpu_memsafety", "repro", "no_such_scenario[a-n1]"], timeout=120)
    assert proc.returncode == 2 and "no such scenario" in proc.stderr, proc.stderr
    assert "--scenario-path DIR" in proc.stderr and "--gpu-memsafety-scenario-path DIR" in proc.stderr
    listed = run(["-m", "gpu_memsafety", "list", "--scenario", "no_such_scenario"], timeout=120)
    assert listed.returncode == 2 and "--scenario-path DIR" in listed.stderr, listed.stderr
    collected = run(["-m", "pytest", "scenarios", "-p", "no:cacheprovider", "--co", "-q",
                     "--gpu-memsafety-scenario", "no_such_scenario"], timeout=120)
    assert collected.returncode == 4 and "--gpu-memsafety-scenario-path DIR" in collected.stderr, collected.stderr


def test_repro_exits_non_zero_when_its_case_could_not_run(tmp_path: Path) -> None:
    proc = run(["-m", "gpu_memsafety", "repro", "planted_oob[overwrite-triton-n4000-x1]", "--mode", "memcheck"],
               cwd=tmp_path, timeout=180)
    assert proc.returncode == NOT_CHECKED, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "nothing was checked" in proc.stderr and "memcheck: unsupported" in proc.stderr
    checked = run(["-m", "gpu_memsafety", "repro", "planted_oob[clean-triton-n4000-x1]", "--mode", "guard"],
                  cwd=tmp_path, timeout=180)
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]


def test_new_suggests_a_command_that_works_where_it_was_run(tmp_path: Path) -> None:
    proc = run(["-m", "gpu_memsafety", "new", "my_first", "--path", str(tmp_path / "mine")], cwd=tmp_path,
               timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "make sanitize" not in proc.stdout, proc.stdout
    assert "python -m pytest --gpu-memsafety-scenario-path" in proc.stdout and "--gpu-memsafety-scenario my_first" \
        in proc.stdout
    assert "make sanitize" not in (tmp_path / "mine" / "my_first.py").read_text()
    here = run(["-m", "gpu_memsafety", "new", "my_second", "--path", str(tmp_path / "second")], timeout=120)
    assert here.returncode == 0 and "make sanitize MODE=guard" in here.stdout, here.stdout + here.stderr


def test_list_prints_the_users_own_scenarios_first(tmp_path: Path) -> None:
    write_scenario(tmp_path / "mine", "zz_mine", count=1)
    proc = run(["-m", "gpu_memsafety", "list", "--scenario-path", str(tmp_path / "mine"), "--ids"], cwd=tmp_path,
               timeout=120)
    assert proc.returncode == 0, proc.stderr
    ids = proc.stdout.split()
    assert ids[:2] == ["zz_mine[a-n1]", "zz_mine[b-n1]"] and len(ids) > 2, ids[:5]
