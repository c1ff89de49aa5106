"""Calibration kernels for findings that must be right (issue 19), in Triton and CUDA C++ (planted_cuda.cu).

One bug each, next to a correct twin, on sizes chosen so that the harness's own placement matters:
- vec16_overread: 16-byte vector loads over n = 4,008 bytes of fp32 (not a multiple of 16): the last vector
  reads bytes 4008..4016, 8 bytes past the end (a load that starts inside and ends outside);
- vec16_clean: the same sum with vectors over the first n // 16 * 16 bytes and a scalar tail: correct, and
  clean only if the harness starts the tensor aligned (a misaligned start made every vector load a
  "misaligned" record);
- atomic_past_end: an atomic add of 0x01010101 to one int32 element past the end (an atomic is a write);
- far_write: a row offset computed in 32 bits (32768 * 65536 wraps to -2^31): 4 bytes land 2 GiB before dst,
  outside every allocation. Runs only where memcheck watches (placement flush_end): elsewhere the store would
  hit memory the process may own, or end the CUDA context, so the case is unsupported there, with that reason.

The Triton kernels run on the CPU under TRITON_INTERPRET=1 (the guard markers see the atomic), except the far
write, which would write into the interpreter's own memory.
"""
from __future__ import annotations

from typing import Any

from gpu_memsafety.errors import NotApplicable, Unsupported

VARIANTS = ("vec16_overread", "vec16_clean", "atomic_past_end", "far_write")
BLOCK = 1024
ATOMIC_ADDEND = 0x01010101           # every byte of the element changes, so markers see all 4 bytes
FAR_ROW, FAR_STRIDE = 32768, 65536   # row * stride = 2^31: -2^31 in int32
FAR_BYTES = 4
FAR_OFFSET = -(1 << 31)              # where the far write lands, relative to dst
_CACHE: dict[str, Any] = {}


def _kernels() -> dict[str, Any]:
    if _CACHE:
        return _CACHE
    import triton
    import triton.language as tl

    @triton.jit
    def planted_vec16_sum(src, total, n, SCALAR_TAIL: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        if SCALAR_TAIL:
            body = (n // 4) * 4           # whole 16-byte vectors, then the scalar tail
            x = tl.load(src + offs, mask=offs < body, other=0.0)
            t = tl.load(src + offs, mask=(offs >= body) & (offs < n), other=0.0)
            s = tl.sum(x + t, axis=0)
        else:
            x = tl.load(src + offs, mask=offs < ((n + 3) // 4) * 4, other=0.0)   # bug: mask in whole vectors
            s = tl.sum(x, axis=0)
        tl.atomic_add(total, s)

    @triton.jit
    def planted_atomic_past_end(dst, n, extra, ADDEND: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.atomic_add(dst + offs, ADDEND, mask=offs < n + extra)

    @triton.jit
    def planted_far_write(dst, row, stride, COUNT: tl.constexpr):
        offs = row * stride + tl.arange(0, COUNT)     # int32: wraps to -2^31
        tl.store(dst + offs, 1)

    _CACHE.update(vec16=planted_vec16_sum, atomic=planted_atomic_past_end, far=planted_far_write)
    return _CACHE


def _cuda(ctx: Any) -> Any:
    import torch

    from gpu_memsafety.kernels.planted import cuda as planted_cuda
    if ctx.device.type != "cuda":
        raise Unsupported("needs a CUDA GPU; torch.cuda.is_available() is False")
    return planted_cuda.build(torch.cuda.get_device_capability(ctx.device))


def run_case(case: Any, ctx: Any) -> Any:
    import torch

    from gpu_memsafety.placement import layout as L
    from gpu_memsafety.scenario.context import RunInfo

    impl, variant, n, extra = case.params["impl"], case.variant, case.params["n"], case.params["extra"]
    if variant not in VARIANTS:
        raise Unsupported(f"unknown calibration variant {variant!r}; known: {VARIANTS}")
    if variant == "far_write" and ctx.watch_placement not in L.SANITIZER_PLACEMENTS:
        raise NotApplicable("the far write runs only under memcheck (watched buffers flush-ended): without it the "
                            "store lands 2 GiB before dst, in memory this process may own, or ends the CUDA context")
    if variant == "far_write" and impl == "triton" and ctx.device.type != "cuda":
        raise Unsupported("the far write needs a CUDA GPU: under the interpreter it would write into host memory")
    module = _cuda(ctx) if impl == "cuda" else None
    stream = (lambda: torch.cuda.current_stream(ctx.device).cuda_stream) if module is not None else None
    kernels = _kernels() if module is None else {}

    if variant in ("vec16_overread", "vec16_clean"):
        if n % 4:
            raise Unsupported(f"vec16 cases sum fp32: n = {n} bytes is not a whole number of floats")
        src = ctx.tensor("src", (n // 4,), torch.float32, watch=True)
        src.copy_((torch.arange(n // 4, dtype=torch.float32) % 7 + 1).to(ctx.device))
        total = torch.zeros(1, dtype=torch.float32, device=ctx.device)
        tail = variant == "vec16_clean"

        def once() -> None:
            if module is not None:
                module.calibration(1 if tail else 0, src.data_ptr(), total.data_ptr(), n // 4, 0, stream())
            else:
                grid = (_cdiv(n // 4 + 4, BLOCK),)
                kernels["vec16"][grid](src, total, n // 4, SCALAR_TAIL=tail, BLOCK=BLOCK)
        name = ("planted_vec16_tail_sum" if tail else "planted_vec16_sum")
        once()
        return RunInfo(kernel=name if impl == "triton" else name + "_cuda", outputs={"total": total}, relaunch=once)

    if variant == "atomic_past_end":
        if n % 4:
            raise Unsupported(f"atomic_past_end adds to int32: n = {n} bytes is not a whole number of elements")
        dst = ctx.tensor("dst", (n // 4,), torch.int32, watch=True)
        dst.zero_()

        def once() -> None:
            if module is not None:
                module.calibration(2, dst.data_ptr(), 0, n // 4, extra, stream())
            else:
                grid = (_cdiv(n // 4 + extra, BLOCK),)
                kernels["atomic"][grid](dst, n // 4, extra, ADDEND=ATOMIC_ADDEND, BLOCK=BLOCK)
        once()
        return RunInfo(kernel="planted_atomic_past_end" + ("_cuda" if module is not None else ""),
                       outputs={"dst": dst}, relaunch=once)

    # far_write: one buffer only, so that it is the nearest one to where the write lands.
    dst = ctx.tensor("dst", (n,), torch.uint8, watch=True)
    dst.zero_()

    def once() -> None:
        if module is not None:
            module.calibration(3, dst.data_ptr(), 0, FAR_ROW, FAR_STRIDE, stream())
        else:
            kernels["far"][(1,)](dst, FAR_ROW, FAR_STRIDE, COUNT=FAR_BYTES)
    once()
    return RunInfo(kernel="planted_far_write" + ("_cuda" if module is not None else ""), outputs={"dst": dst},
                   relaunch=once)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)
