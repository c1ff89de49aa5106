"""Which tensors each Triton kernel of a test was handed, by name: the kernel's parameter and the test's own variable.

A memcheck record names a kernel and an address, the allocator the allocation that holds (or nearly holds) it
(`alloc 4000 B at test_k.py line 12`). A kernel developer thinks in the names of the code instead: the tensor the
test calls `b_s`, handed to `_gemm_kernel` as its parameter `b_s_ptr`. While a host-suite test runs, every Triton
launch is seen on its way in (JITFunction.run wrapped, warm-up compiles excluded) and each tensor argument is noted
as (kernel, parameter, the first byte of its storage), with the test function's local variables that hold a tensor
of the same storage. The judge matches a finding's allocation to these by its first byte (every allocation of the
guard allocator is one storage) and names them (`name_of`). Launches of other kinds (CUDA C++ extensions, cuBLAS)
are not seen: their findings keep the allocation's own name.

Pure data and matching here; `LaunchLog.install` is the only part that touches Triton, and does nothing where Triton
is not installed.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

# A test that launches many kernels notes each (kernel, parameter, storage) once, and at most this many in all.
MAX_USES = 512
# How far up from a launch the test function's own frame is looked for.
MAX_DEPTH = 64


@dataclass(frozen=True)
class TensorUse:
    """One tensor argument of one kernel launch of a test."""

    kernel: str
    param: str                       # the kernel's parameter name
    ptr: int                         # the first byte of the tensor's storage
    variables: tuple[str, ...] = ()  # the test function's locals holding a tensor of that storage

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "param": self.param, "ptr": self.ptr, "variables": list(self.variables)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TensorUse":
        return cls(str(data["kernel"]), str(data["param"]), int(data["ptr"]),
                   tuple(str(v) for v in data.get("variables", ())))


def name_of(ptr: int, uses: Iterable[TensorUse], kernel: str = "") -> str:
    """How the code names the allocation starting at `ptr`: the parameters of `kernel` (the finding's own kernel)
    it was passed as, else of any kernel of the test, and the test's variables holding it; "" when none is known."""
    mine = [u for u in uses if u.ptr == ptr]
    if not mine:
        return ""
    own = [u for u in mine if kernel and u.kernel == kernel] or mine
    params = _unique(f"`{u.param}` of {u.kernel}" for u in own)
    variables = _unique(f"`{v}`" for u in mine for v in u.variables)
    parts = [f"kernel argument {', '.join(params)}"] if params else []
    if variables:
        parts.append(f"test variable {', '.join(variables)}")
    return "; ".join(parts)


def _unique(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def storage_ptr(value: Any, *, cuda: bool = True) -> int | None:
    """The first byte of a tensor's storage on the GPU (`cuda`) or the host (a Triton TensorDescriptor's or
    TensorWrapper's base tensor's); None for anything else, a tuple of tensors included."""
    base = getattr(value, "base", None)
    if base is not None and not hasattr(value, "untyped_storage") and hasattr(base, "untyped_storage"):
        value = base                                   # triton.tools.tensor_descriptor.TensorDescriptor, TensorWrapper
    storage = getattr(value, "untyped_storage", None)
    if storage is None or bool(getattr(value, "is_cuda", False)) != cuda:
        return None
    try:
        return int(storage().data_ptr())
    except Exception:                                  # noqa: BLE001 - a tensor subclass without a real storage
        return None


def variables_of(frame: Any, code: Any,
                 ptr_of: Callable[[Any], int | None] = storage_ptr) -> dict[int, tuple[str, ...]]:
    """Storage pointer -> the names the test function's frame (the one running `code`) gives tensors of it
    (`ptr_of`: a value's storage pointer, None for what is not a tensor of interest; CUDA tensors by default)."""
    depth = 0
    while frame is not None and depth < MAX_DEPTH:
        if frame.f_code is code:
            out: dict[int, list[str]] = {}
            for name, value in frame.f_locals.items():
                for item in (value if isinstance(value, (tuple, list)) and len(value) <= 16 else (value,)):
                    ptr = ptr_of(item)
                    if ptr is not None:
                        out.setdefault(ptr, [])
                        if name not in out[ptr]:
                            out[ptr].append(name)
            return {ptr: tuple(names) for ptr, names in out.items()}
        frame, depth = frame.f_back, depth + 1
    return {}


class LaunchLog:
    """The tensor uses of the running test (begin .. take), gathered by a wrapper around Triton's launch."""

    def __init__(self) -> None:
        self.code: Any = None
        self.uses: dict[tuple[str, str, int], TensorUse] = {}
        self._restore: Callable[[], None] | None = None

    def begin(self, test_function: Any) -> None:
        """A test starts: its launches from now on, its function's frame the one whose variables name tensors.
        The wrapper goes in at the first test that finds Triton imported (by the suite, never by us: a suite's
        conftest may set Triton's environment before it imports it)."""
        self.code = getattr(test_function, "__code__", None)
        self.uses = {}
        if self._restore is None and "triton.runtime.jit" in sys.modules:
            self.install()

    def take(self) -> list[TensorUse]:
        uses, self.uses = list(self.uses.values()), {}
        return uses

    def note(self, kernel: str, arg_names: Sequence[str], args: Sequence[Any], kwargs: Mapping[str, Any],
             frame: Any) -> None:
        bound = {**dict(zip(arg_names, args)), **{k: v for k, v in kwargs.items() if k in arg_names}}
        new = []
        for param, value in bound.items():
            ptr = storage_ptr(value)
            if ptr is not None and (kernel, param, ptr) not in self.uses:
                new.append((param, ptr))
        if not new or len(self.uses) >= MAX_USES:
            return
        names = variables_of(frame, self.code) if self.code is not None else {}
        for param, ptr in new:
            self.uses[(kernel, param, ptr)] = TensorUse(kernel, param, ptr, names.get(ptr, ()))

    def install(self) -> bool:
        """Wrap triton's JITFunction.run; False where Triton is not importable (nothing to see, nothing changed)."""
        try:
            from triton.runtime.jit import JITFunction
        except Exception:                              # noqa: BLE001 - no (working) Triton: no Triton launches
            return False
        original = JITFunction.run
        log = self

        def run(fn: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
            if not warmup:
                try:
                    log.note(getattr(fn, "__name__", "?"), list(getattr(fn, "arg_names", ())), args, kwargs,
                             sys._getframe(1))
                except Exception:                      # noqa: BLE001 - naming is a courtesy; the launch must go on
                    pass
            return original(fn, *args, grid=grid, warmup=warmup, **kwargs)

        JITFunction.run = run                          # type: ignore[method-assign]

        def restore() -> None:
            JITFunction.run = original                 # type: ignore[method-assign]
        self._restore = restore
        return True

    def uninstall(self) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None
