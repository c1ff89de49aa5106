"""The distribution as a user gets it: `pip install <checkout>` or a wheel, in a venv outside the checkout.

What a kernel team needs before anything else: one import name (`gpu_memsafety`) that cannot collide with their
own `kernels`, `fixtures`, `harness` or `scenarios`; the `gpu-memsafety` command; the pytest plugin through its
entry point, inert in their runs until asked. The wheel is built once per test session (setuptools, no
network: `--no-build-isolation`) and installed with `--no-deps` into a venv that sees this venv's packages
(torch, pytest ...) through `--system-site-packages`-like layering, from a directory outside the checkout.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gpu_memsafety.util.paths import CHECKOUT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = CHECKOUT
MAPPED = {"gpu_memsafety": "harness/gpu_memsafety", "gpu_memsafety.fixtures": "fixtures", "gpu_memsafety.kernels": "kernels",
          "gpu_memsafety.scenarios": "scenarios"}


def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:     # Python 3.10
        pytest.skip("needs tomllib (Python >= 3.11) to read pyproject.toml; found Python %d.%d" % sys.version_info[:2])
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_listed_and_mapped() -> None:
    """A new subpackage that pyproject.toml does not list would be missing from every wheel: listed = on disk."""
    setup = _pyproject()["tool"]["setuptools"]
    assert setup["package-dir"] == {k: v for k, v in MAPPED.items()}
    on_disk = set()
    for name, folder in MAPPED.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(base)
            on_disk.add(".".join([name, *rel.parts]) if rel.parts else name)
    assert sorted(setup["packages"]) == sorted(on_disk)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out),
                           str(ROOT)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [found] = out.glob("gpu_memsafety-*.whl")
    return found


def test_the_wheel_installs_one_top_level_name_and_its_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith((".dist-info", ".data"))}
    assert tops == {"gpu_memsafety"}
    for needed in ("gpu_memsafety/kernels/planted/planted_cuda.cu", "gpu_memsafety/kernels/pre_dispatch/pre_dispatch.cu",
                   "gpu_memsafety/scenarios/planted_oob.py", "gpu_memsafety/cli/example/scale_store.py",
                   "gpu_memsafety/fixtures/plugin.py"):
        assert needed in names, needed
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[pytest11]\ngpu_memsafety = gpu_memsafety.fixtures.plugin" in text
    assert "[console_scripts]\ngpu-memsafety = gpu_memsafety.cli.main:main" in text


@pytest.fixture(scope="module")
def user_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A fresh venv outside the checkout, layered on this one's packages, with the wheel installed."""
    base = tmp_path_factory.mktemp("user")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    ours = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    (Path(site) / "_layer.pth").write_text("".join(f"{p}\n" for p in ours))
    proc = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--force-reinstall",
                           str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    script = venv / "bin" / "pytest"      # pytest's console script as pip writes it (the layered pytest has none here)
    script.write_text(f"#!{python}\nimport sys\nfrom pytest import console_main\nsys.exit(console_main())\n")
    script.chmod(0o755)
    return venv


def _user_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != "PYTHONPATH"}


def _run(venv: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=str(cwd), env=_user_env(), capture_output=True, text=True, timeout=300)


def test_installed_imports_command_and_plugin_from_anywhere(user_venv: Path, tmp_path: Path) -> None:
    python = str(user_venv / "bin" / "python")
    where = _run(user_venv, [python, "-c", "import gpu_memsafety, gpu_memsafety.api as a; print(gpu_memsafety.__file__)"],
                 tmp_path)
    assert where.returncode == 0, where.stderr
    assert str(user_venv) in where.stdout and str(ROOT) not in where.stdout       # the installed copy, not the checkout
    cli = _run(user_venv, [str(user_venv / "bin" / "gpu-memsafety"), "--help"], tmp_path)
    assert cli.returncode == 0 and "repro" in cli.stdout and "upstream" in cli.stdout, cli.stderr
    same = _run(user_venv, [python, "-m", "gpu_memsafety", "--help"], tmp_path)
    assert same.stdout == cli.stdout
    helptext = _run(user_venv, [python, "-m", "pytest", "--help"], tmp_path)
    assert helptext.returncode == 0, helptext.stderr
    assert "GPU memory-safety harness" in helptext.stdout and "--gpu-memsafety-scenario-path" in helptext.stdout


