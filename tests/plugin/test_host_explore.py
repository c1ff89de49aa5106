"""Issue 50, explore: `pytest --gpu-memsafety --gpu-memsafety-explore` runs each test again at the boundary shapes its
parametrization forgot, each variant its own case. On a CPU under the trace (Triton's interpreter), on a GPU under
the complete set's children (here with the fake allocator and the fake compute-sanitizer of tests/helpers/host_fake.py).
The calibration (ci/gpu/field/calib_explore: eight bugs that trigger only at unlisted shapes, each with a clean twin)
must come out exact."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import HELPERS, ROOT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

CALIB = ROOT / "ci" / "gpu" / "field" / "calib_explore"

CONFTEST = '''
import os
os.environ["TRITON_INTERPRET"] = "1"
'''

SUITE = '''
import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def tail_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o), mask=o < n)          # the last block read whole


@triton.jit
def good_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n), mask=o < n)


def copy(kernel, n):
    x = torch.arange(n, dtype=torch.float32)
    y = torch.empty(n)
    kernel[(triton.cdiv(n, 16),)](x, y, n, BLOCK=16)
    return x, y


@pytest.mark.parametrize("n", [32])
def test_tail(n):
    x, y = copy(tail_copy, n)
    assert torch.equal(y, x)


@pytest.mark.parametrize("n", [32])
def test_reference_knows_one_shape(n):
    copy(good_copy, n)
    assert n == 32, f"the reference only knows n = 32, got {n}"


@pytest.mark.parametrize("n", [32])
def test_refuses_other_shapes(n):
    if n % 16:
        raise ValueError(f"n must be a multiple of 16, got {n}")
    copy(good_copy, n)


def test_not_parametrized():
    copy(good_copy, 32)


@pytest.mark.parametrize("dtype", ["float32"])
def test_nothing_to_vary(dtype):
    copy(good_copy, 32)
'''


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "GITHUB_", "TRITON_")) and k not in ("PYTHONPATH", "GPU_MEMSAFETY_SCENARIO_PATH")}
    out.update(CUDA_VISIBLE_DEVICES="")
    return out


def run(cwd: Path, *args: str, command: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = command or [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    return subprocess.run(argv, cwd=str(cwd), env=env(), capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("explore")
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_kernels.py").write_text(SUITE)
    (root / "pytest.ini").write_text("[pytest]\n")
    return root


def cases(report_dir: Path) -> dict[str, dict]:
    doc = json.loads((report_dir / "report.json").read_text())
    return {c["id"].split("::", 1)[1]: c for c in doc["cases"]}


def test_explore_runs_each_test_at_its_forgotten_shapes_each_variant_a_case(suite: Path) -> None:
    proc = run(suite, "--gpu-memsafety", "--gpu-memsafety-explore", "--gpu-memsafety-explore-variants", "3",
               "--gpu-memsafety-report-dir", "r", "-rA")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]                   # a memory finding at an explored shape fails the run
    by = cases(suite / "r")
    assert by["test_tail[32]"]["outcome"] == "clean"           # the listed shape is clean: only explore finds it
    tail = by['test_tail[32]@{"n": 1}']
    (finding,) = tail["findings"]
    assert (finding["kind"], finding["buffer"], finding["region"]) == ("overread", "x_ptr", "past_end")
    assert [(r["start"], r["end"]) for r in finding["ranges"]] == [(4, 64)]           # 15 floats past 1
    explore = tail["details"]["explore"]
    assert explore["of"] == "test_kernels.py::test_tail[32]" and explore["changed"] == {"n": 1}
    assert explore["params"] == {"n": 1} and explore["why"] == ["n: 1"] and tail["params"] == {"n": 1}
    assert 'explored at {"n": 1}' in tail["message"]
    variants = [k for k in by if k.startswith("test_tail[32]@")]
    assert variants == ['test_tail[32]@{"n": 1}', 'test_tail[32]@{"n": 15}', 'test_tail[32]@{"n": 17}'], variants
    assert all(by[v]["outcome"] == "finding" for v in variants)
    # the test's own assertion at a new shape: a possible wrong result, noted, not a failure
    wrong = by['test_reference_knows_one_shape[32]@{"n": 1}']
    assert wrong["outcome"] == "clean", wrong
    assert "the reference only knows n = 32, got 1" in wrong["details"]["explore"]["possible_wrong_result"]
    assert "possible wrong result at this explored shape" in wrong["message"]
    assert 'PASSED test_kernels.py::test_reference_knows_one_shape[32]@{"n": 1}' in out
    # an error the test raises there: not applicable, with the reason
    refused = by['test_refuses_other_shapes[32]@{"n": 1}']
    assert refused["outcome"] == "not applicable", refused
    assert "not applicable at this explored shape: the test raised ValueError: n must be a multiple of 16, got 1" \
        in refused["message"]
    # nothing explored silently: each unexplored test, with why, in the terminal and the report
    doc = json.loads((suite / "r" / "report.json").read_text())
    summary = doc["run"]["explore"]
    assert summary["not_explored"] == {
        "test_kernels.py::test_not_parametrized": "not parametrized, and its function reads no module-level integer "
                                                  "constant",
        "test_kernels.py::test_nothing_to_vary[float32]": "no integer parameter, shape or offsets list"}
    assert summary["variants_run"] == 9 and summary["tests_explored"] == 3 and summary["variants_not_run"] > 0
    assert "not explored, no integer parameter, shape or offsets list: 1 test(s)" in out
    assert json.loads((suite / "r" / "explore.json").read_text()) == summary
    # the report lists each variant right after its test
    ids = [c["id"].split("::", 1)[1] for c in doc["cases"]]
    assert ids.index("test_tail[32]") + 1 == ids.index('test_tail[32]@{"n": 1}')
    # the rerun command runs exactly that instance
    assert tail["details"]["where"]["rerun"] == explore["rerun"]
    rerun = shlex.split(explore["rerun"])
    assert rerun[0] == "pytest" and "--gpu-memsafety-explore" not in rerun
    again = run(suite, command=[sys.executable, "-m", *rerun, "--gpu-memsafety-report-dir", "again"])
    assert list(cases(suite / "again")) == ['test_tail[32]@{"n": 1}'], again.stdout[-3000:]
    assert cases(suite / "again")['test_tail[32]@{"n": 1}']["findings"][0]["ranges"] == finding["ranges"]
    assert again.returncode == 1


def test_without_explore_nothing_is_varied_and_the_ini_key_turns_it_on(suite: Path, tmp_path: Path) -> None:
    plain = run(suite, "--gpu-memsafety", "--gpu-memsafety-report-dir", "plain", "-k", "test_tail")
    assert list(cases(suite / "plain")) == ["test_tail[32]"] and plain.returncode == 0, plain.stdout[-2000:]
    ini = tmp_path / "explore.ini"
    ini.write_text("[pytest]\ngpu_memsafety_explore = true\ngpu_memsafety_explore_variants = 1\n")
    on = run(suite, "-c", str(ini), "--rootdir", str(suite), "--gpu-memsafety", "--gpu-memsafety-report-dir", "ini",
             "-k", "test_tail")
    assert list(cases(suite / "ini")) == ["test_tail[32]", 'test_tail[32]@{"n": 1}'], on.stdout[-2000:]


@pytest.mark.parametrize(("args", "words"), [
    (["--gpu-memsafety-explore"], "go with --gpu-memsafety"),
    (["--gpu-memsafety", "--gpu-memsafety-explore", "--gpu-memsafety-explore-variants", "-1"],
     "--gpu-memsafety-explore-variants: expected a whole number >= 0"),
    (["--gpu-memsafety", "--gpu-memsafety-explore", "--gpu-memsafety-explore-seconds", "soon"],
     "--gpu-memsafety-explore-seconds: expected seconds"),
    (["--gpu-memsafety", "--gpu-memsafety-explore-case", "test_kernels.py::test_tail[32]"], "not an explored case"),
    (["--gpu-memsafety", "--gpu-memsafety-explore-case", 'test_kernels.py::test_tail[32]@{"m": 3}'],
     "has no parameter 'm'"),
])
def test_bad_explore_options_are_usage_errors(suite: Path, args: list[str], words: str) -> None:
    proc = run(suite, *args, "--collect-only", "-q")
    assert proc.returncode == 4 and words in proc.stderr, (proc.returncode, proc.stderr[-2000:])


def test_the_calibration_every_bug_exact_and_no_twin_finding(tmp_path: Path) -> None:
    """ci/gpu/field/calib_explore: every planted bug found by explore at the exact bytes expected.py computes for
    each explored shape, nothing at shapes that do not trigger it, no finding on any clean twin, every listed case
    clean (so without explore nothing is found)."""
    proc = run(CALIB, "--gpu-memsafety", "--gpu-memsafety-explore", "--gpu-memsafety-report-dir", str(tmp_path / "r"),
               "-q")
    sys.path.insert(0, str(CALIB))
    try:
        import check
    finally:
        sys.path.remove(str(CALIB))
    lines, problems = check.check(json.loads((tmp_path / "r" / "report.json").read_text()))
    assert not problems, "\n".join(problems + lines)
    assert len(lines) == 16 and proc.returncode == 1, proc.stdout[-3000:]


GPU_SUITE = '''
import pytest
import host_fake


@pytest.mark.parametrize("n", [64, 128])
def test_rows(n):
    block = host_fake.allocate(n * 4)
    if n % 64:                                  # a kernel that writes and reads its last block whole
        block.write(n * 4, b"\\0\\0\\0\\0")       # 4 B written past the end: the markers pass sees it
        host_fake.read(block, n * 4 - 4, 8)     # 4 B read past the end: memcheck sees it


@pytest.mark.parametrize("n", [64])
def test_rows_fixed(n):
    host_fake.allocate(n * 4).write(0, b"x" * (n * 4))
'''


def test_on_a_gpu_explored_cases_run_in_the_complete_sets_children(tmp_path: Path) -> None:
    """The GPU path with the project's fakes: each variant is rebuilt from its id in the child processes (the markers
    pass, then memcheck), judged there as any test; the clean twin's variants stay clean."""
    from tests.plugin.test_host_plugin import environment
    from host_fake import install_fake_memcheck
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (suite / "test_suite.py").write_text(GPU_SUITE)
    sanitizer = install_fake_memcheck(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "gpu_memsafety.fixtures.plugin", "-p", "host_fake",
                           "--gpu-memsafety", "--gpu-memsafety-explore", "--gpu-memsafety-explore-variants", "2",
                           "--gpu-memsafety-report-dir", str(tmp_path / "r"), "-rA", "-q"], cwd=suite,
                          env=environment(suite, {"HOST_FAKE_SANITIZER": str(sanitizer)}), capture_output=True,
                          text=True, timeout=600)
    by = cases(tmp_path / "r")
    # n = 1 and 3 from 64; from 128 the next ones (1 and 3 ran already: the same test at the same values)
    assert list(by) == ["test_rows[64]", 'test_rows[64]@{"n": 1}', 'test_rows[64]@{"n": 3}', "test_rows[128]",
                        'test_rows[128]@{"n": 5}', 'test_rows[128]@{"n": 7}', "test_rows_fixed[64]",
                        'test_rows_fixed[64]@{"n": 1}', 'test_rows_fixed[64]@{"n": 3}'], proc.stdout[-4000:]
    one = by['test_rows[64]@{"n": 1}']
    assert one["mode"] == "complete" and one["outcome"] == "finding", one
    kinds = sorted((f["detector"], f["kind"], f["bytes"]) for f in one["findings"])
    assert kinds == [("guard", "overwrite", 4), ("memcheck", "overread", 4)], kinds
    assert by["test_rows[64]"]["outcome"] == "clean" and by["test_rows_fixed[64]"]["outcome"] == "clean"
    assert all(by[k]["outcome"] == "clean" for k in by if k.startswith("test_rows_fixed")), by
    assert proc.returncode == 1


def test_under_xdist_each_worker_explores_the_tests_it_ran(suite: Path) -> None:
    proc = run(suite, "-n", "2", "--gpu-memsafety=trace", "--gpu-memsafety-explore",
               "--gpu-memsafety-explore-variants", "1", "--gpu-memsafety-report-dir", "x", "-k", "tail or refuses")
    by = cases(suite / "x")
    assert set(by) == {"test_tail[32]", 'test_tail[32]@{"n": 1}', "test_refuses_other_shapes[32]",
                       'test_refuses_other_shapes[32]@{"n": 1}'}, proc.stdout[-3000:]
    assert by['test_tail[32]@{"n": 1}']["outcome"] == "finding"
    assert by['test_refuses_other_shapes[32]@{"n": 1}']["outcome"] == "not applicable"
    assert proc.returncode == 1
