"""Exceptions of building the kernels' CUDA C++ code (harness/gpu_memsafety/util/cuda_build.py and the adapters that use it).

"This machine cannot run that" and "that does not apply here" are the engine's own `Unsupported` and
`NotApplicable` (gpu_memsafety.errors), which adapters raise as they are. `ToolchainMissing` (an Unsupported)
means building a kernel needs a tool this machine lacks (nvcc, ninja, an nvcc that knows the GPU's
architecture): the case could not run here, which fails a run on a GPU machine unless --allow-unsupported
accepts it. `KernelBuildError` means the kernel source did not compile with the tools that are there: a real
failure that nothing accepts, carrying the tail of the compiler's output.
"""
from __future__ import annotations

from gpu_memsafety.errors import Unsupported


class KernelBuildError(Exception):
    """Compiling a kernel failed; the message ends with the tail of the compiler's output."""


class ToolchainMissing(Unsupported):
    """Building a kernel needs a tool this machine lacks; the message names what was needed and what was found."""
