// Planted unwritten-memory bugs in CUDA C++: the twin of kernels/planted/uninit.py (uninit-mode calibration).
// planted_accumulate_cuda: out[i] = (accumulate ? out[i] : 0) + x[i]. Accumulating is correct when the host
// zeroed out first; into out from torch.empty every result depends on bytes nobody wrote. The launcher's
// short_grid = 1 launches one block fewer than the data needs: out's last block of elements is never written.
#include <cstdint>

extern "C" __global__ void planted_accumulate_cuda(const float* x, float* out, long long n, int accumulate) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float acc = accumulate ? out[i] : 0.0f;
    out[i] = acc + x[i];
  }
}

void planted_accumulate_launch(uintptr_t x, uintptr_t out, long long n, int accumulate, int short_grid,
                               uintptr_t stream) {
  int threads = 256;
  int blocks = (int)((n + threads - 1) / threads) - (short_grid ? 1 : 0);
  if (blocks > 0) {
    planted_accumulate_cuda<<<blocks, threads, 0, (cudaStream_t)stream>>>((const float*)x, (float*)out, n,
                                                                          accumulate);
  }
}
