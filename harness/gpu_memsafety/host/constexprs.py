"""The constexpr integers each Triton launch of a test used (block sizes, chunk sizes), and how many launches ran and
which raised: what explore (host/explore.py) derives a test's boundary values from, in any process that runs tests
(in-process, a child). Compiled launches (JITFunction.run) and interpreted ones (InterpretedFunction.run, under
TRITON_INTERPRET=1) alike; an autotuner's configs arrive as keyword arguments of the same call, so every config's
block sizes are seen. Installed at the first test that finds Triton imported (by the suite, never by us), like
host/launches.py; a note that fails never stops a launch.
"""
from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

MAX_VALUES = 256


@dataclass
class Seen:
    """One test's launches: the constexpr integers they used (param -> values), their count, what raised."""

    constexprs: dict[str, list[int]] = field(default_factory=dict)
    launches: int = 0
    raised: list[str] = field(default_factory=list)

    def values(self) -> list[int]:
        return sorted({v for vs in self.constexprs.values() for v in vs})

    def to_json(self) -> dict[str, Any]:
        return {"constexprs": self.constexprs, "launches": self.launches, "raised": self.raised[:5]}

    @classmethod
    def from_json(cls, data: Any) -> "Seen":
        return cls({str(k): [int(v) for v in vs] for k, vs in dict(data.get("constexprs", {})).items()},
                   int(data.get("launches", 0)), [str(r) for r in data.get("raised", ())])


_NAMES: dict[int, tuple[list[str], list[str]]] = {}


def _params(fn: Any) -> tuple[list[str], list[str]]:
    """(every parameter's name, the constexpr ones) of a JITFunction or an InterpretedFunction."""
    key = id(fn)
    if key in _NAMES:
        return _NAMES[key]
    params = getattr(fn, "params", None)
    if params is not None and all(hasattr(p, "is_constexpr") for p in params):
        names = [p.name for p in params]
        const = [p.name for p in params if p.is_constexpr]
    else:
        names, const = [], []
        try:
            signature = inspect.signature(getattr(fn, "fn", fn))
        except (TypeError, ValueError):
            signature = None
        for p in (signature.parameters.values() if signature else ()):
            names.append(p.name)
            ann = p.annotation
            text = ann if isinstance(ann, str) else getattr(ann, "__name__", "")
            if str(text).split(".")[-1] == "constexpr":
                const.append(p.name)
    _NAMES[key] = (names, const)
    return names, const


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class ConstexprLog:
    """The running test's launches (begin .. take)."""

    def __init__(self) -> None:
        self.current = Seen()
        self._restore: list[Callable[[], None]] = []

    def begin(self) -> None:
        self.current = Seen()
        if not self._restore and ("triton.runtime.jit" in sys.modules or "triton.runtime.interpreter" in sys.modules):
            self.install()

    def take(self) -> Seen:
        seen, self.current = self.current, Seen()
        return seen

    def note(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        names, const = _params(fn)
        self.current.launches += 1
        if not const:
            return
        bound = {**dict(zip(names, args)), **kwargs}
        kernel = getattr(fn, "__name__", "?")
        for name in const:
            value = bound.get(name)
            if _is_int(value):
                values = self.current.constexprs.setdefault(f"{kernel}.{name}", [])
                if int(value) not in values and len(values) < MAX_VALUES:
                    values.append(int(value))

    def install(self) -> None:
        for module, cls in (("triton.runtime.jit", "JITFunction"), ("triton.runtime.interpreter", "InterpretedFunction")):
            try:
                target = getattr(__import__(module, fromlist=[cls]), cls)
            except Exception:                          # noqa: BLE001 - no (working) Triton here: nothing to see
                continue
            self._wrap(target)

    def _wrap(self, target: Any) -> None:
        original = target.__dict__.get("run")
        if original is None:
            return
        log = self

        def run(fn: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
            if warmup:
                return original(fn, *args, grid=grid, warmup=warmup, **kwargs)
            try:
                log.note(fn, args, kwargs)
            except Exception:                          # noqa: BLE001 - a note is a courtesy; the launch goes on
                pass
            try:
                return original(fn, *args, grid=grid, warmup=warmup, **kwargs)
            except BaseException as exc:
                cause = exc.__cause__ or exc
                text = str(cause).splitlines()[0] if str(cause) else ""
                log.current.raised.append(f"{getattr(fn, '__name__', '?')} raised {type(cause).__name__}"
                                          f"{': ' + text[:200] if text else ''}")
                raise

        target.run = run

        def restore() -> None:
            target.run = original
        self._restore.append(restore)

    def uninstall(self) -> None:
        while self._restore:
            self._restore.pop()()
