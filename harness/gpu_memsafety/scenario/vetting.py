"""Scenario files are untrusted code at load: each is first imported in a child process, with a deadline.

Why this exists: a scenario file can come from anywhere (a kernel team's repository, an installed entry point).
Imported straight into the process that runs pytest or `list`, a file whose import never returns hangs the run
with no output and no report; `sys.exit(0)` at import ends `list` or `repro` with status 0 and nothing done;
`os.chdir` sends a relative report directory elsewhere; a changed environment reaches every xdist worker; a
process it starts outlives the run. So before a process imports scenario files it has not seen, ONE child
(`python -m gpu_memsafety.scenario.vet_child`) imports all of them and records, file by file, what each import
did (`watch`): it raised (SystemExit included), changed the working directory or the environment, wrote to
stdout (wrote to stderr: a warning, shown), or left processes running (killed, named); a file whose import
does not finish within the deadline is named and the child's whole process group is killed. A file with a
problem is a ScenarioError that names it and every problem; files the child found clean are then imported in
this process, under the same `watch` (a file may do something else the second time).

Cost: one child per process for all its files (about 0.5 s; scenario files import no torch at top level), and
once per run: the verdicts travel to the run's own child processes (xdist workers, case workers, benchmark
children) in GPU_MEMSAFETY_VETTED, one token per vetted file (its path, size and modification time), so they
do not vet the same files again.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from gpu_memsafety.util import procs
from gpu_memsafety.util import jsonio

VETTED_ENV = "GPU_MEMSAFETY_VETTED"
TIMEOUT_ENV = "GPU_MEMSAFETY_IMPORT_TIMEOUT"
# Seconds all scenario files of one process may take to import in the child. The repository's import in
# about 0.5 s; one that imports torch and triton at top level takes a few seconds on a cold disk. A minute is
# far beyond any import that finishes, and short enough that a hung import reads as an error, not a hang.
DEFAULT_TIMEOUT_S = 60.0
# Output shown from a file that wrote at import (the start of it).
OUTPUT_SHOWN = 120


@dataclass
class Effects:
    """What one import did besides defining its module: problems make the file unusable, warnings are shown."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stray: list[procs.ProcessRecord] = field(default_factory=list)


class ScenarioImportWarning(UserWarning):
    """A scenario file did something at import that is shown, not refused (it wrote to stderr)."""


@contextlib.contextmanager
def watch(effects: Effects, *, fd_level: bool = False) -> Iterator[None]:
    """Run the body (one import) and record in `effects` what it changed; the working directory and the
    environment are put back, processes it left are killed. SystemExit becomes a problem (never an exit);
    other exceptions pass through unchanged, after the same checks."""
    cwd, environ, before = os.getcwd(), dict(os.environ), procs.snapshot()
    with _captured(fd_level) as output:
        try:
            yield
        except SystemExit as exc:
            effects.problems.append(f"called sys.exit({exc.code!r}) at import (SystemExit; caught, the process "
                                    "goes on)")
        finally:
            _check_cwd(cwd, effects)
            _check_environ(environ, effects)
            _check_children(before, effects)
    _check_output(output, effects)


def _check_cwd(cwd: str, effects: Effects) -> None:
    try:
        now = os.getcwd()
    except OSError:
        now = "(a directory that no longer exists)"
    if now != cwd:
        os.chdir(cwd)
        effects.problems.append(f"changed the working directory to {now} at import (os.chdir; put back to {cwd})")


def _check_environ(environ: Mapping[str, str], effects: Effects) -> None:
    now = dict(os.environ)
    if now == environ:
        return
    added = sorted(set(now) - set(environ))
    removed = sorted(set(environ) - set(now))
    changed = sorted(k for k in set(now) & set(environ) if now[k] != environ[k])
    os.environ.clear()
    os.environ.update(environ)
    parts = [f"{what} {', '.join(keys)}" for what, keys in (("set", added), ("removed", removed),
                                                               ("changed", changed)) if keys]
    effects.problems.append(f"changed the environment at import ({'; '.join(parts)}; put back): the run's "
                            "workers would inherit it")


def _check_children(before: procs.Snapshot, effects: Effects) -> None:
    stray = procs.stray_children(before)
    if not stray:
        return
    reaped = procs.reap(stray)
    effects.stray += reaped
    shown = ", ".join(f"pid {p['pid']} ({p['command']})" for p in reaped)
    effects.problems.append(f"started {len(reaped)} process(es) at import that were still running: {shown} "
                            "(killed)")


@dataclass
class _Output:
    stdout: str = ""
    stderr: str = ""


