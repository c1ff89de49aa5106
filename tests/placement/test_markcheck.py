"""The one-launch Triton marker fill and check (harness/gpu_memsafety/placement/markcheck.py), run in Triton's interpreter on the
CPU in a subprocess (the interpreter must be chosen before triton is imported): it counts exactly what a
hand count from a host copy counts, on word and byte spans, 1-D and padded 2-D, and `verify` through it
gives the same byte runs as the torch path; `fill_markers` restores every marker."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpu_memsafety.placement.guard import Arena
from gpu_memsafety.placement.markcheck import Span
from gpu_memsafety.util.paths import CHECKOUT as ROOT
from repo_paths import HELPERS


@pytest.mark.e2e
def test_triton_check_agrees_with_a_hand_count_and_with_the_torch_path() -> None:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, str(HELPERS / "markcheck_probe.py")], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["problems"] == []
    assert result["spans_checked"] > 100


@pytest.mark.parametrize("addr,width,stride,rows,words", [
    (4096, 1024, 1024, 1, True),       # front guard
    (4096 + 3, 1024, 1024, 1, False),  # back guard of a 3-byte tensor
    (4096 + 72, 8, 80, 5, True),       # H=2304 scale padding
    (4096 + 90, 6, 96, 5, False),      # 90-byte rows padded to 96
])
def test_word_spans_need_address_width_and_stride_on_8_bytes(addr: int, width: int, stride: int, rows: int, words: bool) -> None:
    assert Span(addr, rows, width, stride, 0xA5).words is words


def test_unknown_checker_is_refused() -> None:
    a = Arena(torch.device("cpu"), checker="fast")
    a.tensor("x", (4,), torch.uint8)
    with pytest.raises(ValueError, match="checker 'fast'"):
        a.verify()
