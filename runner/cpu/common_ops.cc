// cpu kernels for common ops oneDNN has no primitive for, which otherwise
// run on the reference kernels (each element through a double, one index
// tuple at a time): InstanceNormalization and GroupNormalization, Where,
// Expand, ScatterElements, Cast between float32 and int64 / int32 / int8 /
// uint8 / bool / float16 / bfloat16 (float16 on the F16C instructions where
// the CPU has them, a group holding NaN redone one by one so NaN keeps the
// reference's bits), HardSigmoid, Floor, Ceil, Sign, Log, Softplus, Sin,
// Cos, Atan, Asin, Acos, Softsign, Selu, Celu, ThresholdedRelu, Swish
// with alpha 1 (SwishRow's values, within 3e-7 of the reference's) and Mish
// (in double). Where,
// Expand, ScatterElements, Cast, Floor, Ceil, Sign, Softsign and
// ThresholdedRelu give the reference's values bit for bit; HardSigmoid, Log,
// Softplus, Sin, Cos, Atan, Asin and Acos compute in double as the reference does
// (runner/cpu/vector_math.h), Selu and Celu too with an exponential within
// 1e-14 (a last-bit difference at most); the normalizations take their
// sums in double in another order (they differ from the reference's
// sequential sums in the last bits of a double, far below float precision).
// Other types, shapes and attributes run on the reference kernel, which also
// reports every error.
//
// Broadcasting (Where, Expand): the output's dims are merged where every
// input is either contiguous or broadcast across both, and the rows of the
// last merged dim are walked with stride 0 or 1 per input; rows are split
// over the OpenMP threads from 2^16 output elements.
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/cpu/parallel_for.h"
#include "runner/cpu/vector_math.h"
#include "runner/element_word.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/float_types.h"
#include "runner/reference/roi_align.h"

namespace onnxkit::runner::cpu {
namespace {

constexpr int64_t kParallelElements = int64_t{1} << 16;

// Output dims merged where possible and, per input, the stride (in
// elements) of each merged dim: 0 where the input is broadcast.
struct Broadcast {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;
};

Broadcast PlanBroadcast(const std::vector<int64_t>& out, const std::vector<const std::vector<int64_t>*>& inputs) {
  const size_t rank = out.size();
  Broadcast b;
  std::vector<std::vector<int64_t>> full(inputs.size(), std::vector<int64_t>(rank, 0));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::vector<int64_t>& s = *inputs[k];
    int64_t stride = 1;
    for (size_t i = 0; i < s.size(); ++i) {
      const size_t d = s.size() - 1 - i, o = rank - 1 - i;
      full[k][o] = s[d] == 1 && out[o] != 1 ? 0 : stride;
      stride *= s[d];
    }
  }
  // Merge dim d into the dim after it when every input's stride allows.
  b.strides.assign(inputs.size(), {});
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;  // size-1 dims take no part
    bool merge = !b.dims.empty();
    for (size_t k = 0; k < inputs.size() && merge; ++k) {
      merge = b.strides[k].back() == full[k][d] * out[d];
    }
    if (merge) {
      b.dims.back() *= out[d];
      for (size_t k = 0; k < inputs.size(); ++k) b.strides[k].back() = full[k][d];
    } else {
      b.dims.push_back(out[d]);
      for (size_t k = 0; k < inputs.size(); ++k) b.strides[k].push_back(full[k][d]);
    }
  }
  if (b.dims.empty()) {
    b.dims.push_back(1);
    for (auto& s : b.strides) s.push_back(1);
  }
  return b;
}

// fn(row_offsets (one per input), out_offset, n, inner_strides) for every
// row of the last merged dim; rows in parallel for large outputs.
template <typename F>
void ForEachRow(const Broadcast& b, F&& fn) {
  const size_t rank = b.dims.size(), inputs = b.strides.size();
  const int64_t n = b.dims.back();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= b.dims[d];
  std::vector<int64_t> inner(inputs);
  for (size_t k = 0; k < inputs; ++k) inner[k] = b.strides[k].back();
  ParallelFor(rows, rows > 1 && rows * n >= kParallelElements, [&](int64_t row) {
    int64_t offsets[4] = {0, 0, 0, 0};
    int64_t rest = row;
    for (size_t d = rank - 1; d-- > 0;) {
      const int64_t i = rest % b.dims[d];
      rest /= b.dims[d];
      for (size_t k = 0; k < inputs; ++k) offsets[k] += i * b.strides[k][d];
    }
    fn(offsets, row * n, n, inner.data());
  });
}

// The broadcast shape of `shapes`, or nullopt.
std::optional<std::vector<int64_t>> BroadcastOf(std::vector<std::vector<int64_t>> shapes) {
  absl::StatusOr<std::vector<int64_t>> out = reference::BroadcastShapes(shapes);
  if (!out.ok()) return std::nullopt;
  return *std::move(out);
}

