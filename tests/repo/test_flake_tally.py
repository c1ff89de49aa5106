"""ci/gpu/flake_tally.py: the flake tally of the archived H200 runs counts what it says it counts.

Fake evidence folders: a baseline, a full default run whose wild write moved its byte count (the same identity, so
not a difference), a full run with an outcome that differs, a run of some scenarios (compared on the cases both
ran, in a table of its own), and a run of another mode (left out)."""
from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path

from gpu_memsafety.util.paths import CHECKOUT as ROOT

spec = importlib.util.spec_from_file_location("flake_tally", ROOT / "ci" / "gpu" / "flake_tally.py")
tally = importlib.util.module_from_spec(spec)
sys.modules["flake_tally"] = tally          # dataclasses look their module up while the class is made
assert spec.loader is not None
spec.loader.exec_module(tally)

WILD = {"detector": "memcheck", "kind": "overwrite", "kernel": "k", "buffer": "unattributed", "region": "unattributed",
        "bytes": 49152, "exact": True}


def case(cid: str, outcome: str = "clean", findings: tuple[dict, ...] = (), lost: bool = False) -> dict:
    return {"id": cid, "outcome": outcome, "failed": outcome not in ("clean", "expected finding"),
            "findings": list(findings), "details": {"memcheck_lost_record": [{"load": 3}]} if lost else {}}


def report(path: Path, cases: list[dict], *, mode: str = "complete", argv: tuple[str, ...] = ("scenarios",),
           workers: int = 8, commit: str = "abc1234") -> None:
    path.mkdir(parents=True)
    doc = {"run": {"mode": mode, "argv": list(argv), "workers": workers, "wall_s": 99.5},
           "summary": {"status": "failed" if any(c["failed"] for c in cases) else "passed"}, "cases": cases}
    (path / "report.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    (path.parent / "COMMAND.md").write_text(f"# run\n\nCommit: {commit}. ...\n")


def test_the_tally_counts_outcomes_and_identities_not_moved_counts(tmp_path: Path) -> None:
    base = [case("a"), case("b", "expected finding", (WILD,)), case("c")]
    report(tmp_path / "run27-x" / "cold", base)
    moved = {**WILD, "bytes": 48640, "exact": False}
    report(tmp_path / "run30-y" / "1-default", [case("a"), case("b", "expected finding", (moved,), lost=True), case("c")])
    report(tmp_path / "run31-z" / "1-default", [case("a", "finding"), case("b", "expected finding", (WILD,)), case("c")],
           workers=16, commit="def5678")
    report(tmp_path / "run32-w" / "n16-1", [case("b", "expected finding", (WILD,))],
           argv=("scenarios", "--gpu-memsafety-scenario", "b"), workers=16)
    report(tmp_path / "run33-v" / "mode-guard", base, mode="guard")
    report(tmp_path / "run20-old" / "cold", [case("a", "finding"), case("b"), case("c")])     # before FIRST_RUN
    whole = tally.rows(tmp_path, tmp_path / "run27-x" / "cold" / "report.json.gz")
    assert [(r.evidence, r.run) for r in whole] == [("run27-x", "cold"), ("run30-y", "1-default"), ("run31-z", "1-default")]
    moved_run = whole[1]
    assert (moved_run.outcome_differs, moved_run.findings_differ, moved_run.lost, moved_run.lost_found) == (0, 0, 1, 1)
    assert moved_run.moved and "49152 -> 48640 B" in moved_run.moved[0]
    differs = whole[2]
    assert (differs.failed, differs.outcome_differs, differs.workers, differs.commit) == (1, 1, 16, "def5678")
    some = tally.rows(tmp_path, tmp_path / "run27-x" / "cold" / "report.json.gz", want="some")
    assert [(r.run, r.outcome_differs) for r in some] == [("n16-1", 0)]          # compared on case b only
    text = tally.render(whole, some)
    assert "Default workers (8): 2 runs, 0 failed cases" in text and "Twice the workers (16): 1 runs, 1 failed" in text
    assert "## Runs of the two scenarios" in text and "49152 -> 48640 B" in text


def test_a_finding_whose_identity_changed_is_named_with_before_and_after(tmp_path: Path) -> None:
    """A kernel renamed (the inlined atomicAdd that memcheck named until the outermost frame was taken) counts as a
    difference and the tally says which case, what run 27 had and what the run has."""
    was = {**WILD, "kernel": "atomicAdd", "buffer": "dst", "region": "past_end", "bytes": 4}
    report(tmp_path / "run27-x" / "cold", [case("a", "expected finding", (was,)), case("b")])
    report(tmp_path / "run46-y" / "1-default", [case("a", "expected finding", ({**was, "kernel": "planted"},)), case("b")])
    rows = tally.rows(tmp_path, tmp_path / "run27-x" / "cold" / "report.json.gz")
    assert rows[1].findings_differ == 1 and rows[0].changed == ()
    assert rows[1].changed == ("a: run 27 memcheck:overwrite:atomicAdd:dst:past_end:4; "
                               "now memcheck:overwrite:planted:dst:past_end:4",)
    assert "- a: run 27 memcheck:overwrite:atomicAdd" in tally.render(rows) and "(run46-y/1-default)" in tally.render(rows)
