"""The upstream code the scenarios run: the catalogue of published wheels by exact version (`ARTIFACTS`), where
each is unpacked and the check of every use of that folder against hashes that never come from it (`unpacked`,
`verify_tree`), how a case that lacks one says so (`how_to_get`), the version checks the kernels' adapters make
(`version_tuple`, `triton_problem`, `tvm_ffi_problem`), and the fetching itself (`fetch`: download, verify,
extract; `install_tvm_ffi`). `gpu-memsafety upstream` (cli/upstream.py) is the command over it.

Why it is a package of its own, low in the layers: the kernels' adapters and the scenarios read the catalogue and
the checks of what was unpacked, and they sit below the command line. Its pins are upstream/pins.py, the wheel
readers upstream/wheels.py.

Pure of torch/triton/CUDA: it may run before either is installed.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as metadata
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator, Sequence

from gpu_memsafety.upstream.pins import UNPACKED_SHA256, WHEEL_SHA256
from gpu_memsafety.upstream.wheels import include_closure, record_hashes, selected as _selected   # noqa: F401
from gpu_memsafety.util.paths import VENDOR_ENV, vendor_dir   # noqa: F401  (VENDOR_ENV: re-exported for messages)

WHEELS_ENV = "GPU_MEMSAFETY_WHEELS"
STAMP = ".complete"
TVM_FFI_DIST = "apache-tvm-ffi"
TVM_FFI_VERSION = "0.1.11"      # what sglang 0.5.18 / 0.5.19 pin; also pinned in pyproject.toml [upstream]

# sglang wheels are cp311-only (manylinux_2_34): fetch them by tag, whatever runs this.
SGLANG_TAGS = ("--python-version", "3.11", "--implementation", "cp", "--platform", "manylinux_2_34_x86_64")
PRE_DISPATCH_CUH = "sglang/kernels/jit/csrc/deepseek_v4/mega_moe_pre_dispatch.cuh"
JIT_INCLUDE = "sglang/kernels/jit/include/"
# vLLM wheels: the DeepSeek-V4 Triton ops (block-table gather) and the DeepGEMM JIT sources vLLM bundles.
VLLM_CACHE_UTILS = "vllm/models/deepseek_v4/common/ops/cache_utils.py"
VLLM_DG_INCLUDE = "vllm/third_party/deep_gemm/include/"
VLLM_DG_METADATA = VLLM_DG_INCLUDE + "deep_gemm/scheduler/sm90_paged_mqa_logits.cuh"
# flashinfer-python wheels: the JIT headers (the sampling kernels).
FLASHINFER_INCLUDE = "flashinfer/data/include/"
FLASHINFER_SAMPLING = FLASHINFER_INCLUDE + "flashinfer/sampling.cuh"


class UpstreamError(RuntimeError):
    """A fetch or an extraction failed; the message names the artifact and version."""


@dataclass(frozen=True)
class Artifact:
    """One published wheel, and what the harness takes out of it."""

    key: str                    # short handle used by scenarios, e.g. "sglang-0.5.18", "tk-C"
    dist: str                   # distribution name on the index
    version: str                # exact version
    members: tuple[str, ...]    # wheel paths to unpack: a file, or a folder ending in "/"
    required: tuple[str, ...]   # files that must be in the wheel (else the wheel is refused)
    gpu_only: bool              # used only on a GPU machine (big wheels: never fetched on CPU by default)
    pip_tags: tuple[str, ...] = ()
    what: str = ""              # one line for reports and --list
    min_triton: str = ""        # the oldest triton this code imports with ("" = any we run)
    # Headers unpacked with everything they #include from the wheel (include_closure), resolved against their own
    # folder and then these include folders: a kernel's headers without the whole library (vLLM's DeepGEMM
    # include/ is 30 MB; one scheduler header's closure is 44 files, 0.6 MB).
    closure: tuple[str, ...] = ()
    closure_dirs: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.dist} {self.version}"

    @property
    def folder(self) -> str:
        return f"{self.dist}-{self.version}"

    @property
    def wheel_prefix(self) -> str:
        """How the wheel's file name starts (PEP 427: dashes and dots of the name become underscores)."""
        return f"{re.sub(r'[-_.]+', '_', self.dist)}-{self.version}-"