@contextlib.contextmanager
def _captured(fd_level: bool) -> Iterator[_Output]:
    """stdout and stderr of the body: Python's streams, and in the child also the file descriptors (output of
    C code or of a subprocess that inherited them)."""
    output = _Output()
    out, err = io.StringIO(), io.StringIO()
    files = (tempfile.TemporaryFile(), tempfile.TemporaryFile()) if fd_level else None
    saved = [os.dup(1), os.dup(2)] if files else []
    try:
        if files:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(files[0].fileno(), 1)
            os.dup2(files[1].fileno(), 2)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield output
    finally:
        if files:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
        output.stdout = out.getvalue() + (_read(files[0]) if files else "")
        output.stderr = err.getvalue() + (_read(files[1]) if files else "")
        for handle in files or ():
            handle.close()


def _read(handle: Any) -> str:
    handle.seek(0)
    return bytes(handle.read()).decode(errors="replace")


def _check_output(output: _Output, effects: Effects) -> None:
    if output.stdout:
        effects.problems.append(f"wrote to stdout at import ({_shown(output.stdout)}): stdout carries `list` "
                                "output and pytest-xdist's messages")
    if output.stderr:
        effects.warnings.append(f"wrote to stderr at import: {_shown(output.stderr)}")


def _shown(text: str) -> str:
    head = text.strip()[:OUTPUT_SHOWN]
    return repr(head + ("..." if len(text.strip()) > OUTPUT_SHOWN else ""))


# ------------------------------------------------------------------------------------- which files are vetted

def token(file: str | os.PathLike[str]) -> str:
    """Names one version of one file: its path, size and modification time."""
    try:
        info = os.stat(file)
        key = f"{os.path.abspath(file)}\0{info.st_size}\0{info.st_mtime_ns}"
    except OSError:
        key = f"{os.path.abspath(file)}\0missing"
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def vetted_tokens(environ: Mapping[str, str] | None = None) -> set[str]:
    raw = (os.environ if environ is None else environ).get(VETTED_ENV, "")
    return {t for t in raw.split(",") if t}


def _remember(files: Sequence[str]) -> None:
    tokens = vetted_tokens() | {token(f) for f in files}
    os.environ[VETTED_ENV] = ",".join(sorted(tokens))


