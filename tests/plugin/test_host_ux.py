"""Issue 51 (items 2-5): `pytest --gpu-memsafety` as a new user finds it, on a suite of their own.

A small kernel repository (a package with two Triton kernels, one reading past its input, one writing past its output,
and a test file that uses them; no conftest.py, nothing set in the environment) is run the way its README says: the
bare flag on a machine without a GPU works as found (the plugin sets TRITON_INTERPRET itself, and says so once);
`=markers` there says it cannot check and points to the bare flag, and a stray write does not end the run.
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpu_memsafety.scenario import registry

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

KERNELS = '''
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src_ptr + offs, mask=offs < n + 4)          # READ_LINE: 4 elements past src's end
    tl.store(dst_ptr + offs, x, mask=offs < n)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * 2, mask=offs < n + 2)      # WRITE_LINE: 2 elements past out's end


@triton.jit
def wild_kernel(out_ptr, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + far + offs, offs.to(tl.float32), mask=offs < 1)     # 4 TiB away: unmapped


def copy(src):
    dst = torch.empty_like(src)
    copy_kernel[(triton.cdiv(src.numel(), 64),)](src, dst, src.numel(), BLOCK=64)
    return dst


def scale(x):
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


def wild(x):
    wild_kernel[(1,)](x, 1 << 40, BLOCK=16)
'''

TESTS = '''
import torch
from mykern.kernels import copy, scale, wild


def test_copy():
    a = torch.arange(100, dtype=torch.float32)
    assert torch.equal(copy(a), a)


def test_scale():
    a = torch.arange(100, dtype=torch.float32)
    assert torch.equal(scale(a), a * 2)


def test_plain():
    assert 1 + 1 == 2
'''

WILD = '''
import torch
from mykern.kernels import wild


def test_wild():
    wild(torch.zeros(16))
'''


def env(**extra: str) -> dict[str, str]:
    """A user's environment: nothing of Triton's set, no GPU."""
    out = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "GITHUB_", "TRITON_", "CI_", "GITLAB")) and k not in ("PYTHONPATH", "CI", registry.ENV_VAR)}
    out.update(CUDA_VISIBLE_DEVICES="", **extra)
    return out


@dataclass
class Run:
    proc: subprocess.CompletedProcess[str]
    root: Path
    reports: Path

    @property
    def out(self) -> str:
        return self.proc.stdout + self.proc.stderr


def run(root: Path, name: str, *args: str, **environ: str) -> Run:
    reports = root / f"reports-{name}"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:benchmark", *args,
                           "--gpu-memsafety-report-dir", str(reports)],
                          cwd=str(root), env=env(**environ), capture_output=True, text=True, timeout=600)
    return Run(proc, root, reports)


def line_of(text: str, mark: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if mark in line)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kernelrepo")
    (root / "mykern").mkdir()
    (root / "mykern" / "__init__.py").write_text("")
    (root / "mykern" / "kernels.py").write_text(KERNELS)
    (root / "tests").mkdir()
    (root / "tests" / "test_k.py").write_text(TESTS)
    (root / "tests" / "test_wild.py").write_text(WILD)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    return root


@pytest.fixture(scope="module")
def bare(repo: Path) -> Run:
    """The bare flag, as found: no TRITON_INTERPRET anywhere, pytest's own JUnit XML too."""
    return run(repo, "bare", "--gpu-memsafety", "tests/test_k.py", "--junitxml", str(repo / "pytest-junit.xml"))


def test_the_bare_flag_without_a_gpu_sets_the_interpreter_itself_and_says_so_once(bare: Run) -> None:
    import json
    doc = json.loads((bare.reports / "report.json").read_text())
    by = {c["id"].split("::")[-1]: c for c in doc["cases"]}
    assert by["test_copy"]["outcome"] == "finding", bare.out[-4000:]
    assert by["test_scale"]["outcome"] == "finding", bare.out[-4000:]
    read, = by["test_copy"]["findings"]
    write, = by["test_scale"]["findings"]
    assert (read["kind"], read["buffer"], read["bytes"]) == ("overread", "src_ptr", 16), read
    assert (write["kind"], write["buffer"], write["bytes"]) == ("overwrite", "out_ptr", 8), write
    assert bare.out.count("set TRITON_INTERPRET=1") == 1, bare.out[:3000]
    assert "CHECKED NOTHING" not in bare.out


def test_markers_on_a_cpu_says_it_cannot_check_and_a_stray_write_does_not_end_the_run(repo: Path) -> None:
    """=markers without a GPU: said once, pointing at the bare flag; the suite runs in Triton's interpreter (the
    user's own TRITON_INTERPRET=1) and a kernel's write 4 TiB away is masked off instead of ending pytest with a
    segmentation fault and no report: the suite's results stand, and the run checked nothing (exit 5)."""
    done = run(repo, "markers", "--gpu-memsafety=markers", "tests/test_wild.py", "tests/test_k.py::test_plain",
               TRITON_INTERPRET="1")
    assert "Segmentation fault" not in done.out and done.proc.returncode == 5, done.out[-4000:]
    assert (done.reports / "report.json").is_file(), done.out[-4000:]
    said = [line for line in done.proc.stdout.splitlines() if "cannot check anything here" in line]
    assert len(said) == 1, done.out[:3000]
    assert "bare flag (`--gpu-memsafety`)" in done.proc.stdout.replace("\n  ", " ")
    assert "2 passed" in done.out, done.out[-3000:]


