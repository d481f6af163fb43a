// Reference kernels: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.
//
// Granularity follows the scale's shape: a scalar (or one element) is
// per-tensor; a 1-D scale is per-axis along `axis` (opset 13+); a scale of
// x's rank with `block_size` > 0 (opset 21+) is blocked along `axis`. The
// zero point, when given, has the scale's shape and sets the quantized type.
//
//   QuantizeLinear:   y = saturate(round_half_even(x / scale) + zero_point)
//                     (float8/float4: convert(x / scale + zero_point))
//   DequantizeLinear: y = (x - zero_point) * scale
//
// x / scale is computed in the `precision` type (opset 23+) or else in the
// wider of x's and the scale's types, as the onnx reference implementation
// does; a NaN quotient quantizes to the zero point for integer types.
#include <cmath>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/quantization.h"

namespace onnxkit::runner::reference {
namespace {

// Facts about a quantized element type.
struct QType {
  bool is_int = false;
  int64_t lo = 0, hi = 0;               // integer range
  int bits = 0;                         // storage bits
  const MiniFloatFormat* fmt = nullptr;  // float8/float4
};

absl::StatusOr<QType> QuantType(int32_t dtype) {
  switch (dtype) {
    case 2: return QType{true, 0, 255, 8, nullptr};
    case 3: return QType{true, -128, 127, 8, nullptr};
    case 4: return QType{true, 0, 65535, 16, nullptr};
    case 5: return QType{true, -32768, 32767, 16, nullptr};
    case 21: return QType{true, 0, 15, 4, nullptr};
    case 22: return QType{true, -8, 7, 4, nullptr};
    case 25: return QType{true, 0, 3, 2, nullptr};
    case 26: return QType{true, -2, 1, 2, nullptr};
    case 17: return QType{false, 0, 0, 8, &kFloat8E4M3FN};
    case 18: return QType{false, 0, 0, 8, &kFloat8E4M3FNUZ};
    case 19: return QType{false, 0, 0, 8, &kFloat8E5M2};
    case 20: return QType{false, 0, 0, 8, &kFloat8E5M2FNUZ};
    case 23: return QType{false, 0, 0, 4, &kFloat4E2M1};
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("element type ", Sv(DataTypeName(dtype)), " is not a quantized type"));
  }
}

// Element i of a tensor of any numeric, quantized or float type, as a double.
double Load(const Tensor& t, int64_t i) { return ElementAsDouble(t, i).value_or(0); }

// Writes the quantized value of quotient `q` with zero point `zp`.
void StoreQuantized(Tensor& y, const QType& qt, int64_t i, double q, double zp, bool saturate) {
  if (!qt.is_int) {
    uint32_t bits = DoubleToMiniFloat(*qt.fmt, q + zp, saturate);
    if (qt.bits == 8) {
      y.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(bits);
    } else {
      SetPackedBits(y.mutable_raw(), 4, i, static_cast<uint8_t>(bits));
    }
    return;
  }
  double r = std::isnan(q) ? zp : std::nearbyint(q) + zp;
  int64_t v = r <= static_cast<double>(qt.lo) ? qt.lo : r >= static_cast<double>(qt.hi) ? qt.hi : static_cast<int64_t>(r);
  switch (y.dtype()) {
    case 2: y.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case 3: y.mutable_data<int8_t>()[i] = static_cast<int8_t>(v); break;
    case 4: y.mutable_data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
    case 5: y.mutable_data<int16_t>()[i] = static_cast<int16_t>(v); break;
    default: SetPackedBits(y.mutable_raw(), qt.bits, i, TruncateToBits(v, qt.bits)); break;
  }
}

absl::StatusOr<ScaleMap> MakeScaleMap(const KernelContext& ctx, const Tensor& x, const Tensor& scale,
                                      const Tensor* zp) {
  bool per_tensor = scale.size() == 1;
  if (zp != nullptr && (per_tensor ? zp->size() != 1 : zp->shape() != scale.shape())) {
    return absl::InvalidArgumentError(absl::StrCat("zero point ", DescribeTensor(*zp), " and scale ",
                                                   DescribeTensor(scale), " must have one shape"));
  }
  ScaleMap map;
  if (per_tensor) return map;
  if (ctx.opset() < 13) {
    return absl::InvalidArgumentError(absl::StrCat("scale must be a scalar before opset 13, got ", DescribeTensor(scale)));
  }
  ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(AttrInt(ctx.node(), "axis", 1), x.rank()));
  int64_t block = ctx.opset() >= 21 ? AttrInt(ctx.node(), "block_size", 0) : 0;
  map.dim = x.dim(static_cast<int>(axis));
  for (int d = static_cast<int>(axis) + 1; d < x.rank(); ++d) map.inner *= x.dim(d);
  if (block < 0) return absl::InvalidArgumentError(absl::StrCat("block_size must be >= 0, got ", block));
  if (block == 0) {
    if (scale.rank() != 1 || scale.size() != map.dim) {
      return absl::InvalidArgumentError(absl::StrCat("per-axis scale must be 1-D of size ", map.dim, " (axis ", axis,
                                                     " of ", DescribeTensor(x), "), got ", DescribeTensor(scale)));
    }
    map.mode = ScaleMap::kAxis;
    return map;
  }
  bool ok = scale.rank() == x.rank();
  for (int d = 0; ok && d < x.rank(); ++d) {
    ok = d == axis ? scale.dim(d) == (x.dim(d) + block - 1) / block : scale.dim(d) == x.dim(d);
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("blocked scale ", DescribeTensor(scale), " does not fit ",
                                                   DescribeTensor(x), " with block_size ", block, " on axis ", axis));
  }
  map.mode = ScaleMap::kBlocked;
  map.block = block;
  map.scale_dim = scale.dim(static_cast<int>(axis));
  return map;
}

