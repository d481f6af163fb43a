// Device kernel: Softmax and LogSoftmax along rows of strided elements.
// One block per row; the row's maximum and sum of exponentials are reduced
// in shared memory, in float.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "runner/cuda/launch.h"

namespace onnxkit::runner::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void Store(float* p, float x) { *p = x; }
__device__ __forceinline__ void Store(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void Store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// The maximum (kMax) or sum of every thread's `v` in the block, returned to
// every thread.
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

template <typename T>
__global__ void SoftmaxKernel(bool log, const T* x, T* y, int64_t outer, int64_t len, int64_t inner) {
  __shared__ float shared[kThreads];
  for (int64_t row = blockIdx.x; row < outer * inner; row += gridDim.x) {
    const int64_t base = (row / inner) * len * inner + row % inner;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < len; j += kThreads) m = fmaxf(m, ToFloat(x[base + j * inner]));
    m = BlockReduce<true>(m, shared);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < len; j += kThreads) s += expf(ToFloat(x[base + j * inner]) - m);
    s = BlockReduce<false>(s, shared);
    const float log_s = logf(s);
    for (int64_t j = threadIdx.x; j < len; j += kThreads) {
      float d = ToFloat(x[base + j * inner]) - m;
      Store(&y[base + j * inner], log ? d - log_s : expf(d) / s);
    }
  }
}

}  // namespace

cudaError_t LaunchSoftmax(int32_t dtype, bool log, const void* x, void* y, int64_t outer, int64_t len,
                          int64_t inner, cudaStream_t stream) {
  const int64_t rows = outer * inner;
  if (rows == 0 || len == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
  switch (dtype) {
    case kFloat:
      SoftmaxKernel<<<blocks, kThreads, 0, stream>>>(log, static_cast<const float*>(x), static_cast<float*>(y),
                                                      outer, len, inner);
      break;
    case kFloat16:
      SoftmaxKernel<<<blocks, kThreads, 0, stream>>>(log, static_cast<const __half*>(x), static_cast<__half*>(y),
                                                      outer, len, inner);
      break;
    case kBFloat16:
      SoftmaxKernel<<<blocks, kThreads, 0, stream>>>(log, static_cast<const __nv_bfloat16*>(x),
                                                      static_cast<__nv_bfloat16*>(y), outer, len, inner);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace onnxkit::runner::cuda
