"""`make`'s argument-list variables (PYTEST_ARGS, BENCH_ARGS, UPSTREAM_ARGS): split as a shell splits words,
never run by a shell.

Why this exists: a Makefile that pastes a variable into a recipe hands it to /bin/sh, so
`make sanitize 'PYTEST_ARGS=-x; rm -rf ~'` would run the second command (and `REPORTS=x; cmd` the same; those
single values are quoted in the Makefile). An argument list must still split into words, with quotes working
as in a shell (`PYTEST_ARGS='-k "a or b"'`). So the Makefile exports the variable (make puts its text into the
environment as it is, no shell involved) and runs

    python -m gpu_memsafety.cli.makeargs VAR -- COMMAND [ARG...]

which splits $VAR with shlex (quotes and backslashes as in a shell; `;`, `|`, `$(...)` and backquotes are
ordinary characters) and replaces itself with COMMAND, its arguments, then those words. VAR is removed from
the environment COMMAND gets.
"""
from __future__ import annotations

import os
import shlex
import sys
from typing import Sequence

USAGE = "usage: python -m gpu_memsafety.cli.makeargs VAR -- COMMAND [ARG...]"


def words(name: str, environ: dict[str, str] | os._Environ[str] | None = None) -> list[str]:
    """The words of $name, split as a shell would split them; ValueError naming the variable on bad quoting."""
    text = (os.environ if environ is None else environ).get(name, "")
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc} in {text!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--" or not args[0]:
        print(USAGE, file=sys.stderr)
        return 2
    name, command = args[0], args[2:]
    try:
        extra = words(name)
    except ValueError as exc:
        print(f"make: {exc}", file=sys.stderr)
        return 2
    os.environ.pop(name, None)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(command[0], [*command, *extra])
    except OSError as exc:
        print(f"make: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    return 0    # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main())
