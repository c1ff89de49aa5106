"""Find a compute-sanitizer that can start a target, and build its command line.

Why this module exists: a sanitizer that silently did not run must never read as "0 errors". So the
harness needs to know which binary it is about to use, which version it is, where it came from, and,
when a copy cannot work, why not, before any GPU time is spent. Nothing here launches GPU work: the only
process started is `compute-sanitizer --version`, bounded by a timeout.

Where copies live, searched in this order: PATH, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin,
/usr/local/cuda-*/bin (newest first), then the `nvidia-cuda-sanitizer-api` PyPI wheels in site-packages.

How the launcher starts a target (facts, checked on a CPU-only machine with strace on the 13.0.85 and
13.5.25 wheels; "launcher dir" = the directory of the real ELF binary, i.e. /proc/self/exe):
- The real binary execs `<launcher dir>/TreeLauncherSubreaper`, which loads
  `libInterceptorInjectionTarget.so`, `libTreeLauncherTargetInjection.so` and
  `libTreeLauncherTargetUpdatePreloadInjection.so` from the same directory by absolute path, then execs the
  target, which loads `libsanitizer-collection.so` from there too. `--injection-path DIR` moves all of these
  (the subreaper included) to DIR. No LD_LIBRARY_PATH or other environment variable is involved.
- If the subreaper is missing (ENOENT) or not executable (EACCES) the target never runs and the launcher
  prints "Error: Target application terminated before first instrumented API call" and
  "Error: couldn't find exit code.", exit status 255. The same first line also appears when a target ran
  but never touched CUDA, so the message alone does not say which.
- Toolkits and the 13.4+ wheels share one layout: `bin/compute-sanitizer` is a small `sh` wrapper that execs
  `../compute-sanitizer/compute-sanitizer`; that directory holds the subreaper,
  `TreeLauncherTargetLdPreloadHelper`, the injection libraries and `x86/`. Wheel files keep their
  executable bits (zip modes rwxrwxr-x).
- The 13.0.x-13.3.x wheels (13.0.85 = version 2025.3.1, the same version as the H200's toolkit) and the
  cu12 wheel (`nvidia/cuda_sanitizer_api/`, 12.9.79) are flat: the ELF binary sits in `bin/` next to
  `libsanitizer-collection.so`, the injection libraries sit in `../lib/`, and there is NO
  TreeLauncherSubreaper and NO TreeLauncherTargetLdPreloadHelper anywhere in the wheel. The binary in those
  wheels is mode rwxr--r-- (only the owner may run an `unzip`ped copy; Python's zipfile drops all modes).

What the 13.0.85 copy on the H200 most likely needed: the missing TreeLauncherSubreaper. On the CPU machine
the unpacked 13.0.85 wheel fails with exactly the H200's message, and strace shows the execve of
`bin/TreeLauncherSubreaper` failing with ENOENT. That cannot be fixed from the wheel itself, so such a copy
is reported as unusable with the reason; use a toolkit or nvidia-cuda-sanitizer-api >= 13.4.
HYPOTHESIS, NOT CHECKED ON THE GPU: with a subreaper taken from another version (13.4.92) placed next to
the 13.0.85 libraries, the CPU run gets as far as exec'ing the target with the injection libraries loaded;
whether the mixed versions then instrument kernels is unknown, so `locate` never mixes versions.
HYPOTHESIS, NOT CHECKED ON THE GPU: whether the 2026.x sanitizer from the 13.4+ wheels works with the
H200's driver 580 (CUDA 13.0).

What `locate` fixes: helper executables or the binary that lost their executable bit, and injection
libraries that are not next to the binary: it builds a launcher dir in a cache (executables copied with
mode 0755, libraries symlinked) and runs the copy, so the installed files are never modified. That the
symlinked libraries load fine is checked on the CPU (same path lookup as above); on the GPU it is not.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import site
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from gpu_memsafety.util import child

BINARY = "compute-sanitizer"
SUBREAPER = "TreeLauncherSubreaper"                    # exec'd by the launcher before the target
INJECTION_LIB = "libTreeLauncherTargetInjection.so"     # marks the directory the libraries are loaded from
LDPRELOAD_HELPER = "TreeLauncherTargetLdPreloadHelper"  # shipped next to the subreaper; not exec'd in our traces
REQUIRED_LAUNCHER_FILES = (SUBREAPER, INJECTION_LIB)
HELPER_EXECUTABLES = (BINARY, SUBREAPER, LDPRELOAD_HELPER)
MIRRORED_SUBDIRS = ("x86",)  # the launcher stats x86/libTreeLauncherTargetInjection.so at start

# `--version` of a healthy binary answers in well under a second; 10 s only catches a hung or broken one.
VERSION_TIMEOUT_S = 10.0
# compute-sanitizer's exit status when it could not run or attach to the target (observed: 255).
SANITIZER_INTERNAL_EXITCODE = 255
# Exit status compute-sanitizer returns when it found errors. Not 0/1/2 (Python success, uncaught exception,
# usage), not 3-5 (pytest), not 120 (Python flush failure), not 124-127 (timeout(1), shell), not >= 128
# (signals) and not 255 (the sanitizer's own failure): a run that exits 86 was seen by the sanitizer.
SANITIZER_ERROR_EXITCODE = 86
# `--print-limit` defaults to 100 and also caps what `--save` writes; 0 means unlimited (see --help).
PRINT_LIMIT_UNLIMITED = 0
DEFAULT_LAUNCH_TIMEOUT_S = 60  # python + torch import takes ~5 s on the H200; the tool's default is 10 s

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
# Tool options are spelled out even where they equal today's default so that a new release's default
# cannot change what a run means.
# memcheck's padding after every allocation: a flush-end tensor is an exact cudaMalloc allocation with its
# start aligned (harness/gpu_memsafety/placement/layout.py), and this keeps every other allocation at least this far past its end,
# so an overrun of up to this many bytes is always outside every allocation (1 MiB: several tiles of any
# kernel here; the VMM guard page of guard_page mode is 2 MiB).
MEMCHECK_PADDING = 1 << 20

TOOL_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "memcheck": ("--leak-check", "no",   # leaks are not memory-safety findings and need a clean teardown
                 "--padding", str(MEMCHECK_PADDING)),
    # "analysis" (the default) gives one record per racing pair of instructions, each with its source line
    # and hazard count: what a finding names (harness/gpu_memsafety/sanitizer/hazards.py), and what every public log we have shows.
    # "hazard" gives one record per pair of threads and address: thousands for one missing __syncthreads,
    # up to the tool's hazard limit. The parser reads both.
    "racecheck": ("--racecheck-report", "analysis", "--racecheck-detect-level", "warn"),
    # cudaMemcpy/cudaMemset from uninitialised device memory is a finding too.
    "initcheck": ("--check-api-memory-access", "yes"),
    "synccheck": ("--missing-barrier-init-is-fatal", "yes"),
}

_VERSION_RE = re.compile(r"Version\s+(\d+)\.(\d+)\.(\d+)")
_CUDA_DIR_RE = re.compile(r"cuda-(\d+)(?:\.(\d+))?(?:\.(\d+))?$")
_WHEEL_CU_RE = re.compile(r"cu(\d+)$")


@dataclass(frozen=True)
class VersionProbe:
    version: str  # e.g. "2025.3.1"; "" when unknown
    error: str    # "" when the probe worked


@dataclass(frozen=True)
class SanitizerInfo:
    path: str                      # the file to execute
    version: str                   # "2025.3.1", "" when unknown
    source: str                    # "PATH", "CUDA_HOME", "CUDA_PATH", "/usr/local/cuda-13.0" (its dir), "wheel"
    env: Mapping[str, str] = field(default_factory=dict, hash=False)  # extra environment to start a target
    origin: str = ""               # where it was found, when `path` is a repaired copy in the cache
    repaired: str = ""             # what locate changed ("" when nothing)
    problem: str = ""              # why it cannot start a target ("" when no known problem)
    version_error: str = ""        # why `--version` failed

    @property
    def usable(self) -> bool:
        return not self.problem and not self.version_error and bool(self.version)

    def describe(self) -> str:
        where = f"{self.path} ({self.source}"
        where += f", copy of {self.origin})" if self.origin else ")"
        if self.usable:
            return f"compute-sanitizer {self.version} at {where}"
        return f"unusable compute-sanitizer at {where}: {self.problem or self.version_error}"


@dataclass
class SanitizerLookup:
    found: SanitizerInfo | None
    searched: list[str]                                         # candidate paths tried, in order
    rejected: list[SanitizerInfo] = field(default_factory=list)  # existing copies that cannot work, and why

    def describe(self) -> str:
        if self.found is not None:
            return self.found.describe()
        lines = ["no usable compute-sanitizer; searched: " + ", ".join(self.searched)]
        lines += [info.describe() for info in self.rejected]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- version

def parse_version(output: str) -> str:
    """'Version 2025.3.1.0 (build 36400806)' -> '2025.3.1'; '' when there is no version line."""
    match = _VERSION_RE.search(output)
    return ".".join(match.groups()) if match else ""


def version(path: str | os.PathLike[str], *, timeout_s: float = VERSION_TIMEOUT_S,
            env: Mapping[str, str] | None = None) -> VersionProbe:
    """Run `path --version`; never raises, never waits longer than about timeout_s + util.child.GRACE_S (a shell
    wrapper's child is killed with it: the probe leads its own process group)."""
    with tempfile.TemporaryDirectory(prefix="gpu-memsafety-probe-") as tmp:
        output = Path(tmp, "version.txt")
        try:
            ended = child.run([os.fspath(path), "--version"], deadline_s=timeout_s, env=env, log=output)
        except OSError as exc:
            return VersionProbe("", f"cannot execute {path}: {exc}")
        if ended.timed_out:
            return VersionProbe("", f"`{path} --version` did not finish within {timeout_s:g} s (killed)")
        code = ended.returncode if ended.returncode is not None else -1
        return _judge_version_output(path, code, output.read_bytes().decode("utf-8", "replace"))


def _judge_version_output(path: str | os.PathLike[str], returncode: int, output: str) -> VersionProbe:
    tail = output.strip()[-500:]
    if returncode != 0:
        return VersionProbe("", f"`{path} --version` exited {returncode}: {tail or '(no output)'}")
    found = parse_version(output)
    if not found:
        return VersionProbe("", f"`{path} --version` printed no version: {tail or '(no output)'}")
    return VersionProbe(found, "")


# --------------------------------------------------------------------------------------------- candidates

def _path_candidates(env: Mapping[str, str]) -> list[tuple[str, Path]]:
    dirs = [d for d in env.get("PATH", "").split(os.pathsep) if d]
    return [("PATH", Path(d) / BINARY) for d in dirs]


def _env_home_candidates(env: Mapping[str, str]) -> list[tuple[str, Path]]:
    out = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            out.append((var, Path(env[var]) / "bin" / BINARY))
    return out


def _cuda_dir_key(path: Path) -> tuple[int, ...]:
    match = _CUDA_DIR_RE.search(path.name)
    return tuple(int(g) for g in match.groups() if g is not None) if match else (-1,)


def _system_candidates(system_root: Path) -> list[tuple[str, Path]]:
    out = [(str(system_root / "cuda"), system_root / "cuda" / "bin" / BINARY)]
    versioned = sorted(system_root.glob("cuda-*"), key=_cuda_dir_key, reverse=True)
    out += [(str(d), d / "bin" / BINARY) for d in versioned]
    return out


def _wheel_cu_key(path: Path) -> int:
    match = _WHEEL_CU_RE.match(path.name)
    return int(match.group(1)) if match else -1


def _wheel_candidates(site_dirs: Iterable[str]) -> list[tuple[str, Path]]:
    """13.4+: nvidia/cuNN/compute-sanitizer/compute-sanitizer (and a bin/ wrapper); 13.0-13.3:
    nvidia/cuNN/bin/compute-sanitizer; cu12: nvidia/cuda_sanitizer_api/bin/compute-sanitizer."""
    out: list[tuple[str, Path]] = []
    for base in site_dirs:
        nvidia = Path(base) / "nvidia"
        for cu_dir in sorted(nvidia.glob("cu[0-9]*"), key=_wheel_cu_key, reverse=True):
            out.append(("wheel", cu_dir / "compute-sanitizer" / BINARY))
            out.append(("wheel", cu_dir / "bin" / BINARY))
        out.append(("wheel", nvidia / "cuda_sanitizer_api" / "bin" / BINARY))
    return out


def default_site_dirs() -> list[str]:
    dirs: list[str] = []
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # some virtualenv builds lack it
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return list(dict.fromkeys(dirs))


def default_cache_dir(env: Mapping[str, str]) -> Path:
    """Where repaired copies go: the harness's one cache directory (util.paths.cache_dir: writable, a read-only
    checkout falls back to XDG), or $GPU_MEMSAFETY_CACHE of `env` when it names one."""
    from gpu_memsafety.util.paths import CACHE_ENV, cache_dir
    explicit = env.get(CACHE_ENV)
    return (Path(explicit).expanduser() if explicit else cache_dir()) / "compute-sanitizer"


# ------------------------------------------------------------------------------------------------- layout

@dataclass(frozen=True)
class _Layout:
    binary: Path         # the real ELF binary
    injection_dir: Path  # where the subreaper and injection libraries are (or should be)


def resolve_layout(candidate: Path) -> _Layout:
    """Follow a toolkit/13.4+ `bin/` wrapper to the real binary, and find the injection directory."""
    real = Path(os.path.realpath(candidate))
    for base in (real, candidate):
        wrapped = base.parent.parent / "compute-sanitizer" / BINARY
        if base.parent.name == "bin" and wrapped.is_file() and wrapped.resolve() != real:
            real = wrapped.resolve()
            break
    if not (real.parent / INJECTION_LIB).exists() and (real.parent.parent / "lib" / INJECTION_LIB).exists():
        return _Layout(real, real.parent.parent / "lib")  # flat 13.0-13.3 / cu12 wheel
    return _Layout(real, real.parent)


def missing_launcher_files(layout: _Layout) -> list[str]:
    return [name for name in REQUIRED_LAUNCHER_FILES if not (layout.injection_dir / name).exists()]


def _not_executable(layout: _Layout) -> list[Path]:
    paths = [layout.binary] + [layout.injection_dir / n for n in (SUBREAPER, LDPRELOAD_HELPER)]
    return [p for p in paths if p.exists() and not os.access(p, os.X_OK)]


def _missing_problem(layout: _Layout, missing: Sequence[str]) -> str:
    return (
        f"launcher files missing from {layout.injection_dir}: {', '.join(missing)}. Without "
        f"{SUBREAPER} the target never starts ('Target application terminated before first instrumented "
        "API call'). The nvidia-cuda-sanitizer-api 13.0-13.3 and cu12 wheels do not ship it: use a CUDA "
        "toolkit or nvidia-cuda-sanitizer-api>=13.4"
    )


# ------------------------------------------------------------------------------------------------- repair

def _cache_slot(cache_dir: Path, layout: _Layout) -> Path:
    key = f"{layout.binary}\0{layout.injection_dir}".encode()
    return cache_dir / hashlib.sha256(key).hexdigest()[:16]


def _mirror_dir(src: Path, dst: Path) -> None:
    """Executables are copied with mode 0755, libraries symlinked, helper subdirectories mirrored."""
    dst.mkdir(parents=True, exist_ok=True)
    for entry in src.iterdir():
        target = dst / entry.name
        if entry.is_dir():
            if entry.name in MIRRORED_SUBDIRS:
                _mirror_dir(entry, target)
        elif entry.name in HELPER_EXECUTABLES:
            shutil.copyfile(entry, target)
            target.chmod(0o755)
        elif entry.suffix == ".so" or ".so." in entry.name:
            target.symlink_to(entry.resolve())


def _slot_is_current(slot: Path, layout: _Layout) -> bool:
    marker = slot / ".source"
    copied = slot / BINARY
    if not marker.is_file() or not copied.is_file():
        return False
    same_size = copied.stat().st_size == layout.binary.stat().st_size
    return same_size and marker.read_text() == f"{layout.binary}\n{layout.injection_dir}\n"


def repair_into_cache(layout: _Layout, cache_dir: Path) -> Path:
    """Build <cache>/<slot>/ with the binary, the helpers (executable) and the libraries in one directory.

    Checked on the CPU: the launcher then execs the cached subreaper and the target loads the symlinked
    libraries. HYPOTHESIS, NOT CHECKED ON THE GPU: that instrumentation works the same from such a copy.
    """
    slot = _cache_slot(cache_dir, layout)
    if _slot_is_current(slot, layout):
        return slot / BINARY
    tmp = slot.with_name(f".{slot.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    _mirror_dir(layout.injection_dir, tmp)
    shutil.copyfile(layout.binary, tmp / BINARY)
    (tmp / BINARY).chmod(0o755)
    (tmp / ".source").write_text(f"{layout.binary}\n{layout.injection_dir}\n")
    if slot.exists() and not _slot_is_current(slot, layout):
        shutil.rmtree(slot, ignore_errors=True)
    try:
        os.replace(tmp, slot)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not _slot_is_current(slot, layout):  # another worker did not win the race either: give up
            raise
    return slot / BINARY


def _needs_repair(layout: _Layout) -> str:
    reasons = [f"{p.name} not executable" for p in _not_executable(layout)]
    if layout.injection_dir != layout.binary.parent:
        reasons.append(f"injection libraries in {layout.injection_dir}, not next to the binary")
    return "; ".join(reasons)


# ------------------------------------------------------------------------------------------------- locate

def examine(candidate: Path, source: str, *, cache_dir: Path,
            timeout_s: float = VERSION_TIMEOUT_S) -> SanitizerInfo:
    """Judge one existing candidate: layout, repair when possible, then `--version`."""
    layout = resolve_layout(candidate)
    missing = missing_launcher_files(layout)
    if missing:
        probe = version(layout.binary, timeout_s=timeout_s)
        return SanitizerInfo(str(layout.binary), probe.version, source, problem=_missing_problem(layout, missing),
                             version_error=probe.error)
    path, origin, repaired = layout.binary, "", _needs_repair(layout)
    if repaired:
        try:
            path, origin = repair_into_cache(layout, cache_dir), str(layout.binary)
        except OSError as exc:
            return SanitizerInfo(str(layout.binary), "", source, problem=f"{repaired}; repair failed: {exc}")
    probe = version(path, timeout_s=timeout_s)
    return SanitizerInfo(str(path), probe.version, source, origin=origin, repaired=repaired,
                         version_error=probe.error)


def candidates(env: Mapping[str, str], site_dirs: Iterable[str], system_root: Path) -> list[tuple[str, Path]]:
    return (_path_candidates(env) + _env_home_candidates(env) + _system_candidates(system_root)
            + _wheel_candidates(site_dirs))


def locate(env: Mapping[str, str] | None = None, *, site_dirs: Iterable[str] | None = None,
           system_root: str | os.PathLike[str] = "/usr/local", cache_dir: str | os.PathLike[str] | None = None,
           timeout_s: float = VERSION_TIMEOUT_S) -> SanitizerLookup:
    """First usable compute-sanitizer in search order; broken copies on the way are kept in `rejected`."""
    env = os.environ if env is None else env
    sites = default_site_dirs() if site_dirs is None else list(site_dirs)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir(env)
    lookup = SanitizerLookup(found=None, searched=[])
    seen: set[Path] = set()
    for source, path in candidates(env, sites, Path(system_root)):
        lookup.searched.append(str(path))
        if not path.is_file():
            continue
        real = resolve_layout(path).binary
        if real in seen:
            continue
        seen.add(real)
        info = examine(path, source, cache_dir=cache, timeout_s=timeout_s)
        if info.usable:
            lookup.found = info
            return lookup
        lookup.rejected.append(info)
    return lookup


# ----------------------------------------------------------------------------------------------- command

def _escape_save_path(path: str) -> str:
    """--save expands %p, %q{VAR} and %%; any other % is an error. A literal % must be doubled."""
    return path.replace("%", "%%")


def _check_command_args(tool: str, xml_path: str, target_argv: Sequence[str], launch_timeout_s: int) -> None:
    if tool not in TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool {tool!r}; known: {', '.join(TOOLS)}")
    if not xml_path:
        raise ValueError("xml_path is required: findings are read from the XML, never from the text summary")
    if isinstance(target_argv, (str, bytes)) or not target_argv:
        raise ValueError("target_argv must be a non-empty list of arguments, never a shell string")
    if not all(isinstance(a, str) for a in target_argv):
        raise ValueError(f"target_argv must hold strings only: {target_argv!r}")
    if not isinstance(launch_timeout_s, int) or launch_timeout_s < 0:
        raise ValueError(f"launch_timeout_s must be an int >= 0 (0 = wait forever), got {launch_timeout_s!r}")


# `--check-tensor-ops yes` checks the bulk tensor copies (PTX cp.async.bulk.tensor, TMA on Hopper and later):
# compute-sanitizer 2026.4 and newer have it, off by default (tests/data/sanitizer/help-2026.4.0.txt); 2025.3.1,
# the H200's, has no such option (help-2025.3.1.txt): a TMA copy out of bounds goes unchecked there.
TENSOR_OPS_SINCE = (2026, 4)


def version_key(version: str) -> tuple[int, ...]:
    """'2026.4.0' -> (2026, 4, 0); () when unknown."""
    parts = version.split(".")
    return tuple(int(p) for p in parts) if version and all(p.isdigit() for p in parts) else ()


def tensor_ops(info: SanitizerInfo, tool: str = "memcheck") -> tuple[tuple[str, ...], str]:
    """memcheck's extra options for bulk tensor copies, and what the report says of them."""
    if tool != "memcheck":
        return (), ""
    if version_key(info.version)[:2] >= TENSOR_OPS_SINCE:
        return ("--check-tensor-ops", "yes"), "bulk tensor copies (cp.async.bulk.tensor) checked"
    since = ".".join(map(str, TENSOR_OPS_SINCE))
    return (), (f"bulk tensor copies (cp.async.bulk.tensor, TMA) not checked: --check-tensor-ops needs "
                f"compute-sanitizer {since} or newer, found {info.version or 'an unknown version'}")


def memcheck_command(info: SanitizerInfo, *, tool: str = "memcheck", xml_path: str | os.PathLike[str],
                     target_argv: Sequence[str], launch_timeout_s: int = DEFAULT_LAUNCH_TIMEOUT_S,
                     extra: Sequence[str] = ()) -> list[str]:
    """compute-sanitizer argv (a list, never a shell string) for one sanitized target process."""
    xml = os.fspath(xml_path)
    _check_command_args(tool, xml, target_argv, launch_timeout_s)
    return [
        info.path,
        "--tool", tool,
        "--xml", "--save", _escape_save_path(xml),
        "--print-limit", str(PRINT_LIMIT_UNLIMITED),
        "--error-exitcode", str(SANITIZER_ERROR_EXITCODE),
        "--launch-timeout", str(launch_timeout_s),
        "--destroy-on-device-error", "kernel",  # one bad launch must not end the context (and hide the rest)
        "--show-backtrace", "device",           # host stacks make the XML large and say nothing about bytes
        "--check-exit-code", "yes",
        *TOOL_OPTIONS[tool],
        *tensor_ops(info, tool)[0],
        *extra,
        *target_argv,
    ]
