"""`python -m gpu_memsafety repro`: one case, deterministically, with a short answer a developer can act on.

    python -m gpu_memsafety repro last_expert_oob_read --variant unpadded --set K=2880 --mode all --keep /tmp/r

Picks the case (variant, --set NAME=VALUE pins parameters; values not in the grid make a new case, checked
against the scenario's parameter ranges), runs it in each requested mode, and prints the kernel, buffer,
bytes past the end, logical place, first thread and block and source line. `--keep` leaves the worker logs,
the sanitizer XML, the job files and `rerun.sh`, which reruns exactly that case.

Exit status: 0 checked in every mode asked, no failure; 1 a failure; 2 a usage error; 3 no failure, but the case
was not checked in some mode (it could not run here: no GPU, not applicable), as the last line says.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gpu_memsafety.util.pathargs import arg_type, input_file, input_path, output_dir, output_file, text_arg_type
from gpu_memsafety.util import bounds
from gpu_memsafety.model import CaseResult, Outcome
from gpu_memsafety.report.document import outcome_ran
from gpu_memsafety.cover import COVER_OPTIONS, COVER_SCENARIO
from gpu_memsafety.detectors.modes import DEFAULT_MODE
from gpu_memsafety.scenario import registry
from gpu_memsafety.scenario.definition import Case, Scenario, ScenarioError
from gpu_memsafety.util import jsonio

# Exit status of a repro whose case was not checked in some mode (it could not run here), without a failure.
NOT_CHECKED = 3

ALL_MODES = ("complete", "guard_page", "poison", "stress")


def parse_set(values: list[str], scenario: Scenario) -> dict[str, Any]:
    kinds = {p.name: p for p in scenario.params}
    out: dict[str, Any] = {}
    for item in values:
        if "=" not in item:
            raise ScenarioError(scenario.name, "--set", f"{item!r} is not NAME=VALUE")
        name, raw = item.split("=", 1)
        if name not in kinds:
            raise ScenarioError(scenario.name, name, f"unknown parameter; known: {', '.join(kinds)}")
        try:
            value: Any = kinds[name].kind(raw)
        except ValueError:
            raise ScenarioError(scenario.name, name, f"{raw!r} is not a {kinds[name].kind.__name__}") from None
        kinds[name].check(scenario.name, value)
        out[name] = value
    return out


def pick(scenario: Scenario, variant: str | None, pins: dict[str, Any]) -> Case:
    if variant is not None and variant not in scenario.variants:
        raise ScenarioError(scenario.name, "--variant", f"{variant!r} is not one of {scenario.variants}")
    cases = [c for c in scenario.build() if variant in (None, c.variant)]
    exact = [c for c in cases if all(c.params.get(k) == v for k, v in pins.items())]
    if exact:
        return exact[0]
    base = cases[0]
    params = {**base.params, **pins}
    label = "-".join(f"{k}{v}" for k, v in pins.items()) + "-custom"
    return Case(scenario.name, base.variant, params, label.replace("_", ""), ("custom",))


def answer(result: CaseResult, seconds: float) -> str:
    """The outcome, each finding in words and, where it has a buffer, the picture of that buffer as a text strip
    (front guard, rows, padding, unused rows, back guard; the touched bytes marked and named)."""
    from gpu_memsafety.report import describe_finding, visible
    from gpu_memsafety.report.picture import BUFFERS, drawable, picture, strip
    records = result.details.get(BUFFERS) or {}
    lines = [f"[{result.mode}] {result.case_id}: {result.outcome.label} in {seconds:.1f} s",
             f"  expected: {result.expected}", f"  verdict: {result.message.splitlines()[0] if result.message else ''}"]
    for f in result.findings:
        lines.append(f"  - {describe_finding(f)}")
        if drawable(f):
            lines += ["      " + line for line in strip(picture(f, records.get(f.buffer))).splitlines()]
    for d in result.detectors:
        if not d.ran:
            lines.append(f"  ({d.detector} did not run: {d.detail})")
    return visible("\n".join(lines))  # kernel and tool text: control characters shown as escapes


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="gpu-memsafety repro", description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", help="a case id, e.g. 'planted_oob[overwrite-triton-n4000-x1]' (as `python -m gpu_memsafety "
                    "list` prints it and pytest names it), or a scenario name with --variant/--set")
    ap.add_argument("--variant")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--mode", default=DEFAULT_MODE, help=f"a mode, a comma list, or 'all' ({', '.join(ALL_MODES)})")
    ap.add_argument("--loop", type=bounds.arg_type("--loop"), default=20, help="stress mode: iterations")
    ap.add_argument("--cover", default=COVER_SCENARIO, choices=COVER_OPTIONS,
                    help="which buffers memcheck and guard-page modes place so that they see past their end: "
                         "scenario (its own `cover`; every buffer unless it narrows), all, or watched (watch=True only)")
    ap.add_argument("--keep", type=arg_type(output_dir, "--keep"), help="keep logs, XML and rerun.sh here (a new or "
                    "empty directory, or an earlier --keep output)")
    ap.add_argument("--json", type=arg_type(output_file, "--json"), help="write the results here")
    ap.add_argument("--scenario-path", action="append", default=[], metavar="DIR",
                    type=text_arg_type(input_path, "--scenario-path"), help="also load the scenarios in DIR (repeatable)")
    ap.add_argument("--config", metavar="FILE", type=text_arg_type(input_file, "--config"),
                    help="pytest configuration file whose gpu_memsafety_scenario_paths to use (default: the one pytest would use here)")
    args = ap.parse_args(argv)
    from gpu_memsafety.sanitizer import tool as sanitizer
    from gpu_memsafety.util.gpus import discover, visible_gpus
    from gpu_memsafety.engine.runner import MODES, RunOptions, Runner
    try:
        if args.keep is not None:
            check_keep_dir(args.keep)
        registry.configure_from_command_line(args.scenario_path, args.config)
        scenario, case = resolve(args.scenario, args.variant, args.set)
    except (ScenarioError, KeepError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    modes = list(ALL_MODES) if args.mode == "all" else args.mode.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        print(f"error: --mode {','.join(unknown)} unknown (known: {', '.join(MODES)}, all)", file=sys.stderr)
        return 2
    disc = discover()
    devices, no_gpu = visible_gpus(disc)
    lookup = sanitizer.locate()
    workdir = Path(tempfile.mkdtemp(prefix="repro-"))
    try:
        print(f"case {case.id}\n  params: {json.dumps(dict(case.params))}\n  GPUs: {disc.summary}"
              + (f" (none usable here: {no_gpu})" if disc.gpus and not devices else ""))
        results, failed, unchecked = [], False, []
        for mode in modes:
            options = RunOptions(mode=MODES[mode], workdir=workdir / mode, gpu_available=bool(devices),
                                 gpu_missing_reason=no_gpu,
                                 sanitizer=lookup, iterations=args.loop, cover=args.cover)
            t0 = time.perf_counter()
            if mode == "stress":
                stats = stress(options, scenario, case, args.loop)
                seconds = time.perf_counter() - t0
                results.append({"mode": "stress", **stats, "wall_s": round(seconds, 3)})
                print(stress_answer(case.id, stats, seconds))
                failed |= stats["runs"] == 0 and Outcome.from_label(stats["outcome"]).is_failure
                if stats["runs"] == 0:
                    unchecked.append(f"{mode}: {stats['outcome']}")
                continue
            (result,) = Runner(options).run([(scenario, case)])
            seconds = time.perf_counter() - t0
            results.append({**result.to_json(), "wall_s": round(seconds, 3)})
            failed |= result.failed
            if not outcome_ran(result.outcome):
                unchecked.append(f"{mode}: {result.outcome.label}")
            print(answer(result, seconds))
        if args.json:
            from gpu_memsafety.util.fsutil import atomic_write_json
            atomic_write_json(args.json, {"case": case.to_json(), "results": results})
        code = 1 if failed else 0
        if not failed and unchecked:
            # Nothing was checked in these modes (no GPU, not applicable here): never a success, as pytest's
            # "no tests ran" is not (exit 5); a failure stays exit 1.
            print(f"the case did not run here ({'; '.join(unchecked)}): nothing was checked; its reason is above. "
                  f"Run it where it can run (`python -m gpu_memsafety env` shows what this machine has), or choose "
                  f"another --mode", file=sys.stderr)
            code = NOT_CHECKED
        if args.keep:
            try:
                keep(args.keep, workdir, rerun_argv(scenario, case, args.mode, loop=args.loop, cover=args.cover))
            except KeepError as exc:
                print(f"error: {exc}", file=sys.stderr)
                code = 2
    finally:            # Ctrl-C, SIGTERM, SIGHUP (util.signals) too: no run folder left in /tmp
        shutil.rmtree(workdir, ignore_errors=True)
    return code


def resolve(what: str, variant: str | None, pins: list[str]) -> tuple[Scenario, Case]:
    """A case id (`name[variant-label]`, or a pytest node id ending in one), or a scenario name with
    --variant and --set NAME=VALUE pins."""
    name, inner = registry.split_case_id(what)
    if inner is not None:
        if variant is not None or pins:
            raise ScenarioError(name, "--variant/--set", f"{what!r} is a case id already; give a scenario name "
                                "with --variant/--set, or the case id alone")
        return registry.find_case(what)
    scenario = registry.get(name)
    return scenario, pick(scenario, variant, parse_set(pins, scenario))


def rerun_argv(scenario: Scenario, case: Case, mode: str, *, loop: int | None = None,
               cover: str = COVER_SCENARIO) -> list[str]:
    """`repro`'s arguments that rerun exactly this case in this mode, from anywhere (paths absolute)."""
    argv: list[str]
    if any(c.id == case.id for c in scenario.build()):
        argv = [case.id]
    else:   # a custom case (--set values off the grid): its scenario, variant and every parameter
        argv = [scenario.name, "--variant", case.variant, *sum((["--set", f"{k}={v}"] for k, v in case.params.items()), [])]
    argv += ["--mode", mode]
    if loop is not None and loop != 20:
        argv += ["--loop", str(loop)]
    if cover != COVER_SCENARIO:
        argv += ["--cover", cover]
    source = scenario.source
    if source is not None and source.module is None:           # found through a scenario path, not by import
        argv += ["--scenario-path", str(Path(source.file).parent)]
    return argv


