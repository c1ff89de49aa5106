"""Device probe (issue 26 item 4): after memcheck ends a kernel (--destroy-on-device-error kernel), can the same
process go on launching kernels and get right answers? Prints one line per step; run under compute-sanitizer:
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --destroy-on-device-error kernel \
      python tools/device/context_probe.py"""
import sys
import torch
import triton
import triton.language as tl


@triton.jit
def copy(src, dst, n, extra: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n + extra)
    tl.store(dst + offs, x, mask=offs < n)


def step(name, fn):
    try:
        out = fn()
        print(f"{name}: ok {out}", flush=True)
        return True
    except Exception as exc:  # noqa: BLE001
        print(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", flush=True)
        return False


n = 4000
src = torch.arange(n, device="cuda", dtype=torch.float32)
dst = torch.zeros(n, device="cuda", dtype=torch.float32)
step("clean launch", lambda: (copy[(4,)](src, dst, n, 0, BLOCK=1024), torch.cuda.synchronize(), bool((dst == src).all()))[2])
step("bad launch", lambda: (copy[(4,)](src, dst, n, 16, BLOCK=1024), torch.cuda.synchronize())[1])
step("sync again", lambda: torch.cuda.synchronize())
step("peek error", lambda: torch.cuda.cudart().cudaGetLastError())
dst2 = None
def after():
    global dst2
    src2 = torch.arange(n, device="cuda", dtype=torch.float32) * 2
    dst2 = torch.zeros(n, device="cuda", dtype=torch.float32)
    copy[(4,)](src2, dst2, n, 0, BLOCK=1024)
    torch.cuda.synchronize()
    return bool((dst2 == src2).all()), float(dst2.sum())
step("clean launch after", after)
step("second bad launch", lambda: (copy[(4,)](src, dst, n, 32, BLOCK=1024), torch.cuda.synchronize())[1])
step("clean launch after second", after)
print("done", flush=True)
sys.exit(0)
