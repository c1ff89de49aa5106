"""Set up the project's environment on first use; do nothing on later runs (stdlib only).

- Creates `.venv` layered on the interpreter that runs this script: that interpreter's site-packages are
  made visible inside the venv (a .pth file), so a GPU runner's existing torch and triton are reused, never
  downloaded again, even when that interpreter is itself a venv (where --system-site-packages would not see them).
- torch, when missing: a local CPU wheel where the machine provides one ($TORCH_WHEEL_DIR, /opt/wheels),
  else on a machine without an NVIDIA driver the CPU build from PyTorch's CPU index, else PyPI's build.
- Then the dependencies listed in pyproject.toml (and the `test` extra for `make test`). pip does not touch
  the network for requirements already satisfied.
- Writes a stamp holding a hash of pyproject.toml and this file; `make` re-runs bootstrap only when they change.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
DEFAULT_WHEEL_DIRS = ("/opt/wheels",)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", default=str(ROOT / ".venv"))
    ap.add_argument("--extras", default="", help="comma-separated optional-dependency groups")
    args = ap.parse_args()
    venv = Path(args.venv)
    extras = [e for e in args.extras.split(",") if e]
    stamp = venv / f".bootstrap-{'-'.join(extras) or 'base'}"
    digest = _digest()
    if stamp.exists() and stamp.read_text() == digest:
        return 0
    python = _make_venv(venv)
    if not _has(python, "torch"):
        _install_torch(python)
    _pip(python, _requirements(extras))
    stamp.write_text(digest)
    print(f"bootstrap: environment ready in {venv}")
    return 0


def _digest() -> str:
    data = (ROOT / "pyproject.toml").read_bytes() + Path(__file__).read_bytes()
    return hashlib.sha256(data).hexdigest()


def _make_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    layers = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    (Path(site) / "_gpu_memsafety_base.pth").write_text("".join(f"{p}\n" for p in layers))
    return python


def _has(python: Path, module: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 1)"
    return subprocess.run([str(python), "-c", code]).returncode == 0


def _has_nvidia_driver() -> bool:
    return shutil.which("nvidia-smi") is not None or Path("/proc/driver/nvidia").exists()


def _local_torch_wheel() -> str | None:
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    dirs = [os.environ.get("TORCH_WHEEL_DIR", ""), *DEFAULT_WHEEL_DIRS]
    for d in filter(None, dirs):
        found = sorted(glob.glob(os.path.join(d, f"torch-*{tag}-{tag}-*linux*.whl")))
        if found:
            return found[-1]
    return None


def _install_torch(python: Path) -> None:
    wheel = _local_torch_wheel()
    if wheel:
        _pip(python, [wheel])
    elif not _has_nvidia_driver():
        _pip(python, ["torch", "--index-url", CPU_INDEX])
    else:
        _pip(python, ["torch"])


def _requirements(extras: list[str]) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project.get("optional-dependencies", {}).get(extra, [])
    return reqs


def _pip(python: Path, args: list[str]) -> None:
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *args]
    print("bootstrap:", " ".join(cmd[3:]))
    subprocess.run(cmd, check=True)


if __name__ == "__main__":
    sys.exit(main())
