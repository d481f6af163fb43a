// cpu QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear: vectorized loops over float32
// tensors and 8-bit (DequantizeLinear also int32) quantized ones, per
// tensor or per axis, with the reference's arithmetic (so both backends
// agree exactly):
//
//   QuantizeLinear:   y = saturate(round_half_even(x / scale) + zero_point),
//                     the quotient in float; NaN gives the zero point
//   DequantizeLinear: y = float(x - zero_point) * scale, in float
//
// Other types (16-bit, 4-bit, float8, float16 scales), blocked scales, the
// precision and output_dtype attributes run on the reference kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "lib/base/status_macros.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/cpu/parallel_for.h"
#include "runner/cpu/quantize_rows.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cpu {
namespace {

// Rounds to nearest even (the default rounding mode), adds `zp` and
// saturates to [lo, hi]; NaN gives zp.
// (Templates inlined into one multiversioned function per type: clang does
// not multiversion templates.)
template <typename Q>
__attribute__((always_inline)) inline void QuantizeRowT(const float* x, Q* y, int64_t n, float scale, float zp,
                                                        float lo, float hi) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float q = x[i] / scale;
    float r = __builtin_rintf(q) + zp;
    r = r < lo ? lo : r;
    r = r > hi ? hi : r;
    r = q != q ? zp : r;
    y[i] = static_cast<Q>(static_cast<int32_t>(r));
  }
}

template <typename Q>
__attribute__((always_inline)) inline void DequantizeRowT(const Q* x, float* y, int64_t n, float scale,
                                                          int32_t zp) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    // 8-bit differences are exact in int32; int32 ones need int64.
    if constexpr (sizeof(Q) == 1) {
      y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
    } else {
      y[i] = static_cast<float>(static_cast<int64_t>(x[i]) - zp) * scale;
    }
  }
}

#define ONNXKIT_ROW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
ONNXKIT_ROW_CLONES void QuantizeRow(const float* x, uint8_t* y, int64_t n, float scale, float zp, float lo, float hi) {
  QuantizeRowT(x, y, n, scale, zp, lo, hi);
}
ONNXKIT_ROW_CLONES void QuantizeRow(const float* x, int8_t* y, int64_t n, float scale, float zp, float lo, float hi) {
  QuantizeRowT(x, y, n, scale, zp, lo, hi);
}
ONNXKIT_ROW_CLONES void DequantizeRow(const uint8_t* x, float* y, int64_t n, float scale, int32_t zp) {
  DequantizeRowT(x, y, n, scale, zp);
}
ONNXKIT_ROW_CLONES void DequantizeRow(const int8_t* x, float* y, int64_t n, float scale, int32_t zp) {
  DequantizeRowT(x, y, n, scale, zp);
}
ONNXKIT_ROW_CLONES void DequantizeRow(const int32_t* x, float* y, int64_t n, float scale, int32_t zp) {
  DequantizeRowT(x, y, n, scale, zp);
}

// Extends [lo, hi] by x[0..n): m = x > m ? x : m and m = x < m ? x : m,
// the reference's std::max / std::min, so a NaN never enters (maxps and
// minps return their second operand when either is NaN).
ONNXKIT_ROW_CLONES void ExtendRange(const float* x, int64_t n, float& lo, float& hi) {
  constexpr int kLanes = 16;
  float l[kLanes], h[kLanes];
  for (int j = 0; j < kLanes; ++j) l[j] = lo, h[j] = hi;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) {
      float v = x[i + j];
      h[j] = v > h[j] ? v : h[j];
      l[j] = v < l[j] ? v : l[j];
    }
  }
  for (; i < n; ++i) {
    hi = x[i] > hi ? x[i] : hi;
    lo = x[i] < lo ? x[i] : lo;
  }
  for (int j = 0; j < kLanes; ++j) {
    hi = h[j] > hi ? h[j] : hi;
    lo = l[j] < lo ? l[j] : lo;
  }
}

