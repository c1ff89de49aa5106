"""The report workflow through the real pytest plugin, on the CPU (tests/helpers/fake_kernels/fake_scenarios/fake_reports.py):
a failing run annotates GitHub and writes every format with the buffers' layouts; `baseline write` accepts its
findings with reasons left empty and the run refuses that file; with the reasons filled in the next run passes,
its accepted case reads "accepted: <reason>"; an entry for a case that no longer exists is listed as stale in
every format; `baseline check` and `render --pictures` work from the report alone."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.report.picture import BUFFERS
from repo_paths import FAKE_DIR, ROOT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

SCENARIO_FILE = FAKE_DIR / "fake_scenarios" / "fake_reports.py"
STRAY = "fake_reports[stray-n64]"
REASON = "the store loop's fix is upstream, not yet released"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "GITHUB_")) and k not in ("CI",)}     # not the outer run's
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), str(FAKE_DIR)]), **extra)
    return env


def sanitize(report_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", str(SCENARIO_FILE), "-p", "no:cacheprovider", "--gpu-memsafety-mode", "guard",
                           "--gpu-memsafety-report-dir", str(report_dir), "-rxX", *args], cwd=str(ROOT), env=_env(**env),
                          capture_output=True, text=True, timeout=300)


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpu_memsafety", *args], cwd=str(ROOT), env=_env(),
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The first run: `stray` writes into row padding and past the end; on GitHub Actions."""
    tmp = tmp_path_factory.mktemp("workflow")
    summary = tmp / "step-summary.md"
    proc = sanitize(tmp / "r1", GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
    return {"tmp": tmp, "proc": proc, "summary": summary, "report": json.loads((tmp / "r1" / "report.json").read_text())}


def test_a_failing_run_annotates_github_and_records_what_the_pictures_need(failing: dict[str, Any]) -> None:
    proc = failing["proc"]
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [line for line in proc.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 1
    assert errors[0].startswith("::error file=tests/helpers/fake_kernels/fake_scenarios/fake_reports.py,line=")
    assert f"title=gpu-memsafety%3A finding%3A {STRAY} (cpu)::" in errors[0]
    assert failing["summary"].read_text().startswith("## ❌ GPU memory safety — FAILED")
    report = failing["report"]
    assert report["run"]["scenarios"]["fake_reports"]["file"] == "tests/helpers/fake_kernels/fake_scenarios/fake_reports.py"
    assert report["run"]["root"] == ROOT.as_posix()
    [stray] = [c for c in report["cases"] if c["id"] == STRAY]
    assert {f["key"] for f in stray["findings"]} == {"guard:overwrite:fake_store:scale:row_padding:4",
                                                      "guard:overwrite:fake_store:out:past_end:1"}
    scale = stray["details"][BUFFERS]["scale"]
    assert scale["layout"]["rows"] == {"rows": 8, "row_bytes": 24, "row_stride": 32, "used_rows": 5}
    assert scale["first"] == "token 0, scale bytes 0..0"
    for name in ("junit.xml", "summary.md", "report.sarif", "report.html", "gl-code-quality-report.json"):
        assert (failing["tmp"] / "r1" / name).stat().st_size > 0


def test_the_pictures_render_from_the_report_alone(failing: dict[str, Any]) -> None:
    out = failing["tmp"] / "rendered"
    proc = harness("render", str(failing["tmp"] / "r1" / "report.json"), "-o", str(out), "--pictures")
    assert proc.returncode == 0, proc.stderr
    strip = (out / "pictures" / "fake_reports_stray-n64_-1.txt").read_text()
    assert "8 rows of 24 B every 32 B, 5 used" in strip
    assert "+88..+92 (4 B, row_padding[row 2]): token 2, scale bytes 24..27" in strip
    assert (out / "pictures" / "fake_reports_stray-n64_-1.svg").read_text().startswith("<svg ")
    assert (out / "report.html").is_file() and (out / "report.sarif").is_file()


def test_a_baseline_written_from_the_report_is_refused_until_filled_then_makes_the_run_pass(failing: dict[str, Any]) -> None:
    tmp = failing["tmp"]
    baseline = tmp / "baseline.json"
    written = harness("baseline", "write", str(tmp / "r1" / "report.json"), "-o", str(baseline))
    assert written.returncode == 0 and "2 accepted finding(s), 2 reason(s) to fill in" in written.stdout
    entries = json.loads(baseline.read_text())["accepted"]
    assert [e["reason"] for e in entries] == ["", ""] and all(e["seen"].startswith("guard overwrite of") for e in entries)
    refused = sanitize(tmp / "refused", "--gpu-memsafety-baseline", str(baseline))
    assert refused.returncode == 4 and "accepted[0].reason: is empty" in refused.stderr
    data = json.loads(baseline.read_text())
    for entry in data["accepted"]:
        entry["reason"] = REASON
    data["accepted"].append({"case": "fake_reports[removed-n64]", "finding": entries[0]["finding"], "reason": "old"})
    baseline.write_text(json.dumps(data))
    passed = sanitize(tmp / "r2", "--gpu-memsafety-baseline", str(baseline))
    assert passed.returncode == 0, passed.stdout[-3000:]
    assert f"XFAIL tests/helpers/fake_kernels/fake_scenarios/fake_reports.py::{STRAY} - accepted: {REASON}" in passed.stdout
    assert f"{STRAY} (cpu): accepted: {REASON}" in passed.stdout
    assert "fake_reports[removed-n64]: guard:overwrite:fake_store:out:past_end:1 (no such case any more)" in passed.stdout
    report = json.loads((tmp / "r2" / "report.json").read_text())
    [stray] = [c for c in report["cases"] if c["id"] == STRAY]
    assert stray["outcome"] == "expected finding" and {e["reason"] for e in stray["details"]["baseline"]} == {REASON}
    [stale] = report["run"]["baseline"]["stale"]
    assert (stale["case"], stale["why"]) == ("fake_reports[removed-n64]", "no such case any more")
    for name in ("summary.md", "junit.xml", "report.sarif", "report.html", "gl-code-quality-report.json"):
        assert "removed-n64" in (tmp / "r2" / name).read_text(), name
    checked = harness("baseline", "check", str(tmp / "r2" / "report.json"), "--baseline", str(baseline),
                      "--scenario-path", str(SCENARIO_FILE.parent))
    assert checked.returncode == 0 and "STALE entries: no such case any more" in checked.stdout
