// Planted bugs in unwatched buffers: the CUDA C++ twin of kernels/planted/unwatched.py (issue 20 item 1).
// out[i] = (x[i] + x[i+1]) * w[i / 256], and each block's (group's) count of valid elements stored by its
// thread 0 into scratch[block + slot_shift]. read_past = 1 lets the last element read x[n], 4 bytes past the end of x;
// slot_shift = 1 makes the last block add into scratch[groups], 4 bytes past the end of scratch.
#include <cstdint>

extern "C" __global__ void planted_unwatched_cuda(const float* x, const float* w, float* scratch, float* out,
                                                  long long n, int read_past, int slot_shift) {
  long long base = (long long)blockIdx.x * blockDim.x;
  long long i = base + threadIdx.x;
  if (threadIdx.x == 0) {
    long long valid = n - base < blockDim.x ? n - base : blockDim.x;
    scratch[blockIdx.x + slot_shift] = (float)valid;
  }
  if (i >= n) return;
  float b = (i + 1 < n + read_past) ? x[i + 1] : 0.0f;
  out[i] = (x[i] + b) * w[blockIdx.x];
}

void planted_unwatched_launch(uintptr_t x, uintptr_t w, uintptr_t scratch, uintptr_t out, long long n, int read_past,
                              int slot_shift, uintptr_t stream) {
  int threads = 256;   // one block per group of 256 elements (kernels/planted/unwatched.py GROUP)
  int blocks = (int)((n + threads - 1) / threads);
  planted_unwatched_cuda<<<blocks, threads, 0, (cudaStream_t)stream>>>(
      (const float*)x, (const float*)w, (float*)scratch, (float*)out, n, read_past, slot_shift);
}
