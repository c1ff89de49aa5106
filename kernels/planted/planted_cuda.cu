// Planted out-of-bounds CUDA kernel: the CUDA C++ twin of kernels/planted.py (detector calibration).
// Reads src[0 .. n + read_extra), sums it into *total, and writes dst[i - write_lo] for
// i < n + write_extra + write_lo: with read_extra = 1 it reads 1 byte past src, with write_extra = 1 it
// writes 1 byte past dst, with write_lo = 1 it writes 1 byte before dst.
#include <cstdint>

extern "C" __global__ void planted_copy_sum_cuda(const uint8_t* src, uint8_t* dst, int* total, long long n,
                                                 int read_extra, int write_lo, int write_extra) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  uint8_t v = 0;
  if (i < n + read_extra) {
    v = src[i];
    atomicAdd(total, (int)v);
  }
  if (i < n + write_extra + write_lo) {
    dst[i - write_lo] = v;
  }
}

void planted_launch(uintptr_t src, uintptr_t dst, uintptr_t total, long long n, int read_extra, int write_lo,
                    int write_extra, uintptr_t stream) {
  long long span = n + read_extra + write_extra + write_lo;
  int threads = 256;
  int blocks = (int)((span + threads - 1) / threads);
  planted_copy_sum_cuda<<<blocks, threads, 0, (cudaStream_t)stream>>>(
      (const uint8_t*)src, (uint8_t*)dst, (int*)total, n, read_extra, write_lo, write_extra);
}
