"""Exceptions shared by the engine and the kernel adapters (pure: no torch)."""


class Unsupported(Exception):
    """This machine cannot run the case; the message says what was needed and what was found."""


class NotApplicable(Unsupported):
    """The case does not apply to this machine (another architecture, a kernel copy that needs a newer
    triton): reported as 'not applicable' with the reason, never a failure. Unlike a plain Unsupported (this
    machine should run the case and cannot), it does not fail a GPU runner."""
