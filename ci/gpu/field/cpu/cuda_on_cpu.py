"""pytest plugin for a library's own GPU tests on a machine without a GPU (`-p cuda_on_cpu`, with this folder on
PYTHONPATH; ci/gpu/field/suites.sh, suite mamba-cpu).

Many kernel libraries' tests write `device = "cuda"` (state-spaces/mamba's Triton op tests do). Here every tensor
a test asks for on a CUDA device is made on the CPU instead (a TorchFunctionMode that rewrites a `device` argument
and `.cuda()` / `.to("cuda")`, as torch's own `torch.device(...)` context does), and the few `torch.cuda` calls a
test or a launcher makes around its kernels (synchronize, manual_seed, empty_cache, `with torch.cuda.device(i)`)
do nothing; `torch.cuda.is_available()`
stays False (a test that skips without CUDA still skips, and the harness still sees no GPU). Triton's interpreter (TRITON_INTERPRET=1) then runs the kernels and `pytest --gpu-memsafety` traces every
access; what the kernels compute is the library's own assertion, the addresses are what the trace judges.
Field tooling, not part of the harness: a test that asks for device properties (SM counts) fails here; the compute
capability is answered as an H100's, (9, 0).
"""
from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


def _cpu(device: Any) -> Any:
    if isinstance(device, torch.device) and device.type == "cuda":
        return torch.device("cpu")
    if isinstance(device, str) and device.split(":")[0] == "cuda":
        return "cpu"
    if isinstance(device, int):          # .to(0), device=0: a CUDA ordinal
        return "cpu"
    return device


class CudaOnCpu(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.to and len(args) > 1 and not isinstance(args[1], (torch.dtype, torch.Tensor)):
            args = (args[0], _cpu(args[1]), *args[2:])
        return func(*args, **kwargs)


_MODE = CudaOnCpu()


def pytest_configure(config: Any) -> None:
    _MODE.__enter__()
    for name, value in {"synchronize": lambda *a, **k: None, "manual_seed": lambda *a, **k: None,
                        "manual_seed_all": lambda *a, **k: None, "empty_cache": lambda: None,
                        "device": lambda *a, **k: contextlib.nullcontext(),
                        # config pruning by architecture (mamba's Mamba-3 forward): answered as an H100's (sm_90), the
                        # GPU the campaign's confirmations run on, so the CPU run checks the configs that GPU runs
                        "get_device_capability": lambda *a, **k: (9, 0)}.items():
        setattr(torch.cuda, name, value)


def pytest_unconfigure(config: Any) -> None:
    _MODE.__exit__(None, None, None)
