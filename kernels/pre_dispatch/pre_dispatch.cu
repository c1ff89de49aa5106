// Pre-dispatch quantization for a MoE layer: the kernel behind the "padded-stride scale write" scenario.
//
// Written for the memory-safety harness after the behaviour of sglang's DeepSeek-V4 mega-MoE pre-dispatch
// kernel (not a copy). One CTA per row of the padded buffers:
//   rows < num_tokens: quantize bf16 x[row, :hidden] to float8 e4m3fn with one UE8M0 byte per 32 elements
//                      and copy the row's top-k ids (int32 -> int64) and weights (float32);
//   rows >= num_tokens: fill top-k ids with -1 and weights with 0 (fp8 and scale rows stay untouched).
// `mode` picks how a token's scale bytes are addressed:
//   0 packed  (the bug): byte token*G + g, ignoring the padded row stride of the scale buffer;
//   1 strided (the fix): byte token*row_stride_bytes + g.
// Standalone: needs only the CUDA toolkit (`nvcc -std=c++17 -arch=sm_90 -c pre_dispatch.cu`); the Python
// binding lives in kernels/pre_dispatch_cuda.py.

#include <cstdint>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

namespace {

constexpr int kGroupSize = 32;                              // elements per UE8M0 scale byte
constexpr int kVecElems = 8;                                // 8 bf16 = one 16-byte load per thread
constexpr int kThreadsPerGroup = kGroupSize / kVecElems;    // 4 consecutive lanes share a group
constexpr int kWarpSize = 32;
constexpr int kMaxThreads = 1024;
constexpr float kFp8Max = 448.0f;
constexpr float kAmaxFloor = 1e-10f;
constexpr unsigned kFullMask = 0xffffffffu;

static_assert(kWarpSize % kThreadsPerGroup == 0, "a quant group must not straddle warps");

// UE8M0 byte of the smallest power of two >= raw (raw > 0, finite): biased exponent, +1 unless exact.
__device__ __forceinline__ uint32_t ue8m0_ceil(float raw) {
  const uint32_t bits = __float_as_uint(raw);
  return ((bits >> 23) & 0xffu) + ((bits & 0x7fffffu) != 0u ? 1u : 0u);
}

// 2^(127 - e) as float32, from its bits.
__device__ __forceinline__ float inverse_scale(uint32_t e) {
  return __uint_as_float((254u - e) << 23);
}

__device__ __forceinline__ float clip_fp8(float v) {
  return fmaxf(fminf(v, kFp8Max), -kFp8Max);
}

// Two floats -> two e4m3fn bytes (x in the low byte), round to nearest even.
__device__ __forceinline__ uint32_t pack_fp8x2(float x, float y) {
  const __nv_fp8x2_storage_t pair =
      __nv_cvt_float2_to_fp8x2(make_float2(clip_fp8(x), clip_fp8(y)), __NV_SATFINITE, __NV_E4M3);
  return static_cast<uint32_t>(pair);
}

// A 32-bit word holding two bf16 (element 2i in the low half) -> two exact floats.
__device__ __forceinline__ float bf16_lo(uint32_t word) { return __uint_as_float(word << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t word) { return __uint_as_float(word & 0xffff0000u); }

}  // namespace

extern "C" __global__ void __launch_bounds__(kMaxThreads) pre_dispatch_cuda_kernel(
    const uint16_t* __restrict__ x,             // bf16 bits [>= num_tokens, hidden], 16-byte aligned
    const int32_t* __restrict__ topk_ids,       // [>= num_tokens, top_k]
    const float* __restrict__ topk_weights,     // [>= num_tokens, top_k]
    uint8_t* __restrict__ q_out,                // e4m3fn bytes [padded_max, hidden], 8-byte aligned
    uint8_t* __restrict__ scale_out,            // UE8M0 bytes, rows `row_stride_bytes` apart
    int64_t* __restrict__ ids_out,              // [padded_max, top_k]
    float* __restrict__ weights_out,            // [padded_max, top_k]
    int num_tokens, int hidden, int top_k, int mode, long long row_stride_bytes) {
  const int row = blockIdx.x;
  const int tid = threadIdx.x;

  if (row >= num_tokens) {  // padded row: the whole block takes this branch
    for (int k = tid; k < top_k; k += blockDim.x) {
      ids_out[static_cast<long long>(row) * top_k + k] = -1;
      weights_out[static_cast<long long>(row) * top_k + k] = 0.0f;
    }
    return;
  }

  const int num_groups = hidden / kGroupSize;
  const int num_chunks = hidden / kVecElems;
  const uint4* x_row = reinterpret_cast<const uint4*>(x + static_cast<long long>(row) * hidden);
  uint2* q_row = reinterpret_cast<uint2*>(q_out + static_cast<long long>(row) * hidden);
  // The seeded bug: packed addressing ignores the buffer's padded row stride.
  const long long scale_row_step = (mode == 0) ? static_cast<long long>(num_groups) : row_stride_bytes;
  uint8_t* scale_row = scale_out + static_cast<long long>(row) * scale_row_step;

  // blockDim.x is a multiple of 32 and every thread runs every iteration, so the shuffles below always
  // see full warps; lanes past the row's end carry absmax 0 and store nothing.
  for (int base = 0; base < num_chunks; base += blockDim.x) {
    const int chunk = base + tid;
    const bool active = chunk < num_chunks;
    float v[kVecElems];
    float amax = 0.0f;
    if (active) {
      const uint4 raw = x_row[chunk];
      const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[2 * i] = bf16_lo(words[i]);
        v[2 * i + 1] = bf16_hi(words[i]);
      }
#pragma unroll
      for (int i = 0; i < kVecElems; ++i) amax = fmaxf(amax, fabsf(v[i]));
    }
#pragma unroll
    for (int offset = 1; offset < kThreadsPerGroup; offset <<= 1) {
      amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, offset));
    }
    if (!active) continue;

    const uint32_t e = ue8m0_ceil(fmaxf(amax, kAmaxFloor) / kFp8Max);  // IEEE division: no fast math
    const float inv = inverse_scale(e);
    uint2 packed;
    packed.x = pack_fp8x2(v[0] * inv, v[1] * inv) | (pack_fp8x2(v[2] * inv, v[3] * inv) << 16);
    packed.y = pack_fp8x2(v[4] * inv, v[5] * inv) | (pack_fp8x2(v[6] * inv, v[7] * inv) << 16);
    q_row[chunk] = packed;
    if (chunk % kThreadsPerGroup == 0) {
      scale_row[chunk / kThreadsPerGroup] = static_cast<uint8_t>(e);
    }
  }

  for (int k = tid; k < top_k; k += blockDim.x) {
    const long long in = static_cast<long long>(row) * top_k + k;
    ids_out[in] = static_cast<int64_t>(topk_ids[in]);
    weights_out[in] = topk_weights[in];
  }
}

