// Device kernels: unary and broadcasting binary element-wise ops, Cast.
// One thread per output element in a grid-stride loop (64-bit indices);
// floating-point types are computed in float.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
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

__device__ __forceinline__ float Unary(UnaryOp op, float x, float alpha, float beta) {
  switch (op) {
    case UnaryOp::kRelu: return x > 0.f ? x : (x == x ? 0.f : x);
    case UnaryOp::kSigmoid: return 1.f / (1.f + expf(-x));
    case UnaryOp::kTanh: return tanhf(x);
    case UnaryOp::kExp: return expf(x);
    case UnaryOp::kLog: return logf(x);
    case UnaryOp::kSqrt: return sqrtf(x);
    case UnaryOp::kAbs: return fabsf(x);
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kReciprocal: return 1.f / x;
    case UnaryOp::kLeakyRelu: return x >= 0.f ? x : alpha * x;
    case UnaryOp::kElu: return x >= 0.f ? x : alpha * (expf(x) - 1.f);
    case UnaryOp::kErf: return erff(x);
    case UnaryOp::kGelu: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case UnaryOp::kGeluTanh:
      return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case UnaryOp::kFloor: return floorf(x);
    case UnaryOp::kCeil: return ceilf(x);
    case UnaryOp::kHardSigmoid: return fmaxf(0.f, fminf(1.f, alpha * x + beta));
    case UnaryOp::kClip: {  // min(max(x, low), high): high wins when low > high
      if (x != x) return x;
      const float v = x < alpha ? alpha : x;
      return v > beta ? beta : v;
    }
  }
  return x;
}

__device__ __forceinline__ float Binary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    case BinaryOp::kPow: return powf(a, b);
    // NaN in either operand gives NaN (as numpy's maximum / minimum).
    case BinaryOp::kMax: return (a != a || b != b) ? a + b : (a > b ? a : b);
    case BinaryOp::kMin: return (a != a || b != b) ? a + b : (a < b ? a : b);
  }
  return a;
}

template <typename T>
__global__ void UnaryKernel(UnaryOp op, const T* x, T* y, int64_t n, float alpha, float beta) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    y[i] = FromFloat<T>(Unary(op, ToFloat(x[i]), alpha, beta));
  }
}

template <typename T>
__global__ void BinaryKernel(BinaryOp op, const T* a, const T* b, T* y, int64_t n, StridedGeometry g) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    int64_t ia = g.a_period > 0 ? (i / g.a_div) % g.a_period : i;
    int64_t ib = g.b_period > 0 ? (i / g.b_div) % g.b_period : i;
    if (g.rank > 0) {
      ia = 0;
      ib = 0;
      int64_t rest = i;
      for (int d = g.rank - 1; d >= 0; --d) {
        int64_t c = rest % g.dims[d];
        rest /= g.dims[d];
        ia += c * g.a[d];
        ib += c * g.b[d];
      }
    }
    y[i] = FromFloat<T>(Binary(op, ToFloat(a[ia]), ToFloat(b[ib])));
  }
}

template <typename T>
__device__ __forceinline__ float ChainOperand(const ChainProgram& p, const float* values, int src,
                                              int64_t i) {
  if (src < kMaxChainOps) return values[src];
  const ChainInput& in = p.inputs[src - kMaxChainOps];
  int64_t offset = i;
  if (in.strided) {
    offset = 0;
    int64_t rest = i;
    for (int d = p.rank - 1; d >= 0; --d) {
      offset += (rest % p.dims[d]) * in.strides[d];
      rest /= p.dims[d];
    }
  } else if (in.period > 0) {
    offset = (i / in.div) % in.period;
  }
  return ToFloat(static_cast<const T*>(in.data)[offset]);
}

// The chain's last value at output element i, rounded to T (as each).
template <typename T>
__device__ __forceinline__ float ChainValue(const ChainProgram& p, int64_t i) {
  float values[kMaxChainOps];
  for (int k = 0; k < p.num_ops; ++k) {
    const ChainOp& op = p.ops[k];
    const float a = ChainOperand<T>(p, values, op.a, i);
    const float r = op.binary ? Binary(op.binary_op, a, ChainOperand<T>(p, values, op.b, i))
                              : Unary(op.unary, a, op.alpha, op.beta);
    values[k] = ToFloat(FromFloat<T>(r));
  }
  return values[p.num_ops - 1];
}

