"""Scenarios from outside the repository (issue 16): discovery, the typed adapter API, case ids and the CLI.

Scenario directories are made in tmp_path, outside the repository, as a user would keep them: a scenario
file and the kernel module beside it, nothing else (no sitecustomize, no PYTHONPATH). Discovery is
checked in this process (harness/gpu_memsafety/scenario/registry.py) and through `python -m gpu_memsafety` in fresh processes; the
end-to-end runs (pytest, make sanitize, the generated scaffold) are in tests/cli/test_guide_example.py.
"""
from __future__ import annotations

import io
import os
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from gpu_memsafety.util.paths import CHECKOUT
from gpu_memsafety.scenario import registry
from gpu_memsafety.scenario.adapter import AdapterError, checked
from gpu_memsafety.scenario.definition import Case, Param, Scenario, ScenarioError, Variant

ROOT = CHECKOUT

SCENARIO_TEMPLATE = '''
from gpu_memsafety.api import Case, Expectation, Param, Scenario
import {kernel}

def run_case(case, ctx):
    return {kernel}.run(case, ctx)

SCENARIO = Scenario(
    name="{name}", summary="{summary}", adapter={adapter}, params=(Param("n", int, low=1),),
    variants=("a", "b"), cases=lambda: [Case("{name}", v, {{"n": n}}, f"n{{n}}", {tags}) for v in ("a", "b")
                                       for n in range(1, {count} + 1)],
    expect=lambda case: Expectation(), kernel=lambda case: "k", needs_gpu=lambda case: False)
'''

KERNEL = '''
VALUE = "{value}"
def run(case, ctx):
    raise RuntimeError("not run in these tests")
'''


def write_scenario(directory: Path, name: str, *, kernel: str | None = None, summary: str = "s",
                   adapter: str = "run_case", tags: str = '("smoke",)', count: int = 2, file: str | None = None,
                   package: str = "") -> Path:
    """A scenario file and its kernel module; in a `package`, the scenario imports the kernel as package.kernel."""
    directory.mkdir(parents=True, exist_ok=True)
    kernel = kernel or f"{name}_kernel"
    (directory / f"{kernel}.py").write_text(KERNEL.format(value=f"{name} from {directory}"))
    kernel = f"{package}.{kernel}" if package else kernel
    path = directory / (file or f"{name}.py")
    path.write_text(SCENARIO_TEMPLATE.format(name=name, kernel=kernel, summary=summary, adapter=adapter, tags=tags,
                                             count=count))
    return path


