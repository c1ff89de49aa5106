"""Install the oldest or the newest dependency set pyproject.toml allows into a scratch venv and run the tests
that exercise those packages (Triton's interpreter with numpy, the markcheck probe, progress bars, pytest
plugins and xdist, bootstrap). Not part of `make test`: it downloads packages and takes minutes.

    python3 tools/pin_sets.py --set oldest --venv /tmp/pins-oldest
    python3 tools/pin_sets.py --set newest --venv /tmp/pins-newest

oldest: every dependency in the release series of its lower bound (`>=X` becomes `==X.*`: pip has no
lowest-version strategy, and `==12.535` would not match nvidia-ml-py's 12.535.161); newest: what pip picks.
torch is the exception: a CPU build comes from a local wheel ($TORCH_WHEEL_DIR, /opt/wheels) when there is
one, since PyTorch's CPU index may be out of reach; which torch ran is printed.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bootstrap  # noqa: E402

ROOT = bootstrap.ROOT
TESTS = ["tests/placement/test_markcheck.py", "tests/util/test_progress.py", "tests/repo/test_pytest_plugins.py",
         "tests/placement/test_guard.py", "tests/repo/test_bootstrap.py"]


def oldest(req: str) -> str:
    """`name>=X,<Y` as `name==X.*`; a requirement without a lower bound stays as it is."""
    m = re.search(r">=\s*([\w.]+)", req)
    return f"{bootstrap._name(req)}=={m.group(1)}.*" if m else req


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=("oldest", "newest"), required=True)
    ap.add_argument("--venv", type=Path, required=True)
    args = ap.parse_args()
    project = bootstrap.read_project((ROOT / "pyproject.toml").read_text())
    reqs = [r for r in bootstrap.requirements(project, ["test"]) if bootstrap._name(r) != "torch"]
    if args.set == "oldest":
        reqs = [oldest(r) for r in reqs]
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(args.venv)], check=True)
    python = args.venv / "bin" / "python"
    bootstrap.modern_pip(python)
    wheel = bootstrap._local_torch_wheel()
    bootstrap.pip(python, [wheel] if wheel else [bootstrap.PYPI_TORCH])
    bootstrap.pip(python, reqs)
    subprocess.run([str(python), "-m", "pip", "list"], check=True)
    return subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", *TESTS],
                          cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
