"""`python -m gpu_memsafety COMMAND`: env, list, new, repro, merge, bench, upstream, simulate, baseline, history,
render (`python -m gpu_memsafety COMMAND --help`).

Every command that reads scenarios sees the same set as pytest and `make sanitize`: the repository's
scenarios/, `--scenario-path DIR` (repeatable, before or after the command), the `gpu_memsafety_scenario_paths` ini option
of the pytest configuration file (`--config FILE`, default: the one pytest finds from the current directory)
and the `gpu_memsafety.scenarios` entry points (harness/gpu_memsafety/scenario/registry.py).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable

from gpu_memsafety.util.pathargs import arg_type, input_file, input_path, output_dir, text_arg_type

DESCRIPTION = "GPU memory-safety regression harness"
# Commands with their own argument parser: the rest of the command line is handed to them as is.
DELEGATED = {
    "repro": "run one case and print where it goes out of bounds",
    "merge": "combine report.json files from several runners into one matrix",
    "bench": "time every mode on the GPU (what each detector costs)",
    "upstream": "fetch the published upstream code the scenarios run, by exact version (make upstream)",
    "simulate": "predict a measured run's wall time on N GPUs from its own costs",
    "baseline": "write a baseline from a report (reasons to fill in), or check a report against one",
    "history": "which cases changed outcome across runs, and a plot of findings per kernel",
    "render": "write every report format (HTML, SARIF, JUnit, ...) from a report.json",
}
# Delegated commands that read no scenarios: scenario options before them are not theirs.
NO_SCENARIOS = ("merge", "upstream", "simulate", "history", "render")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-memsafety", description=DESCRIPTION)
    _scenario_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser("env", help="GPUs (NVML), driver, compute-sanitizer, package versions",
                   description="What this machine has: GPUs (NVML), driver, compute-sanitizer, torch, triton, triton_kernels.")
    lst = sub.add_parser("list", help="scenarios and their case ids",
                         description="List scenarios and their case ids (the ids `repro`, `pytest --gpu-memsafety-case` and baselines take).")
    _scenario_options(lst, suppress=True)
    lst.add_argument("--scenario", action="append", default=[], metavar="NAME", help="only this scenario (repeatable)")
    lst.add_argument("--tag", action="append", default=[], metavar="TAG", help="only cases with this tag (repeatable)")
    lst.add_argument("--variant", action="append", default=[], metavar="NAME", help="only this variant (repeatable)")
    lst.add_argument("--ids", action="store_true", help="print case ids only, one a line")
    new = sub.add_parser("new", help="write a new scenario, its kernel adapter and a test",
                         description="Write NAME.py (the scenario), NAME_kernel.py (a kernel with a planted off-by-one "
                                     "store and its fixed twin, and the adapter) and test_NAME.py into --path. They "
                                     "run as generated: replace the kernel with yours.")
    _scenario_options(new, suppress=True)
    new.add_argument("name", help="scenario name, lower_snake_case")
    new.add_argument("--path", type=arg_type(output_dir, "--path"), default=None,
                     help="directory to write into (default: ./NAME)")
    kind = new.add_mutually_exclusive_group()
    kind.add_argument("--triton", dest="kind", action="store_const", const="triton", help="a Triton kernel (default)")
    kind.add_argument("--cuda", dest="kind", action="store_const", const="cuda", help="a CUDA C++ kernel")
    new.add_argument("--force", action="store_true", help="overwrite existing files")
    for name, summary in DELEGATED.items():
        sub.add_parser(name, help=summary, add_help=False)
    return parser


def _scenario_options(parser: argparse.ArgumentParser, suppress: bool = False) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument("--scenario-path", action="append", default=default if suppress else [], metavar="DIR",
                        type=text_arg_type(input_path, "--scenario-path"),
                        help="also load the scenarios in DIR (a directory or a scenario file; repeatable)")
    parser.add_argument("--config", type=arg_type(input_file, "--config"), default=default, metavar="FILE",
                        help="pytest configuration file whose `gpu_memsafety_scenario_paths` to use (default: the one pytest "
                             "would find from the current directory)")


def _pop_scenario_options(argv: list[str]) -> tuple[list[str], list[str], str | None]:
    """--scenario-path/--config anywhere in a delegated command's arguments (its own parser does not know them)."""
    rest, paths, config = [], [], None
    i = 0
    while i < len(argv):
        arg = argv[i]
        for option in ("--scenario-path", "--config"):
            if arg == option and i + 1 < len(argv):
                value, i = argv[i + 1], i + 2
                break
            if arg.startswith(option + "="):
                value, i = arg.split("=", 1)[1], i + 1
                break
        else:
            rest.append(arg)
            i += 1
            continue
        if option == "--config":
            config = value
        else:
            paths.append(value)
    return rest, paths, config