@pytest.fixture
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Scenario paths and sys.path changes of a test stay in the test."""
    monkeypatch.setenv(registry.ENV_VAR, "")       # recorded, so that undo removes what configure() sets
    monkeypatch.delenv(registry.ENV_VAR)
    monkeypatch.setattr(sys, "path", list(sys.path))
    registry._cache.clear()
    yield
    registry._cache.clear()


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTEST") and k not in ("PYTHONPATH", registry.ENV_VAR)}
    env.update(extra)
    return env


def harness_cli(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpu_memsafety", *args], cwd=str(cwd), env=env or clean_env(),
                          capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------------------------------------ discovery

def test_a_scenario_path_adds_its_scenarios_and_skips_modules_that_define_none(tmp_path: Path, isolated_registry: None) -> None:
    mine = tmp_path / "mine"
    file = write_scenario(mine, "ext_one", file="saved_under_another_name.py")
    registry.configure([mine])
    found = registry.all_scenarios()
    assert {"planted_oob", "ext_one"} <= set(found)
    assert found["ext_one"].source == registry.Source(str(file.resolve()), None, f"scenario path {mine.resolve()}")
    assert "ext_one_kernel" not in found       # the kernel module beside it is no scenario
    assert os.environ[registry.ENV_VAR] == str(mine.resolve())   # children see the same set


def test_the_kernel_module_beside_a_scenario_is_importable_without_pythonpath(tmp_path: Path, isolated_registry: None) -> None:
    write_scenario(tmp_path / "mine", "ext_beside", kernel="beside_kernel")
    registry.configure([tmp_path / "mine"])
    registry.get("ext_beside")
    import beside_kernel  # type: ignore[import-not-found]
    assert beside_kernel.VALUE.startswith("ext_beside from")
    assert str((tmp_path / "mine").resolve()) in sys.path


def test_a_string_adapter_naming_the_module_beside_the_scenario_resolves(tmp_path: Path, isolated_registry: None) -> None:
    write_scenario(tmp_path / "mine", "ext_string", kernel="string_kernel", adapter='"string_kernel:run"')
    registry.configure([tmp_path / "mine"])
    adapter = registry.get("ext_string").resolve_adapter()
    assert adapter.__module__ == "string_kernel" and adapter.__name__ == "run"


def test_a_name_defined_twice_is_an_error_naming_both_files(tmp_path: Path, isolated_registry: None) -> None:
    first = write_scenario(tmp_path / "one", "twice", kernel="twice_a")
    second = write_scenario(tmp_path / "two", "twice", kernel="twice_b")
    registry.configure([tmp_path / "one", tmp_path / "two"])
    with pytest.raises(ScenarioError, match="defined twice") as info:
        registry.all_scenarios()
    assert str(first.resolve()) in str(info.value) and str(second.resolve()) in str(info.value)


def test_a_repository_scenario_name_reused_outside_is_an_error_too(tmp_path: Path, isolated_registry: None) -> None:
    write_scenario(tmp_path / "mine", "planted_oob", kernel="planted_again")
    registry.configure([tmp_path / "mine"])
    with pytest.raises(ScenarioError, match=r"defined twice: in .*scenarios/planted_oob.py and in .*mine/planted_oob.py"):
        registry.all_scenarios()


@pytest.mark.parametrize("make, words", [
    (lambda d: d / "missing", "does not exist"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "no scenario in"),
    (lambda d: (d / "plain.py").write_text("X = 1\n") and d / "plain.py", "is not a scenario file"),
])
def test_a_bad_scenario_path_says_what_is_wrong(tmp_path: Path, isolated_registry: None, make: Any, words: str) -> None:
    registry.configure([make(tmp_path)])
    with pytest.raises(ScenarioError, match=words):
        registry.all_scenarios()


def test_an_import_error_in_a_scenario_file_names_the_file_and_line(tmp_path: Path, isolated_registry: None) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "broken.py").write_text("import not_a_module_anywhere\nSCENARIO = None\n")
    registry.configure([mine])
    with pytest.raises(ScenarioError, match=r"importing .*broken.py failed: ModuleNotFoundError: No module named "
                                            r"'not_a_module_anywhere' \(at .*broken.py:1\)"):
        registry.all_scenarios()


def test_a_file_whose_scenario_is_not_a_scenario_object_says_so(tmp_path: Path, isolated_registry: None) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notone.py").write_text("SCENARIO = {'name': 'x'}\n")
    registry.configure([mine])
    with pytest.raises(ScenarioError, match=r"notone.py defines no Scenario named SCENARIO \(found dict\)"):
        registry.all_scenarios()


@pytest.mark.parametrize("name, text", [
    ("pytest.toml", '[pytest]\ngpu_memsafety_scenario_paths = ["../gpu", "more"]\n'),
    ("pytest.ini", "[pytest]\ngpu_memsafety_scenario_paths = ../gpu more\n"),
    ("pyproject.toml", '[tool.pytest.ini_options]\ngpu_memsafety_scenario_paths = ["../gpu", "more"]\n'),
    ("tox.ini", "[pytest]\ngpu_memsafety_scenario_paths =\n    ../gpu\n    more\n"),
    ("setup.cfg", "[tool:pytest]\ngpu_memsafety_scenario_paths = ../gpu more\n"),
])
def test_ini_scenario_paths_are_read_from_the_users_config_relative_to_it(tmp_path: Path, name: str, text: str) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / name).write_text(text)
    inifile, paths = registry.pytest_config(project / "sub")
    assert inifile == project / name
    assert paths == [(tmp_path / "gpu").resolve(), (project / "more").resolve()]
    assert registry.pytest_config(tmp_path, str(project / name)) == (inifile, paths)    # --config FILE


def test_a_pyproject_without_a_pytest_table_names_no_scenarios(tmp_path: Path) -> None:
    """pytest may take such a file as its rootdir's (pytest 8.1+, when it finds nothing else); it names no scenario
    paths, and a pytest.ini above it is what pytest reads, as pytest does."""
    (tmp_path / "proj" / "a").mkdir(parents=True)
    (tmp_path / "proj" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert registry.pytest_config(tmp_path / "proj" / "a")[1] == []
    (tmp_path / "pytest.ini").write_text("[pytest]\ngpu_memsafety_scenario_paths = gpu\n")
    assert registry.pytest_config(tmp_path / "proj" / "a") == (tmp_path / "pytest.ini", [(tmp_path / "gpu").resolve()])


@pytest.mark.e2e
def test_the_cli_reads_a_pytest_toml_as_pytest_does(tmp_path: Path) -> None:
    """pytest 9's pytest.toml: found from the current directory, and read as TOML when named with --config
    (it was read as INI: ["gpu"] became the directory '["gpu"]')."""
    write_scenario(tmp_path / "gpu", "from_toml")
    (tmp_path / "pytest.toml").write_text('[pytest]\ngpu_memsafety_scenario_paths = ["gpu"]\n')
    (tmp_path / "sub").mkdir()
    for args, cwd in ((["list"], tmp_path / "sub"), (["--config", str(tmp_path / "pytest.toml"), "list"], ROOT)):
        proc = harness_cli(*args, "--scenario", "from_toml", "--ids", cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["from_toml[a-n1]", "from_toml[a-n2]", "from_toml[b-n1]", "from_toml[b-n2]"]


def test_entry_point_scenarios_of_an_installed_package_are_found(tmp_path: Path, isolated_registry: None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    write_scenario(site / "gpu_pkg", "ep_pkg_one", kernel="ep_kernel_one", package="gpu_pkg")
    (site / "gpu_pkg" / "__init__.py").write_text("")
    write_scenario(site, "ep_single", kernel="ep_kernel_two", file="ep_module.py")
    dist = site / "gpu_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gpu-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\npkg = gpu_pkg\nsingle = ep_module\n")
    monkeypatch.syspath_prepend(str(site))
    found = registry.all_scenarios()
    assert found["ep_pkg_one"].source.module == "gpu_pkg.ep_pkg_one"
    assert found["ep_single"].source.module == "ep_module"
    assert found["ep_single"].source.origin == "entry point single = ep_module"


def test_entry_point_naming_a_missing_module_is_an_error(tmp_path: Path, isolated_registry: None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    dist = tmp_path / "ghost-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ghost\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\nghost = no_such_module_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ScenarioError, match="no module 'no_such_module_here' is installed"):
        registry.all_scenarios()


def test_the_worker_imports_the_scenario_from_its_file_not_by_name(tmp_path: Path, isolated_registry: None) -> None:
    """Two directories, each with a scenario file called `same.py`: the worker's import follows the file."""
    write_scenario(tmp_path / "one", "first_same", kernel="k_one", file="same.py")
    write_scenario(tmp_path / "two", "second_same", kernel="k_two", file="same.py")
    from gpu_memsafety.job import JobCase
    from gpu_memsafety.engine.worker import _scenario_of
    for name, directory in (("first_same", "one"), ("second_same", "two")):
        source = registry.Source(str((tmp_path / directory / "same.py").resolve()))
        entry = JobCase.from_json({"scenario": "whatever", "variant": "v", "params": {}, "label": "x",
                                   "source": source.to_json()})
        assert _scenario_of(entry).name == name


