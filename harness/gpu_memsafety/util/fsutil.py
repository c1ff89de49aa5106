"""Atomic file writes: a run killed at any moment leaves either the old file or the complete new one.

`atomic_write_set` does the same for a set of files read together (report.json, junit.xml, summary.md):
every file is written in full beside its target first, then all are renamed into place; a failure at any
point leaves the previous complete set (or, where the previous one cannot be restored, none), never a mix
of two runs. Files get the usual mode (0666 less the umask, 0644 by default), not mkstemp's 0600.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping


def current_umask() -> int:
    """The process umask (read from /proc where there is one: setting it, even back, is not thread-safe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_temp(target: Path, text: str) -> Path:
    """`text` in a complete, flushed temporary file beside `target`, with the mode a new file would get."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        _unlink(Path(tmp))
        raise
    return Path(tmp)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temp(target, text)
    try:
        os.replace(tmp, target)
    except BaseException:
        _unlink(tmp)
        raise
    return target


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def atomic_write_set(directory: str | os.PathLike[str], texts: Mapping[str, str]) -> dict[str, Path]:
    """Write files `name -> text` into `directory` as one set: the previous complete set or the new one.

    Stage every file in full (a full disk fails here, before any target changes), keep a hard link to each
    previous file, rename the new ones into place, and on any failure put the previous ones back; where a
    previous file could not be kept (no hard links on this filesystem), a failure removes the whole set, so
    the result is then no set rather than a mix.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    staged: dict[str, Path] = {}
    backups: dict[str, Path | None] = {}
    try:
        for name, text in texts.items():
            staged[name] = _write_temp(folder / name, text)
        existed = {name for name in texts if (folder / name).exists()}
        for name in existed:
            backups[name] = _backup(folder / name)
        _commit(folder, staged, existed, backups)
    finally:
        for path in [*staged.values(), *(b for b in backups.values() if b is not None)]:
            _unlink(path)
    _fsync_dir(folder)
    return {name: folder / name for name in texts}


def _backup(target: Path) -> Path | None:
    """A hard link to the current `target`, or None where links are not supported."""
    backup = target.with_name(f".{target.name}.{os.getpid()}.previous")
    try:
        _unlink(backup)
        os.link(target, backup)
    except OSError:
        return None
    return backup


def _commit(folder: Path, staged: Mapping[str, Path], existed: set[str],
            backups: Mapping[str, Path | None]) -> None:
    done: list[str] = []
    try:
        for name, tmp in staged.items():
            os.replace(tmp, folder / name)
            done.append(name)
    except BaseException:
        if all(backups.get(name) is not None for name in done if name in existed):
            for name in done:  # put the previous set back
                backup = backups.get(name)
                if backup is not None:
                    os.replace(backup, folder / name)
                else:
                    _unlink(folder / name)
        else:
            for name in staged:  # the previous set cannot be restored whole: leave none rather than a mix
                _unlink(folder / name)
        raise


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
