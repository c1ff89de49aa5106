"""Scale-out (issue 17) and the run-level holes of issue 15 that come with it, on the CPU.

- harness/gpu_memsafety/engine/schedule.py: shards and batches, pure, with made-up costs;
- harness/gpu_memsafety/util/gpus.py: CUDA_VISIBLE_DEVICES as CUDA reads it, and GPU claims held by real processes: a killed
  worker's replacement gets the GPU it left, never one another worker holds;
- the runner's environment: TRITON_INTERPRET never reaches a GPU worker, an empty CUDA_VISIBLE_DEVICES is
  "no GPU" with that reason;
- the plugin end to end (pytest in a subprocess): --gpu-memsafety-shard 1/2 + 2/2 merged equal the unsharded run; a pytest
  worker killed inside a batch leaves one result per case, the case it was running crashed; SIGTERM during
  a run gives an interrupted report, the running case crashed, the rest listed as not run, and no process
  left behind; two runs at once in one checkout keep apart; a bad scenario definition under xdist fails.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from signal_defaults import default_stop_signals

from gpu_memsafety.util import gpus
from gpu_memsafety.engine.schedule import Job, Shard, makespan, parse_shard, plan, select_shard, shard_of
from gpu_memsafety.util.paths import CHECKOUT as ROOT
from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
from repo_paths import FAKE_DIR

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

FAKE_FILE = FAKE_DIR / "fake_scenarios" / "fake_faults.py"


# ------------------------------------------------------------------------------------------ schedule

def jobs(n: int = 40, groups: int = 3, alone: int = 2) -> list[Job]:
    out = [Job(f"g{i % groups}[case{i:03d}]", f"g{i % groups}", 0.1 + (i * 7 % 11) / 5) for i in range(n)]
    out += [Job(f"g0[alone{i}]", "g0", 3.0, alone=True) for i in range(alone)]
    return out


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_shards_are_disjoint_cover_everything_and_are_even_by_cost(count: int) -> None:
    everything = jobs()
    parts = [select_shard(everything, Shard(k, count)) for k in range(1, count + 1)]
    ids = [j.id for part in parts for j in part]
    assert sorted(ids) == sorted(j.id for j in everything) and len(ids) == len(set(ids))
    loads = [sum(j.cost + (7.0 if j.alone else 0.0) for j in part) for part in parts]
    assert max(loads) - min(loads) <= max(j.cost + (7.0 if j.alone else 0.0) for j in everything)


def test_shard_assignment_does_not_depend_on_the_order_cases_come_in() -> None:
    everything = jobs()
    assert shard_of(everything, 3) == shard_of(list(reversed(everything)), 3)


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "a/b", "1", "", "1/2/3", "-1/2"])
def test_a_bad_shard_is_refused_naming_what_was_expected(text: str) -> None:
    with pytest.raises(ValueError, match="expected K/N"):
        parse_shard(text)


def test_parse_shard() -> None:
    assert parse_shard(" 2 / 4 ") == Shard(2, 4)


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_plan_runs_every_case_once_within_the_batch_size_and_alone_cases_alone(workers: int) -> None:
    everything = jobs(150)
    batches = plan(everything, workers, max_batch=16)
    ids = [i for b in batches for i in b.ids]
    assert sorted(ids) == sorted(j.id for j in everything) and len(ids) == len(set(ids))
    assert all(len(b.ids) <= 16 for b in batches)
    alone = {j.id for j in everything if j.alone}
    assert all(len(b.ids) == 1 for b in batches if set(b.ids) & alone)
    groups = {j.id: j.group for j in everything}
    assert all(len({groups[i] for i in b.ids}) == 1 for b in batches), "a batch mixes scenarios"
    assert [b.cost for b in batches] == sorted((b.cost for b in batches), reverse=True), "not longest first"
    assert all("@" not in b.name and "]" not in b.name for b in batches)


def test_more_workers_get_batches_small_enough_to_keep_every_one_busy() -> None:
    everything = jobs(150, groups=1, alone=0)
    one, eight = plan(everything, 1, 64), plan(everything, 8, 64)
    assert len(one) == 3                           # 150 cases, at most 64 per batch: as few start-ups as possible
    assert len(eight) >= 8
    assert makespan(eight, 8) < makespan(one, 8) / 2


# ---------------------------------------------------------------------------------------------- GPUs

FAKE_GPUS = [(0, "GPU-aaaa0000-0000"), (1, "GPU-bbbb1111-1111"), (2, "GPU-cccc2222-2222")]


@pytest.mark.parametrize("value, expected", [
    (None, [0, 1, 2]), ("2,0", [2, 0]), ("1, 1", [1]), ("GPU-bbbb", [1]), ("0,7,1", [0]), ("GPU-", []), ("x", []),
])
def test_cuda_visible_devices_selects_as_cuda_does(value: str | None, expected: list[int]) -> None:
    devices, why = gpus.visible(FAKE_GPUS, value)
    assert [d.index for d in devices] == expected
    assert bool(why) == (not expected)


def test_empty_cuda_visible_devices_means_no_gpu_and_says_so() -> None:
    devices, why = gpus.visible(FAKE_GPUS, "")
    assert devices == [] and "CUDA_VISIBLE_DEVICES is set and empty" in why


CLAIMER = textwrap.dedent("""
    import sys, time
    from gpu_memsafety.util import gpus
    devices = [gpus.Device(i, u) for i, u in (tuple(x.split('=')) for x in sys.argv[3].split(','))]
    devices = [gpus.Device(int(d.index), d.uuid) for d in devices]
    c = gpus.claim(devices, sys.argv[1], sys.argv[2])
    print(c.device.index, c.shared, flush=True)
    time.sleep(120)
