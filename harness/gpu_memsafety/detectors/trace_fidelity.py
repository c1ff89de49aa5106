"""Triton's interpreter, made to run a kernel the way compiled Triton does where it does not, so that the trace
can check the kernel to its end (triton 3.6, runtime/interpreter.py and compiler/code_generator.py).

- A float argument: the interpreter hands it to the kernel as a Python float (its `_implicit_cvt` wraps ints and
  pointers only, "TODO: wrap everything in triton tensors"); compiled Triton passes an fp32 scalar. A kernel that
  calls `eps.to(tl.float32)` ends under the interpreter with AttributeError("'float' object has no attribute 'to'")
  (Liger-Kernel's norms, rope, geglu). Here it gets the fp32 scalar.
- The variable of `for i in range(...)` or `tl.range(...)`: a Python int in the interpreter; in compiled Triton a
  scalar of the bounds' promoted integer type (code_generator.visit_For: int32, int64 when a bound is), so
  `i.to(tl.int64)` ends the launch ("'int' object has no attribute 'to'": fla's chunked delta rules). Here it is
  that scalar. `tl.static_range` keeps its Python int, as compiled Triton unrolls it (a constexpr).
- libdevice: `triton.language.extra.libdevice`'s functions are stubs (`...`: they return None) that compiled Triton
  maps to the backend's (nvidia: extra.cuda.libdevice, compiler.get_module_map), whose calls become an extern
  elementwise call the interpreter does not do (NotImplementedError). Liger's norms take `rsqrt`, its GEGLU `tanh`
  from there. Here a kernel's (or helper's) stub functions and module are the cuda ones, and an extern call is
  computed with numpy by its libdevice symbol (`__nv_rsqrtf`: LIBDEVICE["rsqrt"]); a symbol not in LIBDEVICE still
  ends the launch. The values only need to be close: the trace judges addresses.
- `min`/`max` in a kernel: compiled Triton takes them as tl's builtin_min/builtin_max (code_generator's
  builtin_namespace), tensor-aware; the interpreter runs Python's, which hands back a Python int where the int is
  smaller (`min(NC, tl.cdiv(...)).to(tl.int32)`: fla's KDA). Here the kernel's `min`/`max` calls are tl's when an
  argument is a tensor (Python's otherwise, the same value), unless the kernel's module binds the name itself
  (triton.language.standard's `max` reduction, which `tl.sort` and `tl.topk` call as `max(x, axis)`).
- A Triton builtin bound by a bare name in the kernel's module (`gather = tl.gather`, fla's utils): compiled Triton
  resolves it like `tl.gather`; the interpreter patches only the attributes of `triton.language`, so the bare name
  is the unpatched function ("Did you forget to add @triton.jit ?"). Here it is the `tl` attribute, read at call time.

- A scalar used as an index (`range(pid * BLOCK, n)` outside a rewritten loop, `t[pid]`): the interpreter calls
  int() on the scalar's one-element array, which numpy refuses from 2.4 on ("only 0-dimensional arrays can be
  converted to Python scalars": triton#9171, fixed after 3.6 by #9172; the H200's numpy is 2.5). Here the array is
  squeezed first, as that fix does.

Without these such a launch ends early, and the trace says "not checked to the end" (never clean). Installed once
per process, with the trace's own wrappers (detectors/trace.py), only where Triton interprets; kernels rewritten
before are rewritten again.
"""
from __future__ import annotations

import ast
import math
import re
from types import SimpleNamespace
from typing import Any, Callable, Iterator

RANGE = "_gpu_memsafety_range"      # the name the rewritten loops call, in each kernel's globals
MIN_MAX = {"min": "_gpu_memsafety_min", "max": "_gpu_memsafety_max"}     # and the rewritten min() and max() calls
STUBS = "triton.language.extra.libdevice"


