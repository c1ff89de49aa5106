"""Set up the project's environment on first use; do nothing on later runs (stdlib only, Python >= 3.10).

- Refuses an interpreter older than pyproject.toml's `requires-python`, saying which one it found.
- Creates `.venv` layered on the interpreter that runs this script: that interpreter's site-packages are
  made visible inside the venv (a .pth file), so a GPU runner's existing torch and triton are reused, never
  downloaded again, even when that interpreter is itself a venv (where --system-site-packages would not see them).
- torch, when missing: a local CPU wheel where the machine provides one ($TORCH_WHEEL_DIR, /opt/wheels),
  else on a machine without an NVIDIA driver the CPU build from PyTorch's CPU index, else (or when that index
  cannot be reached, with a message) PyPI's build (PYPI_TORCH), together with the matrix's triton so the two fit.
- Then the dependencies listed in pyproject.toml (and the extras asked for), held to the scenario matrix's own
  versions (MATRIX_PINS: pyproject.toml declares the package's wide ranges, this file the checkout's exact
  stack). The `gpu` extra (cuda-bindings) only where there is an NVIDIA driver: a CPU machine fetches nothing
  GPU-only. When torch was already there (the runner's), its stack is left alone: torch, triton and numpy are
  not asked of pip, so a pinned triton is never installed over (and in front of) the one the runner's torch was
  built with; cuda-bindings is held to torch's CUDA major version (a torch an earlier bootstrap put inside the
  venv is checked against the pins like everything else). pip does not touch the network for requirements
  already satisfied, and runs without -q, so downloads show progress.
- Installs the checkout itself, editable (`pip install -e .`), so `gpu_memsafety` imports as when installed.
- Writes a stamp holding a hash of pyproject.toml and this file; `make` re-runs bootstrap only when they change.
"""
from __future__ import annotations

import argparse
import ast
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
DEFAULT_WHEEL_DIRS = ("/opt/wheels",)
REACH_TIMEOUT_S = 15        # how long to wait for PyTorch's CPU index before taking PyPI's torch
MIN_PIP = (23, 2)           # reads the metadata PyPI publishes (PEP 658/714): picking a torch whose triton fits
                            # the pin then downloads no wheel per candidate (older pips fetch each ~1 GB torch)
RUNNER_STACK = ("torch", "triton", "numpy")   # a GPU runner's own set: reused as it is, never reinstalled offline
SETUPTOOLS = "setuptools>=70.1"   # builds the editable install of the checkout (PEP 660); bdist_wheel is built in
                                   # only since 70.1 (Python 3.10's venv ships 65.5, which needs the `wheel` package)
# The scenario matrix's stack, for a fresh install of the checkout (`make test`, `make sanitize`); never asked of pip
# when torch is already there (the runner's stay). triton 3.6: what triton_kernels copies A (sgl-kernel 0.3.21,
# matmul_ogs) and C (sglang-kernel 0.4.6.post1) run on; copy D needs 3.8 and says "not applicable" on 3.6
# (cli/upstream.py). numpy < 2.4: triton 3.6's interpreter (triton#9171; the trace patches it, other paths do not).
MATRIX_PINS = ("triton>=3.6,<3.7", "numpy<2.4")
# PyPI's torch releases whose own triton pin is the matrix's (2.10 and 2.11: triton==3.6.0; 2.12 and later pin 3.7
# and newer): named so that pip never downloads newer ~900 MB wheels only to refuse them.
PYPI_TORCH = "torch>=2.10,<2.12"
GPU_ONLY_EXTRAS = ("gpu",)   # installed only on a machine with an NVIDIA driver


class BootstrapError(Exception):
    """A problem the user must fix; printed as one message, no traceback."""


