"""The installed package next to the stacks its users have (issue 51): a wheel built from this checkout goes into a
fresh venv that already holds a torch/triton/numpy/pytest set, with pip's ordinary resolution; pip must neither
fail (ResolutionImpossible) nor change any package already there (no downgrade, no upgrade). Then
`pytest --gpu-memsafety`, run there on a small suite with a planted overread and a planted overwrite, must find
both at their exact bytes without any environment variable set.

Not part of `make test` (it installs several GB of wheels): `make stacks` runs it, and .ci/run does. pip's own
cache (~/.cache/pip) keeps the wheels, so a second run downloads nothing. The stacks, as the package index and
this machine offered them on 2026-12-07 (`pip index versions`, `pip install --dry-run --no-deps --report` for each
torch's own triton pin):

- newest: torch 2.14.1 (PyPI's build: CUDA libraries, runs on the CPU) with the triton it pins, 3.8.0, numpy 2.4.6,
  pytest 9.2.0. PyPI has torch 2.15.0 (triton 3.9.0), but pip on these machines is capped at torch<=2.14.1
  (/etc/xdg/pip); triton 3.9.0 is run by the next stack.
- newest-cpu: a CPU build of torch (2.13.0+cpu, the one on this machine's disk; PyTorch's CPU index is out of
  reach here), which pins no triton, with the newest triton on PyPI, 3.9.0, numpy 2.4.6, pytest 9.2.0.
- oldest: the lower bounds pyproject.toml declares: torch 2.8.0 (triton 3.4.0, its pin), numpy 1.26.4, pytest 8.4.0.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from gpu_memsafety.util import jsonio     # the one strict reader: a key named twice is refused

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import bootstrap  # noqa: E402

PIP_TIMEOUT_S = 1800       # a first run downloads the stack (a few GB for a CUDA build of torch)


@dataclass(frozen=True)
class Stack:
    name: str
    pins: tuple[str, ...]        # what the user's venv holds before our wheel goes in


STACKS = [
    Stack("newest", ("torch==2.14.1", "triton==3.8.0", "numpy==2.4.6", "pytest==9.2.0")),
    Stack("newest-cpu", ("torch==2.13.0+cpu", "triton==3.9.0", "numpy==2.4.6", "pytest==9.2.0")),
    Stack("oldest", ("torch==2.8.0", "triton==3.4.0", "numpy==1.26.4", "pytest==8.4.0")),
]

PLANTED = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_reads_two_past(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n + 2)             # 2 elements past x's end: 8 B at +40..+48
    y = tl.load(y_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, tl.where(offs < n, x, 0.0) + y, mask=offs < n)


@triton.jit
def shift_writes_before(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs - 1, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)   # out[-1]: 4 B at -4..0


def test_overread():
    a = torch.arange(10, dtype=torch.float32)
    c = torch.empty(10)
    add_reads_two_past[(1,)](a, torch.ones(10), c, 10, BLOCK=16)
    assert torch.equal(c, a + 1)


def test_overwrite_before_start():
    src = torch.arange(8, dtype=torch.float32)
    dst = torch.zeros(8)
    shift_writes_before[(1,)](src, dst, 8, BLOCK=8)
    assert torch.equal(dst[:7], src[1:])


def test_clean():
    x = torch.ones(4)
    assert x.sum() == 4
'''
# The suite's own choice, as test_host_trace.py's suite makes it: Triton's interpreter set before triton is imported.
INTERPRET_CONFTEST = 'import os\nos.environ["TRITON_INTERPRET"] = "1"\n'


def clean_env() -> dict[str, str]:
    """This machine's environment without anything a run could lean on: no TRITON_*, no PYTEST_*, no CUDA_*, no
    PYTHONPATH, no venv of ours; nothing is added. (CI's machine has no GPU: the bare flag traces there.)"""
    drop = ("TRITON_", "PYTEST", "GPU_MEMSAFETY", "VIRTUAL_ENV", "CUDA_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(ROOT)))
    return env


def run(argv: list[str], *, cwd: Path | None = None, timeout: float = PIP_TIMEOUT_S) -> subprocess.CompletedProcess:
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout)
    print(f"[{time.monotonic() - start:6.1f} s] {' '.join(argv)[:160]} -> exit {proc.returncode}")
    return proc


def versions(python: Path) -> dict[str, str]:
    proc = run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {d["name"].lower().replace("_", "-"): d["version"] for d in json.loads(proc.stdout)}


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout as a wheel, built as a user's `pip wheel .` would (the build backend pyproject.toml names)."""
    out = tmp_path_factory.mktemp("wheel")
    # from a copy of the checkout's files (tracked, and new ones git does not ignore): an in-tree build would leave
    # build/ and *.egg-info in the checkout
    src = tmp_path_factory.mktemp("src")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    proc = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)])
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    (built,) = out.glob("gpu_memsafety-*.whl")
    return built


