"""Find OpenAI's `triton_kernels` (the MoE matmul the last-expert scenario runs) and refuse look-alikes.

Why this exists: triton_kernels is not on PyPI under its own name. The PyPI package `triton-kernels` is an
unrelated project that installs a module of the same name, while the real one comes bundled in wheels
(sgl-kernel 0.3.21: `matmul_ogs` API, imports with triton 3.6; sglang-kernel 0.4.x: `matmul` API, needs
triton >= 3.7; vLLM: `vllm/third_party/triton_kernels`) or from a triton checkout. Importing the wrong one
either fails far from here or, worse, runs something else. So candidates are judged by their files before
anything is imported, and every refusal says what was found, where, and how to get the right one.

Search order: an already importable `triton_kernels`; `$TRITON_KERNELS_PATH`; the repository's
`.vendor/*/triton_kernels` (what `make upstream` unpacks); copies inside installed sgl-kernel,
sglang-kernel and vllm wheels (found through importlib.metadata, without importing vllm).
"""
from __future__ import annotations

import importlib
import importlib.metadata as metadata
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, Mapping, Sequence

from gpu_memsafety.util.paths import vendor_dir
from gpu_memsafety.errors import Unsupported

PACKAGE = "triton_kernels"
ENV_VAR = "TRITON_KERNELS_PATH"
# API generation -> (file inside the package, function it must define).
GENERATIONS = {"matmul_ogs": ("matmul_ogs.py", "matmul_ogs"), "matmul": ("matmul.py", "matmul")}
# Where to look, in this order (the default searches all of them).
SOURCES = ("importable", "env", "vendor", "installed")
# Wheels known to carry a copy, and where it sits inside them.
BUNDLING_DISTS = {"sgl-kernel": PACKAGE, "sglang-kernel": PACKAGE, "vllm": f"vllm/third_party/{PACKAGE}"}
HOW_TO_GET = (f"get OpenAI's triton_kernels with `make upstream` (unpacks the {PACKAGE}/ folders of sgl-kernel "
              f"0.3.21, sglang-kernel 0.4.6.post1 and 0.4.10 into .vendor/; the first two import with triton 3.6), "
              f"or set {ENV_VAR} to a folder holding {PACKAGE}/ (triton-lang/triton python/triton_kernels at your "
              f"triton's tag)")
IMPORT_HINTS = {
    "matmul": ("copies with the `matmul` API differ in the triton they need: sglang-kernel 0.4.6.post1 (the copy "
               "sglang 0.5.18/0.5.19 pin) imports with triton 3.6, sglang-kernel 0.4.10 needs triton >= 3.8 "
               "(`make upstream` unpacks both)"),
    "matmul_ogs": ("this copy wants another triton than the installed one; `make upstream` unpacks the "
                   "sgl-kernel 0.3.21 copy, which imports with triton 3.6"),
}


@dataclass(frozen=True)
class Candidate:
    package_dir: Path   # the triton_kernels folder itself
    source: str         # "importable" | "env" | "vendor" | "installed"
    provenance: str     # e.g. "sgl-kernel 0.3.21", "vllm 0.11.0", "unknown"

    @property
    def path_entry(self) -> Path:
        return self.package_dir.parent

    def describe(self) -> str:
        return f"{self.package_dir} ({self.provenance}, {self.source})"


@dataclass(frozen=True)
class Inspection:
    api_gen: str | None   # None: refused
    reason: str = ""      # why it was refused


@dataclass(frozen=True)
class Located:
    package_dir: Path
    api_gen: str
    source: str
    provenance: str
    triton_version: str | None
    module: ModuleType | None = None
    skipped: tuple[str, ...] = ()   # candidates found before this one, and why they were not taken

    @property
    def path_entry(self) -> Path:
        return self.package_dir.parent

    def describe(self) -> str:
        return f"{self.provenance} (API {self.api_gen}) at {self.package_dir} [{self.source}]"


class _ImportFailed(Exception):
    """A candidate that looked right on disk but did not import."""


# --- candidates --------------------------------------------------------------------------------------------
def candidates(*, env: Mapping[str, str] | None = None, repo_root: Path | None = None,
               sources: Sequence[str] = SOURCES, site_dirs: Sequence[str] | None = None) -> list[Candidate]:
    """Every place a triton_kernels may be, in search order, each folder once.

    env: the environment to read TRITON_KERNELS_PATH from (default os.environ); repo_root: where .vendor/ is;
    sources: which of SOURCES to search; site_dirs: where installed wheels are (default sys.path).
    """
    unknown = set(sources) - set(SOURCES)
    if unknown:
        raise ValueError(f"unknown sources {sorted(unknown)}; known: {SOURCES}")
    env = os.environ if env is None else env
    vendor = vendor_dir() if repo_root is None else repo_root / ".vendor"
    found: list[Candidate] = []
    seen: set[Path] = set()
    for cand in _all_candidates(env, vendor, sources, site_dirs):
        key = cand.package_dir.resolve()
        if key not in seen:
            seen.add(key)
            found.append(cand)
    return found


