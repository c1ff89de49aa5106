"""racecheck and synccheck through the engine (issue 20 item 3): the mode table, the judge's placement of
hazard records onto the cases of a batch, and the rerun alone of cases a record could belong to, with a fake
compute-sanitizer that runs the real worker on the CPU and prints racecheck's text in the shape of real
output (tests/data/sanitizer/README.md). Pure judge rules are tested with small fakes."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest


from gpu_memsafety.sanitizer import hazards
from gpu_memsafety.scenario import registry
from gpu_memsafety.engine.batches import Batches
from gpu_memsafety.judge.rules import Machine, Standing
from gpu_memsafety.sanitizer.records import read_sanitizer
from gpu_memsafety.model import RACE, RACECHECK, SHARED, SYNCCHECK, CaseResult, Outcome
from gpu_memsafety.detectors.modes import MODES
from gpu_memsafety.engine.runner import RunOptions, Runner
from gpu_memsafety.scenario.definition import Case, Scenario

from fake_sanitizer import PARSE_ARGS, install
from repo_paths import FAKE_DIR, SANITIZER_DATA as DATA

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

TIMEOUT_SCALE = 0.2


def _load(name: str) -> Scenario:
    """The definition, loaded from its file as a scenario path would load it; the worker imports the same file."""
    return registry.load_source(registry.Source(str(FAKE_DIR / "fake_scenarios" / f"{name}.py"), None, "tests"))


FAKE = _load("fake_faults")
CASES = {case.id: case for case in FAKE.build()}


def item(variant: str, label: str = "n4000") -> tuple[Scenario, Case]:
    return FAKE, CASES[f"fake_faults[{variant}-{label}]"]


def by_id(results: Sequence[CaseResult]) -> dict[str, CaseResult]:
    return {r.case_id: r for r in results}


# The fake racecheck: runs the worker, then prints one analysis-mode race for every case of the job whose
# variant is racy, naming the kernel that case launched (from its result file), and the summary.
FAKE_RACECHECK = '''\
import json, subprocess, sys
from pathlib import Path

RACY = {racy!r}
''' + PARSE_ARGS + '''print("========= COMPUTE-SANITIZER", flush=True)
code = subprocess.call(target)
job = json.loads(Path(target[-1]).read_text())
races = 0
for index, case in enumerate(job["cases"]):
    result = Path(job["out_dir"], f"{{index}}.json")
    if case["variant"] in RACY and result.exists():
        kernel = json.loads(result.read_text())["kernel"]
        print(f"========= Error: Race reported between Write access at {{kernel}}+0x2d0 in /src/race.cu:27")
        print(f"=========     and Read access at {{kernel}}+0x250 in /src/race.cu:27 [248 hazards]")
        print("=========")
        races += 1
print(f"========= RACECHECK SUMMARY: {{races}} hazards displayed ({{races}} errors, 0 warnings)", flush=True)
xml_path.write_text('<?xml version="1.0" encoding="utf-8"?>\\n<ComputeSanitizerOutput>\\n</ComputeSanitizerOutput>\\n')
sys.exit(86 if races else code)
'''


def _runner(tmp_path: Path, racy: Sequence[str]) -> Runner:
    lookup = install(tmp_path, "fake-compute-sanitizer", FAKE_RACECHECK.format(racy=tuple(racy)))
    return Runner(RunOptions(mode=MODES["racecheck"], workdir=tmp_path / "runs", timeout_scale=TIMEOUT_SCALE,
                             gpu_available=True, sanitizer=lookup))


def test_a_race_whose_kernel_two_cases_launched_reruns_them_alone(worker_env: Path, tmp_path: Path) -> None:
    """'overwrite' and 'clean' both launch fake_copy: the batch cannot say whose race it is, so both rerun
    alone; the racy one then has its race (kernel, both lines), the other is clean."""
    results = by_id(_runner(tmp_path, ["overwrite"]).run([item("clean"), item("overwrite")]))
    racy, clean = results["fake_faults[overwrite-n4000]"], results["fake_faults[clean-n4000]"]
    assert racy.outcome is Outcome.FINDING, racy.message          # a race nobody expects
    [race] = [f for f in racy.findings if f.detector == RACECHECK]
    assert (race.kind, race.buffer, race.region, race.kernel, race.source, race.count) == (
        RACE, SHARED, "shared", "fake_copy", "race.cu:27 / race.cu:27", 248)
    assert race.detail("access") == "write at race.cu:27" and race.detail("other_access") == "read at race.cu:27"
    assert clean.outcome is Outcome.CLEAN, clean.message
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["batch-001", "batch-002", "batch-003"]
    assert "one per process" in (tmp_path / "runs" / "batch-001" / "rerun-alone.txt").read_text()


def test_a_race_in_a_kernel_only_one_case_launched_needs_no_rerun(worker_env: Path, tmp_path: Path) -> None:
    results = by_id(_runner(tmp_path, ["far_write"]).run([item("clean"), item("far_write")]))
    assert results["fake_faults[clean-n4000]"].outcome is Outcome.CLEAN
    far = results["fake_faults[far_write-n4000]"]
    assert [(f.detector, f.kernel) for f in far.findings] == [(RACECHECK, "far_k")]
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["batch-001"]
    assert next(d for d in far.detectors if d.detector == RACECHECK).ran


def test_a_clean_racecheck_batch_is_clean_and_says_racecheck_ran(worker_env: Path, tmp_path: Path) -> None:
    results = _runner(tmp_path, []).run([item("clean"), item("clean", "n64")])
    assert [r.outcome for r in results] == [Outcome.CLEAN, Outcome.CLEAN]
    assert all(next(d for d in r.detectors if d.detector == RACECHECK).ran for r in results)


# ---------------------------------------------------------------------------------------- pure rules

def test_racecheck_records_come_from_its_text_and_its_count_is_checked() -> None:
    xml = b'<?xml version="1.0"?>\n<ComputeSanitizerOutput>\n</ComputeSanitizerOutput>\n'
    text = (DATA / "racecheck-analysis-fabricated.txt").read_text()
    run = read_sanitizer("racecheck", text, xml, exit_code=86, timed_out=False)
    assert run.ran and run.disagreement() == "" and sum(r.category == "hazard" for r in run.records) == 3
    lost = read_sanitizer("racecheck", text.replace("3 hazards displayed", "5 hazards displayed"), xml,
                          exit_code=86, timed_out=False)
    assert not lost.ran and "counted 5 hazards displayed" in lost.problem
    cut = read_sanitizer("synccheck", (DATA / "synccheck-fabricated.txt").read_text().split("ERROR SUMMARY")[0], xml,
                         exit_code=86, timed_out=False)
    assert not cut.ran and "did not finish" in cut.problem


def test_a_mode_whose_detectors_a_scenario_does_not_use_runs_nothing_for_it() -> None:
    from gpu_memsafety.scenarios.planted_race import SCENARIO as RACE_SCENARIO
    from gpu_memsafety.scenarios.planted_uninit import SCENARIO as UNINIT_SCENARIO
    judge = Batches(Standing(MODES["both"], Machine(gpu=True)))
    race_case = RACE_SCENARIO.build()[0]
    gated = judge.gate(RACE_SCENARIO, race_case)
    assert gated is not None and gated.outcome is Outcome.NOT_APPLICABLE and "uses racecheck" in gated.message
    assert judge.gate(UNINIT_SCENARIO, UNINIT_SCENARIO.build()[0]) is None      # guard applies to it
    assert Batches(Standing(MODES["stress"], Machine(gpu=True))).gate(UNINIT_SCENARIO, UNINIT_SCENARIO.build()[0]) is None


def test_the_hazard_modes_are_rows_of_the_mode_table() -> None:
    race, sync = MODES["racecheck"], MODES["synccheck"]
    assert (race.sanitizer, race.detectors, sync.sanitizer, sync.detectors) == (
        "racecheck", (RACECHECK,), "synccheck", (SYNCCHECK,))
    assert set(hazards.TOOLS) == {race.sanitizer, sync.sanitizer}
    assert race.deadline(10.0, sanitized=True) > MODES["memcheck"].deadline(10.0, sanitized=True)
