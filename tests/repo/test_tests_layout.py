"""The tests mirror the rooms (issue 52, item 5): tests/ has one folder per package of gpu_memsafety and a few
declared others, the modules the tests share sit in tests/helpers/, and a test that starts processes is marked
`e2e`, so that `make test-fast` (`-m "not e2e"`) leaves it out while `make test` and CI run everything.

- Every test module sits in the folder of its room: a package of harness/gpu_memsafety/ (tests/util/ for
  gpu_memsafety.util, ...) or one of OTHER_FOLDERS. A package without a folder fails, and so does a folder that is
  neither: the tests of a new package get the package's name.
- No test module at tests/ itself, nor in tests/helpers/ or tests/data/ (what is there is imported or read).
- The folders are not packages (no __init__.py): pytest imports a test module by its basename with its folder on
  sys.path (the default import mode), so each basename is unique. A test module takes another's helpers by the
  full name (`from tests.judge.test_judge import ...`): a bare basename would resolve only once pytest had
  collected that folder, i.e. by collection order.
- A test that starts processes (subprocess, `sys.executable`, pytest's pytester, the engine's Runner, the API's
  run_case; itself or through a function or fixture of its module) carries the `e2e` marker, on itself, its class
  or its module (`pytestmark`).
- The repository names the suite's files where they are: a mention of tests/.../NAME.py in the docs, the code,
  the scripts or the changelog fragments, where NAME.py is one of the suite's files, is its path (results/ and the
  CHANGELOG are history and keep the paths of their day).
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

from repo_paths import HELPERS, ROOT, TESTS

PACKAGES = ROOT / "harness" / "gpu_memsafety"
# The folders of tests/ that are no package of harness/gpu_memsafety/, each with what it holds.
OTHER_FOLDERS = {
    "model": "the modules at the package's top: model, errors, cover, job",
    "api": "gpu_memsafety.api, what scenario authors import",
    "kernels": "the kernel adapters of kernels/",
    "scenarios": "the scenarios of scenarios/, run on the CPU",
    "repo": "the repository as a whole: layout, docs, changelog, packaging, tools/ and ci/ scripts",
    "gpu": "tests that need a GPU (ci/gpu/*_check.sh run them by path)",
    "helpers": "no tests: the modules and fake kernels the tests import (pyproject's pytest `pythonpath`)",
    "data": "no tests: recorded sanitizer output, reports and schemas the tests read",
}
NOT_TESTS = ("helpers", "data")
# What starts a process, named in a test's code (or in a function's or fixture's of its module it uses; strings,
# docstrings and decorators do not count): these names, `sys.executable`, a call of `run_case`.
STARTERS = {"subprocess", "pytester", "Runner"}
E2E = re.compile(r"\bmark\.e2e\b")


def packages() -> set[str]:
    return {p.parent.name for p in PACKAGES.glob("*/__init__.py")}


def modules_of_tests() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def misplaced(modules: list[Path], rooms: set[str]) -> list[str]:
    """The test modules (paths under tests/) that are not in a room's folder directly under tests/."""
    wrong = []
    for path in modules:
        parts = path.relative_to(TESTS).parts
        if len(parts) != 2 or parts[0] not in rooms or parts[0] in NOT_TESTS:
            wrong.append(path.relative_to(TESTS).as_posix())
    return wrong