def _sglang(version: str, what: str) -> Artifact:
    return Artifact(f"sglang-{version}", "sglang", version, (PRE_DISPATCH_CUH, JIT_INCLUDE),
                    (PRE_DISPATCH_CUH, JIT_INCLUDE + "sgl_kernel/tensor.h", JIT_INCLUDE + "sgl_kernel/utils.cuh"),
                    gpu_only=False, pip_tags=SGLANG_TAGS, what=what)


def _triton_kernels(key: str, dist: str, version: str, what: str, min_triton: str = "") -> Artifact:
    return Artifact(key, dist, version, ("triton_kernels/",), ("triton_kernels/__init__.py",), gpu_only=True,
                    what=what, min_triton=min_triton)


def _vllm(version: str, what: str) -> Artifact:
    return Artifact(f"vllm-{version}", "vllm", version, (VLLM_CACHE_UTILS,), (VLLM_CACHE_UTILS, VLLM_DG_METADATA),
                    gpu_only=True, what=what, closure=(VLLM_DG_METADATA,), closure_dirs=(VLLM_DG_INCLUDE,))


def _flashinfer(version: str, what: str) -> Artifact:
    return Artifact(f"flashinfer-{version}", "flashinfer-python", version, (), (FLASHINFER_SAMPLING,), gpu_only=True,
                    what=what, closure=(FLASHINFER_SAMPLING,), closure_dirs=(FLASHINFER_INCLUDE,))


ARTIFACTS: tuple[Artifact, ...] = (
    _sglang("0.5.18", "MegaMoE pre-dispatch, the last version with packed scale addressing (buggy)"),
    _sglang("0.5.19", "MegaMoE pre-dispatch with the padded-stride fix (sglang PR #36237)"),
    _triton_kernels("tk-A", "sgl-kernel", "0.3.21", "triton_kernels copy A: matmul_ogs API, triton 3.6"),
    _triton_kernels("tk-C", "sglang-kernel", "0.4.6.post1",
                    "triton_kernels copy C: matmul API, pinned by sglang 0.5.18/0.5.19, triton 3.6"),
    _triton_kernels("tk-D", "sglang-kernel", "0.4.10", "triton_kernels copy D: matmul API, needs triton >= 3.8",
                    min_triton="3.8"),
    _vllm("0.27.1", "DeepSeek-V4 block-table gather (unguarded); bundled DeepGEMM SM90 metadata, q_idx = lo (buggy)"),
    _vllm("0.33.0", "DeepSeek-V4 block-table gather (still unguarded); bundled DeepGEMM SM90 metadata fixed"),
    _flashinfer("0.7.1", "top-k sampling reads top_k by output position (buggy, flashinfer #5339)"),
    _flashinfer("0.7.2", "top-k sampling reads top_k by row (fixed)"),
)
# The triton_kernels copies by letter (A: matmul_ogs; C, D: matmul), as the last-expert scenario names them.
TRITON_KERNELS_COPIES = {"A": "tk-A", "C": "tk-C", "D": "tk-D"}
BY_KEY = {a.key: a for a in ARTIFACTS}


def version_tuple(version: str) -> tuple[int, ...]:
    """'3.6.0' -> (3, 6, 0); '3.8.0+git1234' -> (3, 8, 0); stops at the first part without leading digits."""
    parts = []
    for piece in version.split("."):
        m = re.match(r"\d+", piece)
        if m is None:
            break
        parts.append(int(m.group()))
    return tuple(parts)


def triton_problem(art: Artifact, triton_version: str | None) -> str | None:
    """None when `art` can run with this triton, else 'needs triton >= X, found Y'."""
    if not art.min_triton:
        return None
    if triton_version is None:
        return f"needs triton >= {art.min_triton}, found none"
    if version_tuple(triton_version) < version_tuple(art.min_triton):
        return f"needs triton >= {art.min_triton}, found {triton_version}"
    return None


def artifact(key: str) -> Artifact:
    try:
        return BY_KEY[key]
    except KeyError:
        raise UpstreamError(f"unknown upstream artifact {key!r}; known: {', '.join(BY_KEY)}") from None