template <typename T>
__global__ void ChainKernel(const ChainProgram p, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    y[i] = FromFloat<T>(ChainValue<T>(p, i));
  }
}

// Softmax (LogSoftmax) of the chain's values along rows as LaunchSoftmax's:
// one block per row; the values are computed again in each of the three
// passes instead of being stored.
template <typename T>
__global__ void ChainSoftmaxKernel(const ChainProgram p, bool log, T* y, int64_t outer, int64_t len,
                                   int64_t inner) {
  __shared__ float shared[kThreads];
  for (int64_t row = blockIdx.x; row < outer * inner; row += gridDim.x) {
    const int64_t base = (row / inner) * len * inner + row % inner;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < len; j += kThreads) m = fmaxf(m, ChainValue<T>(p, base + j * inner));
    m = device::BlockReduce<true>(m, shared);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < len; j += kThreads) s += expf(ChainValue<T>(p, base + j * inner) - m);
    s = device::BlockReduce<false>(s, shared);
    const float log_s = logf(s);
    for (int64_t j = threadIdx.x; j < len; j += kThreads) {
      const float d = ChainValue<T>(p, base + j * inner) - m;
      y[base + j * inner] = FromFloat<T>(log ? d - log_s : expf(d) / s);
    }
  }
}

template <typename T>
__device__ __forceinline__ auto CompareValue(T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    return ToFloat(v);
  } else {
    return static_cast<int64_t>(v);
  }
}

template <typename T>
__global__ void CompareKernel(CompareOp op, const T* a, const T* b, uint8_t* y, int64_t n,
                              StridedGeometry g) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    int64_t ia = g.a_period > 0 ? (i / g.a_div) % g.a_period : i;
    int64_t ib = g.b_period > 0 ? (i / g.b_div) % g.b_period : i;
    if (g.rank > 0) {
      ia = 0;
      ib = 0;
      int64_t rest = i;
      for (int d = g.rank - 1; d >= 0; --d) {
        const int64_t c = rest % g.dims[d];
        rest /= g.dims[d];
        ia += c * g.a[d];
        ib += c * g.b[d];
      }
    }
    const auto va = CompareValue(a[ia]);
    const auto vb = CompareValue(b[ib]);
    bool r = false;
    switch (op) {
      case CompareOp::kEqual:
        r = va == vb;
        break;
      case CompareOp::kLess:
        r = va < vb;
        break;
      case CompareOp::kGreater:
        r = va > vb;
        break;
      case CompareOp::kLessOrEqual:
        r = va <= vb;
        break;
      case CompareOp::kGreaterOrEqual:
        r = va >= vb;
        break;
      case CompareOp::kAnd:
        r = va != 0 && vb != 0;
        break;
      case CompareOp::kOr:
        r = va != 0 || vb != 0;
        break;
      case CompareOp::kXor:
        r = (va != 0) != (vb != 0);
        break;
      case CompareOp::kNot:
        r = va == 0;
        break;
    }
    y[i] = r ? 1 : 0;
  }
}

template <typename U>
__global__ void WhereKernel(const uint8_t* c, const U* x, const U* z, U* y, int64_t n, WhereGeometry g) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    int64_t ic = 0, ix = 0, iz = 0, rest = i;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t k = rest % g.dims[d];
      rest /= g.dims[d];
      ic += k * g.c[d];
      ix += k * g.x[d];
      iz += k * g.z[d];
    }
    y[i] = c[ic] != 0 ? x[ix] : z[iz];
  }
}

template <typename T>
__global__ void StridedCopyKernel(const T* x, T* y, int64_t n, StridedGeometry g) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    int64_t offset = 0;
    int64_t rest = i;
    for (int d = g.rank - 1; d >= 0; --d) {
      offset += (rest % g.dims[d]) * g.a[d];
      rest /= g.dims[d];
    }
    y[i] = x[offset];
  }
}

