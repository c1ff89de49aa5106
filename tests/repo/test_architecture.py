"""The code's structure, checked from its source: what a reader relies on when they open the repository.

- No module over MAX_LINES lines (the issue's "about 500", with room for a docstring's growth): a file that
  grows past it holds more than one job and is split by job, not trimmed.
- No import cycle among gpu_memsafety's modules, counting the imports inside functions too (a cycle hidden
  in a function is still a cycle: two modules that cannot be understood, tested or moved apart).
- The pure modules (the ones tested on CPU from recorded output, and the ones every pytest run or parent
  process imports) load no GPU stack (torch, triton, CUDA bindings), neither themselves nor through what
  they import at module level; checked statically (which import pulls it in) and by importing them.
- Every name of the public API (gpu_memsafety.api) is defined in one module only.
- The packages form layers (docs/architecture.md, "Layers", read from there): no module imports from a layer
  above its own, counting imports inside functions and under `if TYPE_CHECKING:` (a typing import up the stack
  is still a dependency a reader must follow).
- The host path (a pytest suite's tests) and the scenario path share one definition each of the guard-page
  finding, the guard-page rerun planner and the placing of an address on an allocation.
- The plugin is a face: fixtures/ holds its hooks, options and the fixtures users call; no module there plans
  batches, supervises children or assembles evidence (the engines in gpu_memsafety.plugin do, behind their doors).

The import graph is read from the AST of the checkout's folders as the distribution maps them
(pyproject.toml's package-dir: harness/gpu_memsafety/ -> gpu_memsafety, ...), so the test needs no GPU and imports nothing it
checks except in the one subprocess that confirms the static answer. Imports under `if TYPE_CHECKING:` are
left out of the cycle and GPU-stack checks (they never run), and counted by the layer check. A module named as a string to `importlib.import_module` counts as imported.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from repo_paths import ROOT


# pyproject.toml's [tool.setuptools.package-dir]; test_packaging checks that this is the mapping there.
MAPPED = {"gpu_memsafety": "harness/gpu_memsafety", "gpu_memsafety.fixtures": "fixtures", "gpu_memsafety.kernels": "kernels",
          "gpu_memsafety.scenarios": "scenarios"}
SIZED = ("harness", "fixtures", "kernels")
MAX_LINES = 600
# Modules over MAX_LINES for now, each with the work that splits it. An entry whose module has come under the
# limit fails the test too, so the list only shrinks.
OVERSIZE: dict[str, str] = {
}
GPU_STACK = ("torch", "triton", "cuda")
# Pure: no GPU stack at import. A package with every module in it ends with a dot.
PURE = (
    "gpu_memsafety", "gpu_memsafety.api", "gpu_memsafety.errors", "gpu_memsafety.model",
    "gpu_memsafety.judge.", "gpu_memsafety.report.", "gpu_memsafety.util.",
    "gpu_memsafety.sanitizer.parse.", "gpu_memsafety.sanitizer.attribute", "gpu_memsafety.sanitizer.tool",
    "gpu_memsafety.placement.layout", "gpu_memsafety.detectors.modes", "gpu_memsafety.job",
    "gpu_memsafety.sanitizer.hazards", "gpu_memsafety.detectors.hazards", "gpu_memsafety.detectors.poison", "gpu_memsafety.detectors.pageprobe",
    "gpu_memsafety.detectors.base", "gpu_memsafety.detectors.registry", "gpu_memsafety.detectors.guard",
    "gpu_memsafety.detectors.memcheck", "gpu_memsafety.detectors.guard_page", "gpu_memsafety.detectors.uninit",
    "gpu_memsafety.sanitizer.records", "gpu_memsafety.detectors.actions", "gpu_memsafety.cover",
    "gpu_memsafety.scenario.definition", "gpu_memsafety.scenario.registry", "gpu_memsafety.scenario.adapter",
    "gpu_memsafety.fixtures.plugin", "gpu_memsafety.fixtures.options",
    "gpu_memsafety.plugin.face", "gpu_memsafety.plugin.settings", "gpu_memsafety.plugin.scenario.discovery",
    "gpu_memsafety.plugin.scenario.controller", "gpu_memsafety.plugin.scenario.shards",
    "gpu_memsafety.cli.bench.results",
)


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    tree: ast.Module

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


def _modules() -> dict[str, Module]:
    found = {}
    for package, folder in MAPPED.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if "__pycache__" in parts or any(p.startswith(".") for p in parts):
                continue
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            found[name] = Module(name, path, ast.parse(path.read_text(), str(path)))
    return found


MODULES = _modules()


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(module: Module, *, top_level_only: bool, type_checking: bool = False) -> list[tuple[str, int]]:
    """(imported module, line) for each import statement; `from P import n` names P.n when that is a module.
    `type_checking`: the imports under `if TYPE_CHECKING:` count too."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child) and not type_checking:
                continue
            if top_level_only and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                out.extend((a.name, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = _absolute(module, child)
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    out.append((sub if sub in MODULES else base, child.lineno))
            elif not top_level_only and isinstance(child, ast.Call) and _calls_import_module(child):
                out.extend((a.value, child.lineno) for a in child.args if isinstance(a, ast.Constant)
                           and isinstance(a.value, str))
            visit(child)
    visit(module.tree)
    if not top_level_only:
        out.extend(_named_for_import_module(module))
    return out


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.name if module.is_package else module.name.rpartition(".")[0]
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{node.module}" if node.module else base


def _calls_import_module(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or \
        (isinstance(func, ast.Name) and func.id == "import_module")


def _named_for_import_module(module: Module) -> list[tuple[str, int]]:
    """In a function that calls import_module, every string constant that names one of our modules."""
    out = []
    for func in ast.walk(module.tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(n, ast.Call) and _calls_import_module(n) for n in ast.walk(func)):
            out += [(n.value, n.lineno) for n in ast.walk(func)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in MODULES]
    return out


def _graph(*, top_level_only: bool, type_checking: bool = False) -> dict[str, dict[str, int]]:
    return {name: {target: line for target, line in reversed(_imports(m, top_level_only=top_level_only,
                                                                       type_checking=type_checking))}
            for name, m in MODULES.items()}


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(t for t in graph[root] if t in graph))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(t for t in graph[target] if t in graph)))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _pure(name: str) -> bool:
    return any(name == p or (p.endswith(".") and (name == p[:-1] or name.startswith(p))) for p in PURE)