def _libdevice() -> dict[str, Callable[..., Any]]:
    import numpy as np
    away = lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)       # noqa: E731  (roundf: half away from zero)
    table: dict[str, Callable[..., Any]] = {
        "abs": np.abs, "fabs": np.abs, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "rcp": lambda x: 1 / x,
        "cbrt": np.cbrt, "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x), "expm1": np.expm1,
        "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos,
        "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "atan2": np.arctan2, "sinh": np.sinh,
        "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
        "erf": np.vectorize(math.erf), "erfc": np.vectorize(math.erfc), "pow": np.power, "powi": np.power,
        "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": away, "rint": np.rint, "nearbyint": np.rint,
        "fmod": np.fmod, "max": np.fmax, "min": np.fmin, "fmax": np.fmax, "fmin": np.fmin, "hypot": np.hypot,
        "copysign": np.copysign, "fma": lambda a, b, c: a * b + c, "add": np.add, "sub": np.subtract,
        "mul": np.multiply, "div": np.divide, "divide": np.divide, "isnan": np.isnan, "isinf": np.isinf,
        "isfinite": np.isfinite, "finite": np.isfinite, "signbit": np.signbit,
    }
    return table


def libdevice_op(symbol: str, table: dict[str, Callable[..., Any]]) -> Callable[..., Any] | None:
    """numpy's function for a libdevice symbol: `__nv_` off, then a rounding mode (`_rn`), a `fast_` prefix, the
    float variant's trailing `f` and an arithmetic op's leading `f` tried in turn (`__nv_fast_expf` -> exp,
    `__nv_fsqrt_rn` -> sqrt, `__nv_erff` -> erf); None when none is in the table."""
    name = re.sub(r"_r[nzdu]$", "", symbol.removeprefix("__nv_")).removeprefix("fast_")
    for candidate in (name, name[:-1] if name.endswith("f") else "", name[1:] if name.startswith("f") else "",
                      name[1:-1] if name.startswith("f") and name.endswith("f") else ""):
        if candidate in table:
            return table[candidate]
    return None


