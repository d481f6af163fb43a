// Device kernels: pooling, BatchNormalization (inference), LayerNormalization,
// LRN, Gather, Resize, QuantizeLinear, DequantizeLinear. Floating-point element types (float, float16,
// bfloat16) are computed in float; NaN and Inf propagate as in the reference kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "runner/cuda/device_common.cuh"
#include "runner/cuda/launch.h"

namespace onnxkit::runner::cuda {
namespace {

using device::BlockReduce;
using device::Blocks;
using device::FromFloat;
using device::kThreads;
using device::ToFloat;

template <typename T>
__device__ __forceinline__ float Load(const T* p, int64_t i) {
  return ToFloat(p[i]);
}
template <typename T>
__device__ __forceinline__ void Store(T* p, int64_t i, float v) {
  p[i] = FromFloat<T>(v);
}

// Calls f with a typed null pointer of dtype's device type.
template <typename F>
cudaError_t WithFloatType(int32_t dtype, F&& f) {
  switch (dtype) {
    case kFloat:
      return f(static_cast<float*>(nullptr));
    case kFloat16:
      return f(static_cast<__half*>(nullptr));
    case kBFloat16:
      return f(static_cast<__nv_bfloat16*>(nullptr));
  }
  return cudaErrorInvalidValue;
}

// One thread per output element: its window's taps, in row-major order.
// Max keeps the first largest value and lets a NaN win; average divides by
// the taps inside the input, or (count_include_pad) inside the padded input.
template <typename T>
__global__ void PoolKernel(PoolMode mode, const T* x, T* y, PoolGeometry g) {
  const int64_t total = g.planes * g.out_size;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t plane = i / g.out_size;
    int64_t o = i % g.out_size;
    int64_t pos[3] = {0, 0, 0};
    for (int d = g.rank - 1; d >= 0; --d) {
      pos[d] = o % g.out[d];
      o /= g.out[d];
    }
    const T* xp = x + plane * g.in_size;
    float acc = mode == PoolMode::kMax ? -INFINITY : 0.f;
    bool any = false;
    int64_t count = 0, padded = 0;
    int64_t k[3] = {0, 0, 0};
    const int64_t taps = g.kernel[0] * (g.rank > 1 ? g.kernel[1] : 1) * (g.rank > 2 ? g.kernel[2] : 1);
    for (int64_t t = 0; t < taps; ++t) {
      int64_t rest = t;
      for (int d = g.rank - 1; d >= 0; --d) {
        k[d] = rest % g.kernel[d];
        rest /= g.kernel[d];
      }
      bool inside = true, in_padded = true;
      int64_t offset = 0;
      for (int d = 0; d < g.rank; ++d) {
        const int64_t p = pos[d] * g.stride[d] + k[d] * g.dilation[d];  // in padded coordinates
        in_padded = in_padded && p < g.limit[d];
        const int64_t c = p - g.pad_begin[d];
        inside = inside && c >= 0 && c < g.in[d];
        offset = offset * g.in[d] + c;
      }
      padded += in_padded;
      if (!inside) continue;
      const float v = Load(xp, offset);
      ++count;
      if (mode == PoolMode::kMax) {
        if (!any || v > acc || (v != v && acc == acc)) acc = v;
        any = true;
      } else {
        acc += v;
      }
    }
    if (mode != PoolMode::kMax) {
      const int64_t divisor = mode == PoolMode::kAverageIncludePad ? padded : count;
      acc = divisor > 0 ? acc / static_cast<float>(divisor) : NAN;
    }
    Store(y, i, acc);
  }
}

template <typename T>
__global__ void BatchNormKernel(const T* x, const T* scale, const T* bias, const T* mean, const T* var, T* y,
                                int64_t total, int64_t c, int64_t inner, float epsilon) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t ch = (i / inner) % c;
    const float v = (Load(x, i) - Load(mean, ch)) / sqrtf(Load(var, ch) + epsilon);
    Store(y, i, v * Load(scale, ch) + Load(bias, ch));
  }
}

// One block per row: the mean, then the mean of squared deviations (two
// passes over the row, which stays in L1/L2), then the normalized row.
template <typename T>
__global__ void LayerNormKernel(const T* x, const T* scale, const T* bias, T* y, int64_t rows, int64_t len,
                                float epsilon) {
  __shared__ float partial[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * len;
    T* yr = y + row * len;
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) sum += Load(xr, j);
    const float mean = BlockReduce<false>(sum, partial) / static_cast<float>(len);
    float sq = 0.f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      const float d = Load(xr, j) - mean;
      sq += d * d;
    }
    const float inv = 1.f / sqrtf(BlockReduce<false>(sq, partial) / static_cast<float>(len) + epsilon);
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      float v = (Load(xr, j) - mean) * inv * Load(scale, j);
      if (bias != nullptr) v += Load(bias, j);
      Store(yr, j, v);
    }
  }
}

