"""detectors/trace_fidelity.py: Triton's interpreter runs a float argument and a loop variable as compiled Triton
has them (an fp32 scalar; a scalar of the bounds' promoted integer type), so the trace checks such kernels to their
end; `tl.static_range` keeps its Python int. Run in a child with TRITON_INTERPRET=1 (set before triton is imported);
the same kernels fail there without the patch, which the child shows first."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

pytestmark = pytest.mark.e2e   # starts processes (`make test-fast` leaves the module out)


CHILD = r'''
import json, torch, triton, triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.libdevice import tanh
from triton.language.extra.cuda.libdevice import rsqrt

maximum = tl.maximum          # a Triton builtin by a bare name, as fla's utils bind `gather = tl.gather`

@triton.jit
def kernel(x_ptr, y_ptr, eps, n, steps, big, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.load(x_ptr + offs, mask=offs < n) * eps.to(tl.float32)
    for i in range(steps):
        tl.static_assert(i.dtype == tl.int32)
        acc += i.to(tl.float32)
    for j in tl.range(1, steps, 2):
        acc += j.to(tl.int64).to(tl.float32)
    for k in range(big - 1, big):
        tl.static_assert(k.dtype == tl.int64)          # a bound over int32: the variable is int64, as compiled
        acc += (k - big + 1).to(tl.float32)
    t = (10.0, 20.0)
    for s in tl.static_range(2):
        acc += t[s]                                     # a Python int: indexes a tuple, as compiled Triton unrolls it
    first = min(4, tl.cdiv(n, 4) + 5).to(tl.float32)        # min(int, tensor): the int, as compiled Triton's
    acc = maximum(acc + first, 0.0)                         # builtin_min returns it, a scalar with .to()
    tl.store(y_ptr + offs, acc, mask=offs < n)


@triton.jit
def maths(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = rsqrt(x) + tanh(x * 0.0) + libdevice.pow(x, 2.0) + libdevice.round(x * 0.0 + 2.5) + libdevice.fast_expf(x * 0.0)
    tl.store(y_ptr + offs, y)


def launch():
    x, y = torch.ones(8), torch.zeros(8)
    kernel[(1,)](x, y, 0.5, 8, 4, 1 << 40, BLOCK=8)
    z = torch.zeros(4)
    try:
        maths[(1,)](torch.full((4,), 4.0), z, BLOCK=4)
    except Exception as exc:
        return [y.tolist(), f"{type(exc).__name__}: {exc}"]
    return [y.tolist(), z.tolist()]


out = {}
try:
    launch()
    out["before"] = "ran"
except Exception as exc:
    out["before"] = f"{type(exc).__name__}: {exc}"
from gpu_memsafety.detectors import trace_fidelity
out["installed"] = trace_fidelity.install()
out["again"] = trace_fidelity.install()
out["after"] = launch()
print(json.dumps(out))
'''


def test_floats_and_loop_variables_run_as_compiled_triton_has_them(tmp_path: Path) -> None:
    script = tmp_path / "child.py"          # a file: the interpreter rewrites a kernel from its source
    script.write_text(CHILD)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT / "harness"), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "'float' object has no attribute 'to'" in out["before"], out          # the interpreter alone
    assert (out["installed"], out["again"]) == (True, False)
    # 0.5 + (0+1+2+3) + (1+3) + 0 + (10+20) + min(4, 7)
    assert out["after"][0] == [44.5] * 8, out
    # libdevice by the stub module, a stub function and a cuda function: 1/2 + 0 + 16 + 3 (half away from zero) + 1
    assert out["after"][1] == [20.5] * 4, out


def test_libdevice_symbols_map_to_numpy_functions() -> None:
    import numpy as np

    from gpu_memsafety.detectors.trace_fidelity import _libdevice, libdevice_op
    table = _libdevice()
    for symbol, name in (("__nv_rsqrtf", "rsqrt"), ("__nv_rsqrt", "rsqrt"), ("__nv_fast_expf", "exp"),
                         ("__nv_fsqrt_rn", "sqrt"), ("__nv_erff", "erf"), ("__nv_fabsf", "fabs"), ("__nv_fmaf", "fma"),
                         ("__nv_fdiv_rn", "div"), ("__nv_isnanf", "isnan"), ("__nv_fmodf", "fmod")):
        assert libdevice_op(symbol, table) is table[name], symbol
    assert libdevice_op("__nv_brev", table) is None and libdevice_op("__nv_umulhi", table) is None
    assert list(table["round"](np.array([2.5, -2.5, 0.4]))) == [3.0, -3.0, 0.0]     # roundf: half away from zero


INDEX_CHILD = r'''
import json, torch, triton, triton.language as tl

@triton.jit
def strided(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    for start in range(pid * BLOCK, n, programs * BLOCK):      # bounds are scalars: int() of their arrays
        offs = start + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * (10.0, 20.0)[pid], mask=offs < n)


def launch():
    x, y = torch.ones(40), torch.zeros(40)
    strided[(2,)](x, y, 40, BLOCK=8)
    return sorted(set(y.tolist()))


out = {}
try:
    out["before"] = launch()
except Exception as exc:
    out["before"] = f"{type(exc).__name__}: {exc}"
from gpu_memsafety.detectors import trace_fidelity
trace_fidelity.install()
out["after"] = launch()
print(json.dumps(out))
'''


def test_a_scalar_used_as_an_index_works_with_numpy_2_4_and_later(tmp_path: Path) -> None:
    """numpy 2.4 refuses int() of a one-element array (the H200's numpy 2.5: markcheck's and vLLM's strided loops
    ended there). Here numpy 2.3's DeprecationWarning for that conversion is made the error 2.4 raises, unless the
    child has numpy 2.4 or later already; the patched interpreter squeezes the array first."""
    script = tmp_path / "child.py"
    script.write_text(INDEX_CHILD)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT / "harness"), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-W", "error:Conversion of an array with ndim > 0:DeprecationWarning",
                           str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "0-dimensional" in out["before"] or "ndim > 0" in out["before"], out      # the interpreter alone
    assert out["after"] == [10.0, 20.0], out


SORT_CHILD = r'''
import json, torch, triton, triton.language as tl


@triton.jit
def top_two(x_ptr, y_ptr, m_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + tl.arange(0, 2), tl.topk(x, 2))            # tl.topk calls standard.py's own max(h, axis=...)
    tl.store(m_ptr, max(tl.max(x, axis=0), 0.5))                # a kernel's bare max: the builtin, tensor-aware


def launch():
    x, y, m = torch.tensor([3.0, 1.0, 4.0, 2.0]), torch.zeros(2), torch.zeros(1)
    top_two[(1,)](x, y, m, BLOCK=4)
    return [y.tolist(), m.tolist()]


from gpu_memsafety.detectors import trace_fidelity
trace_fidelity.install()
print(json.dumps(launch()))
'''


def test_a_module_that_binds_max_itself_keeps_it(tmp_path: Path) -> None:
    """The kernel's bare `max` is compiled Triton's builtin, but triton.language.standard's own `max` reduction,
    which tl.topk calls as `max(h, axis=...)`, is not rewritten: triton_kernels' topk ended with
    "builtin_max() got an unexpected keyword argument 'axis'" when it was."""
    script = tmp_path / "child.py"
    script.write_text(SORT_CHILD)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT / "harness"), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [[4.0, 3.0], [4.0]]
