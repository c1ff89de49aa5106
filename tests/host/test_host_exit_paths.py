"""Issue 53, class 1: no false green from the way the pytest process ends. `pytest --gpu-memsafety` decides its exit
status in a watchdog outside the process that runs the tests (host/watchdog.py): whatever code in that process ends
it, at whatever moment (a daemon thread's os._exit(0) after the last test, atexit.register(os._exit, 0) over a FAILED
report, an exec, a signal), a run with a finding never exits 0, and a run that did not finish never exits 0.

The suites run for real (fresh pytest processes) with tests/helpers/host_fake.py's allocator in markers mode: no GPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_paths import HELPERS

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)


SUITE = '''import host_fake


def test_a_clean():
    host_fake.allocate(100).write(0, b"x" * 100)


def test_b_overwrite():
    host_fake.allocate(4000).write(4000, b"\\\\0\\\\0\\\\0\\\\0")


def test_c_clean():
    host_fake.allocate(10).write(0, b"y")
'''

CLEAN_SUITE = '''import host_fake


def test_a_clean():
    host_fake.allocate(100).write(0, b"x" * 100)
'''

# conftest.py bodies: each ends the process one way, `{delay}` seconds after it is imported (a thread) or at the end.
PATHS = {
    "thread-exit": "threading.Thread(target=lambda: (time.sleep({delay}), os._exit(0)), daemon=True).start()",
    "thread-exec": "threading.Thread(target=lambda: (time.sleep({delay}), os.execv('/bin/true', ['true'])), "
                   "daemon=True).start()",
    "thread-kill": "threading.Thread(target=lambda: (time.sleep({delay}), os.kill(os.getpid(), signal.SIGKILL)), "
                   "daemon=True).start()",
    "thread-term": "threading.Thread(target=lambda: (time.sleep({delay}), os.kill(os.getpid(), signal.SIGTERM)), "
                   "daemon=True).start()",
    "thread-quit": "threading.Thread(target=lambda: (time.sleep({delay}), os.kill(os.getpid(), signal.SIGQUIT)), "
                   "daemon=True).start()",
    "atexit-exit": "atexit.register(os._exit, 0)",
    "unconfigure-exit": "def pytest_unconfigure(config):\n    os._exit(0)",
    "sessionfinish-exit": "import pytest\n@pytest.hookimpl(trylast=True)\ndef pytest_sessionfinish(session):\n"
                          "    os._exit(0)",
}
HEAD = "import atexit, os, signal, threading, time\n"


def environment(tmp: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(HELPERS), os.environ.get("PYTHONPATH", "")) if p),
               PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", GPU_MEMSAFETY_CACHE=str(tmp / "cache"), CUDA_VISIBLE_DEVICES="")
    for name in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST"):
        env.pop(name, None)
    return env


def run_suite(tmp: Path, suite: str, conftest: str) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    folder = tmp / "suite"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (folder / "test_suite.py").write_text(suite)
    (folder / "conftest.py").write_text(HEAD + conftest + "\n")
    reports = tmp / "r"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "gpu_memsafety.fixtures.plugin", "-p", "host_fake",
                           "--gpu-memsafety=markers", "--gpu-memsafety-report-dir", str(reports), "-q"],
                          cwd=folder, env=environment(tmp), capture_output=True, text=True, timeout=240)
    try:
        doc = json.loads((reports / "report.json").read_text())
    except (OSError, ValueError):
        doc = None
    return proc, doc


def test_a_daemon_thread_that_ends_the_process_after_the_last_test_is_not_green(tmp_path: Path) -> None:
    """The issue's attack: exit 0 and a "did not finish" report, the finding lost."""
    conftest = ("import pytest\n_t = []\n@pytest.hookimpl(trylast=True)\ndef pytest_runtest_logfinish(nodeid):\n"
                "    if nodeid.endswith('test_c_clean') and not _t:\n"
                "        _t.append(threading.Thread(target=lambda: os._exit(0), daemon=True))\n        _t[0].start()\n"
                "        time.sleep(0.5)")
    proc, doc = run_suite(tmp_path, SUITE, conftest)
    assert proc.returncode != 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "before pytest decided the run's exit status" in proc.stderr
    assert doc is None or doc["summary"]["status"] != "passed"


def test_atexit_os_exit_0_over_a_failed_report_is_not_green(tmp_path: Path) -> None:
    proc, doc = run_suite(tmp_path, SUITE, PATHS["atexit-exit"])
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert doc is not None and doc["summary"]["status"] == "failed"


def test_a_clean_run_that_ends_normally_is_still_green(tmp_path: Path) -> None:
    proc, doc = run_suite(tmp_path, CLEAN_SUITE, "")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert doc is not None and doc["summary"]["status"] == "passed"
    assert "gpu-memsafety: the pytest process ended" not in proc.stderr


@settings(max_examples=8, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(sorted(PATHS)), delay=st.floats(0.0, 4.0).map(lambda d: round(d, 2)))
def test_any_exit_path_at_any_moment_never_gives_a_green_run_with_a_finding(
        tmp_path_factory: pytest.TempPathFactory, path: str, delay: float) -> None:
    """Random exit paths at random moments of a host run whose suite has a finding: never exit 0, and a report
    that exists never says passed."""
    proc, doc = run_suite(tmp_path_factory.mktemp("exit"), SUITE, PATHS[path].format(delay=delay))
    assert proc.returncode != 0, (path, delay, proc.stdout[-1500:], proc.stderr[-1500:])
    assert doc is None or doc["summary"]["status"] in ("failed", "interrupted"), (path, delay, doc["summary"])


RELOAD_SUITE = '''
import importlib
import torch
import triton
import triton.language as tl
import triton.runtime.interpreter


@triton.jit
def reads_two_past(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n + 2), mask=offs < n)


def run_kernel():
    x = torch.arange(10, dtype=torch.float32)
    out = torch.empty(10)
    reads_two_past[(1,)](x, out, 10, BLOCK=16)


def test_a_reloads_the_interpreter():
    importlib.reload(triton.runtime.interpreter)


def test_b_overread_after_the_reload():
    run_kernel()


def test_c_reloads_then_overreads():
    importlib.reload(triton.runtime.interpreter)
    run_kernel()
'''


def test_a_reloaded_interpreter_is_hooked_again_or_the_test_is_not_checked(tmp_path: Path) -> None:
    """Issue 53: a test that reloads triton.runtime.interpreter took the trace's hooks away; a later overread became
    `not applicable` and the run "passed, partial" exited 0. The trace re-checks its hooks at each test (installed
    again), and a test whose launches ran without them is `not checked` (unresolved), never `not applicable`."""
    pytest.importorskip("triton")
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "conftest.py").write_text("import os\nos.environ['TRITON_INTERPRET'] = '1'\n")
    (folder / "test_reload.py").write_text(RELOAD_SUITE)
    env = {k: v for k, v in environment(tmp_path).items() if not k.startswith("TRITON_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "gpu_memsafety.fixtures.plugin", "-p", "no:cacheprovider",
                           "--gpu-memsafety=trace", "--gpu-memsafety-report-dir", str(tmp_path / "r"), "-q"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    by = {c["id"].split("::")[-1]: c for c in doc["cases"]}
    assert by["test_b_overread_after_the_reload"]["outcome"] == "finding", by["test_b_overread_after_the_reload"]
    late = by["test_c_reloads_then_overreads"]
    assert late["outcome"] == "unresolved" and "not checked: the trace's hooks" in late["message"], late
    assert proc.returncode != 0 and doc["summary"]["status"] == "failed"