# ---------------------------------------------------------------------------------------------- case ids

@pytest.mark.parametrize("text, expected", [
    ("planted_oob[overwrite-triton-n4000-x1]", ("planted_oob", "overwrite-triton-n4000-x1")),
    ("scenarios/planted_oob.py::planted_oob[overwrite-triton-n4000-x1]", ("planted_oob", "overwrite-triton-n4000-x1")),
    ("planted_oob", ("planted_oob", None)),
])
def test_one_case_id_scheme_with_pytest_node_ids_accepted(text: str, expected: tuple[str, str | None]) -> None:
    assert registry.split_case_id(text) == expected


def test_a_case_id_without_its_closing_bracket_is_an_error() -> None:
    with pytest.raises(ScenarioError, match="is not NAME"):
        registry.split_case_id("planted_oob[overwrite")


def test_find_case_by_a_node_id() -> None:
    scenario, case = registry.find_case("scenarios/planted_oob.py::planted_oob[overwrite-triton-n4000-x1]")
    assert (scenario.name, case.variant) == ("planted_oob", "overwrite")


# ------------------------------------------------------------------------------------------- adapter API

def _scenario(**overrides: Any) -> Scenario:
    fields: dict[str, Any] = dict(
        name="typed", summary="typed", adapter=lambda case, ctx: None, params=(Param("n", int),),
        variants=("a",), cases=lambda: [Case("typed", "a", {"n": 1}, "n1")], expect=lambda case: None,
        kernel=lambda case: "k", needs_gpu=lambda case: False)
    fields.update(overrides)
    return Scenario(**fields)


