// Planted shared-memory overread in CUDA C++: memcheck calibration for accesses out of a kernel's shared memory
// (kernels/planted/shared.py). Each block stages USED floats of x in dynamic shared memory, exactly USED * 4 bytes
// as the launch asks, then writes the sum of each element and its right neighbour. With overread = 1 the last
// staged element reads its neighbour too: s[USED], 4 bytes past the end of the block's shared memory (line
// "SHARED OVERREAD"); overread = 0 treats a missing neighbour as 0 (the fixed twin). USED * 4 = 1,000 B is not a
// multiple of the hardware's shared-memory allocation unit, so the 4 bytes past it stay inside the block's
// allocation: the hardware does not fault (every other mode runs the kernel through), memcheck sees the read.
#include <cstdint>

#define THREADS 256
#define USED 250

extern "C" __global__ void planted_shared_overread(const float* x, float* out, long long n, int overread) {
  extern __shared__ float shared[];
  volatile float* s = shared;   // volatile: every shared access stays in the code (the overread cannot be optimised out)
  int t = threadIdx.x;
  long long base = (long long)blockIdx.x * USED;
  if (t < USED) s[t] = base + t < n ? x[base + t] : 0.0f;
  __syncthreads();
  if (t < USED) {
    int j = t + 1;
    float right = (j < USED || overread) ? s[j] : 0.0f;  // SHARED OVERREAD
    if (j == USED) right = 0.0f;                          // what was read past the end never reaches the result
    if (base + t < n) out[base + t] = s[t] + right;
  }
}

void planted_shared_launch(uintptr_t x, uintptr_t out, long long n, int overread, uintptr_t stream) {
  int blocks = (int)((n + USED - 1) / USED);
  planted_shared_overread<<<blocks, THREADS, USED * sizeof(float), (cudaStream_t)stream>>>(
      (const float*)x, (float*)out, n, overread);
}
