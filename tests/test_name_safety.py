"""The project's top-level names (harness, fixtures, kernels, scenarios) win over same-named PyPI packages.

Hugging Face's `kernels` and testing-cabal's `fixtures` are often installed beside torch; if either shadowed
ours, the harness would import the wrong code or fail in confusing ways. `make test` installs both (the
`test` extra), and these tests check, in fresh processes started the way the project starts them (`python -m
harness` from the repository root, the worker's PYTHONPATH, pytest through the root conftest), that every
import resolves to this repository. The first test makes sure the foreign packages really are installed, so
the others cannot pass just because there was nothing to collide with.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.registry import ROOT
from harness.runner import MODES, RunOptions, Runner

FOREIGN = {"kernels": "kernels", "fixtures": "fixtures"}   # distribution -> top-level package it installs
OWN_MODULES = ("harness", "harness.worker", "fixtures", "fixtures.plugin", "kernels", "kernels.planted.adapter",
               "scenarios", "scenarios.planted_oob")

PROBE = f"""
import importlib, json, sys
files = {{}}
for name in {OWN_MODULES!r}:
    files[name] = importlib.import_module(name).__file__
print(json.dumps(files))
"""


OWN_PACKAGE_DIRS = tuple(Path(ROOT).resolve() / name for name in ("harness", "fixtures", "kernels", "scenarios"))


def own(path: str | None) -> bool:
    """A file of the repository's own packages (not merely under the root: the venv lives in .venv/ there)."""
    return path is not None and any(Path(path).resolve().is_relative_to(d) for d in OWN_PACKAGE_DIRS)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != "PYTHONPATH"}
    env.update(extra)
    return env


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=str(cwd), env=env, capture_output=True, text=True, timeout=120)


def foreign_init(dist: str) -> Path:
    try:
        distribution = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"the PyPI package {dist!r} is not installed in {sys.prefix}: the name-safety tests need it "
                    "to collide with; run `make test` (it installs the `test` extra)")
    return Path(str(distribution.locate_file(f"{FOREIGN[dist]}/__init__.py")))


def assert_all_own(files: dict[str, str]) -> None:
    assert set(files) == set(OWN_MODULES)
    foreign = {name: path for name, path in files.items() if not own(path)}
    assert not foreign, f"resolved outside {ROOT}: {foreign}"


# ------------------------------------------------------------------------------------ the collision is real

@pytest.mark.parametrize("dist", sorted(FOREIGN))
def test_foreign_package_is_installed_outside_the_repository(dist: str) -> None:
    init = foreign_init(dist)
    assert init.is_file(), f"{dist} is registered but {init} is missing; run `make test`"
    assert not own(str(init))


def test_outside_the_repository_the_foreign_packages_win(tmp_path: Path) -> None:
    """Without the repository on sys.path, `import kernels` / `import fixtures` get the PyPI packages."""
    for dist in FOREIGN:
        foreign_init(dist)
    proc = run(["-c", "import json, fixtures, kernels; print(json.dumps([fixtures.__file__, kernels.__file__]))"],
               tmp_path, clean_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not any(own(f) for f in files), files


# ------------------------------------------------------------------------------- the ways the project starts

def test_python_m_harness_list_from_the_root_lists_our_scenarios() -> None:
    proc = run(["-m", "harness", "list"], Path(ROOT), clean_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "planted_oob[overread-triton-n4000-x1]" in proc.stdout
    assert "padded_stride_scale_write[" in proc.stdout          # imports kernels.pre_dispatch.layout


def test_imports_from_the_root_resolve_to_this_repository() -> None:
    """`python -m harness` puts the working directory first on sys.path; so does `python -c`."""
    proc = run(["-c", PROBE], Path(ROOT), clean_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_all_own(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_worker_pythonpath_alone_resolves_to_this_repository(tmp_path: Path) -> None:
    """The runner's environment for workers, used from a directory where nothing else helps."""
    env = Runner(RunOptions(mode=MODES["guard"], workdir=tmp_path / "runs"))._env(False)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
    env = {k: v for k, v in env.items() if not k.startswith("PYTEST")}
    proc = run(["-c", PROBE], tmp_path, env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_all_own(json.loads(proc.stdout.strip().splitlines()[-1]))


CLAIM = f"""
import json, sys
import fixtures, kernels                      # the PyPI packages, imported first (as another plugin might)
before = [fixtures.__file__, kernels.__file__]
import pytest
code = pytest.main([{str(Path(ROOT) / 'scenarios')!r}, "--collect-only", "-q", "-p", "no:cacheprovider",
                    "--rootdir", {str(ROOT)!r}, "-c", {str(Path(ROOT) / 'pyproject.toml')!r}])
import kernels.planted.adapter
after = {{name: sys.modules[name].__file__ for name in ("fixtures", "fixtures.plugin", "kernels", "kernels.planted.adapter")}}
print(json.dumps({{"code": int(code), "before": before, "after": after}}))
"""


def test_root_conftest_reclaims_names_a_foreign_package_took_first(tmp_path: Path) -> None:
    for dist in FOREIGN:
        foreign_init(dist)
    proc = run(["-c", CLAIM], tmp_path, clean_env())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not any(own(f) for f in data["before"]), "the foreign packages were not imported first"
    assert data["code"] == 0
    assert all(own(f) for f in data["after"].values()), data["after"]


def test_this_test_process_uses_the_repositorys_modules() -> None:
    import fixtures.plugin
    import kernels.planted.adapter
    import scenarios.planted_oob

    import harness
    assert all(own(m.__file__) for m in (harness, fixtures.plugin, kernels.planted.adapter, scenarios.planted_oob))
