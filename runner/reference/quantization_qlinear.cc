// Reference kernels: QLinearMatMul and QLinearConv on uint8/int8 tensors.
//
// Both accumulate (a - a_zero_point) * (b - b_zero_point) exactly in
// integers, then requantize:
//   y = saturate(round_half_even(acc * (a_scale * b_scale / y_scale)) + y_zero_point)
// with the scale product and quotient rounded to the scales' type (float,
// or float16/bfloat16 from opset 21) and the final multiply in double, as
// the onnx reference implementation computes it.
// QLinearMatMul: numpy matmul shapes (batch broadcasting, 1-D operands);
// a_scale/a_zero_point per tensor or per row of a, b_scale/b_zero_point per
// tensor or per column of b. QLinearConv: Conv's attributes; w_scale and
// w_zero_point per tensor or per output channel; optional int32 bias.
#include <cmath>

#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/quantization.h"

namespace onnxkit::runner::reference {
namespace {

bool IsInt8(const Tensor& t) { return t.dtype() == 2 || t.dtype() == 3; }

int64_t LoadInt8(const Tensor& t, int64_t i) {
  return t.dtype() == 2 ? static_cast<int64_t>(t.data<uint8_t>()[i]) : static_cast<int64_t>(t.data<int8_t>()[i]);
}

double LoadScale(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case 10: return static_cast<float>(t.data<Float16>()[i]);
    case 16: return static_cast<float>(t.data<BFloat16>()[i]);
    case 11: return t.data<double>()[i];
    default: return t.data<float>()[i];
  }
}

// A value rounded to the scales' floating-point type.
double RoundTo(int32_t dtype, double v) {
  switch (dtype) {
    case 10: return static_cast<float>(Float16FromDouble(v));
    case 16: return static_cast<float>(BFloat16FromDouble(v));
    case 11: return v;
    default: return static_cast<double>(DoubleToFloat(v));
  }
}

// A quantization parameter pair (scale, zero point) applying per tensor or
// per index along one dimension of size `n`.
struct QParam {
  const Tensor* scale = nullptr;
  const Tensor* zp = nullptr;
  bool per_index = false;
  double Scale(int64_t i) const { return LoadScale(*scale, per_index ? i : 0); }
  int64_t Zp(int64_t i) const { return zp == nullptr ? 0 : LoadInt8(*zp, per_index && zp->size() > 1 ? i : 0); }
};

absl::StatusOr<QParam> ReadQParam(KernelContext& ctx, int scale_input, const Tensor& data, int64_t n,
                                  std::string_view what, std::string_view along) {
  QParam p;
  ONNXKIT_ASSIGN_OR_RETURN(p.scale, ctx.Input(scale_input));
  ONNXKIT_ASSIGN_OR_RETURN(p.zp, ctx.OptionalInput(scale_input + 1));
  bool float_scale = p.scale->dtype() == 1 || p.scale->dtype() == 10 || p.scale->dtype() == 16 ||
                     p.scale->dtype() == 11;
  if (!float_scale || p.scale->rank() > 1 || (p.scale->size() != 1 && (n < 0 || p.scale->size() != n))) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(what), "_scale must be a float scalar",
                                                   n < 0 ? "" : absl::StrCat(" or 1-D of the ", n, " ", Sv(along)),
                                                   ", got ", DescribeTensor(*p.scale)));
  }
  if (p.zp != nullptr && (p.zp->dtype() != data.dtype() || p.zp->rank() > 1 ||
                          (p.zp->size() != 1 && p.zp->size() != p.scale->size()))) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(what), "_zero_point ", DescribeTensor(*p.zp), " must be ",
                                                   Sv(DataTypeName(data.dtype())), " shaped like ", Sv(what), "_scale ",
                                                   DescribeTensor(*p.scale)));
  }
  p.per_index = p.scale->size() != 1;
  return p;
}

// Writes round(acc * multiplier) + zero point, saturated to y's type.
void StoreRequantized(Tensor& y, int64_t i, int64_t acc, double multiplier, int64_t zp) {
  double r = std::nearbyint(static_cast<double>(acc) * multiplier + static_cast<double>(zp));
  double lo = y.dtype() == 2 ? 0 : -128, hi = y.dtype() == 2 ? 255 : 127;
  if (std::isnan(r)) r = static_cast<double>(zp);
  r = std::clamp(r, lo, hi);
  if (y.dtype() == 2) {
    y.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(r);
  } else {
    y.mutable_data<int8_t>()[i] = static_cast<int8_t>(r);
  }
}