def main(argv: list[str] | None = None) -> int:
    sys.stdout.reconfigure(line_buffering=True)   # type: ignore[union-attr]  # in order with pip's output in a log
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", default=str(ROOT / ".venv"))
    ap.add_argument("--extras", default="", help="comma-separated optional-dependency groups")
    ap.add_argument("--stamp", default="", help="the stamp's file name in the venv (default .bootstrap-EXTRAS)")
    args = ap.parse_args(argv)
    try:
        project = read_project((ROOT / "pyproject.toml").read_text())
        check_python(project.get("requires-python", ""), sys.version_info[:3])
        return bootstrap(Path(args.venv), [e for e in args.extras.split(",") if e], project, args.stamp)
    except BootstrapError as exc:
        print(f"bootstrap: {exc}", file=sys.stderr)
        return 1


def bootstrap(venv: Path, extras: list[str], project: dict, stamp_name: str = "") -> int:
    stamp = venv / (stamp_name or f".bootstrap-{'-'.join(extras) or 'base'}")
    digest = _digest()
    if stamp.exists() and stamp.read_text() == digest:
        return 0
    python = make_venv(venv, base_layers())
    modern_pip(python)
    requirements(project, extras)                 # an unknown extra is named before anything is installed
    if not _has_nvidia_driver():
        for extra in [e for e in extras if e in GPU_ONLY_EXTRAS]:
            group = project["optional-dependencies"][extra]
            print(f"bootstrap: no NVIDIA driver: the {extra!r} extra ({', '.join(_name(r) for r in group)}) "
                  "is not installed; what needs it says so when it runs")
        extras = [e for e in extras if e not in GPU_ONLY_EXTRAS]
    reqs = held_to_matrix(requirements(project, extras))
    found = installed(python, RUNNER_STACK)
    if "torch" not in found:
        install_torch(python, reqs, [PYPI_TORCH])
    elif not _inside(location(python, "torch"), venv):        # the runner's torch, seen through the layering
        reqs = keep_runner_stack(reqs, found, torch_cuda(python))
    # else a torch an earlier bootstrap put in this venv: pip checks it and its triton against the pins
    reqs = hold_cuda_bindings(reqs, torch_cuda(python))
    pip(python, [*reqs, SETUPTOOLS])
    install_checkout(python)
    own_commands(python)
    stamp.write_text(digest)
    print(f"bootstrap: environment ready in {venv}")
    return 0


# ---- pyproject.toml: tomllib where there is one (3.11+), else a reader of just what bootstrap needs ----

def read_project(text: str) -> dict:
    """The [project] table: requires-python, dependencies and optional-dependencies."""
    try:
        import tomllib
    except ModuleNotFoundError:      # Python 3.10: no tomllib, and nothing may be installed before bootstrap
        return read_project_minimal(text)
    return tomllib.loads(text)["project"]


_STRING = r'"(?:[^"\\]|\\.)*"|\'[^\']*\''


def read_project_minimal(text: str) -> dict:
    """Python 3.10's reader: [project] `requires-python` and `dependencies`, [project.optional-dependencies]
    arrays of strings (basic or literal, one or many lines, comments anywhere). Anything else in those two
    tables that it cannot read is an error naming the line, never a silent guess."""
    project: dict = {}
    table = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = _strip_comment(lines[i]).strip()
        start = i
        i += 1
        if not line:
            continue
        if line.startswith("["):
            table = line.strip("[] ")
            if table == "project.optional-dependencies":
                project.setdefault("optional-dependencies", {})
            continue
        if table not in ("project", "project.optional-dependencies"):
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip().strip('"'), value.strip()
        if not sep:
            raise BootstrapError(f"pyproject.toml line {start + 1}: cannot read {lines[start]!r}")
        if value.startswith(('"""', "'''")):           # a multi-line string (e.g. a description): skipped
            quote = value[:3]
            while value.count(quote) < 2:
                if i == len(lines):
                    raise BootstrapError(f"pyproject.toml line {start + 1}: string of {key!r} never closed")
                value += "\n" + lines[i]
                i += 1
            continue
        while _depth(value) > 0:                          # an array over several lines
            if i == len(lines):
                raise BootstrapError(f"pyproject.toml line {start + 1}: array of {key!r} never closed")
            value += " " + _strip_comment(lines[i]).strip()
            i += 1
        wanted = table == "project.optional-dependencies" or key in ("requires-python", "dependencies")
        if wanted:
            target = project["optional-dependencies"] if table == "project.optional-dependencies" else project
            target[key] = _value(value, start)
    return project