// out[i] = c[i * s0] ? x[i * s1] : y[i * s2] for n values; kS0..kS2 the
// steps when fixed (-1: from s).
template <typename T, int kS0, int kS1, int kS2>
void SelectRow(const bool* c, const T* x, const T* y, T* out, int64_t n, const int64_t* s) {
  const int64_t s0 = kS0 >= 0 ? kS0 : s[0], s1 = kS1 >= 0 ? kS1 : s[1], s2 = kS2 >= 0 ? kS2 : s[2];
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T a = x[i * s1], b = y[i * s2];
    out[i] = c[i * s0] ? a : b;
  }
}

class WhereKernel : public CpuKernel {
 public:
  WhereKernel(const ir::Node&, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* c, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* y, ctx.Input(2));
    if (c->dtype() != pb::kBool || x->dtype() != y->dtype()) return Fallback(ctx);
    std::optional<std::vector<int64_t>> shape = BroadcastOf({c->shape(), x->shape(), y->shape()});
    if (!shape) return Fallback(ctx);
    const int32_t dtype = x->dtype();
    Tensor* out = nullptr;
    bool typed = VisitElementWord(dtype, [&](auto) {});
    if (!typed) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(out, ctx.AllocateOutputUninitialized(0, dtype, *shape));
    if (out->size() == 0) return absl::OkStatus();
    Broadcast b = PlanBroadcast(*shape, {&c->shape(), &x->shape(), &y->shape()});
    VisitElementWord(dtype, [&](auto word) {
      using T = decltype(word);
      const bool* cp = c->data<bool>();
      const T* xp = static_cast<const T*>(x->raw());
      const T* yp = static_cast<const T*>(y->raw());
      T* op = static_cast<T*>(out->mutable_raw());
      ForEachRow(b, [&](const int64_t* off, int64_t o, int64_t n, const int64_t* s) {
        const bool* cr = cp + off[0];
        const T* xr = xp + off[1];
        const T* yr = yp + off[2];
        T* orow = op + o;
        // Both values are read before the choice, so it compiles to a
        // select (vectorized where the steps are fixed) instead of a branch
        // that data-dependent conditions mispredict half the time.
        if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
          SelectRow<T, 1, 1, 1>(cr, xr, yr, orow, n, s);
        } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {
          SelectRow<T, 1, 1, 0>(cr, xr, yr, orow, n, s);
        } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {
          SelectRow<T, 1, 0, 1>(cr, xr, yr, orow, n, s);
        } else if (s[0] == 1 && s[1] == 0 && s[2] == 0) {
          SelectRow<T, 1, 0, 0>(cr, xr, yr, orow, n, s);
        } else {
          SelectRow<T, -1, -1, -1>(cr, xr, yr, orow, n, s);
        }
      });
    });
    return absl::OkStatus();
  }
};

class ExpandKernel : public CpuKernel {
 public:
  ExpandKernel(const ir::Node&, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* s, ctx.Input(1));
    if (s->dtype() != pb::kInt64 || s->rank() != 1) return Fallback(ctx);
    std::vector<int64_t> target(s->data<int64_t>(), s->data<int64_t>() + s->size());
    for (int64_t d : target) {
      if (d < 0) return Fallback(ctx);
    }
    std::optional<std::vector<int64_t>> shape = BroadcastOf({x->shape(), target});
    if (!shape || !VisitElementWord(x->dtype(), [&](auto) {})) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutputUninitialized(0, x->dtype(), *shape));
    if (out->size() == 0) return absl::OkStatus();
    Broadcast b = PlanBroadcast(*shape, {&x->shape()});
    VisitElementWord(x->dtype(), [&](auto word) {
      using T = decltype(word);
      const T* xp = static_cast<const T*>(x->raw());
      T* op = static_cast<T*>(out->mutable_raw());
      ForEachRow(b, [&](const int64_t* off, int64_t o, int64_t n, const int64_t* st) {
        if (st[0] == 1) {
          std::memcpy(op + o, xp + off[0], static_cast<size_t>(n) * sizeof(T));
        } else {
          std::fill_n(op + o, n, xp[off[0]]);
        }
      });
    });
    return absl::OkStatus();
  }
};

