"""`pytest --gpu-memsafety` end to end on the CPU: a small host suite run in a fresh pytest process, with the fake
allocator and fake compute-sanitizer of tests/helpers/host_fake.py standing in for the GPU.

Flag off: the suite collects and runs exactly as without the plugin. Flag on without a GPU: every test `not
applicable`, the suite's own results kept, and its exit code where it failed (a suite that passed and checked
nothing exits 5). Flag on with the fake: findings fail their test at
teardown (the test's own result kept), known bugs are expected findings, breaks are routed, xdist workers report
to one report, memcheck children attribute each record to the test that made it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from repo_paths import HELPERS

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)


SUITE = '''import pytest
import host_fake


def test_clean():
    host_fake.allocate(100).write(0, b"x" * 100)


def test_overwrite():
    host_fake.allocate(4000).write(4000, b"\\0\\0\\0\\0")


def test_fails_itself():
    host_fake.allocate(8)
    assert 1 == 2


@pytest.mark.gpu_memsafety(expect="overwrite", bytes=2, region="past_end", issue="org/repo#5")
def test_known_bug():
    host_fake.allocate(16).write(16, b"ab")


def test_cpu_only():
    pass


@pytest.mark.skip(reason="needs Hopper")
def test_skipped():
    pass


def test_freed_block_checked_before_release():
    block = host_fake.allocate(64)
    block.write(-1, b"z")
    block.free()


def test_stats_break():
    host_fake.allocate(8)
    if host_fake.CURRENT is not None:   # what torch says under a pluggable allocator
        raise RuntimeError("CUDAPluggableAllocator does not yet support getDeviceStats. If you need it, please file an issue")


def test_reads_past_the_end():
    block = host_fake.allocate(4000)
    host_fake.read(block, 3996, 8)      # 4 B past the end: memcheck sees it, markers do not
'''

OWN = {"test_clean": "passed", "test_overwrite": "passed", "test_fails_itself": "failed", "test_known_bug": "passed",
       "test_cpu_only": "passed", "test_skipped": "skipped", "test_freed_block_checked_before_release": "passed",
       "test_stats_break": "passed", "test_reads_past_the_end": "passed"}


def line_of(snippet: str) -> int:
    """The line of SUITE (test_suite.py) holding `snippet`: where an allocation's stack must point."""
    return next(i for i, line in enumerate(SUITE.splitlines(), 1) if snippet in line)


