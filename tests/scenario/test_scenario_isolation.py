"""Scenario code is untrusted (issue 27, item 2): what a scenario file does at import, or an adapter does in a
case, is caught and named, and nothing it starts outlives its case.

The review: an import that never returns hung the run with no output; `sys.exit(0)` at import made `list` and
`repro` exit 0 with nothing done; `os.chdir` at import sent a relative report directory elsewhere; a changed
environment killed the xdist workers; processes started by an adapter or at import outlived the run. Each
attack here is a scenario file written for the test (or tests/helpers/fake_kernels/hostile_scenarios/); every process
they start carries a marker, and none may be alive afterwards."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
from gpu_memsafety.scenario import registry, vetting
from gpu_memsafety.util import procs
from repo_paths import FAKE_DIR, ROOT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

HOSTILE_DIR = FAKE_DIR / "hostile_scenarios"

TEMPLATE = '''
from gpu_memsafety.model import Expectation
from gpu_memsafety.scenario.definition import Case, Param, Scenario
{attack}
SCENARIO = Scenario(name="{name}", summary="hostile at import (tests only)", adapter="fake_adapters:run_case",
                    params=(Param("n", int, low=1, high=1 << 20),), variants=("clean",),
                    cases=lambda: [Case("{name}", "clean", {{"n": 64}}, "n64")], expect=lambda case: Expectation(),
                    kernel=lambda case: "fake_copy", needs_gpu=lambda case: False, timeout_s=10.0)
'''
SLEEP = "[sys.executable, '-c', 'import time; time.sleep(300)', MARK]"
ATTACKS = {
    "hang": ("import time\nwhile True:\n    time.sleep(1)", "did not finish within 3 s"),
    "exit": ("import sys\nsys.exit(0)", "called sys.exit(0) at import"),
    "hard_exit": ("import os\nos._exit(0)", "ended with exit code 0 before the import finished"),
    "chdir": ("import os\nos.chdir('/')", "changed the working directory to / at import"),
    "environ": ("import os\nos.environ['PYTEST_XDIST_WORKER'] = 'gw9'\nos.environ.pop('HOME', None)",
                "changed the environment at import (set PYTEST_XDIST_WORKER; removed HOME"),
    "stdout": ("print('hello from an import')", "wrote to stdout at import ('hello from an import')"),
    "fd_stdout": ("import os\nos.write(1, b'raw bytes on fd 1')", "wrote to stdout at import ('raw bytes on fd 1')"),
    "child": (f"import subprocess, sys\nsubprocess.Popen({SLEEP})", "started 1 process(es) at import"),
    "daemon": ("import os, sys\npid = os.fork()\nif pid == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
               f"        os.execv(sys.executable, {SLEEP})\n    os._exit(0)\nos.waitpid(pid, 0)",
               "started 1 process(es) at import"),
}


@pytest.fixture
def marker() -> Iterator[str]:
    """A word only this test's processes carry; the test fails if any is alive at its end."""
    mark = f"hostile-{uuid.uuid4().hex[:12]}"
    yield mark
    survivors = _alive_with(mark)
    for pid in survivors:
        os.kill(pid, 9)
    assert not survivors, f"processes outlived the test: {survivors}"


