"""What a CI runner reads as a command, written the runners' way (not the neutraliser's), for the tests that check
that no text the harness writes is one: GitHub's runner trims a line's leading white space (.NET `TrimStart`, every
Unicode white space) and reads `::` at its start, and `##[` anywhere in it; Azure Pipelines `##vso[` and TeamCity
`##teamcity[` anywhere. Plus the characters a terminal, a log or an XML file must never get raw."""
from __future__ import annotations

import re

# Every character .NET's char.IsWhiteSpace accepts (Unicode Zs, Zl, Zp, U+0009..U+000D, U+0085), and the ones
# Python's str.isspace adds (U+001C..U+001F): what may lead a line that a runner still reads as a command.
RUNNER_WHITESPACE = ("\t\x0b\x0c \x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                     "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069"
                         "\ud800-\udfff\ufeff\ufffe\uffff]")
# Commands as the attacks of issue 53 wrote them: led by white space a runner trims, or in mid-line.
ATTACKS = ("\xa0::stop-commands::tok", "\u3000::add-mask::secret", "\u2003 \t::warning::forged",
           "mid-line ##[add-mask]secret", "x##vso[task.setvariable variable=a]b", "y ##teamcity[message text='x']",
           "\n::error::x", "\r::notice::y", "##[error]z")


def commands(text: str) -> list[str]:
    """The lines of `text` a runner would read as a command (lines split at \\n; a raw CR is caught apart)."""
    found = []
    for line in text.split("\n"):
        trimmed = line.lstrip(RUNNER_WHITESPACE + "\n\r")
        lowered = line.lower()
        if trimmed.startswith("::") or "##[" in line or "##vso[" in lowered or "##teamcity[" in lowered:
            found.append(line)
    return found


def assert_neutral(text: str, where: str = "") -> None:
    found = commands(text)
    assert not found, f"{where}: a line a CI runner reads as a command: {found[0]!r}"
    raw = RAW_CONTROL.search(text)
    assert raw is None, f"{where}: raw control character {raw.group()!r}" if raw else ""