""")


def _claimer(lock_dir: Path, worker: str, n: int) -> tuple[subprocess.Popen[str], tuple[int, bool]]:
    spec = ",".join(f"{i}={u}" for i, u in FAKE_GPUS[:n])
    proc = subprocess.Popen([sys.executable, "-c", CLAIMER, str(lock_dir), worker, spec], cwd=str(ROOT),
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    index, shared = proc.stdout.readline().split()
    return proc, (int(index), shared == "True")


def test_a_killed_workers_replacement_gets_the_free_gpu_never_a_busy_one(tmp_path: Path) -> None:
    """Two workers on two GPUs; gw1 is killed; xdist's replacement is gw2, whose round-robin GPU (2 % 2 = 0)
    is gw0's: it must take GPU 1, the one gw1 left. Then gw3, with both held, shares and says so."""
    gw0, got0 = _claimer(tmp_path, "gw0", 2)
    gw1, got1 = _claimer(tmp_path, "gw1", 2)
    procs = [gw0, gw1]
    try:
        assert (got0, got1) == ((0, False), (1, False))
        gw1.kill()
        gw1.wait()
        gw2, got2 = _claimer(tmp_path, "gw2", 2)
        procs.append(gw2)
        assert gpus.pin("gw2", [u for _, u in FAKE_GPUS[:2]]) == FAKE_GPUS[0][1]   # what round robin would do
        assert got2 == (1, False)
        gw3, got3 = _claimer(tmp_path, "gw3", 2)
        procs.append(gw3)
        assert got3[1] is True
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_one_claim_per_process_and_lock_dir(tmp_path: Path) -> None:
    devices = [gpus.Device(i, u) for i, u in FAKE_GPUS]
    try:
        first = gpus.claim(devices, tmp_path, "gw1")
        assert first is not None and first.device.index == 1 and not first.shared
        assert gpus.claim(devices, tmp_path, "gw1") is first
        assert gpus.claim([], tmp_path / "other", "gw0") is None
        without_xdist = gpus.claim(devices, tmp_path / "plain", "main")      # what a run without -n passes
        assert without_xdist is not None and without_xdist.device.index == 0
    finally:
        gpus.release_all()


# ------------------------------------------------------------------------------- the runner's environment

def test_triton_interpret_never_reaches_a_gpu_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    on_gpu = Runner(RunOptions(mode=MODES["guard"], workdir=tmp_path / "g", gpu_available=True,
                               cuda_visible_devices="GPU-aaaa0000-0000"))._env(False)
    assert "TRITON_INTERPRET" not in on_gpu
    assert on_gpu["CUDA_VISIBLE_DEVICES"] == "GPU-aaaa0000-0000"
    on_cpu = Runner(RunOptions(mode=MODES["guard"], workdir=tmp_path / "c", gpu_available=False))._env(False)
    assert on_cpu["TRITON_INTERPRET"] == "1"
    # a run without a GPU hides every one from its workers, whatever the user's setting or the pin
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    pinned = Runner(RunOptions(mode=MODES["guard"], workdir=tmp_path / "p", gpu_available=False,
                               cuda_visible_devices="GPU-aaaa0000-0000"))._env(False)
    assert pinned["CUDA_VISIBLE_DEVICES"] == "" and pinned["TRITON_INTERPRET"] == "1"