// y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta;
// the window of channel ch is [ch - floor((size-1)/2), ch + ceil((size-1)/2)].
template <typename T>
__global__ void LrnKernel(const T* x, T* y, int64_t total, int64_t c, int64_t inner, int64_t size,
                          float alpha, float beta, float bias) {
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t ch = (i / inner) % c;
    const int64_t base = i - ch * inner;
    const int64_t lo = ch - before > 0 ? ch - before : 0;
    const int64_t hi = ch + after < c - 1 ? ch + after : c - 1;
    float sq = 0.f;
    for (int64_t j = lo; j <= hi; ++j) {
      const float v = Load(x, base + j * inner);
      sq += v * v;
    }
    Store(y, i, Load(x, i) / powf(bias + alpha / static_cast<float>(size) * sq, beta));
  }
}

// With `flag`: indices may be negative (counted from the end) and any out
// of range sets *flag and gives a zero element.
template <typename U, typename I>
__global__ void GatherKernel(const U* x, const I* indices, U* y, int64_t outer, int64_t axis_len,
                             int64_t count, int64_t inner, int* flag) {
  const int64_t total = outer * count * inner;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t in = i % inner;
    const int64_t j = (i / inner) % count;
    const int64_t o = i / (inner * count);
    int64_t k = static_cast<int64_t>(indices[j]);
    if (flag != nullptr) {
      if (k < 0) k += axis_len;
      if (k < 0 || k >= axis_len) {
        *flag = 1;
        y[i] = U{};
        continue;
      }
    }
    y[i] = x[(o * axis_len + k) * inner + in];
  }
}

template <typename U>
cudaError_t GatherOf(const void* x, const void* indices, int index_bytes, void* y, int64_t outer,
                     int64_t axis_len, int64_t count, int64_t inner, int* flag, cudaStream_t stream) {
  const int64_t total = outer * count * inner;
  if (index_bytes == 8) {
    GatherKernel<<<Blocks(total), kThreads, 0, stream>>>(
        static_cast<const U*>(x), static_cast<const int64_t*>(indices), static_cast<U*>(y), outer, axis_len,
        count, inner, flag);
  } else if (index_bytes == 4) {
    GatherKernel<<<Blocks(total), kThreads, 0, stream>>>(
        static_cast<const U*>(x), static_cast<const int32_t*>(indices), static_cast<U*>(y), outer, axis_len,
        count, inner, flag);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T>
__global__ void ResizeKernel(const T* x, T* y, int64_t n, const ResizeGeometry g) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < n;
       o += int64_t{blockDim.x} * gridDim.x) {
    int64_t first[kMaxRank], count[kMaxRank], k[kMaxRank];
    bool outside = false;
    int64_t rest = o;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t c = rest % g.out_dims[d];
      rest /= g.out_dims[d];
      first[d] = g.first[d][c];
      count[d] = g.count[d][c];
      k[d] = 0;
      outside = outside || count[d] <= 0;
    }
    if (outside) {
      y[o] = FromFloat<T>(g.extrapolation);
      continue;
    }
    float sum = 0.f;
    while (true) {
      float w = 1.f;
      int64_t src = 0;
      for (int d = 0; d < g.rank; ++d) {
        w *= g.weight[d][first[d] + k[d]];
        src += g.offset[d][first[d] + k[d]];
      }
      sum += w * ToFloat(x[src]);
      int d = g.rank;
      while (d > 0 && ++k[d - 1] == count[d - 1]) k[--d] = 0;
      if (d == 0) break;
    }
    y[o] = FromFloat<T>(sum);
  }
}

// The integers a quantized type holds, and calls f with a typed null
// pointer of the type (uint8, int8, uint16, int16; int32 with `wide`).
template <typename Q>
struct QuantLimits {
  static constexpr float kLo = static_cast<float>(std::numeric_limits<Q>::min());
  static constexpr float kHi = static_cast<float>(std::numeric_limits<Q>::max());
};
template <typename F>
cudaError_t WithQuantType(int32_t dtype, bool wide, F&& f) {
  switch (dtype) {
    case kUint8:
      return f(static_cast<uint8_t*>(nullptr));
    case kInt8:
      return f(static_cast<int8_t*>(nullptr));
    case kUint16:
      return f(static_cast<uint16_t*>(nullptr));
    case kInt16:
      return f(static_cast<int16_t*>(nullptr));
    case kInt32:
      if (wide) return f(static_cast<int32_t*>(nullptr));
      return cudaErrorInvalidValue;
  }
  return cudaErrorInvalidValue;
}

template <typename T, typename Q>
__global__ void QuantizeKernel(const T* x, const T* scale, const Q* zp, Q* y, int64_t n,
                               reference::ScaleMap map) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t s = map.Index(i);
    // The quotient in T: float division, then rounded to T (for float16
    // and bfloat16 float carries more than twice their bits, so this
    // rounds as the exact quotient would).
    const float q = ToFloat(FromFloat<T>(ToFloat(x[i]) / ToFloat(scale[s])));
    const float z = zp != nullptr ? static_cast<float>(zp[s]) : 0.f;
    float r = isnan(q) ? z : rintf(q) + z;  // rintf: half to even
    r = fminf(fmaxf(r, QuantLimits<Q>::kLo), QuantLimits<Q>::kHi);
    y[i] = static_cast<Q>(r);
  }
}

