"""The plugin's options validated, once, for both kinds of run: the one module that checks an option's or an ini
key's value. A bad value is a `pytest.UsageError` naming the option and what it takes, raised before anything runs;
the engines read the typed result, never the options.

- `SanitizeConfig.from_pytest`: a scenario run's options, and the scenarios and cases it names; `scenario_path`: a
  scenario path, checked before the search (plugin/scenario/discovery.py) uses it;
- `HostConfig.from_namespace`: `pytest --gpu-memsafety[=MODE]`'s, read from the early namespace (the allocator goes in
  before the suite's conftest.py files are imported);
- `ExploreSettings.from_config`: explore's options and ini keys (the texts read by gpu_memsafety.host.explore);
- `suite_mode_problem`: what is wrong with --gpu-memsafety's value (the option's own action, fixtures/options.py,
  asks while parsing);
- and what they share: a number within its bounds (gpu_memsafety.util.bounds, one table for every command), a
  baseline file loaded, a path option checked (gpu_memsafety.util.pathargs), a mode of the other kind named.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from gpu_memsafety.util.pathargs import PathArgError, input_file, input_path, output_dir
from gpu_memsafety.cover import COVER_OPTIONS, COVER_SCENARIO
from gpu_memsafety.detectors.modes import MODES, Mode
from gpu_memsafety.engine import schedule
from gpu_memsafety.detectors import suite_modes as host_modes
from gpu_memsafety.plugin.face import INI_ON, INI_RUN_SECONDS, INI_RUN_VARIANTS, INI_SECONDS, INI_VARIANTS
from gpu_memsafety.report import manifest
from gpu_memsafety.scenario import registry
from gpu_memsafety.util import bounds
from gpu_memsafety.util.paths import CacheDirError, cache_dir, check_cache_dir


# ------------------------------------------------------------------------------------ what every check shares

def number(option: str, value: object) -> int:
    """A numeric option within its bounds (gpu_memsafety.util.bounds, one table for every command)."""
    try:
        return bounds.number(option, value)
    except bounds.BoundError as exc:
        raise pytest.UsageError(str(exc)) from None


def load_baseline_option(path: Path | None) -> Any:
    """--gpu-memsafety-baseline's file, loaded (a malformed one is a usage error saying why); None without the option."""
    if path is None:
        return None
    from gpu_memsafety.judge.baseline import BaselineError, load_baseline
    try:
        return load_baseline(path)
    except BaselineError as exc:
        raise pytest.UsageError(f"--gpu-memsafety-baseline: {exc}") from None


def scenario_path(value: str) -> None:
    """A --gpu-memsafety-scenario-path value: an existing directory or file (checked before the search uses it)."""
    try:
        input_path(Path(value).expanduser() if str(value).strip() else value, "--gpu-memsafety-scenario-path")
    except PathArgError as exc:
        raise pytest.UsageError(str(exc)) from None


def suite_mode_problem(value: str) -> str:
    """Why --gpu-memsafety's value (neither a test-suite mode nor an existing path) is refused: a scenario mode names
    the option that takes it, anything else lists the modes."""
    other = host_modes.other_kind(str(value), tuple(MODES), for_suite=True)
    if other:
        return f"{other}; the test-suite modes are {', '.join(host_modes.MODES)}"
    listed = "; ".join(f"{name}: {what}" for name, what in host_modes.MODES.items())
    return f"unknown mode {value!r} (and no such path); the modes are {listed}"


# ------------------------------------------------------------------------------------------- a scenario run

def _mode(value: str) -> Mode:
    if value not in MODES:
        other = host_modes.other_kind(value, tuple(MODES), for_suite=False)
        raise pytest.UsageError(f"--gpu-memsafety-mode: {other + '; the scenario modes are' if other else f'{value!r} is not one of'} "
                                f"{', '.join(MODES)}")
    return MODES[value]


