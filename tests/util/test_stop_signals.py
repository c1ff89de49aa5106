"""Issue 44: every child process and temporary folder is reaped on every signal that stops a run (SIGINT, SIGTERM,
SIGHUP): util/signals.py turns SIGTERM and SIGHUP into an interrupt, so the cleanup Ctrl-C gets runs for them too.
Real processes on the CPU: a scenario file that starts processes at import and sleeps, vetted in a child; a host
suite whose tests leave processes behind under the fake compute-sanitizer (tests/helpers/host_fake.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from signal_defaults import default_stop_signals
from repo_paths import HELPERS, ROOT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)


SLOW_SCENARIO = '''import json, os, subprocess, sys, time
from pathlib import Path
left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])                # in its group
away = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)  # left it
Path({marks!r}).write_text(json.dumps({{"child": os.getpid(), "left": left.pid, "away": away.pid,
                                        "tmp": os.environ.get("GPU_MEMSAFETY_VETTING", "")}}))
time.sleep(300)
SCENARIO = None          # never reached: the import is stopped while it sleeps
'''

DRIVER = '''import sys
from gpu_memsafety.scenario import registry, vetting
vetting.vet([registry.Source(sys.argv[1]).to_json()], deadline_s=600)
'''


def alive(pid: int) -> bool:
    """Running and not a zombie (a killed process nobody reaped yet is gone for our purpose)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_for(path: Path, timeout_s: float = 120.0) -> dict:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.1)
    raise AssertionError(f"{path} never written")


def gone(pids: list[int], timeout_s: float = 20.0) -> list[int]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


@pytest.fixture
def cleanup():  # type: ignore[no-untyped-def]
    """Whatever a failing test leaves behind is killed by the test, never left on the machine."""
    started: list[int] = []
    yield started
    for pid in started:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.parametrize(("signum", "entry"), [
    *((s, e) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT) for e in ("library", "command")),
    (signal.SIGUSR1, "library"), (signal.SIGALRM, "command"), (signal.SIGRTMIN + 3, "library"),   # issue 53
])
def test_a_stop_signal_while_vetting_leaves_no_process_and_no_folder(tmp_path: Path, signum: int, entry: str,
                                                                      cleanup: list[int]) -> None:
    """SIGTERM during scenario vetting left the vetting child (its own session), what it started and its temporary
    folder. Through the library (vetting.vet in a plain script) and through the command line (`list`)."""
    marks = tmp_path / "marks.json"
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "slow_vetted.py").write_text(SLOW_SCENARIO.format(marks=str(marks)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               GPU_MEMSAFETY_CACHE=str(tmp_path / "cache"))
    env.pop("GPU_MEMSAFETY_VETTED", None)
    if entry == "library":
        argv = [sys.executable, "-c", DRIVER, str(folder / "slow_vetted.py")]
    else:
        argv = [sys.executable, "-m", "gpu_memsafety", "list", "--scenario-path", str(folder)]
    # the stop signals at their default in the parent whatever this test run inherited (tests/helpers/signal_defaults.py)
    parent = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True, preexec_fn=default_stop_signals)
    cleanup.append(parent.pid)
    try:
        seen = wait_for(marks, 90)
    except AssertionError:
        parent.kill()
        raise AssertionError(parent.communicate()[0].decode(errors="replace")[-3000:]) from None
    cleanup.extend([seen["child"], seen["left"], seen["away"]])
    assert seen["tmp"] and Path(seen["tmp"]).is_dir() and alive(seen["child"])
    parent.send_signal(signum)
    try:
        out = parent.communicate(timeout=60)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        parent.kill()
        raise AssertionError(f"{signal.Signals(signum).name}: the parent did not end")
    assert parent.returncode != 0, out
    assert gone([seen["child"], seen["left"], seen["away"]]) == [], (signal.Signals(signum).name, out[-2000:])
    assert not Path(seen["tmp"]).exists(), f"temporary folder {seen['tmp']} left behind"
    assert "Traceback" not in out or entry == "library", out[-2000:]


