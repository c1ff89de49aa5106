"""tools/results.py: one short summary per measured run, generated from the run's folder; and the product tree
carries no run output outside results/ and tests/data (issue 43)."""
from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_memsafety.util.paths import CHECKOUT as ROOT

spec = importlib.util.spec_from_file_location("results_tool", ROOT / "tools" / "results.py")
results = importlib.util.module_from_spec(spec)
sys.modules["results_tool"] = results          # dataclasses look their module up while the class is made
assert spec.loader is not None
spec.loader.exec_module(results)

COMMAND = """# Run 50: `make sanitize` at abc1234 (H200)

Commit: abc1234. Carried `.vendor/`:

    OUT=$OUT PART=seq bash ci/gpu/complete_check.sh

| run | wall |
|---|---|
| 1-default | 99.3 s |

**10 runs passed** in a row.
Other prose that is no figure.
"""


def test_a_run_folder_becomes_a_summary_with_its_command_commit_and_figures(tmp_path: Path) -> None:
    run = tmp_path / "evidence" / "h200" / "run50-x"
    (run / "1-default").mkdir(parents=True)
    (run / "COMMAND.md").write_text(COMMAND)
    (run / "runs.txt").write_text("== 1-default: wall_s=99.3 status=passed\n")
    (run / "score.txt").write_text("case lines\n== totals\nfound : 8/8\n")
    report = {"summary": {"status": "passed", "total": 3, "counts": {"clean": 2, "expected finding": 1, "crashed": 0}},
              "run": {}, "cases": []}
    (run / "1-default" / "report.json.gz").write_bytes(gzip.compress(json.dumps(report).encode()))
    assert results.main([str(tmp_path / "evidence"), str(tmp_path / "results")]) == 0
    text = (tmp_path / "results" / "h200" / "run50-x.md").read_text()
    assert text.startswith("# Run 50: `make sanitize` at abc1234 (H200)\n")
    assert "Commit: abc1234\n" in text
    assert "    OUT=$OUT PART=seq bash ci/gpu/complete_check.sh\n" in text
    assert "| 1-default | 99.3 s |" in text and "**10 runs passed** in a row." in text
    assert "Other prose" not in text
    assert "    found : 8/8" in text and "== 1-default: wall_s=99.3" in text
    assert "- `1-default/report.json.gz`: passed, 3 cases: clean 2, expected finding 1\n" in text


def test_a_run_folder_without_command_md_is_named_and_not_summarised(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "evidence" / "cpu" / "heldout1-session1").mkdir(parents=True)
    assert results.main([str(tmp_path / "evidence"), str(tmp_path / "results")]) == 1
    assert "heldout1-session1 has no COMMAND.md" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


@pytest.mark.e2e
def test_no_run_output_is_tracked_outside_results_and_tests_data() -> None:
    """Run outputs (reports, COMMAND.md run notes, sanitizer logs, score files) live on the evidence-archive
    branch; the tree keeps the summaries (results/, at most 2 MB) and the samples tests read (tests/data)."""
    proc = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"git ls-files failed in {ROOT}: {proc.stderr.strip()} (run the tests from a git checkout)")
    files = [f for f in proc.stdout.split("\0") if f]
    run_output = ("report.json", "report.json.gz", "COMMAND.md", "runs.txt", "steps.txt", "env.txt")
    stray = [f for f in files if Path(f).name in run_output or f.endswith((".tgz", ".log"))
             or f.startswith("evidence/")]
    stray = [f for f in stray if not f.startswith(("results/", "tests/data/"))]
    assert stray == []
    size = sum((ROOT / f).stat().st_size for f in files if f.startswith("results/") and (ROOT / f).is_file())
    assert 0 < size <= 2 * 1024 * 1024