@pytest.mark.e2e
def test_a_scenario_takes_the_adapter_callable_itself() -> None:
    def run_case(case: Case, ctx: Any) -> Any:
        return "ran"
    scenario = _scenario(adapter=run_case)
    assert scenario.resolve_adapter() is run_case


@pytest.mark.parametrize("adapter, words", [
    ("gpu_memsafety.kernels.planted", "is not 'module:function'; better, give the adapter function itself"),
    (42, "expected the adapter function"),
])
def test_a_bad_adapter_says_what_to_write(adapter: Any, words: str) -> None:
    with pytest.raises(ScenarioError, match=words):
        _scenario(adapter=adapter)


def test_a_string_adapter_whose_module_is_missing_says_what_to_change() -> None:
    with pytest.raises(ScenarioError, match=r"cannot import 'no_such_kernels'.*give the adapter function itself"):
        _scenario(adapter="no_such_kernels:run").resolve_adapter()
    with pytest.raises(ScenarioError, match=r"module gpu_memsafety.placement.layout has no function 'nope'"):
        _scenario(adapter="gpu_memsafety.placement.layout:nope").resolve_adapter()


def test_an_adapter_that_returns_no_runinfo_is_told_what_to_return() -> None:
    def forgetful(case: Any, ctx: Any) -> None:
        return None
    with pytest.raises(AdapterError, match=r"adapter .*forgetful returned NoneType; it must return gpu_memsafety.api.RunInfo"):
        checked(forgetful, "typed")(None, None)
    from gpu_memsafety.api import RunInfo
    info = RunInfo(kernel="k")
    assert checked(lambda case, ctx: info, "typed")(None, None) is info


def test_one_unsupported_and_one_not_applicable_for_the_engine_the_api_and_the_kernels() -> None:
    import gpu_memsafety.api
    import gpu_memsafety.errors
    import gpu_memsafety.util.build_errors
    from gpu_memsafety.engine.worker import classify
    assert gpu_memsafety.api.Unsupported is gpu_memsafety.errors.Unsupported
    assert not hasattr(gpu_memsafety.util.build_errors, "NotApplicable")     # no second class of that name
    assert issubclass(gpu_memsafety.util.build_errors.ToolchainMissing, gpu_memsafety.errors.Unsupported)
    assert classify(gpu_memsafety.util.build_errors.ToolchainMissing("x")) == classify(gpu_memsafety.api.Unsupported("x")) \
        == "unsupported"
    assert classify(gpu_memsafety.errors.NotApplicable("x")) == "not_applicable"

    class NotApplicable(Exception):
        """Same name, not the engine's class: an error like any other."""
    assert classify(NotApplicable("x")) == "error"


