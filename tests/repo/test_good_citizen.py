"""Installing the harness changes no pytest run that does not ask for it (issue 42).

A host repository as a user has one: its own `kernels` and `fixtures` packages, a conftest.py that adds its own
`--mode` option, a pytest 9 `pytest.toml` that names a folder of GPU scenarios (`gpu_memsafety_scenario_paths`)
and the suite's testpaths. The plugin loads through its entry point (autoload, as in any environment that installed
the package). A plain run is the suite's alone; the scenarios run when asked (`--gpu-memsafety-scenarios`, or a
scenario path on the command line); every option the plugin adds starts with --gpu-memsafety.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_memsafety.fixtures import options
from gpu_memsafety.scenario import registry

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

SCENARIO_TEXT = '''
from pathlib import Path
Path(__file__).with_name("IMPORTED").write_text("the scenario file was imported")
from gpu_memsafety.api import Case, Expectation, Param, Scenario

SCENARIO = Scenario(
    name="host_scn", summary="a host's own scenario", adapter=lambda case, ctx: None, params=(Param("n", int, low=1),),
    variants=("a",), cases=lambda: [Case("host_scn", "a", {"n": 4}, "n4", ())],
    expect=lambda case: Expectation(), kernel=lambda case: "k", needs_gpu=lambda case: False)
'''

CONFTEST = '''
def pytest_addoption(parser):
    parser.addoption("--mode", default="slow", help="the host suite's own option")
'''

TESTS = '''
import kernels, fixtures

def test_own_kernels():
    assert kernels.WHOSE == "host"

def test_own_fixtures():
    assert fixtures.WHOSE == "host"

def test_own_mode(request):
    assert request.config.getoption("--mode") == "fast"
'''


def host_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "host"
    for package in ("kernels", "fixtures"):
        (repo / package).mkdir(parents=True)
        (repo / package / "__init__.py").write_text('WHOSE = "host"\n')
    (repo / "tests").mkdir()
    (repo / "tests" / "test_x.py").write_text(TESTS)
    (repo / "conftest.py").write_text(CONFTEST)
    (repo / "gpu_scenarios").mkdir()
    (repo / "gpu_scenarios" / "host_scn.py").write_text(SCENARIO_TEXT)
    (repo / "pytest.toml").write_text('[pytest]\ntestpaths = ["tests"]\n'
                                      f'{registry.INI_OPTION} = ["gpu_scenarios"]\n')
    return repo


def env() -> dict[str, str]:
    """The outer run's pytest settings left out (autoload stays on: the plugin loads through its entry point)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("PYTEST") and k not in ("PYTHONPATH", registry.ENV_VAR)}


def pytest_in(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=str(repo),
                          env=env(), capture_output=True, text=True, timeout=300)


def test_a_host_suite_with_its_own_mode_option_and_packages_runs_unchanged(tmp_path: Path) -> None:
    repo = host_repo(tmp_path)
    loaded = pytest_in(repo, "--trace-config", "--co", "-q", "tests/test_x.py")
    assert "gpu_memsafety" in loaded.stdout, "the plugin did not load: the test would prove nothing"
    for args in (["tests/test_x.py"], []):
        proc = pytest_in(repo, "--mode", "fast", "-q", *args)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "3 passed" in proc.stdout, proc.stdout[-3000:]
        assert "host_scn" not in proc.stdout
        assert not (repo / "gpu_scenarios" / "IMPORTED").exists(), "a plain run imported the host's scenario file"


def test_the_config_entry_alone_collects_only_the_suites_tests(tmp_path: Path) -> None:
    repo = host_repo(tmp_path)
    proc = pytest_in(repo, "--co", "-q", "tests/test_x.py")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert ids == [f"tests/test_x.py::{t}" for t in ("test_own_kernels", "test_own_fixtures", "test_own_mode")]


def test_the_ini_scenarios_run_when_asked(tmp_path: Path) -> None:
    repo = host_repo(tmp_path)
    for args in (["--gpu-memsafety-scenarios"], ["gpu_scenarios"]):
        proc = pytest_in(repo, "--co", "-q", *args)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        ids = [line for line in proc.stdout.splitlines() if "::" in line]
        assert ids == ["gpu_scenarios/host_scn.py::host_scn[a-n4]"], proc.stdout[-3000:]


def test_pytest_help_lists_no_unprefixed_option_of_ours(tmp_path: Path) -> None:
    proc = pytest_in(tmp_path, "--help")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    start = text.index("GPU memory-safety harness")
    section = text[start:].split("\n\n", 1)[0]
    ours = re.findall(r"^\s{2}(--[\w-]+)", section, flags=re.M)
    assert len(ours) > 15, section
    assert [o for o in ours if not o.startswith(options.PREFIX)] == []
    for unprefixed in ("--mode", "--case", "--scenario", "--scenario-path", "--report-dir", "--baseline", "--shard",
                       "--cover", "--tag", "--run-group", "--batch-size", "--iterations"):
        assert not re.search(rf"^\s+{unprefixed}[ =,]", text, flags=re.M), f"{unprefixed} is still registered"
    ini = re.findall(r"^\s{2}(gpu_memsafety\w*|scenario_paths)\b", text, flags=re.M)
    from gpu_memsafety.fixtures import explore_options
    assert ini == [registry.INI_OPTION, explore_options.INI_ON, explore_options.INI_VARIANTS,
                   explore_options.INI_SECONDS, explore_options.INI_RUN_VARIANTS, explore_options.INI_RUN_SECONDS]
    assert all(key.startswith("gpu_memsafety_") for key in ini)


def test_a_test_file_in_a_newer_pythons_syntax_is_pytests_collection_error_not_a_scenario_run(tmp_path: Path) -> None:
    """Fast-LLM's test files use Python 3.12 f-strings; on 3.11, `pytest tests/test_x.py tests/test_new.py` took the
    unparseable file for a scenario file (the parse failed, so 'let the import say why'), ran a scenario run, imported
    it and failed the whole run with a usage error. pytest's own collection error for that file, the rest collected."""
    repo = host_repo(tmp_path)
    (repo / "tests" / "test_new.py").write_text("def test_new():\n    assert f'{1 +}' == ''\n")   # no Python parses it
    proc = pytest_in(repo, "--co", "-q", "tests/test_x.py", "tests/test_new.py")
    out = proc.stdout + proc.stderr
    assert "scenario" not in out.lower(), out[-3000:]
    assert "ERROR collecting tests/test_new.py" in out or "SyntaxError" in out, out[-3000:]
    assert "tests/test_x.py::test_own_kernels" in out, out[-3000:]
