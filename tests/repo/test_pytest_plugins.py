"""The base interpreter's pytest plugins (pytest-benchmark, ...) are visible through the venv's layering but
must not load into the project's runs: only xdist and our plugin do, on the controller and on xdist workers."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_memsafety.util.paths import CHECKOUT as ROOT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

PLUGIN = '''
import os
from pathlib import Path

def pytest_configure(config):
    Path(os.environ["LEAK_MARK"]).mkdir(exist_ok=True)
    (Path(os.environ["LEAK_MARK"]) / str(os.getpid())).write_text(os.environ.get("PYTEST_XDIST_WORKER", "main"))
'''

PROBE = '''
import os

def test_runs_on_a_worker(request):
    assert os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw")
    assert request.config.pluginmanager.has_plugin("gpu_memsafety")
'''


def leaky_site(tmp_path: Path) -> Path:
    """A site folder with a plugin registered the way pytest-benchmark is: a pytest11 entry point."""
    site = tmp_path / "site"
    info = site / "leaky_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: leaky-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nleaky = leaky_plugin\n")
    (site / "leaky_plugin.py").write_text(PLUGIN)
    return site


def _pytest(args: list[str], cwd: Path, site: Path, mark: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]), LEAK_MARK=str(mark))
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_base_plugin_loads_elsewhere_but_not_in_project_runs_nor_on_xdist_workers(tmp_path: Path) -> None:
    site = leaky_site(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "test_one.py").write_text("def test_one():\n    pass\n")
    control = _pytest(["-q", "test_one.py"], outside, site, tmp_path / "control")
    assert control.returncode == 0, control.stdout + control.stderr
    assert list((tmp_path / "control").iterdir()), "the fake plugin did not load even outside: the test proves nothing"

    probe = ROOT / "tests" / "repo" / f"test_zz_plugin_probe_{os.getpid()}.py"
    probe.write_text(PROBE)
    try:
        run = _pytest(["-q", "-n", "2", str(probe)], ROOT, site, tmp_path / "project")
    finally:
        probe.unlink()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout
    assert not (tmp_path / "project").exists(), "a base interpreter's plugin loaded into the project's run"