// The reference's float-to-integer conversion: truncation toward zero, NaN
// as 0, beyond the int64 range saturated, then the low bits kept.
inline int64_t FloatToInt64Bits(float f) {
  if (std::isnan(f)) return 0;
  const double t = std::trunc(static_cast<double>(f));
  if (t >= 0x1p64) return -1;
  if (t >= 0x1p63) return static_cast<int64_t>(static_cast<uint64_t>(t));
  if (t < -0x1p63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(t);
}

// float32 -> float16 on F16C, 8 values at a time; a group holding NaN
// (whose payload the instruction keeps, where the reference writes a
// quiet NaN with the sign only) goes through the scalar conversion.
__attribute__((target("avx2,f16c"))) void FloatsToHalvesF16c(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
      for (int64_t j = i; j < i + 8; ++j) out[j] = Float16::FromFloat(in[j]);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = Float16::FromFloat(in[i]);
}

// float16 to float32 as the reference reads it (through a double, which
// quiets a signaling NaN: the quiet bit set, the payload kept).
inline float HalfToFloat(uint16_t h) {
  const float f = Float16::ToFloat(h);
  return std::isnan(f) ? BitsFloat(FloatBits(f) | 0x00400000u) : f;
}

// The instruction quiets NaN the same way.
__attribute__((target("avx2,f16c"))) void HalvesToFloatsF16c(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
  for (; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

bool HasF16c() {
  // CPUID leaf 1, ECX bit 29 (not every compiler's __builtin_cpu_supports
  // knows "f16c").
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
  }();
  return has;
}

// Converts n values between float32 and float16 / bfloat16 (`to_half`:
// float32 in), in blocks over the threads; bit for bit the reference's.
void CastHalves(const void* in, void* out, int64_t n, bool to_half, bool bfloat) {
  constexpr int64_t kBlock = 4096;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  ParallelFor(blocks, n >= kParallelElements, [&](int64_t b) {
    const int64_t first = b * kBlock, count = std::min(kBlock, n - first);
    if (to_half) {
      const float* src = static_cast<const float*>(in) + first;
      uint16_t* dst = static_cast<uint16_t*>(out) + first;
      if (bfloat) {
        // Nearest even; NaN as the reference writes it (sign, quiet NaN).
        for (int64_t i = 0; i < count; ++i) {
          const uint32_t x = FloatBits(src[i]);
          dst[i] = (x & 0x7fffffffu) > 0x7f800000u
                       ? static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7fc0u)
                       : static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
        }
      } else if (HasF16c()) {
        FloatsToHalvesF16c(src, dst, count);
      } else {
        for (int64_t i = 0; i < count; ++i) dst[i] = Float16::FromFloat(src[i]);
      }
    } else {
      const uint16_t* src = static_cast<const uint16_t*>(in) + first;
      float* dst = static_cast<float*>(out) + first;
      if (bfloat) {
        for (int64_t i = 0; i < count; ++i) {
          const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
          dst[i] = BitsFloat((bits & 0x7fffffffu) > 0x7f800000u ? bits | 0x00400000u : bits);  // NaN quieted
        }
      } else if (HasF16c()) {
        HalvesToFloatsF16c(src, dst, count);
      } else {
        for (int64_t i = 0; i < count; ++i) dst[i] = HalfToFloat(src[i]);
      }
    }
  });
}

class CastKernel : public CpuKernel {
 public:
  CastKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), to_(static_cast<int32_t>(reference::AttrInt(node, "to", 0))) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    const int32_t from = x->dtype();
    const bool to_float = to_ == pb::kFloat && (from == pb::kInt64 || from == pb::kInt32 || from == pb::kBool ||
                                                 from == pb::kInt8 || from == pb::kUint8);
    const bool from_float =
        from == pb::kFloat && (to_ == pb::kInt64 || to_ == pb::kInt32 || to_ == pb::kBool);
    const bool half = (from == pb::kFloat && (to_ == pb::kFloat16 || to_ == pb::kBfloat16)) ||
                      (to_ == pb::kFloat && (from == pb::kFloat16 || from == pb::kBfloat16));
    // Small tensors (shape arithmetic) are not worth a second code path.
    if ((!to_float && !from_float && !half) || x->size() < 256) return Fallback(ctx);
    if (half) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, to_, x->shape()));
      CastHalves(x->raw(), y->mutable_raw(), x->size(), from == pb::kFloat,
                 from == pb::kBfloat16 || to_ == pb::kBfloat16);
      return absl::OkStatus();
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, to_, x->shape()));
    const int64_t n = x->size();
    // Chunks of kChunk elements, over the threads for large tensors.
    constexpr int64_t kChunk = 4096;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    const bool parallel = n >= kParallelElements;
    if (to_float) {
      float* out = y->mutable_data<float>();
      // Through double, as the reference: an int64 beyond 2^53 rounds twice.
      auto convert = [&](auto* in) {
        ParallelFor(chunks, parallel, [&](int64_t c) {
          const int64_t first = c * kChunk, last = std::min(n, first + kChunk);
          for (int64_t i = first; i < last; ++i) out[i] = static_cast<float>(static_cast<double>(in[i]));
        });
      };
      switch (from) {
        case pb::kInt64: convert(x->data<int64_t>()); break;
        case pb::kInt32: convert(x->data<int32_t>()); break;
        case pb::kInt8: convert(x->data<int8_t>()); break;
        case pb::kUint8: convert(x->data<uint8_t>()); break;
        default: convert(x->data<bool>()); break;
      }
      return absl::OkStatus();
    }
    const float* in = x->data<float>();
    if (to_ == pb::kBool) {
      bool* out = y->mutable_data<bool>();
      ParallelFor(chunks, parallel, [&](int64_t c) {
        const int64_t first = c * kChunk, last = std::min(n, first + kChunk);
        for (int64_t i = first; i < last; ++i) out[i] = in[i] != 0 || std::isnan(in[i]);
      });
    } else {
      // Values inside (-2^63, 2^63) truncate directly (vectorized); NaN and
      // values beyond, where the hardware conversion differs from the
      // reference's, are redone after.
      auto convert = [&](auto* out) {
        using O = std::remove_pointer_t<decltype(out)>;
        const bool rare = ParallelAny(chunks, parallel, [&](int64_t c) {
          const int64_t first = c * kChunk, last = std::min(n, first + kChunk);
          int chunk_rare = 0;
#pragma omp simd reduction(| : chunk_rare)
          for (int64_t i = first; i < last; ++i) {
            const bool direct = std::fabs(in[i]) < 0x1p63f;
            out[i] = static_cast<O>(static_cast<uint64_t>(static_cast<int64_t>(direct ? in[i] : 0.f)));
            chunk_rare |= !direct;
          }
          return chunk_rare != 0;
        });
        if (!rare) return;
        for (int64_t i = 0; i < n; ++i) {
          if (!(std::fabs(in[i]) < 0x1p63f))
            out[i] = static_cast<O>(static_cast<uint64_t>(FloatToInt64Bits(in[i])));
        }
      };
      if (to_ == pb::kInt64) {
        convert(y->mutable_data<int64_t>());
      } else {
        convert(y->mutable_data<int32_t>());
      }
    }
    return absl::OkStatus();
  }

 private:
  int32_t to_;
};

