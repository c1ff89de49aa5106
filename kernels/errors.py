"""Exceptions shared by the kernel adapters.

`Unsupported` means "this machine cannot run that": the harness turns it into an 'unsupported'
outcome, never a failure. `KernelBuildError` means the kernel source did not compile: a real failure,
carrying the tail of the compiler's output.
"""
from __future__ import annotations

from harness.errors import Unsupported  # noqa: F401  (one Unsupported for the engine, the API and every kernel)


class NotApplicable(Unsupported):
    """The case does not apply to this machine (another architecture): 'not applicable', never a failure."""


class KernelBuildError(Exception):
    """Compiling a kernel failed; the message ends with the tail of the compiler's output."""
