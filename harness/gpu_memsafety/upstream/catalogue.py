"""The catalogue of upstream code the scenarios run: each published wheel by exact version (`ARTIFACTS`), where its
unpacked files are (`unpacked`, checked against the manifest its stamp carries), how a case that lacks them says so
(`how_to_get`), and the version checks the kernels' adapters make (`version_tuple`, `triton_problem`,
`tvm_ffi_problem`).

Why it is apart from `gpu-memsafety upstream` (cli/upstream.py, which fetches and unpacks the wheels): the kernels'
adapters and the scenarios read the catalogue, and they sit below the command line; the catalogue, its pins
(upstream/pins.py) and the checks of what was unpacked are what they need, the fetching is not.

Pure of torch/triton/CUDA: it may run before either is installed.
"""
from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from gpu_memsafety.upstream.pins import WHEEL_SHA256
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
    """Every file of `folder` is the one the stamp's manifest lists, byte for byte (sha256), and no file was
    added; else TamperedError naming the file and how to refetch."""
    expected: dict[str, str] = {}
    for line in stamp[3:]:
        digest, sep, name = line.partition("  ")
        if not sep or not re.fullmatch(r"[0-9a-f]{64}", digest) or not name:
            raise TamperedError(f"{art.label}: the manifest in {folder / STAMP} has a malformed line {line!r}; "
                                f"{_refetch(art, folder)}")
        expected[name] = digest
    if stamp[2:3] != [f"{len(expected)} files"]:
        raise TamperedError(f"{art.label}: the manifest in {folder / STAMP} lists {len(expected)} files but says "
                            f"{stamp[2] if len(stamp) > 2 else 'nothing'}; {_refetch(art, folder)}")
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


# --- versions ----------------------------------------------------------------------------------------------
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
