"""The harness's own test suite, test by test, from pytest's junit.xml: `outcomes` writes {test id: outcome}
(passed, failed, error, skipped), `compare` lists what differs between two such files (ci/gpu/suite_check.sh).

    python3 ci/gpu/suite_outcomes.py outcomes junit.xml > outcomes.json
    python3 ci/gpu/suite_outcomes.py compare before.json after.json

A test id is the junit testcase's classname and name as pytest's node id (`tests/test_x.py::test_y[p]`). A test
whose module moved to another folder (tests/test_x.py -> tests/util/test_x.py) is the same test on both sides,
matched by its module's file name and its own name where each side has that pair once (the suite keeps test module
basenames unique: tests/repo/test_tests_layout.py); any other test only one side has is listed as such, never
counted as a difference of outcome. Stdlib only: it runs with the device image's python before any bootstrap.
"""
from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any


sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from project_json import jsonio  # noqa: E402  (the one strict JSON reader, by its path)


def outcomes(junit_path: str) -> dict[str, str]:
    table: dict[str, str] = {}
    for case in ET.parse(junit_path).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        module = "/".join(parts[:-1] if parts and parts[-1][:1].isupper() else parts) + ".py"
        node = f"{module}::{case.get('name', '')}"
        kinds = {child.tag for child in case}
        outcome = ("failed" if "failure" in kinds else "error" if "error" in kinds
                   else "skipped" if "skipped" in kinds else "passed")
        if table.get(node) in ("failed", "error"):       # an error in teardown after a failure: keep the failure
            continue
        table[node] = outcome
    return table


def _file_and_name(node: str) -> str:
    module, sep, test = node.partition("::")
    return module.rsplit("/", 1)[-1] + sep + test


def moved(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    """{id before: id after} for the tests only one side has under its id whose module moved folders: the same
    module file name and test name, once on each side."""
    def once(ids: set[str]) -> dict[str, str]:
        seen = Counter(_file_and_name(t) for t in ids)
        return {_file_and_name(t): t for t in ids if seen[_file_and_name(t)] == 1}
    old, new = once(set(before) - set(after)), once(set(after) - set(before))
    return {old[key]: new[key] for key in sorted(old.keys() & new.keys())}


def compare(before: dict[str, str], after: dict[str, str]) -> list[str]:
    lines = [f"before: {len(before)} tests {dict(Counter(before.values()))}",
             f"after:  {len(after)} tests {dict(Counter(after.values()))}"]
    pairs = {t: t for t in set(before) & set(after)}
    moves = moved(before, after)
    pairs.update(moves)
    both = sorted(pairs)
    changed = [t for t in both if before[t] != after[pairs[t]]]
    lines.append(f"in both: {len(both)}; outcome differs: {len(changed)}")
    lines.append(f"moved to another folder: {len(moves)} (matched by module file and test name)")
    lines += [f"  {t}: {before[t]} -> {after[pairs[t]]}" + (f" (now {pairs[t]})" if pairs[t] != t else "")
              for t in changed]
    only_before, only_after = set(before) - set(pairs), set(after) - set(pairs.values())
    for name, only in (("only before", sorted(only_before)), ("only after", sorted(only_after))):
        lines.append(f"{name}: {len(only)} {dict(Counter((before if name == 'only before' else after)[t] for t in only))}")
        lines += [f"  {t}: {(before if name == 'only before' else after)[t]}" for t in only
                  if (before if name == "only before" else after)[t] != "passed"]
    return lines


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "outcomes":
        json.dump(outcomes(argv[1]), sys.stdout, indent=1, sort_keys=True)
        print()
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        tables = []
        for path in argv[1:3]:
            try:
                tables.append(jsonio.loads(Path(path).read_text(encoding="utf-8")))
            except ValueError as exc:       # not JSON, or a test named twice: which outcome is meant?
                print(f"suite_outcomes: {path}: {exc}", file=sys.stderr)
                return 2
        print("\n".join(compare(*tables)))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
