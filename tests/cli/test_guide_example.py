"""docs/writing-a-scenario.md, run as written: its example is a directory outside the repository.

The guide's scenario and kernel module are the files in harness/gpu_memsafety/cli/example/ (the guide shows them verbatim: the
first test checks that). They are copied into a fresh directory outside the repository that holds only those
two files (no sitecustomize, no PYTHONPATH), and the guide's commands run on the CPU (Triton's interpreter,
guard markers): `make sanitize SCENARIO_PATH=...`, its pytest equivalent, `python -m gpu_memsafety list`, a
first run without expectations (a failing finding that prints the command rerunning it, which is then run),
and the baseline that accepts it. `python -m gpu_memsafety new` is checked the same way: its output passes as
generated.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.util.paths import CHECKOUT
from gpu_memsafety.scenario import registry

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

ROOT = CHECKOUT
GUIDE = ROOT / "docs" / "writing-a-scenario.md"
EXAMPLE = ROOT / "harness" / "gpu_memsafety" / "cli" / "example"
FILES = ("scale_store.py", "scale_kernel.py")
NAME = "scale_store"


def clean_env() -> dict[str, str]:
    """The user's shell: no PYTHONPATH, no scenario path variable, not inside this pytest run."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("PYTEST") and k not in ("PYTHONPATH", registry.ENV_VAR, "TRITON_INTERPRET")}


def run(argv: list[str], *, timeout: float = 600, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=str(cwd), env=clean_env(), capture_output=True, text=True, timeout=timeout)


def user_dir(base: Path, *, edit: tuple[str, str] | None = None) -> Path:
    """A directory outside the repository holding only the example's scenario and kernel module."""
    directory = base / "my-kernels"
    directory.mkdir()
    for name in FILES:
        shutil.copy(EXAMPLE / name, directory / name)
    if edit is not None:
        path = directory / "scale_store.py"
        text = path.read_text()
        assert edit[0] in text, f"the guide's edit {edit[0]!r} no longer applies to harness/gpu_memsafety/cli/example/scale_store.py"
        path.write_text(text.replace(edit[0], edit[1]))
    assert not directory.resolve().is_relative_to(ROOT)
    assert sorted(p.name for p in directory.iterdir()) == sorted(FILES)
    return directory


def cases(report_dir: Path) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in json.loads((report_dir / "report.json").read_text())["cases"]}


def check_found_and_clean(report_dir: Path) -> None:
    """The buggy variant's 4 bytes past `out` are found at their exact offsets; the fixed variant is clean."""
    got = cases(report_dir)
    assert {cid: c["outcome"] for cid, c in got.items()} == {
        "scale_store[buggy-n1000]": "expected finding", "scale_store[buggy-n4096]": "expected finding",
        "scale_store[fixed-n1000]": "clean", "scale_store[fixed-n4096]": "clean"}
    for n in (1000, 4096):
        [finding] = got[f"scale_store[buggy-n{n}]"]["findings"]
        assert (finding["detector"], finding["kind"], finding["buffer"], finding["region"], finding["bytes"]) == (
            "guard", "overwrite", "out", "past_end", 4)
        assert [(r["start"], r["end"]) for r in finding["ranges"]] == [(4 * n, 4 * n + 4)]
        assert finding["ranges"][0]["logical"] == f"out[{n}], 1 element(s) past the end"
        assert got[f"scale_store[fixed-n{n}]"]["findings"] == []


def guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


# -------------------------------------------------------------------------------------- the guide itself

def test_the_guide_shows_the_example_files_verbatim() -> None:
    """Each `<!-- file: harness/gpu_memsafety/cli/example/X -->` marker is followed by a code block equal to that file."""
    text = guide()
    shown = dict(re.findall(r"<!-- file: (harness/gpu_memsafety/cli/example/[\w.]+) -->\n```(?:python|json)\n(.*?)```\n", text, flags=re.S))
    assert sorted(shown) == sorted(f"harness/gpu_memsafety/cli/example/{name}" for name in (*FILES, "baseline.json"))
    for path, block in shown.items():
        assert block == (ROOT / path).read_text(), f"{path} and its copy in the guide differ: update the guide"