def rerun_command(scenario: Scenario, case: Case, mode: str, cover: str = COVER_SCENARIO) -> str:
    """The shell command that reruns one case: `cd DIR && PYTHON -m gpu_memsafety repro 'ID' --mode MODE ...`, DIR
    being where this run started (a host repository's imports resolve from there, as they did for the run)."""
    here = Path.cwd()
    python = Path(sys.executable)
    shown = str(python.relative_to(here)) if python.is_relative_to(here) else str(python)
    args = " ".join(shlex.quote(a) for a in rerun_argv(scenario, case, mode, cover=cover))
    return f"cd {shlex.quote(str(here))} && {shlex.quote(shown)} -m gpu_memsafety repro {args}"


# -------------------------------------------------------------------------------------------------- --keep

KEEP_MARKER = ".harness-repro-keep"


class KeepError(Exception):
    """--keep DIR cannot be used; the message says why and what to do."""


def _encodable(path: Path) -> None:
    try:
        os.fsencode(str(path))
        str(path).encode(sys.getfilesystemencoding(), "surrogateescape")
    except UnicodeEncodeError:
        raise KeepError(f"--keep: the path {ascii(str(path))} cannot be written in this locale's file-name encoding "
                        f"({sys.getfilesystemencoding()}); use an ASCII path or a UTF-8 locale (e.g. LANG=C.UTF-8)") from None


