"""Judge a report.json of `pytest --gpu-memsafety --gpu-memsafety-explore` over this folder's test_shapes.py against
expected.py: every planted bug found by explore at the exact bytes of each explored shape that triggers it, nothing
found where the shape does not, no finding on any clean twin (`*_fixed`) at any shape, every listed case clean.

    python check.py REPORT.json [--reads-at-least]

--reads-at-least (a GPU's memcheck: it ends a kernel at a warp's first bad access, so a read is at least its first
bytes): a read counts when its bytes start where expected and lie inside the expected range. Writes are always exact
(the markers, or the trace). Prints one line per test function and exits 1 on any mismatch."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from gpu_memsafety.util import jsonio     # the one strict reader: a key named twice is refused

sys.path.insert(0, str(Path(__file__).resolve().parent))
from expected import EXPECT  # noqa: E402


def _function(case_id: str) -> str:
    name = case_id.split("::", 1)[1]
    return name.split("[", 1)[0].split("@", 1)[0]


def _buffer(f: dict) -> str:
    """The kernel argument a finding names: the trace's buffer is it (`x_ptr`); the GPU modes name the allocation
    (`alloc 252 B at test_shapes.py line 95`) and give the argument in the `tensor` detail."""
    details = f.get("details") or {}
    tensor = str(dict(details).get("tensor", "")) if isinstance(details, (dict, list)) else ""
    if tensor.startswith("kernel argument `"):
        return tensor[len("kernel argument `"):].split("`", 1)[0]
    return f["buffer"]


def _got(case: dict) -> list[tuple]:
    out = []
    for f in case["findings"]:
        for r in f.get("ranges", ()):
            out.append((f["kind"], _buffer(f), f["region"], r["start"], r["end"]))
    return sorted(out)


def _matches(got: list[tuple], want: list[tuple], reads_at_least: bool) -> bool:
    if not reads_at_least:
        return got == sorted(want)
    if len(got) != len(want):
        return False
    for g, w in zip(got, sorted(want)):
        if g[:3] != w[:3]:
            return False
        if g[0] == "overwrite" and g != w:
            return False
        if g[0] == "overread" and not (g[3] == w[3] and g[4] <= w[4]):
            return False
    return True


def check(doc: dict, reads_at_least: bool = False) -> tuple[list[str], list[str]]:
    """(lines, problems)."""
    per: dict[str, dict] = {}
    problems: list[str] = []
    for case in doc["cases"]:
        fn = _function(case["id"])
        bug = fn[: -len("_fixed")] if fn.endswith("_fixed") else fn
        if bug not in EXPECT:
            problems.append(f"{case['id']}: not a test of this calibration")
            continue
        row = per.setdefault(fn, {"cases": 0, "variants": 0, "found": 0, "exact": 0, "na": 0})
        row["cases"] += 1
        explore = case["details"].get("explore")
        got = _got(case)
        if explore is None:
            if got or case["outcome"] != "clean":
                problems.append(f"{case['id']}: a listed case must be clean, got {case['outcome']} {got}")
            continue
        row["variants"] += 1
        if case["outcome"] == "not applicable":
            row["na"] += 1
        want = [] if fn.endswith("_fixed") else EXPECT[bug](explore["params"])
        if case["outcome"] == "not applicable" and not got:
            continue                  # the test or its kernel refused the shape (a block that is not a power of 2)
        if want:
            row["found"] += bool(got)
        if _matches(got, want, reads_at_least):
            row["exact"] += bool(want)
        else:
            problems.append(f"{case['id']}: expected {want}, got {got} ({case['outcome']}: {case['message'][:300]})")
    lines = []
    for fn in EXPECT:
        for name in (fn, fn + "_fixed"):
            row = per.get(name)
            if row is None:
                problems.append(f"{name}: no case in the report")
                continue
            if name == fn and not row["found"]:
                problems.append(f"{name}: explore did not find its bug ({row['variants']} variant(s))")
            lines.append(f"{name}: {row['cases']} case(s), {row['variants']} explored, "
                         f"{row['found']} found ({row['exact']} at the expected bytes), {row['na']} not applicable")
    return lines, problems


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    doc = jsonio.loads(Path(argv[0]).read_text())
    lines, problems = check(doc, "--reads-at-least" in argv[1:])
    print("\n".join(lines))
    for p in problems:
        print("MISMATCH", p)
    print(f"{'OK' if not problems else 'FAILED'}: {len(problems)} mismatch(es)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