def test_the_guide_commands_are_the_ones_tested() -> None:
    text = guide()
    for command in ('make sanitize MODE=guard SCENARIO_PATH=~/my-kernels PYTEST_ARGS="--gpu-memsafety-scenario scale_store"',
                    ".venv/bin/python -m pytest scenarios --gpu-memsafety-scenario-path ~/my-kernels --gpu-memsafety-scenario scale_store --gpu-memsafety-mode guard",
                    ".venv/bin/python -m gpu_memsafety list --scenario-path ~/my-kernels",
                    "--gpu-memsafety-baseline harness/gpu_memsafety/cli/example/baseline.json",
                    "python -m gpu_memsafety new"):
        assert command in text, f"the guide no longer shows {command!r}"
    for region in ("before_start", "past_end", "row_padding", "unused_row", "inside"):
        assert f"`{region}`" in text
    assert "docs/writing-a-scenario.md" in (ROOT / "README.md").read_text(), "README does not point to the guide"


# --------------------------------------------------------------------------------- the guide's commands

def test_make_sanitize_with_scenario_path_finds_the_planted_overwrite(tmp_path: Path) -> None:
    mine = user_dir(tmp_path)
    venv = Path(sys.prefix)
    proc = run(["make", "-C", str(ROOT), "-o", f"{venv}/.bootstrap-gpu", "sanitize", f"VENV={venv}", "MODE=guard",
                f"SCENARIO_PATH={mine}", f"REPORTS={tmp_path / 'reports'}", f"PYTEST_ARGS=--gpu-memsafety-scenario {NAME}"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    check_found_and_clean(tmp_path / "reports")


def test_pytest_with_scenario_path_finds_the_planted_overwrite(tmp_path: Path) -> None:
    mine = user_dir(tmp_path)
    proc = run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "--gpu-memsafety-scenario-path", str(mine),
                "--gpu-memsafety-scenario", NAME, "--gpu-memsafety-mode", "guard", "--gpu-memsafety-report-dir", str(tmp_path / "reports")])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    check_found_and_clean(tmp_path / "reports")
    assert f"{(mine / 'scale_store.py').resolve()}::scale_store[buggy-n1000]" in run(
        [sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "--gpu-memsafety-scenario-path", str(mine),
         "--collect-only", "-q", "-m", "smoke"]).stdout


