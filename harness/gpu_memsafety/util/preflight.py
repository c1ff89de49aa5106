"""Before anything imports torch or triton: is this interpreter and its stack one the harness can run on?

What a user sees when their environment cannot work must be one sentence naming what was found and what is
needed, never a traceback from deep inside an import: a Python outside the supported range, torch not
installed, or a host repository whose own folder shadows a dependency (a `triton/` at its root, first on
sys.path, hides the installed triton).
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from dataclasses import dataclass

SUPPORTED_PYTHON = ((3, 10), (3, 14))          # pyproject.toml: requires-python = ">=3.10"; tested up to 3.13
NEEDED = {"torch": "torch>=2.8,<3", "triton": "triton>=3.4,<4"}    # pyproject.toml's ranges (tests check)


class PreflightError(Exception):
    """The environment cannot run the harness; the message says what was found and what is needed."""


@dataclass(frozen=True)
class Found:
    name: str
    origin: str | None          # the file `import name` would load
    installed: str | None       # the file the installed distribution provides for it
    version: str | None


def python_version(info: tuple[int, ...] = tuple(sys.version_info[:3])) -> None:
    low, high = SUPPORTED_PYTHON
    if not (low <= info[:2] < high):
        raise PreflightError(f"gpu-memsafety needs Python >= {low[0]}.{low[1]} and < {high[0]}.{high[1]}; this is "
                             f"Python {'.'.join(map(str, info))} ({sys.executable})")


def locate(name: str) -> Found:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    origin = spec.origin if spec is not None else None
    try:
        dist = importlib.metadata.distribution(name)
        installed = str(dist.locate_file(f"{name}/__init__.py"))
        version: str | None = dist.version
    except importlib.metadata.PackageNotFoundError:
        installed, version = None, None
    return Found(name, origin, installed, version)


def dependency(name: str) -> Found:
    """`name` importable, and the import is the installed distribution's, not a folder of the same name."""
    need = NEEDED.get(name, name)
    found = locate(name)
    if found.origin is None:
        raise PreflightError(f"gpu-memsafety needs {need}: no module named {name!r} in {sys.executable}"
                             f"{' (it is installed but not importable)' if found.installed else ''}; "
                             f"install it (`pip install '{need}'`) in this environment")
    if found.installed is not None and os.path.realpath(found.origin) != os.path.realpath(found.installed):
        raise PreflightError(f"`import {name}` loads {found.origin}, which shadows the installed {name} "
                             f"{found.version} ({found.installed}): a folder or file named {name!r} comes first on "
                             f"sys.path (often the repository's root); rename it or run from another directory")
    if found.installed is None:
        where = os.path.dirname(found.origin)
        raise PreflightError(f"`import {name}` loads {found.origin}, which no installed distribution provides "
                             f"(a folder of your own at {where}?); gpu-memsafety needs {need} installed")
    return found


def stack(names: tuple[str, ...] = ("torch", "triton")) -> list[Found]:
    python_version()
    return [dependency(name) for name in names]