def test_variants_get_typed_fields_and_names_stay_strings() -> None:
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Pad(Variant):
        padded: bool = False

    scenario = _scenario(variants=(Pad("unpadded"), Pad("padded", padded=True)),
                         cases=lambda: [Case("typed", Pad("padded", padded=True), {"n": 1}, "n1")])
    assert scenario.variants == ("unpadded", "padded")
    [case] = scenario.build()
    assert case.variant == "padded" and case.id == "typed[padded-n1]"
    assert scenario.variant(case).padded is True and scenario.variant("unpadded").padded is False
    with pytest.raises(ScenarioError, match="'other' is not one of"):
        scenario.variant("other")


@pytest.mark.parametrize("variants, words", [
    (("a", "a"), "defined twice"),
    (("a b",), "is not a variant name"),
    ("ab", "expected a tuple of variants"),
])
def test_bad_variants_are_named(variants: Any, words: str) -> None:
    with pytest.raises(ScenarioError, match=words):
        _scenario(variants=variants)


@pytest.mark.e2e
def test_api_exports_what_a_scenario_needs_without_importing_torch() -> None:
    code = ("import sys, gpu_memsafety.api as a; assert 'torch' not in sys.modules, 'gpu_memsafety.api imported torch'; "
            "print(sorted(n for n in a.__all__))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), env=clean_env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for name in ("Scenario", "Case", "Param", "Variant", "RunContext", "RunInfo", "Unsupported", "Adapter",
                 "Expectation", "ExpectedFinding"):
        assert name in proc.stdout


# --------------------------------------------------------------------------------------------------- CLI

