"""Standalone reproducer, no harness: triton_kernels' `topk` backward leaves the input gradient's rows at and past
`n_rows` uninitialized (triton_kernels as sglang-kernel 0.4.6.post1 ships it; topk.py `topk_backward` and
topk_details/_topk_backward.py; the same code in triton's python/triton_kernels at main as stored). Found while
running triton_kernels' topk at the shapes its tests never use (a device-side row count smaller than the tensor),
2026-12-07.

`topk(x, k, n_rows=t)` takes the rows to work on from a device scalar (static shapes: a CUDA graph over a padded
batch). The backward allocates `dx = torch.empty_like(x)` and launches one program per row, and each program with
`pid_m >= n_rows` returns at once: rows n_rows.. of dx are never written, and autograd hands that uninitialized memory
on as the gradient of x's padding rows (into the router's weight gradient, for one). The forward's padding rows are
"don't care" by design; a gradient's are not: they should be 0.

On a GPU:  PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool initcheck python triton_kernels_topk_backward_rows.py
           (initcheck: "Uninitialized __global__ memory read" in the reduction that reads x.grad below)
On a CPU:  TRITON_INTERPRET=1 python triton_kernels_topk_backward_rows.py
           (Triton's interpreter; `torch.empty_like` fills NaN here, so a row the kernel never wrote stays NaN)
with triton_kernels on PYTHONPATH. argv: rows, valid rows (default 40 33; `40 40`: the control, every row valid).
Prints the rows of x.grad never written and exits 1 when there are any.
"""
import os
import sys

import torch

CPU = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if CPU else "cuda"
if CPU:     # a sentinel in every fresh empty_like tensor: what the kernel never writes stays NaN
    _empty_like = torch.empty_like
    torch.empty_like = lambda *args, **kwargs: _empty_like(*args, **kwargs).fill_(float("nan"))

from triton_kernels.topk import topk

n_rows, n_valid = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (40, 33)
torch.manual_seed(0)
x = torch.randn(n_rows, 13, device=DEVICE, requires_grad=True)
result = topk(x, 4, apply_softmax=True, n_rows=torch.tensor([n_valid], dtype=torch.int32, device=DEVICE))
result.vals.backward(torch.ones_like(result.vals))
print(f"x {tuple(x.shape)}, n_rows {n_valid}; x.grad sum {float(x.grad.sum()):.4g}")     # reads every row of x.grad
if not CPU:
    torch.cuda.synchronize()
    print("ran; initcheck reports the uninitialized rows read by the sum (this process cannot see them)")
    sys.exit(0)
unwritten = x.grad.isnan().all(1).nonzero().flatten().tolist()
print(f"rows of x.grad never written: {unwritten}" if unwritten else "every row of x.grad written")
sys.exit(1 if unwritten else 0)