def timeout_s(environ: Mapping[str, str] | None = None) -> float:
    raw = (os.environ if environ is None else environ).get(TIMEOUT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        value = DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


# ------------------------------------------------------------------------------------------- the parent side

@dataclass(frozen=True)
class Verdict:
    file: str
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def vet(sources: Sequence[Mapping[str, Any]], *, python: str = sys.executable,
        deadline_s: float | None = None, pythonpath: str | None = None) -> list[Verdict]:
    """Import every source (gpu_memsafety.scenario.registry.Source as JSON) not yet vetted in this run, in one
    child process; a verdict per file, in order. Files already vetted (GPU_MEMSAFETY_VETTED) are skipped."""
    known = vetted_tokens()
    todo = [dict(s) for s in sources if token(s["file"]) not in known]
    if not todo:
        return []
    verdicts = _run_child(todo, python, timeout_s() if deadline_s is None else deadline_s, pythonpath)
    _remember([v.file for v in verdicts if not v.problems])
    return verdicts


# Set in the vetting child's environment (to its temporary folder): its descendants carry it, so a process started at
# import that left the child's process group is still found and ended (util.procs.sweep).
VETTING_ENV = "GPU_MEMSAFETY_VETTING"


# The vetting child's temporary folder: tempfile's folder / PREFIX + random; OWNER in it names the process that made
# it (pid and start time), so that a later run can tell a folder whose owner was killed (SIGKILL: nothing of its own
# cleanup ran) from one in use. A folder without OWNER younger than ORPHAN_AGE_S is one being made.
PREFIX = "gpu-memsafety-vet-"
OWNER = "owner"
ORPHAN_AGE_S = 600.0


def _run_child(todo: list[dict[str, Any]], python: str, deadline_s: float, pythonpath: str | None) -> list[Verdict]:
    """The child in a session of its own, its temporary folder removed after it: on a stop signal too (every
    catchable one: util.signals), the child's whole process group is killed and collected before the folder goes,
    and what it started that left the group but carries VETTING_ENV is ended (util.child). What an uncatchable one
    (SIGKILL) leaves, the next vetting finds and removes first (`sweep_abandoned`)."""
    from gpu_memsafety.util import procs
    from gpu_memsafety.util.child import Child
    from gpu_memsafety.util.paths import inherited_pythonpath
    from gpu_memsafety.util.signals import stopping
    procs.subreaper()          # a process a scenario file starts at import and leaves (setsid, double fork) is ours
    sweep_abandoned()
    with stopping(), tempfile.TemporaryDirectory(prefix=PREFIX) as tmp:
        Path(tmp, OWNER).write_text(f"{os.getpid()} {procs.start_ticks(os.getpid())}")
        job, log, err = Path(tmp, "job.json"), Path(tmp, "verdicts.jsonl"), Path(tmp, "stderr.txt")
        job.write_text(json.dumps({"sources": todo, "log": str(log)}))
        env = dict(os.environ)
        env["PYTHONPATH"] = inherited_pythonpath(env) if pythonpath is None else pythonpath
        # VETTING_ENV: what the child and everything it starts inherit, how they are found
        with Child([python, "-m", "gpu_memsafety.scenario.vet_child", str(job)], env=env, log=err, log_stdout=False,
                   mark=(VETTING_ENV, tmp)) as child:
            if not child.wait(deadline_s):
                child.kill(timed_out=True)
        return _verdicts(todo, _log_lines(log), child.proc.returncode, child.timed_out, deadline_s, err.read_bytes())


def sweep_abandoned(folder: str | None = None) -> list[str]:
    """The vetting folders under `folder` (tempfile's) whose owner is gone (killed by SIGKILL, or by a power cut):
    every process that still carries one in its environment (the vetting child and what it started, in its group or
    not) is killed, then the folder is removed. Only this user's folders; the ones removed."""
    from gpu_memsafety.util import procs
    removed = []
    for path in sorted(Path(folder or tempfile.gettempdir()).glob(f"{PREFIX}*")):
        try:
            info = path.lstat()
        except OSError:
            continue
        if not path.is_dir() or path.is_symlink() or info.st_uid != os.getuid() or _owned(path, info.st_mtime):
            continue
        procs.reap([pid for pid in procs.running() if procs.carries(pid, VETTING_ENV, str(path))])
        shutil.rmtree(path, ignore_errors=True)
        removed.append(str(path))
    return removed


def _owned(path: Path, mtime: float) -> bool:
    """Its owner still runs (the same process: pid and start time), or it is too young to have an owner yet."""
    from gpu_memsafety.util import procs
    try:
        pid, ticks = Path(path, OWNER).read_text().split()
    except (OSError, ValueError):
        return time.time() - mtime < ORPHAN_AGE_S
    return pid.isdigit() and str(procs.start_ticks(int(pid))) == ticks


def _log_lines(log: Path) -> list[dict[str, Any]]:
    lines = []
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        try:
            entry = jsonio.loads(line)
        except ValueError:
            continue        # a line cut by the kill
        if isinstance(entry, dict) and isinstance(entry.get("file"), str):
            lines.append(entry)
    return lines


def _verdicts(todo: list[dict[str, Any]], log: list[dict[str, Any]], code: int | None, timed_out: bool,
              deadline_s: float, stderr: bytes) -> list[Verdict]:
    done = {e["file"]: e for e in log if "problems" in e}
    started = [e["file"] for e in log if e.get("started")]
    verdicts = []
    for source in todo:
        file = source["file"]
        if file in done:
            entry = done[file]
            verdicts.append(Verdict(file, tuple(map(str, entry["problems"])), tuple(map(str, entry["warnings"]))))
        elif started and started[-1] == file:
            verdicts.append(Verdict(file, (f"importing {file}: {_unfinished(code, timed_out, deadline_s, stderr)}",)))
        else:
            why = "an earlier file's import did not finish" if started else _unfinished(code, timed_out, deadline_s, stderr)
            verdicts.append(Verdict(file, (f"{file} not checked: {why}",)))
    return verdicts


def _unfinished(code: int | None, timed_out: bool, deadline_s: float, stderr: bytes) -> str:
    if timed_out:
        return (f"its import did not finish within {deadline_s:g} s (a loop or a wait at import?); the import was "
                f"killed ({TIMEOUT_ENV} sets the deadline)")
    tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
    said = f": {' / '.join(tail)}" if tail else ""
    return f"the process importing it ended with exit code {code} before the import finished (os._exit or a " \
           f"signal at import?){said}"


def problem_text(verdicts: Sequence[Verdict]) -> str:
    """Every file with a problem, each problem on a line of its own."""
    lines = []
    for verdict in verdicts:
        if verdict.problems:
            lines.append(f"{verdict.file}:")
            lines += [f"  - {p}" for p in verdict.problems]
    return "\n".join(lines)
