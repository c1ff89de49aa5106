"""Every numeric option of every command, bounded in one table: a count no machine can hold (`simulate --gpus
1000000000` planned a billion workers and never ended) is a usage error naming the option and its range, before
anything is allocated or started.

`number(option, text)` reads one integer option from its text; the CLIs wrap the error as argparse's usage error
(`arg_type`), the pytest options as pytest.UsageError. The ranges are generous: far above any real run, far below
what would hang or exhaust this machine.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

WEEK_S = 7 * 24 * 3600


@dataclass(frozen=True)
class Bound:
    low: int
    high: int
    what: str          # what the number counts, for the message


BOUNDS: dict[str, Bound] = {
    # simulate
    "--gpus": Bound(1, 1024, "GPUs"),
    "--workers-per-gpu": Bound(0, 256, "workers on each GPU (0: as measured)"),
    # pytest scenario runs and host suites
    "--batch-size": Bound(1, 100_000, "cases per worker process"),       # bench
    "--gpu-memsafety-batch-size": Bound(1, 100_000, "cases per worker process, or tests per child process"),
    "--gpu-memsafety-iterations": Bound(1, 1_000_000, "runs per case"),
    "--gpu-memsafety-batch": Bound(1, 100_000, "tests per child process"),
    "--gpu-memsafety-timeout": Bound(1, WEEK_S, "seconds"),
    # repro
    "--loop": Bound(1, 1_000_000, "iterations"),
    # bench
    "--reps": Bound(1, 1_000_000, "timed launches"),
    "--sample": Bound(1, 100_000, "cases"),
    "--sizes-mib": Bound(1, 1 << 20, "MiB a buffer"),
    "--child-timeout": Bound(1, WEEK_S, "seconds"),
    "--scaling-budget-s": Bound(1, WEEK_S, "seconds"),
    "--scaling-workers": Bound(1, 1024, "workers"),
}


class BoundError(ValueError):
    """A numeric option out of its range or not a number; the message names the option and the range."""


def number(option: str, text: object) -> int:
    bound = BOUNDS[option]
    expected = f"an integer from {bound.low:,} to {bound.high:,} ({bound.what})"
    try:
        value = int(str(text).strip())
    except ValueError:
        raise BoundError(f"{option}: expected {expected}, got {text!r}") from None
    if not bound.low <= value <= bound.high:
        raise BoundError(f"{option}: expected {expected}, got {value:,}")
    return value


def numbers(option: str, text: str) -> list[int]:
    """A comma-separated list of the option's numbers (at least one)."""
    values = [number(option, part) for part in str(text).split(",") if part.strip()]
    if not values:
        raise BoundError(f"{option}: expected a comma-separated list of integers, got {text!r}")
    return values


def arg_type(option: str, parse: Callable[[str, str], object] = number) -> Callable[[str], object]:
    """An argparse `type=` for the option: out of range is argparse's usage error (exit 2, the usage line)."""
    def convert(text: str) -> object:
        try:
            return parse(option, text)
        except BoundError as exc:
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None
    convert.__name__ = option.lstrip("-")
    return convert
