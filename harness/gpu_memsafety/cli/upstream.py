"""`make upstream`: the published upstream code the scenarios run, fetched by exact version into .vendor/.

Why this exists: the scenarios guard the kernels users install, so they run the real upstream files at the
versions people use, never a copy committed here. The one catalogue of those versions
(`ARTIFACTS`) and the one place that fetches them is gpu_memsafety/upstream/catalogue.py; this is its command: `pip download --no-deps --only-binary=:all:` of the
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
(`unpacked`) checks each file, and that no file was added, against hashes that do not come from the folder: those
committed in the repository for that wheel (upstream/pins.UNPACKED_SHA256, hashed from the pinned wheel's
bytes), else the pinned wheel's own RECORD (the cached wheel, its pin checked first). A mismatch, or a folder
nothing can vouch for, is TamperedError naming the file and how to unpack it again (`make upstream` redoes such a
folder): a tampered file under a stamp rewritten with the folder's own hashes is caught. A second run does nothing, a half-written folder (no stamp) or one whose stamp names a
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
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from gpu_memsafety.upstream.catalogue import (  # noqa: F401  (the catalogue's names, as the command and its tests read them)
    ARTIFACTS, BY_KEY, STAMP, TVM_FFI_DIST, TVM_FFI_VERSION, WHEELS_ENV, Artifact, TamperedError, UpstreamError,
    artifact, download, extract, fetch, find_wheel, include_closure, install_tvm_ffi, manifest_of, record_manifest,
    stamp_text, trusted_manifest, tvm_ffi_problem, tvm_ffi_requirement, unpacked, verify_tree, verify_wheel,
    wheel_cache, wheel_manifest)
from gpu_memsafety.upstream.pins import UNPACKED_SHA256, WHEEL_SHA256   # noqa: F401
from gpu_memsafety.util.paths import VENDOR_ENV, vendor_dir   # noqa: F401  (VENDOR_ENV: re-exported for messages)


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
