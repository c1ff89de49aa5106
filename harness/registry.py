"""Scenario discovery: every public module in scenarios/ defines SCENARIO; names must be unique."""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from harness.scenario import Case, Scenario, ScenarioError

ROOT = Path(__file__).resolve().parent.parent
SCENARIO_DIR = ROOT / "scenarios"


def scenario_dirs() -> list[Path]:
    """Every directory of the `scenarios` package: the repository's, and any a site hook appended."""
    import scenarios
    dirs = [Path(p).resolve() for p in getattr(scenarios, "__path__", [])]
    return dirs if SCENARIO_DIR in dirs else [SCENARIO_DIR, *dirs]


def scenario_modules() -> list[str]:
    names = {m.name for m in pkgutil.iter_modules([str(d) for d in scenario_dirs()]) if not m.name.startswith("_")}
    return sorted(f"scenarios.{name}" for name in names)


def load(module_name: str) -> Scenario:
    module = importlib.import_module(module_name)
    scenario = getattr(module, "SCENARIO", None)
    if not isinstance(scenario, Scenario):
        raise ScenarioError(module_name, "SCENARIO", "module defines no Scenario named SCENARIO")
    return scenario


def all_scenarios() -> dict[str, Scenario]:
    found: dict[str, Scenario] = {}
    for module_name in scenario_modules():
        scenario = load(module_name)
        if scenario.name in found:
            raise ScenarioError(scenario.name, "name", f"defined twice (again in {module_name})")
        found[scenario.name] = scenario
    return found


def get(name: str) -> Scenario:
    scenarios = all_scenarios()
    if name not in scenarios:
        raise ScenarioError(name, "name", f"no such scenario; known: {sorted(scenarios)}")
    return scenarios[name]


def find_case(case_id: str) -> tuple[Scenario, Case]:
    scenario = get(case_id.split("[", 1)[0])
    for case in scenario.build():
        if case.id == case_id:
            return scenario, case
    raise ScenarioError(scenario.name, "cases", f"no case with id {case_id}")
