"""Explore (`pytest --gpu-memsafety --gpu-memsafety-explore`): the shapes a test's parametrization forgot.

A suite's tests trigger only the shapes they list; the bugs users hit live at the block tail, a sequence shorter
than a chunk, a column count that is not a power of two, a single expert, an empty segment. Explore runs each test
again at boundary values derived from the test itself, each variant its own case. This module is the pure part: it
plans the variants of one test from its parameter values and the constexpr block sizes its own launches used, names
each variant in a stable text (`<node id>@{"T": 15}`) that reads back to the same change in any process, and checks
the budgets. No pytest, torch or triton here (gpu_memsafety.plugin.suite.explore runs the variants).

What is varied: every integer parameter (bools are not integers here), and the integers inside tuple or list
parameters: a shape's each dimension, and a list of nondecreasing offsets starting at 0 (cu_seqlens, expert
offsets) as segments. Module-level integer constants a non-parametrized test reads are varied the same way (key
`module.NAME`).

Candidate values, each with the reason that makes it a boundary (`Candidate.why`), ranked by the bug classes our
field campaign and the scenario set kept finding, most often first:
  1. 1: a single row, token, expert or head (the smallest grid; a dimension that stops being a tile);
  2. c - 1 for each constexpr c the test's launches used (a block size, a chunk): a partial last block, a sequence
     shorter than a chunk;
  3. c + 1: a tail of one element past a full block;
  4. 2^k - 1 and 2^k + 1 (non-power-of-two sizes, masks built for a power of two);
  5. the listed value - 1 and + 1;
  6. 2 and 3 (small values).
For a list of offsets, four kinds take turns (the best of each first): one sequence of each length above ([0, n]),
an empty segment (a repeated offset: last, first, in the middle), a short first segment (the rest shifted) or a short
last one appended, and each offset +-1 where the list stays nondecreasing.
A variant never exceeds about twice the listed size (`max_value`): explore costs what the test costs, not more.
Ranking within a test: parameters take turns (the best candidate of each, then the second of each, ...), lists of
offsets first, then integers, then shapes; one parameter at a time first, then pairs of two parameters' best
candidates. Variants whose values equal one of the test's listed cases are not run (the suite runs them already).
"""
from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from gpu_memsafety.util import jsonio

# The separator between the base test's node id and the changed values, in a variant's node id.
SEP = "@"
MODULE_PREFIX = "module."
# Constexpr values that are block sizes worth their +-1 (flags and tiny enumerations are not).
MIN_BLOCK = 2
MAX_BLOCK = 1 << 16
# Rank classes (lower runs first).
ONE, BLOCK_BELOW, BLOCK_ABOVE, POW2, LISTED, SMALL = range(6)
CLASS_WORDS = {ONE: "one", BLOCK_BELOW: "a constexpr minus 1", BLOCK_ABOVE: "a constexpr plus 1",
               POW2: "a power of two +-1", LISTED: "the listed value +-1", SMALL: "a small value"}


class ExploreError(ValueError):
    """A variant's text or an explore setting that cannot be read: says what was expected."""


# ------------------------------------------------------------------------------------------ budgets

