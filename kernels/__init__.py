"""Kernel adapters: one module per real kernel, the only code that touches device APIs for it.

Each adapter launches one kernel (CUDA C++ or Triton, buggy and fixed variants) on buffers the
harness allocates, so that guard markers and compute-sanitizer can watch what it writes.
"""