def make_suite(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (suite / "test_suite.py").write_text(SUITE)
    return suite


def environment(suite: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A fresh pytest's environment: this folder importable (host_fake), plugins loaded only by -p, no GPU."""
    paths = [str(HELPERS), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               GPU_MEMSAFETY_CACHE=str(suite.parent / "cache"), CUDA_VISIBLE_DEVICES="", **(extra or {}))
    for name in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST"):
        env.pop(name, None)
    return env


def run(suite: Path, *args: str, env: dict[str, str] | None = None, plugin: bool = True) -> subprocess.CompletedProcess[str]:
    load = ["-p", "gpu_memsafety.fixtures.plugin"] if plugin else []
    return subprocess.run([sys.executable, "-m", "pytest", *load, *args], cwd=suite, env=environment(suite, env),
                          capture_output=True, text=True, timeout=300)


def outcomes(stdout: str) -> dict[str, str]:
    """Test name -> pytest's word for it, from `-rA`'s short summary ('PASSED test_suite.py::test_a')."""
    found = {}
    for word, name in re.findall(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS|MEMSAFETY) \S*?::?(test_\w+)", stdout, re.M):
        found.setdefault(name, set()).add(word)
    return {name: "+".join(sorted(words)) for name, words in found.items()}


def report(path: Path) -> dict[str, Any]:
    return {c["id"].split("::")[-1]: c for c in json.loads((path / "report.json").read_text())["cases"]}


def test_flag_off_collects_and_runs_exactly_as_without_the_plugin(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    without = run(suite, "-p", "host_fake", "-rA", "-q", plugin=False)
    with_plugin = run(suite, "-p", "host_fake", "-rA", "-q")
    assert outcomes(without.stdout) and outcomes(with_plugin.stdout) == outcomes(without.stdout)
    assert with_plugin.returncode == without.returncode == 1
    collected = run(suite, "-p", "host_fake", "--collect-only", "-q").stdout.splitlines()[:9]
    assert collected == [f"test_suite.py::{name}" for name in OWN]
    assert "gpu-memsafety" not in with_plugin.stdout


@pytest.mark.parametrize("spelling", [["--gpu-memsafety=guards"], ["--gpu-memsafety", "guards"]])
def test_unknown_mode_is_a_usage_error_listing_the_modes(tmp_path: Path, spelling: list[str]) -> None:
    proc = run(make_suite(tmp_path), *spelling)
    assert proc.returncode == 4
    text = proc.stderr + proc.stdout
    assert "'guards'" in text and all(m in text for m in ("markers", "memcheck", "pages"))


def test_a_path_after_the_bare_flag_is_a_path(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    (suite / "test_other.py").write_text("def test_other():\n    pass\n")
    from host_fake import install_fake_memcheck
    env = {"HOST_FAKE_SANITIZER": str(install_fake_memcheck(tmp_path))}      # the bare flag runs memcheck children
    proc = run(suite, "-p", "host_fake", "--gpu-memsafety", "test_other.py", "-rA", "-q", env=env)
    assert outcomes(proc.stdout) == {"test_other": "PASSED"}, proc.stdout[-2000:]
    proc = run(suite, "-p", "host_fake", "test_suite.py::test_clean", "--gpu-memsafety", "test_other.py", "-rA", "-q",
               env=env)
    assert outcomes(proc.stdout) == {"test_clean": "PASSED", "test_other": "PASSED"}


def test_without_a_gpu_every_test_is_not_applicable_and_the_suites_results_stand(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    plain = run(suite, "-p", "host_fake", "-rA", "-q")
    # no fake allocator here: the real one needs a GPU, and CUDA_VISIBLE_DEVICES is empty
    proc = run(suite, "--gpu-memsafety", "--gpu-memsafety-report-dir", str(tmp_path / "r"), "-rA", "-q")
    assert outcomes(proc.stdout) == outcomes(plain.stdout) and proc.returncode == plain.returncode
    cases = report(tmp_path / "r")
    assert set(cases) == set(OWN)
    for name, case in cases.items():
        assert case["outcome"] == "not applicable", (name, case["message"])
        assert "needs a CUDA GPU; found none" in " ".join(case["details"]["partial"].values())
        assert case["details"]["test"]["outcome"] == OWN[name]
    # the reason every test shares is said once, in the headline, not with each test (issue 51)
    assert " ".join(proc.stdout.split()).count("needs a CUDA GPU; found none") == 1, proc.stdout[-3000:]


def test_without_a_gpu_a_passing_suite_that_checked_nothing_exits_5(tmp_path: Path) -> None:
    """The suite passes, yet not one test was checked (no GPU): pytest's "no tests ran", never a green job."""
    suite = make_suite(tmp_path)
    args = ("test_suite.py::test_clean", "test_suite.py::test_cpu_only", "-rA", "-q")
    plain = run(suite, "-p", "host_fake", *args)
    assert plain.returncode == 0, plain.stdout[-2000:]
    proc = run(suite, "--gpu-memsafety", "--gpu-memsafety-report-dir", str(tmp_path / "r"), *args)
    assert outcomes(proc.stdout) == outcomes(plain.stdout), proc.stdout[-2000:]
    assert proc.returncode == 5, proc.stdout[-2000:]
    assert "CHECKED NOTHING" in proc.stdout
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["summary"]["status"] == "empty"


def test_markers_mode_with_the_fake_allocator(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    proc = run(suite, "-p", "host_fake", "--gpu-memsafety=markers", "--gpu-memsafety-report-dir", str(tmp_path / "r"),
               "-rA", "-q")
    got = outcomes(proc.stdout)
    assert got["test_overwrite"] == "MEMSAFETY"       # its own call passed; the finding fails it, once (issue 51)
    assert got["test_fails_itself"] == "FAILED" and got["test_clean"] == "PASSED"
    assert got["test_known_bug"] == "PASSED" and got["test_stats_break"] == "PASSED"
    assert proc.returncode == 1
    cases = report(tmp_path / "r")
    assert {n: c["outcome"] for n, c in cases.items()} == {
        "test_clean": "clean", "test_overwrite": "finding", "test_fails_itself": "clean",
        "test_known_bug": "expected finding", "test_cpu_only": "not applicable", "test_skipped": "not applicable",
        "test_freed_block_checked_before_release": "finding", "test_stats_break": "not applicable",
        "test_reads_past_the_end": "clean"}
    (finding,) = cases["test_overwrite"]["findings"]
    line = line_of("allocate(4000).write(4000")
    assert (finding["buffer"], finding["region"], finding["bytes"]) == (f"alloc 4000 B at test_suite.py line {line}", "past_end", 4)
    assert f"test_suite.py:{line} in test_overwrite" in finding["details"]["stack"]
    assert cases["test_fails_itself"]["details"]["test"]["outcome"] == "failed"
    (freed,) = cases["test_freed_block_checked_before_release"]["findings"]
    assert freed["region"] == "before_start" and "freed during" in freed["details"]["allocated_in"]
    stats = cases["test_stats_break"]
    assert "pytorch/pytorch#133281" in stats["message"] and "without the guard allocator" in stats["details"]["test"]["unguarded_rerun"]
    assert "test_overwrite" in proc.stdout.split("GPU memory-safety (markers)")[-1]


def test_xdist_workers_report_every_test_to_one_report(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    proc = run(suite, "-p", "xdist.plugin", "-p", "host_fake", "-n", "2", "--gpu-memsafety=markers",
               "--gpu-memsafety-report-dir", str(tmp_path / "r"), "-q")
    cases = report(tmp_path / "r")
    assert set(cases) == set(OWN), proc.stdout[-3000:]
    assert cases["test_overwrite"]["outcome"] == "finding" and cases["test_known_bug"]["outcome"] == "expected finding"


def test_memcheck_children_attribute_each_record_to_its_test_and_allocation(tmp_path: Path) -> None:
    from host_fake import install_fake_memcheck
    suite = make_suite(tmp_path)
    sanitizer = install_fake_memcheck(tmp_path)
    proc = run(suite, "-p", "host_fake", "--gpu-memsafety=memcheck", "--gpu-memsafety-batch", "4",
               "--gpu-memsafety-report-dir", str(tmp_path / "r"), "-rA", "-q", env={"HOST_FAKE_SANITIZER": str(sanitizer)})
    cases = report(tmp_path / "r")
    assert set(cases) == set(OWN), proc.stdout[-3000:]
    (finding,) = cases["test_reads_past_the_end"]["findings"]
    assert (finding["detector"], finding["kind"], finding["region"], finding["bytes"]) == ("memcheck", "overread", "past_end", 4)
    line = line_of("block = host_fake.allocate(4000)")
    assert finding["buffer"] == f"alloc 4000 B at test_suite.py line {line}" and finding["details"]["size"] == "4000"
    assert cases["test_overwrite"]["outcome"] == "clean"             # a write inside its guard: memcheck cannot see it
    got = outcomes(proc.stdout)
    assert got["test_fails_itself"] == "FAILED" and got["test_reads_past_the_end"] == "MEMSAFETY"
    assert got["test_stats_break"] == "PASSED" and cases["test_stats_break"]["outcome"] == "not applicable"
    assert cases["test_reads_past_the_end"]["arch"] == "sm_fake"


def test_the_bare_flag_runs_the_complete_set_and_sees_a_read(tmp_path: Path) -> None:
    """`pytest --gpu-memsafety` with no mode: memcheck children (reads and writes), as `make sanitize` runs every
    detector; markers alone, the old default, cannot see the read (issue 41)."""
    from host_fake import install_fake_memcheck
    suite = make_suite(tmp_path)
    sanitizer = install_fake_memcheck(tmp_path)
    proc = run(suite, "-p", "host_fake", "--gpu-memsafety", "--gpu-memsafety-report-dir", str(tmp_path / "r"), "-rA",
               "-q", env={"HOST_FAKE_SANITIZER": str(sanitizer)})
    cases = report(tmp_path / "r")
    assert set(cases) == set(OWN), proc.stdout[-3000:]
    assert cases["test_reads_past_the_end"]["mode"] == "complete"
    (finding,) = cases["test_reads_past_the_end"]["findings"]
    assert (finding["detector"], finding["kind"], finding["bytes"]) == ("memcheck", "overread", 4)
    # the markers pass of the same run sees the write memcheck cannot see in the fake
    assert [f["detector"] for f in cases["test_overwrite"]["findings"]] == ["guard"]
    assert cases["test_overwrite"]["outcome"] == "finding" and cases["test_known_bug"]["outcome"] == "expected finding"
    assert {d["detector"]: d["ran"] for d in cases["test_clean"]["detectors"]} == {"memcheck": True, "guard": True}
    assert outcomes(proc.stdout)["test_fails_itself"] == "FAILED"      # the test's own result, from the markers pass
    markers = run(suite, "-p", "host_fake", "--gpu-memsafety=markers", "--gpu-memsafety-report-dir",
                  str(tmp_path / "m"), "-q", "-k", "test_reads_past_the_end")
    assert report(tmp_path / "m")["test_reads_past_the_end"]["findings"] == [], markers.stdout[-2000:]


def test_children_collect_their_tests_when_the_report_dir_moves_the_rootdir(tmp_path: Path) -> None:
    """H200 (session 7): a suite with no ini file, run a second time into the same report folder. pytest takes an
    existing `--gpu-memsafety-report-dir DIR` for a path when it picks the rootdir (the plugin's options are not
    known yet then), so the parent's rootdir became the folder above the suite, and the children, whose command
    lacks that option, picked the suite's own folder: no planned test was collected, every one `crashed`. The
    children now get the parent's rootdir."""
    from host_fake import install_fake_memcheck
    suite = make_suite(tmp_path)
    (suite / "pytest.ini").unlink()
    reports = tmp_path / "r"
    reports.mkdir()                                          # a report folder from an earlier run
    sanitizer = install_fake_memcheck(tmp_path)
    proc = run(suite, "-p", "host_fake", "-p", "no:cacheprovider", "--gpu-memsafety=memcheck", "--gpu-memsafety-batch", "4",
               "--gpu-memsafety-report-dir", str(reports), "-rA", "-q", env={"HOST_FAKE_SANITIZER": str(sanitizer)})
    cases = report(reports)
    ids = [c["id"] for c in json.loads((reports / "report.json").read_text())["cases"]]
    assert ids and all(i.startswith("suite/test_suite.py::") for i in ids), ids    # the rootdir is the folder above
    assert set(cases) == set(OWN), proc.stdout[-3000:]
    assert not [n for n, c in cases.items() if c["outcome"] == "crashed"], proc.stdout[-3000:]
    (finding,) = cases["test_reads_past_the_end"]["findings"]
    assert (finding["region"], finding["bytes"]) == ("past_end", 4)


def test_children_import_what_the_parent_imported_when_pytest_ran_as_a_console_script(tmp_path: Path) -> None:
    """A kernel repository with its package folder at the root (FlashInfer's `flashinfer/`, DeepGEMM's `deep_gemm/`)
    and that package installed (built) elsewhere: `pytest tests/` from the root imports the installed one, since a
    console script puts its own folder first on sys.path, not the working directory. A child started as
    `python -m pytest` put the working directory first and imported the source folder instead: other code than
    the parent ran (or failed to import). The children now start with the parent's first sys.path entry."""
    from host_fake import install_fake_memcheck
    suite = make_suite(tmp_path)
    (suite / "test_suite.py").unlink()
    (suite / "shadowpkg").mkdir()
    (suite / "shadowpkg" / "__init__.py").write_text("WHERE = 'source folder'\n")
    installed = tmp_path / "site"
    (installed / "shadowpkg").mkdir(parents=True)
    (installed / "shadowpkg" / "__init__.py").write_text("WHERE = 'installed'\n")
    (suite / "tests").mkdir()
    (suite / "tests" / "test_which.py").write_text(
        "import shadowpkg\n\n\ndef test_installed():\n    assert shadowpkg.WHERE == 'installed', shadowpkg.__file__\n")
    console = [sys.executable, "-c", "import sys; del sys.path[0]; import pytest; raise SystemExit(pytest.console_main())"]
    env = environment(suite, {"HOST_FAKE_SANITIZER": str(install_fake_memcheck(tmp_path))})
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(installed)])
    plain = subprocess.run([*console, "-p", "host_fake", "tests", "-q"], cwd=suite, env=env, capture_output=True,
                           text=True, timeout=300)
    assert plain.returncode == 0, plain.stdout[-2000:]                 # the parent's view: the installed package
    proc = subprocess.run([*console, "-p", "gpu_memsafety.fixtures.plugin", "-p", "host_fake", "tests",
                           "--gpu-memsafety=memcheck", "--gpu-memsafety-report-dir", str(tmp_path / "r"), "-rA", "-q"],
                          cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    cases = report(tmp_path / "r")
    assert cases["test_installed"]["details"]["test"]["outcome"] == "passed", proc.stdout[-3000:]
    # the test allocates nothing, so nothing was checked: "no tests ran" (exit 5), not a failure of the suite
    assert proc.returncode == 5 and "nothing to guard" in proc.stdout, proc.stdout[-3000:]


def test_baseline_accepts_a_known_finding(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run(suite, "-p", "host_fake", "--gpu-memsafety=markers", "--gpu-memsafety-report-dir", str(tmp_path / "r1"), "-q")
    from gpu_memsafety.judge.baseline import write_baseline
    from gpu_memsafety.report import cases_from_report, load_report
    results = [r for r in cases_from_report(load_report(tmp_path / "r1" / "report.json"))
               if r.case_id.endswith("test_overwrite")]
    write_baseline(results, tmp_path / "baseline.json")
    import json
    data = json.loads((tmp_path / "baseline.json").read_text())     # written with empty reasons: a person fills them
    for entry in data["accepted"]:
        entry["reason"] = "a known overwrite, accepted while it is fixed"
    (tmp_path / "baseline.json").write_text(json.dumps(data))
    proc = run(suite, "-p", "host_fake", "--gpu-memsafety=markers", f"--gpu-memsafety-baseline={tmp_path / 'baseline.json'}",
               "--gpu-memsafety-report-dir", str(tmp_path / "r2"), "-rA", "-q")
    assert report(tmp_path / "r2")["test_overwrite"]["outcome"] == "expected finding"
    assert outcomes(proc.stdout)["test_overwrite"] == "PASSED"
    bad = run(suite, "-p", "host_fake", "--gpu-memsafety=markers", "--gpu-memsafety-baseline=nowhere.json")
    assert bad.returncode == 4 and "nowhere.json" in bad.stderr + bad.stdout


def test_a_bad_marker_fails_that_test_only(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    (suite / "test_marker.py").write_text("import pytest\n\n@pytest.mark.gpu_memsafety(expect='overwritten')\n"
                                          "def test_bad():\n    pass\n\ndef test_good():\n    pass\n")
    proc = run(suite, "-p", "host_fake", "--gpu-memsafety=markers", "test_marker.py", "-rA", "-q")
    got = outcomes(proc.stdout)
    assert got == {"test_bad": "FAILED", "test_good": "PASSED"} and "overwritten" in proc.stdout


@pytest.mark.parametrize("allocated", ["before"])
def test_an_allocation_before_the_allocator_is_named(tmp_path: Path, allocated: str) -> None:
    suite = make_suite(tmp_path)
    (suite / "early.py").write_text(
        "import pytest\nfrom gpu_memsafety.host.allocator import AllocatorUnavailable, describe_early_allocations\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_gpu_memsafety_make_allocator(config, placement):\n"
        "    raise AllocatorUnavailable(describe_early_allocations([{'device': 0, 'total_size': 2097152, "
        "'blocks': [{'size': 4096, 'state': 'active_allocated'}]}]))\n"
        "@pytest.hookimpl(optionalhook=True)\ndef pytest_gpu_memsafety_devices(config):\n    return ['fake0']\n")
    proc = run(suite, "-p", "early", "--gpu-memsafety=markers", "--gpu-memsafety-report-dir", str(tmp_path / "r"), "-q")
    cases = report(tmp_path / "r")
    assert all(c["outcome"] == "could not run" for c in cases.values()), proc.stdout[-2000:]
    assert "4,096 B on cuda:0" in cases["test_clean"]["message"] and "before the guard allocator" in cases["test_clean"]["message"]


GUARDED_SUITE = '''import torch


def test_inside(gpu_memsafety_guarded):
    out = gpu_memsafety_guarded.empty("out", (10,), torch.uint8, device="cpu")
    out.fill_(1)


def test_two_bytes_past_the_end(gpu_memsafety_guarded):
    out = gpu_memsafety_guarded.empty("out", (10,), torch.uint8, device="cpu")
    out.as_strided((12,), (1,))[10:] = 7          # what an unmasked store does: the bytes after the tensor
'''


def test_the_guarded_fixture_works_in_an_ordinary_run(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    (suite / "test_guarded.py").write_text(GUARDED_SUITE)
    proc = run(suite, "test_guarded.py", "-rA", "-q")
    assert outcomes(proc.stdout) == {"test_inside": "PASSED", "test_two_bytes_past_the_end": "ERROR+PASSED"}
    assert "out: 2 marker byte(s) changed (past_end bytes 10..11)" in proc.stdout


ENDS_ITSELF = '''import os
import host_fake


def test_a_clean():
    host_fake.allocate(100).write(0, b"x" * 100)


def test_a_forked_child_may_end_itself():
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7


def test_b_ends_the_process():
    host_fake.allocate(8)
    os.{call}


def test_c_never_runs():
    host_fake.allocate(4000).write(4000, b"\\\\0\\\\0\\\\0\\\\0")
'''


@pytest.mark.parametrize("call, how, code", [
    ("_exit(0)", "os._exit(0)", 1),
    ("_exit(3)", "os._exit(3)", 3),
    ("execv('/bin/true', ['true'])", "os.execv('/bin/true', ...)", 1),
])
def test_a_test_that_ends_the_process_fails_the_run_and_is_named(tmp_path: Path, call: str, how: str, code: int) -> None:
    """Issue 44: in markers mode the tests run in pytest's own process; `os._exit(0)` in a test ended it with 0
    (a green job) while the reports said "did not finish". host/exit_guard.py: the run exits non-zero and the
    reports, written at that moment, say which test ended it and how; the tests that finished keep their results."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (suite / "test_suite.py").write_text(ENDS_ITSELF.replace("{call}", call))
    proc = run(suite, "-p", "host_fake", "--gpu-memsafety=markers", "--gpu-memsafety-report-dir", str(tmp_path / "r"),
               "-q", "-p", "no:randomly")
    assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"test test_suite.py::test_b_ends_the_process ended the pytest process with {how}" in proc.stderr
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["summary"]["status"] == "interrupted"
    assert f"test_suite.py::test_b_ends_the_process ended the pytest process with {how}" in json.dumps(doc["run"])
    cases = report(tmp_path / "r")
    assert cases["test_a_clean"]["outcome"] == "clean" and "test_c_never_runs" not in cases
    assert cases["test_a_forked_child_may_end_itself"]["details"]["test"]["outcome"] == "passed"
    assert "test_b_ends_the_process" in (tmp_path / "r" / "summary.md").read_text()


def test_the_exit_guard_lets_exits_between_tests_through() -> None:
    from gpu_memsafety.host.exit_guard import ExitGuard
    calls: list[tuple[str, str]] = []
    guard = ExitGuard(lambda test, how: calls.append((test, how)))
    real = os._exit
    guard.install()
    try:
        assert os._exit is not real and guard.saved
        guard.running(None)
        import posix
        assert posix._exit is os._exit
    finally:
        guard.uninstall()
    assert os._exit is real and not calls


FIXTURE_SUITE = '''
import torch


def test_fixture_write_past_the_end(gpu_memsafety_guarded):
    out = gpu_memsafety_guarded.empty("out", (16,), torch.uint8, device="cpu")
    out.as_strided((20,), (1,))[16:20] = 7          # 4 bytes past the tensor's end


def test_fixture_clean(gpu_memsafety_guarded):
    gpu_memsafety_guarded.zeros("out", (16,), torch.uint8, device="cpu").add_(1)
'''


@pytest.mark.parametrize("mode", ["memcheck", "complete"])
def test_a_fixture_finding_in_a_child_reaches_the_parents_verdict(tmp_path: Path, mode: str) -> None:
    """Issue 42: in the modes whose tests run in child processes, what the gpu_memsafety_guarded fixture checked and
    found in the child is the test's evidence in the parent, as in-process (before: lost, the test `not applicable`)."""
    from host_fake import install_fake_memcheck
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (suite / "test_fixture.py").write_text(FIXTURE_SUITE)
    sanitizer = install_fake_memcheck(tmp_path)
    proc = run(suite, "-p", "host_fake", f"--gpu-memsafety={mode}", "--gpu-memsafety-report-dir", str(tmp_path / "r"),
               "-q", env={"HOST_FAKE_SANITIZER": str(sanitizer)})
    cases = report(tmp_path / "r")
    bad = cases["test_fixture_write_past_the_end"]
    assert bad["outcome"] == "finding", (bad["message"], proc.stdout[-3000:])
    (finding,) = bad["findings"]
    assert (finding["detector"], finding["kind"], finding["buffer"], finding["bytes"]) == ("guard", "overwrite", "out", 4)
    assert cases["test_fixture_clean"]["outcome"] == "clean", cases["test_fixture_clean"]["message"]
    assert proc.returncode == 1
