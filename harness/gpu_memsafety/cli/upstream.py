"""`make upstream`: the published upstream code the scenarios run, fetched by exact version into .vendor/.

Why this exists: the scenarios guard the kernels users install, so they run the real upstream files at the
versions people use, never a copy committed here. The one catalogue of those versions
(`ARTIFACTS`) is gpu_memsafety/upstream/catalogue.py; this module is the one place that fetches them: `pip download --no-deps --only-binary=:all:` of the
exact wheel into a cache outside the workspace (`$GPU_MEMSAFETY_WHEELS`, default
~/.cache/gpu-memsafety/wheels, so a nightly job does not fetch hundreds of MB every night), then only the
members a scenario needs are unpacked into `.vendor/<dist>-<version>/` (the sglang pre-dispatch `.cuh` and
its JIT headers; the pure-Python `triton_kernels/` folder of an sgl-kernel / sglang-kernel wheel; a vLLM
wheel's DeepSeek-V4 Triton file and one DeepGEMM header with its include closure; a flashinfer-python wheel's
sampling header with its closure). Nothing is installed from those wheels. apache-tvm-ffi, which the real sglang kernel is built and loaded with, is
installed into the project's environment at the version pinned in pyproject.toml's `upstream` extra.

Every wheel is checked against the SHA-256 pinned for its file name in upstream/pins.py before anything is
extracted from it (a cached wheel included: the cache is outside the repository); a wheel without a pin, or
whose hash differs, is refused naming the file, the pinned hash and the one found. apache-tvm-ffi is
installed by pip with the same pins (`--require-hashes`). Each unpacked folder carries a stamp (`.complete`:
wheel name and sha256, then a manifest: the sha256 of every file unpacked). Every use of the folder
(`unpacked`) checks each file against that manifest, and that no file was added: a mismatch is TamperedError
naming the file and how to unpack it again (`make upstream` redoes such a folder). The manifest catches files
changed or added after unpacking (a shared vendor folder, a forged stamp over edited files); a forger who
also rewrites the manifest is caught only by unpacking again from the pinned wheel. A second run does nothing, a half-written folder (no stamp) or one whose stamp names a
wheel that is not pinned is redone, and extraction goes through a temporary folder renamed into place. A
failure names the artifact and version, what was needed and what was found.

    python -m gpu_memsafety.cli.upstream                # everything this machine can use (GPU-only wheels need a GPU)
    python -m gpu_memsafety.cli.upstream --all          # everything, GPU or not
    python -m gpu_memsafety.cli.upstream --if-missing   # what `make sanitize` runs first: fetch only what is missing
    python -m gpu_memsafety.cli.upstream --list         # the catalogue and what is present

Pure of torch/triton/CUDA: it may run before either is installed.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator, Sequence

from gpu_memsafety.upstream.catalogue import (ARTIFACTS, BY_KEY, STAMP, TVM_FFI_DIST, TVM_FFI_VERSION, WHEELS_ENV,
                                               Artifact, TamperedError, UpstreamError, artifact, manifest_of,
                                               stamp_text, tvm_ffi_problem, tvm_ffi_requirement, unpacked, wheel_cache)
from gpu_memsafety.upstream.pins import WHEEL_SHA256
from gpu_memsafety.util.paths import VENDOR_ENV, vendor_dir   # noqa: F401  (VENDOR_ENV: re-exported for messages)

# --- fetching ------------------------------------------------------------------------------------------------
Runner = Callable[[Sequence[str]], "tuple[int, str]"]


def _run_streaming(cmd: Sequence[str]) -> tuple[int, str]:
    """Run cmd with its output passed through to stderr (pip draws its own progress); (code, last lines)."""
    from gpu_memsafety.util.child import Child
    with Child(cmd, pipe=True, stdin=None) as child:
        for line in child.lines():
            sys.stderr.write(line)
        child.wait(None)
    return (child.proc.returncode if child.proc.returncode is not None else -1), child.tail()


def find_wheel(art: Artifact, cache: Path) -> Path | None:
    found = sorted(p for p in cache.glob(f"{art.wheel_prefix}*.whl") if p.is_file()) if cache.is_dir() else []
    return found[-1] if found else None


def download(art: Artifact, cache: Path, run: Runner = _run_streaming) -> Path:
    """The wheel of `art` in `cache`, fetched with pip if it is not there yet."""
    have = find_wheel(art, cache)
    if have is not None:
        return have
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--progress-bar", "on",
           *art.pip_tags, f"{art.dist}=={art.version}", "-d", str(cache)]
    code, tail = run(cmd)
    wheel = find_wheel(art, cache)
    if code != 0 or wheel is None:
        raise UpstreamError(f"{art.label}: download failed (pip exit code {code}); needed a wheel "
                            f"{art.wheel_prefix}*.whl in {cache}, found "
                            f"{'none' if wheel is None else wheel.name}.\n  command: {' '.join(cmd)}\n  "
                            + "\n  ".join(tail.splitlines()[-8:]))
    return wheel


def verify_wheel(art: Artifact, wheel: Path, handle: BinaryIO) -> str:
    """The sha256 of the open `handle` (the wheel's bytes) when it is the one pinned for the wheel's file name
    (upstream/pins.py); else UpstreamError naming the file, the pinned hash and the one found."""
    digest = hashlib.sha256()
    for chunk in iter(lambda: handle.read(1 << 20), b""):
        digest.update(chunk)
    found = digest.hexdigest()
    expected = WHEEL_SHA256.get(wheel.name)
    if expected is None:
        raise UpstreamError(f"{art.label}: wheel {wheel} has no pinned SHA-256 (found {found}); only the wheels "
                            f"listed in gpu_memsafety/upstream/pins.py are used: delete it, or pin it after "
                            f"checking it")
    if found != expected:
        raise UpstreamError(f"{art.label}: wheel {wheel} does not match its pinned SHA-256: expected {expected}, "
                            f"found {found}; it is not the published file (tampered or corrupt): delete it and "
                            f"run again")
    return found


def _selected(names: Iterable[str], members: Sequence[str]) -> list[str]:
    return [n for n in names if not n.endswith("/") and any(n == m or (m.endswith("/") and n.startswith(m))
                                                           for m in members)]


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)


def _normalized(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def include_closure(names: Iterable[str], read: Callable[[str], bytes], roots: Sequence[str],
                    include_dirs: Sequence[str]) -> list[str]:
    """The headers `roots` include, directly or not, that the wheel holds: each `#include` resolved against the
    including file's folder, then against `include_dirs` (wheel paths ending in "/"); one the wheel lacks (a
    toolkit or system header) is left to the compiler. Every #include counts, whatever #if guards it, so the set
    may hold a header the build skips, never miss one it reads."""
    have = set(names)
    seen: set[str] = set()
    todo = [r for r in roots if r in have]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        folder = name.rsplit("/", 1)[0] + "/" if "/" in name else ""
        for target in _INCLUDE.findall(read(name).decode("utf-8", "replace")):
            for candidate in (_normalized(folder + target), *(_normalized(d + target) for d in include_dirs)):
                if candidate in have:
                    todo.append(candidate)
                    break
    return sorted(seen)


@contextlib.contextmanager
def _zip_after_check(art: Artifact, wheel: Path, handle: BinaryIO) -> Iterator[tuple[zipfile.ZipFile, str]]:
    """The wheel opened as a zip from the very bytes whose hash was checked (never reopened by name)."""
    digest = verify_wheel(art, wheel, handle)
    handle.seek(0)
    with zipfile.ZipFile(handle) as zf:
        yield zf, digest


def extract(art: Artifact, wheel: Path, vendor: Path) -> Path:
    """Check the wheel's pinned hash, then unpack art.members of it, and the include closure of art.closure, into
    vendor/<dist>-<version>/, atomically, with a stamp."""
    target = vendor / art.folder
    try:
        with wheel.open("rb") as handle, _zip_after_check(art, wheel, handle) as (zf, digest):
            names = zf.namelist()
            missing = [r for r in art.required if r not in names]
            if missing:
                raise UpstreamError(f"{art.label}: wheel {wheel.name} lacks {', '.join(missing)} (needed to run "
                                    f"{art.what or art.key}); it holds {len(names)} files, e.g. "
                                    f"{', '.join(names[:3])}")
            chosen = sorted(set(_selected(names, art.members))
                            | set(include_closure(names, zf.read, art.closure, art.closure_dirs)))
            vendor.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{art.folder}.", dir=vendor))
            try:
                for name in chosen:
                    dest = (staging / name).resolve()
                    if staging.resolve() not in dest.parents:
                        raise UpstreamError(f"{art.label}: wheel {wheel.name} has a member outside its folder: "
                                            f"{name!r}")
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(name) as src, dest.open("wb") as out:
                        shutil.copyfileobj(src, out)
                (staging / STAMP).write_text(stamp_text(wheel.name, digest, manifest_of(staging)))
                if target.exists():
                    shutil.rmtree(target)
                staging.rename(target)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
    except zipfile.BadZipFile as exc:
        raise UpstreamError(f"{art.label}: {wheel} is not a readable wheel ({exc}); delete it and run again") from exc
    return target


def fetch(art: Artifact, *, cache: Path | None = None, vendor: Path | None = None, run: Runner = _run_streaming,
          log: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> Path:
    """Make `art` present in .vendor/ (idempotent): its folder."""
    vendor = vendor or vendor_dir()
    try:
        have = unpacked(art, vendor)
    except TamperedError as exc:
        log(f"upstream: {exc}: unpacking it again")
        have = None
    if have is not None:
        log(f"upstream: {art.label}: present in {have}")
        return have
    wheel = download(art, cache or wheel_cache(), run)
    folder = extract(art, wheel, vendor)
    log(f"upstream: {art.label}: unpacked {', '.join((*art.members, *(f'{c} with its includes' for c in art.closure)))} "
        f"into {folder}")
    return folder


# --- apache-tvm-ffi --------------------------------------------------------------------------------------------
def install_tvm_ffi(run: Runner = _run_streaming, cache: Path | None = None) -> None:
    """pip install the pinned apache-tvm-ffi into this interpreter's environment (from the cache if there), only
    a wheel whose hash is pinned (pip's --require-hashes). Its one dependency, typing-extensions, comes with torch."""
    if tvm_ffi_problem() is None:
        return
    if importlib.util.find_spec("typing_extensions") is None:
        raise UpstreamError(f"{TVM_FFI_DIST} {TVM_FFI_VERSION} needs typing-extensions>=4.5, found none in "
                            f"{sys.prefix} (torch installs it: install torch first)")
    cache = cache or wheel_cache()
    with tempfile.TemporaryDirectory(prefix="gpu-memsafety-pins-") as tmp:
        requirements = Path(tmp, "requirements.txt")
        requirements.write_text(tvm_ffi_requirement() + "\n")
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--require-hashes", "--find-links", str(cache),
               "-r", str(requirements)]
        code, tail = run(cmd)
    if code != 0:
        raise UpstreamError(f"{TVM_FFI_DIST} {TVM_FFI_VERSION}: install failed (pip exit code {code})\n  "
                            + "\n  ".join(tail.splitlines()[-8:]))