// Host launcher with plain C types, so that the binding needs no CUDA headers of its own.
// Returns the cudaError_t of the launch (0 = success). Layout checks are the Python adapter's job.
extern "C" int pre_dispatch_cuda_launch(
    const void* x, const void* topk_ids, const void* topk_weights, void* q_out, void* scale_out,
    void* ids_out, void* weights_out, int num_tokens, int padded_max, int hidden, int top_k, int mode,
    long long row_stride_bytes, void* stream) {
  if (padded_max <= 0) return static_cast<int>(cudaSuccess);
  if (hidden <= 0 || hidden % kGroupSize != 0 || num_tokens < 0 || num_tokens > padded_max || top_k <= 0) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  const int num_chunks = hidden / kVecElems;
  const int rounded = (num_chunks + kWarpSize - 1) / kWarpSize * kWarpSize;
  const int threads = rounded < kMaxThreads ? rounded : kMaxThreads;
  pre_dispatch_cuda_kernel<<<padded_max, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint16_t*>(x), static_cast<const int32_t*>(topk_ids),
      static_cast<const float*>(topk_weights), static_cast<uint8_t*>(q_out),
      static_cast<uint8_t*>(scale_out), static_cast<int64_t*>(ids_out), static_cast<float*>(weights_out),
      num_tokens, hidden, top_k, mode, row_stride_bytes);
  return static_cast<int>(cudaGetLastError());
}

extern "C" const char* pre_dispatch_cuda_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}