def test_no_visible_gpu_gives_the_reason_in_the_unsupported_message(tmp_path: Path) -> None:
    from gpu_memsafety.scenario.registry import find_case
    scenario, case = find_case("planted_oob[clean-cuda-n4000-x1]")
    runner = Runner(RunOptions(mode=MODES["guard"], workdir=tmp_path, gpu_available=False,
                               gpu_missing_reason="CUDA_VISIBLE_DEVICES is set and empty: no GPU is visible"))
    [result] = runner.run([(scenario, case)])
    assert result.outcome.label == "unsupported"
    assert "CUDA_VISIBLE_DEVICES is set and empty" in result.message


# --------------------------------------------------------------------------------- the plugin, end to end

def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(extra)
    return env


def run_pytest(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=str(ROOT),
                          env=env or clean_env(), capture_output=True, text=True, timeout=timeout)


def report(path: Path) -> dict[str, Any]:
    return json.loads((path / "report.json").read_text())


def outcomes(doc: dict[str, Any]) -> dict[str, str]:
    ids = [c["id"] for c in doc["cases"]]
    assert len(ids) == len(set(ids)), f"a case reported twice: {ids}"
    return {c["id"]: c["outcome"] for c in doc["cases"]}


def test_two_shards_merged_equal_the_unsharded_run(tmp_path: Path) -> None:
    common = ["scenarios", "--gpu-memsafety-scenario", "planted_oob", "--gpu-memsafety-mode", "guard"]
    group = ["--gpu-memsafety-run-group", f"test-{tmp_path.name}"]
    runs = {name: run_pytest(*common, *extra, "--gpu-memsafety-report-dir", str(tmp_path / name))
            for name, extra in (("all", []), ("s1", ["--gpu-memsafety-shard", "1/2", *group]), ("s2", ["--gpu-memsafety-shard", "2/2", *group]))}
    whole, first, second = (report(tmp_path / n) for n in ("all", "s1", "s2"))
    for name, proc in runs.items():
        # without a GPU a shard may hold only CUDA cases: it checked nothing, and says so with pytest's exit 5
        empty = report(tmp_path / name)["summary"]["status"] == "empty"
        assert proc.returncode == (5 if empty else 0), f"{name}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    assert first["run"]["shard"]["index"] == 1 and second["run"]["shard"]["count"] == 2
    assert first["run"]["shard"]["selection"] == second["run"]["shard"]["selection"]
    manifest = first["run"]["shard"]["manifest"]
    assert manifest == second["run"]["shard"]["manifest"] and manifest["matrix"] == sorted(outcomes(whole))
    assert manifest["mode"] == "guard" and manifest["group"] == group[1] and manifest["group_source"] == "--gpu-memsafety-run-group"
    assert set(outcomes(first)).isdisjoint(outcomes(second)) and outcomes(first) and outcomes(second)
    merged = merge(tmp_path, "merged", tmp_path / "s1" / "report.json", tmp_path / "s2" / "report.json")
    unsharded = merge(tmp_path, "unsharded", tmp_path / "all" / "report.json")
    assert {c["id"]: c["outcome"] for c in merged["cases"]} == outcomes(whole)
    assert merged["missing_shards"] == []
    strip = lambda cells: [{k: v for k, v in c.items() if k != "runners"} for c in cells]  # noqa: E731
    assert strip(merged["cells"]) == strip(unsharded["cells"])
    alone = subprocess.run([sys.executable, "-m", "gpu_memsafety", "merge", str(tmp_path / "s1" / "report.json"),
                            "-o", str(tmp_path / "alone")], cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert alone.returncode == 1 and "2" in alone.stderr, "a missing shard must be named and fail the merge"
    # shard 2 cut again from other cost data (an earlier report's durations): one run no longer
    other = run_pytest(*common, "--gpu-memsafety-shard", "2/2", *group, "--gpu-memsafety-cost-file", str(tmp_path / "all" / "report.json"),
                       "--gpu-memsafety-report-dir", str(tmp_path / "s2-other-costs"))
    assert other.returncode == 0, other.stdout[-2000:] + other.stderr[-2000:]
    mixed = subprocess.run([sys.executable, "-m", "gpu_memsafety", "merge", str(tmp_path / "s1" / "report.json"),
                            str(tmp_path / "s2-other-costs" / "report.json"), "-o", str(tmp_path / "mixed")],
                           cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    if mixed.returncode == 2:   # the two cuts share a case: refused outright, nothing written (issue 44)
        assert "appear in two reports for the same architecture" in mixed.stderr, mixed.stderr
        assert not (tmp_path / "mixed").exists()
        return
    assert mixed.returncode == 1 and "inconsistent:" in mixed.stderr and "cost data" in mixed.stderr, mixed.stderr
    assert json.loads((tmp_path / "mixed" / "merged.json").read_text())["summary"]["status"] == "inconsistent"


def test_a_shard_without_a_run_group_and_a_huge_shard_count_stop_up_front(tmp_path: Path) -> None:
    env = {k: v for k, v in clean_env().items() if k not in ("GPU_MEMSAFETY_RUN_GROUP", "GITHUB_RUN_ID",
                                                            "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID",
                                                            "CIRCLE_WORKFLOW_ID", "BUILD_TAG")}
    common = ["scenarios", "--gpu-memsafety-scenario", "planted_oob", "--gpu-memsafety-mode", "guard", "--gpu-memsafety-report-dir", str(tmp_path / "r")]
    proc = run_pytest(*common, "--gpu-memsafety-shard", "1/2", env=env, timeout=120)
    assert proc.returncode == 4 and "must share a run group" in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    t0 = time.monotonic()
    proc = run_pytest(*common, "--gpu-memsafety-shard", "1/1000000000", "--gpu-memsafety-run-group", "g", env=env, timeout=120)
    assert proc.returncode == 4 and "K/N with 1 <= K <= N <= 4096" in proc.stderr, proc.stderr[-2000:]
    assert time.monotonic() - t0 < 60 and not (tmp_path / "r").exists()


def merge(tmp: Path, name: str, *reports: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "gpu_memsafety", "merge", *map(str, reports), "-o", str(tmp / name)],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads((tmp / name / "merged.json").read_text())


def fake_env(tmp: Path, **extra: str) -> dict[str, str]:
    return clean_env(PYTHONPATH=os.pathsep.join([str(ROOT), str(FAKE_DIR)]), FAKE_FAULTS_DIR=str(tmp), **extra)


def test_a_pytest_worker_killed_inside_a_batch_leaves_one_result_per_case(tmp_path: Path) -> None:
    """Batches of two: the case that kills its pytest worker (once) is `crashed` and not run again; its
    batch-mates run again in another pytest worker; every case has exactly one result.

    Which worker takes the killed worker's batch (the survivor or the replacement) is xdist's choice, made by
    timing: the test holds only what the harness decides. The killed worker is found from its pid (the
    adapter records it) and its work directory under the run directory; the cases of the batch it died in
    must have their results from another worker."""
    cache = tmp_path / "cache"
    proc = run_pytest(str(FAKE_FILE), "-n", "2", "--gpu-memsafety-mode", "guard", "--gpu-memsafety-report-dir", str(tmp_path / "r"),
                      "-k", "kill_pytest_worker or clean or overwrite",
                      env=fake_env(tmp_path, GPU_MEMSAFETY_CACHE=str(cache)))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "pytest-worker-killed").exists()
    doc = report(tmp_path / "r")
    assert outcomes(doc) == {"fake_faults[kill_pytest_worker-n4000]": "crashed", "fake_faults[clean-n4000]": "clean",
                             "fake_faults[clean-n64]": "clean", "fake_faults[overwrite-n4000]": "expected finding"}
    crashed = next(c for c in doc["cases"] if c["outcome"] == "crashed")
    assert "the pytest worker running this case crashed" in crashed["message"]
    assert doc["run"]["dist"] == "loadgroup" and doc["not_run"] == []
    killed_pid = (tmp_path / "pytest-worker-killed").read_text().strip()
    [killed_dir] = (cache / "runs" / doc["run"]["id"]).glob(f"*-{killed_pid}")
    killed_worker = killed_dir.name.rsplit("-", 1)[0]
    [job] = [j for j in killed_dir.glob("*/batch-*/job.json")
             if any(c["variant"] == "kill_pytest_worker" for c in json.loads(j.read_text())["cases"])]
    mates = {f"fake_faults[{c['variant']}-{c['label']}]" for c in json.loads(job.read_text())["cases"]}
    mates.discard("fake_faults[kill_pytest_worker-n4000]")
    ran_again = {c["id"]: c["details"]["batch"]["worker"] for c in doc["cases"] if c["id"] in mates}
    assert set(ran_again) == mates and killed_worker not in ran_again.values(), \
        f"the killed worker {killed_worker}'s batch-mates {ran_again} must run again in another worker"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace") and _alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_sigterm_gives_an_interrupted_report_and_leaves_no_process(tmp_path: Path, xdist: list[str]) -> None:
    """SIGTERM to pytest while the hanging case runs: exit code non-zero; the report says interrupted, the
    running case is crashed, the cases never reached are listed; the worker, its process group (the adapter's
    sleeping child) and, under xdist, the pytest workers are gone."""
    out = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(FAKE_FILE), *xdist,
                             "--gpu-memsafety-mode", "guard", "--gpu-memsafety-batch-size", "3", "--gpu-memsafety-report-dir", str(out),
                             "-k", "hang or clean or overwrite or raise"],
                            cwd=str(ROOT), env=fake_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=default_stop_signals)
    sleeper = tmp_path / "sleeper.pid"
    deadline = time.monotonic() + 120
    while not sleeper.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sleeper.exists(), "the hanging case never started"
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode not in (0, None), output[-3000:]
    doc = report(out)
    assert doc["run"]["interrupted"].startswith("interrupted (SIGTERM)")
    assert doc["summary"]["status"] == "interrupted"
    got = outcomes(doc)
    assert got["fake_faults[hang-n4000]"] == "crashed", output[-3000:]
    # where it hung: how long it had run, and its worker's stacks, asked for before the kill (run 38: a hang at 16
    # workers stopped from outside by a time limit said nothing more than "interrupted")
    [hung] = [c for c in doc["cases"] if c["id"] == "fake_faults[hang-n4000]"]
    assert "it had been running for" in hung["message"], hung["message"]
    assert "most recent call first" in hung["message"], hung["message"]
    everything = {"fake_faults[hang-n4000]", "fake_faults[clean-n4000]", "fake_faults[clean-n64]",
                  "fake_faults[overwrite-n4000]", "fake_faults[raise-n4000]"}
    assert set(got) | set(doc["not_run"]) == everything and not set(got) & set(doc["not_run"])
    assert doc["not_run"], "with a hang in a batch of three, something was never reached"
    pid = int(sleeper.read_text())
    deadline = time.monotonic() + 10
    while (_alive(pid) or _processes_mentioning(doc["run"]["id"])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid), "the hung adapter's child survived"
    assert not _processes_mentioning(doc["run"]["id"]), "a worker of the interrupted run is still running"


