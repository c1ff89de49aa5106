"""ci/gpu/suite_outcomes.py: the suite's junit.xml as {test id: outcome}, and two such tables compared case by case
(the H200 check that `make test` outcomes are unchanged across commits, ci/gpu/suite_check.sh)."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

spec = importlib.util.spec_from_file_location("suite_outcomes", ROOT / "ci" / "gpu" / "suite_outcomes.py")
assert spec is not None and spec.loader is not None
outcomes_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(outcomes_module)

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_ok" time="0.1"/>
<testcase classname="tests.test_a" name="test_bad[x-1]" time="0.1"><failure message="boom">tb</failure></testcase>
<testcase classname="tests.test_a" name="test_bad[x-1]" time="0.1"><error message="teardown">tb</error></testcase>
<testcase classname="tests.gpu.test_b" name="test_gpu" time="0"><skipped message="needs a CUDA GPU"/></testcase>
<testcase classname="tests.test_c.TestThing" name="test_method" time="0"><error message="setup">tb</error></testcase>
</testsuite></testsuites>"""


def test_each_testcase_is_its_node_id_and_outcome_and_a_teardown_error_keeps_the_failure(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    assert outcomes_module.outcomes(str(path)) == {
        "tests/test_a.py::test_ok": "passed", "tests/test_a.py::test_bad[x-1]": "failed",
        "tests/gpu/test_b.py::test_gpu": "skipped", "tests/test_c.py::test_method": "error"}


def test_compare_lists_changed_outcomes_and_tests_only_one_side_has(tmp_path: Path) -> None:
    before = {"t::a": "passed", "t::b": "failed", "t::gone": "passed", "t::gone_bad": "failed"}
    after = {"t::a": "failed", "t::b": "failed", "t::new": "skipped"}
    (tmp_path / "b.json").write_text(json.dumps(before))
    (tmp_path / "a.json").write_text(json.dumps(after))
    proc = subprocess.run([sys.executable, str(ROOT / "ci" / "gpu" / "suite_outcomes.py"), "compare",
                           str(tmp_path / "b.json"), str(tmp_path / "a.json")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "in both: 2; outcome differs: 1" in lines and "  t::a: passed -> failed" in lines
    assert "only before: 2 {'passed': 1, 'failed': 1}" in lines and "  t::gone_bad: failed" in lines
    assert "  t::gone: passed" not in lines
    assert "only after: 1 {'skipped': 1}" in lines and "  t::new: skipped" in lines


def test_a_test_whose_module_moved_folders_is_compared_with_itself() -> None:
    before = {"tests/test_a.py::t": "passed", "tests/test_a.py::u": "passed", "tests/test_b.py::t": "passed",
              "tests/test_gone.py::t": "passed", "tests/test_twice.py::t": "passed"}
    after = {"tests/util/test_a.py::t": "passed", "tests/util/test_a.py::u": "failed", "tests/test_b.py::t": "passed",
             "tests/x/test_twice.py::t": "passed", "tests/y/test_twice.py::t": "passed"}
    lines = outcomes_module.compare(before, after)
    assert "in both: 3; outcome differs: 1" in lines and "moved to another folder: 2 (matched by module file and test name)" in lines
    assert "  tests/test_a.py::u: passed -> failed (now tests/util/test_a.py::u)" in lines
    # a file name two folders hold after is no move: each is listed as only one side's
    assert "only before: 2 {'passed': 2}" in lines and "only after: 2 {'passed': 2}" in lines