@dataclass
class Installed:
    stack: Stack
    python: Path
    base: Path
    before: dict[str, str]
    after: dict[str, str]
    pip_output: str
    pip_exit: int


def stack_site(stack: Stack) -> Path:
    """The site-packages of a venv holding exactly `stack`, built once per machine and Python under
    $GPU_MEMSAFETY_STACKS (default ~/.cache/gpu-memsafety/stacks) and reused: the CUDA builds of torch unpack to
    about 5 GB, which a run need not pay again. Never changed after it is built: each test run layers a fresh venv
    on it (as bootstrap layers .venv on a runner's interpreter), so what the wheel's install would change lands in
    the fresh venv, where the comparison sees it."""
    home = Path(os.environ.get("GPU_MEMSAFETY_STACKS", Path.home() / ".cache" / "gpu-memsafety" / "stacks"))
    tag = f"{stack.name}-py{sys.version_info[0]}{sys.version_info[1]}"
    venv = home / tag
    stamp = venv / "stack.json"
    if stamp.exists() and jsonio.loads(stamp.read_text()) == list(stack.pins):
        return site_of(venv / "bin" / "python")
    if venv.exists():                        # another stack's leftovers, or a build that stopped half way
        subprocess.run(["rm", "-rf", "--", str(venv)], check=True)
    home.mkdir(parents=True, exist_ok=True)
    assert run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    proc = run([str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                *stack.pins])
    assert proc.returncode == 0, f"the {stack.name} stack itself did not install:\n{(proc.stdout + proc.stderr)[-4000:]}"
    stamp.write_text(json.dumps(list(stack.pins)))           # last: a stamp means the whole stack is there
    return site_of(venv / "bin" / "python")


def site_of(python: Path) -> Path:
    proc = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], timeout=60)
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip())


def install_next_to(stack: Stack, wheel: Path, venv: Path) -> Installed:
    """A fresh venv that holds the stack (layered on its cached venv), then `wheel` installed into it with pip's
    ordinary resolution."""
    base = stack_site(stack)
    # no pip or setuptools of its own, which would shadow the stack's: all it sees is the stack (pip included)
    assert run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(venv)]).returncode == 0
    python = venv / "bin" / "python"
    (site_of(python) / "_stack.pth").write_text(f"{base}\n")
    before = versions(python)
    for pin in stack.pins:
        req = Requirement(pin)
        assert req.name in before and req.specifier.contains(before[req.name], prereleases=True), \
            (pin, before.get(req.name))
    proc = run([str(python), "-m", "pip", "install", "--disable-pip-version-check", str(wheel)])
    return Installed(stack, python, base, before, versions(python), proc.stdout + proc.stderr, proc.returncode)


def problems(installed: Installed) -> list[str]:
    """What the install did wrong: a failed resolution, a package of the stack changed, or the cache written."""
    out = []
    if installed.pip_exit != 0 or "ResolutionImpossible" in installed.pip_output:
        out.append(f"pip install failed (exit {installed.pip_exit}):\n{installed.pip_output[-3000:]}")
    changed = {n: (v, installed.after.get(n)) for n, v in installed.before.items() if installed.after.get(n) != v}
    if changed:
        out.append(f"installing the wheel changed what the {installed.stack.name} stack held: {changed}")
    if list(installed.base.glob("gpu_memsafety*")):
        out.append("the wheel went into the cached stack, not the fresh venv")
    return out


