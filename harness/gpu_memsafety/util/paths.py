"""Where things live, decided once: the package, the checkout it may run from, caches and vendored upstream code.

The harness runs in two ways: from its own checkout (an editable install, what `make` sets up) and installed
into a kernel team's environment (`pip install gpu-memsafety`). Nothing may assume the first: the package
directory can sit in site-packages, and the current directory can be any repository. So:

- `CHECKOUT` is the source checkout when the package runs from one (harness/gpu_memsafety/ under a pyproject.toml that
  names this distribution), else None.
- `cache_dir()` is where run directories and build caches go: `$GPU_MEMSAFETY_CACHE`, else the checkout's
  `.cache/` when it is writable, else `$XDG_CACHE_HOME/gpu-memsafety` (default ~/.cache/gpu-memsafety).
- `vendor_dir()` is where `make upstream` unpacks published upstream code: `$GPU_MEMSAFETY_VENDOR`, else the
  checkout's `.vendor/`, else `cache_dir()/vendor`.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import site
import sys
import sysconfig
import tempfile
from pathlib import Path
from gpu_memsafety.util import jsonio

PACKAGE_DIR = Path(__file__).resolve().parent.parent
CACHE_ENV = "GPU_MEMSAFETY_CACHE"
VENDOR_ENV = "GPU_MEMSAFETY_VENDOR"
DISTRIBUTION = "gpu-memsafety"
EXAMPLE_DIR = PACKAGE_DIR / "cli" / "example"


def _checkout() -> Path | None:
    root = PACKAGE_DIR.parent.parent                   # harness/gpu_memsafety/ -> the checkout
    pyproject = root / "pyproject.toml"
    try:
        text = pyproject.read_text()
    except OSError:
        return None
    return root if f'name = "{DISTRIBUTION}"' in text and (root / "scenarios").is_dir() else None


CHECKOUT = _checkout()


def _scenario_dir() -> Path:
    """The built-in scenarios' folder, as the import system maps `gpu_memsafety.scenarios` (checkout or wheel)."""
    spec = importlib.util.find_spec("gpu_memsafety.scenarios")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]).resolve() if locations else PACKAGE_DIR / "scenarios"


SCENARIO_DIR = _scenario_dir()


def write_problem(directory: Path) -> str:
    """Why files cannot be written in `directory` ("" when they can), found by doing it: the directory is
    created if missing and a file is written and removed. Permission bits alone do not tell (root ignores them,
    a read-only mount or an immutable folder refuses root too)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return exc.strerror or str(exc)
    return ""


def _xdg_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().resolve() / "gpu-memsafety"


_WRITABLE: dict[Path, bool] = {}


def _writable(directory: Path) -> bool:
    """write_problem(directory) == "", asked once per directory and process."""
    if directory not in _WRITABLE:
        _WRITABLE[directory] = not write_problem(directory)
    return _WRITABLE[directory]


def cache_dir() -> Path:
    """$GPU_MEMSAFETY_CACHE, else the checkout's .cache/ when files can be written there, else
    $XDG_CACHE_HOME/gpu-memsafety (a read-only checkout runs from there); see check_cache_dir."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser().resolve()
    if CHECKOUT is not None and _writable(CHECKOUT / ".cache"):
        return CHECKOUT / ".cache"
    return _xdg_cache()


class CacheDirError(OSError):
    """No directory the harness may write its run directories and caches to; says what was tried."""


def check_cache_dir() -> Path:
    """cache_dir(), once it is known that files can be written there; else CacheDirError naming every place
    tried and why each failed, and how to choose another. Entry points call it before any work."""
    chosen = cache_dir()
    problem = write_problem(chosen)
    if not problem:
        return chosen
    tried = [f"${CACHE_ENV}={chosen}: {problem}"] if os.environ.get(CACHE_ENV) else [
        *([f"{CHECKOUT / '.cache'}: {write_problem(CHECKOUT / '.cache')}"] if CHECKOUT is not None else []),
        f"{chosen}: {problem}"]
    raise CacheDirError(f"no writable directory for run directories and caches (tried {'; '.join(tried)}): set "
                        f"{CACHE_ENV} to a directory this user can write")


def vendor_dir() -> Path:
    explicit = os.environ.get(VENDOR_ENV)
    if explicit:
        return Path(explicit).expanduser().resolve()
    if CHECKOUT is not None:
        return CHECKOUT / ".vendor"
    return cache_dir() / "vendor"


@functools.lru_cache(maxsize=4)
def _default_entries(python: str) -> frozenset[str]:
    """sys.path entries a child of `python` gets by itself (stdlib, site directories and what their .pth files
    add, a layered venv's base included), asked of the interpreter once per process."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH")}
    try:
        out = subprocess.run([python, "-c", "import json, sys; print(json.dumps(sys.path))"], env=env, cwd="/",
                             capture_output=True, text=True, timeout=60, check=True).stdout
        return frozenset(os.path.realpath(p) for p in jsonio.loads(out) if p)
    except (OSError, subprocess.SubprocessError, ValueError):
        keys = ("stdlib", "platstdlib", "purelib", "platlib")
        found = {os.path.realpath(p) for p in (sysconfig.get_paths().get(k) for k in keys) if p}
        return frozenset(found | {os.path.realpath(p) for p in site.getsitepackages()})


def inherited_pythonpath(environ: dict[str, str] | None = None, python: str = sys.executable) -> str:
    """PYTHONPATH for a child Python that must import what this process imports: every sys.path entry the
    child would not get by itself (a host repository's rootdir, its pytest `pythonpath` setting, a scenario's
    folder), in this process's order, then the caller's PYTHONPATH. `''` (the current directory) is made
    absolute, since children may start elsewhere."""
    standard = _default_entries(python)
    entries: list[str] = []
    for raw in sys.path:
        path = os.path.abspath(raw or os.getcwd())
        if os.path.realpath(path) in standard or path.endswith(".zip") or not os.path.isdir(path):
            continue
        if path not in entries:
            entries.append(path)
    current = (os.environ if environ is None else environ).get("PYTHONPATH", "")
    for raw in current.split(os.pathsep):
        if raw and os.path.abspath(raw) not in entries:
            entries.append(os.path.abspath(raw))
    return os.pathsep.join(entries)
