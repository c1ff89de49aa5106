// Planted synchronisation bugs in CUDA C++: racecheck and synccheck calibration (kernels/planted/race.py).
// planted_reduce_race: a block-wide tree sum in shared memory. With sync = 0 the barriers between the
// steps are missing: a thread reads s[t + stride] while another thread still writes it (line "RACE").
// `volatile` keeps every shared access in the code, so the compiler cannot hide the race in registers.
// planted_divergent_barrier: with divergent = 1 the two halves of each 64-thread group wait at two
// different barrier instructions (lines "BARRIER A" and "B"), which is invalid (synccheck: divergent
// threads in block); each branch is warp-uniform and both are barrier 0, so the block never deadlocks.
// divergent = 0 has one barrier.
#include <cstdint>

#define THREADS 256

extern "C" __global__ void planted_reduce_race(const float* x, float* out, long long n, int sync) {
  __shared__ volatile float s[THREADS];
  int t = threadIdx.x;
  long long i = (long long)blockIdx.x * THREADS + t;
  s[t] = i < n ? x[i] : 0.0f;
  if (sync) __syncthreads();
  for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] = s[t] + s[t + stride];  // RACE without the barrier below
    if (sync) __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

extern "C" __global__ void planted_divergent_barrier(const float* x, float* out, long long n, int divergent) {
  __shared__ float s[THREADS];
  int t = threadIdx.x;
  long long i = (long long)blockIdx.x * THREADS + t;
  s[t] = i < n ? x[i] : 0.0f;
  // Barrier A is the same bar.sync as __syncthreads, written as inline asm so that the compiler cannot merge
  // the two barriers into one; each thread writes only its own s[t] before its barrier.
  if (divergent && (t & 32)) {
    s[t] = s[t] + 1.0f;
    asm volatile("bar.sync 0;" ::: "memory");  // BARRIER A
  } else {
    __syncthreads();  // BARRIER B (the only barrier when divergent = 0)
  }
  if (i < n) out[i] = s[(t + 1) % THREADS];
}

void planted_race_launch(int which, uintptr_t x, uintptr_t out, long long n, int flag, uintptr_t stream) {
  int blocks = (int)((n + THREADS - 1) / THREADS);
  if (which == 0) {
    planted_reduce_race<<<blocks, THREADS, 0, (cudaStream_t)stream>>>((const float*)x, (float*)out, n, flag);
  } else {
    planted_divergent_barrier<<<blocks, THREADS, 0, (cudaStream_t)stream>>>((const float*)x, (float*)out, n, flag);
  }
}
