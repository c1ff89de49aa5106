"""Issue 53, class 5: the device scripts read numbers from their environment by validation (ci/gpu/runenv.sh
`whole`), never by shell arithmetic on the raw value; each call owns a fresh run folder and removes its temporary
folders. `BUDGET='0*T_START[$(touch F)]'` ran `touch` in campaign.sh and suite_check.sh (bash evaluates a variable's
value as an expression inside $(( ))); a second campaign call reported the first call's steps; suite_check.sh left a
temporary folder on every call.

The scripts run here for real with bash, their heavy commands (make, python3, nvidia-smi, git, compute-sanitizer,
timeout, pip) replaced by stubs that record being called: a refused value must stop a script before any of them."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_paths import ROOT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

SCRIPTS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "ci").rglob("*.sh"))
# Every number a script takes from its environment, and the scripts that take it.
NUMBERS = {
    "ci/gpu/field/campaign.sh": ("BUDGET", "STEP_MAX"),
    "ci/gpu/explore_check.sh": ("BUDGET",),
    "ci/gpu/field/campaign2_confirm.sh": ("BUDGET",),
    "ci/gpu/suite_check.sh": ("BUDGET", "WORKERS"),
    "ci/gpu/complete_check.sh": ("BUDGET", "WORKERS", "NEED"),
    "ci/gpu/cover_check.sh": ("BUDGET",),
    "ci/gpu/guardpage_check.sh": ("BUDGET",),
    "ci/gpu/heldout_check.sh": ("BUDGET", "WORKERS"),
    "ci/gpu/hostsuite_check.sh": ("BUDGET", "REPS"),
    "ci/gpu/ux_check.sh": ("BUDGET",),
    "ci/gpu/field/repro/run_fla_log_linear.sh": ("CAMPAIGN_BUDGET",),
    "ci/gpu/calib_check.sh": ("STEP_TAIL",),
    "ci/gpu/detect_check.sh": ("STEP_TAIL",),
    "ci/gpu/findings_check.sh": ("STEP_TAIL",),
}
STUBS = ("make", "python3", "nvidia-smi", "git", "compute-sanitizer", "timeout", "pip", "nproc", "free")
PROPERTIES = settings(max_examples=25, derandomize=True, database=None, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def stub_path(folder: Path, log: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for name in STUBS:
        stub = folder / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\nexit 0\n')
        stub.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def run_script(script: str, tmp: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    calls = tmp / "calls.txt"
    calls.unlink(missing_ok=True)
    base = {k: v for k, v in os.environ.items() if k not in {n for names in NUMBERS.values() for n in names}}
    full = dict(base, PATH=stub_path(tmp / "bin", calls), OUT=str(tmp / "out"), TMPDIR=str(tmp / "tmp"),
                HOME=str(tmp), **env)
    (tmp / "tmp").mkdir(exist_ok=True)
    proc = subprocess.run(["bash", str(ROOT / script)], cwd=ROOT, env=full, capture_output=True, text=True, timeout=60)
    return proc, calls.read_text().splitlines() if calls.exists() else []


def test_every_script_reads_its_numbers_through_whole() -> None:
    """No numeric default expanded raw (`${BUDGET:-540}`), no expansion inside $(( )), and every variable the table
    names is read by `whole` in its script (or in steps.sh, which it sources)."""
    offenders = []
    for script in SCRIPTS:
        text = (ROOT / script).read_text()
        for number, line in enumerate(text.splitlines(), 1):
            code = line.split(" #")[0]
            if re.search(r"\$\{[A-Za-z_]\w*:-[-+]?[0-9]", code) or re.search(r"\$\(\([^)]*\$\{", code):
                offenders.append(f"{script}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
    steps = (ROOT / "ci/gpu/steps.sh").read_text()
    for script, names in NUMBERS.items():
        text = (ROOT / script).read_text() + (steps if "steps.sh" in (ROOT / script).read_text() else "")
        for name in names:
            assert re.search(rf"^\s*(.*; )?whole {name} ", text, re.M), f"{script}: {name} not read by whole"


CANARY = "CANARY"
HOSTILE = st.one_of(
    st.sampled_from(["0*T_START[$(touch CANARY)]", "a[$(touch CANARY)]", "$(touch CANARY)", "`touch CANARY`",
                     "1+1", "-1", "0x10", "1e3", " 5", "5 ", "5\n", "\u0665", "99999999999", "BUDGET_S",
                     "T_START", "4 --rootdir=/ -p x", "${PATH}", "1;touch CANARY"]),
    st.text(min_size=1, max_size=12).filter(lambda v: "\x00" not in v and not re.fullmatch(r"[0-9]{1,9}", v)))


@PROPERTIES
@given(pick=st.sampled_from(sorted((s, n) for s, names in NUMBERS.items() for n in names)), value=HOSTILE)
def test_a_hostile_number_stops_the_script_before_it_runs_anything(tmp_path_factory: pytest.TempPathFactory,
                                                                   pick: tuple[str, str], value: str) -> None:
    script, name = pick
    tmp = tmp_path_factory.mktemp("env")
    proc, calls = run_script(script, tmp, {name: value})
    assert proc.returncode == 2, (script, name, value, proc.returncode, proc.stderr[-800:])
    assert f"{name} must be a whole number" in proc.stderr or f"{name}=" in proc.stderr, proc.stderr
    assert not list(ROOT.glob(CANARY)) and not list(tmp.rglob(CANARY)) and not (tmp / "out" / CANARY).exists()
    assert [c for c in calls if not c.startswith(("nproc", "free"))] == [], calls
    assert not list((tmp / "tmp").iterdir()), "a run folder was left behind"


@pytest.mark.parametrize("script", ["ci/gpu/field/campaign.sh", "ci/gpu/suite_check.sh"])
def test_the_issues_budget_attack_runs_nothing(tmp_path: Path, script: str) -> None:
    proc, calls = run_script(script, tmp_path, {"BUDGET": f"0*T_START[$(touch {tmp_path}/F)]"})
    assert proc.returncode == 2 and not (tmp_path / "F").exists(), proc.stderr
    assert calls == []


def test_a_second_campaign_call_reports_only_its_own_steps(tmp_path: Path) -> None:
    for call in (1, 2):
        proc, _ = run_script("ci/gpu/field/campaign.sh", tmp_path,
                             {"SUITES": f"nosuch{call}", "STEPS": "plain", "SKIP_BOOTSTRAP": "1", "BUDGET": "30"})
        assert proc.returncode == 0, proc.stderr[-2000:]
    steps = (tmp_path / "out" / "steps.txt").read_text()
    assert "unknown suite nosuch2" in steps and "nosuch1" not in steps, steps
    assert not list((tmp_path / "tmp").iterdir()), "the run folder was left behind"


def test_suite_check_removes_its_temporary_folder(tmp_path: Path) -> None:
    proc, calls = run_script("ci/gpu/suite_check.sh", tmp_path, {"BUDGET": "60", "WORKERS": "2"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert any("make test PYTEST_ARGS=-n 2 " in c for c in calls), calls
    (junit,) = [c.split()[-1] for c in calls if "suite_outcomes.py outcomes" in c]
    assert not Path(junit).parent.exists(), f"suite_check.sh left its temporary folder {Path(junit).parent}"
    assert not list((tmp_path / "tmp").iterdir()), "suite_check.sh left its temporary folder"
