"""The one child supervisor (gpu_memsafety.util.child): a child under a deadline, its group killed with one grace,
its exit, timed-out flag and output tail; and no other module of the product starting or killing children itself."""
from __future__ import annotations

import ast
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from gpu_memsafety.util import child as C
from repo_paths import ROOT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

PRODUCT = ("harness", "fixtures", "kernels", "scenarios")
SUPERVISOR = Path("harness/gpu_memsafety/util/child.py")
# What only the supervisor does: start a child (subprocess.Popen) and kill a process group (os.killpg).
ITS_OWN = ("Popen", "killpg")


def _own_calls(path: Path, tree: ast.AST) -> list[str]:
    """Where a module names Popen or killpg (an attribute, a name, an import): 'name at path:line'."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ITS_OWN:
            found.append(f"{node.attr} at {path}:{node.lineno}")
        elif isinstance(node, ast.Name) and node.id in ITS_OWN:
            found.append(f"{node.id} at {path}:{node.lineno}")
        elif isinstance(node, ast.ImportFrom):
            found += [f"{a.name} at {path}:{node.lineno}" for a in node.names if a.name in ITS_OWN]
    return found


def _product_files() -> list[Path]:
    return [p for folder in PRODUCT for p in sorted((ROOT / folder).rglob("*.py")) if "__pycache__" not in p.parts]


def test_no_module_but_the_supervisor_starts_or_kills_a_child() -> None:
    files = _product_files()
    assert len(files) > 100 and (ROOT / SUPERVISOR) in files
    found = [hit for p in files if p != ROOT / SUPERVISOR
             for hit in _own_calls(p.relative_to(ROOT), ast.parse(p.read_text(), str(p)))]
    assert not found, "start children through gpu_memsafety.util.child (one deadline, one kill, one grace):\n" + \
        "\n".join(found)
    assert _own_calls(SUPERVISOR, ast.parse((ROOT / SUPERVISOR).read_text())), "the supervisor itself is seen"


def test_the_check_fails_on_a_module_that_starts_or_kills_a_child() -> None:
    source = ("import os, subprocess\n"
              "from subprocess import Popen\n"
              "def f(argv):\n"
              "    p = subprocess.Popen(argv, start_new_session=True)\n"
              "    os.killpg(p.pid, 9)\n")
    hits = _own_calls(Path("fixtures/x.py"), ast.parse(source))
    assert sorted(h.split(" at ")[1] for h in hits) == ["fixtures/x.py:2", "fixtures/x.py:4", "fixtures/x.py:5"], hits


def _sleeper_tree(tmp_path: Path) -> list[str]:
    """A shell that starts a grandchild in its group, writes its pid, prints, then waits for it."""
    pid_file = tmp_path / "grandchild.pid"
    return ["sh", "-c", f"sleep 300 & echo $! > {pid_file}; echo started; echo more; wait"]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_a_child_past_its_deadline_is_killed_with_its_group(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    start = time.monotonic()
    ended = C.run(_sleeper_tree(tmp_path), deadline_s=1.0, log=log)
    assert ended.timed_out and ended.returncode == -signal.SIGKILL
    assert time.monotonic() - start < 1.0 + C.GRACE_S + 5
    assert ended.tail.splitlines() == ["started", "more"]
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(grandchild), "the grandchild in the child's group outlived the kill"


def test_a_child_that_ends_gives_its_exit_and_tail_and_is_not_timed_out(tmp_path: Path) -> None:
    ended = C.run([sys.executable, "-c", "import sys; print('\\n'.join(map(str, range(100)))); sys.exit(3)"],
                  deadline_s=60, log=tmp_path / "out.log")
    assert (ended.returncode, ended.timed_out) == (3, False)
    assert ended.tail.splitlines() == [str(i) for i in range(100 - C.TAIL_LINES, 100)]


def test_an_interrupt_while_waiting_kills_the_group_and_propagates(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        with C.Child(_sleeper_tree(tmp_path), log=tmp_path / "out.log") as child:
            time.sleep(0.5)
            raise KeyboardInterrupt
    assert child.proc.returncode == -signal.SIGKILL


def test_a_marked_descendant_that_left_the_group_is_swept(tmp_path: Path) -> None:
    """A daemon that left the child's group (setsid) but carries the mark is ended and named after the child."""
    pid_file = tmp_path / "daemon.pid"
    code = ("import os, subprocess, sys\n"
            "p = subprocess.run(['setsid', 'sh', '-c', 'sleep 300 & echo $! > " + str(pid_file) + "'])\n")
    with C.Child([sys.executable, "-c", code], log=tmp_path / "out.log", mark=("GPU_MEMSAFETY_TEST_MARK", "x")) as child:
        assert child.wait(60)
    daemon = int(pid_file.read_text())
    assert daemon in [r["pid"] for r in child.left_behind], child.left_behind
    assert _gone(daemon)


def test_piped_output_is_read_line_by_line_with_its_tail() -> None:
    with C.Child([sys.executable, "-c", "print('a'); print('b')"], pipe=True) as child:
        lines = list(child.lines())
        assert child.wait(60)
    assert lines == ["a\n", "b\n"] and child.tail() == "a\nb" and child.proc.returncode == 0
