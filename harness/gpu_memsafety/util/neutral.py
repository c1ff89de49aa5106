"""The one function that makes foreign text harmless before it reaches a terminal, a CI log or a file format.

Text in a report comes from kernels, adapters, tests, tools' output and files from other machines. Written as
it is it could drive a terminal (ESC sequences), hide or reorder what a reader sees (CR, bidirectional
overrides, zero-width characters), end an XML file (NUL, U+FFFE), or be read by the CI as one of its commands:
GitHub's runner reads a line of the job log as a workflow command when it starts with `::` once its leading white
space is trimmed (.NET's `TrimStart`: any Unicode white space, the no-break space and U+3000 included:
`::add-mask::`, `::stop-commands::`, `::warning::`) or when it holds `##[` anywhere (`IndexOf`); Azure Pipelines
reads `##vso[` anywhere in a line, TeamCity `##teamcity[`; GitLab a `section_start:`/`section_end:` marker (which
needs a CR and an ESC). `visible` shows every such control character as an escape a reader can see (`\\x1b`,
`\\u202e`), escapes the first `:` of a line that starts with `::` after any white space (`\\x3a:add-mask::`), and
the first `#` of every `##` followed by a word and `[`, wherever it stands (`\\x23#[`): a line of output can then
never be a command, whatever follows or leads it. Every renderer and every message built from foreign text
goes through it; each format adds its own escaping (XML, HTML, Markdown, GitHub's %-encoding) on top.
"""
from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

# C0 and C1 controls but tab and newline, DEL, the invisible characters that reorder or hide text
# (bidirectional marks, overrides and isolates, zero-width characters, line/paragraph separators, BOM), and
# what no file format carries (lone surrogates, the noncharacters U+FFFE and U+FFFF: XML 1.0 refuses them).
_CONTROLS = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ud800-\udfff\ufeff"
             "\ufffe\uffff\u180e")
_CONTROL = re.compile(f"[{_CONTROLS}]")
_CONTROL_OR_NEWLINE = re.compile(f"[{_CONTROLS}\n]")
# A line that a CI would read as a command: GitHub's `::name ...::` after any white space (the runner trims every
# Unicode white space first; Python's `\s` is a superset of .NET's `char.IsWhiteSpace`), and a `##[name]`,
# `##vso[...]` or `##teamcity[...]` anywhere in a line (those runners search the whole line for it).
_COMMAND_START = re.compile(r"^([^\S\n]*):(?=:)", re.MULTILINE)
_COMMAND_ANYWHERE = re.compile(r"#(?=#[A-Za-z]*\[)")


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _escape_command(match: re.Match[str]) -> str:
    return f"{match.group(1)}\\x3a"


def visible(text: str, *, newlines: bool = True) -> str:
    """`text` with every control or invisible character shown as an escape, newlines kept (or, with
    `newlines=False`, escaped too: one line), and no line that starts a CI workflow command."""
    text = (_CONTROL if newlines else _CONTROL_OR_NEWLINE).sub(_escape_char, str(text))
    text = _COMMAND_ANYWHERE.sub(r"\\x23", text)
    return _COMMAND_START.sub(_escape_command, text)


# What a partial line may end with and still become a command once the rest of the line is written: white space
# and one `:` at the start of a line, or a `#`/`##word` that a `[` may follow.
_OPEN_START = re.compile(r"[^\S\n]*:?")
_OPEN_TAIL = re.compile(r"#(?:#[A-Za-z]*)?\Z")


class NeutralWriter:
    """A text stream that writes everything through `visible`, for the streams of a command whose output is text
    for people (a terminal, a CI log): whatever a command prints (an exception's text, a tool's output passed on,
    a name from a file) reaches the stream neutral, with no call site to forget. Whole lines are written as they
    come; of a partial line, only what cannot become a command with the rest of the line (a line start of white
    space and `:`, a trailing `#`/`##word`) waits for the next write. Not a terminal (`isatty()` is False): progress
    bars draw plain lines instead of escape sequences."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._pending = ""
        self._started = False       # part of the current line was written already

    def write(self, text: str) -> int:
        self._pending += str(text)
        self._emit(final=False)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._emit(final=False)
        self.stream.flush()

    def close_line(self) -> None:
        """Write what still waits (the end of the output), neutral."""
        self._emit(final=True)
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def _emit(self, *, final: bool) -> None:
        done, newline, rest = self._pending.rpartition("\n")
        out = visible(done + newline) if newline else ""
        if newline:
            self._started = False
        keep = 0 if final else self._held(rest)
        head, self._pending = rest[:len(rest) - keep], rest[len(rest) - keep:]
        if head:
            out += visible(head)
            self._started = True
        if out:
            self.stream.write(out)

    def _held(self, rest: str) -> int:
        if not self._started and _OPEN_START.fullmatch(rest):
            return len(rest)
        tail = _OPEN_TAIL.search(rest)
        return len(tail.group()) if tail else 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextmanager
def neutral_output() -> Iterator[None]:
    """sys.stdout and sys.stderr written through `visible` for the block (a command's text output)."""
    saved = sys.stdout, sys.stderr
    writers = NeutralWriter(sys.stdout), NeutralWriter(sys.stderr)
    sys.stdout, sys.stderr = writers
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        for writer in writers:
            try:
                writer.close_line()
            except (OSError, ValueError):     # a closed stream or a reader gone: nothing more can be shown
                pass