@pytest.mark.e2e
@pytest.mark.parametrize("command", ["list", "repro", "new", "merge", "bench", "env"])
def test_every_subcommand_prints_help(command: str) -> None:
    proc = harness_cli(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: gpu-memsafety {command}"), proc.stdout[:300]


@pytest.mark.e2e
def test_list_filters_by_scenario_tag_and_variant() -> None:
    proc = harness_cli("list", "--ids", "--scenario", "planted_oob", "--tag", "smoke", "--variant", "overwrite")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["planted_oob[overwrite-triton-n4000-x1]", "planted_oob[overwrite-cuda-n4000-x1]"]
    nothing = harness_cli("list", "--tag", "no-such-tag")
    assert nothing.returncode == 1 and "no case matches --tag no-such-tag" in nothing.stderr
    unknown = harness_cli("list", "--scenario", "nope")
    assert unknown.returncode == 2 and "no scenario 'nope'" in unknown.stderr and "planted_oob" in unknown.stderr


@pytest.mark.e2e
def test_list_sees_a_scenario_path_before_or_after_the_command(tmp_path: Path) -> None:
    write_scenario(tmp_path / "mine", "cli_listed")
    for args in (["list", "--scenario-path", str(tmp_path / "mine")], ["--scenario-path", str(tmp_path / "mine"), "list"]):
        proc = harness_cli(*args, "--scenario", "cli_listed", "--ids")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["cli_listed[a-n1]", "cli_listed[a-n2]", "cli_listed[b-n1]", "cli_listed[b-n2]"]


@pytest.mark.e2e
def test_list_reads_scenario_paths_from_the_users_pytest_config(tmp_path: Path) -> None:
    write_scenario(tmp_path / "gpu", "from_ini")
    (tmp_path / "pytest.ini").write_text("[pytest]\ngpu_memsafety_scenario_paths = gpu\n")
    proc = harness_cli("--config", str(tmp_path / "pytest.ini"), "list", "--scenario", "from_ini", "--ids")
    assert proc.returncode == 0 and proc.stdout.split()[0] == "from_ini[a-n1]", proc.stderr


@pytest.mark.e2e
def test_list_reports_a_duplicate_name_as_an_error_naming_both_files(tmp_path: Path) -> None:
    one = write_scenario(tmp_path / "one", "dup_cli", kernel="dup_a")
    two = write_scenario(tmp_path / "two", "dup_cli", kernel="dup_b")
    proc = harness_cli("list", "--scenario-path", str(tmp_path / "one"), "--scenario-path", str(tmp_path / "two"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert str(one.resolve()) in proc.stderr and str(two.resolve()) in proc.stderr


@pytest.mark.e2e
def test_list_piped_into_head_ends_quietly(tmp_path: Path) -> None:
    """More output than a pipe holds, and a reader that leaves after one line: no BrokenPipe traceback."""
    write_scenario(tmp_path / "many", "many_cases", count=3000, summary="x" * 50)
    proc = subprocess.Popen([sys.executable, "-m", "gpu_memsafety", "list", "--scenario-path", str(tmp_path / "many")],
                            cwd=str(ROOT), env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert first and "Traceback" not in err and "BrokenPipe" not in err, err
    assert code == 0


def test_list_in_process_survives_a_closed_stdout(monkeypatch: pytest.MonkeyPatch, isolated_registry: None) -> None:
    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr(sys, "stdout", Closed())
    from gpu_memsafety.cli.main import main
    assert main(["list"]) == 0


@pytest.mark.e2e
def test_unknown_command_is_a_usage_error() -> None:
    proc = harness_cli("frobnicate")
    assert proc.returncode == 2 and "invalid choice: 'frobnicate'" in proc.stderr


@pytest.mark.e2e
def test_new_refuses_to_overwrite_and_to_reuse_a_name(tmp_path: Path) -> None:
    proc = harness_cli("new", "planted_oob", "--path", str(tmp_path / "x"))
    assert proc.returncode == 2 and "exists already" in proc.stderr and "Traceback" not in proc.stderr
    assert harness_cli("new", "fresh_one", "--path", str(tmp_path / "y")).returncode == 0
    again = harness_cli("new", "fresh_one", "--path", str(tmp_path / "y"))
    assert again.returncode == 2 and "--force" in again.stderr
    bad = harness_cli("new", "Bad-Name", "--path", str(tmp_path / "z"))
    assert bad.returncode == 2 and "lower_snake_case" in bad.stderr


@pytest.mark.e2e
def test_new_cuda_scaffold_loads_and_is_unsupported_without_a_gpu(tmp_path: Path) -> None:
    assert harness_cli("new", "cuda_scaffold", "--cuda", "--path", str(tmp_path / "c")).returncode == 0
    listed = harness_cli("list", "--scenario-path", str(tmp_path / "c"), "--scenario", "cuda_scaffold", "--ids")
    assert listed.returncode == 0, listed.stderr
    assert "cuda_scaffold[buggy-n1000]" in listed.stdout.split()
    text = (tmp_path / "c" / "cuda_scaffold_kernel.py").read_text()
    assert "load_inline" in text and "Unsupported" in text
    compile(text, "cuda_scaffold_kernel.py", "exec")
    compile((tmp_path / "c" / "test_cuda_scaffold.py").read_text(), "test_cuda_scaffold.py", "exec")


@pytest.mark.e2e
def test_a_scenario_added_the_old_way_through_a_site_hook_is_still_found(tmp_path: Path) -> None:
    """Before scenario paths, a sitecustomize appended a directory to the `scenarios` package's path."""
    old = tmp_path / "old_style"
    write_scenario(old, "old_style_scenario", adapter='"old_style_scenario_kernel:run"')
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(f"import gpu_memsafety.scenarios as s\ns.__path__.append({str(old)!r})\n")
    env = clean_env(PYTHONPATH=os.pathsep.join([str(ROOT), str(hook)]))
    proc = harness_cli("list", "--scenario", "old_style_scenario", "--ids", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "old_style_scenario[a-n1]"


def test_last_expert_variants_are_typed_and_agree_with_the_cases() -> None:
    scenario = registry.get("last_expert_oob_read")
    for case in scenario.build():
        v = scenario.variant(case)
        assert case.params["pad"] == v.pad
        assert scenario.isolated(case) is v.batched
        assert ("batched" in case.tags) is v.batched
        unattributed = [f for f in scenario.expect(case).findings if f.buffer == "unattributed"]
        assert bool(unattributed) is (v.batched and not v.split_k1)


def test_no_scenario_or_kernel_parses_variant_names() -> None:
    """Variants carry typed fields (gpu_memsafety.scenario.definition.Variant); nothing slices or searches a variant's name."""
    import re
    pattern = re.compile(r"variant\.(startswith|endswith|split|partition)\(|\bin case\.variant\b|case\.variant\[")
    files = [*ROOT.glob("scenarios/*.py"), *ROOT.glob("kernels/**/*.py"), *(ROOT / "docs" / "example").glob("*.py")]
    offenders = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in files
                 for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not offenders, "\n".join(offenders)


@pytest.mark.e2e
def test_pytest_and_the_cli_see_an_installed_packages_entry_point_scenarios(tmp_path: Path) -> None:
    """A package installed elsewhere (here: a site directory with its dist-info) declares its scenarios in the
    gpu_memsafety.scenarios group: `pytest scenarios` and `python -m gpu_memsafety list` both see them."""
    site = tmp_path / "site"
    write_scenario(site / "gpu_pkg_cli", "ep_cli", kernel="ep_cli_kernel", package="gpu_pkg_cli")
    (site / "gpu_pkg_cli" / "__init__.py").write_text("")
    dist = site / "gpu_pkg_cli-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gpu-pkg-cli\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\npkg = gpu_pkg_cli\n")
    env = clean_env(PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]))
    listed = harness_cli("list", "--scenario", "ep_cli", "--ids", env=env)
    assert listed.returncode == 0 and listed.stdout.split()[0] == "ep_cli[a-n1]", listed.stderr
    collected = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "--collect-only",
                                "-q", "--gpu-memsafety-scenario", "ep_cli"], cwd=str(ROOT), env=env, capture_output=True, text=True,
                               timeout=120)
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    assert f"{(site / 'gpu_pkg_cli' / 'ep_cli.py').resolve()}::ep_cli[a-n1]" in collected.stdout


