"""FlashInfer's top-k sampling kernel, as pure arithmetic: which bytes of the per-request `top_k` it reads.

`TopKSamplingFromProbKernel` (include/flashinfer/sampling.cuh) runs one block per OUTPUT position `bx`
(batch_size = len(indices) when `indices` is given) and samples from probs row `indices[bx]`. Up to 0.7.1 it
reads the per-request threshold by output position, `top_k_arr[bx]`, and only then resolves the row; the host
(csrc/sampling.cu, `check_tensor_param`) checks top_k's length against probs' rows, not against the outputs.
With more outputs than rows (several samples per request) every position past the rows reads past the end of
top_k (flashinfer issue #5339, `len(indices) > probs.size(0)`). 0.7.2 reads `top_k_arr[row_idx]`.
top_k travels as int32 (flashinfer/sampling.py casts it with `.int()`; the kernel reads `IdType*`).
"""
from __future__ import annotations

INT_BYTES = 4
VERSIONS = ("0.7.1", "0.7.2")
BY_POSITION = {"0.7.1": True, "0.7.2": False}      # top_k_arr[bx] (the bug) or top_k_arr[row_idx] (the fix)
KERNEL = "TopKSamplingFromProbKernel"
UPSTREAM = "flashinfer-ai/flashinfer#5339"


def check_version(version: str) -> str:
    if version not in BY_POSITION:
        raise ValueError(f"unknown flashinfer version {version!r}; known: {', '.join(VERSIONS)}")
    return version


def threshold_reads(indices: tuple[int, ...], version: str) -> list[int]:
    """The top_k element each output position's block reads."""
    if BY_POSITION[check_version(version)]:
        return list(range(len(indices)))
    return list(indices)


def past_end(indices: tuple[int, ...], rows: int, version: str) -> tuple[tuple[int, int], ...]:
    """Byte ranges of top_k (rows int32 entries) read past its end, merged."""
    if rows <= 0:
        raise ValueError("probs needs at least one row")
    if any(not 0 <= i < rows for i in indices):
        raise ValueError(f"indices must name rows of probs (0..{rows - 1})")
    elems = sorted({e for e in threshold_reads(indices, version) if e >= rows})
    out: list[tuple[int, int]] = []
    for e in elems:
        lo, hi = e * INT_BYTES, (e + 1) * INT_BYTES
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def describe(rows: int, start: int, end: int) -> str:
    first, last = start // INT_BYTES, (end - 1) // INT_BYTES
    where = f"top_k[{first}]" if first == last else f"top_k[{first}..{last}]"
    if first >= rows:
        return f"{where}: past the {rows} per-request thresholds (read by output position {first}..{last})"
    return where