@dataclass
class SanitizeConfig:
    """A scenario run's options, each checked once (`from_pytest`); the hooks read this, never the options."""

    mode: Mode
    scenarios: tuple[str, ...]
    tags: tuple[str, ...]
    cases: tuple[str, ...]
    report_dir: Path | None
    baseline: Path | None
    batch_size: int
    iterations: int
    flush_backend: str
    allow_unsupported: bool
    debug: bool
    cover: str = COVER_SCENARIO
    shard: schedule.Shard | None = None
    run_group: str = ""            # what every shard of this run shares (manifest.run_group), and where it came from
    run_group_source: str = ""
    costs: dict[str, float] = field(default_factory=dict)
    run_id: str = ""
    started: float = field(default_factory=time.time)

    @classmethod
    def from_pytest(cls, config: pytest.Config, known: dict[str, Any]) -> "SanitizeConfig":
        """`known`: the scenarios the run sees (plugin/scenario/discovery.py), which --gpu-memsafety-scenario names."""
        backend = config.getoption("--gpu-memsafety-flush-backend")
        if backend not in ("auto", "torch"):
            raise pytest.UsageError(f"--gpu-memsafety-flush-backend: {backend!r} is not one of auto, torch")
        cover = config.getoption("--gpu-memsafety-cover")
        if cover not in COVER_OPTIONS:
            raise pytest.UsageError(f"--gpu-memsafety-cover: {cover!r} is not one of {', '.join(COVER_OPTIONS)}")
        for name in config.getoption("--gpu-memsafety-scenario"):
            if name not in known:
                raise pytest.UsageError(f"--gpu-memsafety-scenario: {registry.unknown_scenarios([name], known)}")
        cases = tuple(config.getoption("--gpu-memsafety-case"))
        for case_id in cases:
            try:
                registry.find_case(case_id)
            except registry.ScenarioError as exc:
                raise pytest.UsageError(f"--gpu-memsafety-case: {exc}") from None
        report_dir = _path_option(config, "--gpu-memsafety-report-dir", output_dir)
        baseline = _path_option(config, "--gpu-memsafety-baseline", input_file)
        if baseline:
            load_baseline_option(baseline)   # a malformed baseline is refused, with the reason, before any case runs
        cost_file = _path_option(config, "--gpu-memsafety-cost-file", input_file)
        try:
            check_cache_dir()          # the run directory's home: a read-only checkout falls back to XDG, else stop
        except CacheDirError as exc:
            raise pytest.UsageError(f"run directory: {exc}") from None
        shard = None
        if config.getoption("--gpu-memsafety-shard"):
            try:
                shard = schedule.parse_shard(config.getoption("--gpu-memsafety-shard"))
            except ValueError as exc:
                raise pytest.UsageError(f"--gpu-memsafety-shard: {exc}") from None
        group, group_source = _run_group(config, shard)
        return cls(shard=shard, run_group=group, run_group_source=group_source,
                   costs=_cost_file(cost_file), run_id=_run_id(config),
                   mode=_mode(config.getoption("--gpu-memsafety-mode")),
                   scenarios=tuple(config.getoption("--gpu-memsafety-scenario")),
                   tags=tuple(config.getoption("--gpu-memsafety-tag")), cases=cases, report_dir=report_dir,
                   baseline=baseline,
                   batch_size=number("--gpu-memsafety-batch-size", config.getoption("--gpu-memsafety-batch-size")),
                   iterations=number("--gpu-memsafety-iterations", config.getoption("--gpu-memsafety-iterations")),
                   flush_backend=backend, cover=cover,
                   allow_unsupported=bool(config.getoption("--gpu-memsafety-allow-unsupported")),
                   debug=config.getoption("--gpu-memsafety-harness-debug"))

    @property
    def run_dir(self) -> Path:
        """This run's work files: unique per run (not per second), shared by its xdist workers."""
        return cache_dir() / "runs" / self.run_id


def _path_option(config: pytest.Config, option: str, check: Callable[[str, str], Path]) -> Path | None:
    """A path option checked (pathargs) and made absolute against the directory pytest was started in, so that
    nothing that changes the working directory later (a scenario file's os.chdir at import) moves it."""
    value = config.getoption(option)
    if value is None:
        return None
    try:
        path = check(value, option)
    except PathArgError as exc:
        raise pytest.UsageError(str(exc)) from None
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def _run_group(config: pytest.Config, shard: schedule.Shard | None) -> tuple[str, str]:
    """The run group of a sharded run, checked before anything runs: shards that name no run could be merged
    with another run's shards of the same matrix."""
    try:
        group, source = manifest.run_group(config.getoption("--gpu-memsafety-run-group"))
    except manifest.RunGroupError as exc:
        raise pytest.UsageError(str(exc)) from None
    if shard is not None and not group:
        raise pytest.UsageError(
            "--gpu-memsafety-shard: the shards of one run must share a run group, so that `merge` can tell them from another run's "
            "shards: pass --gpu-memsafety-run-group ID (make sanitize RUN_GROUP=ID), or set GPU_MEMSAFETY_RUN_GROUP; under CI the "
            f"run's id is used ({', '.join(manifest.CI_RUN_VARS)})")
    return group, source


