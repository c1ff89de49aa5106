"""Child processes of a host-suite run: what a parent asks a child to run, and what the child leaves behind.

memcheck and pages modes run the suite's tests in batches in child pytest processes (under compute-sanitizer, or
with guard pages); a test that a break made fail in markers mode runs again alone in one without the guard
allocator. One folder per child: the parent writes `plan.json`; the child appends `marks.jsonl` (a line when a test
starts and when it ends, the end carrying what the allocator saw) and `reports.jsonl` (pytest's reports of each test,
serialized as xdist does), each line flushed as it happens, so a child that dies leaves everything up to the test it
died in. The sanitizer's XML and the child's log sit beside them.

The child is the same pytest command as the parent (same arguments, same rootdir and conftest.py files), without
this harness's own options, xdist, report files and first-failure stops, plus `--gpu-memsafety-child DIR`; it
collects as the parent did and keeps only the plan's tests, in the plan's order. Pure file and argument handling
here; running it is plugin/suite/batches.py's job. The child loads this plugin the way the parent did (the same
arguments, ini file and environment: an entry point, or `-p`), never a second way.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence
from gpu_memsafety.util import jsonio

PLAN, MARKS, REPORTS, LOG, XML = "plan.json", "marks.jsonl", "reports.jsonl", "child.log", "sanitizer.xml"
START, END, MISSING, READY = "start", "end", "missing", "ready"
UNGUARDED = "unguarded"

# Options the child must not inherit: the harness's own (the child gets --gpu-memsafety-child instead), xdist's
# (a child runs its tests in itself), report files (the parent writes them), stops after a first failure (the parent
# stops; a child that stops early is started again for the rest), and the debugger (nobody is at the child's terminal).
# name -> takes a value.
STRIPPED = {"--gpu-memsafety": None, "--gpu-memsafety-baseline": True, "--gpu-memsafety-report-dir": True,
            "--gpu-memsafety-batch": True, "--gpu-memsafety-batch-size": True, "--gpu-memsafety-timeout": True, "--gpu-memsafety-child": True,
            "-n": True, "--numprocesses": True, "--maxprocesses": True, "--dist": True, "--tx": True,
            "--junitxml": True, "--junit-xml": True, "--junit-prefix": True, "--report-log": True,
            "--basetemp": True, "--maxfail": True, "-x": False, "--exitfirst": False, "--pdb": False,
            "--trace": False, "--sw": False, "--stepwise": False, "--lf": False, "--last-failed": False,
            "--ff": False, "--failed-first": False, "--rootdir": True}
# Environment a child must not inherit: it is not an xdist worker.
STRIPPED_ENV = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST")


@dataclass(frozen=True)
class Plan:
    mode: str                             # memcheck, pages, or unguarded
    tests: tuple[str, ...]
    placement: str = ""                   # the allocator to install ("" none: PYTORCH_NO_CUDA_MEMORY_CACHING decides)
    page_window: tuple[int, int] | None = None
    fence: bool = False                   # mark each test's end in the sanitizer's output (memcheck)

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "tests": list(self.tests), "placement": self.placement,
                "page_window": list(self.page_window) if self.page_window else None, "fence": self.fence}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Plan":
        window = data.get("page_window")
        return cls(str(data["mode"]), tuple(str(t) for t in data["tests"]), str(data.get("placement", "")),
                   (int(window[0]), int(window[1])) if window else None, bool(data.get("fence", False)))


def write_plan(directory: Path, plan: Plan) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in (MARKS, REPORTS, LOG, XML):
        (directory / name).unlink(missing_ok=True)
    path = directory / PLAN
    path.write_text(json.dumps(plan.to_json(), indent=1), encoding="utf-8")
    return path


def read_plan(directory: Path) -> Plan:
    return Plan.from_json(jsonio.loads((directory / PLAN).read_text(encoding="utf-8")))


def append_line(path: Path, data: Mapping[str, Any]) -> None:
    """One JSON line, flushed to the disk before returning: what a child that dies next has said stays said."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(data) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a file (a line cut short by a dying child is dropped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            value = jsonio.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


@dataclass
class Output:
    """What one child left: which tests started and ended, their reports, and how the process ended."""

    started: list[str] = field(default_factory=list)
    ended: dict[str, dict[str, Any]] = field(default_factory=dict)
    reports: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)     # planned but not collected by the child
    ready: bool = False                                  # it got as far as its first test
    returncode: int | None = None
    timed_out: bool = False
    wall_s: float = 0.0
    log: str = ""
    xml: bytes | None = None

    @property
    def running(self) -> str:
        """The test that started and never ended (the child died or was killed in it); "" when none."""
        open_ = [t for t in self.started if t not in self.ended]
        return open_[-1] if open_ else ""

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.splitlines()[-lines:])


