"""What this machine has, as `gpu-memsafety env` prints it: its GPUs and driver (found by util/gpus.py), compute-sanitizer,
package versions."""
from __future__ import annotations

import importlib.metadata as md
import os
import platform
import socket
from dataclasses import asdict
from typing import Any

from gpu_memsafety.util import gpus


def package_version(name: str) -> str:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"


def environment(discovery: gpus.Discovery | None = None, sanitizer: Any = None) -> dict[str, Any]:
    """The report's `environment` block."""
    disc = discovery or gpus.discover()
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
