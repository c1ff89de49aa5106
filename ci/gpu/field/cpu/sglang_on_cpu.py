"""pytest plugin (`-p sglang_on_cpu`, with this folder and the sglang tree on PYTHONPATH; ci/gpu/field/suites.sh,
suites sglang and sglang-cpu): sglang's Triton kernels (sglang/kernels/ops/**, from the sglang wheel at the version
ci/gpu/field/fetch.sh pins) without the server stack.

The kernel modules themselves import only torch, triton, their siblings, `sglang.srt.environ` (a plain file, carried)
and a few probes of `sglang.srt.utils` (is_hip, is_cuda, get_device_core_count, ...). The packages' `__init__` files
pull in the whole server (the kernel registry needs msgspec; `sglang/__init__` the frontend). So here:

- `sglang`, `sglang.srt`, `sglang.kernels`, `sglang.kernels.ops` and each `sglang.kernels.ops.<family>` are made
  package objects over their folders without running their `__init__` (nothing is registered; modules import by path);
- `sglang.srt.utils` is a stand-in: `is_*()` probes answer False (not HIP, no NPU ...), `is_cuda()` answers whether
  torch sees a CUDA GPU, `get_device_core_count()` the GPU's SM count (132 without one: an H100's, a value the kernels'
  split heuristics take as given). Any other name raises ImportError at import time, so a module that needs more says
  so instead of running with a guess.

Field tooling, not part of the harness, and no upstream code: it only arranges imports.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import types
from typing import Any

import torch


def _tree() -> str:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("sglang_on_cpu: no sglang tree on PYTHONPATH (ci/gpu/field/fetch.sh sglang)")
    return list(spec.submodule_search_locations)[0]


def _package(name: str, path: str) -> None:
    if name in sys.modules:
        return
    module = types.ModuleType(name)
    module.__path__ = [path]
    module.__package__ = name
    sys.modules[name] = module
    parent, _, leaf = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], leaf, module)


def _core_count(*args: Any, **kwargs: Any) -> int:
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).multi_processor_count
    return 132


class _Utils(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name == "is_cuda":
            return torch.cuda.is_available
        if name in ("is_cuda_alike",):
            return torch.cuda.is_available
        if name == "get_device_core_count":
            return _core_count
        if name.startswith("is_"):
            return lambda *args, **kwargs: False
        if name.startswith("__"):
            raise AttributeError(name)
        raise ImportError(f"sglang_on_cpu: sglang.srt.utils.{name} is not stood in for (add it, or leave the module out)")


def install() -> None:
    root = _tree()
    _package("sglang", root)
    _package("sglang.srt", os.path.join(root, "srt"))
    _package("sglang.kernels", os.path.join(root, "kernels"))
    ops = os.path.join(root, "kernels", "ops")
    _package("sglang.kernels.ops", ops)
    for entry in sorted(os.listdir(ops)):
        if os.path.isdir(os.path.join(ops, entry)) and not entry.startswith("__"):
            _package(f"sglang.kernels.ops.{entry}", os.path.join(ops, entry))
    if "sglang.srt.utils" not in sys.modules:
        utils = _Utils("sglang.srt.utils")
        utils.__path__ = []          # a package to Python's import system, so `sglang.srt.utils.x` fails plainly
        sys.modules["sglang.srt.utils"] = utils
        sys.modules["sglang.srt"].utils = utils


def pytest_configure(config: Any) -> None:
    install()