CPU_SCENARIO = '''
import torch
from gpu_memsafety.api import Case, Expectation, Param, RunInfo, Scenario

def run_case(case, ctx):
    out = ctx.tensor("out", (case.params["n"],), torch.float32, watch=True)
    out.fill_(1.0)
    return RunInfo(kernel="fill", outputs={"out": out})

SCENARIO = Scenario(
    name="mine", summary="a CPU fill", adapter=run_case, params=(Param("n", int, low=1),), variants=("a",),
    cases=lambda: [Case("mine", "a", {"n": n}, f"n{n}") for n in (10, 20, 30)],
    expect=lambda case: Expectation(), kernel=lambda case: "fill", needs_gpu=lambda case: False)
'''


@pytest.mark.e2e
def test_workers_that_pick_another_rootdir_still_report_every_case(tmp_path: Path) -> None:
    """A CPU held-out run (session 8): in a repository with no pytest config file, `-n 2` with a new
    `--gpu-memsafety-report-dir` outside it wrote a report with no cases. The controller creates the report folder before the
    workers parse the command line; pytest counts that existing folder as a path when it picks the rootdir, so the
    workers named every case relative to another rootdir and the controller took none of their results as its own."""
    repo = tmp_path / "repo"
    (repo / "scenarios").mkdir(parents=True)
    (repo / "scenarios" / "mine.py").write_text(CPU_SCENARIO)
    reports = tmp_path / "out" / "reports"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--gpu-memsafety-scenario-path", "scenarios",
                           "--gpu-memsafety-report-dir", str(reports), "-q", "-n", "2"], cwd=str(repo), env=clean_env(),
                          capture_output=True, text=True, timeout=300)
    doc = json.loads((reports / "report.json").read_text())
    assert sorted(c["id"] for c in doc["cases"]) == ["mine[a-n10]", "mine[a-n20]", "mine[a-n30]"], proc.stdout[-3000:]
    assert doc["summary"]["status"] != "interrupted" and proc.returncode in (0, 5), proc.stdout[-3000:]