def test_two_runs_at_once_in_one_checkout_keep_apart(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "scenarios", "--gpu-memsafety-scenario", "planted_oob",
            "--gpu-memsafety-mode", "guard"]
    procs = {name: subprocess.Popen([*argv, "-k", select, "--gpu-memsafety-report-dir", str(tmp_path / name)], cwd=str(ROOT),
                                    env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for name, select in (("a", "triton and clean"), ("b", "triton and overwrite"))}
    for name, proc in procs.items():
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {output[-3000:]}"
    a, b = report(tmp_path / "a"), report(tmp_path / "b")
    assert outcomes(a) and all("clean" in cid and "overwrite" not in cid for cid in outcomes(a)), outcomes(a)
    assert outcomes(b) and all("overwrite" in cid for cid in outcomes(b)), outcomes(b)
    assert a["run"]["id"] != b["run"]["id"]
    dirs = {name: {p.parent.parent.parent.name for p in (ROOT / ".cache" / "runs" / doc["run"]["id"]).glob("*/*/batch-*/job.json")}
            for name, doc in (("a", a), ("b", b))}
    assert dirs["a"] and dirs["b"], "each run works in its own directory, named by its run id"


def test_a_bad_scenario_definition_under_xdist_fails_the_run(tmp_path: Path) -> None:
    bad = FAKE_DIR / "bad_scenarios" / "bad_definition.py"
    proc = run_pytest(str(bad), str(FAKE_FILE), "-n", "2", "--gpu-memsafety-mode", "guard", "-k", "bad or clean",
                      "--gpu-memsafety-report-dir", str(tmp_path / "r"), env=fake_env(tmp_path))
    assert proc.returncode != 0, proc.stdout[-3000:]
    doc = report(tmp_path / "r")
    assert doc["summary"]["status"] != "passed"
    broken = [c for c in doc["cases"] if c["scenario"] == "bad_definition"]
    assert broken and broken[0]["failed"], doc["cases"]
    assert "'n'" in broken[0]["message"] and "below the minimum" in broken[0]["message"]


def test_the_terminal_says_where_the_time_went_per_batch() -> None:
    from gpu_memsafety.plugin.scenario.controller import batch_summary
    batches = [{"name": "a.b001", "worker": "gw0", "wall_s": 30.0,
                "processes": [{"startup_s": 8.0, "run_s": 20.0, "exit_s": 2.0}]},
               {"name": "a.b002", "worker": "gw1", "wall_s": 12.0,
                "processes": [{"startup_s": 7.0, "run_s": 3.0, "exit_s": 1.0}, {"startup_s": 1.0, "run_s": None, "exit_s": None}]}]
    line = batch_summary(batches)
    assert "batches: 2 on 2 worker(s), 3 worker processes" in line
    assert "start-up 16.0 s (max 8.0 s), cases 23.0 s, exit 3.0 s" in line
    assert "slowest batch a.b001 30.0 s on gw0" in line
    assert batch_summary([]) == ""


# ------------------------------------------------------------------------------------ bench part scaling

def bench(tmp: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "gpu_memsafety", "bench", "--out", str(tmp), *args], cwd=str(ROOT),
                          env=clean_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((tmp / "bench.json").read_text())


def test_scaling_without_two_gpus_is_not_run_and_its_target_not_measured(tmp_path: Path) -> None:
    doc = bench(tmp_path, "--parts", "scaling")
    assert doc["parts"]["scaling"]["status"] == "not run"
    assert "needs 2 GPUs or more" in doc["parts"]["scaling"]["message"]
    [target] = [t for t in doc["targets"] if t["target"].startswith("default matrix on all GPUs")]
    assert target["status"] == "not measured" and "needs 2 GPUs" in target["why"]


def test_scaling_plumbing_with_cpu_workers(tmp_path: Path) -> None:
    """The part's runs on CPU workers: warm-up, one worker, two, and two shards merged; the same outcomes."""
    doc = bench(tmp_path, "--parts", "scaling", "--scaling-workers", "2",
                "--scaling-args", "--gpu-memsafety-scenario planted_oob -k 'triton and (clean or overwrite)'")
    sc = doc["parts"]["scaling"]
    assert sc["gpus"] == 0 and sc["workers"] == 2
    expected = set(sc["one"]["outcomes"])
    assert {"planted_oob[clean-triton-n4000-x1]", "planted_oob[overwrite-triton-n4000-x1]"} <= expected
    assert all("triton" in cid for cid in expected)
    for key in ("warmup", "one", "all"):
        assert set(sc[key]["outcomes"]) == expected, (key, sc[key])
        assert sc[key]["wall_s"] > 0 and sc[key]["processes"] >= 1
    assert sc["same_outcomes"] is True and sc["speedup"] > 0
    assert sc["shards"]["same_outcomes"] is True and sc["shards"]["merged"]["missing_shards"] == []
    assert sc["shards"]["vs_one_run"] > 0
    assert "## Scaling" in (tmp_path / "bench.md").read_text()
    [target] = [t for t in doc["targets"] if t["target"].startswith("default matrix on all GPUs")]
    assert target["status"] == "not measured"          # CPU workers are not GPUs: no claim about the target


def test_the_reason_for_no_gpu_is_nvmls_or_the_users_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_memsafety.util import gpus as env
    monkeypatch.setattr(env, "discover", lambda: env.Discovery(nvml="NVML did not initialise: driver not loaded"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert env.visible_gpus() == ([], "NVML did not initialise: driver not loaded")
    two = [env.Gpu(i, "H200", u, (9, 0), 1) for i, u in FAKE_GPUS[:2]]
    monkeypatch.setattr(env, "discover", lambda: env.Discovery(gpus=two))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    devices, why = env.visible_gpus()
    assert devices == [] and "CUDA_VISIBLE_DEVICES is set and empty" in why
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert env.visible_gpus() == ([gpus.Device(1, FAKE_GPUS[1][1])], "")


def test_repro_and_run_case_take_the_users_cuda_visible_devices_as_scenario_runs_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """NVML lists a GPU, CUDA_VISIBLE_DEVICES="" hides it: `repro` and `run_case` say the case could not run and why,
    as a scenario run does (run 52 on the H200: repro ran the case on the GPU the user had hidden)."""
    from gpu_memsafety.api import run_case
    from gpu_memsafety.cli import repro
    from gpu_memsafety.util import gpus as env
    h200 = env.Discovery(gpus=[env.Gpu(0, "H200", FAKE_GPUS[0][1], (9, 0), 143771)], driver="580")
    monkeypatch.setattr(env, "discover", lambda: h200)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    result = run_case("planted_oob[clean-cuda-n4000-x1]", mode="guard", workdir=tmp_path / "one")
    assert result.outcome.label == "unsupported" and "CUDA_VISIBLE_DEVICES is set and empty" in result.message
    assert repro.main(["planted_oob[clean-cuda-n4000-x1]", "--mode", "guard"]) == repro.NOT_CHECKED
    out = capsys.readouterr().out
    assert "1 GPU(s): 0: H200 sm_90; driver 580 (none usable here: CUDA_VISIBLE_DEVICES is set and empty" in out, out
    assert "CUDA_VISIBLE_DEVICES is set and empty" in out.split("[guard]", 1)[1], out


def test_a_run_that_checked_nothing_exits_like_pytests_no_tests_ran(tmp_path: Path) -> None:
    """memcheck mode on a machine without a GPU: every case collected, none checked. The reports say "checked
    nothing"; the exit code is pytest's 5 ("no tests ran"), never 0: a CI job must not go green on it. The same
    selection in a mode that can run here still exits 0."""
    env = clean_env(CUDA_VISIBLE_DEVICES="")
    common = ["scenarios", "--gpu-memsafety-scenario", "planted_oob", "-k", "triton and n4000"]
    proc = run_pytest(*common, "--gpu-memsafety-mode", "memcheck", "--gpu-memsafety-report-dir", str(tmp_path / "m"), env=env)
    doc = report(tmp_path / "m")
    assert doc["summary"]["status"] == "empty" and doc["cases"], proc.stdout[-2000:]
    assert proc.returncode == 5, proc.stdout[-2000:] + proc.stderr[-2000:]
    proc = run_pytest(*common, "--gpu-memsafety-mode", "guard", "--gpu-memsafety-report-dir", str(tmp_path / "g"), env=env)
    assert report(tmp_path / "g")["summary"]["status"] == "passed" and proc.returncode == 0, proc.stdout[-2000:]


def test_a_worker_process_gets_its_share_of_the_cores_not_torchs_default_of_all_of_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run 32 (MODE=poison, 8 workers on 16 cores): each worker process at 230-260 % CPU with the GPU idle, cases
    30 times slower than alone: torch's default thread pool (every core, in every process) spinning on the output
    comparisons. A worker gets the cores shared out between the run's workers; a user's own setting stays."""
    from gpu_memsafety.detectors.modes import MODES
    from gpu_memsafety.engine.runner import THREADS_ENV, RunOptions, Runner, cpu_threads
    assert cpu_threads({"PYTEST_XDIST_WORKER_COUNT": "8"}, 16) == 2
    assert cpu_threads({"PYTEST_XDIST_WORKER_COUNT": "16"}, 16) == 1
    assert cpu_threads({"PYTEST_XDIST_WORKER_COUNT": "32"}, 16) == 1
    assert cpu_threads({}, 16) == 16                  # one run alone (repro, no xdist): every core
    assert cpu_threads({"PYTEST_XDIST_WORKER_COUNT": "x"}, 4) == 4
    runner = Runner(RunOptions(mode=MODES["poison"], workdir=tmp_path))
    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "8")
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert runner._env(sanitized=False)[THREADS_ENV] == "2"     # noqa: SLF001
    monkeypatch.setenv(THREADS_ENV, "6")
    assert runner._env(sanitized=False)[THREADS_ENV] == "6"     # noqa: SLF001
