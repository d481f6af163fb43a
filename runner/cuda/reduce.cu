// Device kernels: reductions over any set of axes (ReduceSum, ReduceMean,
// ReduceMax, ReduceMin, ReduceSumSquare, ReduceL2) of floating-point
// tensors, computed in float. A block per output element when many values
// are reduced into it, a thread per output element otherwise. NaN wins in
// ReduceMax / ReduceMin, as on the reference backend.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "runner/cuda/device_common.cuh"
#include "runner/cuda/launch.h"

namespace onnxkit::runner::cuda {
namespace {

using device::Blocks;
using device::FromFloat;
using device::kThreads;
using device::ToFloat;

__device__ __forceinline__ float Initial(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return -INFINITY;
    case ReduceOp::kMin: return INFINITY;
    default: return 0.f;
  }
}

__device__ __forceinline__ float Combine(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      if (a != a) return a;
      if (b != b) return b;
      return op == ReduceOp::kMax ? (b > a ? b : a) : (b < a ? b : a);
    default:
      return a + b;
  }
}

__device__ __forceinline__ float Prepare(ReduceOp op, float v) {
  return op == ReduceOp::kSumSquare || op == ReduceOp::kL2 ? v * v : v;
}

__device__ __forceinline__ float Finish(ReduceOp op, float acc, int64_t count) {
  if (op == ReduceOp::kMean) return acc / static_cast<float>(count);
  if (op == ReduceOp::kL2) return sqrtf(acc);
  return acc;
}

// Offset of element `index` of the (row-major) index space `dims` read
// through `strides`.
__device__ __forceinline__ int64_t Offset(int64_t index, int rank, const int64_t* dims, const int64_t* strides) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (index % dims[d]) * strides[d];
    index /= dims[d];
  }
  return offset;
}

template <typename T>
__device__ __forceinline__ float Load(const T* x, const ReduceGeometry& g, int64_t base, int64_t r) {
  return ToFloat(x[base + (g.contiguous ? r : Offset(r, g.reduced_rank, g.reduced_dims, g.reduced_strides))]);
}

template <typename T>
__global__ void ReducePerThread(ReduceOp op, const T* x, T* y, ReduceGeometry g) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < g.outputs;
       o += int64_t{blockDim.x} * gridDim.x) {
    const int64_t base = Offset(o, g.kept_rank, g.kept_dims, g.kept_strides);
    float acc = Initial(op);
    for (int64_t r = 0; r < g.count; ++r) acc = Combine(op, acc, Prepare(op, Load(x, g, base, r)));
    y[o] = FromFloat<T>(Finish(op, acc, g.count));
  }
}

template <typename T>
__global__ void ReducePerBlock(ReduceOp op, const T* x, T* y, ReduceGeometry g) {
  __shared__ float shared[kThreads];
  for (int64_t o = blockIdx.x; o < g.outputs; o += gridDim.x) {
    const int64_t base = Offset(o, g.kept_rank, g.kept_dims, g.kept_strides);
    float acc = Initial(op);
    for (int64_t r = threadIdx.x; r < g.count; r += blockDim.x) acc = Combine(op, acc, Prepare(op, Load(x, g, base, r)));
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) shared[threadIdx.x] = Combine(op, shared[threadIdx.x], shared[threadIdx.x + s]);
      __syncthreads();
    }
    if (threadIdx.x == 0) y[o] = FromFloat<T>(Finish(op, shared[0], g.count));
    __syncthreads();
  }
}

template <typename T>
cudaError_t ReduceAs(ReduceOp op, const void* x, void* y, const ReduceGeometry& g, cudaStream_t stream) {
  const T* px = static_cast<const T*>(x);
  T* py = static_cast<T*>(y);
  if (g.count >= 64) {
    const int64_t blocks = g.outputs < (int64_t{1} << 20) ? g.outputs : (int64_t{1} << 20);
    ReducePerBlock<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(op, px, py, g);
  } else {
    ReducePerThread<<<Blocks(g.outputs), kThreads, 0, stream>>>(op, px, py, g);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchReduce(ReduceOp op, int32_t dtype, const void* x, void* y, const ReduceGeometry& g,
                         cudaStream_t stream) {
  if (g.outputs == 0) return cudaSuccess;
  if (g.count < 1) return cudaErrorInvalidValue;
  switch (dtype) {
    case kFloat: return ReduceAs<float>(op, x, y, g, stream);
    case kFloat16: return ReduceAs<__half>(op, x, y, g, stream);
    case kBFloat16: return ReduceAs<__nv_bfloat16>(op, x, y, g, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace onnxkit::runner::cuda
