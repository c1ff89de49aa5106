"""The shard manifest: what the N shards of one run share, and the check that a set of shard reports is that run.

Why this exists: `merge` folds shard reports into one table, and a table that reads complete must be complete.
Shards cut with different cost data split the matrix differently (a case lands in no shard, another in two);
shards of different modes, runs, matrices or harness versions are not one run at all. So every shard's report
carries the manifest of the whole run (`run.shard.manifest`): every case id of the matrix and their hash, the
mode and cover, the harness version and commit, the hash of the cost data the split was made from, and the run
group every shard was given. `check` accepts a group of shards only when their manifests agree and every case
of the matrix is in exactly one of them (ran, or listed as never started); anything else is named (each case
that ran nowhere or twice, each field two shards disagree on, each case no manifest lists) and makes the merge
"incomplete" or "inconsistent", never passed.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TypedDict

from gpu_memsafety.util import jsonio

# Fields every shard of one group must agree on, and what they are called in messages.
SHARED = {"count": "shard count", "matrix_hash": "matrix (case ids)", "mode": "mode", "cover": "cover",
          "harness_version": "harness version", "commit": "harness commit", "cost_hash": "cost data"}
# Case ids named in a sentence before "and N more" (merged.json lists every one).
IDS_SHOWN = 20
RUN_GROUP_ENV = "GPU_MEMSAFETY_RUN_GROUP"
# CI variables that name one run of a pipeline, shared by all of its jobs (a re-run of one failed job keeps it).
CI_RUN_VARS = ("GITHUB_RUN_ID", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID", "CIRCLE_WORKFLOW_ID", "BUILD_TAG")
MAX_GROUP_CHARS = 200


class Manifest(TypedDict):
    group: str              # the run group every shard of this run was given
    group_source: str       # where it came from: --gpu-memsafety-run-group, GPU_MEMSAFETY_RUN_GROUP, GITHUB_RUN_ID, ...
    matrix: list[str]       # every case id of the unsharded run, sorted
    matrix_hash: str        # sha256 of the ids (ids_hash)
    mode: str
    cover: str
    harness_version: str
    commit: str             # the checkout's git commit ("" when not run from a git checkout)
    cost_hash: str          # sha256 of the (id, expected seconds, alone) the split was made from


def ids_hash(ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


def costs_hash(costs: Iterable[tuple[str, float, bool]]) -> str:
    rows = sorted((cid, round(float(cost), 6), bool(alone)) for cid, cost, alone in costs)
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def harness_commit(checkout: Path | None) -> str:
    """`git rev-parse HEAD` of the checkout the harness runs from, "+dirty" when tracked files changed."""
    if checkout is None or not (checkout / ".git").exists():
        return ""
    def git(*args: str) -> str:
        try:
            out = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return out.stdout.strip() if out.returncode == 0 else ""
    head = git("rev-parse", "HEAD")
    if head and git("status", "--porcelain", "--untracked-files=no"):
        head += "+dirty"
    return head


class RunGroupError(ValueError):
    pass


def run_group(explicit: str | None, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(group, where it came from): --gpu-memsafety-run-group, else GPU_MEMSAFETY_RUN_GROUP, else a CI run id; ("", "") if none."""
    env = os.environ if environ is None else environ
    for value, source in [(explicit, "--gpu-memsafety-run-group"), (env.get(RUN_GROUP_ENV), RUN_GROUP_ENV),
                          *((env.get(var), var) for var in CI_RUN_VARS)]:
        if value is not None and value != "":
            return check_group(value, source), source
    return "", ""


def check_group(value: str, source: str) -> str:
    if not value.strip() or len(value) > MAX_GROUP_CHARS or not value.isprintable():
        raise RunGroupError(f"{source}: a run group is 1 to {MAX_GROUP_CHARS} printable characters, got {value!r}")
    return value


def build(*, ids: Sequence[str], cost_hash: str, mode: str, cover: str, group: str, group_source: str,
          harness_version: str, commit: str) -> Manifest:
    matrix = sorted(ids)
    return {"group": group, "group_source": group_source, "matrix": matrix, "matrix_hash": ids_hash(matrix),
            "mode": mode, "cover": cover, "harness_version": harness_version, "commit": commit,
            "cost_hash": cost_hash}


# --------------------------------------------------------------------------------------------------- check

@dataclass
class ShardCheck:
    """What a set of reports says about its shard groups. `incomplete`/`inconsistent`: one sentence per problem;
    `ran_nowhere`/`ran_twice`: every such case id, per group."""

    incomplete: list[str] = field(default_factory=list)
    inconsistent: list[str] = field(default_factory=list)
    ran_nowhere: dict[str, list[str]] = field(default_factory=dict)
    ran_twice: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    missing_shards: list[dict[str, Any]] = field(default_factory=list)   # per group: count, missing, counts_seen

    def to_json(self) -> dict[str, Any]:
        return {"incomplete": self.incomplete, "inconsistent": self.inconsistent, "ran_nowhere": self.ran_nowhere,
                "ran_twice": self.ran_twice}


