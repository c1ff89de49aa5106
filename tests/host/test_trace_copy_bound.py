"""Issue 53, class 4: the trace's guarded copies have a size bound with a clear verdict (host/copy_bound.py), and
the harness's errors never carry a tensor's or a storage's repr into pytest's traceback. Before: a 4 GiB CPU tensor
under an address-space limit made the copy fail with the harness's own OSError, and pytest then spent minutes
rendering the storage in the traceback. Tested with a small RLIMIT_AS set inside the test (a child pytest)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_memsafety.host import copy_bound

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)

KERNEL = '''
import mmap
import resource
import torch
import triton
import triton.language as tl


@triton.jit
def first_bytes(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


def vm_size():
    status = open("/proc/self/status").read()
    return next(int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmSize:"))
'''

UNDER_A_LIMIT = KERNEL + '''

def test_a_big_tensor_under_an_address_space_limit():
    x = torch.zeros(64 << 20, dtype=torch.uint8)          # 64 MiB; the copy would need as much again
    out = torch.empty(16, dtype=torch.uint8)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm_size() + (40 << 20), hard))
    try:
        first_bytes[(1,)](x, out, BLOCK=16)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert int(out.sum()) == 0
'''

MAP_FAILS = KERNEL + '''

def test_the_copy_cannot_be_mapped(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(12, "Cannot allocate memory")
    monkeypatch.setattr(mmap, "mmap", refuse)
    x = torch.arange(256, dtype=torch.float32)
    out = torch.empty(16, dtype=torch.float32)
    first_bytes[(1,)](x, out, BLOCK=16)
'''


def run_suite(tmp: Path, suite: str) -> tuple[subprocess.CompletedProcess[str], dict[str, dict]]:
    folder = tmp / "suite"
    folder.mkdir()
    (folder / "conftest.py").write_text("import os\nos.environ['TRITON_INTERPRET'] = '1'\n")
    (folder / "test_big.py").write_text(suite)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TRITON_", "GITHUB_"))}
    env.update(CUDA_VISIBLE_DEVICES="", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", GPU_MEMSAFETY_CACHE=str(tmp / "cache"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "gpu_memsafety.fixtures.plugin", "-p", "no:cacheprovider",
                           "--gpu-memsafety=trace", "--gpu-memsafety-report-dir", str(tmp / "r"), "-q", "--tb=long"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=180)
    doc = json.loads((tmp / "r" / "report.json").read_text())
    return proc, {c["id"].split("::")[-1]: c for c in doc["cases"]}


def test_the_bound_and_the_address_space_left_decide() -> None:
    assert copy_bound.refusal(1 << 20, 1 << 20, 1) == ""
    assert "over the trace's copy bound" in copy_bound.refusal(4 << 30, 1 << 20, 1)
    code = ("import resource; from gpu_memsafety.host import copy_bound as c\n"
            "used = next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize:'))\n"
            "resource.setrlimit(resource.RLIMIT_AS, (used + (512 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))\n"
            "print(c.address_space_left() is not None, 'RLIMIT_AS' in c.refusal(1 << 30, 1 << 20, 1))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["True", "True"], proc.stderr


def test_a_launch_over_the_address_space_left_is_not_checked_and_says_why(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    started = time.monotonic()
    proc, cases = run_suite(tmp_path, UNDER_A_LIMIT)
    case = cases["test_a_big_tensor_under_an_address_space_limit"]
    assert case["outcome"] == "unresolved", (case, proc.stdout[-2000:])
    assert "first_bytes was not checked" in case["message"] and "RLIMIT_AS" in case["message"]
    assert case["details"]["test"]["outcome"] == "passed"          # the test ran, as a plain interpreted launch
    assert proc.returncode != 0 and time.monotonic() - started < 150


def test_a_copy_that_cannot_be_made_shows_no_storage_and_no_harness_frame(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    proc, cases = run_suite(tmp_path, MAP_FAILS)
    out = proc.stdout + proc.stderr
    assert "could not map a guarded copy" in out, out[-3000:]
    assert "UntypedStorage" not in out and "storage = " not in out, out[-3000:]
    assert "def _guarded_copy" not in out and "def relocate" not in out, out[-3000:]
    assert cases["test_the_copy_cannot_be_mapped"]["outcome"] != "clean"