def test_a_test_with_a_finding_is_one_failed_test_in_pytests_count_and_its_junit(bare: Run) -> None:
    """Each test with a finding is counted once, as failed (letter M), never "passed" plus an error at teardown;
    pytest's own JUnit XML counts it once too, and carries no result JSON of ours as a property."""
    import xml.etree.ElementTree as ET
    assert "2 failed, 1 passed" in bare.proc.stdout and "error" not in bare.proc.stdout.splitlines()[-1], \
        bare.proc.stdout[-2000:]
    assert "tests/test_k.py MM." in bare.proc.stdout
    suite = ET.parse(bare.root / "pytest-junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "2", "0")
    failed = {c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None}
    assert failed == {"test_copy", "test_scale"}
    assert not list(suite.iter("property")), "the plugin's result travelled into the suite's JUnit XML"


def test_each_finding_is_said_once_within_120_columns_and_points_at_the_kernels_line(bare: Run) -> None:
    out = bare.proc.stdout
    wide = [line for line in out.splitlines() if len(line) > 120]
    assert not wide, wide
    read_line = line_of(KERNELS, "READ_LINE")
    write_line = line_of(KERNELS, "WRITE_LINE")
    assert out.count(f"kernels.py:{read_line}") == 2, out      # the failure's head line, its kernel line: once each
    assert out.count(f"kernel: mykern/kernels.py:{read_line}") == 1
    assert out.count(f"kernel: mykern/kernels.py:{write_line}") == 1
    assert out.count("tensor: kernel argument `src_ptr` of copy_kernel; test variable `a`") == 1
    assert "rerun: pytest --gpu-memsafety=trace tests/test_k.py::test_copy" in out
    assert f"test: tests/test_k.py:{line_of(TESTS, 'def test_copy')}" in out
    # the reason every test shares (no GPU) is said once, in the headline, not with each test
    assert out.count("needs a CUDA GPU") == 1, out
    # the table names the suite's test files as such, not as kernels: here, in summary.md and in the HTML
    assert "test file " in out and "\nkernel " not in out
    assert "### Test file × architecture" in (bare.reports / "summary.md").read_text()
    assert "<th>test file</th>" in (bare.reports / "report.html").read_text()


def test_verbose_shows_everything(repo: Path) -> None:
    done = run(repo, "verbose", "--gpu-memsafety", "tests/test_k.py::test_copy", "-v")
    assert "finding = trace overread of src_ptr past_end" in done.proc.stdout, done.out[-3000:]
    assert "test_copy MEMSAFETY" in done.proc.stdout


def test_sarif_places_each_finding_at_the_kernels_line_with_the_test_related(bare: Run) -> None:
    import json
    sarif = json.loads((bare.reports / "report.sarif").read_text())
    located = {r["properties"]["case"].split("::")[-1]: r for r in sarif["runs"][0]["results"]}
    phys = located["test_copy"]["locations"][0]["physicalLocation"]
    assert (phys["artifactLocation"]["uri"], phys["region"]["startLine"]) == \
        ("mykern/kernels.py", line_of(KERNELS, "READ_LINE"))
    related = located["test_copy"]["relatedLocations"][0]["physicalLocation"]
    assert (related["artifactLocation"]["uri"], related["region"]["startLine"]) == \
        ("tests/test_k.py", line_of(TESTS, "def test_copy"))
    assert located["test_copy"]["properties"]["rerun"] == "pytest --gpu-memsafety=trace tests/test_k.py::test_copy"
    assert "scenario expects" not in json.dumps(sarif["runs"][0]["tool"])


def test_gitlab_code_quality_places_each_finding_at_the_kernels_line(bare: Run) -> None:
    import json
    quality = {i["description"].split(": ")[0].split("::")[-1]: i
               for i in json.loads((bare.reports / "gl-code-quality-report.json").read_text())}
    assert quality["test_scale"]["location"] == {"path": "mykern/kernels.py",
                                                 "lines": {"begin": line_of(KERNELS, "WRITE_LINE")}}
    assert "pytest --gpu-memsafety=trace tests/test_k.py::test_scale" in quality["test_scale"]["content"]["body"]


def test_junit_places_each_finding_at_the_kernels_line_and_a_clean_test_at_its_own(bare: Run) -> None:
    import xml.etree.ElementTree as ET
    junit = {c.get("name").split("::")[-1]: c for c in ET.parse(bare.reports / "junit.xml").getroot().iter("testcase")}
    assert (junit["test_copy"].get("file"), junit["test_copy"].get("line")) == \
        ("mykern/kernels.py", str(line_of(KERNELS, "READ_LINE")))
    failure = " ".join(junit["test_copy"].find("failure").text.split())
    assert "rerun = pytest --gpu-memsafety=trace tests/test_k.py::test_copy" in failure, failure
    assert f"test = tests/test_k.py:{line_of(TESTS, 'def test_copy')}" in failure, failure
    # a test with nothing found is placed at its own line, not at report.json line 1
    assert (junit["test_plain"].get("file"), junit["test_plain"].get("line")) == \
        ("tests/test_k.py", str(line_of(TESTS, "def test_plain")))


def test_github_annotations_place_each_finding_at_the_kernels_line(bare: Run) -> None:
    import json
    from gpu_memsafety.report.annotations import github_annotations
    doc = json.loads((bare.reports / "report.json").read_text())
    errors = [line for line in github_annotations(doc) if line.startswith("::error ")]
    read_line = line_of(KERNELS, "READ_LINE")
    assert any(line.startswith(f"::error file=mykern/kernels.py,line={read_line},") and
               "rerun: pytest --gpu-memsafety=trace tests/test_k.py::test_copy" in line for line in errors), errors


def test_a_write_both_passes_saw_keeps_memchecks_kernel_file() -> None:
    """complete mode folds memcheck's write into the markers' finding: the kernel's line stays placeable (its file,
    details `path`), so SARIF, code quality and JUnit point at the kernel, not at the test."""
    from gpu_memsafety.judge.suite import fold
    from gpu_memsafety.model import ByteRange, Finding
    from gpu_memsafety.report.locate import finding_site
    guard = Finding(detector="guard", kind="overwrite", buffer="alloc 400 B at t.py line 3", region="past_end",
                    bytes=8, count=1, ranges=(ByteRange("past_end", 400, 408),))
    memcheck = Finding(detector="memcheck", kind="overwrite", buffer="alloc 400 B at t.py line 3", region="past_end",
                       bytes=4, count=1, kernel="scale_kernel", source="kernels.py:17",
                       ranges=(ByteRange("past_end", 400, 404),), details=(("path", "/repo/mykern/kernels.py"),))
    (one,) = fold([guard, memcheck])
    assert (one.bytes, one.kernel, one.source) == (8, "scale_kernel", "kernels.py:17")
    site = finding_site(one.to_json(), {"root": "/repo"})
    assert site is not None and (site.file, site.line) == ("mykern/kernels.py", 17)


# ------------------------------------------------------------------------------------------- one vocabulary

def plain_run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:benchmark", *args],
                          cwd=str(root), env=env(), capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    (root / "test_tiny.py").write_text("def test_one():\n    assert True\n")
    return root


@pytest.mark.parametrize("args, names", [
    (["--gpu-memsafety=guard"], ["'guard' is a scenario mode", "--gpu-memsafety=markers"]),
    (["--gpu-memsafety=poison"], ["'poison' is a scenario mode", "--gpu-memsafety-mode poison"]),
    (["--gpu-memsafety-mode", "markers", "--gpu-memsafety-scenarios"],
     ["'markers' is a test-suite mode", "--gpu-memsafety-mode guard"]),
    (["--gpu-memsafety-mode", "pages", "--gpu-memsafety-scenarios"], ["--gpu-memsafety-mode guard_page"]),
])
def test_a_mode_of_the_other_kind_is_an_error_naming_the_option_that_takes_it(tiny: Path, args: list[str],
                                                                               names: list[str]) -> None:
    proc = plain_run(tiny, *args)
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout[-2000:] + proc.stderr[-2000:]
    for name in names:
        assert name in proc.stderr, proc.stderr[-2000:]


def test_an_option_that_does_nothing_alone_says_so(tiny: Path) -> None:
    proc = plain_run(tiny, "--gpu-memsafety-report-dir", "r", "--gpu-memsafety-batch", "4")
    assert proc.returncode == 0, proc.stdout[-2000:]
    said = " ".join(proc.stdout.split())
    assert "--gpu-memsafety-report-dir does nothing without --gpu-memsafety" in said, proc.stdout[-2000:]
    assert "--gpu-memsafety-batch-size does nothing without --gpu-memsafety" in said, proc.stdout[-2000:]
    assert not (tiny / "r").exists()


def test_help_shows_both_kinds_of_mode_in_one_table(tiny: Path) -> None:
    text = " ".join(plain_run(tiny, "--help").stdout.split())
    assert text.count("Test-suite mode = scenario mode: complete=complete, markers=guard, memcheck=memcheck, "
                      "pages=guard_page, trace=-") == 2, text
    assert "--gpu-memsafety-batch-size=N, --gpu-memsafety-batch=N" in text


@pytest.mark.parametrize("quiet", [[], ["-q"]])
def test_what_the_run_says_once_is_said_with_or_without_the_header(tiny: Path, quiet: list[str]) -> None:
    """pytest's header carries it; -q drops the header, so the end of the run says it instead: once either way."""
    proc = plain_run(tiny, "--gpu-memsafety=markers", *quiet)
    assert proc.returncode == 5, proc.stdout[-2000:]
    assert proc.stdout.count("--gpu-memsafety=markers cannot check anything here") == 1, proc.stdout