# --- places --------------------------------------------------------------------------------------------------
def wheel_cache() -> Path:
    """Where downloaded wheels are kept: $GPU_MEMSAFETY_WHEELS, else ~/.cache/gpu-memsafety/wheels."""
    configured = os.environ.get(WHEELS_ENV, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "gpu-memsafety" / "wheels"



class TamperedError(UpstreamError):
    """An unpacked folder whose files differ from the manifest written when it was unpacked from its pinned wheel."""


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_of(folder: Path) -> dict[str, str]:
    """{relative path: sha256} of every regular file under `folder` but the stamp; a symbolic link, a FIFO or
    any other non-regular entry is TamperedError (extract writes regular files and folders only)."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if rel == STAMP:
            continue
        if path.is_symlink() or not (path.is_dir() or path.is_file()):
            raise TamperedError(f"{rel} is not a regular file (a link or a special file)")
        if path.is_file():
            found[rel] = _sha256_file(path)
    return found


def stamp_text(wheel_name: str, wheel_sha256: str, manifest: dict[str, str]) -> str:
    """The stamp: the wheel's name and pinned sha256, the file count, then `sha256  path` for every file unpacked
    (sha256sum's format), so that the tree is tied to the pinned wheel and can be checked file by file."""
    lines = [wheel_name, wheel_sha256, f"{len(manifest)} files", *(f"{h}  {n}" for n, h in sorted(manifest.items()))]
    return "\n".join(lines) + "\n"


def _refetch(art: Artifact, folder: Path) -> str:
    return (f"delete {folder} and run `python -m gpu_memsafety.cli.upstream --only {art.key}` (or `make upstream`) "
            f"to unpack it again from the pinned wheel")


def verify_tree(art: Artifact, folder: Path, stamp: Sequence[str]) -> None:
    """Every file of `folder` is the one the pinned wheel the stamp names holds, byte for byte (sha256), and no file
    was added; else TamperedError naming the file and how to refetch. The hashes compared with never come from the
    folder (its stamp could be rewritten with the folder's own hashes): `trusted_manifest`."""
    for line in stamp[3:]:
        digest, sep, name = line.partition("  ")
        if not sep or not re.fullmatch(r"[0-9a-f]{64}", digest) or not name:
            raise TamperedError(f"{art.label}: the manifest in {folder / STAMP} has a malformed line {line!r}; "
                                f"{_refetch(art, folder)}")
    try:
        expected = trusted_manifest(art, stamp[0])
    except TamperedError as exc:
        raise TamperedError(f"{exc}; {_refetch(art, folder)}") from None
    try:
        found = manifest_of(folder)
    except TamperedError as exc:
        raise TamperedError(f"{art.label}: {folder}: {exc}; {_refetch(art, folder)}") from None
    except OSError as exc:
        raise TamperedError(f"{art.label}: {folder} cannot be read ({exc}); {_refetch(art, folder)}") from None
    for name in sorted(set(expected) | set(found)):
        if name not in found:
            problem = "is missing"
        elif name not in expected:
            problem = "is not in the manifest (added after unpacking)"
        elif found[name] != expected[name]:
            problem = f"differs from what was unpacked (sha256 {found[name]}, manifest {expected[name]})"
        else:
            continue
        raise TamperedError(f"{art.label}: {folder / name} {problem}: the unpacked tree no longer matches the pinned "
                            f"wheel {stamp[0]}; {_refetch(art, folder)}")


def unpacked(art: Artifact, vendor: Path | None = None) -> Path | None:
    """The artifact's folder under .vendor/ if it is complete: stamped, from a wheel of `art` whose pinned hash
    the stamp records (a folder unpacked before the pins or before manifests, or from another wheel, is not), and
    every file in it the one the stamp's manifest lists (checked on every call: TamperedError when not); else
    None."""
    folder = (vendor or vendor_dir()) / art.folder
    try:
        stamp = (folder / STAMP).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if len(stamp) < 3 or not stamp[0].startswith(art.wheel_prefix) or WHEEL_SHA256.get(stamp[0]) != stamp[1]:
        return None
    if not re.fullmatch(r"\d+ files", stamp[2]) or (int(stamp[2].split()[0]) > 0 and len(stamp) == 3):
        return None       # a stamp from before manifests: not present, `make upstream` unpacks it again
    verify_tree(art, folder, stamp)
    return folder


def how_to_get(art: Artifact) -> str:
    """The sentence a case that needs `art` prints when it is missing."""
    return (f"{art.label} is not unpacked in .vendor/{art.folder}: run `make upstream` (or `python -m gpu_memsafety.cli.upstream "
            f"--only {art.key}`) on a machine with access to the package index, then copy .vendor/ here")


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


@contextlib.contextmanager
def _zip_after_check(art: Artifact, wheel: Path, handle: BinaryIO) -> Iterator[tuple[zipfile.ZipFile, str]]:
    """The wheel opened as a zip from the very bytes whose hash was checked (never reopened by name)."""
    digest = verify_wheel(art, wheel, handle)
    handle.seek(0)
    with zipfile.ZipFile(handle) as zf:
        yield zf, digest


def _chosen(art: Artifact, zf: zipfile.ZipFile) -> list[str]:
    """The wheel members unpacked for `art`: its members and the include closure of its closure roots."""
    names = zf.namelist()
    return sorted(set(_selected(names, art.members)) | set(include_closure(names, zf.read, art.closure,
                                                                           art.closure_dirs)))


def wheel_manifest(art: Artifact, wheel: Path) -> dict[str, str]:
    """{member: sha256} of what `extract` unpacks from the pinned `wheel`, hashed from the wheel's own bytes (the
    rows upstream/pins.UNPACKED_SHA256 commits: regenerate them with this from a wheel whose pin checked)."""
    with wheel.open("rb") as handle, _zip_after_check(art, wheel, handle) as (zf, _):
        return {name: hashlib.sha256(zf.read(name)).hexdigest() for name in _chosen(art, zf)}


def record_manifest(art: Artifact, wheel: Path) -> dict[str, str]:
    """{member: sha256} of what `extract` unpacks, from the pinned wheel's own RECORD (PEP 376/427: urlsafe base64
    sha256 of every file), read from the bytes whose pinned hash was checked."""
    with wheel.open("rb") as handle, _zip_after_check(art, wheel, handle) as (zf, _):
        try:
            hashes = record_hashes(zf)
        except ValueError as exc:
            raise UpstreamError(f"{art.label}: wheel {wheel.name}: {exc}") from None
        chosen = _chosen(art, zf)
    missing = [n for n in chosen if n not in hashes]
    if missing:
        raise UpstreamError(f"{art.label}: wheel {wheel.name}'s RECORD has no sha256 for {', '.join(missing[:3])}")
    return {name: hashes[name] for name in chosen}


def trusted_manifest(art: Artifact, wheel_name: str, cache: Path | None = None) -> dict[str, str]:
    """What the folder unpacked from `wheel_name` must hold, from nothing in the folder itself: the hashes committed
    for that wheel (upstream/pins.UNPACKED_SHA256), else the pinned wheel's own RECORD (the wheel in the cache,
    its pin checked); TamperedError when neither is at hand (the folder cannot be vouched for)."""
    committed = UNPACKED_SHA256.get(wheel_name)
    if committed is not None:
        return dict(committed)
    wheel = (cache or wheel_cache()) / wheel_name
    if wheel_name in WHEEL_SHA256 and wheel.is_file():
        try:
            return record_manifest(art, wheel)
        except (UpstreamError, OSError, ValueError, zipfile.BadZipFile) as exc:
            raise TamperedError(f"{art.label}: the pinned wheel {wheel} cannot vouch for the unpacked files "
                                f"({exc})") from None
    raise TamperedError(f"{art.label}: no hashes are committed for wheel {wheel_name} and the wheel is not in "
                        f"{wheel.parent}: the unpacked files cannot be checked against anything but themselves")


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
            chosen = _chosen(art, zf)
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
def installed_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def tvm_ffi_problem() -> str | None:
    """None when the pinned apache-tvm-ffi is importable here, else what is wrong (needed and found)."""
    found = installed_version(TVM_FFI_DIST)
    if found == TVM_FFI_VERSION:
        return None
    return (f"needs {TVM_FFI_DIST}=={TVM_FFI_VERSION} (what sglang 0.5.18/0.5.19 build with), found "
            f"{found or 'none'} in {sys.prefix}: run `make upstream`")


def tvm_ffi_requirement() -> str:
    """The pip requirement of the pinned apache-tvm-ffi with the hash of every pinned wheel of it."""
    prefix = f"{re.sub(r'[-_.]+', '_', TVM_FFI_DIST)}-{TVM_FFI_VERSION}-"
    hashes = sorted(sha for name, sha in WHEEL_SHA256.items() if name.startswith(prefix))
    return " ".join([f"{TVM_FFI_DIST}=={TVM_FFI_VERSION}", *(f"--hash=sha256:{h}" for h in hashes)])


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