def test_installed_lists_its_built_in_scenarios(user_venv: Path, tmp_path: Path) -> None:
    proc = _run(user_venv, [str(user_venv / "bin" / "gpu-memsafety"), "list", "--scenario", "planted_oob", "--ids"],
                tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert any(line.startswith("planted_oob[") for line in proc.stdout.splitlines())


HOST_TEST = '''
import torch

def test_adds():
    assert (torch.arange(3) + 1).tolist() == [1, 2, 3]

def test_fails():
    assert 1 == 2
'''


def test_a_host_suite_without_the_options_runs_as_without_the_plugin(user_venv: Path, tmp_path: Path) -> None:
    """Installed, the plugin loads in every pytest run; a run that asks nothing of it sees no difference: same
    outcomes, same exit code, and no module of the harness beyond the gate imported."""
    host = tmp_path / "host"
    (host / "kernels").mkdir(parents=True)
    (host / "kernels" / "__init__.py").write_text("")
    (host / "test_host.py").write_text(HOST_TEST + '''
import sys

def test_nothing_heavy_imported():
    heavy = [m for m in sys.modules if m.startswith(("gpu_memsafety.engine.runner", "gpu_memsafety.engine.worker",
                                                     "gpu_memsafety.kernels", "gpu_memsafety.fixtures.scenario_run",
                                                     "gpu_memsafety.plugin.scenario", "gpu_memsafety.plugin.suite",
                                                     "gpu_memsafety.scenarios", "gpu_memsafety.report", "triton"))]
    assert heavy == []
''')
    python = str(user_venv / "bin" / "python")
    with_plugin = _run(user_venv, [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], host)
    without = _run(user_venv, [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:gpu_memsafety"], host)
    assert with_plugin.returncode == without.returncode == 1
    tail = [line for line in with_plugin.stdout.splitlines() if " in " in line and ("passed" in line or "failed" in line)]
    tail_without = [line for line in without.stdout.splitlines() if " in " in line and ("passed" in line or "failed" in line)]
    assert tail and tail_without
    assert tail[-1].split(" in ")[0] == tail_without[-1].split(" in ")[0] == "1 failed, 2 passed"


def _host_repo(base: Path) -> Path:
    """A kernel team's repository: its own top-level `kernels` and `fixtures` packages (names the harness used
    to own, and PyPI packages of the same names are installed beside), and a scenario that imports its kernel
    from `kernels`, in a folder of its own."""
    example = ROOT / "harness" / "gpu_memsafety" / "cli" / "example"
    host = base / "host"
    for package in ("kernels", "fixtures"):
        (host / package).mkdir(parents=True)
        (host / package / "__init__.py").write_text(f'"""The host\'s own {package} package."""\nHOST = True\n')
    (host / "kernels" / "scale_kernel.py").write_text((example / "scale_kernel.py").read_text())
    (host / "gpu_scenarios").mkdir()
    text = (example / "scale_store.py").read_text()
    assert "import scale_kernel " in text
    text = text.replace("import scale_kernel ", "from kernels import scale_kernel  # the host's package\nimport fixtures\n"
                        "assert getattr(fixtures, 'HOST', False), fixtures.__file__\n#")
    (host / "gpu_scenarios" / "scale_store.py").write_text(text)
    return host


def test_a_host_repository_scenario_finds_its_bug_with_no_pythonpath(user_venv: Path, tmp_path: Path) -> None:
    """`pytest --gpu-memsafety-scenario-path DIR` from the host's root, with pytest's own console script (which puts nothing
    of the host on sys.path) and no PYTHONPATH: the scenario imports the host's `kernels.scale_kernel` in the
    pytest process and in the worker processes, and the planted store is found at its exact bytes."""
    host = _host_repo(tmp_path)
    proc = _run(user_venv, [str(user_venv / "bin" / "pytest"), "--gpu-memsafety-scenario-path", "gpu_scenarios", "--gpu-memsafety-mode", "guard",
                            "--gpu-memsafety-report-dir", "reports", "-p", "no:cacheprovider", "-q"], host)
    report = host / "reports" / "report.json"
    assert report.is_file(), proc.stdout[-4000:] + proc.stderr[-2000:]
    got = {c["id"]: c for c in json.loads(report.read_text())["cases"]}
    assert {cid: c["outcome"] for cid, c in got.items()} == {
        "scale_store[buggy-n1000]": "expected finding", "scale_store[buggy-n4096]": "expected finding",
        "scale_store[fixed-n1000]": "clean", "scale_store[fixed-n4096]": "clean"}, proc.stdout[-4000:]
    for n in (1000, 4096):
        [finding] = got[f"scale_store[buggy-n{n}]"]["findings"]
        assert (finding["kind"], finding["buffer"], finding["bytes"]) == ("overwrite", "out", 4)
        assert [(r["start"], r["end"]) for r in finding["ranges"]] == [(4 * n, 4 * n + 4)]
    assert proc.returncode == 0, proc.stdout[-3000:]
