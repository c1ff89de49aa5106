// Planted out-of-bounds CUDA kernel: the CUDA C++ twin of kernels/planted.py (detector calibration).
// Reads src[0 .. n + read_extra), sums it into *total, and writes dst[i - write_lo] for
// i < n + write_extra + write_lo: with read_extra = 1 it reads 1 byte past src, with write_extra = 1 it
// writes 1 byte past dst, with write_lo = 1 it writes 1 byte before dst; with read_lo = 1 thread 0 also
// adds src[-1], a left neighbour that does not exist.
#include <cstdint>

extern "C" __global__ void planted_copy_sum_cuda(const uint8_t* src, uint8_t* dst, int* total, long long n,
                                                 int read_extra, int write_lo, int write_extra, int read_lo) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  uint8_t v = 0;
  if (i < n + read_extra) {
    v = src[i];
    atomicAdd(total, (int)v);
  }
  if (i < read_lo) {
    atomicAdd(total, (int)src[i - read_lo]);
  }
  if (i < n + write_extra + write_lo) {
    dst[i - write_lo] = v;
  }
}

void planted_launch(uintptr_t src, uintptr_t dst, uintptr_t total, long long n, int read_extra, int write_lo,
                    int write_extra, int read_lo, uintptr_t stream) {
  long long span = n + read_extra + write_extra + write_lo;
  int threads = 256;
  int blocks = (int)((span + threads - 1) / threads);
  planted_copy_sum_cuda<<<blocks, threads, 0, (cudaStream_t)stream>>>(
      (const uint8_t*)src, (uint8_t*)dst, (int*)total, n, read_extra, write_lo, write_extra, read_lo);
}

// ---------------------------------------------------------------------------------------- calibration
// Issue 19's calibration kernels (scenarios/planted_oob.py): one bug each, with a correct twin.

// Sums float4 vectors 0 .. nvec: with nvec = ceil(n / 4) for n floats, the last vector's tail reads past the
// end when n % 4 != 0 (a 16-byte load that starts inside and ends outside).
extern "C" __global__ void planted_vec16_sum_cuda(const float4* src, float* total, long long nvec) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < nvec) {
    float4 v = src[i];
    atomicAdd(total, v.x + v.y + v.z + v.w);
  }
}

// The correct version: float4 vectors over the first n / 4 * 4 floats, then a scalar tail.
extern "C" __global__ void planted_vec16_tail_sum_cuda(const float* src, float* total, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  long long nvec = n / 4;
  if (i < nvec) {
    float4 v = reinterpret_cast<const float4*>(src)[i];
    atomicAdd(total, v.x + v.y + v.z + v.w);
  } else if (i < nvec + n % 4) {
    atomicAdd(total, src[nvec * 4 + (i - nvec)]);
  }
}

// Atomic add of 0x01010101 (every byte changes) to dst[0 .. n + extra): extra elements past the end.
extern "C" __global__ void planted_atomic_past_end_cuda(int* dst, long long n, long long extra) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n + extra) atomicAdd(dst + i, 0x01010101);
}

// A row offset computed in 32 bits: row * stride wraps (32768 * 65536 = 2^31 -> -2^31), so the bytes land
// 2 GiB before dst.
extern "C" __global__ void planted_far_write_cuda(uint8_t* dst, int row, int stride, int count) {
  int t = threadIdx.x;
  if (t < count) {
    int off = (int)((unsigned)row * (unsigned)stride) + t;
    dst[off] = 1;
  }
}

void planted_calibration_launch(int which, uintptr_t buf, uintptr_t total, long long n, long long extra,
                                uintptr_t stream) {
  cudaStream_t s = (cudaStream_t)stream;
  int threads = 256;
  if (which == 0) {         // vec16 overread: n floats, ceil(n / 4) vectors
    long long nvec = (n + 3) / 4;
    planted_vec16_sum_cuda<<<(int)((nvec + threads - 1) / threads), threads, 0, s>>>((const float4*)buf, (float*)total, nvec);
  } else if (which == 1) {  // vec16 with a scalar tail (correct)
    long long work = n / 4 + n % 4;
    planted_vec16_tail_sum_cuda<<<(int)((work + threads - 1) / threads), threads, 0, s>>>((const float*)buf, (float*)total, n);
  } else if (which == 2) {  // atomic past the end
    planted_atomic_past_end_cuda<<<(int)((n + extra + threads - 1) / threads), threads, 0, s>>>((int*)buf, n, extra);
  } else {                  // far write from a wrapped int32 row offset
    planted_far_write_cuda<<<1, 32, 0, s>>>((uint8_t*)buf, (int)n, (int)extra, 4);
  }
}
