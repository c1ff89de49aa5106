// Planted reads inside the allocation in CUDA C++: the twin of kernels/planted/inside.py (poison calibration).
// planted_inside_copy_cuda: out[t][j] = scale[t * step + j] for t < walked (one block per row); with step = width on
// rows `stride` apart it reads row padding. planted_inside_sum_cuda: out[j] = sum over r < walked of
// scale[r * step + j]; with walked = every physical row it reads the unused rows.
#include <cstdint>

extern "C" __global__ void planted_inside_copy_cuda(const float* scale, float* out, long long step, long long width) {
  long long t = blockIdx.x;
  for (long long j = threadIdx.x; j < width; j += blockDim.x) {
    out[t * width + j] = scale[t * step + j];
  }
}

extern "C" __global__ void planted_inside_sum_cuda(const float* scale, float* out, long long walked, long long step,
                                                   long long width) {
  for (long long j = threadIdx.x; j < width; j += blockDim.x) {
    float acc = 0.0f;
    for (long long r = 0; r < walked; ++r) {
      acc += scale[r * step + j];
    }
    out[j] = acc;
  }
}

void planted_inside_launch(int which, uintptr_t scale, uintptr_t out, long long walked, long long step,
                           long long width, uintptr_t stream) {
  cudaStream_t s = (cudaStream_t)stream;
  if (which == 0) {
    if (walked > 0) {
      planted_inside_copy_cuda<<<(unsigned)walked, 32, 0, s>>>((const float*)scale, (float*)out, step, width);
    }
  } else {
    planted_inside_sum_cuda<<<1, 32, 0, s>>>((const float*)scale, (float*)out, walked, step, width);
  }
}
