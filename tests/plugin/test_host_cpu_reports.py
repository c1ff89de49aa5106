"""`pytest --gpu-memsafety` on a machine without a GPU: the gpu_memsafety_guarded fixture still checks its tensors
(device="cpu"), and what it finds is the test's finding in every report the run writes (report.json, SARIF, the
GitHub annotations and step summary), through the same writers as a scenario run; asked for a CUDA tensor without a
GPU, the fixture says so in one sentence. Also the plugin's pytest-memray-like surface: its marker and fixture are
documented in `pytest --markers` / `--fixtures`, and `-p no:gpu_memsafety` leaves it out.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_memsafety.scenario import registry

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

SUITE = '''
import torch

def test_writes_one_past_the_end(gpu_memsafety_guarded):
    out = gpu_memsafety_guarded.empty("out", (16,), torch.uint8, device="cpu")
    out.as_strided((20,), (1,))[16:20] = 7          # 4 bytes past the tensor's end

def test_stays_inside(gpu_memsafety_guarded):
    out = gpu_memsafety_guarded.zeros("out", (16,), torch.uint8, device="cpu")
    out += 1

def test_asks_for_cuda(gpu_memsafety_guarded):
    gpu_memsafety_guarded.empty("out", (16,), torch.uint8)
'''


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "GITHUB_")) and k not in ("PYTHONPATH", registry.ENV_VAR)}
    out.update(CUDA_VISIBLE_DEVICES="", **extra)
    return out


def run(cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=str(cwd),
                          env=env(**extra), capture_output=True, text=True, timeout=300)


def test_a_fixture_finding_on_a_cpu_reaches_every_report(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    summary = tmp_path / "step-summary.md"
    proc = run(tmp_path, "--gpu-memsafety", "test_suite.py", "--gpu-memsafety-report-dir", "r", "-rs",
               GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    cases = {c["id"].split("::")[-1]: c for c in doc["cases"]}
    bad = cases["test_writes_one_past_the_end"]
    assert bad["outcome"] == "finding" and bad["failed"], bad["message"]
    [finding] = bad["findings"]
    assert (finding["detector"], finding["kind"], finding["buffer"], finding["region"], finding["bytes"]) == \
        ("guard", "overwrite", "out", "past_end", 4)
    assert cases["test_stays_inside"]["outcome"] == "clean"
    assert doc["summary"]["ran"] == 2 and doc["summary"]["status"] == "failed"
    sarif = json.loads((tmp_path / "r" / "report.sarif").read_text())
    [result] = sarif["runs"][0]["results"]
    assert result["ruleId"] == "guard/overwrite" and "test_writes_one_past_the_end" in result["properties"]["case"]
    assert "::error" in proc.stdout and "test_writes_one_past_the_end" in proc.stdout    # GitHub annotations
    assert "GPU memory safety" in summary.read_text() and "test_writes_one_past_the_end" in summary.read_text()
    assert "CHECKED NOTHING" not in proc.stdout
    skipped = cases["test_asks_for_cuda"]
    assert "needs a CUDA GPU and torch sees none here; pass device='cpu'" in proc.stdout
    assert skipped["outcome"] == "not applicable", skipped


def test_the_marker_and_fixture_are_documented_and_the_plugin_can_be_left_out(tmp_path: Path) -> None:
    markers = run(tmp_path, "--markers")
    assert markers.returncode == 0 and "@pytest.mark.gpu_memsafety(expect=None" in markers.stdout, markers.stderr
    fixtures = run(tmp_path, "--fixtures")
    text = fixtures.stdout
    assert fixtures.returncode == 0 and "gpu_memsafety_guarded" in text, fixtures.stderr
    documented = text[text.index("gpu_memsafety_guarded"):].split("\n\n", 1)[0]
    assert "Guarded tensors for this test" in documented and "no docstring" not in documented, documented
    left_out = run(tmp_path, "-p", "no:gpu_memsafety", "--help")
    assert left_out.returncode == 0 and "--gpu-memsafety" not in left_out.stdout, left_out.stderr
    refused = run(tmp_path, "-p", "no:gpu_memsafety", "--gpu-memsafety")
    assert refused.returncode == 4 and "unrecognized arguments: --gpu-memsafety" in refused.stderr, refused.stderr
