"""Every JSON input refuses an object that names a key twice (gpu_memsafety.util.jsonio): Python's json would
keep the last value without a word, so a baseline with `"accepted"` twice accepted every finding of its last list."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_memsafety.judge.baseline import BaselineError, load_baseline
from gpu_memsafety.report import ReportError, build_report, load_report, report_json_text
from gpu_memsafety.util import jsonio
from repo_paths import ROOT


def test_the_loader_refuses_a_key_twice_at_any_depth() -> None:
    with pytest.raises(jsonio.DuplicateKeyError, match="'a' appears twice"):
        jsonio.loads('{"x": [{"a": 1, "a": 2}]}')
    assert jsonio.loads('{"a": {"a": 1}}') == {"a": {"a": 1}}   # the same key in two objects is fine
    with pytest.raises(ValueError, match="NaN"):
        jsonio.loads('[NaN]')


def test_a_baseline_with_accepted_twice_is_refused_naming_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text('{"schema": "gpu-memsafety-baseline/1", "accepted": [], "accepted": '
                    '[{"case": "s[v]", "finding": "memcheck:overread:k:out:past_end:4", "reason": "r"}]}')
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    assert str(path) in str(info.value) and "'accepted' appears twice" in str(info.value)


def test_a_report_with_a_key_twice_is_refused(tmp_path: Path) -> None:
    text = report_json_text(build_report([], {"hostname": "h"}, started="s", finished="f", argv=[]))
    path = tmp_path / "report.json"
    path.write_text(text.replace('"schema":', '"summary": {}, "schema":', 1))
    with pytest.raises(ReportError) as info:
        load_report(path)
    assert str(path) in str(info.value) and "'summary' appears twice" in str(info.value)
    json.loads(path.read_text())   # the stdlib alone would have read it


def test_job_and_result_files_go_through_the_one_loader() -> None:
    """No module reads JSON input with json.loads directly: one loader, one rule."""
    root = ROOT
    offenders = []
    for folder in ("harness", "fixtures", "tools", "ci", "kernels", "scenarios"):
        for path in (root / folder).rglob("*.py"):
            if path.name == "jsonio.py" or path.parts[-2] == "example":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if ("json.loads(" in line or "json.load(" in line) and "jsonio." not in line \
                        and "json.loads(proc.stdout)" not in line \
                        and not line.lstrip().startswith(("#", '"', "'")) and "json.dumps" not in line \
                        and "'''" not in line and "{{" not in line:
                    offenders.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    # cli/new.py: the generated test's own code; json.loads(proc.stdout): the JSON a child we ran printed
    assert not [o for o in offenders if "cli/new.py" not in o], "\n".join(offenders)


@pytest.mark.e2e
def test_the_scripts_refuse_a_key_twice(tmp_path: Path) -> None:
    """Issue 53: tools/results.py and ci/gpu/suite_outcomes.py kept the last of two equal keys."""
    import subprocess
    import sys
    root = ROOT
    one, two = tmp_path / "a.json", tmp_path / "b.json"
    one.write_text('{"tests/t.py::x": "passed", "tests/t.py::x": "failed"}')
    two.write_text('{"tests/t.py::x": "passed"}')
    proc = subprocess.run([sys.executable, str(root / "ci" / "gpu" / "suite_outcomes.py"), "compare", str(one), str(two)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "appears twice" in proc.stderr, proc.stdout + proc.stderr
    run = tmp_path / "evidence" / "h200" / "run1"
    run.mkdir(parents=True)
    (run / "COMMAND.md").write_text("# a run\n")
    (run / "report.json").write_text('{"summary": {"status": "passed"}, "summary": {"status": "failed"}}')
    proc = subprocess.run([sys.executable, str(root / "tools" / "results.py"), str(tmp_path / "evidence"),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "'summary' appears twice" in proc.stderr, proc.stdout + proc.stderr
    assert not (tmp_path / "out" / "h200" / "run1.md").exists()
