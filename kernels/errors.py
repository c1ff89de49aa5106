"""Exceptions shared by the kernel adapters.

`Unsupported` means "this machine cannot run that": the harness turns it into an 'unsupported'
outcome, never a failure. `KernelBuildError` means the kernel source did not compile: a real failure,
carrying the tail of the compiler's output.
"""
from __future__ import annotations


class Unsupported(Exception):
    """The kernel cannot run here (no GPU, wrong architecture, missing toolkit)."""


class KernelBuildError(Exception):
    """Compiling a kernel failed; the message ends with the tail of the compiler's output."""
