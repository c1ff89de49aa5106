"""Scenario discovery: where scenario definitions come from, and the one set every entry point sees.

A scenario is a Python file that defines `SCENARIO = Scenario(...)` at top level. They are found in:

1. the repository's `scenarios/` directory;
2. directories given with `--scenario-path DIR` (`python -m gpu_memsafety list|repro|bench|new`; pytest's
   `--gpu-memsafety-scenario-path DIR`;
   `make sanitize SCENARIO_PATH=DIR`), and in the `GPU_MEMSAFETY_SCENARIO_PATH` environment variable
   (os.pathsep-separated; the entry points set it for their child processes, so workers and benchmark
   children see the same set);
3. the ini option `gpu_memsafety_scenario_paths` of the pytest configuration file in use (pytest.toml, pytest.ini,
   pyproject.toml's [tool.pytest.ini_options], tox.ini, setup.cfg: found and read by pytest's own discovery),
   relative to that file;
4. installed packages that declare an entry point in the group `gpu_memsafety.scenarios`: its value names a
   module that defines SCENARIO, or a package whose directory holds scenario files.

Only the top level of a directory is searched, and only files that assign `SCENARIO` at top level are
scenarios (decided by parsing, before anything is imported), so a kernel module or a test file may sit
beside its scenario. A scenario file is imported from its path under a private module name, with its
directory on sys.path (after the repository root), so `import my_kernel` finds the module beside it. The
worker imports a case's scenario from the same file (the `Source` travels with the job), never by name.
A name defined twice is an error naming both files.
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Mapping, Sequence

from gpu_memsafety.util.paths import SCENARIO_DIR
from gpu_memsafety.scenario.definition import Case, Scenario, ScenarioError

ENV_VAR = "GPU_MEMSAFETY_SCENARIO_PATH"
ENTRY_POINT_GROUP = "gpu_memsafety.scenarios"
INI_OPTION = "gpu_memsafety_scenario_paths"
_REPO_PACKAGE = "gpu_memsafety.scenarios"


@dataclass(frozen=True)
class Source:
    """Where one scenario definition lives: its file, and the module name it is imported under.

    `module` is an importable dotted name for the repository's scenarios and for installed (entry point)
    ones; for a file found through a scenario path it is None and the file is imported from its path.
    `origin` says which search found it, for messages.
    """

    file: str
    module: str | None = None
    origin: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "module": self.module, "origin": self.origin}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Source":
        return cls(str(data["file"]), data.get("module"), str(data.get("origin", "")))


# ----------------------------------------------------------------------------------------- search paths

def env_paths(environ: Mapping[str, str] | None = None) -> list[Path]:
    raw = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return [Path(p) for p in raw.split(os.pathsep) if p.strip()]


def configure(paths: Iterable[str | Path] = ()) -> list[Path]:
    """Add scenario directories for this process and every child it starts (through the environment).
    Relative paths are resolved against the current directory. Returns the full extra path list."""
    extra = [p.resolve() for p in env_paths()]
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        if path not in extra:
            extra.append(path)
    if extra:
        os.environ[ENV_VAR] = os.pathsep.join(str(p) for p in extra)
    _cache.clear()
    return extra


def pytest_config(start: Path, config: str | None = None) -> tuple[Path | None, list[Path]]:
    """The configuration file pytest itself would use when run from `start` with no arguments (or `config`, as
    `pytest -c FILE`), and its gpu_memsafety_scenario_paths resolved against that file's directory. Found and read
    by pytest's own discovery (_pytest.config.findpaths.determine_setup): pytest.toml (pytest 9), pytest.ini,
    .pytest.ini, pyproject.toml, tox.ini and setup.cfg, each parsed as pytest parses it, never by a parser of ours."""
    import inspect

    from _pytest.config import findpaths
    kwargs: dict[str, Any] = {"inifile": config, "args": [], "rootdir_cmd_arg": None, "invocation_dir": start.resolve()}
    if "override_ini" in inspect.signature(findpaths.determine_setup).parameters:      # pytest 9
        kwargs["override_ini"] = None
    try:
        _, inifile, values, *_ = findpaths.determine_setup(**kwargs)
    except Exception as exc:  # noqa: BLE001 - pytest's UsageError or a parse error: said with the file
        raise ScenarioError(str(config or start), INI_OPTION, f"pytest cannot read its configuration: {exc}") from None
    value = values.get(INI_OPTION)
    value = getattr(value, "value", value)      # pytest 9 wraps each value (ConfigValue); 8 gives it bare
    if inifile is None or value is None:
        return inifile, []
    entries = value.split() if isinstance(value, str) else value
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise ScenarioError(str(inifile), INI_OPTION, f"expected a list of directories, got {value!r}")
    return inifile, [(inifile.parent / e).resolve() for e in entries]


def configure_from_command_line(paths: Sequence[str], config: str | None) -> None:
    """A command's `--scenario-path DIR...` and `--config FILE`: make this process and its children see the
    scenarios of `paths` and of the configuration file's gpu_memsafety_scenario_paths (FILE, else the file pytest would use
    from the current directory). A bad path or a name defined twice is reported here, before any work."""
    if config and not Path(config).is_file():
        raise ScenarioError(str(config), "--config", f"{config} is not a file")
    _, from_config = pytest_config(Path.cwd(), config)
    configure([*paths, *from_config])
    all_scenarios()


# ------------------------------------------------------------------------------------------------ discovery

def is_scenario_file(path: Path, unreadable: bool = True) -> bool:
    """A top-level .py file (not _private) that assigns SCENARIO at top level; decided without importing.
    A file that cannot be parsed is `unreadable`: True where it was given as a scenario path (the import then reports
    the real error, naming the file); False where any test file may be named (pytest's own command line: a suite's
    file in a newer Python's syntax is pytest's collection error, never a scenario run)."""
    if path.suffix != ".py" or path.name.startswith("_") or not path.is_file():
        return False
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, OSError):
        return unreadable
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "SCENARIO" for t in targets):
            return True
    return False


def _dir_sources(directory: Path, origin: str) -> list[Source]:
    if not directory.exists():
        raise ScenarioError(str(directory), "scenario path", f"{directory} does not exist ({origin})")
    if directory.is_file():     # one scenario file
        if not is_scenario_file(directory):
            raise ScenarioError(str(directory), "scenario path", f"{directory} is not a scenario file: it defines no "
                                f"SCENARIO = Scenario(...) ({origin})")
        return [Source(str(directory.resolve()), None, origin)]
    if not directory.is_dir():
        raise ScenarioError(str(directory), "scenario path", f"{directory} is not a directory ({origin})")
    found = []
    repo = directory.resolve() == SCENARIO_DIR
    for path in sorted(directory.iterdir()):
        if is_scenario_file(path):
            module = f"{_REPO_PACKAGE}.{path.stem}" if repo else None
            found.append(Source(str(path.resolve()), module, origin))
    if not found and not repo:
        raise ScenarioError(str(directory), "scenario path",
                            f"no scenario in {directory} ({origin}): a scenario file defines SCENARIO = Scenario(...)")
    return found


def _entry_point_sources() -> list[Source]:
    from importlib.metadata import entry_points
    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        origin = f"entry point {ep.name} = {ep.value}"
        module_name = ep.value.split(":", 1)[0].strip()
        try:
            spec = importlib.util.find_spec(module_name)
        except (ImportError, ValueError) as exc:
            raise ScenarioError(ep.name, "entry point", f"{origin}: cannot find module {module_name!r}: {exc}") from None
        if spec is None or spec.origin is None:
            raise ScenarioError(ep.name, "entry point", f"{origin}: no module {module_name!r} is installed")
        if spec.submodule_search_locations:     # a package: its directory's scenario files
            for directory in spec.submodule_search_locations:
                for src in _dir_sources(Path(directory), origin):
                    found.append(Source(src.file, f"{module_name}.{Path(src.file).stem}", origin))
        else:
            found.append(Source(str(Path(spec.origin).resolve()), module_name, origin))
    return found


def _package_path_extras() -> list[Path]:
    """Directories a site hook appended to the `scenarios` package's __path__ (how scenarios were kept outside
    the repository before scenario paths): still found, imported as scenarios.<name> as before."""
    package = sys.modules.get(_REPO_PACKAGE)
    if package is None or Path(str(getattr(package, "__file__", "") or "/")).resolve().parent != SCENARIO_DIR:
        return []
    return [Path(p).resolve() for p in getattr(package, "__path__", []) if Path(p).resolve() != SCENARIO_DIR]


def sources(paths: Sequence[Path] | None = None, *, entry_points: bool = True) -> list[Source]:
    """Every scenario file: the repository's, then `paths` (default: the configured ones), then entry points."""
    found = _dir_sources(SCENARIO_DIR, "the repository's scenarios/")
    seen = {s.file for s in found}
    for directory in _package_path_extras():   # the old way: a site hook extending the `scenarios` package
        for src in _dir_sources(directory, f"{directory} on the scenarios package's path (prefer --scenario-path)"):
            if src.file not in seen:
                found.append(Source(src.file, f"{_REPO_PACKAGE}.{Path(src.file).stem}", src.origin))
                seen.add(src.file)
    for directory in (env_paths() if paths is None else paths):
        for src in _dir_sources(Path(directory).resolve(), f"scenario path {directory}"):
            if src.file not in seen:
                found.append(src)
                seen.add(src.file)
    if entry_points:
        for src in _entry_point_sources():
            if src.file not in seen:
                found.append(src)
                seen.add(src.file)
    return found