def _run_id(config: pytest.Config) -> str:
    """The controller makes the id; xdist workers get it through workerinput (pytest_configure_node)."""
    given = getattr(config, "workerinput", {}).get(RUN_ID_KEY)
    if given:
        return str(given)
    from gpu_memsafety.report import new_run_id
    return new_run_id()


RUN_ID_KEY = "gpu_memsafety_run_id"


def _cost_file(path: Path | None) -> dict[str, float]:
    """Case id -> seconds from an earlier report. A case that ended its process (no duration) costs a start-up."""
    if not path:
        return {}
    from gpu_memsafety.report import ReportError, load_report
    try:
        doc = load_report(path)
    except ReportError as exc:
        raise pytest.UsageError(f"--gpu-memsafety-cost-file: {exc}") from None
    return {c["id"]: (seconds if (seconds := float(c.get("duration_s") or 0.0)) > 0 else schedule.STARTUP_S)
            for c in doc["cases"]}


# What a scenario run keeps in pytest's stash: its validated options.
CONFIG = pytest.StashKey[SanitizeConfig]()


# ------------------------------------------------------------------------------------------- a guarded suite

@dataclass
class HostConfig:
    """The host-suite options, validated once (a bad value is a usage error before anything runs)."""

    mode: str
    baseline_path: Path | None = None
    baseline: Any = None
    report_dir: Path | None = None
    batch: int = 32
    timeout_s: int = 1800
    child_dir: Path | None = None
    started: float = field(default_factory=time.time)
    run_id: str = ""

    @classmethod
    def from_namespace(cls, ns: Any) -> "HostConfig":
        child = getattr(ns, "gpu_memsafety_child", None)
        mode = getattr(ns, "gpu_memsafety", None) or (host_modes.MARKERS if child else None)
        cfg = cls(mode=str(mode), child_dir=Path(child) if child else None,
                  batch=number("--gpu-memsafety-batch-size", getattr(ns, "gpu_memsafety_batch_size", "32")),
                  timeout_s=number("--gpu-memsafety-timeout", getattr(ns, "gpu_memsafety_timeout", "1800")))
        baseline = getattr(ns, "gpu_memsafety_baseline", None)
        if baseline:
            cfg.baseline_path = Path(baseline)
            if not cfg.baseline_path.is_file():
                raise pytest.UsageError(f"--gpu-memsafety-baseline: {cfg.baseline_path} is not a file")
            cfg.baseline = load_baseline_option(cfg.baseline_path)
        report_dir = getattr(ns, "gpu_memsafety_report_dir", None)
        cfg.report_dir = Path(report_dir) if report_dir else None
        return cfg


@dataclass(frozen=True)
class ExploreSettings:
    """explore's options (the command line wins) and ini keys, read once."""

    on: bool
    budget: Any        # gpu_memsafety.host.explore.Budget
    cases: tuple[str, ...]

    @classmethod
    def from_config(cls, config: pytest.Config) -> "ExploreSettings":
        from gpu_memsafety.host import explore as X

        def pick(dest: str, ini: str) -> Any:
            value = config.getoption(dest)
            return value if value is not None else config.getini(ini)
        try:
            on = bool(config.getoption("gpu_memsafety_explore")) or X.parse_flag(INI_ON, config.getini(INI_ON))
            budget = X.Budget(
                X.parse_count("--gpu-memsafety-explore-variants", pick("gpu_memsafety_explore_variants", INI_VARIANTS)),
                X.parse_seconds("--gpu-memsafety-explore-seconds", pick("gpu_memsafety_explore_seconds", INI_SECONDS)),
                X.parse_count("--gpu-memsafety-explore-run-variants",
                              pick("gpu_memsafety_explore_run_variants", INI_RUN_VARIANTS)),
                X.parse_seconds("--gpu-memsafety-explore-run-seconds",
                                pick("gpu_memsafety_explore_run_seconds", INI_RUN_SECONDS)))
            cases = tuple(config.getoption("gpu_memsafety_explore_case") or ())
            for case in cases:
                X.parse_case_id(case)
        except X.ExploreError as exc:
            raise pytest.UsageError(str(exc)) from None
        return cls(on, budget, cases)
