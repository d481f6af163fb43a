// Device kernel: Softmax and LogSoftmax along rows of strided elements.
// One block per row; the row's maximum and sum of exponentials are reduced
// in shared memory, in float.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "runner/cuda/device_common.cuh"
#include "runner/cuda/launch.h"

namespace onnxkit::runner::cuda {
namespace {

using device::BlockReduce;
using device::FromFloat;
using device::kThreads;
using device::ToFloat;

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
      y[base + j * inner] = FromFloat<T>(log ? d - log_s : expf(d) / s);
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
