"""Fold the changelog fragments of changelog.d/ into CHANGELOG.md's Unreleased section.

    python3 tools/changelog.py            # fold every fragment, then delete the fragments folded
    python3 tools/changelog.py --check    # only check the fragments (exit 1 naming each bad one)
    python3 tools/changelog.py --keep     # fold, keep the fragment files

A fragment is changelog.d/<issue>.<slug>.md (e.g. 43.evidence-out-of-tree.md): one or a few entries, each
starting with "Added:", "Changed:", "Deprecated:", "Removed:", "Fixed:" or "Security:" (keep-a-changelog's
kinds); a line that starts with none of them continues the entry above it. Each entry lands as one bullet
under its kind's heading in "## [Unreleased]", in the order of keep-a-changelog, followed by "(#<issue>)";
fragments are read in the order of their issue number, then name. Standard library only."""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
FRAGMENT = re.compile(r"^(\d+)\.[\w-]+\.md$")
UNRELEASED = "## [Unreleased]"
ROOT = Path(__file__).resolve().parent.parent


class FragmentError(ValueError):
    pass


@dataclass(frozen=True)
class Entry:
    kind: str
    text: str
    issue: int


def read_fragment(path: Path) -> list[Entry]:
    match = FRAGMENT.match(path.name)
    if not match:
        raise FragmentError(f"{path}: a fragment is named <issue>.<slug>.md (e.g. 43.evidence-out-of-tree.md)")
    issue = int(match.group(1))
    entries: list[tuple[str, list[str]]] = []
    for line in read_text(path).splitlines():
        if not line.strip():
            continue
        kind, sep, rest = line.partition(":")
        if sep and kind.strip() in KINDS:
            entries.append((kind.strip(), [rest.strip()]))
        elif entries:
            entries[-1][1].append(line.strip())
        else:
            raise FragmentError(f"{path}: its first line must start with one of {', '.join(k + ':' for k in KINDS)}"
                                f" (found {line.strip()[:60]!r})")
    if not entries:
        raise FragmentError(f"{path}: empty; write one line such as 'Fixed: what was wrong, what it does now'")
    for kind, lines in entries:
        if not " ".join(lines).strip():
            raise FragmentError(f"{path}: a '{kind}:' entry says nothing")
    return [Entry(kind, " ".join(lines).strip(), issue) for kind, lines in entries]


def read_text(path: Path) -> str:
    """A file's text as UTF-8; anything else is refused by name (never a traceback, never a guess)."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FragmentError(f"{path}: not UTF-8 (byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r}); "
                            f"save it as UTF-8") from None


def fragments(folder: Path) -> list[Path]:
    found = [p for p in folder.glob("*.md") if p.name != "README.md"]
    return sorted(found, key=lambda p: (int(m.group(1)) if (m := FRAGMENT.match(p.name)) else -1, p.name))


def fold(changelog: str, entries: list[Entry]) -> str:
    """CHANGELOG text with `entries` added under Unreleased, each kind's bullets after those already there."""
    if UNRELEASED not in changelog:
        raise FragmentError(f"CHANGELOG.md has no '{UNRELEASED}' heading: add it above the newest version")
    head, _, tail = changelog.partition(UNRELEASED)
    section, nxt, rest = tail.partition("\n## ")
    bullets: dict[str, list[str]] = {k: [] for k in KINDS}
    current = None
    preamble: list[str] = []
    blank = False
    for line in section.splitlines()[1:]:
        heading = re.match(r"^#{1,6}\s", line)
        if heading and re.fullmatch(r"### (\w+)\s*", line) and line.split()[1] in KINDS:
            current = line.split()[1]
        elif heading:
            raise FragmentError(f"CHANGELOG.md: the Unreleased section's line {line.strip()[:60]!r} is a heading this "
                                f"tool cannot keep (its sections are ### {', ### '.join(KINDS)}): move what it "
                                f"heads under one of them, or into a fragment, then fold again")
        elif current is None:
            if line.strip():
                preamble.append(line)
        elif line.startswith("- "):
            bullets[current].append(line)
        elif line.strip() and bullets[current] and (line.startswith((" ", "\t")) or not blank):
            bullets[current][-1] += "\n" + line
        elif line.strip():
            raise FragmentError(f"CHANGELOG.md: under '### {current}' of the Unreleased section, {line.strip()[:60]!r} "
                                f"is not a bullet ('- ...'): make it one (or a fragment), then fold again")
        blank = not line.strip()
    for entry in entries:
        bullets[entry.kind].append(f"- {entry.text} (#{entry.issue})")
    body = [UNRELEASED, ""] + ([*preamble, ""] if preamble else [])
    for kind in KINDS:
        if bullets[kind]:
            body += [f"### {kind}", "", *bullets[kind], ""]
    folded = head + "\n".join(body) + ("\n## " + rest if nxt else "")
    _check_kept(changelog, folded)
    return folded


def _check_kept(before: str, after: str) -> None:
    """Every non-blank line of the old CHANGELOG is in the new one, in its order: the fold adds, never drops."""
    lines = iter(after.splitlines())
    for line in before.splitlines():
        if line.strip() and not any(other == line for other in lines):
            raise FragmentError(f"CHANGELOG.md: folding would drop the line {line.strip()[:60]!r}: nothing written")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the fragments")
    parser.add_argument("--keep", action="store_true", help="keep the fragment files after folding them")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (CHANGELOG.md and changelog.d/)")
    args = parser.parse_args(argv)
    paths = fragments(args.root / "changelog.d")
    entries: list[Entry] = []
    bad = []
    for path in paths:
        try:
            entries += read_fragment(path)
        except FragmentError as exc:
            bad.append(str(exc))
    for message in bad:
        print(f"changelog: {message}", file=sys.stderr)
    if bad:
        return 1
    if args.check:
        print(f"changelog: {len(paths)} fragments, {len(entries)} entries, all well formed")
        return 0
    target = args.root / "CHANGELOG.md"
    try:
        target.write_text(fold(read_text(target), entries), encoding="utf-8")
    except FragmentError as exc:
        print(f"changelog: {exc}", file=sys.stderr)
        return 1
    if not args.keep:
        for path in paths:
            path.unlink()
    print(f"changelog: folded {len(entries)} entries from {len(paths)} fragments into {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
