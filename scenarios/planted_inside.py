"""Planted reads inside the allocation: calibration for poison mode's row_padding and unused_row findings.

`kernels/planted/inside.py` (Triton, and a CUDA C++ twin): a consumer that walks padded rows with the packed
stride must be a poison `overread` of `scale`'s `row_padding`, exactly the padding bytes its packed walk covers;
a column sum over every physical row must be an `overread` of `scale`'s `unused_row`, the logical-width bytes of
each unused row; both fixed twins must be clean. The expected bytes come from the kernels' own addressing
(`inside.walk`) laid over the buffer's row layout, never written by hand.

Only poison sees these bugs. Every byte read lies inside the allocation (padding and unused rows are the
buffer's own bytes), so memcheck cannot see them, whatever the placement, and the guard markers see only writes:
in modes guard and both the buggy variants are `not applicable`, saying so, and the fixed twins clean.
"""
from __future__ import annotations

from gpu_memsafety.placement import layout as L
from gpu_memsafety.model import TRACE, GUARD, MEMCHECK, OVERREAD, POISON, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case, Param, Scenario
from gpu_memsafety.kernels.planted.inside import ITEM, VARIANTS, kernel_name, walk

NAME = "planted_inside"
# 8 physical rows of 18 float32 (72 B) in rows of 20 (80 B: 8 B of padding), 5 of them used: what a scale buffer
# padded to 16-byte rows and to a maximum token count looks like (scenarios/padded_stride_scale_write.py).
SHAPE = {"tokens": 5, "rows": 8, "width": 18, "stride": 20}
INVISIBLE = ("memcheck cannot see reads inside an allocation (row padding and unused rows are the buffer's own "
             "bytes) and the guard markers see only writes: only poison sees it")


def _cases() -> list[Case]:
    label = "T{tokens}of{rows}-W{width}-S{stride}".format(**SHAPE)
    return [Case(NAME, variant, {"impl": impl, **SHAPE}, f"{impl}-{label}", ("calibration",))
            for impl in ("triton", "cuda") for variant in VARIANTS]


def rows_of(case: Case) -> L.Rows:
    p = case.params
    return L.Rows(rows=p["rows"], row_bytes=p["width"] * ITEM, row_stride=p["stride"] * ITEM, used_rows=p["tokens"])


def read(case: Case) -> list[tuple[int, int]]:
    """Every byte of `scale` the kernel reads (relative to its first byte): rows walked x width, `step` apart."""
    p = case.params
    walked, step = walk(case.variant, tokens=p["tokens"], rows=p["rows"], width=p["width"], stride=p["stride"])
    return L.merge_runs((r * step * ITEM, (r * step + p["width"]) * ITEM) for r in range(walked))


def read_outside(case: Case) -> dict[str, list[tuple[int, int]]]:
    """The bytes read that are not logical bytes of `scale`, per region class (row_padding, unused_row, ...)."""
    rows = rows_of(case)
    lay = L.plan(rows.nbytes, rows=rows)
    out: dict[str, list[tuple[int, int]]] = {}
    for lo, hi in read(case):
        for start, end, region in L.split_by_region(lay, lo, hi):
            if L.region_class(region) != L.INSIDE:
                out.setdefault(L.region_class(region), []).append((start, end))
    return out


def _expect(case: Case) -> Expectation:
    found = tuple(ExpectedFinding(OVERREAD, "scale", (POISON,), region=region, bytes=sum(e - s for s, e in spans),
                                  ranges=tuple(spans)) for region, spans in read_outside(case).items())
    if not found:
        return Expectation((), "reads only the logical bytes of the used rows")
    what = {"packed_stride_read": "walks padded rows with the packed stride",
            "unused_rows_read": "sums over every physical row, unused ones included"}[case.variant]
    return Expectation(found, f"{what}; {INVISIBLE}")


def _describe(case: Case, buffer: str, start: int, end: int) -> str:
    if buffer != "scale":
        return ""
    rows = rows_of(case)
    row, col = divmod(start, rows.row_stride)
    what = "unused row" if row >= rows.used_rows else ("padding" if col >= rows.row_bytes else "bytes")
    return f"row {row}: {what} bytes {col}..{col + end - start - 1} ({end - start} B)"


SCENARIO = Scenario(
    name=NAME,
    summary="planted reads of row padding (packed stride over padded rows) and of unused rows (a sum over every row)",
    adapter="gpu_memsafety.kernels.planted.inside:run_case",
    params=(Param("impl", str, choices=("triton", "cuda")), Param("tokens", int, low=1, high=1 << 16),
            Param("rows", int, low=1, high=1 << 16), Param("width", int, low=1, high=1 << 16),
            Param("stride", int, low=1, high=1 << 16)),
    variants=VARIANTS,
    cases=_cases,
    expect=_expect,
    kernel=lambda case: kernel_name(case.params["impl"], case.variant),
    needs_gpu=lambda case: case.params["impl"] == "cuda",
    describe=_describe,
    detectors=(GUARD, MEMCHECK, POISON, TRACE),
    timeout_s=120.0,
    cost_s=0.3,
)
