"""tools/changelog.py folds changelog.d/ fragments into CHANGELOG.md's Unreleased section (issue 43), and the
repository's own CHANGELOG and fragments are well formed."""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from gpu_memsafety.util.paths import CHECKOUT as ROOT

spec = importlib.util.spec_from_file_location("changelog_tool", ROOT / "tools" / "changelog.py")
changelog = importlib.util.module_from_spec(spec)
sys.modules["changelog_tool"] = changelog          # dataclasses look their module up while the class is made
assert spec.loader is not None
spec.loader.exec_module(changelog)

BEFORE = """# Changelog

Intro.

## [Unreleased]

### Fixed

- An old fix (#3)

## Wave 1 - 2026-11-29

### Added

- The harness.
"""


def checkout(tmp_path: Path, fragments: dict[str, str]) -> Path:
    (tmp_path / "changelog.d").mkdir()
    (tmp_path / "changelog.d" / "README.md").write_text("not a fragment\n")
    (tmp_path / "CHANGELOG.md").write_text(BEFORE)
    for name, text in fragments.items():
        (tmp_path / "changelog.d" / name).write_text(text)
    return tmp_path


def test_fragments_fold_into_unreleased_by_kind_in_issue_order_and_go(tmp_path: Path) -> None:
    root = checkout(tmp_path, {
        "43.layers.md": "Changed: packages in layers,\n  enforced by a test.\nFixed: a doc said both.\n",
        "7.trace.md": "Added: the trace.\n",
    })
    assert changelog.main(["--root", str(root)]) == 0
    assert (root / "CHANGELOG.md").read_text() == """# Changelog

Intro.

## [Unreleased]

### Added

- the trace. (#7)

### Changed

- packages in layers, enforced by a test. (#43)

### Fixed

- An old fix (#3)
- a doc said both. (#43)

## Wave 1 - 2026-11-29

### Added

- The harness.
"""
    assert [p.name for p in (root / "changelog.d").iterdir()] == ["README.md"]


def test_keep_leaves_the_fragments_and_check_writes_nothing(tmp_path: Path) -> None:
    root = checkout(tmp_path, {"1.a.md": "Removed: x.\n"})
    assert changelog.main(["--root", str(root), "--check"]) == 0
    assert (root / "CHANGELOG.md").read_text() == BEFORE
    assert changelog.main(["--root", str(root), "--keep"]) == 0
    assert "- x. (#1)" in (root / "CHANGELOG.md").read_text() and (root / "changelog.d" / "1.a.md").exists()


@pytest.mark.parametrize(("name", "text", "says"), [
    ("43.x.md", "Improved: things\n", "must start with one of Added:"),
    ("43.x.md", "\n", "empty"),
    ("x.md", "Added: y\n", "named <issue>.<slug>.md"),
    ("43.x.md", "Fixed:   \n", "entry says nothing"),
])
def test_a_bad_fragment_is_named_and_nothing_is_folded(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      name: str, text: str, says: str) -> None:
    root = checkout(tmp_path, {name: text, "1.good.md": "Added: fine\n"})
    assert changelog.main(["--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert says in err and name in err
    assert (root / "CHANGELOG.md").read_text() == BEFORE and (root / "changelog.d" / "1.good.md").exists()


def test_a_changelog_without_unreleased_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = checkout(tmp_path, {"1.a.md": "Added: a\n"})
    (root / "CHANGELOG.md").write_text("# Changelog\n")
    assert changelog.main(["--root", str(root)]) == 1
    assert "no '## [Unreleased]' heading" in capsys.readouterr().err


def test_the_repositorys_changelog_and_fragments_fold(tmp_path: Path) -> None:
    shutil.copy(ROOT / "CHANGELOG.md", tmp_path / "CHANGELOG.md")
    shutil.copytree(ROOT / "changelog.d", tmp_path / "changelog.d")
    assert changelog.main(["--root", str(tmp_path)]) == 0
    text = (tmp_path / "CHANGELOG.md").read_text()
    assert text.index("## [Unreleased]") < text.index("## Wave 1")


@pytest.mark.parametrize(("unreleased", "says"), [
    ("### Fixed\n\nHand-written text, not a bullet.\n", "is not a bullet"),
    ("### Fixed\n\n- An old fix (#3)\n\nA paragraph after the bullets.\n", "is not a bullet"),
    ("### Notes\n\n- a note the tool has no section for\n", "is a heading this tool cannot keep"),
    ("### Fixed\n\n- An old fix (#3)\n\n### Notes\n\n- misfiled under Fixed before\n", "'### Notes'"),
    ("#### Detail\n\ntext\n", "is a heading this tool cannot keep"),
])
def test_an_unreleased_section_it_cannot_keep_is_refused_and_nothing_is_deleted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], unreleased: str, says: str) -> None:
    """Issue 53: hand-written Unreleased text was dropped and a '### Notes' subsection misfiled under Fixed, then the
    fragments were deleted (exit 0)."""
    root = checkout(tmp_path, {"1.a.md": "Added: a\n"})
    before = BEFORE.replace("### Fixed\n\n- An old fix (#3)\n", unreleased)
    assert before != BEFORE
    (root / "CHANGELOG.md").write_text(before)
    assert changelog.main(["--root", str(root)]) == 1
    assert says in capsys.readouterr().err
    assert (root / "CHANGELOG.md").read_text() == before and (root / "changelog.d" / "1.a.md").exists()


def test_a_fragment_that_is_not_utf8_is_named_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = checkout(tmp_path, {"1.a.md": "Added: a\n"})
    (root / "changelog.d" / "2.latin1.md").write_bytes("Fixed: caf\u00e9\n".encode("latin-1"))
    for args in ([], ["--check"]):
        assert changelog.main(["--root", str(root), *args]) == 1
        err = capsys.readouterr().err
        assert "2.latin1.md: not UTF-8" in err and "Traceback" not in err
    assert (root / "CHANGELOG.md").read_text() == BEFORE and len(list((root / "changelog.d").iterdir())) == 3
