"""pytest plugin for fla-org/flash-linear-attention's own tests on a machine without a GPU (`-p fla_on_cpu`, with this
folder on PYTHONPATH; ci/gpu/field/suites.sh, suite fla-cpu).

fla's device detection (fla/utils/_device.py at bc3b101dcb71) falls back to "cpu" when Triton has no driver, then
replaces "cpu" with "cuda" on torch >= 2.4, so every test tensor asks for CUDA. Loaded before fla's conftest and test
modules import `fla.utils.device`, this puts them on the CPU, where Triton's interpreter (TRITON_INTERPRET=1) runs the
kernels and `pytest --gpu-memsafety` traces every access. What the interpreter computes is not checked here (it
computes bf16 dot products on raw bits, so results differ from a GPU's); the addresses are what the trace judges.
"""
import torch

import fla.utils as _utils
import fla.utils._device as _device

for _module in (_utils, _device):
    _module.device = "cpu"
    _module.device_torch_lib = torch.cpu
