"""The scenarios a scenario run sees, found once per run: the same search as `gpu-memsafety list` with the same
paths (the repository's, --gpu-memsafety-scenario-path, the ini's scenario_paths, scenario files named on the command
line, and the `gpu_memsafety.scenarios` entry points), and the scenario files outside the paths pytest was given added
to its arguments. The run's options are validated in gpu_memsafety.plugin.settings.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.plugin.face import arg_paths
from gpu_memsafety.plugin.settings import scenario_path
from gpu_memsafety.scenario import registry
from gpu_memsafety.util.paths import CHECKOUT


def discover_scenarios(config: pytest.Config) -> dict[str, Any]:
    """Every scenario this run sees (the same set as `python -m gpu_memsafety list` with the same paths): the
    repository's, --gpu-memsafety-scenario-path, the ini's scenario_paths, scenario files named on the command line,
    and the `gpu_memsafety.scenarios` entry points. The paths reach child processes through the environment."""
    if SCENARIOS in config.stash:
        return config.stash[SCENARIOS]
    invoked = Path(config.invocation_params.dir)
    for value in config.getoption("--gpu-memsafety-scenario-path"):
        scenario_path(value)
    explicit = [(invoked / Path(p).expanduser()).resolve() for p in [*config.getoption("--gpu-memsafety-scenario-path"),
                                                                     *config.getini(registry.INI_OPTION)]]
    named = [a for a in arg_paths(config) if a.suffix == ".py" and registry.is_scenario_file(a, unreadable=False)]
    try:
        registry.configure([*explicit, *named])
        found = registry.all_scenarios()
    except registry.ScenarioError as exc:
        raise pytest.UsageError(f"--gpu-memsafety-scenario-path/{registry.INI_OPTION}: {exc}") from None
    config.stash[SCENARIOS] = found
    config.stash[FILES] = {Path(s.source.file) for s in found.values() if s.source is not None}
    _collect_outside_args(config, found, explicit)
    return found


def _collect_outside_args(config: pytest.Config, found: dict[str, Any], explicit: list[Path]) -> None:
    """Scenario files outside the paths pytest was given are added to its arguments: those of
    --gpu-memsafety-scenario-path and the ini's gpu_memsafety_scenario_paths always; those of entry points and
    GPU_MEMSAFETY_SCENARIO_PATH on a run of the repository's scenarios/ or of a scenario path (a named file stays
    alone). A scenario run whose command line names no path (`pytest --gpu-memsafety-scenarios`) runs the scenarios
    only, never the suite's testpaths: those outside the repository's scenarios/, else the repository's."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        outside = [str(Path(s.source.file)) for s in found.values()
                   if not Path(s.source.file).is_relative_to(registry.SCENARIO_DIR)]
        config.args = sorted(set(outside)) or [str(registry.SCENARIO_DIR)]
        config.args_source = pytest.Config.ArgsSource.ARGS
        return
    args = arg_paths(config)

    def under(file: Path, paths: list[Path]) -> bool:
        return any(file == a or (a.is_dir() and file.is_relative_to(a)) for a in paths)

    whole_run = bool(explicit) or registry.SCENARIO_DIR in args or (CHECKOUT is not None and CHECKOUT in args)
    for scenario in found.values():
        file = Path(scenario.source.file)
        if under(file, args) or file.is_relative_to(registry.SCENARIO_DIR):
            continue
        if under(file, explicit) or whole_run:
            config.args.append(str(file))


# What a run keeps in pytest's stash: the scenarios it sees and their files.
SCENARIOS = pytest.StashKey[dict]()
FILES = pytest.StashKey[set]()