@dataclass(frozen=True)
class ShardReport:
    label: str                       # how messages name the report (its file)
    report: Mapping[str, Any]

    @property
    def shard(self) -> Mapping[str, Any]:
        return self.report["run"]["shard"]

    @property
    def manifest(self) -> Mapping[str, Any] | None:
        value = self.shard.get("manifest")
        return value if isinstance(value, Mapping) else None

    def value(self, key: str) -> Any:
        if key == "count":
            return self.shard["count"]
        return (self.manifest or {}).get(key)

    def ids(self) -> list[str]:
        return [c["id"] for c in self.report["cases"]] + list(self.report.get("not_run", []))

    def failed(self) -> set[str]:
        return {c["id"] for c in self.report["cases"] if c["failed"]}


def check(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> ShardCheck:
    """Every shard group among `reports` (reports without run.shard are not shards and are left alone)."""
    result = ShardCheck()
    groups: dict[str, list[ShardReport]] = defaultdict(list)
    for label, report in reports:
        if report["run"].get("shard"):
            item = ShardReport(label, report)
            if item.manifest is None:
                result.inconsistent.append(f"{label}: shard {_index(item)} has no shard manifest (written by a harness "
                                           "before manifests): which cases it was cut from cannot be checked")
                continue
            groups[str(item.manifest.get("group") or "")].append(item)
    for group, items in sorted(groups.items()):
        _check_group(group, items, result)
    return result


def _index(item: ShardReport) -> str:
    return f"{item.shard['index']}/{item.shard['count']}"


def _check_group(group: str, items: list[ShardReport], result: ShardCheck) -> None:
    name = f"run group {group!r}" if group else "the shards without a run group"
    agreed = True
    for key, what in SHARED.items():
        values: dict[str, list[str]] = defaultdict(list)
        for item in items:
            values[json.dumps(item.value(key))].append(f"{item.label} (shard {_index(item)})")
        if len(values) > 1:
            agreed = False
            seen = "; ".join(f"{jsonio.loads(v)!r} in {', '.join(labels)}" for v, labels in values.items())
            result.inconsistent.append(f"{name}: the shards disagree on the {what}: {seen}")
    counts = sorted({int(item.shard["count"]) for item in items})
    present = {item.shard["index"] for item in items}
    absent = [i for i in range(1, counts[-1] + 1) if i not in present] if len(counts) == 1 else []
    if absent or len(counts) > 1:
        result.missing_shards.append({"group": group, "count": counts[-1], "missing": absent, "counts_seen": counts})
    if not agreed:
        return      # cases cannot be held against a matrix the shards do not share
    _check_cases(name, group, items, result)
    if absent:
        result.incomplete.append(f"{name}: no report for shard {', '.join(f'{i}/{counts[-1]}' for i in absent)}")


def _check_cases(name: str, group: str, items: list[ShardReport], result: ShardCheck) -> None:
    matrix = list((items[0].manifest or {}).get("matrix") or [])
    where: dict[str, list[str]] = defaultdict(list)
    failed: set[str] = set()
    for item in items:
        for cid in item.ids():
            where[cid].append(item.label)
        failed |= item.failed()
    known = set(matrix)
    nowhere = [cid for cid in matrix if cid not in where]
    twice = {cid: labels for cid, labels in sorted(where.items()) if cid in known and len(labels) > 1}
    # A failed case outside the matrix (a scenario file that could not be collected) fails the merge by itself.
    unknown = sorted(cid for cid in where if cid not in known and cid not in failed)
    if nowhere:
        result.ran_nowhere[group] = nowhere
        result.incomplete.append(f"{name}: {len(nowhere)} of the matrix's {len(matrix)} cases ran in no shard: "
                                 f"{_ids(nowhere)}")
    if twice:
        result.ran_twice[group] = twice
        named = [f"{cid} (in {' and '.join(labels)})" for cid, labels in twice.items()]
        result.inconsistent.append(f"{name}: {len(twice)} cases ran in more than one shard: {_ids(named)}")
    if unknown:
        result.inconsistent.append(f"{name}: {len(unknown)} cases are in no shard's matrix: {_ids(unknown)}")


def _ids(ids: Sequence[str]) -> str:
    more = len(ids) - IDS_SHOWN
    return ", ".join(ids[:IDS_SHOWN]) + (f" and {more} more (merged.json lists every one)" if more > 0 else "")
