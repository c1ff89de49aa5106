"""ci/gpu/field/calib/test_widths.py's own helper: on a GPU `_synchronize()` waits for the device once (issue 53: it
called itself, so two calibration tests ended in RecursionError on a GPU). Checked here without a GPU by standing in
for torch.cuda.synchronize."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from repo_paths import ROOT


def test_synchronize_calls_the_device_once_not_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("triton")
    import torch
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    spec = importlib.util.spec_from_file_location("calib_test_widths", ROOT / "ci/gpu/field/calib/test_widths.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls: list[int] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: calls.append(1))
    monkeypatch.setattr(module, "DEVICE", "cuda")
    module._synchronize()
    assert calls == [1]
    monkeypatch.setattr(module, "DEVICE", "cpu")
    module._synchronize()
    assert calls == [1]