def _all_candidates(env: Mapping[str, str], vendor: Path, sources: Sequence[str],
                    site_dirs: Sequence[str] | None) -> Iterator[Candidate]:
    if "importable" in sources:
        yield from _importable()
    if "env" in sources:
        yield from _from_env(env)
    if "vendor" in sources:
        yield from _vendored(vendor)
    if "installed" in sources:
        yield from _from_wheels(site_dirs)


def _importable() -> Iterator[Candidate]:
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return
    if spec is None:
        return
    if spec.submodule_search_locations:
        pkg = Path(list(spec.submodule_search_locations)[0])
    elif spec.origin:
        pkg = Path(spec.origin).parent
    else:
        return
    yield Candidate(pkg, "importable", _folder_provenance(pkg.parent) or "unknown")


def _from_env(env: Mapping[str, str]) -> Iterator[Candidate]:
    value = env.get(ENV_VAR, "").strip()
    if not value:
        return
    path = Path(value).expanduser()
    pkg = path if path.name == PACKAGE and (path / "__init__.py").exists() else path / PACKAGE
    yield Candidate(pkg, "env", _folder_provenance(pkg.parent) or f"{ENV_VAR}={value}")


def _vendored(vendor: Path) -> Iterator[Candidate]:
    for pkg in sorted(vendor.glob(f"*/{PACKAGE}")):
        yield Candidate(pkg, "vendor", _folder_provenance(pkg.parent) or "unknown")


def _from_wheels(site_dirs: Sequence[str] | None) -> Iterator[Candidate]:
    dists = metadata.distributions() if site_dirs is None else metadata.distributions(path=list(site_dirs))
    for dist in dists:
        name = _normalize(dist.metadata["Name"] or "")
        inside = BUNDLING_DISTS.get(name)
        if inside is None:
            continue
        init = f"{inside}/__init__.py"
        if any(str(f).replace("\\", "/") == init for f in (dist.files or ())):
            pkg = Path(str(dist.locate_file(init))).parent
            yield Candidate(pkg, "installed", f"{name} {dist.version}")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _folder_provenance(folder: Path) -> str | None:
    """Which wheel put triton_kernels/ in this folder: a dist-info whose RECORD lists it, else the folder name."""
    owner = _record_owner(folder)
    if owner:
        return owner
    m = re.match(r"^(?P<name>.+?)-(?P<version>\d[\w.+!]*)$", folder.name)
    return f"{m['name']} {m['version']}" if m else None


def _record_owner(folder: Path) -> str | None:
    try:
        infos = sorted(folder.glob("*.dist-info"))
    except OSError:
        return None
    for info in infos:
        record = info / "RECORD"
        if record.is_file() and _lists_package(record.read_text(errors="replace")):
            return _name_version(info)
    return None


def _lists_package(record_text: str) -> bool:
    return any(line.startswith(f"{PACKAGE}/__init__.py,") for line in record_text.splitlines())


def _name_version(info: Path) -> str:
    meta = info / "METADATA"
    fields = {}
    if meta.is_file():
        for line in meta.read_text(errors="replace").splitlines():
            key, sep, value = line.partition(":")
            if sep and key in ("Name", "Version"):
                fields.setdefault(key, value.strip())
    name = fields.get("Name") or info.name.split("-")[0]
    return f"{_normalize(name)} {fields.get('Version', '?')}"


# --- judging one candidate by its files --------------------------------------------------------------------
def inspect_package(package_dir: Path) -> Inspection:
    """API generation of a triton_kernels folder from its files (nothing is imported), or why it is refused."""
    if not package_dir.is_dir():
        return Inspection(None, "no such folder")
    if not (package_dir / "__init__.py").is_file():
        return Inspection(None, "no __init__.py: not a regular package")
    found = [gen for gen, (fname, func) in GENERATIONS.items() if _defines(package_dir / fname, func)]
    if "matmul" in found:
        return Inspection("matmul")
    if "matmul_ogs" in found:
        return Inspection("matmul_ogs")
    return Inspection(None, _impostor_reason(package_dir))


def _defines(path: Path, func: str) -> bool:
    if not path.is_file():
        return False
    return re.search(rf"^def {func}\(", path.read_text(errors="replace"), re.MULTILINE) is not None


def _impostor_reason(package_dir: Path) -> str:
    names = sorted(p.name for p in package_dir.iterdir())[:8]
    return (f"it has neither {PACKAGE}/matmul_ogs.py defining matmul_ogs() (API 'matmul_ogs', triton <= 3.6) "
            f"nor {PACKAGE}/matmul.py defining matmul() (API 'matmul', triton >= 3.7); it holds "
            f"{', '.join(names) or 'nothing'}: not OpenAI's triton_kernels (the PyPI package `triton-kernels` "
            f"is an unrelated project that installs a module of the same name)")