@dataclass(frozen=True)
class Budget:
    """How much exploring: per test (variants, seconds) and per run (variants, seconds; 0: no limit)."""

    variants: int = 8
    seconds: float = 120.0
    run_variants: int = 0
    run_seconds: float = 0.0
    pairs: bool = True

    def __post_init__(self) -> None:
        for name in ("variants", "run_variants"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ExploreError(f"explore budget {name} must be a whole number >= 0, got {value!r}")
        for name in ("seconds", "run_seconds"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0 or math.isnan(value):
                raise ExploreError(f"explore budget {name} must be a number of seconds >= 0, got {value!r}")


def parse_count(option: str, text: Any) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ExploreError(f"{option}: expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise ExploreError(f"{option}: expected a whole number >= 0, got {text!r}")
    return value


def parse_seconds(option: str, text: Any) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ExploreError(f"{option}: expected seconds >= 0 (0: no limit), got {text!r}") from None
    if value < 0 or math.isnan(value) or math.isinf(value):
        raise ExploreError(f"{option}: expected seconds >= 0 (0: no limit), got {text!r}")
    return value


def parse_flag(option: str, text: Any) -> bool:
    words = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False,
             "": False}
    key = str(text).strip().lower()
    if key not in words:
        raise ExploreError(f"{option}: expected true or false, got {text!r}")
    return words[key]


# ------------------------------------------------------------------------------------------ values

def is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_int_seq(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and 0 < len(value) <= 64 and all(is_int(v) for v in value)


def is_offsets(value: Any) -> bool:
    """A list of nondecreasing offsets from 0 (cu_seqlens): at least one segment, not all empty."""
    return (is_int_seq(value) and len(value) >= 2 and int(value[0]) == 0 and int(value[-1]) > 0
            and all(int(a) <= int(b) for a, b in zip(value, value[1:])))


def explorable(value: Any) -> bool:
    return is_int(value) or is_int_seq(value)


@dataclass(frozen=True)
class Candidate:
    value: Any                 # the parameter's new value (an int, or a list/tuple like the original)
    rank: int                  # the class (ONE .. SMALL)
    why: str                   # in words: "c - 1 (BT = 64)"
    size: int = 0              # what it costs relative to others (the elements it makes); ties: smaller first


def blocks_of(constexprs: Iterable[Any]) -> list[int]:
    """The constexpr values worth their +-1: integers from MIN_BLOCK to MAX_BLOCK, once each, ascending."""
    return sorted({int(c) for c in constexprs if is_int(c) and MIN_BLOCK <= int(c) <= MAX_BLOCK})


def max_value(listed: int) -> int:
    """The largest value a candidate for `listed` may take: about twice the listed size (at least 9), so that a
    variant costs about what the test costs."""
    return max(2 * listed + 1, 9)


def int_candidates(v: int, blocks: Sequence[int], *, low: int = 1) -> list[Candidate]:
    """Boundary values for an integer listed as v, each once (its best reason), ranked; none equals v."""
    v = int(v)
    top = max_value(v)
    out: dict[int, Candidate] = {}

    def add(value: int, rank: int, why: str) -> None:
        if value < low or value > top or value == v:
            return
        if value not in out or out[value].rank > rank:
            out[value] = Candidate(value, rank, why, value)

    add(1, ONE, "1")
    for c in blocks:
        add(c - 1, BLOCK_BELOW, f"a block of {c} minus 1")
    for c in blocks:
        add(c + 1, BLOCK_ABOVE, f"a block of {c} plus 1")
    k = 2
    while (1 << k) - 1 <= top:
        p = 1 << k
        if p // 4 <= v * 2 or p <= 64:         # the powers around v (and the small ones)
            add(p - 1, POW2, f"2^{k} - 1")
            add(p + 1, POW2, f"2^{k} + 1")
        k += 1
    add(v - 1, LISTED, f"the listed {v} minus 1")
    add(v + 1, LISTED, f"the listed {v} plus 1")
    add(2, SMALL, "2")
    add(3, SMALL, "3")
    return sorted(out.values(), key=lambda c: (c.rank, c.size))


def _like(original: Any, items: Sequence[int]) -> Any:
    return tuple(items) if isinstance(original, tuple) else list(items)


def shape_candidates(shape: Sequence[int], blocks: Sequence[int]) -> list[Candidate]:
    """One dimension of a shape at a time (0 stays 0: an empty dimension is the test's own choice)."""
    per_dim: list[list[Candidate]] = []
    for i, d in enumerate(shape):
        dims = []
        if int(d) > 0:
            for c in int_candidates(int(d), blocks):
                new = [int(x) for x in shape]
                new[i] = int(c.value)
                size = math.prod(max(x, 1) for x in new)
                dims.append(Candidate(_like(shape, new), c.rank, f"dimension {i} = {c.value}: {c.why}", size))
        per_dim.append(dims)
    return _interleave(per_dim)


def offsets_candidates(offsets: Sequence[int], blocks: Sequence[int]) -> list[Candidate]:
    """Segments of a list of offsets, four kinds taking turns (the best of each first): one sequence of a boundary
    length ([0, n]: shorter than a chunk, a block tail), an empty segment (a repeated offset: last, first, in the
    middle), a short first segment (the others shifted) or a short last one appended, and each offset +-1 where the
    list stays nondecreasing."""
    offs = [int(x) for x in offsets]
    total = offs[-1]
    lengths = [b - a for a, b in zip(offs, offs[1:])]
    seen = {tuple(offs)}

    def made(new: list[int], rank: int, why: str) -> list[Candidate]:
        if tuple(new) in seen or any(a > b for a, b in zip(new, new[1:])) or new[0] != 0 or new[-1] <= 0:
            return []
        seen.add(tuple(new))
        return [Candidate(_like(offsets, new), rank, why, new[-1])]

    single: list[Candidate] = []
    for c in int_candidates(max(lengths), blocks):
        single += made([0, int(c.value)], c.rank, f"one sequence of {c.value}: {c.why}")
    empty = made([*offs, total], SMALL, "an empty last segment (the last offset repeated)")
    empty += made([0, *offs], SMALL, "an empty first segment (offsets repeat 0)")
    if len(offs) > 2:
        mid = len(offs) // 2
        empty += made([*offs[:mid + 1], *offs[mid:]], SMALL, f"an empty segment after segment {mid - 1}")
    short: list[Candidate] = []
    firsts = int_candidates(lengths[0], blocks)[:6] if len(offs) > 2 else []
    lasts = int_candidates(max(lengths[-1], 1), blocks)[:6]
    for i in range(max(len(firsts), len(lasts))):
        if i < len(firsts):
            c = firsts[i]
            delta = int(c.value) - lengths[0]
            short += made([0, *[o + delta for o in offs[1:]]], c.rank, f"a first segment of {c.value}: {c.why}")
        if i < len(lasts):
            c = lasts[i]
            short += made([*offs, total + int(c.value)], c.rank, f"a last segment of {c.value} appended: {c.why}")
    nudged: list[Candidate] = []
    for i in range(len(offs) - 1, 0, -1):
        for d in (-1, 1):
            new = list(offs)
            new[i] += d
            nudged += made(new, LISTED, f"offset {i} {'+' if d > 0 else '-'}1")
    return _interleave([single, empty, short, nudged])


def candidates(value: Any, blocks: Sequence[int]) -> list[Candidate]:
    if is_int(value):
        return int_candidates(int(value), blocks)
    if is_offsets(value):
        return offsets_candidates(value, blocks)
    if is_int_seq(value):
        return shape_candidates(value, blocks)
    return []


def _interleave(lists: Sequence[Sequence[Candidate]]) -> list[Candidate]:
    """Round robin over the lists, each in its order: the best of each first."""
    out: list[Candidate] = []
    for i in range(max((len(x) for x in lists), default=0)):
        out += [x[i] for x in lists if i < len(x)]
    return out


# ------------------------------------------------------------------------------------------ plan

@dataclass(frozen=True)
class ShapeVariant:
    changes: dict[str, Any]             # parameter -> its new value (JSON-able: ints and lists of ints)
    why: tuple[str, ...]                # per changed parameter, the reason

    @property
    def spec(self) -> str:
        return spec_text(self.changes)


@dataclass
class Plan:
    """The variants of one test, ranked, within its budget; and what was left out and why."""

    variants: list[ShapeVariant] = field(default_factory=list)
    more: int = 0                       # variants planned beyond the budget (not run)
    skipped_listed: int = 0             # variants equal to a case the suite lists (not run)
    not_explored: str = ""              # why no variant at all ("" when there are some)


def _order(name: str, value: Any) -> int:
    return 0 if is_offsets(value) else 1 if is_int(value) else 2


def plan(params: Mapping[str, Any], constexprs: Iterable[Any], *, limit: int, pairs: bool = True,
         listed: Iterable[Mapping[str, Any]] = ()) -> Plan:
    """The ranked variants of a test whose explorable parameters are `params` (name -> value), whose launches used
    `constexprs`, up to `limit` variants (0: none). `listed`: the parameter values of the test's listed cases (a
    variant equal to one of them is not run)."""
    names = sorted((n for n, v in params.items() if explorable(v)), key=lambda n: (_order(n, params[n]), n))
    if not names:
        return Plan(not_explored="no integer parameter, shape or offsets list to vary")
    blocks = blocks_of(constexprs)
    per_param = {n: candidates(params[n], blocks) for n in names}
    singles = [ShapeVariant({n: to_json(c.value)}, (f"{n}: {c.why}",)) for c, n in _interleave_named(per_param, names)]
    doubles: list[ShapeVariant] = []
    if pairs:
        tops = {n: per_param[n][:2] for n in names}
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                for ca in tops[a]:
                    for cb in tops[b]:
                        doubles.append(ShapeVariant({a: to_json(ca.value), b: to_json(cb.value)},
                                               (f"{a}: {ca.why}", f"{b}: {cb.why}")))
    listed_sigs = {signature({**params, **{k: to_json(v) for k, v in case.items()}}, names) for case in listed}
    out, skipped = [], 0
    for v in singles + doubles:
        if signature({**params, **v.changes}, names) in listed_sigs:
            skipped += 1
            continue
        out.append(v)
    if not out:
        return Plan(skipped_listed=skipped, not_explored="every boundary value is a case the suite lists already"
                    if skipped else "no boundary value differs from the listed one")
    return Plan(out[:limit], max(0, len(out) - limit), skipped)


def _interleave_named(per_param: Mapping[str, list[Candidate]], names: Sequence[str]) -> list[tuple[Candidate, str]]:
    out: list[tuple[Candidate, str]] = []
    for i in range(max(len(per_param[n]) for n in names)):
        out += [(per_param[n][i], n) for n in names if i < len(per_param[n])]
    return out


def signature(params: Mapping[str, Any], names: Sequence[str]) -> str:
    return json.dumps({n: to_json(params.get(n)) for n in names}, sort_keys=True)


# ------------------------------------------------------------------------------------------ text

def to_json(value: Any) -> Any:
    if is_int(value):
        return int(value)
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def spec_text(changes: Mapping[str, Any]) -> str:
    """The changed values in one stable text: JSON, keys sorted, `{"T": 15, "cu_seqlens": [0, 15]}`."""
    return json.dumps({k: to_json(v) for k, v in changes.items()}, sort_keys=True, separators=(", ", ": "))


def case_id(base: str, changes: Mapping[str, Any]) -> str:
    """A variant's node id: the base test's node id, SEP, the changed values."""
    return f"{base}{SEP}{spec_text(changes)}"


def is_case_id(nodeid: str) -> bool:
    head, sep, tail = nodeid.rpartition(SEP + "{")
    return bool(sep) and bool(head) and tail.endswith("}")


def base_of(nodeid: str) -> str:
    """The base test's node id of a variant's node id; any other node id as it is."""
    return nodeid.rpartition(SEP + "{")[0] if is_case_id(nodeid) else nodeid


def parse_case_id(nodeid: str) -> tuple[str, dict[str, Any]]:
    """(base node id, changes) of a variant's node id; ExploreError when it is not one."""
    head, sep, tail = nodeid.rpartition(SEP + "{")
    if not sep or not head:
        raise ExploreError(f"not an explored case: {nodeid!r} (expected NODEID{SEP}{{\"name\": value, ...}})")
    try:
        changes = jsonio.loads("{" + tail)       # a name given twice is refused: which value is meant?
    except ValueError as exc:
        raise ExploreError(f"the changed values of {nodeid!r} are not JSON: {exc}") from None
    if not isinstance(changes, dict) or not changes:
        raise ExploreError(f"the changed values of {nodeid!r} must be a non-empty JSON object")
    for name, value in changes.items():
        if not (is_int(value) or (isinstance(value, list) and all(is_int(v) for v in value))):
            raise ExploreError(f"{nodeid!r}: {name} must be an integer or a list of integers, got {value!r}")
    return head, changes


def applied(original: Any, new: Any) -> Any:
    """`new` (from JSON) in the original's type: a tuple stays a tuple, an int an int."""
    if isinstance(original, tuple) and isinstance(new, list):
        return tuple(new)
    return new


def rerun_command(args: Sequence[str], positional: Sequence[str], case: str) -> str:
    """The command that runs exactly one explored case: the run's own arguments, less its test paths, -k/-m
    selections and explore options, plus --gpu-memsafety-explore-case CASE."""
    import shlex
    drop_value = {"-k", "-m", "--gpu-memsafety-explore-case", "--gpu-memsafety-explore-variants",
                  "--gpu-memsafety-explore-seconds", "--gpu-memsafety-explore-run-variants",
                  "--gpu-memsafety-explore-run-seconds", "--gpu-memsafety-report-dir", "--junitxml", "--junit-xml"}
    drop_flag = {"--gpu-memsafety-explore"}
    positional = set(positional)
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in drop_value:
            skip = "=" not in arg and not (len(name) == 2 and len(arg) > 2)
            continue
        if name in drop_flag or arg in positional:
            continue
        if len(arg) > 2 and arg[:2] in ("-k", "-m") and not arg.startswith("--"):
            continue
        out.append(arg)
    return shlex.join(["pytest", *out, "--gpu-memsafety-explore-case", case])