bool IsFloatType(int32_t t) { return t == 1 || t == 10 || t == 11 || t == 16; }

// x / s rounded to floating-point type `p` (the operands first rounded to it).
double Divide(double x, double s, int32_t p) {
  switch (p) {
    case 1: return static_cast<double>(DoubleToFloat(x) / DoubleToFloat(s));
    case 10: {
      double a = static_cast<float>(Float16FromDouble(x)), b = static_cast<float>(Float16FromDouble(s));
      return static_cast<float>(Float16FromDouble(a / b));
    }
    case 16: {
      double a = static_cast<float>(BFloat16FromDouble(x)), b = static_cast<float>(BFloat16FromDouble(s));
      return static_cast<float>(BFloat16FromDouble(a / b));
    }
    default: return x / s;
  }
}

// numpy's result type of x / scale for the float/int32 types involved.
int32_t PromotedType(int32_t x, int32_t s) {
  if (x == 11 || s == 11 || x == 6) return 11;
  if (x == 1 || s == 1 || x != s) return 1;
  return s;
}

}  // namespace

absl::StatusOr<QuantizeSpec> QuantizeSpecOf(const KernelContext& ctx, const Tensor& x, const Tensor& scale,
                                            const Tensor* zp) {
  if ((!IsFloatType(x.dtype()) && x.dtype() != 6) || !IsFloatType(scale.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("x must be float or int32 and y_scale float, got ",
                                                   DescribeTensor(x), " and ", DescribeTensor(scale)));
  }
  int64_t out_attr = ctx.opset() >= 21 ? AttrInt(ctx.node(), "output_dtype", 0) : 0;
  QuantizeSpec spec;
  spec.out_type = zp != nullptr ? zp->dtype() : out_attr != 0 ? static_cast<int32_t>(out_attr) : 2;
  if (zp != nullptr && out_attr != 0 && out_attr != zp->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("output_dtype ", out_attr, " differs from the zero point's type ",
                                                   Sv(DataTypeName(zp->dtype()))));
  }
  ONNXKIT_RETURN_IF_ERROR(QuantType(spec.out_type).status());
  spec.precision = PromotedType(x.dtype(), scale.dtype());
  if (int64_t p = ctx.opset() >= 23 ? AttrInt(ctx.node(), "precision", 0) : 0; p != 0) {
    if (!IsFloatType(static_cast<int32_t>(p))) {
      return absl::InvalidArgumentError(absl::StrCat("precision ", p, " is not a floating-point type"));
    }
    spec.precision = static_cast<int32_t>(p);
  }
  spec.saturate = ctx.opset() >= 19 ? AttrInt(ctx.node(), "saturate", 1) != 0 : true;
  ONNXKIT_ASSIGN_OR_RETURN(spec.map, MakeScaleMap(ctx, x, scale, zp));
  return spec;
}