# --- the search --------------------------------------------------------------------------------------------
def find_triton_kernels(*, env: Mapping[str, str] | None = None, repo_root: Path | None = None,
                        sources: Sequence[str] = SOURCES, site_dirs: Sequence[str] | None = None,
                        import_it: bool = True) -> Located:
    """The first usable triton_kernels (see `candidates`), imported unless import_it=False.

    Raises Unsupported, listing every candidate and why it was not taken, when none is usable.
    """
    skipped: list[str] = []
    triton_version = _version("triton")
    for cand in candidates(env=env, repo_root=repo_root, sources=sources, site_dirs=site_dirs):
        insp = inspect_package(cand.package_dir)
        if insp.api_gen is None:
            skipped.append(f"refused {cand.describe()}: {insp.reason}")
            continue
        try:
            module = _import(cand, insp.api_gen, triton_version) if import_it else None
        except _ImportFailed as exc:
            skipped.append(str(exc))
            continue
        return Located(cand.package_dir, insp.api_gen, cand.source, cand.provenance, triton_version, module,
                       tuple(skipped))
    raise Unsupported(_not_found(skipped))


def _not_found(skipped: list[str]) -> str:
    found = skipped or [f"nothing found: no importable {PACKAGE}, {ENV_VAR} unset, no .vendor/*/{PACKAGE}, "
                        f"no sgl-kernel / sglang-kernel / vllm wheel carrying one"]
    return "no usable triton_kernels:\n  " + "\n  ".join(found) + "\n" + HOW_TO_GET


def _import(cand: Candidate, api_gen: str, triton_version: str | None) -> ModuleType:
    loaded = sys.modules.get(PACKAGE)
    if loaded is not None and not _is_from(loaded, cand.package_dir):
        raise _ImportFailed(f"cannot use {cand.describe()}: another {PACKAGE} is already imported in this process "
                            f"from {getattr(loaded, '__file__', None)}")
    fresh = loaded is None
    inserted = fresh and _put_first_on_path(cand.path_entry)
    try:
        module = importlib.import_module(PACKAGE)
        if not _is_from(module, cand.package_dir):
            raise _ImportFailed(f"cannot use {cand.describe()}: `import {PACKAGE}` gave {module.__file__}")
        sub = importlib.import_module(f"{PACKAGE}.{api_gen}")
    except _ImportFailed:
        _undo(fresh, inserted, cand.path_entry)
        raise
    except Exception as exc:  # noqa: BLE001 - any import-time failure means "this copy does not work here"
        _undo(fresh, inserted, cand.path_entry)
        raise _ImportFailed(f"{cand.describe()}, API {api_gen!r}, does not import with the installed triton "
                            f"{triton_version}: {type(exc).__name__}: {exc}. {IMPORT_HINTS[api_gen]}") from exc
    if not callable(getattr(sub, GENERATIONS[api_gen][1], None)):
        raise _ImportFailed(f"{cand.describe()}: {PACKAGE}.{api_gen} has no callable {GENERATIONS[api_gen][1]}")
    return module


def _is_from(module: ModuleType, package_dir: Path) -> bool:
    file = getattr(module, "__file__", None)
    return file is not None and Path(file).resolve().parent == package_dir.resolve()


def _put_first_on_path(entry: Path) -> bool:
    text = str(entry)
    if sys.path and sys.path[0] == text:
        return False
    sys.path.insert(0, text)
    importlib.invalidate_caches()
    return True


def _undo(fresh: bool, inserted: bool, entry: Path) -> None:
    """Forget a failed import, so that the next candidate starts clean (only what this search imported)."""
    if fresh:
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]
    if inserted and sys.path and sys.path[0] == str(entry):
        del sys.path[0]


def load_copy(package_dir: Path) -> Located:
    """Import the triton_kernels in `package_dir` (a vendored copy), unloading another copy this process
    imported for an earlier case first: one worker runs cases of several copies one after the other.

    Raises Unsupported naming the copy and why it cannot be used (not OpenAI's, or does not import).
    """
    loaded = sys.modules.get(PACKAGE)
    if loaded is not None and not _is_from(loaded, package_dir):
        entry = str(Path(getattr(loaded, "__file__", "") or ".").resolve().parent.parent)
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]
        while entry in sys.path:
            sys.path.remove(entry)
        importlib.invalidate_caches()
    return find_triton_kernels(env={ENV_VAR: str(package_dir.parent)}, sources=("env",))


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def describe_installed(**search: Any) -> str:
    """One line for reports: which triton_kernels would be used (judged by its files; nothing is imported).

    `search` takes find_triton_kernels' keywords (env, repo_root, sources, site_dirs). Never raises Unsupported.
    """
    try:
        return find_triton_kernels(import_it=False, **search).describe()
    except Unsupported as exc:
        lines = str(exc).splitlines()
        return f"not found ({lines[1].strip() if len(lines) > 1 else exc})"
