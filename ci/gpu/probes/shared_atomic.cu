// Probe (issue 26, held-out hx_d on the H200): what compute-sanitizer's XML says about an out-of-bounds shared
// atomic made through an inlined device function (atomicAdd): <where><func> and the device stack, and the shared
// window offset against the block's reserved shared memory.
#include <cstdio>
__device__ __forceinline__ void bump(int *counts, int id) { atomicAdd(&counts[id], 1); }
extern "C" __global__ void probe_align_count(int *out, const int *ids, int n) {
  extern __shared__ int counts[];
  int t = threadIdx.x;
  if (t < 60) counts[t] = 0;
  __syncthreads();
  if (t < n) bump(counts, ids[t]);
  __syncthreads();
  if (t < 60) out[t] = counts[t];
}
int main() {
  int reserved = -1; cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, 0);
  printf("reserved shared per block: %d\n", reserved);
  int *out, *ids; cudaMalloc(&out, 240); cudaMallocManaged(&ids, 256);
  for (int i = 0; i < 64; i++) ids[i] = i % 61;
  probe_align_count<<<1, 64, 240>>>(out, ids, 64);
  cudaError_t e = cudaDeviceSynchronize();
  printf("sync: %s\n", cudaGetErrorString(e));
  return 0;
}
