// What the CUDA backend's device kernels (*.cu) share: the block size, the
// grid for a grid-stride loop, float conversions of the floating-point
// element types, and a block-wide reduction. Included by .cu files only.
#ifndef ONNXKIT_RUNNER_CUDA_DEVICE_COMMON_CUH_
#define ONNXKIT_RUNNER_CUDA_DEVICE_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace onnxkit::runner::cuda::device {

constexpr int kThreads = 256;

// Blocks for n elements (the grid-stride loop covers the rest).
inline unsigned Blocks(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < (int64_t{1} << 20) ? (blocks > 0 ? blocks : 1) : (int64_t{1} << 20));
}

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// The maximum (kMax) or sum of every thread's `v` in a block of kThreads
// threads, returned to every thread; `shared` holds kThreads floats.
template <bool kMax>
__device__ float BlockReduce(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      float other = shared[threadIdx.x + s];
      shared[threadIdx.x] = kMax ? fmaxf(shared[threadIdx.x], other) : shared[threadIdx.x] + other;
    }
    __syncthreads();
  }
  float result = shared[0];
  __syncthreads();
  return result;
}

}  // namespace onnxkit::runner::cuda::device

#endif  // ONNXKIT_RUNNER_CUDA_DEVICE_COMMON_CUH_