def check_keep_dir(dest: Path) -> None:
    """Before anything runs: DIR must be new, empty, or an earlier --keep output, and writable."""
    _encodable(dest)
    shown = ascii(str(dest))[1:-1]
    if dest.exists() and not dest.is_dir():
        raise KeepError(f"--keep: {shown} exists and is not a directory; give a directory")
    if dest.is_dir():
        entries = list(dest.iterdir())
        if entries and not (dest / KEEP_MARKER).is_file():
            raise KeepError(f"--keep: {shown} is not empty and is not an earlier --keep output (it has no {KEEP_MARKER}); "
                            "give a new or empty directory")
        if not os.access(dest, os.W_OK | os.X_OK):
            raise KeepError(f"--keep: {shown} is not writable")
    else:
        parent = next((p for p in dest.absolute().parents if p.exists()), None)
        if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise KeepError(f"--keep: cannot create {shown} (no writable directory above it)")


def keep(dest: Path, workdir: Path, rerun: list[str]) -> None:
    """Copy the run's files into `dest` and write rerun.sh. An existing `dest` keeps its mode and owner: only
    its entries are written (an earlier --keep output's entries are replaced)."""
    import json as _json
    check_keep_dir(dest)
    shown = ascii(str(dest))[1:-1]
    try:
        dest.mkdir(parents=True, exist_ok=True)
        marker = dest / KEEP_MARKER
        if marker.is_file():
            for name in jsonio.loads(marker.read_text() or "{}").get("entries", []):
                old = dest / name
                if old.is_dir() and not old.is_symlink():
                    shutil.rmtree(old)
                elif old.exists() or old.is_symlink():
                    old.unlink()
        entries = []
        for entry in sorted(workdir.iterdir()):
            target = dest / entry.name
            if entry.is_dir():
                shutil.copytree(entry, target)
            else:
                shutil.copy2(entry, target)
            entries.append(entry.name)
        command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "gpu_memsafety", "repro", *rerun])
        script = dest / "rerun.sh"
        script.write_bytes(b"#!/usr/bin/env bash\n# Reruns exactly this case.\ncd " + os.fsencode(shlex.quote(str(Path.cwd())))
                           + b"\nexec " + os.fsencode(command) + b"\n")
        script.chmod(0o755)
        marker.write_text(_json.dumps({"entries": [*entries, "rerun.sh"], "case": rerun[0]}, ensure_ascii=True))
    except UnicodeEncodeError as exc:
        raise KeepError(f"--keep: cannot write rerun.sh in this locale's encoding ({exc.reason}); use a UTF-8 locale") from None
    except OSError as exc:
        raise KeepError(f"--keep: could not write into {shown}: {exc.strerror or exc}") from None
    print(f"kept logs, sanitizer XML and rerun.sh in {shown}")