@pytest.fixture(scope="module", params=STACKS, ids=[s.name for s in STACKS])
def installed(request: pytest.FixtureRequest, wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    stack: Stack = request.param
    return install_next_to(stack, wheel, tmp_path_factory.mktemp(f"venv-{stack.name}"))


def test_the_stacks_span_the_declared_ranges() -> None:
    """Each end of every range pyproject.toml declares for torch, triton, numpy and pytest is a stack here: the
    oldest stack is the lower bounds; no stack falls outside a range."""
    project = bootstrap.read_project((ROOT / "pyproject.toml").read_text())
    declared = {Requirement(r).name: Requirement(r) for r in project["dependencies"]}
    oldest = next(s for s in STACKS if s.name == "oldest")
    for pin in oldest.pins:
        req = Requirement(pin)
        low = next(Version(s.version) for s in declared[req.name].specifier if s.operator == ">=")
        (exact,) = req.specifier
        assert Version(exact.version).release[:len(low.release)] == low.release, (pin, str(declared[req.name]))
    for stack in STACKS:
        for pin in stack.pins:
            req = Requirement(pin)
            (exact,) = req.specifier
            assert declared[req.name].specifier.contains(exact.version), (stack.name, pin, str(declared[req.name]))


def test_installs_without_a_resolution_error_and_changes_nothing_there(installed: Installed) -> None:
    assert not problems(installed), "\n".join(problems(installed))
    assert "gpu-memsafety" in installed.after and "pytest-xdist" not in installed.after   # xdist is optional


def test_the_check_sees_a_downgrade(tmp_path: Path) -> None:
    """A test of the test: a package that asks numpy<2.4 (as gpu-memsafety did) next to numpy 2.4.6 is a problem.
    (numpy 2.3.5 lies in this machine's local index: nothing is downloaded.)"""
    src = tmp_path / "src"
    (src / "probe_pin").mkdir(parents=True)
    (src / "probe_pin" / "__init__.py").write_text("")
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=70.1"]\nbuild-backend = '
                                        '"setuptools.build_meta"\n[project]\nname = "probe-pin"\nversion = "1"\n'
                                        'dependencies = ["numpy<2.4"]\n')
    proc = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
                str(src)])
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    (probe,) = tmp_path.glob("probe_pin-*.whl")
    stack = next(s for s in STACKS if s.name == "newest-cpu")
    found = problems(install_next_to(stack, probe, tmp_path / "venv"))
    assert any("'numpy': ('2.4.6', '2.3" in p for p in found), found


def planted_run(installed: Installed, root: Path, *, conftest: str = "") -> tuple[subprocess.CompletedProcess, dict]:
    root.mkdir()
    (root / "test_planted.py").write_text(PLANTED)
    if conftest:
        (root / "conftest.py").write_text(conftest)
    proc = run([str(installed.python), "-m", "pytest", "-p", "no:cacheprovider", "--gpu-memsafety",
                "--gpu-memsafety-report-dir", "r"], cwd=root, timeout=900)
    report = root / "r" / "report.json"
    assert report.exists(), (proc.stdout + proc.stderr)[-6000:]
    by = {c["id"].split("::")[-1]: c for c in jsonio.loads(report.read_text())["cases"]}
    return proc, by


def assert_planted_found(proc: subprocess.CompletedProcess, by: dict) -> None:
    out = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 1, out
    (read,) = by["test_overread"]["findings"]
    assert (read["kind"], read["buffer"], read["region"], read["bytes"]) == ("overread", "x_ptr", "past_end", 8), out
    assert [(r["start"], r["end"]) for r in read["ranges"]] == [(40, 48)]
    (write,) = by["test_overwrite_before_start"]["findings"]
    assert (write["kind"], write["buffer"], write["region"], write["bytes"]) == \
        ("overwrite", "out_ptr", "before_start", 4), out
    assert [(r["start"], r["end"]) for r in write["ranges"]] == [(-4, 0)]
    assert by["test_clean"]["findings"] == [], by["test_clean"]


def test_the_trace_finds_the_planted_bugs_when_the_suite_sets_the_interpreter(installed: Installed,
                                                                             tmp_path: Path) -> None:
    """The trace itself on this stack: the suite's conftest sets TRITON_INTERPRET=1, as test_host_trace's does."""
    assert_planted_found(*planted_run(installed, tmp_path / "suite", conftest=INTERPRET_CONFTEST))


def test_the_bare_flag_finds_the_planted_bugs_with_no_environment_variable(installed: Installed,
                                                                          tmp_path: Path) -> None:
    """What a user does: install, run `pytest --gpu-memsafety`, nothing else set."""
    assert_planted_found(*planted_run(installed, tmp_path / "suite"))