def test_what_a_sigkill_during_vetting_leaves_the_next_vetting_removes(tmp_path: Path, cleanup: list[int]) -> None:
    """Issue 53: SIGKILL (no cleanup can run) during vetting left the vetting child, what it started and its folder;
    the next vetting (any process of the same user) finds them by the folder's owner and removes them."""
    marks = tmp_path / "marks.json"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "slow_vetted.py").write_text(SLOW_SCENARIO.format(marks=str(marks)))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "quick.py").write_text("SCENARIO = None\n")
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               GPU_MEMSAFETY_CACHE=str(tmp_path / "cache"), TMPDIR=str(tmp_path / "tmp"))
    env.pop("GPU_MEMSAFETY_VETTED", None)
    parent = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path / "mine" / "slow_vetted.py")], env=env,
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True, preexec_fn=default_stop_signals)
    cleanup.append(parent.pid)
    seen = wait_for(marks, 90)
    left = [seen["child"], seen["left"], seen["away"]]
    cleanup.extend(left)
    parent.kill()
    parent.wait(timeout=30)
    assert all(alive(p) for p in left) and Path(seen["tmp"]).is_dir()      # what SIGKILL leaves
    again = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path / "other" / "quick.py")], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    assert gone(left) == [], "the next vetting left the killed run's processes"
    assert not Path(seen["tmp"]).exists() and list((tmp_path / "tmp").iterdir()) == []


HOST_SUITE = '''import json, os, subprocess, sys
from pathlib import Path
import host_fake


def test_leaves_processes_behind():
    host_fake.allocate(100).write(0, b"x" * 100)
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    away = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    Path({marks!r}).write_text(json.dumps({{"left": left.pid, "away": away.pid}}))
'''


def test_a_host_test_s_child_does_not_outlive_the_run(tmp_path: Path, cleanup: list[int]) -> None:
    """Host memcheck mode: a test's own children (one in the batch child's process group, one in a session of its
    own) outlived the run. The batch child's group is killed when it is done, and what left it is found by the
    mark in its environment."""
    from host_fake import install_fake_memcheck
    marks = tmp_path / "marks.json"
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (suite / "test_suite.py").write_text(HOST_SUITE.format(marks=str(marks)))
    sanitizer = install_fake_memcheck(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(HELPERS), os.environ.get("PYTHONPATH", "")) if p),
               PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", GPU_MEMSAFETY_CACHE=str(tmp_path / "cache"), CUDA_VISIBLE_DEVICES="",
               HOST_FAKE_SANITIZER=str(sanitizer))
    for name in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "gpu_memsafety.fixtures.plugin", "-p", "host_fake",
                           "--gpu-memsafety=memcheck", "--gpu-memsafety-report-dir", str(tmp_path / "r"), "-q"],
                          cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    seen = wait_for(marks, 1)
    cleanup.extend([seen["left"], seen["away"]])
    assert gone([seen["left"], seen["away"]], 10) == [], proc.stdout[-2000:] + proc.stderr[-2000:]


STOPPING = """import os, signal, time
from gpu_memsafety.util.signals import Stopped, stopping
before = signal.getsignal(signal.SIGTERM)
assert before == signal.SIG_DFL, before
try:
    with stopping():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
except Stopped as exc:
    assert exc.signame == "SIGTERM" and isinstance(exc, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) == before
    print("stopped")
"""


def test_stopping_raises_an_interrupt_and_restores_the_handlers() -> None:
    """In a fresh process (this one's SIGTERM is the plugin's already): the default action, then Stopped, then back."""
    proc = subprocess.run([sys.executable, "-c", STOPPING], capture_output=True, text=True, timeout=60,
                          preexec_fn=default_stop_signals)
    assert proc.returncode == 0 and proc.stdout.strip() == "stopped", proc.stdout + proc.stderr


def test_a_killed_child_is_collected_even_when_an_interrupt_left_popens_lock_held() -> None:
    """An interrupt inside Popen.wait(timeout), between its lock's acquire and the try that releases it, leaves the
    lock held: a later proc.wait() blocked for good (a vetting parent that never ended after SIGINT, under load).
    The supervisor collects a killed child on its pid (util.child.Child.collect), which needs no lock."""
    from gpu_memsafety.util.child import GRACE_S, Child
    with Child([sys.executable, "-c", "import time; time.sleep(60)"]) as child:
        assert child.proc._waitpid_lock.acquire(False)          # the leaked lock, as the interrupt leaves it
        try:
            start = time.monotonic()
            assert child.kill() == -signal.SIGKILL
            assert time.monotonic() - start < GRACE_S + 5 and child.proc.returncode == -signal.SIGKILL
            assert child.collect() == -signal.SIGKILL     # collected once, asked again: the same answer
        finally:
            child.proc._waitpid_lock.release()