def _alive_with(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if mark.encode() in (entry / "cmdline").read_bytes():
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state not in ("Z", "X"):
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


def hostile(tmp_path: Path, name: str, mark: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    attack = ATTACKS[name][0].replace("MARK", repr(mark))
    (folder / f"{name}.py").write_text(TEMPLATE.format(attack=attack, name=f"hostile_{name}"))
    return folder


def cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != vetting.VETTED_ENV}
    env[vetting.TIMEOUT_ENV] = "3"
    return subprocess.run([sys.executable, "-m", "gpu_memsafety", *args], cwd=str(cwd), env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_list_names_what_a_scenario_file_did_at_import_and_exits_2(name: str, tmp_path: Path, marker: str) -> None:
    folder = hostile(tmp_path, name, marker)
    t0 = time.monotonic()
    proc = cli("list", "--scenario-path", str(folder), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert str(folder / f"{name}.py") in proc.stderr and ATTACKS[name][1] in proc.stderr, proc.stderr[-2000:]
    assert "hostile_" not in proc.stdout and time.monotonic() - t0 < 60
    assert Path.cwd() != Path("/")


def test_repro_of_a_scenario_that_exits_at_import_fails(tmp_path: Path, marker: str) -> None:
    folder = hostile(tmp_path, "exit", marker)
    proc = cli("repro", "hostile_exit[clean-n64]", "--mode", "guard", "--scenario-path", str(folder), cwd=tmp_path)
    assert proc.returncode == 2 and "called sys.exit(0) at import" in proc.stderr, proc.stderr[-2000:]


def test_a_scenario_run_stops_up_front_and_a_relative_report_dir_stays_where_it_was_given(tmp_path: Path,
                                                                                         marker: str) -> None:
    folder = hostile(tmp_path, "chdir", marker)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != vetting.VETTED_ENV}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "gpu_memsafety",
                           "--gpu-memsafety-scenario-path", str(folder), "--gpu-memsafety-mode", "guard", "--gpu-memsafety-report-dir", "r", str(folder)],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "changed the working directory to / at import" in proc.stderr
    assert not Path("/r").exists()


def test_a_stderr_warning_at_import_is_shown_and_the_scenario_still_loads(tmp_path: Path) -> None:
    folder = tmp_path / "warns"
    folder.mkdir()
    (folder / "warns.py").write_text(TEMPLATE.format(attack="import sys\nsys.stderr.write('deprecated thing\\n')",
                                                     name="hostile_warns"))
    proc = cli("list", "--scenario-path", str(folder), "--ids", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "hostile_warns[clean-n64]" in proc.stdout.splitlines()
    assert "wrote to stderr at import: 'deprecated thing'" in proc.stderr


def test_vetting_runs_once_per_run_and_the_verdict_reaches_child_processes(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "fine"
    folder.mkdir()
    (folder / "fine.py").write_text(TEMPLATE.format(attack="", name="hostile_fine"))
    monkeypatch.delenv(vetting.VETTED_ENV, raising=False)
    source = registry.Source(str(folder / "fine.py"), None, "test")
    t0 = time.monotonic()
    assert vetting.vet([source.to_json()]) == [vetting.Verdict(source.file)]
    first = time.monotonic() - t0
    assert vetting.token(source.file) in os.environ[vetting.VETTED_ENV].split(",")
    assert vetting.vet([source.to_json()]) == []             # this run (and its children) trust it now
    (folder / "fine.py").write_text(TEMPLATE.format(attack="print('changed')", name="hostile_fine"))
    os.utime(folder / "fine.py", ns=(time.time_ns(), time.time_ns() + 10**9))
    assert vetting.vet([source.to_json()])[0].problems        # another version of the file: vetted again
    assert first < 30


def test_what_the_parent_imports_is_watched_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file the child found clean may do something else the second time: the parent's own import is watched."""
    folder = tmp_path / "sly"
    folder.mkdir()
    (folder / "sly.py").write_text(TEMPLATE.format(
        attack="import os, sys\nif os.environ.get('GPU_MEMSAFETY_VETTED'):\n    sys.exit(0)", name="hostile_sly"))
    source = registry.Source(str(folder / "sly.py"), None, "test")
    monkeypatch.setenv(vetting.VETTED_ENV, vetting.token(source.file))
    cwd = os.getcwd()
    with pytest.raises(registry.ScenarioError, match="called sys.exit\\(0\\) at import"):
        registry.load_source(source)
    assert os.getcwd() == cwd


# ---------------------------------------------------------------------------------------- adapter processes

@pytest.fixture
def hostile_runner(tmp_path: Path, marker: str, monkeypatch: pytest.MonkeyPatch) -> Runner:
    monkeypatch.setenv("HOSTILE_MARKER", marker)
    return Runner(RunOptions(mode=MODES["guard"], workdir=tmp_path / "work", timeout_scale=0.5))


def test_processes_an_adapter_leaves_are_reaped_at_the_end_of_its_case_and_named(hostile_runner: Runner,
                                                                                marker: str) -> None:
    scenario = registry.load_source(registry.Source(str(HOSTILE_DIR / "hostile_procs.py"), None, "tests"))
    cases = {c.variant: c for c in scenario.build()}
    results = {r.case_id: r for r in hostile_runner.run([(scenario, cases[v]) for v in ("child", "daemon", "clean")])}
    child, daemon, clean = (results[f"hostile_procs[{v}-n64]"] for v in ("child", "daemon", "clean"))
    assert [p["command"].endswith(f"{marker}-child") for p in child.details["stray_processes"]] == [True]
    assert [p["command"].endswith(f"{marker}-daemon") for p in daemon.details["stray_processes"]] == [True]
    assert "stray_processes" not in clean.details and clean.outcome.label == "clean"
    assert _alive_with(marker) == []


def test_a_daemon_left_by_a_worker_that_died_is_reaped_by_the_runner(hostile_runner: Runner, marker: str) -> None:
    scenario = registry.load_source(registry.Source(str(HOSTILE_DIR / "hostile_procs.py"), None, "tests"))
    case = next(c for c in scenario.build() if c.variant == "daemon_then_die")
    [result] = hostile_runner.run([(scenario, case)])
    assert result.outcome.label == "crashed"
    left = [p for proc in hostile_runner.processes for p in proc.get("left_behind", [])]
    assert [p["command"].endswith(f"{marker}-daemon_then_die") for p in left] == [True]
    assert _alive_with(marker) == []


def test_reap_kills_a_whole_tree_and_waits_only_for_the_named_processes(marker: str) -> None:
    assert procs.subreaper()
    keep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"])
    before = procs.snapshot()
    tree = subprocess.Popen(["sh", "-c", f"{sys.executable} -c 'import time; time.sleep(300)' {marker} & wait"])
    deadline = time.monotonic() + 10
    while len(_alive_with(marker)) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    stray = procs.stray_children(before)
    assert stray == [tree.pid]
    reaped = procs.reap(stray)
    assert [r["pid"] for r in reaped][:1] == [tree.pid] and any(marker in r["command"] for r in reaped)
    assert _alive_with(marker) == []
    assert keep.wait(timeout=30) == 0          # a child of ours that is not the step's is neither killed nor waited for


def test_an_older_orphan_handed_over_during_a_step_is_not_the_steps(marker: str) -> None:
    """A subreaper gets every orphan below it, also one some earlier work left (pytest's own subprocesses, say)
    that is handed over while a case runs: started before the step, it is not the step's to kill."""
    assert procs.subreaper()
    holder = subprocess.Popen(["sh", "-c", f"{sys.executable} -c 'import time; time.sleep(300)' {marker}-older & "
                                           "sleep 1"])
    deadline = time.monotonic() + 10
    while not _alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    before = procs.snapshot()
    holder.wait(timeout=30)                    # its child is now an orphan, handed to us
    [older] = _alive_with(marker)
    assert older in procs.children() and procs.stray_children(before) == []
    assert [r["pid"] for r in procs.reap([older])] == [older]