template <typename T>
constexpr bool kIsHalfLike = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// ONNX Cast: floating to integer truncates; anything to bool is "!= 0".
template <typename Out, typename In>
__device__ __forceinline__ Out CastOne(In x) {
  if constexpr (std::is_same_v<Out, bool>) {
    if constexpr (kIsHalfLike<In>) {
      return ToFloat(x) != 0.f;
    } else {
      return x != In(0);
    }
  } else if constexpr (kIsHalfLike<Out>) {
    if constexpr (kIsHalfLike<In>) {
      return FromFloat<Out>(ToFloat(x));
    } else {
      return FromFloat<Out>(static_cast<float>(x));
    }
  } else if constexpr (kIsHalfLike<In>) {
    return static_cast<Out>(ToFloat(x));
  } else {
    return static_cast<Out>(x);
  }
}

template <typename Out, typename In>
__global__ void CastKernel(const In* x, Out* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    y[i] = CastOne<Out, In>(x[i]);
  }
}

template <typename Out, typename In>
cudaError_t CastAs(const void* x, void* y, int64_t n, cudaStream_t stream) {
  CastKernel<Out, In><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const In*>(x), static_cast<Out*>(y), n);
  return cudaGetLastError();
}

template <typename In>
cudaError_t CastFrom(int32_t to, const void* x, void* y, int64_t n, cudaStream_t stream) {
  switch (to) {
    case kFloat: return CastAs<float, In>(x, y, n, stream);
    case kFloat16: return CastAs<__half, In>(x, y, n, stream);
    case kBFloat16: return CastAs<__nv_bfloat16, In>(x, y, n, stream);
    case kInt32: return CastAs<int32_t, In>(x, y, n, stream);
    case kInt64: return CastAs<int64_t, In>(x, y, n, stream);
    case kBool: return CastAs<bool, In>(x, y, n, stream);
  }
  return cudaErrorInvalidValue;
}

bool CastType(int32_t t) {
  return t == kFloat || t == kFloat16 || t == kBFloat16 || t == kInt32 || t == kInt64 || t == kBool;
}

}  // namespace

cudaError_t LaunchUnary(UnaryOp op, int32_t dtype, const void* x, void* y, int64_t n, float alpha, float beta,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (dtype) {
    case kFloat:
      UnaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, static_cast<const float*>(x), static_cast<float*>(y), n,
                                                       alpha, beta);
      break;
    case kFloat16:
      UnaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, static_cast<const __half*>(x), static_cast<__half*>(y),
                                                       n, alpha, beta);
      break;
    case kBFloat16:
      UnaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, static_cast<const __nv_bfloat16*>(x),
                                                       static_cast<__nv_bfloat16*>(y), n, alpha, beta);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchBinary(BinaryOp op, int32_t dtype, const void* a, const void* b, void* y, int64_t n,
                         const StridedGeometry& g, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (dtype) {
    case kFloat:
      BinaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, static_cast<const float*>(a),
                                                        static_cast<const float*>(b), static_cast<float*>(y), n, g);
      break;
    case kFloat16:
      BinaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, static_cast<const __half*>(a),
                                                        static_cast<const __half*>(b), static_cast<__half*>(y), n, g);
      break;
    case kBFloat16:
      BinaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, static_cast<const __nv_bfloat16*>(a),
                                                        static_cast<const __nv_bfloat16*>(b),
                                                        static_cast<__nv_bfloat16*>(y), n, g);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t CompareAs(CompareOp op, const void* a, const void* b, void* y, int64_t n,
                      const StridedGeometry& g, cudaStream_t stream) {
  CompareKernel<<<Blocks(n), kThreads, 0, stream>>>(op, static_cast<const T*>(a), static_cast<const T*>(b),
                                                    static_cast<uint8_t*>(y), n, g);
  return cudaGetLastError();
}