def install() -> bool:
    """Patch the interpreter (once per process); False when it was patched already."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter as I

    if getattr(I, RANGE, None) is not None:
        return False
    semantic = I.interpreter_semantic
    original_cvt = I._implicit_cvt

    def scalar(value: Any, ty: Any) -> Any:
        return tl.tensor(I.TensorHandle(np.array([value], dtype=I._get_np_dtype(ty)), ty), ty)

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            return scalar(arg, tl.float32)      # compiled Triton's type for a float argument (mangle_type: fp32)
        return original_cvt(arg)

    def loop(arg1: Any, arg2: Any = None, step: Any = None, **_: Any) -> Iterator[Any]:
        """tl.range as compiled Triton iterates it: its variable a scalar of the bounds' promoted integer type."""
        start, end = (0, arg1) if arg2 is None else (arg1, arg2)
        step = 1 if step is None else step
        bounds = [semantic.to_tensor(b.value if isinstance(b, tl.constexpr) else b) for b in (start, end, step)]
        ty = semantic.integer_promote_impl(semantic.integer_promote_impl(bounds[0].dtype, bounds[1].dtype),
                                           bounds[2].dtype)
        lo, hi, by = (int(np.asarray(b.handle.data).reshape(-1)[0]) for b in bounds)
        for i in range(lo, hi, by):
            yield scalar(i, ty)

    def builtin(python: Any, triton_builtin: Any) -> Any:
        """min or max as compiled Triton calls it: tl's builtin when an argument is a tensor."""
        def call(*args: Any, **kwargs: Any) -> Any:
            if any(isinstance(a, tl.tensor) for a in args):
                return triton_builtin(*args, _semantic=semantic, **kwargs)
            return python(*args, **kwargs)
        return call

    class Loops(I.ASTTransformer):     # type: ignore[misc, name-defined]
        def visit_For(self, node: ast.For) -> ast.For:
            self.generic_visit(node)
            if isinstance(node.iter, ast.Call) and _is_range(node.iter.func):
                node.iter = ast.Call(func=ast.Name(id=RANGE, ctx=ast.Load()), args=node.iter.args,
                                     keywords=node.iter.keywords)
            return node

        def visit_Assign(self, node: ast.Assign) -> Any:
            node.value = self.visit(node.value)     # the interpreter's own visit_Assign does not look inside
            return super().visit_Assign(node)

        shadowed: frozenset[str] = frozenset()     # min/max the function's module binds itself (set per rewrite)

        def visit_Call(self, node: ast.Call) -> ast.Call:
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id in MIN_MAX and node.func.id not in self.shadowed:
                node.func = ast.Name(id=MIN_MAX[node.func.id], ctx=ast.Load())
            return node

    table = _libdevice()

    def extern_elementwise(self: Any, lib_name: str, lib_path: str, symbol: str, args: list[Any], ret: Any,
                           is_pure: bool) -> Any:
        op = libdevice_op(symbol, table)
        if op is None:
            raise NotImplementedError(f"extern_elementwise {symbol} not supported in interpreter mode")
        element = getattr(ret, "scalar", ret)      # a block type's element type
        with np.errstate(all="ignore"):
            value = op(*(np.asarray(a.data) for a in args))
        return I.TensorHandle(np.asarray(value).astype(I._get_np_dtype(element)), element)

    from triton.language.extra import libdevice as stubs
    from triton.language.extra.cuda import libdevice as cuda
    wrapped: dict[Any, Any] = {}

    def interpreted(fn: Any) -> Any:
        """A cuda libdevice builtin given the interpreter's semantic (as the interpreter's own _patch_attr does)."""
        if fn not in wrapped:
            wrapped[fn] = lambda *a, _fn=fn, **k: _fn(*a, **{x: v for x, v in k.items() if x != "_semantic"},
                                                      _semantic=semantic)
        return wrapped[fn]

    module = SimpleNamespace(**{name: interpreted(f) for name, f in vars(cuda).items() if tl.core.is_builtin(f)})
    forwards: dict[tuple[int, str], Any] = {}

    def forward(owner: Any, name: str) -> Any:
        """`owner.name` looked up when called: inside a launch, the interpreter's patched member."""
        key = (id(owner), name)
        if key not in forwards:
            forwards[key] = lambda *a, **k: getattr(owner, name)(*a, **k)
        return forwards[key]

    def rewrite_ast(self: Any) -> Any:
        names = self.fn.__globals__
        for key, value in list(names.items()):
            if value is stubs or value is cuda:
                names[key] = module
            elif getattr(value, "__module__", "") == STUBS and tl.core.is_builtin(getattr(cuda, value.__name__, None)):
                names[key] = interpreted(getattr(cuda, value.__name__))
            elif getattr(value, "__module__", "") == cuda.__name__ and tl.core.is_builtin(value):
                names[key] = interpreted(value)
            elif tl.core.is_builtin(value):
                owner = next((o for o in (tl, tl.math) if getattr(o, value.__name__, None) is value), None)
                if owner is not None:
                    names[key] = forward(owner, value.__name__)
        # Only Python's own min/max are compiled Triton's builtins: a module that defines its own (triton.language.
        # standard's `max` reduction, which its sort and topk call as `max(x, axis)`) keeps its function
        transformer.shadowed = frozenset(n for n in MIN_MAX if n in names)
        return original_rewrite(self)

    original_patch_tensor = I._patch_lang_tensor

    def patch_lang_tensor(tensor: Any, *scope: Any) -> None:
        original_patch_tensor(tensor, *scope)
        index = lambda self: int(np.asarray(self.handle.data).squeeze())      # noqa: E731
        if scope:
            scope[0].set_attr(tensor, "__index__", index)
        else:                  # triton 3.4: the interpreter sets tl.tensor's attributes itself, with no scope
            tensor.__index__ = index

    original_rewrite = I.FunctionRewriter.rewrite_ast
    I.FunctionRewriter.rewrite_ast = rewrite_ast
    I.InterpreterBuilder.create_extern_elementwise = extern_elementwise
    I._implicit_cvt = implicit_cvt
    I._patch_lang_tensor = patch_lang_tensor    # called by name at each launch; its scope restores what it set
    setattr(I, RANGE, loop)     # the rewriter copies the interpreter's globals into each kernel's
    # triton 3.6 has builtin_min/builtin_max; 3.4's code generator maps min/max to tl.minimum/tl.maximum
    setattr(I, MIN_MAX["min"], builtin(min, getattr(tl.core, "builtin_min", tl.minimum)))
    setattr(I, MIN_MAX["max"], builtin(max, getattr(tl.core, "builtin_max", tl.maximum)))
    transformer = Loops()
    I.FunctionRewriter.ast_transformer = transformer
    I.InterpretedFunction.rewritten_fn.clear()
    return True


def _is_range(func: ast.expr) -> bool:
    """`range` (compiled Triton's tl.range) or `<module>.range`; never `static_range`."""
    return (isinstance(func, ast.Name) and func.id == "range") or (isinstance(func, ast.Attribute) and func.attr == "range")