# --- what to fetch ---------------------------------------------------------------------------------------------
def has_gpu() -> bool:
    """An NVIDIA GPU is visible (nvidia-smi lists one); no torch needed."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def plan(*, everything: bool, gpu: bool, only: Sequence[str] = ()) -> list[Artifact]:
    if only:
        return [artifact(k) for k in only]
    return [a for a in ARTIFACTS if everything or gpu or not a.gpu_only]


def _state(art: Artifact) -> str:
    """'present', 'missing' or 'TAMPERED: <what>' for --list and --if-missing."""
    try:
        return "present" if unpacked(art) is not None else "missing"
    except TamperedError as exc:
        return f"TAMPERED: {exc}"


def place_problem(path: Path, what: str, env: str) -> str | None:
    """None when `path` is a folder or can become one, else a sentence saying what it is and how to choose
    another (a file, or a dangling link, given as the wheel cache or the vendor folder)."""
    for up in (path, *path.parents):
        if up.is_dir():
            return None
        if up.exists() or up.is_symlink():
            kind = "a dangling link" if up.is_symlink() and not up.exists() else "not a folder"
            return (f"{what} {path} cannot be used: {up} is {kind}; set {env} to a folder (or remove {up})")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-memsafety upstream", description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="also the GPU-only wheels on a machine without a GPU")
    parser.add_argument("--only", action="append", default=[], metavar="KEY", choices=list(BY_KEY),
                        help=f"one artifact (repeatable): {', '.join(BY_KEY)}")
    parser.add_argument("--if-missing", action="store_true",
                        help="fetch only what is missing, and only on a GPU machine (what `make sanitize` runs)")
    parser.add_argument("--no-tvm-ffi", action="store_true", help="do not install apache-tvm-ffi")
    parser.add_argument("--list", action="store_true", help="print the catalogue and what is present")
    args = parser.parse_args(argv)
    problems = [p for p in (place_problem(wheel_cache(), "the wheel cache", WHEELS_ENV),
                            place_problem(vendor_dir(), "the vendor folder", VENDOR_ENV)) if p]
    if problems:
        for problem in problems:
            print(f"upstream: error: {problem}", file=sys.stderr)
        return 2
    if args.list:
        for art in ARTIFACTS:
            print(f"{art.key:16} {art.label:28} {_state(art):8} {'(GPU only) ' if art.gpu_only else ''}{art.what}")
        print(f"{'tvm-ffi':16} {TVM_FFI_DIST + ' ' + TVM_FFI_VERSION:28} "
              f"{'present' if tvm_ffi_problem() is None else 'missing'}")
        return 0
    gpu = has_gpu()
    if args.if_missing and not gpu:
        return 0          # a CPU machine fetches nothing by itself; the cases say how to get what they need
    todo = plan(everything=args.all, gpu=gpu, only=args.only)
    if args.if_missing:
        todo = [a for a in todo if _state(a) != "present"]
        if not todo and tvm_ffi_problem() is None:
            return 0
    from gpu_memsafety.util.progress import progress

    failures: list[str] = []
    with progress("make upstream", total=len(todo) + (0 if args.no_tvm_ffi else 1), unit="artifacts") as bar:
        for art in todo:
            try:
                fetch(art)
            except UpstreamError as exc:
                failures.append(str(exc))
            except OSError as exc:
                failures.append(f"{art.label}: {exc.strerror or exc}"
                                f"{f' ({exc.filename})' if exc.filename else ''}: fix that path and run again")
            bar.advance(1, note=art.label)
        if not args.no_tvm_ffi:
            try:
                install_tvm_ffi()
            except (UpstreamError, OSError) as exc:
                failures.append(str(exc))
            bar.advance(1, note=f"{TVM_FFI_DIST} {TVM_FFI_VERSION}")
    skipped = [a for a in ARTIFACTS if a not in todo and _state(a) != "present"]
    if skipped and not args.only:
        print("upstream: not fetched on this machine (no GPU; `--all` fetches them): "
              + ", ".join(a.label for a in skipped), file=sys.stderr)
    for message in failures:
        print(f"upstream: FAILED: {message}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