def read_output(directory: Path) -> Output:
    out = Output()
    for mark in read_lines(directory / MARKS):
        event, test = mark.get("event"), str(mark.get("test", ""))
        if event == START:
            out.started.append(test)
        elif event == END:
            out.ended[test] = mark
        elif event == MISSING:
            out.missing.append(test)
        elif event == READY:
            out.ready = True
    for rep in read_lines(directory / REPORTS):
        out.reports.setdefault(str(rep.get("nodeid", "")), []).append(rep)
    log = directory / LOG
    out.log = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    xml = directory / XML
    out.xml = xml.read_bytes() if xml.exists() else None
    return out


# -------------------------------------------------------------------------------------------- command

def strip_args(args: Sequence[str]) -> list[str]:
    """The parent's arguments without the options a child must not inherit (STRIPPED), in any of their spellings:
    '--opt value', '--opt=value', and for short options '-n4' and '-n 4'."""
    from gpu_memsafety.detectors.suite_modes import MODES
    out: list[str] = []
    skip_value = False
    for i, arg in enumerate(args):
        if skip_value:
            skip_value = False
            continue
        name, eq, _ = arg.partition("=")
        if name in STRIPPED:
            takes = STRIPPED[name]
            if takes is None:        # --gpu-memsafety[=MODE]: a separate mode word goes with it
                skip_value = not eq and i + 1 < len(args) and args[i + 1] in MODES
            else:
                skip_value = bool(takes) and not eq
            continue
        short = next((s for s in STRIPPED if len(s) == 2 and STRIPPED[s] and arg.startswith(s) and len(arg) > 2
                      and not arg.startswith("--")), None)
        if short:
            continue                 # '-n4', '-nauto'
        out.append(arg)
    return out


def launcher(path0: str | None) -> list[str]:
    """The interpreter command that starts pytest in a child with `path0` first on sys.path where the parent had
    it (None: nothing in that place, as under -P). `python -m pytest` would put the working directory there: from
    a repository whose package folder sits at its root (FlashInfer, DeepGEMM) a child would import that source
    folder where the parent, run as the `pytest` console script, imported the installed package. The parent's
    interpreter options go with it: a suite run as `python -W error -m pytest` fails on a warning in a child too."""
    first = [] if path0 is None else [path0]
    flags = getattr(subprocess, "_args_from_interpreter_flags", lambda: [])()     # as multiprocessing passes them
    code = ("import sys\n"
            "if not getattr(sys.flags, 'safe_path', False) and sys.path and sys.path[0] == '':\n"
            "    del sys.path[0]\n"                                  # -c's working directory
            f"sys.path[0:0] = {first!r}\n"
            "import pytest\n"
            "raise SystemExit(pytest.console_main())")
    return [sys.executable, *flags, "-c", code]


def child_argv(args: Sequence[str], directory: Path, *, xdist: bool, rootdir: Path,
               path0: str | None) -> list[str]:
    """The parent's pytest command for a child: what it must not inherit stripped, its own directory, and the
    parent's rootdir given outright. The plan names tests by the parent's node ids, which are relative to the
    rootdir, and pytest picks the rootdir from the command line's paths before any plugin's options are known: the
    value of `--gpu-memsafety-report-dir DIR` (stripped here) counts as such a path when DIR exists, so without it
    the child could settle on another rootdir and collect none of the planned tests (H200, a second run into the
    same report folder). `path0`: the parent's first sys.path entry (see `launcher`)."""
    argv = [*launcher(path0), *strip_args(args), f"--rootdir={rootdir}", f"--gpu-memsafety-child={directory}",
            "-o", f"cache_dir={directory / 'cache'}", f"--basetemp={directory / 'tmp'}"]
    if xdist:
        argv += ["-n", "0"]
    return argv


def child_env(base: Mapping[str, str], *, gpu: str, mode: str) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in STRIPPED_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    if gpu:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    from gpu_memsafety.detectors.suite_modes import SANITIZED
    if mode in SANITIZED:
        # Whatever escapes the guard allocator still gets exact allocations, seen by memcheck at both ends.
        env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    env.update(reuse_caches(base))
    return env


# Triton's own switch for keeping an autotuner's choice on disk beside its compiled kernels (triton >= 3.4,
# knobs.autotuning.cache): a config chosen once, in a plain run or in an earlier child, is reused by every later
# process instead of benchmarking every config again (under the sanitizer each benchmark run is many times slower).
AUTOTUNE_CACHE = "TRITON_CACHE_AUTOTUNING"


def reuse_caches(base: Mapping[str, str]) -> dict[str, str]:
    """What a process of a host-suite run sets so that it compiles and autotunes each kernel once: Triton's kernel
    cache and torch's extension cache are the parent's (inherited, never redirected), and the autotuner's choices go
    to Triton's cache too, unless the user set AUTOTUNE_CACHE (to 0, say: then it is left as set)."""
    return {} if AUTOTUNE_CACHE in base else {AUTOTUNE_CACHE: "1"}
