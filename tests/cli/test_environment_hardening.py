"""A broken or hostile environment (issue 27, item 5): a checkout the harness cannot write to, Makefile variables
with shell syntax in them, empty or wrong path arguments, a compute-sanitizer that exists and is rejected.

Each is either handled (run directories and caches go to a writable cache directory) or stopped up front with
a usage error that names it; none turns into cases that "ran and failed", a command run by accident, a file
written into the current directory, or "not found" said of a tool that was found."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_memsafety.cli import makeargs
from gpu_memsafety.report.merge import main as merge_main
from gpu_memsafety.util import paths
from repo_paths import ROOT


# ------------------------------------------------------------------------------------------- the cache directory

@pytest.fixture
def checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A checkout in tmp_path, its writability probed afresh."""
    root = tmp_path / "checkout"
    root.mkdir()
    monkeypatch.setattr(paths, "CHECKOUT", root)
    monkeypatch.setattr(paths, "_WRITABLE", {})
    monkeypatch.delenv(paths.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return root


def test_the_checkout_cache_is_used_when_files_can_be_written_there(checkout: Path) -> None:
    assert paths.cache_dir() == checkout / ".cache" == paths.check_cache_dir()


def test_a_checkout_whose_cache_cannot_be_written_runs_from_xdg(checkout: Path, tmp_path: Path) -> None:
    """Permission bits are not asked (root ignores them): the directory is written to. Here .cache is a link to a
    place under a file, which every user fails to create, whatever os.access says of the checkout."""
    (tmp_path / "a-file").write_text("x")
    (checkout / ".cache").symlink_to(tmp_path / "a-file" / "cache")
    assert os.access(checkout, os.W_OK)
    assert paths.cache_dir() == (tmp_path / "xdg" / "gpu-memsafety").resolve() == paths.check_cache_dir()


def test_no_writable_cache_at_all_is_one_error_naming_every_place_tried(checkout: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("x")
    (checkout / ".cache").symlink_to(tmp_path / "a-file" / "cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    with pytest.raises(paths.CacheDirError) as info:
        paths.check_cache_dir()
    text = str(info.value)
    assert str(checkout / ".cache") in text and str(tmp_path / "a-file" / "gpu-memsafety") in text
    assert paths.CACHE_ENV in text


@pytest.mark.e2e
def test_a_run_without_a_writable_run_directory_stops_before_any_case(tmp_path: Path) -> None:
    """The review: a read-only checkout turned every case into `crashed` ("18 ran, 18 failed", nothing ran)."""
    (tmp_path / "a-file").write_text("x")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env[paths.CACHE_ENV] = str(tmp_path / "a-file" / "cache")
    proc = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "--gpu-memsafety-scenario",
                           "planted_oob", "--gpu-memsafety-mode", "guard", "--gpu-memsafety-report-dir", str(tmp_path / "r")], cwd=str(ROOT),
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "run directory: no writable directory for run directories and caches" in proc.stderr
    assert "crashed" not in proc.stdout and "passed" not in proc.stdout


# ------------------------------------------------------------------------------------------------- the Makefile

@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_makefile_values_reach_commands_quoted_and_argument_lists_are_never_run(tmp_path: Path) -> None:
    """`make sanitize 'REPORTS=x; cmd'` ran cmd and dropped the other arguments. A fake venv records the argv
    each recipe line gives its python; nothing the variables hold may run."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    record = tmp_path / "argv.jsonl"
    fake = venv / "bin" / "python"
    fake.write_text("#!/bin/sh\n"
                    f'if [ "$2" = gpu_memsafety.cli.makeargs ]; then exec {sys.executable} "$@"; fi\n'
                    f'exec {sys.executable} -c "import json, sys; open(sys.argv[1], \'a\').write('
                    f'json.dumps(sys.argv[2:]) + chr(10))" {record} "$@"\n')
    fake.chmod(0o755)
    for stamp in (".bootstrap-gpu", ".bootstrap-test"):
        (venv / stamp).write_text("")
    pwned = tmp_path / "pwned"
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), "sanitize", f"VENV={venv}",
                           f"REPORTS=x; touch {pwned}-reports", f"MODE=$(shell touch {pwned}-make)",
                           f"PYTEST_ARGS=-k 'a or b' --x=\"$(touch {pwned}-args)\"; touch {pwned}-args2",
                           "SHARD=1/2", "RUN_GROUP=it's 1"], capture_output=True, text=True, timeout=120,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list(tmp_path.glob("pwned*")), "a Makefile variable ran a command"
    upstream, pytest_argv = [json.loads(line) for line in record.read_text().splitlines()]
    assert upstream == ["-m", "gpu_memsafety", "upstream", "--if-missing"]
    assert pytest_argv[pytest_argv.index("--gpu-memsafety-report-dir") + 1] == f"x; touch {pwned}-reports"
    assert pytest_argv[pytest_argv.index("--gpu-memsafety-mode") + 1] == f"$(shell touch {pwned}-make)"
    assert pytest_argv[pytest_argv.index("--gpu-memsafety-run-group") + 1] == "it's 1"
    assert pytest_argv[pytest_argv.index("--gpu-memsafety-shard") + 1] == "1/2"
    assert pytest_argv[-4:] == ["-k", "a or b", f"--x=$(touch {pwned}-args);", "touch"] or \
        pytest_argv[-5:] == ["-k", "a or b", f"--x=$(touch {pwned}-args);", "touch", f"{pwned}-args2"]
    assert "GPU_MEMSAFETY_MAKE_ARGS" not in proc.stdout


def test_makeargs_splits_like_a_shell_and_refuses_bad_quoting() -> None:
    env = {"V": "-k 'a or b' \"x y\" z\\ w ; $(rm -rf /) `id`"}
    assert makeargs.words("V", env) == ["-k", "a or b", "x y", "z w", ";", "$(rm", "-rf", "/)", "`id`"]
    assert makeargs.words("UNSET", env) == []
    with pytest.raises(ValueError, match="V: No closing quotation"):
        makeargs.words("V", {"V": "-k 'a"})
    assert makeargs.main(["V"]) == 2


# ------------------------------------------------------------------------------------------------ path arguments

def test_merge_to_an_empty_output_path_is_a_usage_error_and_writes_nothing(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "report.json"
    report.write_text("{}")
    for output in ("", "   "):
        assert merge_main([str(report), "-o", output]) == 2
        assert "an empty path" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert merge_main([str(report), "-o", str(blocker)]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "report.json"]


@pytest.mark.e2e
@pytest.mark.parametrize("argv, message", [
    (["list", "--scenario-path", ""], "an empty path"),
    (["list", "--scenario-path", "/no/such/dir"], "does not exist"),
    (["list", "--config", ""], "an empty path"),
    (["new", "thing", "--path", ""], "an empty path"),
    (["bench", "--out", ""], "an empty path"),
    (["repro", "planted_oob[x]", "--keep", ""], "an empty path"),
    (["repro", "planted_oob[x]", "--json", "/"], "is a directory"),
    (["repro", "planted_oob[x]", "--scenario-path", ""], "an empty path"),
])
def test_every_cli_path_argument_is_checked(tmp_path: Path, argv: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "gpu_memsafety", *argv], cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr, proc.stdout[-1000:] + proc.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.e2e
@pytest.mark.parametrize("option, value, message", [
    ("--gpu-memsafety-report-dir", "", "an empty path"), ("--gpu-memsafety-baseline", "", "an empty path"),
    ("--gpu-memsafety-baseline", "/no/such/file", "does not exist"), ("--gpu-memsafety-cost-file", ".", "is a directory"),
    ("--gpu-memsafety-scenario-path", "", "an empty path"),
])
def test_every_pytest_path_option_is_checked_before_anything_runs(tmp_path: Path, option: str, value: str,
                                                                  message: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "scenarios"), "-p", "no:cacheprovider",
                           "--gpu-memsafety-scenario", "planted_oob", option, value], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4 and f"{option}: " in proc.stderr and message in proc.stderr, \
        proc.stdout[-1000:] + proc.stderr[-2000:]


# --------------------------------------------------------------------------------------------- compute-sanitizer

def test_env_says_found_but_rejected_with_the_reason(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_memsafety.cli.main import main
    from gpu_memsafety.report.render import sanitizer_text
    from gpu_memsafety.sanitizer import tool as san
    rejected = san.SanitizerInfo("/opt/cuda/bin/compute-sanitizer", "2025.3.1", "PATH",
                                 problem="launcher files missing from /opt/cuda/bin: TreeLauncherSubreaper")
    lookup = san.SanitizerLookup(found=None, searched=["/opt/cuda/bin/compute-sanitizer"], rejected=[rejected])
    monkeypatch.setattr(san, "locate", lambda *a, **k: lookup)
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert ("compute-sanitizer: found but rejected: /opt/cuda/bin/compute-sanitizer (found via PATH): launcher "
            "files missing from /opt/cuda/bin: TreeLauncherSubreaper") in out
    assert "compute-sanitizer: not found" not in out
    from gpu_memsafety.cli.env import environment
    from gpu_memsafety.util.gpus import Discovery
    block = environment(Discovery(), lookup)["compute_sanitizer"]
    assert sanitizer_text(block).startswith("found but rejected: /opt/cuda/bin/compute-sanitizer: launcher files")
    lookup.rejected.clear()
    assert main(["env"]) == 0 and "compute-sanitizer: not found (searched: /opt/cuda/bin" in capsys.readouterr().out