// Rows of the rounding kernel, compiled for AVX-512 and AVX2 too (the
// baseline x86-64 has no vector rounding instruction: floor would be a
// libm call per element).
__attribute__((target_clones("avx512f", "avx2", "default"))) void FloorRow(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = std::floor(x[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void CeilRow(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = std::ceil(x[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void SignRow(const float* x, float* y,
                                                                          int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v > 0 ? 1.f : v < 0 ? -1.f : v;  // 0, -0 and NaN unchanged
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void HardSigmoidRow(const float* x, float* y,
                                                                               int64_t n, double alpha,
                                                                               double beta) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    // Selects after the conversion, so the loop vectorizes; NaN stays NaN.
    const double v = alpha * static_cast<double>(x[i]) + beta;
    float r = static_cast<float>(v);
    r = v < 0 ? 0.f : r;
    r = v > 1 ? 1.f : r;
    y[i] = r;
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void SoftsignRow(const float* x, float* y,
                                                                              int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(v / (1 + std::fabs(v)));
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void ThresholdedReluRow(const float* x, float* y,
                                                                                     int64_t n, float alpha) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > alpha ? x[i] : 0.f;  // NaN gives 0, as the reference
}

// HardSigmoid, Floor, Ceil, Sign, Log, Softplus, Sin, Cos, Softsign, Selu,
// Celu, ThresholdedRelu, Swish and Mish on float32, in double as the reference (runner/cpu/vector_math.h for
// Log, Softplus, Sin, Cos, Mish and Selu's exponential; Swish as SwishRow, with alpha 1).
class UnaryRowKernel : public CpuKernel {
 public:
  enum class Op {
    kHardSigmoid,
    kFloor,
    kCeil,
    kLog,
    kSoftplus,
    kSign,
    kSin,
    kCos,
    kSoftsign,
    kSelu,
    kCelu,
    kThresholdedRelu,
    kAtan,
    kAsin,
    kAcos,
    kSwish,
    kMish
  };

  UnaryRowKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        op_(node.op_type() == "HardSigmoid"       ? Op::kHardSigmoid
            : node.op_type() == "Floor"           ? Op::kFloor
            : node.op_type() == "Ceil"            ? Op::kCeil
            : node.op_type() == "Log"             ? Op::kLog
            : node.op_type() == "Sign"            ? Op::kSign
            : node.op_type() == "Sin"             ? Op::kSin
            : node.op_type() == "Cos"             ? Op::kCos
            : node.op_type() == "Softsign"        ? Op::kSoftsign
            : node.op_type() == "Selu"            ? Op::kSelu
            : node.op_type() == "Celu"            ? Op::kCelu
            : node.op_type() == "ThresholdedRelu" ? Op::kThresholdedRelu
            : node.op_type() == "Atan"            ? Op::kAtan
            : node.op_type() == "Asin"            ? Op::kAsin
            : node.op_type() == "Acos"            ? Op::kAcos
            : node.op_type() == "Swish"           ? Op::kSwish
            : node.op_type() == "Mish"            ? Op::kMish
                                                  : Op::kSoftplus),
        alpha_(reference::AttrFloat(node, "alpha", DefaultAlpha(node.op_type()))),
        beta_(reference::AttrFloat(node, "beta", 0.5f)),
        gamma_(reference::AttrFloat(node, "gamma", 1.05070102214813232421875f)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (x->dtype() != pb::kFloat || (op_ == Op::kSwish && alpha_ != 1)) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputReusing(0, 0, pb::kFloat, x->shape()));
    const float* in = x->data<float>();
    float* out = y->mutable_data<float>();
    const int64_t n = x->size();
    constexpr int64_t kChunk = 16384;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    ParallelFor(chunks, n >= kParallelElements, [&](int64_t k) {
      const int64_t first = k * kChunk, count = std::min(kChunk, n - first);
      switch (op_) {
        case Op::kHardSigmoid:
          HardSigmoidRow(in + first, out + first, count, alpha_, beta_);
          break;
        case Op::kFloor:
          FloorRow(in + first, out + first, count);
          break;
        case Op::kCeil:
          CeilRow(in + first, out + first, count);
          break;
        case Op::kLog:
          LogRow(in + first, out + first, count);
          break;
        case Op::kSoftplus:
          SoftplusRow(in + first, out + first, count);
          break;
        case Op::kSign:
          SignRow(in + first, out + first, count);
          break;
        case Op::kSin:
        case Op::kCos:
          SinCosRow(in + first, out + first, count, op_ == Op::kCos);
          break;
        case Op::kSoftsign:
          SoftsignRow(in + first, out + first, count);
          break;
        case Op::kSelu:
          SeluRow(in + first, out + first, count, alpha_, gamma_);
          break;
        case Op::kCelu:
          CeluRow(in + first, out + first, count, alpha_);
          break;
        case Op::kThresholdedRelu:
          ThresholdedReluRow(in + first, out + first, count, static_cast<float>(alpha_));
          break;
        case Op::kAtan:
          ArcRow(in + first, out + first, count, ArcFunction::kAtan);
          break;
        case Op::kAsin:
          ArcRow(in + first, out + first, count, ArcFunction::kAsin);
          break;
        case Op::kAcos:
          ArcRow(in + first, out + first, count, ArcFunction::kAcos);
          break;
        case Op::kSwish:
          SwishRowTo(in + first, out + first, count);
          break;
        case Op::kMish:
          MishRow(in + first, out + first, count);
          break;
      }
    });
    return absl::OkStatus();
  }

 private:
  static float DefaultAlpha(const std::string& op) {
    if (op == "Selu") return 1.67326319217681884765625f;
    if (op == "Celu" || op == "ThresholdedRelu" || op == "Swish") return 1.f;
    return 0.2f;  // HardSigmoid
  }

  Op op_;
  double alpha_, beta_, gamma_;
};

// ScatterElements without reduction (GatherElements' inverse) where indices
// cover data on every axis but `axis`, the common case: viewed as
// [outer, dim, inner], a column (o, k) of indices and updates writes along
// the axis of the same column of the output, so columns split over the
// threads with each column's writes in index order, as the reference makes
// them (the last of repeated indices wins). Indices are read in place (int64
// or int32); an index out of range, other shapes, reductions and other types
// run on the reference kernel, which reports the error.
class ScatterElementsKernel : public CpuKernel {
 public:
  ScatterElementsKernel(const ir::Node& node, const KernelInfo& info, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        axis_(reference::AttrInt(node, "axis", 0)),
        plain_(reference::AttrString(node, "reduction", "none") == "none") {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* data, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* upd, ctx.Input(2));
    const int rank = data->rank();
    if (!plain_ || rank == 0 || ind->rank() != rank || upd->shape() != ind->shape() ||
        upd->dtype() != data->dtype() || axis_ < -rank || axis_ >= rank ||
        (ind->dtype() != pb::kInt64 && ind->dtype() != pb::kInt32) ||
        !VisitElementWord(data->dtype(), [](auto) {})) {
      return Fallback(ctx);
    }
    const int a = static_cast<int>(axis_ < 0 ? axis_ + rank : axis_);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < rank; ++d) {
      if (d != a && ind->dim(d) != data->dim(d)) return Fallback(ctx);
      if (d < a) outer *= data->dim(d);
      if (d > a) inner *= data->dim(d);
    }
    const int64_t dim = data->dim(a), rows = ind->dim(a), n = ind->size();
    const bool wide = ind->dtype() == pb::kInt64;
    const int64_t* i64 = wide ? ind->data<int64_t>() : nullptr;
    const int32_t* i32 = wide ? nullptr : ind->data<int32_t>();
    bool bad = false;
#pragma omp parallel for reduction(|| : bad) if (n >= kParallelElements)
    for (int64_t e = 0; e < n; ++e) {
      const int64_t i = wide ? i64[e] : i32[e];
      bad = bad || i < -dim || i >= dim;
    }
    if (bad) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, data->dtype(), data->shape()));
    const int64_t bytes = data->nbytes();
    const int64_t chunk = int64_t{1} << 20;
#pragma omp parallel for if (bytes >= 2 * chunk)
    for (int64_t at = 0; at < bytes; at += chunk) {
      std::memcpy(static_cast<char*>(y->mutable_raw()) + at, static_cast<const char*>(data->raw()) + at,
                  static_cast<size_t>(std::min(chunk, bytes - at)));
    }
    // Work units: one outer slice and a run of at most 256 inner columns.
    const int64_t runs = (inner + 255) / 256, units = outer * runs;
    VisitElementWord(data->dtype(), [&](auto word) {
      using T = decltype(word);
      const T* src = static_cast<const T*>(upd->raw());
      T* dst = static_cast<T*>(y->mutable_raw());
      ParallelFor(units, units > 1 && n >= kParallelElements, [&](int64_t u) {
        const int64_t o = u / runs, k0 = (u % runs) * 256, k1 = std::min(inner, k0 + 256);
        for (int64_t j = 0; j < rows; ++j) {
          const int64_t from = (o * rows + j) * inner;
          T* to = dst + o * dim * inner;
          for (int64_t k = k0; k < k1; ++k) {
            int64_t i = wide ? i64[from + k] : i32[from + k];
            if (i < 0) i += dim;
            to[i * inner + k] = src[from + k];
          }
        }
      });
    });
    return absl::OkStatus();
  }

 private:
  int64_t axis_;
  bool plain_;
};

// One RoiAlign sample point for c channels (channels-last corners p1..p4
// with weights w1..w4): avg adds w1 p1 + w2 p2 + w3 p3 + w4 p4 to acc; max
// sets acc to the largest weighted corner (`first`) or keeps the larger of
// acc and it, with std::max's order (a NaN already in acc stays, a NaN
// sample is passed over), as the reference does.
__attribute__((target_clones("avx512f", "avx2", "default"))) void RoiSample(
    float* acc, const float* p1, const float* p2, const float* p3, const float* p4, float w1, float w2,
    float w3, float w4, int64_t c, bool max_mode, bool first) {
  if (!max_mode) {
#pragma omp simd
    for (int64_t ch = 0; ch < c; ++ch) acc[ch] += w1 * p1[ch] + w2 * p2[ch] + w3 * p3[ch] + w4 * p4[ch];
    return;
  }
#pragma omp simd
  for (int64_t ch = 0; ch < c; ++ch) {
    const float v1 = w1 * p1[ch], v2 = w2 * p2[ch], v3 = w3 * p3[ch], v4 = w4 * p4[ch];
    const float a = v1 < v2 ? v2 : v1, b = v3 < v4 ? v4 : v3;
    const float v = a < b ? b : a;
    acc[ch] = first ? v : (acc[ch] < v ? v : acc[ch]);
  }
}

// RoiAlign on float32 X [N, C, H, W]: the rois' sampling grids, sample
// points and weights are the reference's (runner/reference/roi_align.h);
// X is copied channels-last, so a sample point's four corners are four runs
// of C floats and each bin is accumulated for every channel at once, in
// float. Rois are split over the threads. Other types, a feature map much
// larger than the sample points would read (the copy would cost more than
// it saves) and every error run on the reference kernel, which reports the
// errors.
class RoiAlignKernel : public CpuKernel {
 public:
  RoiAlignKernel(const ir::Node& node, const KernelInfo& info, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), options_(reference::ParseRoiAlign(node, info)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* rois, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* bi, ctx.Input(2));
    if (!options_.ok() || x->dtype() != pb::kFloat || rois->dtype() != pb::kFloat || x->rank() != 4 ||
        rois->rank() != 2 || rois->dim(1) != 4 || bi->rank() != 1 || bi->dim(0) != rois->dim(0)) {
      return Fallback(ctx);
    }
    const reference::RoiAlignOptions& o = *options_;
    absl::StatusOr<std::vector<int64_t>> batch = reference::ReadInt64s(*bi);
    if (!batch.ok()) return Fallback(ctx);
    const int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3), r = rois->dim(0);
    const int64_t bins = o.out_h * o.out_w;
    std::vector<reference::RoiGrid> grids(static_cast<size_t>(r));
    int64_t total_points = 0;
    for (int64_t ri = 0; ri < r; ++ri) {
      const float* roi = rois->data<float>() + ri * 4;
      const double coords[4] = {roi[0], roi[1], roi[2], roi[3]};
      absl::StatusOr<reference::RoiGrid> g =
          reference::MakeRoiGrid(o, ri, (*batch)[static_cast<size_t>(ri)], n, coords);
      if (!g.ok()) return Fallback(ctx);
      grids[static_cast<size_t>(ri)] = *g;
      total_points += g->points;  // each at most 2^22
    }
    std::optional<int64_t> count = CheckedElementCount(std::vector<int64_t>{r, c, o.out_h, o.out_w});
    if (!count || n * h * w > 4 * total_points + 4096) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y,
                             ctx.AllocateOutputUninitialized(0, pb::kFloat, {r, c, o.out_h, o.out_w}));
    if (*count == 0) return absl::OkStatus();
    // X channels-last: [N, H * W, C].
    const int64_t hw = h * w;
    planes_.resize(static_cast<size_t>(x->size()));
    const float* xs = x->data<float>();
    ParallelFor(n * hw, x->size() >= kParallelElements, [&](int64_t b) {
      const float* from = xs + (b / hw) * c * hw + b % hw;
      float* to = planes_.data() + b * c;
      for (int64_t ch = 0; ch < c; ++ch) to[ch] = from[ch * hw];
    });
    float* out = y->mutable_data<float>();
    const float* planes = planes_.data();
#pragma omp parallel if (r > 1 && static_cast <double>(c) * static_cast <double>(total_points) >= 65536)
    {
      std::vector<reference::RoiTap> taps;
      std::vector<float> acc(static_cast<size_t>(bins * c));
#pragma omp for schedule(dynamic, 1)
      for (int64_t ri = 0; ri < r; ++ri) {
        const reference::RoiGrid& g = grids[static_cast<size_t>(ri)];
        reference::RoiTaps(o, g, h, w, taps);
        const int64_t per_bin = g.grid_h * g.grid_w;
        const float* image = planes + g.batch * hw * c;
        const reference::RoiTap* t = taps.data();
        for (int64_t bin = 0; bin < bins; ++bin) {
          float* a = acc.data() + bin * c;
          // Samples outside the map are 0: an avg sum starts at +0 and adding
          // +0 changes nothing; in max mode they compare as 0.
          std::fill_n(a, c, 0.0f);
          for (int64_t k = 0; k < per_bin; ++k, ++t) {
            if (t->zero) {
              if (o.max_mode) {
                for (int64_t ch = 0; ch < c; ++ch) a[ch] = k == 0 || a[ch] < 0.f ? 0.f : a[ch];
              }
              continue;
            }
            RoiSample(a, image + t->o1 * c, image + t->o2 * c, image + t->o3 * c, image + t->o4 * c,
                      static_cast<float>(t->w1), static_cast<float>(t->w2), static_cast<float>(t->w3),
                      static_cast<float>(t->w4), c, o.max_mode, k == 0);
          }
        }
        const float samples = static_cast<float>(std::max<int64_t>(per_bin, 1));
        float* dst = out + ri * c * bins;
        for (int64_t ch = 0; ch < c; ++ch) {
          for (int64_t bin = 0; bin < bins; ++bin) {
            const float v = acc[static_cast<size_t>(bin * c + ch)];
            dst[ch * bins + bin] = o.max_mode ? v : v / samples;
          }
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<reference::RoiAlignOptions> options_;
  std::vector<float> planes_;  // X channels-last, grown to the largest seen
};

// InstanceNormalization and GroupNormalization on float32 X [N, C, ...]:
// per block (an (n, c) plane, or the C / G planes of a group) the mean and
// population variance in double (one pass in most blocks), then
// y = (x - mean) / sqrt(var + epsilon) * scale + bias, with scale and bias
// per channel (InstanceNormalization, GroupNormalization from opset 21) or
// per group (GroupNormalization 18 to 20); blocks in parallel.
class InstanceNormKernel : public CpuKernel {
 public:
  InstanceNormKernel(const ir::Node& node, const KernelInfo& info, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        groups_(node.op_type() == "GroupNormalization" ? reference::AttrInt(node, "num_groups", 0) : 0),
        per_channel_(node.op_type() != "GroupNormalization" || info.opset >= 21),
        epsilon_(reference::AttrFloat(node, "epsilon", 1e-5f)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* bias, ctx.Input(2));
    if (x->dtype() != pb::kFloat || scale->dtype() != pb::kFloat || bias->dtype() != pb::kFloat ||
        x->rank() < 3 || x->size() == 0) {
      return Fallback(ctx);
    }
    const int64_t channels = x->dim(1), groups = groups_ == 0 ? channels : groups_;
    if (channels == 0 || groups < 1 || channels % groups != 0) return Fallback(ctx);
    const int64_t params = per_channel_ ? channels : groups;
    if (scale->shape() != std::vector<int64_t>{params} || bias->shape() != std::vector<int64_t>{params}) {
      return Fallback(ctx);
    }
    // Blocks of `per` channels of `plane` elements each.
    const int64_t per = channels / groups, blocks = x->dim(0) * groups;
    const int64_t plane = x->size() / (x->dim(0) * channels), inner = per * plane;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, x->shape()));
    const float* in = x->data<float>();
    float* out = y->mutable_data<float>();
    const float* s = scale->data<float>();
    const float* b = bias->data<float>();
    const double epsilon = epsilon_;
    ParallelFor(blocks, blocks > 1 && x->size() >= kParallelElements, [&](int64_t p) {
      const float* xp = in + p * inner;
      float* yp = out + p * inner;
      // One pass: the sums of x - x0 and of its square, x0 the block's
      // first value (so the variance does not cancel where the mean is far
      // from 0). Where x0 lies over 32 standard deviations from the mean,
      // the difference of squares loses digits: a second pass then sums
      // the squares around the mean itself.
      const double x0 = xp[0], n = static_cast<double>(inner);
      double sum = 0, sq = 0;
#pragma omp simd reduction(+ : sum, sq)
      for (int64_t i = 0; i < inner; ++i) {
        const double d = xp[i] - x0;
        sum += d;
        sq += d * d;
      }
      const double shifted_mean = sum / n, mean = x0 + shifted_mean;
      double var = sq / n - shifted_mean * shifted_mean;
      if (!(shifted_mean * shifted_mean <= 1024 * var)) {
        sq = 0;
#pragma omp simd reduction(+ : sq)
        for (int64_t i = 0; i < inner; ++i) {
          const double d = xp[i] - mean;
          sq += d * d;
        }
        var = sq / n;
      }
      const double inv = 1.0 / std::sqrt(var + epsilon);
      const int64_t group = p % groups;
      for (int64_t c = 0; c < per; ++c) {
        const int64_t at = per_channel_ ? group * per + c : group;
        const double k = inv * s[at], bi = b[at];
        const float* xc = xp + c * plane;
        float* yc = yp + c * plane;
#pragma omp simd
        for (int64_t i = 0; i < plane; ++i) yc[i] = static_cast<float>((xc[i] - mean) * k + bi);
      }
    });
    return absl::OkStatus();
  }

 private:
  int64_t groups_;  // 0: one per channel (InstanceNormalization)
  bool per_channel_;
  double epsilon_;
};

// SwiGLU (opset 28) on float32 A and B of one shape with alpha 1: one
// SwishMulRow pass (the gate rounded to float, then the product, as the
// reference rounds them). Broadcasting, another alpha and other types run
// the reference kernel.
class SwiGluKernel : public CpuKernel {
 public:
  SwiGluKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), alpha_(reference::AttrFloat(node, "alpha", 1.f)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    if (alpha_ != 1.f || a->dtype() != pb::kFloat || b->dtype() != pb::kFloat || a->shape() != b->shape()) {
      return Fallback(ctx);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, a->shape()));
    const float* pa = a->data<float>();
    const float* pb_ = b->data<float>();
    float* py = y->mutable_data<float>();
    constexpr int64_t kBlock = 4096;
    const int64_t n = a->size(), blocks = (n + kBlock - 1) / kBlock;
    ParallelFor(blocks, n >= 65536, [&](int64_t i) {
      const int64_t begin = i * kBlock;
      SwishMulRow(pa + begin, pb_ + begin, py + begin, std::min(kBlock, n - begin));
    });
    return absl::OkStatus();
  }

 private:
  float alpha_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeSwiGlu(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<SwiGluKernel>(node, info);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeWhere(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<WhereKernel>(node, info);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeExpand(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<ExpandKernel>(node, info);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeCast(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<CastKernel>(node, info);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeUnaryRow(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<UnaryRowKernel>(node, info);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeScatterElements(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<ScatterElementsKernel>(node, info);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeRoiAlign(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<RoiAlignKernel>(node, info);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeInstanceNorm(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<InstanceNormKernel>(node, info);
}

}  // namespace onnxkit::runner::cpu