// One pass of DequantizeRowT on both operands, the op, and QuantizeRowT.
template <typename Q, int kOp>
__attribute__((always_inline)) inline void BinaryRowT(const Q* a, const Q* b, Q* y, int64_t n, float sa, int32_t za,
                                                      float sb, int32_t zb, float sy, float zy, float lo, float hi) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float fa = static_cast<float>(static_cast<int32_t>(a[i]) - za) * sa;
    const float fb = static_cast<float>(static_cast<int32_t>(b[i]) - zb) * sb;
    const float v = kOp == 0 ? fa + fb : kOp == 1 ? fa - fb : kOp == 2 ? fa * fb : fa / fb;
    float q = v / sy;
    float r = __builtin_rintf(q) + zy;
    r = r < lo ? lo : r;
    r = r > hi ? hi : r;
    r = q != q ? zy : r;
    y[i] = static_cast<Q>(static_cast<int32_t>(r));
  }
}

template <typename Q, int kOp, bool kQFirst>
__attribute__((always_inline)) inline void MixedRowT(const Q* a, const float* b, Q* y, int64_t n, float sa, int32_t za,
                                                     float sy, float zy, float lo, float hi) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float fq = static_cast<float>(static_cast<int32_t>(a[i]) - za) * sa;
    const float x = kQFirst ? fq : b[i], w = kQFirst ? b[i] : fq;
    const float v = kOp == 0 ? x + w : kOp == 1 ? x - w : kOp == 2 ? x * w : x / w;
    float q = v / sy;
    float r = __builtin_rintf(q) + zy;
    r = r < lo ? lo : r;
    r = r > hi ? hi : r;
    r = q != q ? zy : r;
    y[i] = static_cast<Q>(static_cast<int32_t>(r));
  }
}

// All ops and operand orders in one multiversioned function per type.
#define ONNXKIT_MIXED_ROW(Q)                                                                                    \
  ONNXKIT_ROW_CLONES void MixedRow(int op, bool q_first, const Q* a, const float* b, Q* y, int64_t n, float sa, \
                                   int32_t za, float sy, float zy, float lo, float hi) {                          \
    switch (op * 2 + (q_first ? 1 : 0)) {                                                                      \
      case 0: MixedRowT<Q, 0, false>(a, b, y, n, sa, za, sy, zy, lo, hi); break;                               \
      case 1: MixedRowT<Q, 0, true>(a, b, y, n, sa, za, sy, zy, lo, hi); break;                                \
      case 2: MixedRowT<Q, 1, false>(a, b, y, n, sa, za, sy, zy, lo, hi); break;                               \
      case 3: MixedRowT<Q, 1, true>(a, b, y, n, sa, za, sy, zy, lo, hi); break;                                \
      case 4: MixedRowT<Q, 2, false>(a, b, y, n, sa, za, sy, zy, lo, hi); break;                               \
      case 5: MixedRowT<Q, 2, true>(a, b, y, n, sa, za, sy, zy, lo, hi); break;                                \
      case 6: MixedRowT<Q, 3, false>(a, b, y, n, sa, za, sy, zy, lo, hi); break;                               \
      default: MixedRowT<Q, 3, true>(a, b, y, n, sa, za, sy, zy, lo, hi); break;                               \
    }                                                                                                          \
  }
ONNXKIT_MIXED_ROW(uint8_t)
ONNXKIT_MIXED_ROW(int8_t)
#undef ONNXKIT_MIXED_ROW

#define ONNXKIT_BINARY_ROW(name, Q, op)                                                                          \
  ONNXKIT_ROW_CLONES void name(const Q* a, const Q* b, Q* y, int64_t n, float sa, int32_t za, float sb, int32_t zb, \
                               float sy, float zy, float lo, float hi) {                                           \
    BinaryRowT<Q, op>(a, b, y, n, sa, za, sb, zb, sy, zy, lo, hi);                                                  \
  }