def bare_test_imports(source: str) -> list[str]:
    """The test modules a module imports by a bare basename (`from test_judge import ...`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        found += [n for n in names if n.split(".")[0].startswith("test_")]
    return found


def starts_a_process(code: list[ast.AST]) -> bool:
    for n in code:
        if (isinstance(n, ast.Name) and n.id in STARTERS or isinstance(n, ast.arg) and n.arg in STARTERS
                or isinstance(n, ast.alias) and n.name.split(".")[0] in STARTERS
                or isinstance(n, ast.Attribute) and n.attr == "executable" and getattr(n.value, "id", "") == "sys"
                or isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", "")) == "run_case"):
            return True
    return False


def unmarked_starters(source: str) -> list[str]:
    """The tests of a module that start processes and carry no `e2e` marker (themselves, their class, the module)."""
    tree = ast.parse(source)
    if any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
           and E2E.search(ast.unparse(n.value)) for n in tree.body):
        return []
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, node)
    seen: dict[str, bool] = {}

    def starts(name: str, path: frozenset[str]) -> bool:
        if name not in seen:
            node = functions[name]
            code = [n for part in (*node.body, node.args) for n in ast.walk(part)]
            used = {n.id for n in code if isinstance(n, ast.Name)} | {n.arg for n in code if isinstance(n, ast.arg)}
            seen[name] = starts_a_process(code) or any(
                starts(other, path | {name}) for other in used if other in functions and other not in path | {name})
        return seen[name]

    def marked(node: ast.AST) -> bool:
        return any(E2E.search(ast.unparse(d)) for d in getattr(node, "decorator_list", []))

    unmarked = []
    for top in tree.body:
        members = top.body if isinstance(top, ast.ClassDef) and not marked(top) else [top]
        for node in members:
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")
                    and not marked(node) and starts(node.name, frozenset())):
                unmarked.append(node.name)
    return unmarked


def _sources() -> dict[str, str]:
    """Each test module's source by its path under tests/; a module that vanished while read (a test's probe
    file) is left out."""
    sources = {}
    for path in modules_of_tests():
        try:
            sources[path.relative_to(TESTS).as_posix()] = path.read_text()
        except FileNotFoundError:
            continue
    return sources


def test_the_tests_are_found() -> None:
    """Guards the tests below against passing on an empty tree (a moved folder, a wrong ROOT)."""
    assert len(modules_of_tests()) > 100 and {"util", "report", "host", "engine"} <= packages()
    assert (HELPERS / "host_fake.py").is_file() and (HELPERS / "fake_kernels").is_dir()


def test_every_package_has_its_folder_and_every_folder_its_room() -> None:
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    rooms = packages() | set(OTHER_FOLDERS)
    assert not packages() - folders, f"packages of gpu_memsafety with no tests/ folder: {sorted(packages() - folders)}"
    assert not folders - rooms, (f"tests/ folders that are no package of gpu_memsafety and not in OTHER_FOLDERS: "
                                 f"{sorted(folders - rooms)}")
    wrong = misplaced(modules_of_tests(), rooms)
    assert not wrong, f"test modules outside the folder of their room: {wrong}"


def test_the_placement_check_fails_on_a_module_outside_its_room() -> None:
    rooms = packages() | set(OTHER_FOLDERS)
    modules = [TESTS / "test_flat.py", HELPERS / "test_helper.py", TESTS / "util" / "test_x.py",
               TESTS / "nowhere" / "test_y.py", TESTS / "util" / "deeper" / "test_z.py"]
    assert misplaced(modules, rooms) == ["test_flat.py", "helpers/test_helper.py", "nowhere/test_y.py",
                                         "util/deeper/test_z.py"]


def test_test_modules_have_unique_basenames_and_no_package_files() -> None:
    twice = sorted(name for name, n in Counter(p.name for p in modules_of_tests()).items() if n > 1)
    assert not twice, f"test modules of one basename (pytest imports them by basename): {twice}"
    inits = [p.relative_to(TESTS).as_posix() for p in TESTS.rglob("__init__.py") if "fake_kernels" not in p.parts]
    assert not inits, f"tests/ folders are not packages (the default import mode, basenames unique): {inits}"


def test_a_test_module_imports_another_by_its_full_name() -> None:
    bare = {name: found for name, source in _sources().items() if (found := bare_test_imports(source))}
    assert not bare, f"test modules imported by a bare basename (write `from tests.<folder>.<module> import`): {bare}"


def test_the_import_check_fails_on_a_bare_basename() -> None:
    assert bare_test_imports("from test_judge import CASE\nimport test_host_plugin\n") == ["test_judge", "test_host_plugin"]
    assert bare_test_imports("from tests.judge.test_judge import CASE\nfrom report_samples import ROOT\n") == []


def test_tests_that_start_processes_are_marked_e2e() -> None:
    unmarked = {name: tests for name, source in _sources().items() if (tests := unmarked_starters(source))}
    assert not unmarked, ("tests that start processes without the e2e marker (`@pytest.mark.e2e`, or "
                          f"`pytestmark = pytest.mark.e2e` for the module): {unmarked}")


@pytest.mark.parametrize("source, unmarked", [
    ("import subprocess\n\ndef test_a():\n    subprocess.run(['true'])\n\ndef test_b():\n    assert 1\n", ["test_a"]),
    ('"""No subprocess here."""\n\ndef test_a():\n    assert 1\n', []),
    ('def test_a():\n    """Runs no subprocess."""\n    assert "sys.executable"\n', []),
    ("def test_a(pytester):\n    pytester.runpytest()\n", ["test_a"]),
    ("import sys\n\ndef run():\n    return helper()\n\ndef helper():\n    return sys.executable\n\n"
     "def test_a():\n    run()\n", ["test_a"]),
    ("import pytest\n\n@pytest.fixture\ndef ran(tmp_path):\n    return Runner(options).run(items)\n\n"
     "def test_a(ran):\n    assert ran\n", ["test_a"]),
    ("class TestX:\n    def test_a(self):\n        run_case('x')\n", ["test_a"]),
    ("import pytest\npytestmark = pytest.mark.e2e\n\ndef test_a(pytester):\n    pytester.runpytest()\n", []),
    ("import pytest\npytestmark = [pytest.mark.slow, pytest.mark.e2e]\n\ndef test_a(pytester):\n    pass\n", []),
    ("import pytest\n\n@pytest.mark.e2e\n@pytest.mark.parametrize('n', [1])\ndef test_a(n):\n    run_case(n)\n", []),
    ("import pytest\n\n@pytest.mark.e2e\nclass TestX:\n    def test_a(self):\n        run_case('x')\n", []),
])
def test_the_e2e_check_fails_on_a_test_that_starts_a_process_unmarked(source: str, unmarked: list[str]) -> None:
    assert unmarked_starters(source) == unmarked


# Where the repository names its own tests' files (results/ and the CHANGELOG are history: they keep the paths
# of their day).
NAMING = ("README.md", "Makefile", "pyproject.toml", ".ci", "docs", "harness", "fixtures", "kernels", "scenarios",
          "tools", "ci", "changelog.d", "tests")
SUFFIXES = {".py", ".md", ".sh", ".toml", ".txt", ""}
MENTION = re.compile(r"\btests/[\w/.-]*?([\w-]+\.py)\b")


def stale_mentions(text: str, ours: dict[str, str]) -> list[str]:
    """The mentions of tests/.../NAME.py in `text` where NAME.py is one of the suite's files (`ours`: file name ->
    its path) and the mention is not that path: a reference the move left behind. Another suite's files (a user's
    tests/test_k.py in a doc's example) are not ours and pass."""
    stale = []
    for match in MENTION.finditer(text):
        path, name = match.group(0), match.group(1)
        if name in ours and path != ours[name]:
            stale.append(f"{path} (now {ours[name]})")
    return stale


