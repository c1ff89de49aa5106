"""tools/bootstrap.py: Python 3.10 without tomllib, a clear refusal below requires-python, pins that fit
together, the runner's torch and triton never shadowed (a fake base site-packages), PyPI's torch when the
CPU index cannot be reached, and pip without -q."""
from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from gpu_memsafety.util.paths import CHECKOUT as ROOT

sys.path.insert(0, str(ROOT / "tools"))
import bootstrap  # noqa: E402

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

try:
    import tomllib
except ModuleNotFoundError:       # Python 3.10: what compares with tomllib skips; the rest reads as bootstrap does
    tomllib = None  # type: ignore[assignment]
needs_tomllib = pytest.mark.skipif(tomllib is None, reason="Python 3.10 has no tomllib to compare the reader with")

PYPROJECT = (ROOT / "pyproject.toml").read_text()
PROJECT = bootstrap.read_project(PYPROJECT)
PYENV = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))) / "versions"


def _wanted(project: dict) -> dict:
    return {k: project[k] for k in ("requires-python", "dependencies", "optional-dependencies") if k in project}


def find_python(minor: int) -> str | None:
    """A python3.<minor> on this machine: $GPU_MEMSAFETY_PY3<minor>, PATH, or pyenv's versions."""
    named = os.environ.get(f"GPU_MEMSAFETY_PY3{minor}")
    candidates = [named] if named else []
    candidates += [shutil.which(f"python3.{minor}") or ""]
    candidates += sorted(str(p) for p in PYENV.glob(f"3.{minor}.*/bin/python3.{minor}"))
    for c in filter(None, candidates):
        proc = subprocess.run([c, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
        if proc.returncode == 0 and proc.stdout.strip() == f"(3, {minor})":
            return c
    return None


# ---- reading pyproject.toml without tomllib ----

@needs_tomllib
def test_minimal_reader_reads_the_real_pyproject_as_tomllib_does() -> None:
    assert bootstrap.read_project_minimal(PYPROJECT) == _wanted(tomllib.loads(PYPROJECT)["project"])


TRICKY = '''
# [project] in a comment
[build-system]
requires = ["setuptools"]
[project]
name = "x"   # a comment with ] and " in it
description = """several
lines = [ with brackets"""
requires-python = '>=3.10'
authors = [{name = "a", email = "b"}]
dependencies = [  # comment [
    "torch>=2.8,<2.15",            # PyPI's torch: a "quote" ]
    'kernels[extra]>=0.4',
    "a#b; python_version >= '3.10'",

    "numpy>=1.26",]
[project.urls]
dependencies = "not this one"
[project.optional-dependencies]
gpu = ["cuda-bindings>=12.6,<14"]
test = [
  "junitparser",
]
[tool.x]
nested = [
  [1, 2],
  ["project"],
]
'''


@needs_tomllib
def test_minimal_reader_agrees_with_tomllib_on_comments_quotes_and_layouts() -> None:
    assert bootstrap.read_project_minimal(TRICKY) == _wanted(tomllib.loads(TRICKY)["project"])


@pytest.mark.parametrize("text,message", [
    ("[project]\ndependencies = [1, 2]\n", "line 2: expected a string or an array of strings, found '[1, 2]'"),
    ("[project]\ndependencies = [\n  \"a\",\n", "line 2: array of 'dependencies' never closed"),
    ("[project]\nrequires-python\n", "line 2: cannot read 'requires-python'"),
])
def test_minimal_reader_refuses_what_it_cannot_read(text: str, message: str) -> None:
    with pytest.raises(bootstrap.BootstrapError, match=message.replace("[", r"\[").replace("]", r"\]")):
        bootstrap.read_project_minimal(text)


@needs_tomllib
def test_without_tomllib_bootstrap_uses_the_minimal_reader() -> None:
    code = ("import sys, json; sys.modules['tomllib'] = None; sys.path.insert(0, 'tools'); import bootstrap; "
            "print(json.dumps(bootstrap.read_project(open('pyproject.toml').read())))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout) == _wanted(tomllib.loads(PYPROJECT)["project"])


@needs_tomllib
def test_bootstrap_reads_pyproject_on_python_3_10() -> None:
    py310 = find_python(10)
    if py310 is None:
        pytest.skip("no Python 3.10 on this machine (set GPU_MEMSAFETY_PY310 to one)")
    code = ("import sys, json; sys.path.insert(0, 'tools'); import bootstrap; "
            "p = bootstrap.read_project(open('pyproject.toml').read()); "
            "bootstrap.check_python(p['requires-python'], sys.version_info[:3]); print(json.dumps(p))")
    proc = subprocess.run([py310, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == _wanted(tomllib.loads(PYPROJECT)["project"])


def test_every_project_file_compiles_on_python_3_10() -> None:
    """Syntax newer than 3.10 (PEP 695 generics, nested same-quote f-strings, except*) would fail here."""
    py310 = find_python(10)
    if py310 is None:
        pytest.skip("no Python 3.10 on this machine (set GPU_MEMSAFETY_PY310 to one)")
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    code = ("import sys\nbad = []\nfor f in sys.argv[1:]:\n    try: compile(open(f).read(), f, 'exec')\n"
            "    except SyntaxError as e: bad.append(f'{f}:{e.lineno}: {e.msg}')\nprint('\\n'.join(bad))")
    proc = subprocess.run([py310, "-c", code, *files], cwd=ROOT, capture_output=True, text=True)
    assert len(files) > 50 and proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr


# ---- Python version ----

def test_python_older_than_requires_python_is_refused_clearly() -> None:
    bootstrap.check_python(">=3.10", (3, 10, 0))
    with pytest.raises(bootstrap.BootstrapError, match=r"Python 3.10 or newer is needed \(requires-python >=3.10\); "
                                                       r"this is Python 3.9.18"):
        bootstrap.check_python(">=3.10", (3, 9, 18))
    with pytest.raises(bootstrap.BootstrapError, match="expected '>=X.Y'"):
        bootstrap.check_python("~=3.10", (3, 11, 0))


def test_a_real_python_3_9_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    py39 = find_python(9)
    if py39 is None:
        pytest.skip("no Python 3.9 on this machine (set GPU_MEMSAFETY_PY39 to one)")
    proc = subprocess.run([py39, str(ROOT / "tools" / "bootstrap.py"), "--venv", str(tmp_path / "v")],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "bootstrap: Python 3.10 or newer is needed (requires-python >=3.10); this is Python 3.9" in proc.stderr
    assert not (tmp_path / "v").exists()


# ---- pins ----

# The triton each PyPI torch release pins (its Requires-Dist, read with `pip install --dry-run --no-deps --report`
# on 2026-12-07): a fresh GPU install takes torch and triton together.
PYPI_TORCH_TRITON = {"2.4": "3.0.0", "2.5": "3.1.0", "2.6": "3.2.0", "2.7": "3.3.0", "2.8": "3.4.0",
                     "2.9": "3.5.1", "2.10": "3.6.0", "2.11": "3.6.0", "2.12": "3.7.1", "2.13": "3.7.1",
                     "2.14": "3.8.0", "2.15": "3.9.0"}
TESTED_TRITON = "3.6.0"            # the default triton_kernels copy (sgl-kernel 0.3.21, matmul_ogs) runs on it
NUMPY_BREAKS_TRITON_36 = "2.4.0"   # its interpreter: "only 0-dimensional arrays can be converted to Python scalars"


def _reqs() -> dict[str, Requirement]:
    project = PROJECT
    groups = list(project["optional-dependencies"].values())
    deps = project["dependencies"] + [d for g in groups for d in g]
    return {Requirement(d).name: Requirement(d) for d in deps}


def test_declared_bounds_fit_together() -> None:
    reqs = _reqs()
    runtime = ("torch", "triton", "numpy", "pytest", "pytest-xdist", "nvidia-ml-py", "rich", "cuda-bindings")
    for name in runtime:
        uppers = [s for s in reqs[name].specifier if s.operator in ("<", "<=", "==", "~=")]
        assert uppers, f"{name} has no upper bound: a new major release could break a fresh machine"
    # the package fits every PyPI torch from the oldest supported on, with the triton that torch pins (issue 51:
    # `triton<3.7` refused torch 2.14's triton 3.8 with ResolutionImpossible)
    allowed = [v for v in PYPI_TORCH_TRITON if reqs["torch"].specifier.contains(f"{v}.0")]
    assert allowed == list(PYPI_TORCH_TRITON)[list(PYPI_TORCH_TRITON).index("2.8"):], allowed
    assert all(PYPI_TORCH_TRITON[v] in reqs["triton"].specifier for v in allowed)
    assert reqs["numpy"].specifier.contains("2.4.6") and reqs["numpy"].specifier.contains("1.26.4")
    assert reqs["pytest"].specifier.contains("8.4.0") and not reqs["pytest"].specifier.contains("8.3.5")
    assert reqs["pytest"].specifier.contains("9.2.0")


def test_xdist_is_optional_for_the_installed_package() -> None:
    """A suite without xdist gets none: it is an extra (and in `test`, which `make test` runs with -n 2)."""
    assert "pytest-xdist" not in [Requirement(r).name for r in PROJECT["dependencies"]]
    for extra in ("xdist", "test"):
        assert "pytest-xdist" in [Requirement(r).name for r in PROJECT["optional-dependencies"][extra]]


def test_the_matrix_pins_lie_inside_the_declared_ranges() -> None:
    """The checkout's own stack (bootstrap's MATRIX_PINS) is one point of what the package declares."""
    reqs = _reqs()
    pins = {Requirement(p).name: Requirement(p) for p in bootstrap.MATRIX_PINS}
    assert TESTED_TRITON in pins["triton"].specifier and TESTED_TRITON in reqs["triton"].specifier
    assert not pins["numpy"].specifier.contains(NUMPY_BREAKS_TRITON_36), "numpy 2.4 breaks triton 3.6's interpreter"
    for name, pin in pins.items():
        assert any(reqs[name].specifier.contains(v) for v in (TESTED_TRITON, "2.3.5")), (name, pin)
    # the torch bootstrap takes from PyPI: exactly the releases whose own triton pin is the matrix's
    pypi = Requirement(bootstrap.PYPI_TORCH)
    fits = [v for v in PYPI_TORCH_TRITON if PYPI_TORCH_TRITON[v] in pins["triton"].specifier]
    assert pypi.name == "torch" and [v for v in PYPI_TORCH_TRITON if pypi.specifier.contains(f"{v}.0")] == fits
    assert all(reqs["torch"].specifier.contains(f"{v}.0") for v in fits)
    assert bootstrap.held_to_matrix(["triton>=3.4,<4", "rich", "numpy>=1.26,<3"]) == ["rich", *bootstrap.MATRIX_PINS]
    assert bootstrap.held_to_matrix(["rich"]) == ["rich"]


def test_requires_python_matches_what_bootstrap_accepts() -> None:
    requires = PROJECT["requires-python"]
    assert requires == ">=3.10"
    bootstrap.check_python(requires, (3, 10, 0))
    with pytest.raises(bootstrap.BootstrapError):
        bootstrap.check_python(requires, (3, 9, 99))


# ---- the runner's stack, torch install, pip ----

def fake_site(root: Path, dists: dict[str, str], cuda: str | None = None) -> Path:
    """A base site-packages holding fake distributions (name -> version); torch gets a version.py."""
    root.mkdir(parents=True, exist_ok=True)
    for name, version in dists.items():
        info = root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        pkg = root / name.replace("-", "_")
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
    if "torch" in dists:
        (root / "torch" / "version.py").write_text(f"__version__ = '{dists['torch']}'\ncuda: str | None = {cuda!r}\n")
    return root


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, python: Path, args: list[str]) -> None:
        self.calls.append(list(args))


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    return tmp_path / "venv"


def _run(monkeypatch: pytest.MonkeyPatch, venv: Path, base: Path, extras: list[str], *, driver: bool = False,
         reach: bool = True, wheel: str | None = None) -> Recorder:
    rec = Recorder()
    monkeypatch.setattr(bootstrap, "pip", rec)
    monkeypatch.setattr(bootstrap, "base_layers", lambda: [str(base)])
    monkeypatch.setattr(bootstrap, "_has_nvidia_driver", lambda: driver)
    monkeypatch.setattr(bootstrap, "unreachable", lambda url, timeout=0: None if reach else "Name or service not known")
    monkeypatch.setattr(bootstrap, "_local_torch_wheel", lambda: wheel)
    assert bootstrap.bootstrap(venv, extras, PROJECT) == 0
    *rest, editable = rec.calls           # the checkout itself comes last, editable, with nothing else
    assert editable == ["--no-deps", "--no-build-isolation", "--editable", str(bootstrap.ROOT)]
    assert bootstrap.SETUPTOOLS in rest[-1]
    rec.calls = [[a for a in call if a != bootstrap.SETUPTOOLS] for call in rest]
    return rec


def test_runner_torch_and_triton_are_never_reinstalled(venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    base = fake_site(tmp_path / "base", {"torch": "2.14.1", "triton": "3.8.0"}, cuda="12.8")
    rec = _run(monkeypatch, venv, base, ["gpu"], driver=True)
    (only,) = rec.calls
    names = [Requirement(r).name for r in only]
    assert "torch" not in names and "triton" not in names
    assert "numpy<2.4" in only and "rich>=13.7,<16" in only   # no numpy in the base: the pinned one
    bindings = Requirement(next(r for r in only if r.startswith("cuda-bindings")))
    assert bindings.specifier.contains("12.9.0") and not bindings.specifier.contains("13.0.0")
    out = capsys.readouterr().out
    assert "reusing the existing torch 2.14.1 (CUDA 12.8) and triton 3.8.0; neither is reinstalled" in out
    assert "the existing triton 3.8.0 is used as it is" in out
    assert (venv / ".bootstrap-gpu").read_text() == bootstrap._digest()
    # the layering: the venv's interpreter sees the base's torch, which is how it was found
    seen = bootstrap.installed(venv / "bin" / "python", ("torch", "triton"))
    assert seen == {"torch": "2.14.1", "triton": "3.8.0"}


def test_the_venv_has_its_own_pytest_command(venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51: pytest came from the base layer, so an activated venv's `pytest` was the base interpreter's, which
    has no gpu_memsafety (`pytest --gpu-memsafety`: unknown option). The venv gets its own command."""
    _run(monkeypatch, venv, fake_site(tmp_path / "base", {"torch": "2.13.0", "triton": "3.6.0"}), ["test"])
    script = venv / "bin" / "pytest"
    assert script.read_text().splitlines()[0] == f"#!{os.path.abspath(venv / 'bin' / 'python')}"
    assert "from pytest import console_main" in script.read_text() and os.access(script, os.X_OK)
    script.write_text("#!/bin/sh\n# pip's own\n")              # one pip installed is left alone
    (venv / ".bootstrap-test").unlink()
    _run(monkeypatch, venv, fake_site(tmp_path / "base2", {"torch": "2.13.0", "triton": "3.6.0"}), ["test"])
    assert script.read_text() == "#!/bin/sh\n# pip's own\n"


def test_runner_numpy_outside_the_pin_is_kept_with_a_note(venv: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The H200 image: torch 2.11, triton 3.6, numpy 2.5.2 and no package index: pip must not be asked for numpy."""
    base = fake_site(tmp_path / "base", {"torch": "2.11.0", "triton": "3.6.0", "numpy": "2.5.2"}, cuda="13.0")
    (only,) = _run(monkeypatch, venv, base, ["gpu"], driver=True).calls
    assert "numpy" not in [Requirement(r).name for r in only]
    assert "the existing numpy 2.5.2 is used as it is" in capsys.readouterr().out


def test_a_torch_an_earlier_bootstrap_put_in_the_venv_is_checked_against_the_pins(
        venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = next((venv / "lib").glob("python3*/site-packages"))
    fake_site(own, {"torch": "2.13.0+cpu", "triton": "3.9.0"})
    (only,) = _run(monkeypatch, venv, fake_site(tmp_path / "base", {}), ["test"]).calls
    assert "torch>=2.8,<3" in only and "triton>=3.6,<3.7" in only     # ours: brought back to the matrix's set


def test_a_cuda_torch_installed_by_bootstrap_also_holds_cuda_bindings(venv: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bootstrap, "torch_cuda", lambda python: "12.8")      # as after PyPI's torch went in
    calls = _run(monkeypatch, venv, fake_site(tmp_path / "base", {}), ["gpu"], driver=True).calls
    bindings = Requirement(next(r for r in calls[1] if r.startswith("cuda-bindings")))
    assert bindings.specifier.contains("12.9.0") and not bindings.specifier.contains("13.0.0")


def test_cuda_13_torch_gets_cuda_bindings_13(venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = fake_site(tmp_path / "base", {"torch": "2.14.1", "triton": "3.8.0"}, cuda="13.0")
    (only,) = _run(monkeypatch, venv, base, ["gpu"], driver=True).calls
    bindings = Requirement(next(r for r in only if r.startswith("cuda-bindings")))
    assert bindings.specifier.contains("13.5.0") and not bindings.specifier.contains("12.9.0")


def test_a_torch_without_triton_gets_the_pinned_triton(venv: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    base = fake_site(tmp_path / "base", {"torch": "2.13.0+cpu"})
    (only,) = _run(monkeypatch, venv, base, ["test"]).calls
    assert "triton>=3.6,<3.7" in only and not any(Requirement(r).name == "torch" for r in only)


def test_no_driver_installs_nothing_gpu_only(venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`make sanitize` on a CPU (issue 51): the gpu extra's cuda-bindings is neither asked for nor downloaded,
    and bootstrap says so once; xdist, which the run needs, is installed. With a driver it is."""
    base = fake_site(tmp_path / "base", {"torch": "2.13.0+cpu", "triton": "3.6.0", "numpy": "2.3.5"})
    (only,) = _run(monkeypatch, venv, base, ["gpu", "xdist"]).calls
    assert "cuda-bindings" not in [Requirement(r).name for r in only] and "pytest-xdist>=3.5,<4" in only
    assert "no NVIDIA driver: the 'gpu' extra (cuda-bindings) is not installed" in capsys.readouterr().out
    (venv / ".bootstrap-gpu-xdist").unlink()
    (only,) = _run(monkeypatch, venv, base, ["gpu", "xdist"], driver=True).calls
    assert "cuda-bindings" in [Requirement(r).name for r in only]


def test_the_makefile_stamp_is_the_one_bootstrap_writes(venv: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """make's target for the scenario runs is .bootstrap-gpu; bootstrap writes that stamp, so make runs it once."""
    import re
    recipe = re.search(r"^\$\(VENV\)/(\.bootstrap-gpu):.*\n\t(.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert recipe and "--stamp .bootstrap-gpu" in recipe.group(2) and "--extras gpu,xdist" in recipe.group(2)
    rec = Recorder()
    monkeypatch.setattr(bootstrap, "pip", rec)
    monkeypatch.setattr(bootstrap, "base_layers", lambda: [str(fake_site(tmp_path / "base", {"torch": "2.13.0"}))])
    monkeypatch.setattr(bootstrap, "_has_nvidia_driver", lambda: False)
    assert bootstrap.bootstrap(venv, ["gpu", "xdist"], PROJECT, ".bootstrap-gpu") == 0
    assert (venv / ".bootstrap-gpu").read_text() == bootstrap._digest()


def test_no_torch_no_driver_takes_the_cpu_index(venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _run(monkeypatch, venv, fake_site(tmp_path / "base", {}), ["test"])
    assert rec.calls[0] == ["torch>=2.8,<3", "--index-url", bootstrap.CPU_INDEX]
    assert "torch>=2.8,<3" in rec.calls[1] and "triton>=3.6,<3.7" in rec.calls[1]


def test_unreachable_cpu_index_falls_back_to_pypi_with_a_message(venv: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rec = _run(monkeypatch, venv, fake_site(tmp_path / "base", {}), ["test"], reach=False)
    assert rec.calls[0] == ["torch>=2.10,<2.12", "triton>=3.6,<3.7"]     # together: a torch whose triton fits
    out = capsys.readouterr().out
    assert f"PyTorch's CPU index {bootstrap.CPU_INDEX} cannot be reached (Name or service not known)" in out
    assert "from PyPI instead" in out


def test_a_local_wheel_comes_first(venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _run(monkeypatch, venv, fake_site(tmp_path / "base", {}), [], wheel="/w/torch-2.13.0+cpu-cp311.whl")
    assert rec.calls[0] == ["/w/torch-2.13.0+cpu-cp311.whl"]


def test_with_a_driver_torch_comes_from_pypi_with_its_triton(venv: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _run(monkeypatch, venv, fake_site(tmp_path / "base", {}), [], driver=True)
    assert rec.calls[0] == ["torch>=2.10,<2.12", "triton>=3.6,<3.7"]


@pytest.mark.parametrize("version,upgraded", [("23.0.1", True), ("23.2.1", False), ("26.1", False)])
def test_an_old_pip_is_upgraded_first(venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      version: str, upgraded: bool) -> None:
    base = fake_site(tmp_path / "base", {"pip": version, "torch": "2.14.1", "triton": "3.8.0"}, cuda="12.8")
    calls = _run(monkeypatch, venv, base, []).calls
    assert (calls[0] == ["--upgrade", "pip>=23.2"]) is upgraded and len(calls) == 1 + upgraded


def test_unknown_extra_is_named(venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(bootstrap.BootstrapError, match="no optional-dependencies group 'gpus'.*known: xdist, gpu, test"):
        _run(monkeypatch, venv, fake_site(tmp_path / "base", {}), ["gpus"])


def test_pip_shows_progress_and_a_failure_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake_run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 3)

    monkeypatch.setattr(bootstrap.subprocess, "run", fake_run)
    with pytest.raises(bootstrap.BootstrapError, match=r"pip install numpy<2.4 failed \(exit 3\)"):
        bootstrap.pip(Path("/v/bin/python"), ["numpy<2.4"])
    assert seen[0][:4] == ["/v/bin/python", "-m", "pip", "install"]
    assert "-q" not in seen[0] and "--quiet" not in seen[0]


def test_reachable_tells_an_answering_host_from_a_dead_one() -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404 if "missing" in self.path else 200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        assert bootstrap.unreachable(f"http://127.0.0.1:{port}/whl/cpu/torch/", timeout=5) is None
        assert bootstrap.unreachable(f"http://127.0.0.1:{port}/missing", timeout=5) is None   # a 404 is an answer
    finally:
        server.shutdown()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    assert "Connection refused" in (bootstrap.unreachable(f"http://127.0.0.1:{dead}/", timeout=5) or "")


def test_pin_sets_oldest_is_the_release_series_of_each_lower_bound() -> None:
    import pin_sets
    assert pin_sets.oldest("nvidia-ml-py>=12.535,<14") == "nvidia-ml-py==12.535.*"
    assert pin_sets.oldest("numpy>=1.26,<2.4") == "numpy==1.26.*"
    assert pin_sets.oldest("kernels") == "kernels"
    for req in bootstrap.requirements(PROJECT, ["test", "gpu"]):
        old = Requirement(pin_sets.oldest(req))
        low = next(s.version for s in Requirement(req).specifier if s.operator == ">=")
        assert old.specifier.contains(low) and Requirement(req).specifier.contains(low), (req, old)


def test_the_setuptools_that_builds_the_checkout_has_bdist_wheel_built_in() -> None:
    """A fresh Python 3.10 venv ships setuptools 65.5, which satisfied the old `>=64` and then failed the editable
    install with "invalid command 'bdist_wheel'" (it needs the separate `wheel` package before 70.1). bootstrap
    asks for a setuptools with it built in, and the build system pyproject.toml declares says the same."""
    import re
    pin = re.fullmatch(r"setuptools>=(\d+)\.(\d+)", bootstrap.SETUPTOOLS)
    assert pin and (int(pin[1]), int(pin[2])) >= (70, 1), bootstrap.SETUPTOOLS
    assert f'requires = ["{bootstrap.SETUPTOOLS}"]' in (ROOT / "pyproject.toml").read_text()
