"""`python -m harness repro`: one case, deterministically, with a short answer a developer can act on.

    python -m harness repro last_expert_oob_read --variant unpadded --set K=2880 --mode all --keep /tmp/r

Picks the case (variant, --set NAME=VALUE pins parameters; values not in the grid make a new case, checked
against the scenario's parameter ranges), runs it in each requested mode, and prints the kernel, buffer,
bytes past the end, logical place, first thread and block and source line. `--keep` leaves the worker logs,
the sanitizer XML, the job files and `rerun.sh`, which reruns exactly that case.
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.model import CaseResult
from harness.scenario import Case, Scenario, ScenarioError

ALL_MODES = ("both", "guard_page", "poison", "stress")


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
    from harness.report import describe_finding, visible
    lines = [f"[{result.mode}] {result.case_id}: {result.outcome.label} in {seconds:.1f} s",
             f"  expected: {result.expected}", f"  verdict: {result.message.splitlines()[0] if result.message else ''}"]
    lines += [f"  - {describe_finding(f)}" for f in result.findings]
    for d in result.detectors:
        if not d.ran:
            lines.append(f"  ({d.detector} did not run: {d.detail})")
    return visible("\n".join(lines))  # kernel and tool text: control characters shown as escapes


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness repro")
    ap.add_argument("scenario")
    ap.add_argument("--variant")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--mode", default="both", help=f"a mode, a comma list, or 'all' ({', '.join(ALL_MODES)})")
    ap.add_argument("--loop", type=int, default=20, help="stress mode: iterations")
    ap.add_argument("--keep", type=Path, help="keep logs, XML and rerun.sh here")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    from harness import registry, sanitizer
    from harness.env import discover
    from harness.runner import MODES, RunOptions, Runner
    try:
        scenario = registry.get(args.scenario)
        case = pick(scenario, args.variant, parse_set(args.set, scenario))
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    modes = list(ALL_MODES) if args.mode == "all" else args.mode.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown or args.loop <= 0:
        print(f"error: --mode {','.join(unknown)} unknown (known: {', '.join(MODES)}, all)" if unknown
              else "error: --loop must be positive", file=sys.stderr)
        return 2
    disc = discover()
    lookup = sanitizer.locate()
    workdir = Path(tempfile.mkdtemp(prefix="repro-"))
    print(f"case {case.id}\n  params: {json.dumps(dict(case.params))}\n  GPUs: {disc.summary}")
    results, failed = [], False
    for mode in modes:
        options = RunOptions(mode=MODES[mode], workdir=workdir / mode, gpu_available=bool(disc.gpus),
                             sanitizer=lookup, iterations=args.loop)
        t0 = time.perf_counter()
        if mode == "stress":
            stats = stress(options, scenario, case, args.loop)
            seconds = time.perf_counter() - t0
            results.append({"mode": "stress", **stats, "wall_s": round(seconds, 3)})
            print(f"[stress] {case.id}: crashed in {stats['crashes']} of {stats['runs']} runs under production "
                  f"conditions (caching allocator on, no guards) in {seconds:.1f} s")
            continue
        (result,) = Runner(options).run([(scenario, case)])
        seconds = time.perf_counter() - t0
        results.append({**result.to_json(), "wall_s": round(seconds, 3)})
        failed |= result.failed
        print(answer(result, seconds))
    if args.json:
        from harness.fsutil import atomic_write_json
        atomic_write_json(args.json, {"case": case.to_json(), "results": results})
    if args.keep:
        _keep(args.keep, workdir, argv)
    shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


def stress(options: Any, scenario: Scenario, case: Case, runs: int) -> dict[str, Any]:
    """Run the case `runs` times as production runs it; a crash costs the process, so restart and go on."""
    from dataclasses import replace

    from harness.model import Outcome
    from harness.runner import Runner
    from harness.progress import watch
    done = crashes = 0
    messages: list[str] = []
    attempt = 0
    current: list[Path] = []          # the running attempt's workdir, where the worker counts its iterations

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
            if result.outcome in (Outcome.CRASHED, Outcome.UNRESOLVED, Outcome.TIMEOUT):
                progress = sorted(runner.o.workdir.glob("batch-*/stress.progress"))
                ran_ok = int(progress[-1].read_text()) if progress else 0
                done += ran_ok + 1
                crashes += 1
                messages.append(result.message.splitlines()[0] if result.message else result.outcome.label)
            else:
                done += int(result.details.get("stress_iterations", runs - done))
            bar.update(done, note=f"{crashes} crashed")
    return {"runs": done, "crashes": crashes, "crash_rate": crashes / done if done else 0.0, "errors": messages[:5]}


def _keep(dest: Path, workdir: Path, argv: list[str]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(workdir, dest, dirs_exist_ok=True)
    from harness.registry import ROOT
    script = dest / "rerun.sh"
    script.write_text(f"#!/usr/bin/env bash\n# Reruns exactly this case.\ncd {shlex.quote(str(ROOT))}\n"
                      f"exec {shlex.quote(sys.executable)} -m harness repro {' '.join(shlex.quote(a) for a in argv)}\n")
    script.chmod(0o755)
    print(f"kept logs, sanitizer XML and rerun.sh in {dest}")
