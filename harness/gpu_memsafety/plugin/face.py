"""What the face (fixtures/: the hooks, the options, the fixtures users call) and the two engines share: the names
and records both sides read, kept light, since the face loads in every pytest run with the plugin installed.

- the command line: the paths it named (`arg_paths`), the interpreter's first import path (`LAUNCH_PATH0`);
- explore's option dests and ini keys (defined by fixtures/explore_options.py, read by plugin/suite/explore.py);
- what the `gpu_memsafety_guarded` fixture (fixtures/guarded.py) checked at a test's teardown, kept on the test's
  item (`CHECKED`): under `pytest --gpu-memsafety` the suite engine reads it as evidence of the test's case.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# What the interpreter put first on sys.path (a console script's own folder; the working directory under
# `python -m pytest`; nothing under -P), taken when pytest loads the plugin (whose options module imports this module
# first thing), before any conftest.py can add to it: the host-suite children start with the same
# (gpu_memsafety.host.children.launcher), so they import what the parent imports.
LAUNCH_PATH0: str | None = None if getattr(sys.flags, "safe_path", False) or not sys.path else sys.path[0]


def arg_paths(config: pytest.Config) -> list[Path]:
    """The paths named on the command line that exist, resolved against the directory pytest was started in."""
    paths = []
    for arg in config.args:
        path = Path(str(arg).split("::", 1)[0])
        path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
        if path.exists():
            paths.append(path.resolve())
    return paths


# explore (`--gpu-memsafety-explore`): its ini keys and its options' dests
INI_ON = "gpu_memsafety_explore"
INI_VARIANTS = "gpu_memsafety_explore_variants"
INI_SECONDS = "gpu_memsafety_explore_seconds"
INI_RUN_VARIANTS = "gpu_memsafety_explore_run_variants"
INI_RUN_SECONDS = "gpu_memsafety_explore_run_seconds"
EXPLORE_DESTS = frozenset({"gpu_memsafety_explore", "gpu_memsafety_explore_case", "gpu_memsafety_explore_variants",
                           "gpu_memsafety_explore_seconds", "gpu_memsafety_explore_run_variants",
                           "gpu_memsafety_explore_run_seconds"})


@dataclass
class FixtureCheck:
    """What the fixture checked at a test's teardown: how many guarded tensors, and the findings (guard overwrites)."""

    tensors: int = 0
    findings: list[Any] = field(default_factory=list)


CHECKED = pytest.StashKey[FixtureCheck]()
