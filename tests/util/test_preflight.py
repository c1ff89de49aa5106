"""Bad environments get one sentence naming what was found and what is needed (util/preflight.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_memsafety.util import preflight
from gpu_memsafety.util.paths import CHECKOUT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)


def test_python_outside_the_supported_range_is_named() -> None:
    with pytest.raises(preflight.PreflightError, match=r"needs Python >= 3.10 and < 3.14; this is Python 3.9.18"):
        preflight.python_version((3, 9, 18))
    preflight.python_version((3, 12, 3))


def test_the_pins_match_pyproject() -> None:
    text = (CHECKOUT / "pyproject.toml").read_text()
    for pin in preflight.NEEDED.values():
        assert f'"{pin}"' in text
    assert f'requires-python = ">={preflight.SUPPORTED_PYTHON[0][0]}.{preflight.SUPPORTED_PYTHON[0][1]}"' in text


def _cli(args: list[str], cwd: Path, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != "PYTHONPATH"}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "gpu_memsafety", *args], cwd=str(cwd), env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_host_folder_that_shadows_triton_is_named_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "triton").mkdir()
    (tmp_path / "triton" / "__init__.py").write_text("raise RuntimeError('the host repository own triton')\n")
    proc = _cli(["list"], tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"`import triton` loads {tmp_path / 'triton' / '__init__.py'}, which shadows the installed triton" in proc.stderr


def test_torch_missing_is_named_not_a_traceback(tmp_path: Path) -> None:
    """torch made unimportable the way a missing install looks (a site hook that hides it)."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import importlib.abc, sys\n"
        "class Hide(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, Hide())\n")
    proc = _cli(["list"], tmp_path, {"PYTHONPATH": str(hook)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "gpu-memsafety needs torch>=2.8,<3: no module named 'torch'" in proc.stderr


def test_the_cli_help_needs_no_stack(tmp_path: Path) -> None:
    (tmp_path / "triton").mkdir()
    (tmp_path / "triton" / "__init__.py").write_text("raise RuntimeError('never imported for --help')\n")
    proc = _cli(["--help"], tmp_path)
    assert proc.returncode == 0 and "usage: gpu-memsafety" in proc.stdout