cudaError_t LaunchCompare(CompareOp op, int32_t dtype, const void* a, const void* b, void* y, int64_t n,
                          const StridedGeometry& g, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (dtype) {
    case kFloat:
      return CompareAs<float>(op, a, b, y, n, g, stream);
    case kFloat16:
      return CompareAs<__half>(op, a, b, y, n, g, stream);
    case kBFloat16:
      return CompareAs<__nv_bfloat16>(op, a, b, y, n, g, stream);
    case kInt32:
      return CompareAs<int32_t>(op, a, b, y, n, g, stream);
    case kInt64:
      return CompareAs<int64_t>(op, a, b, y, n, g, stream);
    case kBool:
      return CompareAs<uint8_t>(op, a, b, y, n, g, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

template <typename U>
cudaError_t WhereAs(const void* c, const void* x, const void* z, void* y, int64_t n, const WhereGeometry& g,
                    cudaStream_t stream) {
  WhereKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const uint8_t*>(c), static_cast<const U*>(x),
                                                  static_cast<const U*>(z), static_cast<U*>(y), n, g);
  return cudaGetLastError();
}

cudaError_t LaunchWhere(int elem_bytes, const void* c, const void* x, const void* z, void* y, int64_t n,
                        const WhereGeometry& g, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return WhereAs<uint8_t>(c, x, z, y, n, g, stream);
    case 2:
      return WhereAs<uint16_t>(c, x, z, y, n, g, stream);
    case 4:
      return WhereAs<uint32_t>(c, x, z, y, n, g, stream);
    case 8:
      return WhereAs<uint64_t>(c, x, z, y, n, g, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchChain(int32_t dtype, const ChainProgram& p, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (p.num_ops < 1 || p.num_ops > kMaxChainOps) return cudaErrorInvalidValue;
  switch (dtype) {
    case kFloat:
      ChainKernel<<<Blocks(n), kThreads, 0, stream>>>(p, static_cast<float*>(y), n);
      break;
    case kFloat16:
      ChainKernel<<<Blocks(n), kThreads, 0, stream>>>(p, static_cast<__half*>(y), n);
      break;
    case kBFloat16:
      ChainKernel<<<Blocks(n), kThreads, 0, stream>>>(p, static_cast<__nv_bfloat16*>(y), n);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchChainSoftmax(int32_t dtype, const ChainProgram& p, bool log, void* y, int64_t outer,
                               int64_t len, int64_t inner, cudaStream_t stream) {
  const int64_t rows = outer * inner;
  if (rows == 0 || len == 0) return cudaSuccess;
  if (p.num_ops < 1 || p.num_ops > kMaxChainOps) return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
  switch (dtype) {
    case kFloat:
      ChainSoftmaxKernel<<<blocks, kThreads, 0, stream>>>(p, log, static_cast<float*>(y), outer, len, inner);
      break;
    case kFloat16:
      ChainSoftmaxKernel<<<blocks, kThreads, 0, stream>>>(p, log, static_cast<__half*>(y), outer, len, inner);
      break;
    case kBFloat16:
      ChainSoftmaxKernel<<<blocks, kThreads, 0, stream>>>(p, log, static_cast<__nv_bfloat16*>(y), outer, len,
                                                          inner);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

bool CastSupported(int32_t from, int32_t to) { return CastType(from) && CastType(to); }

cudaError_t LaunchCast(int32_t from, int32_t to, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (from) {
    case kFloat: return CastFrom<float>(to, x, y, n, stream);
    case kFloat16: return CastFrom<__half>(to, x, y, n, stream);
    case kBFloat16: return CastFrom<__nv_bfloat16>(to, x, y, n, stream);
    case kInt32: return CastFrom<int32_t>(to, x, y, n, stream);
    case kInt64: return CastFrom<int64_t>(to, x, y, n, stream);
    case kBool: return CastFrom<bool>(to, x, y, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchStridedCopy(int elem_bytes, const void* x, void* y, int64_t n, const StridedGeometry& g,
                              cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      StridedCopyKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const uint8_t*>(x),
                                                             static_cast<uint8_t*>(y), n, g);
      break;
    case 2:
      StridedCopyKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const uint16_t*>(x),
                                                             static_cast<uint16_t*>(y), n, g);
      break;
    case 4:
      StridedCopyKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const uint32_t*>(x),
                                                             static_cast<uint32_t*>(y), n, g);
      break;
    case 8:
      StridedCopyKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const uint64_t*>(x),
                                                             static_cast<uint64_t*>(y), n, g);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace onnxkit::runner::cuda
