"""Every numeric option of every command is bounded (gpu_memsafety.util.bounds): `simulate --gpus 1000000000`
planned a billion workers and never ended; an empty report made simulate divide by zero."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpu_memsafety.cli import simulate
from gpu_memsafety.report import build_report, report_json_text
from gpu_memsafety.util import bounds
from repo_paths import ROOT


def empty_report(tmp: Path) -> Path:
    path = tmp / "report.json"
    path.write_text(report_json_text(build_report([], {"hostname": "h"}, started="s", finished="f", argv=[])))
    return path


@pytest.mark.parametrize("argv, said", [
    (["--gpus", "1000000000"], "--gpus: expected an integer from 1 to 1,024"),
    (["--gpus", "0"], "--gpus: expected an integer from 1 to 1,024"),
    (["--gpus", "x"], "--gpus: expected an integer"),
    (["--gpus", ","], "--gpus: expected a comma-separated list"),
    (["--workers-per-gpu", "99999999"], "--workers-per-gpu: expected an integer from 0 to 256"),
])
def test_simulate_refuses_counts_out_of_range_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      argv: list[str], said: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        simulate.main([str(empty_report(tmp_path)), *argv])
    assert exit_info.value.code == 2
    assert said.split(": ", 1)[1] in capsys.readouterr().err


def test_simulate_of_a_report_without_cases_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert simulate.main([str(empty_report(tmp_path))]) == 2
    assert "nothing to simulate" in capsys.readouterr().err


def test_simulate_of_an_empty_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "report.json"
    path.write_text("")
    assert simulate.main([str(path)]) == 2
    assert "empty file" in capsys.readouterr().err


def test_every_bound_refuses_both_ends_and_names_the_option() -> None:
    for option, bound in bounds.BOUNDS.items():
        assert bounds.number(option, str(bound.low)) == bound.low
        assert bounds.number(option, str(bound.high)) == bound.high
        for bad in (str(bound.low - 1), str(bound.high + 1), "1e9", ""):
            with pytest.raises(bounds.BoundError, match=f"^{option}: expected an integer from"):
                bounds.number(option, bad)


def test_no_numeric_option_escapes_the_table() -> None:
    """Every `type=int`/`type=float` argparse option and every pytest option read as a number goes through
    bounds: a new one without a range fails here."""
    root = ROOT
    raw = [f"{p.relative_to(root)}:{n}" for folder in ("harness", "fixtures") for p in (root / folder).rglob("*.py")
           for n, line in enumerate(p.read_text().splitlines(), 1)
           if "type=int" in line or "type=float" in line or "int(config.getoption" in line]
    assert not raw, raw


@pytest.mark.e2e
@pytest.mark.parametrize("argv", [["--gpu-memsafety-batch-size", "1000000000"], ["--gpu-memsafety-iterations", "0"],
                                  ["--gpu-memsafety", "--gpu-memsafety-timeout", "99999999999"]])
def test_pytest_options_out_of_range_are_usage_errors(tmp_path: Path, argv: list[str]) -> None:
    test = tmp_path / "test_x.py"
    test.write_text("def test_x():\n    pass\n")
    args = [*argv, str(test)] if "--gpu-memsafety" in argv else [*argv, "--gpu-memsafety-scenario", "planted_oob", "--co"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "expected an integer from" in proc.stderr + proc.stdout