def _chain_to_gpu_stack(start: str, graph: dict[str, dict[str, int]]) -> list[str] | None:
    """The import chain (module:line -> ...) by which importing `start` loads the GPU stack, or None.
    Importing a module runs its parent packages' __init__ first, so those count as imported too."""
    seen = {start}
    queue: list[tuple[str, list[str]]] = [(start, [start])]
    while queue:
        node, path = queue.pop(0)
        targets = dict(graph[node])
        parent = node.rpartition(".")[0]
        if parent in MODULES:
            targets.setdefault(parent, 0)
        for target, line in targets.items():
            step = [*path[:-1], f"{path[-1]}:{line}", target]
            if target.split(".")[0] in GPU_STACK:
                return step
            for candidate in (target, target.rpartition(".")[0]):
                if candidate in MODULES and candidate not in seen:
                    seen.add(candidate)
                    queue.append((candidate, step))
    return None


def _defined_names(module: Module) -> set[str]:
    names: set[str] = set()
    for node in module.tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _layers(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """The layer table of docs/architecture.md: the indented block after "## Layers", one `NAME unit unit ...`
    line per layer, lowest first; a unit is a package directly under gpu_memsafety or a module at its top
    ("gpu_memsafety": the package's own __init__)."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split() for line in section.splitlines() if line.startswith("    ") and line.strip()]
    assert rows, "docs/architecture.md: the Layers section has no indented table"
    return [(row[0], tuple(row[1:])) for row in rows]


LAYERS = _layers((ROOT / "docs" / "architecture.md").read_text())


def _full(unit: str) -> str:
    return unit if unit == "gpu_memsafety" else f"gpu_memsafety.{unit}"


def _unit(name: str) -> str:
    """The package a module is in, as the layer table lists it: gpu_memsafety.X for gpu_memsafety.X and everything
    under it (a top-level module is a unit of its own); the root package's __init__ is "gpu_memsafety"."""
    return ".".join(name.split(".")[:2])


def _layer_of(name: str, layers: list[tuple[str, tuple[str, ...]]]) -> int | None:
    """The index of the layer that lists the module's package (_unit); None when no layer does."""
    unit = _unit(name)
    return next((index for index, (_, units) in enumerate(layers) if unit in map(_full, units)), None)


# Dynamic imports the layers allow upward, each a load the code makes by design of what it cannot know in advance:
# the module and why. Every other module's dynamic import (a module named in a module-level constant, a
# "module:function" string, a string handed to import_module) counts as an import and follows the layers.
DYNAMIC_LOADS = {
    "gpu_memsafety.scenario.registry": "scenario discovery: the built-in scenarios package, scenario paths and entry points",
    "gpu_memsafety.scenario.definition": "adapters: a scenario's `adapter` names its 'module:function'",
}
_MODULE_FUNCTION = re.compile(r"(gpu_memsafety(?:\.\w+)+):\w+")


def _ours(text: str) -> str | None:
    """The module (or package) of ours a string names, whole, as `pkg.module` or `pkg.module:function`; else None."""
    match = _MODULE_FUNCTION.fullmatch(text)
    name = match.group(1) if match else text
    return name if name in MODULES else None


def _dynamic(module: Module) -> list[tuple[str, int]]:
    """(module, line) for each module of ours this one names for a dynamic import: a string of a module-level
    constant (in tuples, lists, sets and dicts too) that names one, and a "module:function" string anywhere."""
    out: list[tuple[str, int]] = []
    for node in module.tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            out += [(name, c.lineno) for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                    and isinstance(c.value, str) and (name := _ours(c.value))]
    out += [(match.group(1), c.lineno) for c in ast.walk(module.tree) if isinstance(c, ast.Constant)
            and isinstance(c.value, str) and (match := _MODULE_FUNCTION.fullmatch(c.value)) and match.group(1) in MODULES]
    return out


def _edges(modules: dict[str, Module]) -> list[tuple[str, str, str, bool]]:
    """Every import of one of our modules by another (functions and TYPE_CHECKING blocks too) and every dynamic
    one: (importer, imported, path:line, dynamic)."""
    found = []
    for name, module in modules.items():
        where = module.path.relative_to(ROOT) if module.path.is_absolute() else module.path
        static = [(t, line, False) for t, line in _imports(module, top_level_only=False, type_checking=True)]
        for target, line, dynamic in static + [(t, line, True) for t, line in _dynamic(module)]:
            if target.startswith("gpu_memsafety") and target != name:
                found.append((name, target, f"{where}:{line}", dynamic))
    return found


def _upward(modules: dict[str, Module], layers: list[tuple[str, tuple[str, ...]]]) -> list[str]:
    """Each import (anywhere in a module, dynamic ones too but the declared loads) of a module in a layer above
    the importer's, as `importer (layer) -> imported (layer) at path:line`."""
    found = []
    for name, target, where, dynamic in _edges(modules):
        own, theirs = _layer_of(name, layers), _layer_of(target, layers)
        if dynamic and name in DYNAMIC_LOADS:
            continue
        if own is not None and theirs is not None and theirs > own:
            found.append(f"{name} ({layers[own][0]}) -> {target} ({layers[theirs][0]}){' dynamic' if dynamic else ''}"
                         f" at {where}")
    return sorted(found)


def _package_graph(modules: dict[str, Module]) -> dict[str, dict[str, int]]:
    """Package -> the packages it imports (dynamic imports included, the declared loads left out)."""
    graph: dict[str, dict[str, int]] = {_unit(name): {} for name in modules}
    for name, target, _, dynamic in _edges(modules):
        if _unit(target) != _unit(name) and not (dynamic and name in DYNAMIC_LOADS):
            graph[_unit(name)].setdefault(_unit(target), 0)
    return graph


def _api_names() -> list[str]:
    for node in MODULES["gpu_memsafety.api"].tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError("gpu_memsafety.api has no __all__")


# ------------------------------------------------------------------------------------------------ tests

def test_the_source_tree_is_found() -> None:
    """Guards the tests below against passing on an empty tree (a moved folder, a wrong ROOT)."""
    for package in ("gpu_memsafety.api", "gpu_memsafety.fixtures.plugin", "gpu_memsafety.util.cuda_build",
                    "gpu_memsafety.scenarios.planted_oob"):
        assert package in MODULES, f"{package} not found under {ROOT}"
    graph = _graph(top_level_only=False)
    assert sum(len(t) for t in graph.values()) > 200


def test_no_module_is_over_the_line_limit() -> None:
    sizes = {str(m.path.relative_to(ROOT)): len(m.path.read_text().splitlines()) for m in MODULES.values()
             if m.path.relative_to(ROOT).parts[0] in SIZED}
    over = {path: n for path, n in sizes.items() if n > MAX_LINES and path not in OVERSIZE}
    assert not over, f"over {MAX_LINES} lines (split by job): {over}"
    healed = [path for path in OVERSIZE if sizes.get(path, 0) <= MAX_LINES]
    assert not healed, f"no longer over {MAX_LINES} lines (or gone): remove from OVERSIZE: {healed}"


def test_no_import_cycle() -> None:
    """Not even through an import for the type checker: two modules that name each other's types are one module to a
    reader (a Protocol in the lower one says what it needs of the upper one: detectors/base.SanitizerView,
    engine/staged.Parent)."""
    graph = _graph(top_level_only=False, type_checking=True)
    cycles = _cycles(graph)
    described = [" <-> ".join(f"{a} ({a}:{graph[a].get(b, '?')} imports {b})" for a, b in zip(c, c[1:] + c[:1])
                              if b in graph[a]) or " ".join(c) for c in cycles]
    assert not cycles, "import cycles:\n" + "\n".join(described)


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above can fail: a three-module loop and a two-module loop are both found, a chain is not."""
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"e": 1}, "e": {"d": 1}, "f": {"a": 1}}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {}}) == []


def test_pure_modules_load_no_gpu_stack_statically() -> None:
    pure = [name for name in MODULES if _pure(name)]
    assert len(pure) > 20, pure
    graph = _graph(top_level_only=True)
    chains = {name: chain for name in pure if (chain := _chain_to_gpu_stack(name, graph))}
    assert not chains, "pure modules that load the GPU stack at import:\n" + "\n".join(
        " -> ".join(chain) for chain in chains.values())


def test_the_gpu_stack_finder_sees_an_indirect_import() -> None:
    graph = {"gpu_memsafety.api": {"gpu_memsafety.model": 3}, "gpu_memsafety.model": {"torch.cuda": 9}}
    assert _chain_to_gpu_stack("gpu_memsafety.api", graph) == [
        "gpu_memsafety.api:3", "gpu_memsafety.model:9", "torch.cuda"]


@pytest.mark.e2e
def test_pure_modules_load_no_gpu_stack_when_imported() -> None:
    """The static answer confirmed by the interpreter: one fresh process imports every pure module. What the
    interpreter loaded before them is not theirs: cuda-bindings installs a .pth file that imports `cuda` at every
    start-up (seen in a fresh Python 3.12 venv with PyPI's torch)."""
    pure = [name for name in MODULES if _pure(name)]
    code = ("import importlib, json, sys\n"
            "before = set(sys.modules)\n"
            f"for name in {pure!r}: importlib.import_module(name)\n"
            f"print(json.dumps(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in {GPU_STACK!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == []


def _engine(module: Module) -> bool:
    """The harness itself: harness/ and fixtures/. kernels/, scenarios/ and the guide's example (cli/example/)
    are written the way a user writes them, against the API, and may define any name (every adapter module
    defines its `run_case(case, ctx)`)."""
    rel = module.path.relative_to(ROOT)
    return rel.parts[0] in ("harness", "fixtures") and rel.parts[:4] != ("harness", "gpu_memsafety", "cli", "example")


@pytest.mark.e2e
def test_each_public_api_name_is_defined_once() -> None:
    """Across the harness and the modules the API takes its names from (gpu_memsafety.util.cuda_build)."""
    names = _api_names()
    assert len(names) > 10
    sources = {n.module for n in ast.walk(MODULES["gpu_memsafety.api"].tree) if isinstance(n, ast.ImportFrom)}
    checked = [m for m in MODULES.values() if _engine(m) or m.name in sources]
    where = {name: [m.name for m in checked if name in _defined_names(m)] for name in names}
    missing = [name for name, mods in where.items() if not mods]
    twice = {name: mods for name, mods in where.items() if len(mods) > 1}
    assert not missing, f"api names defined nowhere: {missing}"
    assert not twice, f"api names defined in more than one module: {twice}"


# ------------------------------------------------------------------------------------------------ layers

def test_every_package_has_one_layer_and_every_listed_unit_exists() -> None:
    """One line of the table per layer, one layer per package: a unit is a package (or a top-level module), never a
    module inside a package, so a package cannot span layers; a package the table does not list fails."""
    assert len(LAYERS) > 10
    listed = [_full(u) for _, units in LAYERS for u in units]
    inner = [u for u in listed if _unit(u) != u]
    assert not inner, f"docs/architecture.md's layers list modules inside a package (list the package): {inner}"
    unplaced = sorted({_unit(name) for name in MODULES if _layer_of(name, LAYERS) is None})
    assert not unplaced, f"packages in no layer of docs/architecture.md: {unplaced}"
    stale = [u for u in listed if u not in MODULES and not any(m.startswith(u + ".") for m in MODULES)]
    assert not stale, f"docs/architecture.md's layers name what is no module or package: {stale}"
    assert len(listed) == len(set(listed)), "a unit is listed in two layers"


def test_no_import_goes_up_the_layers() -> None:
    found = _upward(MODULES, LAYERS)
    assert not found, "imports from a layer above (docs/architecture.md, Layers):\n" + "\n".join(found)


def test_the_package_graph_is_acyclic() -> None:
    graph = _package_graph(MODULES)
    assert len(graph) > 10 and sum(map(len, graph.values())) > 30
    assert not _cycles(graph), f"package cycles: {_cycles(graph)}"


@pytest.mark.e2e
def test_the_declared_dynamic_loads_are_the_ones_the_code_makes() -> None:
    """Each declared load is a module that loads what it is handed (import_module or a file spec with an argument
    the test cannot read), and no other module of the engine does that without naming its targets where the test
    reads them (a module-level constant, a "module:function" string, a literal in the function that loads)."""
    def loads(module: Module) -> list[int]:
        return [n.lineno for n in ast.walk(module.tree) if isinstance(n, ast.Call)
                and (_calls_import_module(n) or getattr(n.func, "attr", "") == "spec_from_file_location")
                and not (n.args and isinstance(n.args[0], ast.Constant))]
    for name in DYNAMIC_LOADS:
        assert loads(MODULES[name]), f"{name} is declared a dynamic load and makes none"
    engine = [m for m in MODULES.values() if _engine(m) and m.name not in DYNAMIC_LOADS]
    unread = [f"{m.name} at {m.path.relative_to(ROOT)}:{line}" for m in engine for line in loads(m)
              if not _dynamic(m) and not _named_for_import_module(m)]
    assert not unread, "dynamic imports whose targets are not read (name them in a constant, or declare them):\n" + \
        "\n".join(unread)


def _synthetic(name: str, path: str, source: str) -> dict[str, Module]:
    return {**MODULES, name: Module(name, Path(path), ast.parse(source))}


def test_the_layer_check_fails_on_an_upward_import() -> None:
    """A synthetic module in the lowest layer importing the report package, at module level, inside a function
    and under TYPE_CHECKING: each import is found with its line; a downward import is not; the package graph
    then has a cycle."""
    source = ("from typing import TYPE_CHECKING\n"
              "from gpu_memsafety.util import paths\n"
              "from gpu_memsafety.report import document\n"
              "if TYPE_CHECKING:\n"
              "    from gpu_memsafety.judge.rules import Mode\n"
              "def f():\n"
              "    import gpu_memsafety.cli.main\n")
    synthetic = _synthetic("gpu_memsafety.model", "harness/gpu_memsafety/model.py", source)
    found = [e for e in _upward(synthetic, LAYERS) if e.startswith("gpu_memsafety.model ")]
    assert [e.split(" -> ")[1] for e in found] == [
        "gpu_memsafety.cli.main (cli) at harness/gpu_memsafety/model.py:7",
        "gpu_memsafety.judge.rules (judge) at harness/gpu_memsafety/model.py:5",
        "gpu_memsafety.report.document (report) at harness/gpu_memsafety/model.py:3"], found
    assert _cycles(_package_graph(synthetic))


def test_the_layer_check_fails_on_a_dynamic_upward_import() -> None:
    """A synthetic util module naming an upper module in a module-level constant and a "module:function" string:
    both are found; the same in a declared load (scenario discovery) is not."""
    source = ('WORKER = ("gpu_memsafety.cli.main",)\n'
              'def f():\n'
              '    return run("gpu_memsafety.engine.runner:Runner")\n')
    synthetic = _synthetic("gpu_memsafety.util.fake", "harness/gpu_memsafety/util/fake.py", source)
    found = [e for e in _upward(synthetic, LAYERS) if e.startswith("gpu_memsafety.util.fake ")]
    assert [e.split(" -> ")[1] for e in found] == [
        "gpu_memsafety.cli.main (cli) dynamic at harness/gpu_memsafety/util/fake.py:1",
        "gpu_memsafety.engine.runner (engine) dynamic at harness/gpu_memsafety/util/fake.py:3"], found
    declared = _synthetic("gpu_memsafety.scenario.registry", "harness/gpu_memsafety/scenario/registry.py", source)
    assert not [e for e in _upward(declared, LAYERS) if e.startswith("gpu_memsafety.scenario.registry ")]


def test_the_layer_check_fails_on_an_unlisted_package() -> None:
    """A package the table does not list has no layer (there is no catch-all): the check names it."""
    synthetic = _synthetic("gpu_memsafety.newfloor.thing", "harness/gpu_memsafety/newfloor/thing.py", "X = 1\n")
    assert _layer_of("gpu_memsafety.newfloor.thing", LAYERS) is None
    assert _layer_of("gpu_memsafety.util.fake", LAYERS) is not None
    assert [n for n in synthetic if _layer_of(n, LAYERS) is None] == ["gpu_memsafety.newfloor.thing"]


# ------------------------------------------------------------------------------------------ detectors are units

# Packages whose modules name no detector: what a detector sees, explains, leaves to others and reruns is the
# detector's own (gpu_memsafety.detectors.base.Unit), read through the registry, so a new detector is its module,
# a registry line and a mode-table row, and no decision elsewhere changes. The mode tables compose modes from
# detectors by name (a row names its detectors), and are the exceptions by design; so are the detectors' faces on a
# pytest suite (host/guard_page.py, host/trace.py): each is its detector, run on a suite's tests.
NAME_NO_DETECTOR = ("gpu_memsafety.judge", "gpu_memsafety.engine", "gpu_memsafety.host")
MODE_TABLES = ("gpu_memsafety.host.guard_page", "gpu_memsafety.host.trace")
# The detector modules everything may reach: the Unit shape, the registry of units, the mode tables (rows of units:
# scenario modes, suite modes) and the worker actions (a unit's action, looked up by name).
DETECTOR_DOORS = ("gpu_memsafety.detectors.base", "gpu_memsafety.detectors.registry", "gpu_memsafety.detectors.modes",
                  "gpu_memsafety.detectors.suite_modes", "gpu_memsafety.detectors.actions")
# A detector's own policies, which its unit holds and nothing in NAME_NO_DETECTOR names (an identifier, an imported
# name, an attribute or a string a decision reads that holds one of these): memcheck's lost access records
# (records.lost_record, LOST_RECORD_RUNS, its details key) and stray accesses of a batch (stray_owners, the claims a
# case runs alone for, the strays its own run did not repeat), the trace's stray accesses the fence stops
# (STRAY_ACCESS, StrayAccess). Read through the unit: Unit.batch_rule, Unit.explains.
DETECTOR_POLICIES = re.compile(r"lost_record|stray_owner|stray_claim|unreproduced|stray_?access", re.IGNORECASE)
# Modules that still name detectors, each with the work that removes it (the list only shrinks).
KNOWN_NAMING: dict[str, str] = {
}


def _detector_constants() -> dict[str, str]:
    from gpu_memsafety import model
    return {name: value for name, value in vars(model).items()
            if name.isupper() and isinstance(value, str) and value in model.DETECTORS}


def _names_detectors(module: Module) -> list[str]:
    """Where `module` names a detector: a detector-name constant imported from the model or the API (or read as an
    attribute), a detector module other than the doors imported, a string literal that is a detector's name (a
    docstring aside). Each as 'what at path:line'."""
    constants = _detector_constants()
    names = set(constants.values())
    found: list[str] = []
    where = lambda node: f"{module.path}:{node.lineno}"   # noqa: E731
    docstrings = {id(n.body[0].value) for n in ast.walk(module.tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    vocabulary = {"gpu_memsafety.model", "gpu_memsafety.api"}
    aliases = {a.asname or a.name for n in ast.walk(module.tree) if isinstance(n, ast.ImportFrom)
               and _absolute(module, n) == "gpu_memsafety" for a in n.names if f"gpu_memsafety.{a.name}" in vocabulary}
    aliases |= {a.asname for n in ast.walk(module.tree) if isinstance(n, ast.Import) for a in n.names
                if a.name in vocabulary and a.asname}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if base in ("gpu_memsafety.model", "gpu_memsafety.api") and alias.name in constants:
                    found.append(f"{alias.name} at {where(node)}")
                elif target.startswith("gpu_memsafety.detectors.") and target in MODULES and target not in DETECTOR_DOORS:
                    found.append(f"{target} at {where(node)}")
                elif base.startswith("gpu_memsafety.detectors.") and base not in DETECTOR_DOORS:
                    found.append(f"{base} at {where(node)}")
        elif isinstance(node, ast.Import):
            found += [f"{a.name} at {where(node)}" for a in node.names
                      if a.name.startswith("gpu_memsafety.detectors.") and a.name not in DETECTOR_DOORS]
        elif (isinstance(node, ast.Attribute) and node.attr in constants and isinstance(node.value, ast.Name)
              and node.value.id in aliases):     # model.MEMCHECK; a mode table's own TRACE is a mode's name
            found.append(f"{node.attr} at {where(node)}")
        if isinstance(node, ast.ImportFrom):
            found += [f"{a.name} at {where(node)}" for a in node.names if DETECTOR_POLICIES.search(a.name)]
        elif isinstance(node, ast.Name) and DETECTOR_POLICIES.search(node.id):
            found.append(f"{node.id} at {where(node)}")
        elif isinstance(node, ast.Attribute) and DETECTOR_POLICIES.search(node.attr):
            found.append(f"{node.attr} at {where(node)}")
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and DETECTOR_POLICIES.search(node.name):
            found.append(f"{node.name} at {where(node)}")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and DETECTOR_POLICIES.search(node.value)):
            found.append(f"{DETECTOR_POLICIES.search(node.value).group(0)!r} at {where(node)}")  # type: ignore[union-attr]
        if isinstance(node, (ast.Compare, ast.Subscript, ast.Dict)):
            # a detector's name as a string where code decides on it: compared, looked up, a key (an option that
            # happens to share a name, `gpu_memsafety(guard=False)`, is not a detector)
            parts = ([node.left, *node.comparators] if isinstance(node, ast.Compare) else
                     [node.slice] if isinstance(node, ast.Subscript) else [k for k in node.keys if k is not None])
            for part in parts:
                items = part.elts if isinstance(part, (ast.Tuple, ast.List, ast.Set)) else [part]
                found += [f"{c.value!r} at {where(c)}" for c in items
                          if isinstance(c, ast.Constant) and c.value in names and id(c) not in docstrings]
    return found


def _naming(modules: dict[str, Module]) -> dict[str, list[str]]:
    return {name: hits for name, m in modules.items()
            if any(name == p or name.startswith(p + ".") for p in NAME_NO_DETECTOR) and name not in MODE_TABLES
            and (hits := _names_detectors(m))}


def test_the_judge_the_engine_and_host_name_no_detector() -> None:
    found = _naming(MODULES)
    new = {name: hits for name, hits in found.items() if name not in KNOWN_NAMING}
    assert not new, "detectors named outside detectors/ (read it from the unit: detectors/base.Unit):\n" + \
        "\n".join(f"{name}: {', '.join(hits)}" for name, hits in new.items())
    healed = [name for name in KNOWN_NAMING if name not in found]
    assert not healed, f"no longer names a detector: remove from KNOWN_NAMING: {healed}"


def test_the_naming_check_fails_on_a_module_that_names_a_detector() -> None:
    """A synthetic judge module that imports a detector constant, reads one as an attribute, imports a detector's
    module, compares with a detector's name as a string: each is found; the doors, a docstring and a mode table's
    constant of the same name (a mode named after its detector) are not."""
    source = ('"""Judges poison."""\n'
              "from gpu_memsafety.model import POISON, Finding\n"
              "from gpu_memsafety.detectors.registry import UNITS\n"
              "from gpu_memsafety.detectors import memcheck\n"
              "from gpu_memsafety import model\n"
              "from gpu_memsafety.detectors import suite_modes as host_modes\n"
              "def f(d):\n"
              "    return d == 'trace' or d == model.GUARD or d == host_modes.TRACE\n")
    name = "gpu_memsafety.judge.fake"
    synthetic = {name: Module(name, Path("harness/gpu_memsafety/judge/fake.py"), ast.parse(source))}
    hits = _naming(synthetic)[name]
    assert sorted(h.split(" at ")[0] for h in hits) == sorted(["POISON", "gpu_memsafety.detectors.memcheck", "'trace'",
                                                               "GUARD"]), hits



def test_the_naming_check_fails_on_a_module_that_names_a_detectors_policy() -> None:
    """A synthetic engine module that keeps memcheck's lost-record count and its stray claims itself, imports the
    records' own policy functions, and reads the trace's fence message: each is found; a docstring that speaks of
    them is not."""
    source = ('"""Reruns a lost_record case; stray_owners."""\n'
              "from gpu_memsafety.sanitizer.records import lost_record, stray_owners\n"
              "from gpu_memsafety.job import STRAY_ACCESS\n"
              "LOST_RECORD_RUNS = 3\n"
              "class Runner:\n"
              "    def after(self, placed, res):\n"
              "        self.stray_claims = {}\n"
              "        res.details['memcheck_lost_record'] = placed.lost\n"
              "        return res.message.startswith(STRAY_ACCESS)\n")
    name = "gpu_memsafety.engine.fake"
    synthetic = {name: Module(name, Path("harness/gpu_memsafety/engine/fake.py"), ast.parse(source))}
    hits = sorted(h.split(" at ")[0] for h in _naming(synthetic)[name])
    assert hits == sorted(["lost_record", "stray_owners", "STRAY_ACCESS", "LOST_RECORD_RUNS", "stray_claims",
                           "'lost_record'", "STRAY_ACCESS"]), hits


# ----------------------------------------------------------------------------------------------- one decision

# The judge's one entry point: every outcome of a case, on both paths, is asked of it. Outside judge/, no module
# calls another judge function that returns a case's result; what a baseline accepts is applied after the decision
# (apply_baseline, the one function declared here).
DECIDE = "gpu_memsafety.judge.decide.decide"
AFTER_DECISION = ("gpu_memsafety.judge.rules.apply_baseline",)
# Who asks: the runner's batches (engine/batches.py, which the runner hands every batch to), a staged mode's stages
# (engine/staged.py), and the suite path's face (host/judge.py).
ASKERS = ("gpu_memsafety.engine.batches", "gpu_memsafety.engine.staged", "gpu_memsafety.host.judge")


def _returns_a_result(function: ast.FunctionDef) -> bool:
    return function.returns is not None and "CaseResult" in ast.unparse(function.returns)


def _other_deciders(modules: dict[str, Module]) -> list[str]:
    """Where a module outside judge/ imports a judge function that returns a case's result, other than `decide`
    (and AFTER_DECISION). Each as 'name at path:line'."""
    deciders = {f"{name}.{n.name}" for name, m in MODULES.items() if name.startswith("gpu_memsafety.judge.")
                for n in m.tree.body if isinstance(n, ast.FunctionDef) and _returns_a_result(n)}
    found = []
    for name, m in modules.items():
        if name.startswith("gpu_memsafety.judge."):
            continue
        for node in ast.walk(m.tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    target = f"{_absolute(m, node)}.{alias.name}"
                    if target in deciders and target != DECIDE and target not in AFTER_DECISION:
                        found.append(f"{target} at {m.path}:{node.lineno}")
    return found


def test_the_judge_has_one_decision_entry_point_that_both_paths_use() -> None:
    public = [n.name for n in MODULES["gpu_memsafety.judge.decide"].tree.body
              if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    assert public == ["decide"] * public.count("decide") and public, public     # decide and its overloads only
    assert not _other_deciders(MODULES), "a decision asked outside gpu_memsafety.judge.decide.decide:\n" + \
        "\n".join(_other_deciders(MODULES))
    for asker in ASKERS:
        assert DECIDE in _imported(MODULES[asker]), f"{asker} does not ask decide()"
    assert "gpu_memsafety.engine.batches.Batches" in _imported(MODULES["gpu_memsafety.engine.runner"])
    assert not [i for i in _imported(MODULES["gpu_memsafety.engine.runner"]) if i.startswith("gpu_memsafety.judge.")
                and i.rsplit(".", 1)[-1] not in ("Machine", "Standing")], "the runner asks the judge only through decide"


def test_the_decision_check_fails_on_a_module_that_decides_elsewhere() -> None:
    """A synthetic runner that asks the rules directly (judge_case, lost) is found; decide and the baseline are not."""
    source = ("from gpu_memsafety.judge.rules import judge_case, lost, apply_baseline\n"
              "from gpu_memsafety.judge.decide import decide\n")
    name = "gpu_memsafety.engine.fake"
    synthetic = {name: Module(name, Path("harness/gpu_memsafety/engine/fake.py"), ast.parse(source))}
    assert sorted(h.split(" at ")[0] for h in _other_deciders(synthetic)) == [
        "gpu_memsafety.judge.rules.judge_case", "gpu_memsafety.judge.rules.lost"]


def test_one_failure_text_for_both_paths() -> None:
    """How a case that did not pass reads in pytest's output is defined once (report/failure_text.py), for a
    scenario case and a suite test alike, and every module that shows one imports it from there."""
    defined = [name for name, m in MODULES.items() for n in m.tree.body
               if isinstance(n, ast.FunctionDef) and n.name == "failure_text"]
    assert defined == ["gpu_memsafety.report.failure_text"], defined
    users = {name: {i for i in _imported(m) if i.endswith(".failure_text")} for name, m in MODULES.items()}
    users = {name: found for name, found in users.items() if found}
    assert len(users) >= 2 and all(found == {"gpu_memsafety.report.failure_text.failure_text"}
                                   for found in users.values()), users


# ------------------------------------------------------------------------------- one definition for both paths

# Where each shared job is defined; every other module reaches it there.
FINDING_AT = "gpu_memsafety.detectors.guard_page"            # the guard-page finding (fault_finding)
PLANNER_AT = "gpu_memsafety.detectors.pageprobe"             # the guard-page reruns' planner (Probing.next_round)
PLACING_AT = "gpu_memsafety.sanitizer.attribute"             # an address -> the allocation it hit or is near
PLACING = ("nearest", "aggregate", "guard_findings")     # its functions (a generic `locate` is left out)


def _only_a_signature(node: ast.FunctionDef) -> bool:
    """A Protocol's method: a docstring and/or `...`, no body."""
    return all(isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) for b in node.body)


def _imported(module: Module) -> set[str]:
    """Every name `module` imports, as module.name (from-imports) or module (imports)."""
    return ({f"{_absolute(module, n)}.{a.name}" for n in ast.walk(module.tree) if isinstance(n, ast.ImportFrom)
             for a in n.names} | {a.name for n in ast.walk(module.tree) if isinstance(n, ast.Import) for a in n.names})


def _own_definitions(modules: dict[str, Module]) -> list[str]:
    """Where a module does one of the shared jobs itself: builds a guard-page Finding, plans reruns (a class with a
    `next_round`, or a loop that halves a window instead of asking the planner), or places addresses (a function
    of the placing module's name). Each as 'what at path:line'."""
    found = []
    for name, m in modules.items():
        where = lambda node: f"{m.path}:{node.lineno}"   # noqa: E731
        for node in ast.walk(m.tree):
            if (name != FINDING_AT and isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Finding"
                    and any(k.arg == "detector" and getattr(k.value, "id", getattr(k.value, "value", "")) in
                            ("GUARD_PAGE", "guard_page") for k in node.keywords)):
                found.append(f"a guard-page Finding at {where(node)}")
            elif (name != PLANNER_AT and isinstance(node, ast.FunctionDef) and node.name == "next_round"
                  and not _only_a_signature(node)):
                found.append(f"a rerun planner at {where(node)}")
            elif (name != PLANNER_AT and isinstance(node, ast.While) and "probe" in m.path.name + name
                  and not any(isinstance(c, ast.Attribute) and c.attr == "next_round" for c in ast.walk(node.test))):
                found.append(f"a rerun loop not driven by the planner at {where(node)}")
            elif name != PLACING_AT and isinstance(node, ast.FunctionDef) and node.name.lstrip("_") in PLACING:
                found.append(f"{node.name} at {where(node)}")
    return found


def test_the_host_path_shares_the_finding_the_planner_and_the_placing() -> None:
    assert not _own_definitions(MODULES), "defined again outside its one place:\n" + "\n".join(_own_definitions(MODULES))
    host_face = _imported(MODULES["gpu_memsafety.host.guard_page"])
    assert {f"{FINDING_AT}.fault_finding", PLANNER_AT} <= host_face, host_face
    assert PLACING_AT in _imported(MODULES["gpu_memsafety.host.records"])


def test_the_one_definition_check_fails_on_a_host_module_with_its_own() -> None:
    """A synthetic host face that builds its own guard-page finding, halves a window in its own loop, and places
    an address itself: each is found."""
    source = ("from gpu_memsafety.model import GUARD_PAGE, Finding\n"
              "def probe(run, n):\n"
              "    lo, hi = 0, n\n"
              "    while hi - lo > 1:\n"
              "        mid = (lo + hi) // 2\n"
              "        lo, hi = (lo, mid) if run(lo, mid) else (mid, hi)\n"
              "    return Finding(detector=GUARD_PAGE, kind='overread', buffer=str(lo), region='', bytes=0)\n"
              "def _nearest(addr, allocations):\n"
              "    return min(allocations, key=lambda a: abs(a - addr))\n")
    name = "gpu_memsafety.host.pageprobe_copy"
    synthetic = {name: Module(name, Path("harness/gpu_memsafety/host/pageprobe_copy.py"), ast.parse(source))}
    assert sorted(h.split(" at ")[0] for h in _own_definitions(synthetic)) == sorted(
        ["a guard-page Finding", "a rerun loop not driven by the planner", "_nearest"])


# ------------------------------------------------------------------------------------------------ the plugin a face

FACE = "gpu_memsafety.fixtures"
# What a module of the face may not import, by prefix, and the engine's work the import would be for.
ENGINE_WORK = {
    "subprocess": "supervises children", "multiprocessing": "supervises children",
    "gpu_memsafety.util.child": "supervises children", "gpu_memsafety.host.children": "supervises children",
    "gpu_memsafety.engine": "plans or runs batches",
    "gpu_memsafety.host": "runs a suite's tests or assembles their evidence",     # its mode table is detectors'
    "gpu_memsafety.judge.suite": "assembles evidence",
    "gpu_memsafety.sanitizer.records": "assembles evidence", "gpu_memsafety.detectors.base": "assembles evidence",
}
# The engines' doors: the modules of gpu_memsafety.plugin the face calls (each hook one call into them, the names both
# sides read). Every other module of gpu_memsafety.plugin is an engine's inside.
ENGINE_DOORS = ("gpu_memsafety.plugin", "gpu_memsafety.plugin.face", "gpu_memsafety.plugin.interrupts",
                "gpu_memsafety.plugin.settings",
                "gpu_memsafety.plugin.scenario", "gpu_memsafety.plugin.scenario.run", "gpu_memsafety.plugin.suite",
                "gpu_memsafety.plugin.suite.runtime", "gpu_memsafety.plugin.suite.roles")
# What the face may not construct or call: an engine's records and workers.
ENGINE_CALLS = {"Evidence": "assembles evidence", "OwnResult": "assembles evidence", "Runner": "runs batches",
                "RunOptions": "runs batches", "Job": "plans batches", "Child": "supervises children",
                "Popen": "supervises children", "killpg": "supervises children"}


def _engine_work(modules: dict[str, Module]) -> list[str]:
    """Where a module of the face does an engine's work: an import of what plans, runs, supervises or judges (functions
    and TYPE_CHECKING blocks too), an import of an engine's inside, a call that builds an engine's record or worker.
    Each as 'what (why) at path:line'."""
    found = []
    for name, module in modules.items():
        if not (name == FACE or name.startswith(FACE + ".")):
            continue
        where = lambda line: f"{module.path}:{line}"   # noqa: E731
        for target, line in _imports(module, top_level_only=False, type_checking=True):
            work = next((why for prefix, why in ENGINE_WORK.items() if target == prefix or target.startswith(prefix + ".")),
                        None)
            if work:
                found.append(f"imports {target} ({work}) at {where(line)}")
            elif target.startswith("gpu_memsafety.plugin.") and target not in ENGINE_DOORS:
                found.append(f"imports {target} (an engine's inside; call its door) at {where(line)}")
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Call):
                called = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if called in ENGINE_CALLS:
                    found.append(f"calls {called} ({ENGINE_CALLS[called]}) at {where(node.lineno)}")
    return found


def test_the_face_does_no_engine_work() -> None:
    """fixtures/ holds the plugin's hooks, its options and the fixtures users call; the engines are gpu_memsafety.plugin's
    (scenario/, suite/). The face is found (its gate, options and user fixture), and none of it plans, runs,
    supervises or assembles."""
    assert {"gpu_memsafety.fixtures.plugin", "gpu_memsafety.fixtures.options", "gpu_memsafety.fixtures.guarded",
            "gpu_memsafety.fixtures.scenario_run"} <= set(MODULES)
    assert {"gpu_memsafety.plugin.scenario.run", "gpu_memsafety.plugin.suite.batches"} <= set(MODULES)
    assert all(door in MODULES for door in ENGINE_DOORS), [d for d in ENGINE_DOORS if d not in MODULES]
    found = _engine_work(MODULES)
    assert not found, "engine work in the plugin's face (move it to gpu_memsafety.plugin, leave a call):\n" + \
        "\n".join(found)


def test_the_face_check_fails_on_a_module_that_does_engine_work() -> None:
    """A synthetic face module that starts a child, supervises one through util.child, plans with the schedule,
    builds a suite's Evidence and reaches into an engine's controller: each is found; the mode table, a door and
    the options are not."""
    source = ("import subprocess\n"
              "from gpu_memsafety.detectors import suite_modes\n"
              "from gpu_memsafety.plugin.scenario import run\n"
              "from gpu_memsafety.fixtures import options\n"
              "from gpu_memsafety.plugin.scenario.controller import final_results\n"
              "def f(items):\n"
              "    from gpu_memsafety.util.child import Child\n"
              "    from gpu_memsafety.engine import schedule\n"
              "    from gpu_memsafety.host.evidence import Evidence\n"
              "    subprocess.Popen(['x'])\n"
              "    return schedule.plan(items, 1, 2), Evidence('t', 'markers', '')\n")
    name = "gpu_memsafety.fixtures.fake"
    synthetic = {name: Module(name, Path("fixtures/fake.py"), ast.parse(source))}
    found = sorted(h.split(" at ")[0] for h in _engine_work(synthetic))
    assert found == sorted([
        "imports subprocess (supervises children)", "calls Popen (supervises children)",
        "imports gpu_memsafety.plugin.scenario.controller (an engine's inside; call its door)",
        "imports gpu_memsafety.util.child (supervises children)",
        "imports gpu_memsafety.engine.schedule (plans or runs batches)",
        "imports gpu_memsafety.host.evidence (runs a suite's tests or assembles their evidence)",
        "calls Evidence (assembles evidence)"]), found


# One validator: every check of an option's or ini key's value is made in one module of the plugin, for both kinds of
# run; the face and the engines read its typed result (SanitizeConfig, HostConfig, ExploreSettings).
VALIDATOR = "gpu_memsafety.plugin.settings"
# The checks a value goes through: the modules that check a number or a path, and the functions that read an
# option's text (a mode of the other kind, explore's counts, a shard, a run group, a baseline file).
CHECK_MODULES = ("gpu_memsafety.util.bounds", "gpu_memsafety.util.pathargs")
CHECK_CALLS = ("other_kind", "parse_count", "parse_seconds", "parse_flag", "parse_shard", "run_group", "load_baseline")


def _validates(modules: dict[str, Module]) -> list[str]:
    """Where a module of the face or the plugin other than the validator checks an option's value itself."""
    found = []
    for name, module in modules.items():
        if name == VALIDATOR or not any(name == p or name.startswith(p + ".") for p in (FACE, "gpu_memsafety.plugin")):
            continue
        for target, line in _imports(module, top_level_only=False, type_checking=True):
            if any(target == m or target.startswith(m + ".") for m in CHECK_MODULES):
                found.append(f"imports {target} at {module.path}:{line}")
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Call) and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) in CHECK_CALLS:
                found.append(f"calls {getattr(node.func, 'id', None) or node.func.attr} at {module.path}:{node.lineno}")
    return found


def test_the_options_are_validated_in_one_module() -> None:
    assert VALIDATOR in MODULES
    validator = MODULES[VALIDATOR]
    assert {"SanitizeConfig", "HostConfig", "ExploreSettings"} <= _defined_names(validator)
    found = _validates(MODULES)
    assert not found, f"option values checked outside {VALIDATOR} (check them there):\n" + "\n".join(found)


def test_the_one_validator_check_fails_on_a_module_with_its_own() -> None:
    """A synthetic engine module that checks a number through util.bounds, a path through pathargs, reads a shard and
    a mode of the other kind itself: each is found; the same in the validator is not."""
    source = ("from gpu_memsafety.util import bounds\n"
              "from gpu_memsafety.util.pathargs import input_file\n"
              "def f(config):\n"
              "    schedule.parse_shard(config.getoption('--gpu-memsafety-shard'))\n"
              "    return other_kind('memcheck', (), for_suite=True)\n")
    synthetic = {name: Module(name, Path(f"harness/{name.replace('.', '/')}.py"), ast.parse(source))
                 for name in ("gpu_memsafety.plugin.suite.fake", VALIDATOR)}
    found = sorted(h.split(" at ")[0] for h in _validates(synthetic))
    assert found == sorted(["imports gpu_memsafety.util.bounds", "imports gpu_memsafety.util.pathargs",
                            "calls parse_shard", "calls other_kind"]), found
