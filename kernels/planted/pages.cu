// Planted reads on either side of an unwatched input, in CUDA C++: the twin of kernels/planted/pages.py
// (guard-page naming and direction calibration). out[i] = a[i - a_shift] + b[i + b_extra] over n bytes; the
// buggy variants read a before its start (a_shift > 0) or b past its end (b_extra > 0); fixed = 1 masks both
// reads to the tensors' bounds (a twin with the same shifts that stays inside).
#include <cstdint>

extern "C" __global__ void planted_pages_add_cuda(const uint8_t* a, const uint8_t* b, uint8_t* out, long long n,
                                                  int a_shift, int b_extra, int fixed) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    long long ia = i - a_shift, ib = i + b_extra;
    uint8_t x = (!fixed || ia >= 0) ? a[ia] : 0;
    uint8_t y = (!fixed || ib < n) ? b[ib] : 0;
    out[i] = (uint8_t)(x + y);
  }
}

void planted_pages_launch(uintptr_t a, uintptr_t b, uintptr_t out, long long n, int a_shift, int b_extra, int fixed,
                          uintptr_t stream) {
  int threads = 256;
  int blocks = (int)((n + threads - 1) / threads);
  planted_pages_add_cuda<<<blocks, threads, 0, (cudaStream_t)stream>>>((const uint8_t*)a, (const uint8_t*)b,
                                                                       (uint8_t*)out, n, a_shift, b_extra, fixed);
}
