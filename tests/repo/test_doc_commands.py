"""Every command README.md and docs/*.md show, checked where a CPU can check it (issue 43): a `make` target and
its variables exist in the Makefile; a `gpu-memsafety` subcommand (also as `python -m gpu_memsafety`) exists and
takes every option the doc gives it (its --help says so); pytest takes every option a doc gives it; a script a doc
runs is in the tree. Commands are taken from code blocks (fenced or indented) and inline code spans.

Run as written, as when pasted into a new shell in the checkout's root (issue 51): `python`, `pytest` and
`gpu-memsafety` are the ones that shell's PATH finds, without the venv, unless the doc activated it before
(`. .venv/bin/activate`); `.venv/bin/python` is the checkout's. A doc that shows `python -m gpu_memsafety ...`
without activating first fails here, as it fails for its reader."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from gpu_memsafety.util.paths import CHECKOUT as ROOT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "ci" / "gpu" / "README.md"]
HARNESS = re.compile(r"^(?:(?:\.venv/bin/)?gpu-memsafety|(?:\.venv/bin/)?python3? -m gpu_memsafety(?:\.[\w.]+)?)\b")
PYTEST = re.compile(r"^(?:(?:\.venv/bin/)?python3? -m |\.venv/bin/)?pytest\b")
ACTIVATE = re.compile(r"(?:^|&&|;)\s*(?:\.|source) \.venv/bin/activate\b")
VENV_BIN = ROOT / ".venv" / "bin"
SCRIPT = re.compile(r"^(?:python3?|bash) ((?:tools|ci)/[\w./-]+)")


def code_lines(text: str) -> list[str]:
    """The lines of fenced and indented code blocks, and every inline code span."""
    out: list[str] = []
    fenced = indented = False
    blank = True
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or (line.startswith("    ") and line.strip() and (blank or indented)):
            indented = not fenced
            out.append(line.strip())
        else:
            if line.strip():
                indented = False
            if not line.startswith("#"):         # a heading names a command; it is not one to paste
                out += re.findall(r"`([^`]+)`", line)
        blank = not line.strip()
    return out


def words(command: str) -> list[str]:
    command = re.split(r"\s+#\s", command, maxsplit=1)[0]   # a comment after the command
    try:
        argv = shlex.split(command)
    except ValueError:
        argv = command.split()
    # `[--option N]` is an optional option: its brackets go; a case id's brackets stay
    return [w.lstrip("[").rstrip("]") if w.lstrip("[").startswith("-") else w for w in argv]


def placeholder(word: str) -> bool:
    """A word that stands for what the reader fills in: COMMAND, JOB.json, ..., <path>."""
    return word in ("...", "…") or word.startswith("<") or bool(re.fullmatch(r"[A-Z][A-Z0-9_]*(\.\w+)?", word))


def commands() -> list[tuple[str, str, bool]]:
    """(doc, command, whether the doc activated the venv before it), in the doc's order."""
    found = []
    for doc in DOCS:
        activated = False
        for line in code_lines(doc.read_text()):
            activated = activated or bool(ACTIVATE.search(line))
            if re.match(r"(make|gpu-memsafety|python3?|\.venv/bin/(?:python|pytest|gpu-memsafety)|pytest|bash)\s",
                        line):
                found.append((str(doc.relative_to(ROOT)), line, activated))
    return found


COMMANDS = commands()


def shell_path(activated: bool) -> str:
    """A new shell's PATH in the checkout: this run's own venv taken out, the checkout's put first once activated."""
    own = {str(VENV_BIN), str(Path(sys.executable).parent)}
    rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in own]
    return os.pathsep.join(([str(VENV_BIN)] if activated else []) + rest)


def as_written(word: str, activated: bool) -> str:
    """The program a shell runs for the command's first word."""
    if "/" in word:
        return str(ROOT / word)
    found = shutil.which(word, path=shell_path(activated))
    assert found, f"`{word}` is not on a new shell's PATH" + ("" if activated else " (the venv is not activated)")
    return found


def makefile() -> tuple[set[str], set[str]]:
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+(?: [\w-]+)*):(?!=)", text, re.M))
    targets = {t for group in targets for t in group.split()}
    variables = set(re.findall(r"^([A-Z_]+) *[?:]?=", text, re.M))
    return targets, variables


