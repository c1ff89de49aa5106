"""The one function that makes foreign text harmless before it reaches a terminal, a CI log or a file format.

Text in a report comes from kernels, adapters, tests, tools' output and files from other machines. Written as
it is it could drive a terminal (ESC sequences), hide or reorder what a reader sees (CR, bidirectional
overrides, zero-width characters), end an XML file (NUL, U+FFFE), or be read by the CI as one of its commands:
GitHub parses a line of the job log that starts with `::` (`::add-mask::`, `::stop-commands::`, `::warning::`)
or `##[` as a workflow command, and GitLab a `section_start:`/`section_end:` marker (which needs a CR and an
ESC). `visible` shows every such character as an escape a reader can see (`\\x1b`, `\\u202e`), and escapes the
first character of a line that would start a workflow command (`\\x3a:add-mask::`, `\\x23#[`): a line of
output can then never be a command, whatever follows. Every renderer and every message built from foreign text
goes through it; each format adds its own escaping (XML, HTML, Markdown, GitHub's %-encoding) on top.
"""
from __future__ import annotations

import re

# C0 and C1 controls but tab and newline, DEL, the invisible characters that reorder or hide text
# (bidirectional marks, overrides and isolates, zero-width characters, line/paragraph separators, BOM), and
# what no file format carries (lone surrogates, the noncharacters U+FFFE and U+FFFF: XML 1.0 refuses them).
_CONTROLS = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ud800-\udfff\ufeff"
             "\ufffe\uffff")
_CONTROL = re.compile(f"[{_CONTROLS}]")
_CONTROL_OR_NEWLINE = re.compile(f"[{_CONTROLS}\n]")
# A line that a CI would read as a command: GitHub's `::name ...::` and `##[name]` (the runner trims the line's
# leading white space first), after any spaces or tabs.
_COMMAND_START = re.compile(r"^([ \t]*)(:(?=:)|#(?=#\[))", re.MULTILINE)


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _escape_command(match: re.Match[str]) -> str:
    return f"{match.group(1)}\\x{ord(match.group(2)):02x}"


def visible(text: str, *, newlines: bool = True) -> str:
    """`text` with every control or invisible character shown as an escape, newlines kept (or, with
    `newlines=False`, escaped too: one line), and no line that starts a CI workflow command."""
    text = (_CONTROL if newlines else _CONTROL_OR_NEWLINE).sub(_escape_char, str(text))
    return _COMMAND_START.sub(_escape_command, text)
