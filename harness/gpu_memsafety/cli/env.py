"""What this machine has: GPUs through NVML (nvidia-ml-py), the driver, compute-sanitizer, package versions.

NVML is used instead of torch.cuda so that the parent process (and every pytest-xdist worker) never creates
a CUDA context: only the case workers, pinned with CUDA_VISIBLE_DEVICES, touch the GPU. No GPU or no NVML
is an answer ("none found", with the reason), never an exception.
"""
from __future__ import annotations

import importlib.metadata as md
import os
import platform
import socket
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str
    capability: tuple[int, int]
    memory_mib: int

    @property
    def arch(self) -> str:
        return arch_label(self.capability)


@dataclass
class Discovery:
    gpus: list[Gpu] = field(default_factory=list)
    driver: str = ""
    nvml: str = ""          # "" when NVML answered, else why not

    @property
    def summary(self) -> str:
        if not self.gpus:
            return f"no GPU found ({self.nvml or 'NVML reports 0 devices'})"
        names = ", ".join(f"{g.index}: {g.name} {g.arch}" for g in self.gpus)
        return f"{len(self.gpus)} GPU(s): {names}; driver {self.driver}"


def arch_label(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def discover() -> Discovery:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError as exc:
        return Discovery(nvml=f"nvidia-ml-py is not installed ({exc})")
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return Discovery(nvml=f"NVML did not initialise: {exc}")
    try:
        return Discovery(gpus=[_gpu(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount())],
                         driver=_text(pynvml.nvmlSystemGetDriverVersion()))
    finally:
        pynvml.nvmlShutdown()


def _gpu(pynvml: Any, index: int) -> Gpu:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1 << 20)
    return Gpu(index, _text(pynvml.nvmlDeviceGetName(handle)), _text(pynvml.nvmlDeviceGetUUID(handle)),
               (int(major), int(minor)), int(memory))


def visible_gpus(disc: Discovery | None = None) -> tuple[list[Any], str]:
    """The GPUs this process may use, as `fixtures.gpus.Device`s, and, when none, why: NVML's list with the user's
    CUDA_VISIBLE_DEVICES applied (NVML ignores that variable; an empty value hides every GPU). The one place a run
    decides whether it has a GPU: scenario runs, `repro`, `run_case` and `bench` all ask here, so a worker never
    gets a GPU its run was told it does not have."""
    from gpu_memsafety.fixtures import gpus
    disc = disc or discover()
    devices, why = gpus.visible([(g.index, g.uuid) for g in disc.gpus], os.environ.get("CUDA_VISIBLE_DEVICES"))
    if not disc.gpus:
        why = disc.nvml or "NVML reports no device"      # why NVML found none says more than "no GPU"
    return devices, why


def package_version(name: str) -> str:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"


def environment(discovery: Discovery | None = None, sanitizer: Any = None) -> dict[str, Any]:
    """The report's `environment` block."""
    disc = discovery or discover()
    from gpu_memsafety.sanitizer import tool as san
    lookup = sanitizer or san.locate()
    found = lookup.found
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "gpus": [{**asdict(g), "arch": g.arch} for g in disc.gpus],
        "archs": sorted({g.arch for g in disc.gpus}) or ["cpu"],
        "driver": disc.driver,
        "nvml": disc.nvml or "ok",
        "compute_sanitizer": ({"path": str(found.path), "version": found.version, "source": found.source}
                              if found else {"path": None, "searched": [str(p) for p in lookup.searched],
                                             "rejected": [_rejected(info) for info in lookup.rejected]}),
        "torch": package_version("torch"),
        "triton": package_version("triton"),
        "triton_kernels": _triton_kernels_version(),
        "nvidia-ml-py": package_version("nvidia-ml-py"),
    }


def _rejected(info: Any) -> dict[str, str]:
    """A compute-sanitizer that exists and cannot be used, and why (so "not found" is never said of it)."""
    return {"path": str(info.path), "source": str(info.source), "version": str(info.version or ""),
            "problem": str(info.problem or info.version_error or "unusable")}


def _triton_kernels_version() -> str:
    try:
        from gpu_memsafety.kernels.mxfp4.triton_kernels_locator import describe_installed
        return describe_installed()
    except Exception as exc:  # noqa: BLE001 - a report must still be written
        return f"unknown ({type(exc).__name__}: {exc})"
