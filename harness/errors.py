"""Exceptions shared by the engine and the kernel adapters (pure: no torch)."""


class Unsupported(Exception):
    """This machine cannot run the case; the message says what was needed and what was found."""
