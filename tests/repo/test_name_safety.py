"""One import name, `gpu_memsafety`: nothing the harness installs collides with `kernels`, `fixtures`, ...

Hugging Face's `kernels` and testing-cabal's `fixtures` are often installed beside torch, and kernel
repositories have top-level `kernels/` packages of their own. The harness's folders keep those names in the
checkout but are imported only as `gpu_memsafety.kernels`, `gpu_memsafety.fixtures`, ... (pyproject.toml's
package-dir mapping, an editable install in the checkout). `make test` installs both foreign packages (the
`test` extra), and these tests check, in fresh processes started the way the project starts them, that every
`gpu_memsafety.*` import resolves to this checkout while `import kernels` / `import fixtures` keep meaning the
foreign packages, even when those were imported first. The first test makes sure the foreign packages really
are installed, so the others cannot pass just because there was nothing to collide with.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
from gpu_memsafety.util.paths import CHECKOUT as ROOT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

FOREIGN = {"kernels": "kernels", "fixtures": "fixtures"}   # distribution -> top-level package it installs
OWN_MODULES = ("gpu_memsafety", "gpu_memsafety.engine.worker", "gpu_memsafety.fixtures.plugin",
               "gpu_memsafety.kernels.planted.adapter", "gpu_memsafety.scenarios.planted_oob")

PROBE = f"""
import importlib, json
files = {{name: importlib.import_module(name).__file__ for name in {OWN_MODULES!r}}}
import fixtures, kernels
files["fixtures"], files["kernels"] = fixtures.__file__, kernels.__file__
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


def assert_ours_and_theirs(files: dict[str, str]) -> None:
    """Every gpu_memsafety module from this checkout; `kernels` and `fixtures` still the foreign packages."""
    assert {n: f for n, f in files.items() if n.startswith("gpu_memsafety") and not own(f)} == {}
    assert not own(files["kernels"]) and not own(files["fixtures"]), files


@pytest.mark.parametrize("dist", sorted(FOREIGN))
def test_foreign_package_is_installed_outside_the_repository(dist: str) -> None:
    init = foreign_init(dist)
    assert init.is_file(), f"{dist} is registered but {init} is missing; run `make test`"
    assert not own(str(init))


@pytest.mark.parametrize("where", ["root", "elsewhere"])
def test_imports_resolve_to_this_checkout_and_leave_foreign_names_alone(where: str, tmp_path: Path) -> None:
    """From the checkout's root (where `python -c` puts the folders `kernels/`, `fixtures/` first on sys.path)
    and from anywhere else: `gpu_memsafety.*` is this checkout; `kernels`/`fixtures` stay the PyPI packages
    outside the root."""
    for dist in FOREIGN:
        foreign_init(dist)
    cwd = Path(ROOT) if where == "root" else tmp_path
    proc = run(["-c", PROBE], cwd, clean_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {n: f for n, f in files.items() if n.startswith("gpu_memsafety") and not own(f)} == {}
    if where == "elsewhere":
        assert_ours_and_theirs(files)


def test_python_m_gpu_memsafety_list_from_anywhere_lists_our_scenarios(tmp_path: Path) -> None:
    proc = run(["-m", "gpu_memsafety", "list"], tmp_path, clean_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "planted_oob[overread-triton-n4000-x1]" in proc.stdout
    assert "padded_stride_scale_write[" in proc.stdout          # imports gpu_memsafety.kernels.pre_dispatch.layout


def test_worker_environment_resolves_to_this_checkout_from_anywhere(tmp_path: Path) -> None:
    """The runner's environment for workers, used from a directory where nothing else helps."""
    env = Runner(RunOptions(mode=MODES["guard"], workdir=tmp_path / "runs"))._env(False)
    env = {k: v for k, v in env.items() if not k.startswith("PYTEST")}
    proc = run(["-c", PROBE], tmp_path, env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = json.loads(proc.stdout.strip().splitlines()[-1])
    # (`kernels` may be the checkout's folder here: this pytest run has the checkout's root on sys.path, as a host
    # run has the host's root, and workers inherit it; only gpu_memsafety.* must be ours.)
    assert {n: f for n, f in files.items() if n.startswith("gpu_memsafety") and not own(f)} == {}


CLAIM = f"""
import json, sys
import fixtures, kernels                      # the PyPI packages, imported first (as another plugin might)
before = [fixtures.__file__, kernels.__file__]
import pytest
code = pytest.main([{str(Path(ROOT) / 'scenarios')!r}, "--collect-only", "-q", "-p", "no:cacheprovider",
                    "--rootdir", {str(ROOT)!r}, "-c", {str(Path(ROOT) / 'pyproject.toml')!r}])
import gpu_memsafety.kernels.planted.adapter
after = {{name: sys.modules[name].__file__ for name in ("gpu_memsafety.fixtures.plugin", "gpu_memsafety.kernels.planted.adapter")}}
print(json.dumps({{"code": int(code), "before": before, "after": after,
                  "still": [sys.modules["fixtures"].__file__, sys.modules["kernels"].__file__]}}))
"""


def test_a_foreign_package_imported_first_changes_nothing(tmp_path: Path) -> None:
    for dist in FOREIGN:
        foreign_init(dist)
    proc = run(["-c", CLAIM], tmp_path, clean_env())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not any(own(f) for f in data["before"]), "the foreign packages were not imported first"
    assert data["code"] == 0
    assert all(own(f) for f in data["after"].values()), data["after"]
    assert data["still"] == data["before"]          # nobody's `kernels` / `fixtures` was replaced


def test_this_test_process_uses_the_repositorys_modules() -> None:
    import gpu_memsafety
    import gpu_memsafety.fixtures.plugin
    import gpu_memsafety.kernels.planted.adapter
    import gpu_memsafety.scenarios.planted_oob
    assert all(own(m.__file__) for m in (gpu_memsafety, gpu_memsafety.fixtures.plugin,
                                         gpu_memsafety.kernels.planted.adapter, gpu_memsafety.scenarios.planted_oob))