template <typename Q, typename T>
__global__ void DequantizeKernel(const Q* x, const T* scale, const Q* zp, T* y, int64_t n,
                                 reference::ScaleMap map) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t s = map.Index(i);
    const int64_t d = static_cast<int64_t>(x[i]) - (zp != nullptr ? static_cast<int64_t>(zp[s]) : 0);
    y[i] = FromFloat<T>(__ll2float_rn(d) * ToFloat(scale[s]));
  }
}

}  // namespace

cudaError_t LaunchPool(PoolMode mode, int32_t dtype, const void* x, void* y, const PoolGeometry& g,
                       cudaStream_t stream) {
  const int64_t total = g.planes * g.out_size;
  if (total == 0) return cudaSuccess;
  return WithFloatType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    PoolKernel<<<Blocks(total), kThreads, 0, stream>>>(mode, static_cast<const T*>(x), static_cast<T*>(y), g);
    return cudaGetLastError();
  });
}

cudaError_t LaunchBatchNorm(int32_t dtype, const void* x, const void* scale, const void* bias,
                            const void* mean, const void* var, void* y, int64_t total, int64_t c,
                            int64_t inner, float epsilon, cudaStream_t stream) {
  if (total == 0) return cudaSuccess;
  return WithFloatType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    BatchNormKernel<<<Blocks(total), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias),
        static_cast<const T*>(mean), static_cast<const T*>(var), static_cast<T*>(y), total, c, inner,
        epsilon);
    return cudaGetLastError();
  });
}

cudaError_t LaunchLayerNorm(int32_t dtype, const void* x, const void* scale, const void* bias, void* y,
                            int64_t rows, int64_t len, float epsilon, cudaStream_t stream) {
  if (rows == 0 || len == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
  return WithFloatType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    LayerNormKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<const T*>(scale),
                                                     static_cast<const T*>(bias), static_cast<T*>(y), rows,
                                                     len, epsilon);
    return cudaGetLastError();
  });
}

cudaError_t LaunchLrn(int32_t dtype, const void* x, void* y, int64_t total, int64_t c, int64_t inner,
                      int64_t size, float alpha, float beta, float bias, cudaStream_t stream) {
  if (total == 0) return cudaSuccess;
  return WithFloatType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    LrnKernel<<<Blocks(total), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), total, c,
                                                      inner, size, alpha, beta, bias);
    return cudaGetLastError();
  });
}

cudaError_t LaunchGather(int elem_bytes, const void* x, const void* indices, int index_bytes, void* y,
                         int64_t outer, int64_t axis_len, int64_t count, int64_t inner, int* flag,
                         cudaStream_t stream) {
  const int64_t total = outer * count * inner;
  if (total == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return GatherOf<uint8_t>(x, indices, index_bytes, y, outer, axis_len, count, inner, flag, stream);
    case 2:
      return GatherOf<uint16_t>(x, indices, index_bytes, y, outer, axis_len, count, inner, flag, stream);
    case 4:
      return GatherOf<uint32_t>(x, indices, index_bytes, y, outer, axis_len, count, inner, flag, stream);
    case 8:
      return GatherOf<uint64_t>(x, indices, index_bytes, y, outer, axis_len, count, inner, flag, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchResize(int32_t dtype, const void* x, void* y, int64_t n, const ResizeGeometry& g,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (g.rank < 1 || g.rank > kMaxRank) return cudaErrorInvalidValue;
  return WithFloatType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    ResizeKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n, g);
    return cudaGetLastError();
  });
}

cudaError_t LaunchQuantize(int32_t dtype, int32_t y_type, const void* x, const void* scale, const void* zp,
                           void* y, int64_t n, const reference::ScaleMap& map, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return WithFloatType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return WithQuantType(y_type, /*wide=*/false, [&](auto* qtag) {
      using Q = std::remove_pointer_t<decltype(qtag)>;
      QuantizeKernel<<<Blocks(n), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const Q*>(zp),
          static_cast<Q*>(y), n, map);
      return cudaGetLastError();
    });
  });
}

cudaError_t LaunchDequantize(int32_t x_type, int32_t dtype, const void* x, const void* scale, const void* zp,
                             void* y, int64_t n, const reference::ScaleMap& map, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return WithFloatType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return WithQuantType(x_type, /*wide=*/true, [&](auto* qtag) {
      using Q = std::remove_pointer_t<decltype(qtag)>;
      DequantizeKernel<<<Blocks(n), kThreads, 0, stream>>>(
          static_cast<const Q*>(x), static_cast<const T*>(scale), static_cast<const Q*>(zp),
          static_cast<T*>(y), n, map);
      return cudaGetLastError();
    });
  });
}

}  // namespace onnxkit::runner::cuda
