"""Child processes of a host-suite run (gpu_memsafety.host.children): the plan, the child's command line and
environment, and reading what a child left (a line cut short by a death is dropped, never misread)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpu_memsafety.host import children


@pytest.mark.parametrize("args, kept", [
    (["tests", "--gpu-memsafety"], ["tests"]),
    (["--gpu-memsafety=memcheck", "tests", "-k", "x"], ["tests", "-k", "x"]),
    (["--gpu-memsafety", "memcheck", "tests"], ["tests"]),
    (["--gpu-memsafety", "tests"], ["tests"]),
    (["-n", "4", "tests", "--dist", "load"], ["tests"]),
    (["-n4", "tests", "-nauto"], ["tests"]),
    (["--numprocesses=2", "tests", "--junitxml", "j.xml", "--junit-xml=k.xml"], ["tests"]),
    (["-x", "--maxfail", "3", "--maxfail=2", "tests", "--lf", "--pdb"], ["tests"]),
    (["--gpu-memsafety-baseline", "b.json", "--gpu-memsafety-report-dir=r", "--gpu-memsafety-batch", "8", "tests"],
     ["tests"]),
    (["-p", "xdist", "-m", "not slow", "-s", "tests/t.py::test_a[x]"], ["-p", "xdist", "-m", "not slow", "-s",
                                                                         "tests/t.py::test_a[x]"]),
])
def test_strip_args_removes_what_a_child_must_not_inherit_in_every_spelling(args: list[str], kept: list[str]) -> None:
    assert children.strip_args(args) == kept


def test_child_argv_names_the_child_dir_and_turns_xdist_off(tmp_path: Path) -> None:
    argv = children.child_argv(["tests", "-n", "2", "--gpu-memsafety=pages", "--rootdir", "elsewhere"], tmp_path,
                               xdist=True, rootdir=tmp_path / "root", path0="/venv/bin")
    launch = children.launcher("/venv/bin")
    assert argv[:len(launch)] == launch and "tests" in argv and f"--gpu-memsafety-child={tmp_path}" in argv
    assert f"--rootdir={tmp_path / 'root'}" in argv and "elsewhere" not in argv       # the parent's, never another
    assert argv[-2:] == ["-n", "0"] and "--gpu-memsafety=pages" not in argv
    assert f"--basetemp={tmp_path / 'tmp'}" in argv


@pytest.mark.e2e
@pytest.mark.parametrize("path0", ["/venv/bin", None])
def test_the_launcher_puts_the_parents_first_path_entry_first(tmp_path: Path, path0: str | None) -> None:
    """The child's sys.path starts as the parent's did (a console script's folder), never with the working
    directory that `python -m pytest` or `-c` would put there; None (the parent ran under -P): nothing there."""
    import subprocess
    import sys
    code = children.launcher(path0)[-1].replace("import pytest\nraise SystemExit(pytest.console_main())",
                                               "print(repr(sys.path[0]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert out.strip() != repr("") and str(tmp_path) not in out
    if path0 is not None:
        assert out.strip() == repr(path0)


@pytest.mark.e2e
def test_the_launcher_passes_the_parents_interpreter_options_on(tmp_path: Path) -> None:
    import subprocess
    import sys
    code = ("from gpu_memsafety.host import children; import sys; argv = children.launcher('/x')\n"
            "print(argv[argv.index('-c') - 2:argv.index('-c')])")
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=True).stdout
    assert "-Werror" in out


def test_child_env_is_not_an_xdist_worker_and_turns_caching_off_for_memcheck() -> None:
    env = children.child_env({"PYTEST_XDIST_WORKER": "gw1", "PATH": "/bin"}, gpu="GPU-1", mode="memcheck")
    assert "PYTEST_XDIST_WORKER" not in env and env["CUDA_VISIBLE_DEVICES"] == "GPU-1"
    assert env["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1" and env["PATH"] == "/bin"
    assert "PYTORCH_NO_CUDA_MEMORY_CACHING" not in children.child_env({}, gpu="", mode="pages")


def test_plan_round_trips_and_clears_an_earlier_childs_files(tmp_path: Path) -> None:
    (tmp_path / children.MARKS).write_text("stale\n")
    plan = children.Plan("pages", ("t::a", "t::b"), "page_after", (2, 4), fence=False)
    children.write_plan(tmp_path, plan)
    assert children.read_plan(tmp_path) == plan and not (tmp_path / children.MARKS).exists()


def test_output_keeps_what_a_dying_child_wrote_and_names_the_test_it_died_in(tmp_path: Path) -> None:
    marks = tmp_path / children.MARKS
    for event, test in (("ready", ""), ("start", "t::a"), ("end", "t::a"), ("start", "t::b")):
        children.append_line(marks, {"event": event, "test": test})
    with open(marks, "a") as handle:
        handle.write('{"event": "end", "test": "t::')          # cut short by the death
    children.append_line(tmp_path / children.REPORTS, {"nodeid": "t::a", "when": "call"})
    out = children.read_output(tmp_path)
    assert out.ready and out.started == ["t::a", "t::b"] and list(out.ended) == ["t::a"]
    assert out.running == "t::b" and out.reports["t::a"][0]["when"] == "call"
