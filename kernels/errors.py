"""Exceptions shared by the kernel adapters.

`Unsupported` means "this machine cannot run that": the harness turns it into an 'unsupported'
outcome, never a failure. `ToolchainMissing` (an Unsupported) means building a kernel needs a tool this machine
lacks (nvcc, ninja, an nvcc that knows the GPU's architecture): the case could not run here, which fails a run on
a GPU machine unless --allow-unsupported accepts it. `KernelBuildError` means the kernel source did not compile
with the tools that are there: a real failure that nothing accepts, carrying the tail of the compiler's output.
"""
from __future__ import annotations

from gpu_memsafety.errors import Unsupported  # noqa: F401  (one Unsupported for the engine, the API and every kernel)


class NotApplicable(Unsupported):
    """The case does not apply to this machine (another architecture): 'not applicable', never a failure."""


class KernelBuildError(Exception):
    """Compiling a kernel failed; the message ends with the tail of the compiler's output."""


class ToolchainMissing(Unsupported):
    """Building a kernel needs a tool this machine lacks; the message names what was needed and what was found."""
