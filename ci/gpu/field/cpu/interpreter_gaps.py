"""pytest plugin (`-p interpreter_gaps`, with this folder on PYTHONPATH): two things Triton 3.6's interpreter refuses
that compiled Triton runs, met in state-spaces/mamba's Mamba-3 kernels (e9594ce1c732), each of which stops a kernel at
its first call so that nothing after it is checked:

- one-instruction PTX math through `tl.inline_asm_elementwise` (`cos.approx.f32`, `sin.approx.f32`,
  `tanh.approx.f32` in mamba_ssm/ops/triton/mamba3/utils.py): "inline_asm not supported in interpreter mode". Only the
  exact one-instruction forms below are computed (numpy, float32, as the GPU's approximate instructions do up to their
  rounding); any other asm still raises as before, so nothing is silently given a wrong value.
- a bfloat16 scalar constant (`tl.full(..., dtype=tl.bfloat16)` and the like): "'InterpreterBuilder' object has no
  attribute 'get_bf16'". Made as the interpreter stores bfloat16 (the upper 16 bits of the float32, rounded to
  nearest even).

Field tooling, not part of the harness: what the kernels compute is the library's own assertion; the trace judges
addresses.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

_ONE_INSTRUCTION = re.compile(r"^\s*([a-z0-9.]+)\s+\$0\s*,\s*\$1\s*;\s*$")
_FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "cos.approx.f32": np.cos, "cos.approx.ftz.f32": np.cos,
    "sin.approx.f32": np.sin, "sin.approx.ftz.f32": np.sin,
    "tanh.approx.f32": np.tanh,
    "ex2.approx.f32": np.exp2, "ex2.approx.ftz.f32": np.exp2,
    "lg2.approx.f32": np.log2, "lg2.approx.ftz.f32": np.log2,
    "rcp.approx.f32": lambda x: 1.0 / x, "rcp.approx.ftz.f32": lambda x: 1.0 / x,
    "rsqrt.approx.f32": lambda x: 1.0 / np.sqrt(x), "rsqrt.approx.ftz.f32": lambda x: 1.0 / np.sqrt(x),
    "sqrt.approx.f32": np.sqrt, "sqrt.approx.ftz.f32": np.sqrt,
}


class _Call:
    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def get_result(self, index: int) -> Any:
        if index != 0:
            raise IndexError(index)
        return self._handle


def install() -> None:
    import triton.language as tl
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    if getattr(builder, "_interpreter_gaps", False):
        return
    original = builder.create_inline_asm

    def create_inline_asm(self: Any, asm: str, constraints: str, values: list, types: list, is_pure: bool,
                          pack: int) -> Any:
        match = _ONE_INSTRUCTION.match(asm)
        function = _FUNCTIONS.get(match.group(1)) if match else None
        if function is None or constraints.replace(" ", "") != "=f,f" or len(values) != 1 or len(types) != 1:
            return original(self, asm, constraints, values, types, is_pure, pack)
        x = np.asarray(values[0].data, dtype=np.float32)
        with np.errstate(all="ignore"):
            out = np.asarray(function(x), dtype=np.float32)
        return _Call(interp.TensorHandle(out, values[0].dtype.scalar))

    def get_bf16(self: Any, value: float) -> Any:
        bits = np.array([value], dtype=np.float32).view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        return interp.TensorHandle(rounded, tl.bfloat16)

    builder.create_inline_asm = create_inline_asm
    if not hasattr(builder, "get_bf16"):
        builder.get_bf16 = get_bf16
    builder._interpreter_gaps = True


def pytest_configure(config: Any) -> None:
    install()