ONNXKIT_BINARY_ROW(AddRow, uint8_t, 0)
ONNXKIT_BINARY_ROW(AddRow, int8_t, 0)
ONNXKIT_BINARY_ROW(SubRow, uint8_t, 1)
ONNXKIT_BINARY_ROW(SubRow, int8_t, 1)
ONNXKIT_BINARY_ROW(MulRow, uint8_t, 2)
ONNXKIT_BINARY_ROW(MulRow, int8_t, 2)
ONNXKIT_BINARY_ROW(DivRow, uint8_t, 3)
ONNXKIT_BINARY_ROW(DivRow, int8_t, 3)
#undef ONNXKIT_BINARY_ROW
#undef ONNXKIT_ROW_CLONES

template <typename Q>
void BinaryRowOf(int op, const Q* a, const Q* b, Q* y, int64_t n, float sa, int32_t za, float sb, int32_t zb,
                 float sy, float zy, float lo, float hi) {
  switch (op) {
    case 0: AddRow(a, b, y, n, sa, za, sb, zb, sy, zy, lo, hi); break;
    case 1: SubRow(a, b, y, n, sa, za, sb, zb, sy, zy, lo, hi); break;
    case 2: MulRow(a, b, y, n, sa, za, sb, zb, sy, zy, lo, hi); break;
    default: DivRow(a, b, y, n, sa, za, sb, zb, sy, zy, lo, hi); break;
  }
}

// The rows of x a per-tensor or per-axis scale applies to: x is
// [outer, dim, inner] around `axis`; per tensor, dim is 1 and inner all.
struct Rows {
  int64_t outer = 1, dim = 1, inner = 1;
};

// Rows for `scale` and zero point `zp` (both float / 8-bit types already
// checked); false when the reference must run (blocked or mismatched).
bool ResolveRows(KernelContext& ctx, const Tensor& x, const Tensor& scale, const Tensor* zp, Rows& rows) {
  if (zp != nullptr && zp->size() != scale.size()) return false;
  if (scale.size() == 1 && scale.rank() <= 1) {
    rows.inner = x.size();
    return true;
  }
  if (ctx.opset() < 13 || scale.rank() != 1 || x.rank() == 0) return false;
  if (ctx.opset() >= 21 && reference::AttrInt(ctx.node(), "block_size", 0) != 0) return false;
  int64_t axis = reference::AttrInt(ctx.node(), "axis", 1);
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis >= x.rank() || x.dim(static_cast<int>(axis)) != scale.size()) return false;
  rows.dim = scale.size();
  for (int d = 0; d < axis; ++d) rows.outer *= x.dim(d);
  for (int d = static_cast<int>(axis) + 1; d < x.rank(); ++d) rows.inner *= x.dim(d);
  return true;
}

int32_t ZeroPointAt(const Tensor* zp, int64_t i) {
  if (zp == nullptr) return 0;
  switch (zp->dtype()) {
    case pb::kInt8: return zp->data<int8_t>()[i];
    case pb::kUint8: return zp->data<uint8_t>()[i];
    default: return zp->data<int32_t>()[i];
  }
}

// Runs `row(offset, n, channel)` over the rows, in parallel for big tensors.
template <typename F>
void ForRows(const Rows& rows, F&& row) {
  const int64_t count = rows.outer * rows.dim;
  const bool parallel = rows.outer * rows.dim * rows.inner > (1 << 18);
  if (count == 1) {
    constexpr int64_t kChunk = 1 << 16;
    const int64_t chunks = (rows.inner + kChunk - 1) / kChunk;
    ParallelFor(chunks, parallel,
                [&](int64_t c) { row(c * kChunk, std::min(kChunk, rows.inner - c * kChunk), int64_t{0}); });
    return;
  }
  ParallelFor(count, parallel, [&](int64_t r) { row(r * rows.inner, rows.inner, r % rows.dim); });
}