def _strip_comment(line: str) -> str:
    """`line` without a trailing # comment (a # inside a string stays)."""
    out, pos = "", 0
    for m in re.finditer(_STRING + r"|#", line):
        if m.group() == "#":
            return out + line[pos:m.start()]
        out += line[pos:m.end()]
        pos = m.end()
    return out + line[pos:]


def _depth(value: str) -> int:
    """Brackets opened and not closed in `value`, strings left out."""
    bare = re.sub(_STRING, '""', value)
    return bare.count("[") + bare.count("{") - bare.count("]") - bare.count("}")


def _value(value: str, line: int) -> object:
    """A TOML string or array of strings as Python; anything else is refused."""
    body = re.sub(r",\s*]$", "]", value.strip())          # TOML allows a trailing comma; so does Python
    if not re.fullmatch(rf"\s*(?:{_STRING}|\[\s*(?:(?:{_STRING})\s*,\s*)*(?:{_STRING})?\s*\])\s*", body):
        raise BootstrapError(f"pyproject.toml line {line + 1}: expected a string or an array of strings, "
                             f"found {value!r}")
    return ast.literal_eval(body)


# ---- Python version ----

def check_python(requires: str, version: tuple[int, ...]) -> None:
    """Refuse an interpreter older than `requires-python` (only the >=X.Y form is used here)."""
    m = re.fullmatch(r"\s*>=\s*(\d+)\.(\d+)\s*", requires)
    if not m:
        raise BootstrapError(f"pyproject.toml requires-python = {requires!r}: expected '>=X.Y'")
    need = (int(m.group(1)), int(m.group(2)))
    if tuple(version[:2]) < need:
        have = ".".join(map(str, version))
        raise BootstrapError(f"Python {need[0]}.{need[1]} or newer is needed (requires-python {requires}); "
                             f"this is Python {have} ({sys.executable}). Run make with PYTHON=python3.X "
                             f"naming a newer interpreter.")


# ---- the venv ----

def _digest() -> str:
    data = (ROOT / "pyproject.toml").read_bytes() + Path(__file__).read_bytes()
    return hashlib.sha256(data).hexdigest()


def base_layers() -> list[str]:
    """site-packages of the interpreter running bootstrap, made visible inside the venv."""
    return sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})


def make_venv(venv: Path, layers: list[str]) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "_gpu_memsafety_base.pth").write_text("".join(f"{p}\n" for p in layers))
    return python


def modern_pip(python: Path) -> None:
    """Upgrade the venv's pip when it is older than MIN_PIP (Python 3.10's ensurepip brings 23.0)."""
    version = installed(python, ("pip",)).get("pip")
    if version is None or tuple(int(x) for x in re.findall(r"\d+", version)[:2]) >= MIN_PIP:
        return
    need = ".".join(map(str, MIN_PIP))
    print(f"bootstrap: pip {version} is older than {need}; upgrading it in the venv first")
    try:
        pip(python, ["--upgrade", f"pip>={need}"])
    except BootstrapError as exc:
        print(f"bootstrap: note: {exc}; going on with pip {version}")


def installed(python: Path, names: tuple[str, ...]) -> dict[str, str]:
    """Distributions the venv's interpreter sees (its own or a base layer's): name -> version."""
    code = ("import importlib.metadata as m, json, sys\nout = {}\nfor n in sys.argv[1:]:\n"
            "    try: out[n] = m.version(n)\n    except m.PackageNotFoundError: pass\nprint(json.dumps(out))")
    proc = subprocess.run([str(python), "-c", code, *names], check=True, capture_output=True, text=True)
    return json.loads(proc.stdout)


