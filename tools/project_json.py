"""The project's one JSON reader (harness/gpu_memsafety/util/jsonio.py: a key named twice is refused), loaded by its
path, for the scripts under tools/ and ci/ that run without the package installed:

    sys.path.insert(0, str(ROOT / "tools"))
    from project_json import jsonio
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def _load() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "harness" / "gpu_memsafety" / "util" / "jsonio.py"
    spec = importlib.util.spec_from_file_location("gpu_memsafety_jsonio", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


jsonio = _load()
