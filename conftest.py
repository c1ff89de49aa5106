"""Root conftest: hooks only. The plugin lives in fixtures/plugin.py; this file makes sure the project's
own top-level packages (harness, fixtures, kernels, scenarios) win over unrelated PyPI packages that use
the same names (Hugging Face's `kernels`, testing-cabal's `fixtures`, ...)."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
OWN_PACKAGES = ("harness", "fixtures", "kernels", "scenarios")


def _claim_names() -> None:
    if str(ROOT) in sys.path:
        sys.path.remove(str(ROOT))
    sys.path.insert(0, str(ROOT))
    for name in OWN_PACKAGES:
        module = sys.modules.get(name)
        origin = Path(str(getattr(module, "__file__", "") or "/")).resolve() if module is not None else None
        if module is not None and origin.parent.parent != ROOT:
            del sys.modules[name]   # a foreign package of the same name was imported first (e.g. by a plugin)
            for sub in [m for m in sys.modules if m.startswith(name + ".")]:
                del sys.modules[sub]


_claim_names()
pytest_plugins = ["fixtures.plugin"]