@cache
def help_text(*argv: str, program: str = sys.executable) -> str:
    proc = subprocess.run([program, *argv, "--help"], cwd=str(ROOT), capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": shell_path(Path(program).parent == VENV_BIN)})
    assert proc.returncode == 0, f"{program} {' '.join(argv)} --help failed: {proc.stderr[-2000:]}"
    return proc.stdout


def options(argv: list[str]) -> list[str]:
    return [w.split("=")[0] for w in argv if w.startswith("-") and w != "--"]


def test_the_docs_show_commands() -> None:
    """The extraction finds the commands it must (a test of the test: an empty list would check nothing)."""
    shown = {line for _, line, _ in COMMANDS}
    assert any(line.startswith("make test") for line in shown) and any(line.startswith("make sanitize") for line in shown)
    assert sum(bool(HARNESS.match(line)) for line in shown) >= 5 and any(PYTEST.match(line) for line in shown)


@pytest.mark.parametrize(("doc", "line", "activated"), COMMANDS, ids=[f"{d}:{c[:60]}" for d, c, _ in COMMANDS])
def test_a_command_a_doc_shows_exists(doc: str, line: str, activated: bool) -> None:
    argv = words(line)
    if argv[0] == "make":
        targets, variables = makefile()
        named = [w for w in argv[1:] if not w.startswith("-") and not placeholder(w)]
        for word in named:
            if "=" in word:
                assert word.split("=")[0] in variables, f"{doc}: `{line}`: the Makefile has no variable {word}"
            else:
                assert word in targets, f"{doc}: `{line}`: the Makefile has no target {word!r}"
        return
    if HARNESS.match(line) or PYTEST.match(line):
        program = as_written(argv[0], activated)
        if not activated and "/" not in argv[0]:
            probe = subprocess.run([program, "-c", "import gpu_memsafety"], capture_output=True, text=True) \
                if "python" in Path(program).name else None
            assert probe is None or probe.returncode == 0, \
                (f"{doc}: `{line}`: pasted into a new shell, `{argv[0]}` is {program}, which has no gpu_memsafety: "
                 f"activate the venv first in the doc (`. .venv/bin/activate`) or write .venv/bin/python")
    if HARNESS.match(line):
        command = argv[0].endswith("gpu-memsafety")
        module = "gpu_memsafety" if command else argv[argv.index("-m") + 1]
        rest = argv[1:] if command else argv[argv.index("-m") + 2:]
        if module != "gpu_memsafety":
            found = subprocess.run([program, "-c", f"import importlib.util, sys; sys.exit(importlib.util.find_spec("
                                    f"{module!r}) is None)"], capture_output=True, text=True, cwd=str(ROOT))
            assert found.returncode == 0, f"{doc}: `{line}`: no module {module} ({found.stderr[-500:]})"
            if not module.startswith("gpu_memsafety.cli."):
                return                   # a module the engine starts (a worker): importable is what a doc can show
        run = (lambda *a: help_text(*a, program=program)) if command else \
            (lambda *a: help_text("-m", *a, program=program))
        first = () if command else (module,)
        top = run(*first)
        while rest and rest[0] in ("--scenario-path", "--config"):    # options of the command itself
            rest = rest[2:]
        sub = [w for w in rest[:2] if not w.startswith("-")]
        if module == "gpu_memsafety" and (not sub or placeholder(sub[0])):
            return
        if module == "gpu_memsafety":
            names = set(re.findall(r"^    (\w+)\s", top, re.M))
            assert sub[0] in names, f"{doc}: `{line}`: gpu-memsafety has no subcommand {sub[0]!r} (it has {sorted(names)})"
            if len(sub) > 1 and sub[1] not in re.findall(r"^    (\w+)\s", run(*first, sub[0]), re.M):
                sub = sub[:1]                # an argument, not an action of the subcommand
            text = run(*first, *sub) + top
        else:
            text = top
        for option in options(rest):
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), \
                f"{doc}: `{line}`: {option} is no option of {' '.join([module, *sub])} (see its --help)"
        return
    if PYTEST.match(line):
        text = help_text(*(() if argv[0].endswith("pytest") else ("-m", "pytest")), "-p", "no:cacheprovider",
                         program=program)
        for option in options(argv):
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), \
                f"{doc}: `{line}`: pytest (with this plugin) has no option {option}"
        return
    script = SCRIPT.match(line)
    if script:
        assert (ROOT / script.group(1)).is_file(), f"{doc}: `{line}`: {script.group(1)} is not in the tree"


def test_the_check_fails_on_a_command_that_does_not_exist() -> None:
    """An unknown target, variable, subcommand or option fails the check, naming it."""
    for line, says in [("make sanitise", "no target 'sanitise'"), ("make sanitize MODES=x", "no variable MODES=x"),
                       ("gpu-memsafety rerun x", "no subcommand 'rerun'"),
                       ("gpu-memsafety repro x --modes guard", "--modes is no option"),
                       ("pytest --gpu-memsafty tests/", "no option --gpu-memsafty"),
                       ("python3 tools/absent.py", "tools/absent.py is not in the tree")]:
        with pytest.raises(AssertionError, match=re.escape(says)):
            test_a_command_a_doc_shows_exists("doc.md", line, True)


def test_a_command_that_needs_the_venv_fails_unless_the_doc_activated_it() -> None:
    """Issue 51: docs/setup.md showed `python -m gpu_memsafety list` with no venv activated: pasted, it failed."""
    with pytest.raises(AssertionError, match="activate the venv first"):
        test_a_command_a_doc_shows_exists("doc.md", "python -m gpu_memsafety list --tag smoke", False)
    test_a_command_a_doc_shows_exists("doc.md", "python -m gpu_memsafety list --tag smoke", True)
    test_a_command_a_doc_shows_exists("doc.md", ".venv/bin/python -m gpu_memsafety list --tag smoke", False)
    assert [a for _, line, a in commands() if line.startswith("python -m gpu_memsafety")] and \
        all(a for _, line, a in commands() if re.match(r"(python3? -m gpu_memsafety|gpu-memsafety|pytest)\s", line))