// multiplier = a_scale * b_scale / y_scale in the scales' type.
double Multiplier(const QParam& a, int64_t ai, const QParam& b, int64_t bi, const QParam& y) {
  int32_t t = a.scale->dtype() == b.scale->dtype() && b.scale->dtype() == y.scale->dtype() ? a.scale->dtype() : 1;
  return RoundTo(t, RoundTo(t, a.Scale(ai) * b.Scale(bi)) / y.Scale(0));
}

}  // namespace

absl::Status QLinearMatMul(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(3));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* y_zp_t, ctx.OptionalInput(7));
  if (!IsInt8(*a) || !IsInt8(*b) || a->rank() == 0 || b->rank() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("a and b must be uint8/int8 tensors of rank >= 1, got ",
                                                   DescribeTensor(*a), " and ", DescribeTensor(*b)));
  }
  // numpy matmul: 1-D operands gain a dim that the result drops.
  std::vector<int64_t> as = a->shape(), bs = b->shape();
  if (a->rank() == 1) as.insert(as.begin(), 1);
  if (b->rank() == 1) bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k) {
    return absl::InvalidArgumentError(absl::StrCat("cannot multiply ", DescribeTensor(*a), " by ", DescribeTensor(*b)));
  }
  ONNXKIT_ASSIGN_OR_RETURN(QParam qa, ReadQParam(ctx, 1, *a, m, "a", "rows of a"));
  ONNXKIT_ASSIGN_OR_RETURN(QParam qb, ReadQParam(ctx, 4, *b, n, "b", "columns of b"));
  const Tensor& y_like = y_zp_t != nullptr ? *y_zp_t : *a;
  ONNXKIT_ASSIGN_OR_RETURN(QParam qy, ReadQParam(ctx, 6, y_like, -1, "y", ""));
  std::vector<int64_t> a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  std::vector<int64_t> batch_shapes[] = {a_batch, b_batch};
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> batch, BroadcastShapes(batch_shapes));
  std::vector<int64_t> out_shape = batch;
  if (a->rank() > 1) out_shape.push_back(m);
  if (b->rank() > 1) out_shape.push_back(n);
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, y_like.dtype(), out_shape));
  std::vector<int64_t> ia = BroadcastIndices(a_batch, batch), ib = BroadcastIndices(b_batch, batch);
  for (size_t bt = 0; bt < ia.size(); ++bt) {
    const int64_t a_off = ia[bt] * m * k, b_off = ib[bt] * k * n, y_off = static_cast<int64_t>(bt) * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int64_t acc = 0;
        for (int64_t t = 0; t < k; ++t) {
          acc += (LoadInt8(*a, a_off + i * k + t) - qa.Zp(i)) * (LoadInt8(*b, b_off + t * n + j) - qb.Zp(j));
        }
        StoreRequantized(*y, y_off + i * n + j, acc, Multiplier(qa, i, qb, j, qy), qy.Zp(0));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// Conv geometry of one spatial dim.
struct ConvDim {
  int64_t in, kernel, stride, dilation, pad_begin, out;
};

absl::StatusOr<std::vector<ConvDim>> ConvGeometry(const ir::Node& node, const Tensor& x, const Tensor& w) {
  size_t nd = static_cast<size_t>(x.rank() - 2);
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  std::vector<int64_t> strides = AttrInts(node, "strides", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> dilations = AttrInts(node, "dilations", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> pads = AttrInts(node, "pads", std::vector<int64_t>(2 * nd, 0));
  std::vector<int64_t> ks = AttrInts(node, "kernel_shape", kernel);
  std::string auto_pad = AttrString(node, "auto_pad", "NOTSET");
  if (strides.size() != nd || dilations.size() != nd || pads.size() != 2 * nd || ks != kernel) {
    return absl::InvalidArgumentError(absl::StrCat("strides, dilations, pads or kernel_shape do not fit ", nd,
                                                   " spatial dims of kernel ", DescribeTensor(w)));
  }
  std::vector<ConvDim> dims;
  for (size_t d = 0; d < nd; ++d) {
    ConvDim c{x.dim(static_cast<int>(d + 2)), kernel[d], strides[d], dilations[d], pads[d], 0};
    if (c.stride < 1 || c.dilation < 1 || c.kernel < 1 || pads[d] < 0 || pads[d + nd] < 0 || c.kernel > (1 << 24) ||
        c.dilation > (1 << 24) || pads[d] > (int64_t{1} << 40) || pads[d + nd] > (int64_t{1} << 40)) {
      return absl::InvalidArgumentError(absl::StrCat("invalid conv geometry on spatial dim ", d, ": kernel ", c.kernel,
                                                     ", stride ", c.stride, ", dilation ", c.dilation, ", pads ",
                                                     pads[d], "/", pads[d + nd]));
    }
    int64_t span = (c.kernel - 1) * c.dilation + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      c.out = (c.in + c.stride - 1) / c.stride;
      int64_t total = std::max<int64_t>(0, (c.out - 1) * c.stride + span - c.in);
      c.pad_begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (auto_pad == "VALID") {
      c.pad_begin = 0;
      c.out = c.in >= span ? (c.in - span) / c.stride + 1 : 0;
    } else if (auto_pad == "NOTSET") {
      int64_t padded = c.in + pads[d] + pads[d + nd];
      c.out = padded >= span ? (padded - span) / c.stride + 1 : 0;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("auto_pad '", auto_pad, "' is not supported"));
    }
    dims.push_back(c);
  }
  return dims;
}

}  // namespace

absl::Status QLinearConv(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* w, ctx.Input(3));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* y_zp_t, ctx.OptionalInput(7));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* bias, ctx.OptionalInput(8));
  int64_t group = AttrInt(ctx.node(), "group", 1);
  if (!IsInt8(*x) || !IsInt8(*w) || x->rank() < 3 || w->rank() != x->rank() || group < 1 ||
      x->dim(1) % group != 0 || w->dim(0) % group != 0 || w->dim(1) != x->dim(1) / group) {
    return absl::InvalidArgumentError(absl::StrCat("x ", DescribeTensor(*x), " and w ", DescribeTensor(*w),
                                                   " must be uint8/int8 [N, C, ...] and [M, C/group, ...] with group ",
                                                   group));
  }
  const int64_t batch = x->dim(0), channels = x->dim(1), out_channels = w->dim(0);
  if (bias != nullptr && (bias->dtype() != 6 || bias->size() != out_channels)) {
    return absl::InvalidArgumentError(absl::StrCat("B must be int32[", out_channels, "], got ", DescribeTensor(*bias)));
  }
  ONNXKIT_ASSIGN_OR_RETURN(QParam qx, ReadQParam(ctx, 1, *x, -1, "x", ""));
  ONNXKIT_ASSIGN_OR_RETURN(QParam qw, ReadQParam(ctx, 4, *w, out_channels, "w", "output channels"));
  const Tensor& y_like = y_zp_t != nullptr ? *y_zp_t : *x;
  ONNXKIT_ASSIGN_OR_RETURN(QParam qy, ReadQParam(ctx, 6, y_like, -1, "y", ""));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<ConvDim> dims, ConvGeometry(ctx.node(), *x, *w));
  std::vector<int64_t> out_shape = {batch, out_channels}, out_spatial, kernel;
  for (const ConvDim& d : dims) {
    out_shape.push_back(d.out);
    out_spatial.push_back(d.out);
    kernel.push_back(d.kernel);
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, y_like.dtype(), out_shape));
  const int64_t cg = channels / group, mg = out_channels / group;
  std::vector<int64_t> x_strides = Strides(x->shape()), w_strides = Strides(w->shape());
  int64_t yi = 0;
  for (int64_t nb = 0; nb < batch; ++nb) {
    for (int64_t oc = 0; oc < out_channels; ++oc) {
      const int64_t g = oc / mg;
      const double multiplier = Multiplier(qx, 0, qw, oc, qy);
      ForEachIndex(out_spatial, [&](const std::vector<int64_t>& o) {
        int64_t acc = bias != nullptr ? bias->data<int32_t>()[oc] : 0;
        ForEachIndex(kernel, [&](const std::vector<int64_t>& kk) {
          int64_t x_off = nb * x_strides[0], w_off = oc * w_strides[0];
          for (size_t d = 0; d < dims.size(); ++d) {
            int64_t pos = o[d] * dims[d].stride - dims[d].pad_begin + kk[d] * dims[d].dilation;
            if (pos < 0 || pos >= dims[d].in) return;
            x_off += pos * x_strides[d + 2];
            w_off += kk[d] * w_strides[d + 2];
          }
          for (int64_t c = 0; c < cg; ++c) {
            acc += (LoadInt8(*x, x_off + (g * cg + c) * x_strides[1]) - qx.Zp(0)) *
                   (LoadInt8(*w, w_off + c * w_strides[1]) - qw.Zp(oc));
          }
        });
        StoreRequantized(*y, yi++, acc, multiplier, qy.Zp(0));
      });
    }
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::runner::reference