def test_the_repository_names_its_test_files_where_they_are() -> None:
    ours = {p.name: p.relative_to(ROOT).as_posix() for p in TESTS.rglob("*.py")
            if "__pycache__" not in p.parts and "data" not in p.relative_to(TESTS).parts[:1]}
    ours = {name: path for name, path in ours.items()
            if sum(1 for p in TESTS.rglob(name) if "__pycache__" not in p.parts) == 1}
    stale = {}
    for top in NAMING:
        paths = [ROOT / top] if (ROOT / top).is_file() else sorted((ROOT / top).rglob("*"))
        for path in paths:
            if not path.is_file() or path.suffix not in SUFFIXES or "__pycache__" in path.parts \
                    or path.is_relative_to(TESTS / "data"):
                continue
            try:
                found = stale_mentions(path.read_text(encoding="utf-8"), ours)
            except (UnicodeDecodeError, FileNotFoundError):
                continue
            if found:
                stale[path.relative_to(ROOT).as_posix()] = found
    assert not stale, f"mentions of the suite's files at a path they are not at: {stale}"


def test_the_mention_check_fails_on_a_path_the_move_left_behind() -> None:
    ours = {"test_judge.py": "tests/judge/test_judge.py", "host_fake.py": "tests/helpers/host_fake.py"}
    flat = "tests/"         # written apart, so that this file does not name them at the old place itself
    text = (f"each rule has a test in {flat}test_judge.py; tests/judge/test_judge.py; a user's tests/test_k.py;"
            f" `-p host_fake` ({flat}host_fake.py)")
    assert stale_mentions(text, ours) == [f"{flat}test_judge.py (now tests/judge/test_judge.py)",
                                          f"{flat}host_fake.py (now tests/helpers/host_fake.py)"]