def test_scenario_paths_in_the_users_pytest_ini(tmp_path: Path) -> None:
    mine = user_dir(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text(f"[pytest]\ngpu_memsafety_scenario_paths = {os.path.relpath(mine, project)}\n")
    proc = run([sys.executable, "-m", "pytest", "scenarios", "-c", str(project / "pytest.ini"), "-p", "no:cacheprovider",
                "--gpu-memsafety-scenario", NAME, "--gpu-memsafety-mode", "guard", "--gpu-memsafety-report-dir", str(tmp_path / "reports")])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    check_found_and_clean(tmp_path / "reports")
    listed = run([sys.executable, "-m", "gpu_memsafety", "--config", str(project / "pytest.ini"), "list", "--ids",
                  "--scenario", NAME])
    assert listed.stdout.split() == sorted(cases(tmp_path / "reports")), listed.stderr


def test_harness_list_with_scenario_path_lists_it(tmp_path: Path) -> None:
    mine = user_dir(tmp_path)
    proc = run([sys.executable, "-m", "gpu_memsafety", "list", "--scenario-path", str(mine)])
    assert proc.returncode == 0, proc.stderr
    assert f"{NAME}: vector scale whose buggy twin stores one element past the end of out" in proc.stdout
    assert f"({(mine / 'scale_store.py').resolve()})" in proc.stdout
    assert "  scale_store[buggy-n1000]  [smoke]" in proc.stdout.splitlines()
    assert "planted_oob[overwrite-triton-n4000-x1]" in proc.stdout       # the same set as everywhere


NO_EXPECTATION = ("    if not SCENARIO.variant(case).buggy:\n        return Expectation()",
                  "    if True:\n        return Expectation()")


def test_a_first_run_without_expectations_fails_and_prints_the_command_that_reruns_it(tmp_path: Path) -> None:
    mine = user_dir(tmp_path, edit=NO_EXPECTATION)
    proc = run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "--gpu-memsafety-scenario-path", str(mine),
                "--gpu-memsafety-case", "scale_store[buggy-n1000]", "--gpu-memsafety-mode", "guard"])
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert "outcome = finding" in proc.stdout
    assert "out[1000], 1 element(s) past the end" in proc.stdout
    rerun = re.search(r"^rerun this case: (.*)$", proc.stdout, flags=re.M)
    assert rerun, proc.stdout[-3000:]
    assert f"-m gpu_memsafety repro 'scale_store[buggy-n1000]' --mode guard --scenario-path {shlex.quote(str(mine.resolve()))}" in rerun.group(1)
    again = run(["bash", "-c", rerun.group(1)], cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "[guard] scale_store[buggy-n1000]: finding" in again.stdout
    failure = proc.stdout[proc.stdout.index("outcome = finding"):]
    for line in ("outcome = finding", "expected = clean", "detector guard = ran: markers verified",
                 "finding = guard overwrite of out past_end: 4 B in 1 changed range by scale_buggy; ranges: "
                 "+4000..+4004 (out[1000], 1 element(s) past the end)",
                 "unexpected: guard overwrite of out/past_end 4 B by scale_buggy"):
        assert line in failure, f"the run no longer prints {line!r}"
        assert f"    {line}" in guide(), f"the guide's sample output no longer shows {line!r}: update it"
    assert "rerun this case: cd " in guide() and "-m gpu_memsafety repro 'scale_store[buggy-n1000]' --mode guard" in guide()


def test_the_guides_baseline_accepts_that_finding(tmp_path: Path) -> None:
    mine = user_dir(tmp_path, edit=NO_EXPECTATION)
    proc = run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "--gpu-memsafety-scenario-path", str(mine),
                "--gpu-memsafety-scenario", NAME, "--gpu-memsafety-mode", "guard", "--gpu-memsafety-baseline", str(EXAMPLE / "baseline.json"),
                "--gpu-memsafety-report-dir", str(tmp_path / "reports")])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    got = cases(tmp_path / "reports")
    for n in (1000, 4096):
        assert got[f"scale_store[buggy-n{n}]"]["outcome"] == "expected finding"
        assert got[f"scale_store[buggy-n{n}]"]["message"].startswith("accepted by baseline")
        assert got[f"scale_store[fixed-n{n}]"]["outcome"] == "clean"


# ------------------------------------------------------------------------------------- python -m gpu_memsafety new

def test_harness_new_output_passes_as_generated(tmp_path: Path) -> None:
    target = tmp_path / "generated"
    made = run([sys.executable, "-m", "gpu_memsafety", "new", "my_first", "--path", str(target)])
    assert made.returncode == 0, made.stderr
    assert sorted(p.name for p in target.iterdir()) == ["my_first.py", "my_first_kernel.py", "test_my_first.py"]
    proc = run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(target / "test_my_first.py")],
               cwd=target, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert "2 passed" in proc.stdout
    sanitize = run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "--gpu-memsafety-scenario-path", str(target),
                    "--gpu-memsafety-scenario", "my_first", "--gpu-memsafety-mode", "guard", "-q", "--gpu-memsafety-report-dir", str(tmp_path / "reports")])
    assert sanitize.returncode == 0, sanitize.stdout[-3000:]
    assert {cid: c["outcome"] for cid, c in cases(tmp_path / "reports").items()} == {
        "my_first[buggy-n1000]": "expected finding", "my_first[buggy-n4096]": "expected finding",
        "my_first[fixed-n1000]": "clean", "my_first[fixed-n4096]": "clean"}