def stress_answer(case_id: str, stats: dict[str, Any], seconds: float) -> str:
    if stats["runs"] == 0:
        # It never ran (unsupported, not applicable, could not run): say so, never "crashed in 0 of 20 runs".
        return f"[stress] {case_id}: {stats['outcome']}: {stats['errors'][0] if stats['errors'] else ''}"
    return (f"[stress] {case_id}: crashed in {stats['crashes']} of {stats['runs']} runs under production "
            f"conditions (caching allocator on, no guards) in {seconds:.1f} s")


def stress(options: Any, scenario: Scenario, case: Case, runs: int) -> dict[str, Any]:
    """Run the case `runs` times as production runs it; a crash costs the process, so restart and go on.
    `outcome` is the label of the last attempt's outcome; a case that never ran has runs == 0 and says why."""
    from dataclasses import replace

    from gpu_memsafety.engine.runner import Runner
    from gpu_memsafety.util.progress import watch
    done = crashes = 0
    messages: list[str] = []
    attempt = 0
    current: list[Path] = []          # the running attempt's workdir, where the worker counts its iterations
    outcome = Outcome.NOT_APPLICABLE

    def counted() -> int:
        files = sorted(current[0].glob("batch-*/stress.progress")) if current else []
        return done + (int(files[-1].read_text()) if files else 0)

    with watch(f"stress {case.id}", runs, counted, unit="runs") as bar:
        while done < runs:
            attempt += 1
            runner = Runner(replace(options, iterations=runs - done, workdir=options.workdir / f"try-{attempt}"))
            current[:] = [runner.o.workdir]
            (result,) = runner.run([(scenario, case)])
            current.clear()
            outcome = result.outcome
            if result.details.get("stress_iterations") is None and (outcome.skipped or outcome is Outcome.COULD_NOT_RUN):
                # It never ran here: say why, never "crashed in 0 of N runs".
                return {"runs": done, "crashes": crashes, "crash_rate": crashes / done if done else 0.0,
                        "errors": [result.message, *messages][:5], "outcome": outcome.label}
            if result.outcome in (Outcome.CRASHED, Outcome.UNRESOLVED, Outcome.TIMEOUT):
                progress = sorted(runner.o.workdir.glob("batch-*/stress.progress"))
                ran_ok = int(progress[-1].read_text()) if progress else 0
                done += ran_ok + 1
                crashes += 1
                messages.append(result.message.splitlines()[0] if result.message else result.outcome.label)
            else:
                done += int(result.details.get("stress_iterations", runs - done))
            bar.update(done, note=f"{crashes} crashed")
    return {"runs": done, "crashes": crashes, "crash_rate": crashes / done if done else 0.0, "errors": messages[:5],
            "outcome": outcome.label}