class QuantizeLinearKernel : public CpuKernel {
 public:
  QuantizeLinearKernel(const ir::Node&, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* zp, ctx.OptionalInput(2));
    const int32_t out = zp != nullptr ? zp->dtype() : pb::kUint8;
    Rows rows;
    if (x->dtype() != pb::kFloat || scale->dtype() != pb::kFloat || (out != pb::kUint8 && out != pb::kInt8) ||
        (ctx.opset() >= 21 && reference::AttrInt(ctx.node(), "output_dtype", 0) != 0) ||
        (ctx.opset() >= 23 && reference::AttrInt(ctx.node(), "precision", 0) != 0) ||
        !ResolveRows(ctx, *x, *scale, zp, rows)) {
      return Fallback(ctx);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, out, x->shape()));
    const float* px = x->data<float>();
    const float* ps = scale->data<float>();
    const float lo = out == pb::kUint8 ? 0.f : -128.f, hi = out == pb::kUint8 ? 255.f : 127.f;
    ForRows(rows, [&](int64_t offset, int64_t n, int64_t c) {
      const float z = static_cast<float>(ZeroPointAt(zp, c));
      if (out == pb::kUint8) {
        QuantizeRow(px + offset, y->mutable_data<uint8_t>() + offset, n, ps[c], z, lo, hi);
      } else {
        QuantizeRow(px + offset, y->mutable_data<int8_t>() + offset, n, ps[c], z, lo, hi);
      }
    });
    return absl::OkStatus();
  }
};

class DequantizeLinearKernel : public CpuKernel {
 public:
  DequantizeLinearKernel(const ir::Node&, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* zp, ctx.OptionalInput(2));
    const int32_t t = x->dtype();
    Rows rows;
    if ((t != pb::kUint8 && t != pb::kInt8 && t != pb::kInt32) || scale->dtype() != pb::kFloat ||
        (zp != nullptr && zp->dtype() != t) ||
        (ctx.opset() >= 23 && reference::AttrInt(ctx.node(), "output_dtype", 0) != 0) ||
        !ResolveRows(ctx, *x, *scale, zp, rows)) {
      return Fallback(ctx);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, x->shape()));
    const float* ps = scale->data<float>();
    float* py = y->mutable_data<float>();
    ForRows(rows, [&](int64_t offset, int64_t n, int64_t c) {
      const int32_t z = ZeroPointAt(zp, c);
      switch (t) {
        case pb::kUint8: DequantizeRow(x->data<uint8_t>() + offset, py + offset, n, ps[c], z); break;
        case pb::kInt8: DequantizeRow(x->data<int8_t>() + offset, py + offset, n, ps[c], z); break;
        default: DequantizeRow(x->data<int32_t>() + offset, py + offset, n, ps[c], z); break;
      }
    });
    return absl::OkStatus();
  }
};

