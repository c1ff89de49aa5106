"""Scenario definitions: a frozen description of one kernel bug hunt, and the cases it expands to.

A scenario names its kernel adapter (the callable itself, or a "module:function" string imported only in
the worker; see harness/gpu_memsafety/scenario/adapter.py), its parameter grid and variants, and, as pure functions, what each case
is expected to show and how a byte offset reads in the scenario's own terms. Definitions are validated when loaded: a bad one is an error
that names the scenario and the field, never a silently skipped case.
"""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from gpu_memsafety.model import (BARRIER, DEFAULT_DETECTORS, DETECTORS, RACE, RIDES_WITH, SHARED, SHARED_MEMORY,
                                 Expectation, ExpectedFinding)
from gpu_memsafety.cover import COVER_ALL, COVERS
from gpu_memsafety.scenario.adapter import Adapter

# A scenario without a cost hint is expected to take this share of its per-case deadline.
COST_SHARE_OF_TIMEOUT = 0.01
# Matched whole (fullmatch): `$` would also accept a name that ends with a newline.
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_ID_SAFE = re.compile(r"[A-Za-z0-9_.=+-]+")


def name_problem(name: object) -> str:
    """What is wrong with a scenario name ('' when nothing): lower_snake_case ASCII, a Python identifier that is no
    keyword (its files are modules: NAME.py, NAME_kernel.py, test_NAME.py)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return "must be lower_snake_case (ASCII letters, digits, _; starting with a letter; nothing else, no newline)"
    if not name.isidentifier() or keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"{name!r} is a Python keyword: its module could not be imported by name"
    return ""


class ScenarioError(ValueError):
    """A scenario definition that cannot be run; the message names the scenario and the field."""

    def __init__(self, scenario: str, field_name: str, problem: str) -> None:
        super().__init__(f"scenario {scenario!r}, field {field_name!r}: {problem}")
        self.scenario = scenario
        self.field = field_name
        self.problem = problem


@dataclass(frozen=True)
class Param:
    """One parameter: its allowed values are checked for every case (type and, if given, range)."""

    name: str
    kind: type
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None

    def check(self, scenario: str, value: Any) -> None:
        if not isinstance(value, self.kind) or (self.kind is int and isinstance(value, bool)):
            raise ScenarioError(scenario, self.name, f"expected {self.kind.__name__}, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ScenarioError(scenario, self.name, f"{value!r} is not one of {self.choices}")
        if self.low is not None and value < self.low:
            raise ScenarioError(scenario, self.name, f"{value!r} is below the minimum {self.low}")
        if self.high is not None and value > self.high:
            raise ScenarioError(scenario, self.name, f"{value!r} is above the maximum {self.high}")


@dataclass(frozen=True)
class Variant:
    """A named variant of a scenario. Subclass it to give variants typed fields instead of parsing names:

        @dataclass(frozen=True)
        class Store(Variant):
            off_by_one: bool = False

        VARIANTS = (Store("fixed"), Store("buggy", off_by_one=True))
        Scenario(..., variants=VARIANTS)          # scenario.variants stays ("fixed", "buggy")
        SCENARIO.variant(case).off_by_one         # typed, checked when the scenario is defined

    A plain string is the same as `Variant(name)`.
    """

    name: str
    summary: str = ""


@dataclass(frozen=True)
class Case:
    """One case: a variant of a scenario at one point of its parameter grid. Its id, `scenario[variant-label]`,
    is the one case-id scheme used everywhere (pytest node names, `--gpu-memsafety-case`, `repro`, reports, baselines)."""

    scenario: str
    variant: str                    # a variant's name (a Variant given here is replaced by its name)
    params: Mapping[str, Any]
    label: str                      # readable id part, e.g. "K2880-E32-N5760"
    tags: tuple[str, ...] = ()      # e.g. "smoke", "gpt-oss", "sweep"; also pytest markers (-m smoke)

    def __post_init__(self) -> None:
        if isinstance(self.variant, Variant):
            object.__setattr__(self, "variant", self.variant.name)
        if isinstance(self.tags, str):
            object.__setattr__(self, "tags", (self.tags,))

    @property
    def id(self) -> str:
        return f"{self.scenario}[{self.variant}-{self.label}]"

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "variant": self.variant, "params": dict(self.params),
                "label": self.label, "tags": list(self.tags)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Case":
        return cls(data["scenario"], data["variant"], dict(data["params"]), data["label"], tuple(data.get("tags", ())))


Describe = Callable[[Case, str, int, int], str]


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    adapter: "Adapter | str"                        # the adapter callable, or "module:function" (run in the worker)
    params: tuple[Param, ...]
    variants: tuple[str, ...]                       # names; Variant objects given here are kept for variant()
    cases: Callable[[], Sequence[Case]]             # the case builder
    expect: Callable[[Case], Expectation]           # pure
    kernel: Callable[[Case], str]                   # kernel label for reports
    needs_gpu: Callable[[Case], bool]
    describe: Describe | None = None                # logical place of bytes [start, end) of a buffer
    # Which detectors make sense for this scenario; racecheck and synccheck only when named (a kernel that uses
    # shared memory or barriers).
    detectors: tuple[str, ...] = DEFAULT_DETECTORS
    isolated: Callable[[Case], bool] = lambda case: False   # run alone in its own process (stray accesses)
    timeout_s: float = 120.0
    # Expected seconds per case inside a warm worker (a number, or a function of the case): what the plugin
    # balances batches, GPUs and shards by. None: a fixed share of the deadline (COST_SHARE_OF_TIMEOUT).
    cost_s: float | Callable[[Case], float] | None = None
    upstream: str = ""
    notes: str = ""
    # Per-architecture expectations ("sm_90" -> ...): given, it decides for every case that ran on a GPU; an
    # architecture it has no entry for gets what it returns for that arch (typically "no expectation: report
    # what it finds"). Absent, `expect` decides everywhere.
    expect_on_arch: Callable[[Case, str], Expectation] | None = None
    # Which buffers the modes that need a watched buffer (memcheck, guard_page) place where they can see past
    # their end: "all" (every buffer the adapter allocates through the context), or "watched" (only those
    # allocated with watch=True). `--gpu-memsafety-cover` overrides it for a whole run (gpu_memsafety.detectors.modes.resolve_cover).
    cover: str = COVER_ALL
    _validated: list[Case] = field(default_factory=list, compare=False, repr=False)
    _source: list[Any] = field(default_factory=list, compare=False, repr=False)
    _variant_specs: dict[str, Variant] = field(default_factory=dict, compare=False, repr=False)

    def variant(self, case: Case | str) -> Variant:
        """The Variant object (with its typed fields) of a case or a variant name."""
        name = case.variant if isinstance(case, Case) else case
        if name not in self._variant_specs:
            raise ScenarioError(self.name, "variant", f"{name!r} is not one of {self.variants}")
        return self._variant_specs[name]

    @property
    def source(self) -> Any:
        """Where the registry found this definition (gpu_memsafety.scenario.registry.Source), or None."""
        return self._source[0] if self._source else None

    def bind_source(self, source: Any) -> None:
        self._source[:] = [source]

    def resolve_adapter(self) -> Adapter:
        """The adapter callable: the one given, or the function a "module:function" string names."""
        if callable(self.adapter):
            return self.adapter
        import importlib
        module_name, func = self.adapter.split(":", 1)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise ScenarioError(self.name, "adapter", f"cannot import {module_name!r} for adapter {self.adapter!r} "
                                f"({exc}); give the adapter function itself: Scenario(adapter=run_case, ...)") from None
        if not callable(getattr(module, func, None)):
            raise ScenarioError(self.name, "adapter", f"module {module_name} has no function {func!r} "
                                f"(adapter {self.adapter!r})")
        return getattr(module, func)

    def __post_init__(self) -> None:
        problem = name_problem(self.name)
        if problem:
            raise ScenarioError(str(self.name), "name", problem)
        if isinstance(self.adapter, str):
            if ":" not in self.adapter:
                raise ScenarioError(self.name, "adapter", f"{self.adapter!r} is not 'module:function'; better, give "
                                    "the adapter function itself: Scenario(adapter=run_case, ...)")
        elif not callable(self.adapter):
            raise ScenarioError(self.name, "adapter", f"expected the adapter function (case, ctx) -> RunInfo, got "
                                f"{type(self.adapter).__name__}")
        if isinstance(self.variants, (str, Variant)):
            raise ScenarioError(self.name, "variants", f"expected a tuple of variants, got {self.variants!r}")
        if not self.variants:
            raise ScenarioError(self.name, "variants", "at least one variant is required")
        specs: dict[str, Variant] = {}
        for v in self.variants:
            spec = v if isinstance(v, Variant) else Variant(v) if isinstance(v, str) else None
            if spec is None or not _ID_SAFE.fullmatch(spec.name):
                raise ScenarioError(self.name, "variants", f"{v!r} is not a variant name or a Variant")
            if spec.name in specs:
                raise ScenarioError(self.name, "variants", f"variant {spec.name!r} is defined twice")
            specs[spec.name] = spec
        object.__setattr__(self, "variants", tuple(specs))
        self._variant_specs.update(specs)
        unknown = set(self.detectors) - set(DETECTORS)
        if unknown:
            raise ScenarioError(self.name, "detectors", f"unknown detector(s) {sorted(unknown)}; known: {DETECTORS}")
        riders = tuple(d for d, host in RIDES_WITH.items() if host in self.detectors and d not in self.detectors)
        if riders:       # a detector that runs in another's pass goes wherever that one goes (model.RIDES_WITH)
            object.__setattr__(self, "detectors", (*self.detectors, *riders))
        if not isinstance(self.cover, str) or self.cover not in COVERS:
            raise ScenarioError(self.name, "cover", f"{self.cover!r} is not one of {', '.join(map(repr, COVERS))} "
                                "(every buffer, or only those allocated with watch=True)")
        if self.timeout_s <= 0:
            raise ScenarioError(self.name, "timeout_s", f"must be positive, got {self.timeout_s}")
        if isinstance(self.cost_s, (int, float)) and not isinstance(self.cost_s, bool) and self.cost_s <= 0:
            raise ScenarioError(self.name, "cost_s", f"must be positive, got {self.cost_s}")

    def cost(self, case: Case) -> float:
        """Expected seconds for the case in a warm worker (the cost hint, else a share of the deadline)."""
        hint = self.cost_s(case) if callable(self.cost_s) else self.cost_s
        if hint is None:
            return self.timeout_s * COST_SHARE_OF_TIMEOUT
        if isinstance(hint, bool) or not isinstance(hint, (int, float)) or not hint > 0:
            raise ScenarioError(self.name, "cost_s", f"case {case.id}: expected a positive number of seconds, got {hint!r}")
        return float(hint)

    def runs_alone(self, case: Case) -> bool:
        """Whether the case gets a process of its own from the start: the scenario says so (`isolated`), or the
        case is expected to leave records that name no buffer (a shared-memory access, a race, a barrier:
        racecheck's and synccheck's hazards), which only its kernel's name can tie to a case: in a batch beside a
        case of the same kernel they would send both to run again one per process (engine.batches), so the batch's
        run would be spent for nothing. A planning hint only: an expectation that cannot be worked out here is the
        judge's to report (on that case), not the planner's."""
        if self.isolated(case):
            return True
        try:
            findings = self.expect(case).findings
        except Exception:   # noqa: BLE001 - a scenario's expect is user code; the judge reports what it raises
            return False
        return any(_kernel_only(f) for f in findings)

    def expectation(self, case: Case, arch: str = "") -> Expectation:
        """What `case` must show on `arch` (e.g. "sm_90"; "" when it ran on no GPU)."""
        if self.expect_on_arch is not None and arch not in ("", "cpu"):
            return self.expect_on_arch(case, arch)
        return self.expect(case)

    def build(self) -> list[Case]:
        """Expand and validate the cases (once)."""
        if not self._validated:
            self._validated.extend(self._checked(list(self.cases())))
        return list(self._validated)

    def _checked(self, cases: list[Case]) -> list[Case]:
        by_name = {p.name: p for p in self.params}
        seen: set[str] = set()
        for case in cases:
            if case.scenario != self.name:
                raise ScenarioError(self.name, "cases", f"case {case.id} belongs to scenario {case.scenario!r}")
            if case.variant not in self.variants:
                raise ScenarioError(self.name, "variant", f"{case.variant!r} is not one of {self.variants}")
            if not _ID_SAFE.fullmatch(case.label):
                raise ScenarioError(self.name, "label", f"{case.label!r} has characters unsafe in an id")
            missing = set(by_name) - set(case.params)
            extra = set(case.params) - set(by_name)
            if missing or extra:
                raise ScenarioError(self.name, "params", f"case {case.id}: missing {sorted(missing)}, unknown {sorted(extra)}")
            for name, value in case.params.items():
                by_name[name].check(self.name, value)
            if case.id in seen:
                raise ScenarioError(self.name, "cases", f"duplicate case id {case.id}")
            seen.add(case.id)
        if not cases:
            raise ScenarioError(self.name, "cases", "the case builder returned no cases")
        return cases


def grid(**axes: Sequence[Any]) -> list[dict[str, Any]]:
    """Cartesian product of named axes, in the given order."""
    combos: list[dict[str, Any]] = [{}]
    for name, values in axes.items():
        combos = [{**c, name: v} for c in combos for v in values]
    return combos


def _kernel_only(finding: ExpectedFinding) -> bool:
    """An expected finding whose sanitizer records carry no address in a buffer of the case."""
    return finding.kind in (RACE, BARRIER) or finding.buffer == SHARED or finding.region == SHARED_MEMORY