# --------------------------------------------------------------------------------------------------- loading

def _private_name(file: Path) -> str:
    digest = hashlib.sha1(str(file.parent).encode()).hexdigest()[:10]
    return f"_gpu_memsafety_scenario_{digest}_{file.stem}"


def _add_to_path(directory: Path) -> None:
    """Make modules beside a scenario importable (first on sys.path, as pytest's rootdir-relative imports do:
    the harness itself lives under the one name `gpu_memsafety`, which a user's module cannot shadow by accident)."""
    entry = str(directory)
    if entry not in sys.path:
        sys.path.insert(0, entry)


def import_source(source: Source) -> ModuleType:
    file = Path(source.file)
    if source.module is not None:
        if source.module.startswith(f"{_REPO_PACKAGE}.") and file.parent != SCENARIO_DIR:
            _add_to_path(file.parent)   # a folder a site hook added to the package's path: modules beside it import too
        return importlib.import_module(source.module)
    name = _private_name(file)
    if name in sys.modules:
        return sys.modules[name]
    if not file.is_file():
        raise ScenarioError(file.stem, "file", f"scenario file {file} does not exist")
    _add_to_path(file.parent)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ScenarioError(file.stem, "file", f"cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_source(source: Source) -> Scenario:
    """Import a scenario file and return its SCENARIO, tagged with where it came from: first in a child process
    unless this run already did (vet), then here, under the same watch. Anything wrong (an exception, a
    sys.exit, a changed directory or environment, output on stdout, a process left running) is a ScenarioError
    naming the file, never a bare traceback, an exit, or a hang."""
    vet([source])
    return load_unvetted(source)


def vet(sources: Sequence[Source]) -> None:
    """Import every source from outside the harness that this run has not yet vetted, in one child process with
    a deadline (gpu_memsafety.scenario.vetting); a ScenarioError names every file with a problem and each
    problem. What a file wrote to stderr is shown as a warning."""
    from gpu_memsafety.scenario import vetting
    # The repository's own scenarios/ ship with the harness (its own code, as trusted as this file): only files
    # from elsewhere (scenario paths, entry points, a folder on the package's path) are vetted.
    verdicts = vetting.vet([s.to_json() for s in sources if Path(s.file).resolve().parent != SCENARIO_DIR])
    for verdict in verdicts:
        for text in verdict.warnings:
            warnings.warn(f"scenario file {verdict.file}: {text}", vetting.ScenarioImportWarning, stacklevel=3)
    bad = [v for v in verdicts if v.problems]
    if len(bad) == 1 and len(bad[0].problems) == 1:
        raise ScenarioError(Path(bad[0].file).stem, "file", bad[0].problems[0])
    if bad:
        raise ScenarioError(Path(bad[0].file).stem, "file", f"{len(bad)} scenario file(s) cannot be imported:\n"
                            + vetting.problem_text(bad))


def load_unvetted(source: Source) -> Scenario:
    """load_source without the child: the import runs here, under vetting.watch."""
    from gpu_memsafety.scenario import vetting
    effects = vetting.Effects()
    try:
        with vetting.watch(effects):
            module = import_source(source)
    except ScenarioError:
        raise
    except Exception as exc:  # noqa: BLE001 - any error in a user's file is reported with the file's name
        import traceback
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<frozen")]
        where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
        raise ScenarioError(Path(source.file).stem, "file", f"importing {source.file} failed: "
                            f"{type(exc).__name__}: {exc}{where}") from exc
    if effects.problems:
        raise ScenarioError(Path(source.file).stem, "file", f"importing {source.file}: {'; '.join(effects.problems)}")
    for text in effects.warnings:
        warnings.warn(f"scenario file {source.file}: {text}", vetting.ScenarioImportWarning, stacklevel=2)
    scenario = getattr(module, "SCENARIO", None)
    if not isinstance(scenario, Scenario):
        raise ScenarioError(Path(source.file).stem, "SCENARIO",
                            f"{source.file} defines no Scenario named SCENARIO (found {type(scenario).__name__})")
    scenario.bind_source(source)
    return scenario


def load(module_name: str) -> Scenario:
    """A scenario by importable module name (e.g. `gpu_memsafety.scenarios.planted_oob`)."""
    module = importlib.import_module(module_name)
    scenario = getattr(module, "SCENARIO", None)
    if not isinstance(scenario, Scenario):
        raise ScenarioError(module_name, "SCENARIO", "module defines no Scenario named SCENARIO")
    if scenario.source is None and getattr(module, "__file__", None):
        scenario.bind_source(Source(str(Path(module.__file__).resolve()), module_name, "import"))
    return scenario


_cache: dict[tuple[Any, ...], dict[str, Scenario]] = {}


def discover(paths: Sequence[Path] | None = None, *, entry_points: bool = True) -> dict[str, Scenario]:
    """name -> Scenario over every source; a name defined twice is an error naming both files."""
    key = (tuple(str(p) for p in (env_paths() if paths is None else paths)), entry_points)
    if key in _cache:
        return dict(_cache[key])
    found: dict[str, Scenario] = {}
    every = sources(paths, entry_points=entry_points)
    vet(every)            # all files in one child process: a file that hangs, exits or meddles is named first
    for source in every:
        scenario = load_unvetted(source)
        if scenario.name in found:
            first = found[scenario.name].source
            raise ScenarioError(scenario.name, "name", f"defined twice: in {first.file if first else '?'} and in "
                                f"{source.file}; rename one of them")
        found[scenario.name] = scenario
    _cache[key] = found
    return dict(found)


def all_scenarios() -> dict[str, Scenario]:
    return discover()


def scenario_modules() -> list[str]:
    """The repository's own scenario modules, by importable name."""
    return sorted(s.module for s in _dir_sources(SCENARIO_DIR, "") if s.module)


# What to do when a scenario is not found: where the harness looks for a user's own.
WHERE_TO_ADD = (f"a scenario of your own is found through --scenario-path DIR (the gpu-memsafety commands), "
                f"--gpu-memsafety-scenario-path DIR (pytest) or {INI_OPTION} in your pytest configuration")


def unknown_scenarios(names: Iterable[str], known: Iterable[str]) -> str:
    """'no scenario 'x'; known: a, b; a scenario of your own is found through --scenario-path ...'."""
    return f"no scenario {', '.join(map(repr, names))}; known: {', '.join(sorted(known))}; {WHERE_TO_ADD}"


def is_bundled(scenario: Scenario) -> bool:
    """One of the harness's own scenarios (its scenarios/ folder), not the user's: `list` prints the user's first."""
    return scenario.source is not None and Path(scenario.source.file).resolve().is_relative_to(SCENARIO_DIR.resolve())


def get(name: str) -> Scenario:
    scenarios = all_scenarios()
    if name not in scenarios:
        raise ScenarioError(name, "name", f"no such scenario; known: {', '.join(sorted(scenarios))}; {WHERE_TO_ADD}")
    return scenarios[name]


def case_job(scenario: Scenario, case: Case) -> dict[str, Any]:
    """A case as a worker job lists it: the case, and the file its scenario was found in (the worker imports
    that file, never a module guessed from the scenario's name)."""
    source = scenario.source
    return {**case.to_json(), "source": source.to_json() if source is not None else None}


def split_case_id(case_id: str) -> tuple[str, str | None]:
    """`planted_oob[overwrite-triton-n4000-x1]` -> ("planted_oob", "overwrite-triton-n4000-x1");
    a bare scenario name -> (name, None). Also accepts a pytest node id (`.../planted_oob.py::ID`)."""
    text = case_id.strip().rsplit("::", 1)[-1]
    if "[" not in text:
        return text, None
    if not text.endswith("]"):
        raise ScenarioError(text.split("[", 1)[0], "case id", f"{case_id!r} is not NAME[VARIANT-LABEL]")
    name, inner = text[:-1].split("[", 1)
    return name, inner


def find_case(case_id: str) -> tuple[Scenario, Case]:
    name, inner = split_case_id(case_id)
    scenario = get(name)
    if inner is None:
        raise ScenarioError(name, "case id", f"{case_id!r} names a scenario, not a case; ids look like "
                            f"{scenario.build()[0].id}")
    wanted = f"{name}[{inner}]"
    for case in scenario.build():
        if case.id == wanted:
            return scenario, case
    raise ScenarioError(scenario.name, "cases", f"no case with id {wanted}; `python -m gpu_memsafety list --scenario "
                        f"{name}` lists them")