absl::StatusOr<DequantizeSpec> DequantizeSpecOf(const KernelContext& ctx, const Tensor& x,
                                                const Tensor& scale, const Tensor* zp) {
  if (x.dtype() != 6) ONNXKIT_RETURN_IF_ERROR(QuantType(x.dtype()).status());
  if (!IsFloatType(scale.dtype()) && scale.dtype() != 24) {
    return absl::InvalidArgumentError(
        absl::StrCat("x_scale must be a float type, got ", DescribeTensor(scale)));
  }
  if (zp != nullptr && zp->dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("x_zero_point ", DescribeTensor(*zp), " and x ",
                                                   DescribeTensor(x), " must have one element type"));
  }
  int64_t out_attr = ctx.opset() >= 23 ? AttrInt(ctx.node(), "output_dtype", 0) : 0;
  DequantizeSpec spec;
  spec.out_type = out_attr != 0 ? static_cast<int32_t>(out_attr) : scale.dtype() == 24 ? 1 : scale.dtype();
  if (!IsFloatType(spec.out_type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("output_dtype ", out_attr, " is not a floating-point type"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(spec.map, MakeScaleMap(ctx, x, scale, zp));
  return spec;
}

absl::Status QuantizeLinear(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* zp, ctx.OptionalInput(2));
  ONNXKIT_ASSIGN_OR_RETURN(QuantizeSpec spec, QuantizeSpecOf(ctx, *x, *scale, zp));
  ONNXKIT_ASSIGN_OR_RETURN(QType qt, QuantType(spec.out_type));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, spec.out_type, x->shape()));
  for (int64_t i = 0; i < x->size(); ++i) {
    int64_t s = spec.map.Index(i);
    double q = Divide(Load(*x, i), Load(*scale, s), spec.precision);
    StoreQuantized(*y, qt, i, q, zp != nullptr ? Load(*zp, s) : 0.0, spec.saturate);
  }
  return absl::OkStatus();
}

absl::Status DequantizeLinear(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* zp, ctx.OptionalInput(2));
  ONNXKIT_ASSIGN_OR_RETURN(DequantizeSpec spec, DequantizeSpecOf(ctx, *x, *scale, zp));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, spec.out_type, x->shape()));
  bool in_double = scale->dtype() == 11 || spec.out_type == 11;
  return VisitFloat(spec.out_type, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    T* py = y->mutable_data<T>();
    for (int64_t i = 0; i < x->size(); ++i) {
      int64_t s = spec.map.Index(i);
      double dx = Load(*x, i) - (zp != nullptr ? Load(*zp, s) : 0.0);
      double v = in_double ? dx * Load(*scale, s)
                           : static_cast<double>(DoubleToFloat(dx) * DoubleToFloat(Load(*scale, s)));
      py[i] = RoundFromDouble<T>(v);
    }
    return absl::OkStatus();
  });
}

absl::Status DynamicQuantizeLinear(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  if (x->dtype() != 1) return absl::InvalidArgumentError(absl::StrCat("x must be float, got ", DescribeTensor(*x)));
  const float* px = x->data<float>();
  float max_x = 0, min_x = 0;  // the range always includes 0
  for (int64_t i = 0; i < x->size(); ++i) {
    max_x = std::max(max_x, px[i]);
    min_x = std::min(min_x, px[i]);
  }
  float scale = max_x == min_x ? 1.0f : (max_x - min_x) / 255.0f;
  float zp_float = std::clamp(0.0f - min_x / scale, 0.0f, 255.0f);
  float zp = std::isnan(zp_float) ? 0.0f : std::nearbyint(zp_float);
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 2, x->shape()));
  QType qt{true, 0, 255, 8, nullptr};
  for (int64_t i = 0; i < x->size(); ++i) {
    StoreQuantized(*y, qt, i, static_cast<double>(px[i] / scale), zp, true);
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y_scale, ctx.AllocateOutput(1, 1, {}));
  y_scale->mutable_data<float>()[0] = scale;
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y_zp, ctx.AllocateOutput(2, 2, {}));
  y_zp->mutable_data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  return absl::OkStatus();
}

}  // namespace onnxkit::runner::reference
