"""`python -m gpu_memsafety repro --keep DIR` (issue 15): the kept files land safely, or a message says why not.

An existing directory keeps its mode (copying the run's temporary directory over it used to make it 0700);
a non-empty directory that is not an earlier --keep output is refused before anything runs; an earlier
output is replaced; a file path, or a non-ASCII path under an ASCII locale, gives a message or works, never a
traceback. The runs use the planted Triton kernel in guard mode on the CPU.
"""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_memsafety.util.paths import CHECKOUT
from gpu_memsafety.scenario import registry
from gpu_memsafety.cli.repro import KEEP_MARKER, KeepError, check_keep_dir

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

ROOT = CHECKOUT
CASE = "planted_oob[clean-triton-n4000-x1]"


def repro(*args: str, env_extra: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != registry.ENV_VAR}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "gpu_memsafety", "repro", *args], cwd=str(ROOT), env=env,
                          capture_output=True, timeout=timeout)


def test_an_existing_directory_keeps_its_mode_and_a_rerun_replaces_its_output(tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    keep.mkdir()
    keep.chmod(0o751)
    first = repro(CASE, "--mode", "guard", "--keep", str(keep))
    assert first.returncode == 0, first.stdout.decode() + first.stderr.decode()
    assert stat.S_IMODE(keep.stat().st_mode) == 0o751
    assert (keep / KEEP_MARKER).is_file() and (keep / "guard").is_dir()
    script = (keep / "rerun.sh").read_text()
    assert f"-m gpu_memsafety repro '{CASE}' --mode guard" in script and os.access(keep / "rerun.sh", os.X_OK)
    (keep / "guard" / "stale-file").write_text("from the first run")
    second = repro(CASE, "--mode", "guard", "--keep", str(keep))        # an earlier --keep output: accepted
    assert second.returncode == 0, second.stderr.decode()
    assert not (keep / "guard" / "stale-file").exists()
    assert stat.S_IMODE(keep.stat().st_mode) == 0o751


def test_a_new_directory_is_created_with_the_usual_mode(tmp_path: Path) -> None:
    keep = tmp_path / "a" / "b"
    proc = repro(CASE, "--mode", "guard", "--keep", str(keep))
    assert proc.returncode == 0, proc.stderr.decode()
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(keep.stat().st_mode) == 0o777 & ~umask     # not mkdtemp's 0700


@pytest.mark.parametrize("setup, words", [
    (lambda d: (d / "mine.txt").write_text("user data"), "is not empty and is not an earlier --keep output"),
])
def test_a_non_empty_foreign_directory_is_refused_before_running(tmp_path: Path, setup: object, words: str) -> None:
    keep = tmp_path / "busy"
    keep.mkdir()
    setup(keep)  # type: ignore[operator]
    proc = repro(CASE, "--mode", "guard", "--keep", str(keep), timeout=60)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and words in err and "Traceback" not in err
    assert b"case planted_oob" not in proc.stdout          # refused before anything ran
    assert sorted(p.name for p in keep.iterdir()) == ["mine.txt"]


def test_a_file_path_is_a_message(tmp_path: Path) -> None:
    target = tmp_path / "afile"
    target.write_text("x")
    proc = repro(CASE, "--mode", "guard", "--keep", str(target), timeout=60)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err
    assert "exists and is not a directory" in err or "is not a directory (a file is in the way)" in err
    assert target.read_text() == "x"
    below = repro(CASE, "--mode", "guard", "--keep", str(target / "sub"), timeout=60)
    assert below.returncode == 2 and b"Traceback" not in below.stderr and b"--keep" in below.stderr


def test_a_non_ascii_path_under_an_ascii_locale_works_without_a_traceback(tmp_path: Path) -> None:
    keep = tmp_path / "r\u00e9sultat"
    proc = repro(CASE, "--mode", "guard", "--keep", str(keep),
                 env_extra={"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"})
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    assert "Traceback" not in err, err
    assert proc.returncode == 0, out + err
    assert (keep / "rerun.sh").is_file() and (keep / KEEP_MARKER).is_file()
    assert "r\u00e9sultat" in os.listdir(tmp_path)            # the name's bytes kept exactly


def test_check_keep_dir_in_process(tmp_path: Path) -> None:
    check_keep_dir(tmp_path / "new")                       # fine: will be created
    (tmp_path / "empty").mkdir()
    check_keep_dir(tmp_path / "empty")
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / KEEP_MARKER).write_text("{}")
    (earlier / "rerun.sh").write_text("")
    check_keep_dir(earlier)
    with pytest.raises(KeepError, match="cannot create"):
        (tmp_path / "f").write_text("")
        check_keep_dir(tmp_path / "f" / "below")