def configure_scenarios(paths: list[str], config: str | None) -> None:
    """A delegated command's scenario paths: checked as argparse checks the others, then configured."""
    from gpu_memsafety.util.pathargs import PathArgError
    from gpu_memsafety.scenario import registry
    for path in paths:      # those a delegated command was given have not been through argparse's check
        try:
            input_path(path, "--scenario-path")
        except PathArgError as exc:
            raise registry.ScenarioError(str(path), "--scenario-path", str(exc)) from None
    registry.configure_from_command_line(paths, config)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    _cwd_on_import_path()
    from gpu_memsafety.util.signals import stop_as_interrupt
    stop_as_interrupt()      # SIGTERM, SIGHUP: cleaned up like Ctrl-C (children killed, temporary folders removed)
    from gpu_memsafety.util.neutral import neutral_output
    with neutral_output():      # every line any command prints (errors, foreign names, tools' output) neutral
        return _guarded_main(args)


def _guarded_main(args: list[str]) -> int:
    from gpu_memsafety.scenario.definition import ScenarioError
    try:
        return _main(args)
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:       # Ctrl-C, or SIGTERM/SIGHUP (util.signals): after every cleanup ran
        print(f"interrupted ({exc or 'Ctrl-C'})", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly; point stdout at devnull so the interpreter's final
        # flush does not raise again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (AttributeError, ValueError, OSError):
            pass
        return 0


def _cwd_on_import_path() -> None:
    """The current directory first on sys.path, as `python -m gpu_memsafety` has it: the `gpu-memsafety` console
    script run from a host repository's root then imports the host's packages the same way (and passes them on
    to worker processes, util.paths.inherited_pythonpath)."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


# Commands that import scenarios (and with them torch and triton): the stack is checked first, in one sentence.
NEEDS_STACK = ("list", "new", "repro", "bench")


def _preflight(args: list[str]) -> str | None:
    from gpu_memsafety.util.preflight import PreflightError, stack
    if "-h" in args or "--help" in args or not any(a in NEEDS_STACK for a in args):
        return None
    try:
        stack()
    except PreflightError as exc:
        return str(exc)
    return None


def _main(args: list[str]) -> int:
    problem = _preflight(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    parser = build_parser()
    # Global options before the command, then the command; delegated commands parse the rest themselves.
    index = next((i for i, a in enumerate(args) if a in DELEGATED), None)
    if index is not None and all(a.startswith("-") or (i > 0 and args[i - 1] in ("--scenario-path", "--config"))
                                 for i, a in enumerate(args[:index])):
        head, _ = parser.parse_known_args(args[:index] + ["env"])
        rest, paths, config = _pop_scenario_options(args[index + 1:])
        command = args[index]
        if command not in NO_SCENARIOS:
            if command == "repro":     # repro records its options in rerun.sh: it takes them itself
                return _delegate(command)([*rest, *sum((["--scenario-path", p] for p in head.scenario_path + paths), []),
                                           *(["--config", config or str(head.config)] if (config or head.config) else [])])
            from gpu_memsafety.scenario import registry
            registry.configure_from_command_line(head.scenario_path + paths,
                                                 config or (str(head.config) if head.config else None))
        return _delegate(command)(rest)
    ns = parser.parse_args(args)
    handler: Callable[[argparse.Namespace], int] = {"env": _env, "list": _list, "new": _new}[ns.command]
    return handler(ns)


def _delegate(command: str) -> Callable[[list[str]], int]:
    import importlib
    module = {"repro": "gpu_memsafety.cli.repro", "merge": "gpu_memsafety.report.merge",
              "bench": "gpu_memsafety.cli.bench", "upstream": "gpu_memsafety.cli.upstream",
              "simulate": "gpu_memsafety.cli.simulate",
              "baseline": "gpu_memsafety.cli.baseline", "history": "gpu_memsafety.cli.history",
              "render": "gpu_memsafety.cli.render"}[command]
    main: Callable[[list[str]], int] = importlib.import_module(module).main
    return main


def _env(ns: argparse.Namespace) -> int:
    from gpu_memsafety.cli.env import environment
    from gpu_memsafety.util.gpus import discover
    disc = discover()
    env = environment(disc)
    print(f"GPUs: {disc.summary}")
    for g in env["gpus"]:
        print(f"  [{g['index']}] {g['name']}  uuid={g['uuid']}  compute capability {g['capability'][0]}.{g['capability'][1]}  arch {g['arch']}  {g['memory_mib']} MiB")
    print(f"driver: {env['driver'] or 'none'}")
    cs = env["compute_sanitizer"]
    if cs.get("path"):
        print(f"compute-sanitizer: {cs['path']} (version {cs['version']}, found via {cs['source']})")
    for rejected in cs.get("rejected", []):
        print(f"compute-sanitizer: found but rejected: {rejected['path']} (found via {rejected['source']}): "
              f"{rejected['problem']}")
    if not cs.get("path") and not cs.get("rejected"):
        print(f"compute-sanitizer: not found (searched: {', '.join(cs['searched']) or 'nothing'})")
    for name in ("torch", "triton", "triton_kernels", "nvidia-ml-py"):
        print(f"{name}: {env[name]}")
    return 0


def _list(ns: argparse.Namespace) -> int:
    from gpu_memsafety.scenario import registry
    registry.configure_from_command_line(ns.scenario_path, str(ns.config) if ns.config else None)
    scenarios = registry.all_scenarios()
    unknown = [n for n in ns.scenario if n not in scenarios]
    if unknown:
        print(f"error: --scenario: {registry.unknown_scenarios(unknown, scenarios)}", file=sys.stderr)
        return 2
    shown = 0
    for name, scenario in sorted(scenarios.items(), key=lambda item: (registry.is_bundled(item[1]), item[0])):
        if ns.scenario and name not in ns.scenario:
            continue
        cases = [c for c in scenario.build() if (not ns.tag or set(ns.tag) & set(c.tags))
                 and (not ns.variant or c.variant in ns.variant)]
        if not cases:
            continue
        if not ns.ids:
            where = scenario.source.file if scenario.source is not None else "?"
            print(f"{name}: {scenario.summary}\n  ({where})")
        for case in cases:
            print(case.id if ns.ids else f"  {case.id}  [{', '.join(case.tags)}]")
            shown += 1
    if not shown:
        print("no case matches " + " ".join(f"--{k} {v}" for k in ("scenario", "tag", "variant")
                                             for v in getattr(ns, k)), file=sys.stderr)
        return 1
    sys.stdout.flush()
    return 0


def _new(ns: argparse.Namespace) -> int:
    import shlex

    from gpu_memsafety.cli.new import write_scenario
    from gpu_memsafety.scenario import registry
    registry.configure_from_command_line(ns.scenario_path, str(ns.config) if ns.config else None)
    written = write_scenario(ns.name, ns.path, kind=ns.kind or "triton", force=ns.force)
    for path in written:
        print(f"wrote {path}")
    where = shlex.quote(str(written[0].parent.resolve()))
    print(f"run it:  python -m gpu_memsafety repro '{ns.name}[buggy-n1000]' --mode guard --scenario-path {where}\n"
          f"         {_sanitize_command(ns.name, where)}\n"
          f"test it: python -m pytest {shlex.quote(str(written[2]))}")
    return 0


def _sanitize_command(name: str, where: str) -> str:
    """The whole-run command for a new scenario: `make sanitize` where this directory's Makefile has that target
    (the harness's checkout), else pytest's own options, which work in any repository."""
    import re
    makefile = Path.cwd() / "Makefile"
    try:
        has_target = bool(re.search(r"^sanitize\s*:", makefile.read_text(errors="replace"), flags=re.M))
    except OSError:
        has_target = False
    if has_target:
        return f"make sanitize MODE=guard SCENARIO_PATH={where} PYTEST_ARGS=\"--gpu-memsafety-scenario {name}\""
    return f"python -m pytest --gpu-memsafety-scenario-path {where} --gpu-memsafety-scenario {name} --gpu-memsafety-mode guard"


if __name__ == "__main__":
    sys.exit(main())