def location(python: Path, name: str) -> Path | None:
    """The site-packages folder holding distribution `name` as the venv's interpreter sees it."""
    code = ("import importlib.metadata as m, sys\ntry: print(m.distribution(sys.argv[1]).locate_file(''))\n"
            "except m.PackageNotFoundError: pass")
    out = subprocess.run([str(python), "-c", code, name], check=True, capture_output=True, text=True).stdout.strip()
    return Path(out) if out else None


def _inside(path: Path | None, venv: Path) -> bool:
    return path is not None and path.resolve().is_relative_to(venv.resolve())


def torch_cuda(python: Path) -> str | None:
    """torch.version.cuda of the torch the venv sees (None for a CPU build), read without importing torch."""
    code = ("import importlib.util, pathlib, re\nspec = importlib.util.find_spec('torch')\n"
            "p = pathlib.Path(spec.origin).parent / 'version.py' if spec and spec.origin else None\n"
            "m = re.search(r\"^cuda[^=]*=\\s*'([^']*)'\", p.read_text(), re.M) if p and p.exists() else None\n"
            "print(m.group(1) if m else '')")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True).stdout.strip()
    return out or None


def _name(req: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def requirements(project: dict, extras: list[str]) -> list[str]:
    reqs = list(project["dependencies"])
    for extra in extras:
        group = project.get("optional-dependencies", {}).get(extra)
        if group is None:
            raise BootstrapError(f"no optional-dependencies group {extra!r} in pyproject.toml "
                                 f"(known: {', '.join(project.get('optional-dependencies', {}))})")
        reqs += group
    return reqs


def held_to_matrix(reqs: list[str]) -> list[str]:
    """`reqs` with each package MATRIX_PINS names asked for at the matrix's version instead (each pin lies inside
    the range pyproject.toml declares: tests/repo/test_bootstrap.py checks)."""
    pinned = {_name(p): p for p in MATRIX_PINS}
    return [r for r in reqs if _name(r) not in pinned] + [p for n, p in pinned.items()
                                                          if any(_name(r) == n for r in reqs)]


def keep_runner_stack(reqs: list[str], found: dict[str, str], cuda: str | None) -> list[str]:
    """Requirements for pip when the runner's torch is there: torch, triton and numpy are not asked for (pip would
    put the pinned ones in the venv, in front of the runner's, or fail on a runner without a package index)."""
    print(f"bootstrap: reusing the existing torch {found['torch']}"
          + (f" (CUDA {cuda})" if cuda else " (CPU build)")
          + (f" and triton {found['triton']}" if "triton" in found else "") + "; neither is reinstalled")
    wanted_triton = next((r for r in reqs if _name(r) == "triton"), None)
    if "triton" in found and wanted_triton:
        print(f"bootstrap: note: the scenario matrix pins {wanted_triton} for fresh installs (the triton_kernels "
              f"copies A and C run on it); the existing triton {found['triton']} is used as it is")
    wanted_numpy = next((r for r in reqs if _name(r) == "numpy"), None)
    if "numpy" in found and wanted_numpy:
        # The numpy pin is for Triton's interpreter (CPU runs); a GPU runner's kernels do not use it, and an
        # offline runner could not install another numpy anyway (seen on the H200 image: numpy 2.5.2).
        print(f"bootstrap: note: the scenario matrix pins {wanted_numpy} for Triton's interpreter (CPU runs); "
              f"the existing numpy {found['numpy']} is used as it is")
    out = [r for r in reqs if _name(r) not in RUNNER_STACK]
    if "triton" not in found and wanted_triton:
        out.append(wanted_triton)      # a torch without triton (a CPU build): nothing to shadow
    if "numpy" not in found and wanted_numpy:
        out.append(wanted_numpy)
    return out


def hold_cuda_bindings(reqs: list[str], cuda: str | None) -> list[str]:
    """cuda-bindings of the CUDA major torch was built for (cuda-bindings 13 needs a CUDA 13 driver, which
    that torch's own libraries need as well); unchanged for a CPU torch."""
    if not cuda:
        return reqs
    return [_same_cuda_major(r, int(cuda.split(".")[0])) if _name(r) == "cuda-bindings" else r for r in reqs]


def _same_cuda_major(req: str, major: int) -> str:
    """`req` further held to `>=major,<major+1`."""
    spec, _, marker = req.partition(";")
    spec = spec.strip() + ("," if re.search(r"[<>=!~]", spec) else "") + f">={major},<{major + 1}"
    return spec + (f"; {marker.strip()}" if marker else "")


# ---- torch ----

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


def unreachable(url: str, timeout: float = REACH_TIMEOUT_S) -> str | None:
    """Why `url` cannot be reached, or None when it answers (any HTTP status counts: the host is there)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None
    except urllib.error.URLError as exc:
        return str(exc.reason)
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def install_torch(python: Path, reqs: list[str], pypi_torch: list[str]) -> None:
    """torch where none is there: a local wheel, PyTorch's CPU build (no triton pin), else PyPI's build from
    the `pypi-torch` group, whose releases pin a triton inside ours (pip never walks back through newer
    ~550 MB wheels to find one that fits), installed together with our triton pin."""
    torch = next((r for r in reqs if _name(r) == "torch"), "torch")
    wheel = _local_torch_wheel()
    if wheel:
        print(f"bootstrap: torch from the local wheel {wheel}")
        pip(python, [wheel])
        return
    if not _has_nvidia_driver():
        why = unreachable(CPU_INDEX + "/torch/")
        if why is None:
            print(f"bootstrap: no NVIDIA driver: torch's CPU build from {CPU_INDEX}")
            pip(python, [torch, "--index-url", CPU_INDEX])
            return
        print(f"bootstrap: PyTorch's CPU index {CPU_INDEX} cannot be reached ({why}); installing torch from PyPI "
              "instead: its CUDA build, several GB, which also runs on the CPU")
    triton = [r for r in reqs if _name(r) == "triton"]
    pip(python, [*(pypi_torch or [torch]), *triton])


# Commands of packages the venv may see only through the layering (the base interpreter's pytest): pip installs
# no script for those, and the base's own script runs the base interpreter, which has no gpu_memsafety. Written
# into the venv's bin/ so that `pytest` in an activated venv is the venv's.
OWN_COMMANDS = {"pytest": "pytest:console_main"}


def own_commands(python: Path) -> None:
    for name, target in OWN_COMMANDS.items():
        script = python.parent / name
        if script.exists():
            continue
        module, func = target.split(":")
        script.write_text(f"#!{os.path.abspath(python)}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n")
        script.chmod(0o755)
        print(f"bootstrap: wrote {script} (the venv's own `{name}` command; its package comes from the base layer)")


def install_checkout(python: Path) -> None:
    """The checkout itself, as an editable install of the `gpu-memsafety` distribution: `gpu_memsafety` (its
    one import name) maps onto harness/gpu_memsafety/, fixtures/, kernels/ and scenarios/ here, the `gpu-memsafety` command
    and the pytest plugin's entry point exist, exactly as for a user who ran `pip install`. No build isolation
    and no dependencies: the venv's setuptools builds it (offline runners too), the dependencies are above."""
    pip(python, ["--no-deps", "--no-build-isolation", "--editable", str(ROOT)])


def pip(python: Path, args: list[str]) -> None:
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check", *args]
    print("bootstrap: pip install", " ".join(args), flush=True)
    proc = subprocess.run(cmd)
    if proc.returncode != 0:
        raise BootstrapError(f"pip install {' '.join(args)} failed (exit {proc.returncode}); its output is above")


if __name__ == "__main__":
    sys.exit(main())
