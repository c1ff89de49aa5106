"""Path arguments of every entry point, checked before any work is done.

Why this exists: an empty path is not "no path". `Path("")` is the current directory, so `merge -o ''` wrote
into whatever directory the job happened to run in; a path with a NUL byte, or an output directory that is
an existing file, fails only after the work. Every command-line path (merge's -o and reports, repro's --keep
and --json, bench's --out, new's --path, --scenario-path, --config; the pytest options --gpu-memsafety-report-dir,
--gpu-memsafety-baseline, --gpu-memsafety-cost-file, --gpu-memsafety-scenario-path) goes through one of these checks, and a bad one is a usage error
naming the option and the value.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Callable


class PathArgError(ValueError):
    """A path argument that cannot be used: names the option, the value and why."""


def _text(value: str | os.PathLike[str], option: str) -> str:
    text = os.fspath(value)
    if not text.strip():
        raise PathArgError(f"{option}: an empty path ({text!r}) names no file or directory (it is not the current "
                           "directory): give a path")
    if "\0" in text:
        raise PathArgError(f"{option}: {text!r} contains a NUL byte")
    return text


def output_dir(value: str | os.PathLike[str], option: str) -> Path:
    """A directory to write into: created later if missing, never an existing file."""
    path = Path(_text(value, option))
    if path.is_symlink() and not path.exists():
        raise PathArgError(f"{option}: {path} is a dangling symbolic link (to {os.readlink(path)}); nothing is "
                           f"written through it: remove it or give another directory")
    if path.exists() and not path.is_dir():
        raise PathArgError(f"{option}: {path}: is not a directory (a file is in the way); give a directory")
    return path


def output_file(value: str | os.PathLike[str], option: str) -> Path:
    """A file to write: never an existing directory."""
    path = Path(_text(value, option))
    if path.is_dir():
        raise PathArgError(f"{option}: {path} is a directory; give a file name")
    return path


def input_file(value: str | os.PathLike[str], option: str) -> Path:
    """A file to read: it exists and is not a directory."""
    path = Path(_text(value, option))
    if not path.exists():
        raise PathArgError(f"{option}: {path} does not exist")
    if path.is_dir():
        raise PathArgError(f"{option}: {path} is a directory, not a file")
    return path


def input_path(value: str | os.PathLike[str], option: str) -> Path:
    """A file or directory to read (a scenario path): it exists."""
    path = Path(_text(value, option))
    if not path.exists():
        raise PathArgError(f"{option}: {path} does not exist")
    return path


def arg_type(check: Callable[[str, str], Path], option: str) -> Callable[[str], Path]:
    """The check as an argparse `type=`: a bad value is argparse's usage error (exit 2)."""
    def convert(value: str) -> Path:
        try:
            return check(value, option)
        except PathArgError as exc:
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None
    convert.__name__ = option.lstrip("-") or "path"
    return convert


def text_arg_type(check: Callable[[str, str], Path], option: str) -> Callable[[str], str]:
    """arg_type that keeps the value as written (for options handed on to another command line)."""
    convert = arg_type(check, option)

    def keep(value: str) -> str:
        convert(value)
        return value
    keep.__name__ = convert.__name__
    return keep