// DynamicQuantizeLinear of a float32 tensor: the range (always holding 0,
// NaN skipped) and the quantization in vectorized passes, the scale and
// zero point with the reference's scalar arithmetic, so both agree exactly.
class DynamicQuantizeLinearKernel : public CpuKernel {
 public:
  DynamicQuantizeLinearKernel(const ir::Node&, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (x->dtype() != pb::kFloat) return Fallback(ctx);
    const float* px = x->data<float>();
    const int64_t n = x->size();
    constexpr int64_t kChunk = 1 << 16;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    const bool parallel = n > (1 << 18);
    ranges_.assign(static_cast<size_t>(2 * chunks), 0.f);
    ParallelFor(chunks, parallel, [&](int64_t c) {
      float lo = 0, hi = 0;
      ExtendRange(px + c * kChunk, std::min(kChunk, n - c * kChunk), lo, hi);
      ranges_[static_cast<size_t>(2 * c)] = lo;
      ranges_[static_cast<size_t>(2 * c + 1)] = hi;
    });
    float min_x = 0, max_x = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      min_x = std::min(min_x, ranges_[static_cast<size_t>(2 * c)]);
      max_x = std::max(max_x, ranges_[static_cast<size_t>(2 * c + 1)]);
    }
    const float scale = max_x == min_x ? 1.0f : (max_x - min_x) / 255.0f;
    const float zp_float = std::clamp(0.0f - min_x / scale, 0.0f, 255.0f);
    const float zp = std::isnan(zp_float) ? 0.0f : std::nearbyint(zp_float);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kUint8, x->shape()));
    uint8_t* py = y->mutable_data<uint8_t>();
    ParallelFor(chunks, parallel, [&](int64_t c) {
      QuantizeRow(px + c * kChunk, py + c * kChunk, std::min(kChunk, n - c * kChunk), scale, zp, 0.f, 255.f);
    });
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y_scale, ctx.AllocateOutput(1, pb::kFloat, {}));
    y_scale->mutable_data<float>()[0] = scale;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y_zp, ctx.AllocateOutput(2, pb::kUint8, {}));
    y_zp->mutable_data<uint8_t>()[0] = static_cast<uint8_t>(zp);
    return absl::OkStatus();
  }

 private:
  std::vector<float> ranges_;
};

}  // namespace

void QuantizeFloatRow(const float* x, void* y, int32_t y_type, int64_t n, float scale, int32_t zp) {
  if (y_type == pb::kUint8) {
    QuantizeRow(x, static_cast<uint8_t*>(y), n, scale, static_cast<float>(zp), 0.f, 255.f);
  } else {
    QuantizeRow(x, static_cast<int8_t*>(y), n, scale, static_cast<float>(zp), -128.f, 127.f);
  }
}

void DequantizeByteRow(const void* x, int32_t x_type, float* y, int64_t n, float scale, int32_t zp) {
  if (x_type == pb::kUint8) {
    DequantizeRow(static_cast<const uint8_t*>(x), y, n, scale, zp);
  } else {
    DequantizeRow(static_cast<const int8_t*>(x), y, n, scale, zp);
  }
}

void BinaryByteRow(int op, const void* a, const void* b, void* y, int32_t type, int64_t n, float sa, int32_t za,
                   float sb, int32_t zb, float sy, int32_t zy) {
  if (type == pb::kUint8) {
    BinaryRowOf(op, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), static_cast<uint8_t*>(y), n, sa,
                za, sb, zb, sy, static_cast<float>(zy), 0.f, 255.f);
  } else {
    BinaryRowOf(op, static_cast<const int8_t*>(a), static_cast<const int8_t*>(b), static_cast<int8_t*>(y), n, sa, za,
                sb, zb, sy, static_cast<float>(zy), -128.f, 127.f);
  }
}

void BinaryByteFloatRow(int op, bool q_first, const void* q, const float* f, void* y, int32_t type, int64_t n,
                        float sq, int32_t zq, float sy, int32_t zy) {
  if (type == pb::kUint8) {
    MixedRow(op, q_first, static_cast<const uint8_t*>(q), f, static_cast<uint8_t*>(y), n, sq, zq, sy,
             static_cast<float>(zy), 0.f, 255.f);
  } else {
    MixedRow(op, q_first, static_cast<const int8_t*>(q), f, static_cast<int8_t*>(y), n, sq, zq, sy,
             static_cast<float>(zy), -128.f, 127.f);
  }
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeQuantizeLinear(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<QuantizeLinearKernel>(node, info);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeDequantizeLinear(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<DequantizeLinearKernel>(node, info);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeDynamicQuantizeLinear(const ir::Node& node,
                                                                  const KernelInfo& info) {
  return MakeCpu<DynamicQuantizeLinearKernel>(node, info);
}

}  // namespace onnxkit::runner::cpu
