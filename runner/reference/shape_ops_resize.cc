// Reference kernels: Resize (opsets 10..19: modes nearest/linear/cubic, every
// coordinate_transformation_mode, nearest_mode rounding, antialias,
// exclude_outside, extrapolation_value, axes, keep_aspect_ratio_policy) and
// Upsample (opsets 1..10, Resize's asymmetric form).
//
// Resizing is separable: every output coordinate of an axis reads a few
// input positions ("taps") with weights, found as in the ONNX reference
// (neighbors of the original coordinate, edge-clamped). An output element
// combines the taps of all axes. Nearest copies the one chosen element
// exactly (any element type); linear and cubic compute in double.
#include <cmath>

#include "absl/strings/str_join.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "lib/tensor/tensor_data.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/resize_geometry.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {
namespace resize {
namespace {

// Interpolation weights for the neighbors base + first, base + first + 1...
// of an original coordinate whose fraction past `base` is ratio in (0, 1].
std::vector<double> Coefficients(const Config& c, double ratio, double scale, int64_t* first) {
  *first = 0;
  if (c.mode == Mode::kNearest) {
    bool up = true;  // an integral coordinate (ratio 1) picks base + 1
    if (ratio != 1.0) {
      switch (c.rounding) {
        case Rounding::kRoundPreferFloor:
          up = ratio > 0.5;
          break;
        case Rounding::kRoundPreferCeil:
          up = ratio >= 0.5;
          break;
        case Rounding::kFloor:
          up = false;
          break;
        case Rounding::kCeil:
          up = true;
          break;
        case Rounding::kLegacy:
          up = scale < 1;
          break;
      }
    }
    return {up ? 0.0 : 1.0, up ? 1.0 : 0.0};
  }
  double a = c.cubic_a;
  if (!c.antialias) {
    if (c.mode == Mode::kLinear) return {1 - ratio, ratio};
    *first = -1;
    double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
    return {((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a, ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
            ((a + 2) * q - (a + 3)) * q * q + 1, ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a};
  }
  // Antialias widens the filter by 1 / scale when downsampling.
  scale = std::min(scale, 1.0);
  double support = c.mode == Mode::kLinear ? 1.0 : 2.0;
  int64_t start = static_cast<int64_t>(std::floor(-support / scale)) + 1;
  int64_t end = 2 - start;
  std::vector<double> w;
  double sum = 0;
  for (int64_t i = start; i < end; ++i) {
    double x = std::fabs(scale * (static_cast<double>(i) - ratio));
    double v;
    if (c.mode == Mode::kLinear) {
      v = std::clamp(1 - x, 0.0, 1.0);
    } else if (x <= 1) {
      v = (a + 2) * x * x * x - (a + 3) * x * x + 1;
    } else if (x < 2) {
      v = a * x * x * x - 5 * a * x * x + 8 * a * x - 4 * a;
    } else {
      v = 0;
    }
    w.push_back(v);
    sum += v;
  }
  for (double& v : w) v /= sum;
  *first = start;
  return w;
}

// The original coordinate of output coordinate x, by ONNX's formulas:
// length_resized is the output's length (an integer, as ONNX Runtime and
// PyTorch take it; onnx's Python reference takes scale * in, which differs
// when that is not whole: align_corners with scales 0.6 on 4 gives 2
// elements, whose last one reads input 3, not 2.14); only
// half_pixel_symmetric uses the fractional target length, by definition.
double Original(const Config& c, double x, int64_t in, int64_t out, double scale, double roi_start,
                double roi_end) {
  const double in_len = static_cast<double>(in), out_len = static_cast<double>(out);
  switch (c.coord) {
    case Coord::kHalfPixel:
      return (x + 0.5) / scale - 0.5;
    case Coord::kHalfPixelSymmetric: {
      double adjustment = out_len / (scale * in_len);
      double offset = in_len / 2 * (1 - adjustment);
      return offset + (x + 0.5) / scale - 0.5;
    }
    case Coord::kPytorchHalfPixel:
      return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case Coord::kAlignCorners:
      return out == 1 ? 0.0 : x * (in_len - 1) / (out_len - 1);
    case Coord::kAsymmetric:
      return x / scale;
    case Coord::kTfHalfPixelForNn:
      return (x + 0.5) / scale;
    case Coord::kTfCropAndResize: {
      double o = out == 1 ? (roi_end - roi_start) * (in_len - 1) / 2
                          : x * (roi_end - roi_start) * (in_len - 1) / (out_len - 1);
      return o + roi_start * (in_len - 1);
    }
  }
  return x;
}

}  // namespace

std::vector<Taps> AxisTaps(const Config& c, int64_t in, int64_t out, double scale, double roi_start,
                           double roi_end) {
  std::vector<Taps> taps(static_cast<size_t>(out));
  for (int64_t x = 0; x < out; ++x) {
    Taps& t = taps[static_cast<size_t>(x)];
    double orig = Original(c, static_cast<double>(x), in, out, scale, roi_start, roi_end);
    if (c.coord == Coord::kTfCropAndResize && (orig < 0 || orig > static_cast<double>(in - 1))) {
      t.outside = true;
      continue;
    }
    if (!std::isfinite(orig)) orig = 0;
    orig = std::clamp(orig, -1.0e15, 1.0e15);
    double fl = std::floor(orig);
    int64_t base = static_cast<int64_t>(fl);
    double ratio = orig - fl;
    if (ratio == 0) {  // an integral coordinate: neighbors below it, ratio 1
      base -= 1;
      ratio = 1;
    }
    int64_t first;
    std::vector<double> w = Coefficients(c, ratio, scale, &first);
    double sum = 0;
    for (size_t k = 0; k < w.size(); ++k) {
      int64_t raw = base + first + static_cast<int64_t>(k);
      if (c.exclude_outside && (raw < 0 || raw >= in)) w[k] = 0;
      sum += w[k];
    }
    for (size_t k = 0; k < w.size(); ++k) {
      if (w[k] == 0) continue;
      int64_t raw = base + first + static_cast<int64_t>(k);
      t.index.push_back(std::clamp<int64_t>(raw, 0, in - 1));
      t.weight.push_back(c.exclude_outside && sum != 0 ? w[k] / sum : w[k]);
    }
  }
  return taps;
}

FlatTaps FlattenTaps(const Config& c, const std::vector<int64_t>& x_shape, const Geometry& g) {
  const size_t rank = x_shape.size();
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * x_shape[d];
  FlatTaps f;
  f.first.resize(rank);
  f.count.resize(rank);
  f.offset.resize(rank);
  f.weight.resize(rank);
  const bool nearest = c.mode == Mode::kNearest;
  for (size_t d = 0; d < rank; ++d) {
    const std::vector<Taps> taps =
        AxisTaps(c, x_shape[d], g.out_shape[d], g.scales[d], g.roi_start[d], g.roi_end[d]);
    for (const Taps& t : taps) {
      // Nearest reads the first tap alone (RunNearest).
      const size_t n = t.outside || t.index.empty() ? 0 : nearest ? 1 : t.index.size();
      f.first[d].push_back(static_cast<int64_t>(f.offset[d].size()));
      f.count[d].push_back(static_cast<int64_t>(n));
      for (size_t k = 0; k < n; ++k) {
        f.offset[d].push_back(t.index[k] * stride[d]);
        f.weight[d].push_back(nearest ? 1.f : static_cast<float>(t.weight[k]));
      }
    }
  }
  return f;
}

namespace {

class ResizeKernel : public Kernel {
 public:
  explicit ResizeKernel(Config c) : c_(std::move(c)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    size_t rank = x->shape().size();
    ONNXKIT_ASSIGN_OR_RETURN(Geometry g, ResolveGeometry(ctx, c_, *x));
    const std::vector<int64_t>& out_shape = g.out_shape;
    for (size_t d = 0; d < rank; ++d) {
      if (x->shape()[d] == 0 && out_shape[d] > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot resize the empty axis ", d, " of ", DescribeTensor(*x)));
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
    if (y->size() == 0) return absl::OkStatus();
    std::vector<std::vector<Taps>> taps(rank);
    for (size_t d = 0; d < rank; ++d) {
      taps[d] = AxisTaps(c_, x->shape()[d], out_shape[d], g.scales[d], g.roi_start[d], g.roi_end[d]);
    }
    return c_.mode == Mode::kNearest ? RunNearest(*x, *y, taps) : RunWeighted(*x, *y, taps);
  }

 private:
  absl::Status RunNearest(const Tensor& x, Tensor& y, const std::vector<std::vector<Taps>>& taps) {
    std::vector<int64_t> strides = Strides(x.shape());
    const int bits = x.is_string() ? 0 : DataTypeBits(x.dtype());
    if (!taps.empty() && (bits == 8 || bits == 16 || bits == 32 || bits == 64)) {
      switch (bits) {
        case 8:
          return NearestRows<uint8_t>(x, y, taps, strides);
        case 16:
          return NearestRows<uint16_t>(x, y, taps, strides);
        case 32:
          return NearestRows<uint32_t>(x, y, taps, strides);
        default:
          return NearestRows<uint64_t>(x, y, taps, strides);
      }
    }
    ElementCopier copy(x, y);
    int64_t out = 0;
    absl::Status status;
    ForEachIndex(y.shape(), [&](const std::vector<int64_t>& c) {
      int64_t src = 0;
      bool outside = false;
      for (size_t d = 0; d < c.size(); ++d) {
        const Taps& t = taps[d][static_cast<size_t>(c[d])];
        outside = outside || t.outside || t.index.empty();
        if (!outside) src += t.index[0] * strides[d];
      }
      if (outside) {
        if (status.ok()) status = shape_ops::StoreDouble(y, out, c_.extrapolation);
      } else {
        copy.Copy(src, out);
      }
      ++out;
    });
    return status;
  }

  // Nearest for elements of sizeof(T) bytes, a row of the last axis at a
  // time: its source offsets are looked up in a table (-1: outside the
  // input, the extrapolation value).
  template <typename T>
  absl::Status NearestRows(const Tensor& x, Tensor& y, const std::vector<std::vector<Taps>>& taps,
                           const std::vector<int64_t>& strides) {
    const size_t last = taps.size() - 1;
    const int64_t n = y.shape()[last];
    std::vector<int64_t> table(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      const Taps& t = taps[last][static_cast<size_t>(j)];
      table[static_cast<size_t>(j)] = t.outside || t.index.empty() ? -1 : t.index[0] * strides[last];
    }
    const T* src = static_cast<const T*>(x.raw());
    T* dst = static_cast<T*>(y.mutable_raw());
    std::vector<int64_t> outer(y.shape().begin(), y.shape().end() - 1);
    int64_t out = 0;
    absl::Status status;
    ForEachIndex(outer, [&](const std::vector<int64_t>& c) {
      int64_t base = 0;
      bool outside = false;
      for (size_t d = 0; d < last; ++d) {
        const Taps& t = taps[d][static_cast<size_t>(c[d])];
        outside = outside || t.outside || t.index.empty();
        if (!outside) base += t.index[0] * strides[d];
      }
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = table[static_cast<size_t>(j)];
        if (outside || at < 0) {
          if (status.ok()) status = shape_ops::StoreDouble(y, out + j, c_.extrapolation);
        } else {
          dst[out + j] = src[base + at];
        }
      }
      out += n;
    });
    return status;
  }

  absl::Status RunWeighted(const Tensor& x, Tensor& y, const std::vector<std::vector<Taps>>& taps) {
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> data, shape_ops::ReadDoubles(x, "X"));
    std::vector<int64_t> strides = Strides(x.shape());
    size_t rank = strides.size();
    std::vector<const Taps*> at(rank);
    std::vector<size_t> k(rank);
    int64_t out = 0;
    absl::Status status;
    ForEachIndex(y.shape(), [&](const std::vector<int64_t>& c) {
      bool outside = false;
      for (size_t d = 0; d < rank; ++d) {
        at[d] = &taps[d][static_cast<size_t>(c[d])];
        outside = outside || at[d]->outside || at[d]->index.empty();
      }
      double sum = c_.extrapolation;
      if (!outside) {  // sum over the product of every axis's taps
        sum = 0;
        std::fill(k.begin(), k.end(), 0);
        while (true) {
          double w = 1;
          int64_t src = 0;
          for (size_t d = 0; d < rank; ++d) {
            w *= at[d]->weight[k[d]];
            src += at[d]->index[k[d]] * strides[d];
          }
          sum += w * data[static_cast<size_t>(src)];
          size_t d = rank;
          while (d > 0 && ++k[d - 1] == at[d - 1]->index.size()) k[--d] = 0;
          if (d == 0) break;
        }
      }
      if (status.ok()) status = shape_ops::StoreDouble(y, out, sum);
      ++out;
    });
    return status;
  }

  Config c_;
};

}  // namespace

absl::StatusOr<Geometry> ResolveGeometry(KernelContext& ctx, const Config& c, const Tensor& x) {
  const Tensor* scales = nullptr;
  const Tensor* sizes = nullptr;
  const Tensor* roi = nullptr;
  if (c.form != Form::kUpsample1 && c.form != Form::kUpsample7) {
    ONNXKIT_ASSIGN_OR_RETURN(scales, ctx.OptionalInput(c.form == Form::kScalesInput ? 1 : 2));
    if (c.form == Form::kResize) {
      ONNXKIT_ASSIGN_OR_RETURN(sizes, ctx.OptionalInput(3));
      if (c.coord == Coord::kTfCropAndResize) {
        ONNXKIT_ASSIGN_OR_RETURN(roi, ctx.OptionalInput(1));
      }
    }
  }
  return ResolveGeometry(c, x.shape(), scales, sizes, roi);
}

absl::StatusOr<Geometry> ResolveGeometry(const Config& c, const std::vector<int64_t>& x_shape, const Tensor* s,
                                         const Tensor* z, const Tensor* roi) {
  struct {
    const std::vector<int64_t>& shape() const { return dims; }
    const std::vector<int64_t>& dims;
  } x{x_shape};
  int64_t rank = static_cast<int64_t>(x_shape.size());
  size_t urank = static_cast<size_t>(rank);
  Geometry g;
  g.scales.assign(urank, 1.0);
  g.roi_start.assign(urank, 0.0);
  g.roi_end.assign(urank, 1.0);
  g.out_shape = x_shape;
  std::vector<double>& scales = g.scales;
  std::vector<int64_t>& out_shape = g.out_shape;
  std::vector<double>& roi_start = g.roi_start;
  std::vector<double>& roi_end = g.roi_end;
  std::vector<int64_t> axes;
  if (c.axes) {
    ONNXKIT_ASSIGN_OR_RETURN(axes, shape_ops::NormalizeAxes(*c.axes, rank));
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  std::vector<double> given_scales;
  std::optional<std::vector<int64_t>> sizes;
  if (c.form == Form::kUpsample1 || c.form == Form::kUpsample7) {
    given_scales.assign(c.attr_scales.begin(), c.attr_scales.end());
  } else {
    if (s != nullptr && s->size() > 0) {
      if (s->dtype() != 1)
        return absl::InvalidArgumentError(absl::StrCat("scales must be float, got ", DescribeTensor(*s)));
      for (int64_t i = 0; i < s->size(); ++i) given_scales.push_back(s->data<float>()[i]);
    }
    if (c.form == Form::kResize) {
      if (z != nullptr && z->size() > 0) {
        ONNXKIT_ASSIGN_OR_RETURN(sizes, shape_ops::ReadInts(*z, "sizes"));
      }
    }
  }
  if (sizes.has_value() == !given_scales.empty()) {
    return absl::InvalidArgumentError("exactly one of scales and sizes must be given");
  }
  size_t n = axes.size();
  if ((sizes && sizes->size() != n) || (!sizes && given_scales.size() != n)) {
    return absl::InvalidArgumentError(absl::StrCat("scales/sizes must have ", n, " values for input ",
                                                   "of shape ", tensor::DimsToString(x_shape), c.axes ? " and the axes given" : ""));
  }
  if (sizes) {
    for (size_t i = 0; i < n; ++i) {
      size_t a = static_cast<size_t>(axes[i]);
      if ((*sizes)[i] < 0)
        return absl::InvalidArgumentError(absl::StrCat("sizes has a negative value ", (*sizes)[i]));
      scales[a] = static_cast<double>((*sizes)[i]) / static_cast<double>(x.shape()[a]);
      out_shape[a] = (*sizes)[i];
    }
    if (c.policy != Policy::kStretch) {
      double s = scales[static_cast<size_t>(axes[0])];
      for (int64_t a : axes) {
        double v = scales[static_cast<size_t>(a)];
        s = c.policy == Policy::kNotLarger ? std::min(s, v) : std::max(s, v);
      }
      for (int64_t a : axes) {
        scales[static_cast<size_t>(a)] = s;
        out_shape[static_cast<size_t>(a)] =
            static_cast<int64_t>(s * static_cast<double>(x.shape()[static_cast<size_t>(a)]) + 0.5);
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      size_t a = static_cast<size_t>(axes[i]);
      double s = given_scales[i];
      double size = s * static_cast<double>(x.shape()[a]);
      if (!(s > 0) || !(size < 4.0e18)) {
        return absl::InvalidArgumentError(
            absl::StrCat("scale ", s, " of axis ", a, " is not a usable positive number"));
      }
      scales[a] = s;
      // floor(dim * scale) in float arithmetic, as ONNX's shape inference and
      // ONNX Runtime compute it (7 x 1.8571428f is 13 there, 12.9999996 in double).
      const float size_f = std::floor(static_cast<float>(x.shape()[a]) * static_cast<float>(s));
      out_shape[a] = size_f < 4.0e18f ? static_cast<int64_t>(size_f) : static_cast<int64_t>(size);
    }
  }
  if (c.coord == Coord::kTfCropAndResize) {
    if (roi == nullptr) return absl::InvalidArgumentError("tf_crop_and_resize needs the roi input");
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> r, shape_ops::ReadDoubles(*roi, "roi"));
    if (r.size() != 2 * n) {
      return absl::InvalidArgumentError(
          absl::StrCat("roi must have ", 2 * n, " values, got ", DescribeTensor(*roi)));
    }
    for (size_t i = 0; i < n; ++i) {
      roi_start[static_cast<size_t>(axes[i])] = r[i];
      roi_end[static_cast<size_t>(axes[i])] = r[n + i];
    }
  }
  return g;
}

namespace {

// Parses a string attribute into one of `names` (index), or an error.
absl::StatusOr<int> Choice(const ir::Node& node, std::string_view attr, std::string def,
                           const std::vector<std::string>& names) {
  std::string v = AttrString(node, attr, def);
  for (size_t i = 0; i < names.size(); ++i) {
    if (v == names[i]) return static_cast<int>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(Sv(attr), " '", v, "' is not one of ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<Mode> ParseMode(const ir::Node& node) {
  ONNXKIT_ASSIGN_OR_RETURN(int m,
                           Choice(node, "mode", "nearest", {"nearest", "linear", "cubic", "bilinear"}));
  return m == 3 ? Mode::kLinear : static_cast<Mode>(m);
}

}  // namespace

absl::StatusOr<Config> ParseResize(const ir::Node& node, int64_t opset) {
  Config c;
  ONNXKIT_ASSIGN_OR_RETURN(c.mode, ParseMode(node));
  if (opset < 11) {
    c.form = Form::kScalesInput;
    c.coord = Coord::kAsymmetric;
    c.rounding = Rounding::kLegacy;
    return c;
  }
  ONNXKIT_ASSIGN_OR_RETURN(
      int coord, Choice(node, "coordinate_transformation_mode", "half_pixel",
                        {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                         "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"}));
  c.coord = static_cast<Coord>(coord);
  ONNXKIT_ASSIGN_OR_RETURN(int rounding,
                           Choice(node, "nearest_mode", "round_prefer_floor",
                                  {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}));
  c.rounding = static_cast<Rounding>(rounding);
  ONNXKIT_ASSIGN_OR_RETURN(int policy, Choice(node, "keep_aspect_ratio_policy", "stretch",
                                              {"stretch", "not_larger", "not_smaller"}));
  c.policy = static_cast<Policy>(policy);
  c.cubic_a = AttrFloat(node, "cubic_coeff_a", -0.75f);
  c.extrapolation = AttrFloat(node, "extrapolation_value", 0.0f);
  c.exclude_outside = AttrInt(node, "exclude_outside", 0) != 0;
  c.antialias = AttrInt(node, "antialias", 0) != 0 && c.mode != Mode::kNearest;
  c.axes = node.GetInts("axes");
  return c;
}

absl::StatusOr<Config> ParseUpsample(const ir::Node& node, int64_t opset) {
  Config c;
  ONNXKIT_ASSIGN_OR_RETURN(c.mode, ParseMode(node));
  if (c.mode == Mode::kCubic) return absl::InvalidArgumentError("Upsample mode must be nearest or linear");
  c.coord = Coord::kAsymmetric;
  c.rounding = Rounding::kLegacy;
  if (opset < 7) {
    auto h = node.GetFloat("height_scale");
    auto w = node.GetFloat("width_scale");
    if (!h || !w) return absl::InvalidArgumentError("Upsample-1 needs height_scale and width_scale");
    c.form = Form::kUpsample1;
    c.attr_scales = {1.0f, 1.0f, *h, *w};
  } else if (opset < 9) {
    c.form = Form::kUpsample7;
    c.attr_scales = AttrFloats(node, "scales");
    if (c.attr_scales.empty()) return absl::InvalidArgumentError("Upsample-7 needs the scales attribute");
  } else {
    c.form = Form::kScalesInput;
  }
  return c;
}

}  // namespace resize

absl::StatusOr<std::unique_ptr<Kernel>> MakeResize(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(resize::Config c, resize::ParseResize(node, info.opset));
  return std::unique_ptr<Kernel>(new resize::ResizeKernel(std::move(c)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeUpsample(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(resize::Config c, resize::ParseUpsample(node, info.opset));
  return std::unique_ptr<Kernel>(new resize::ResizeKernel(std::move(c)));
}

}  // namespace onnxkit::runner::reference
