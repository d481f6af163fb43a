// Reference kernels: Conv, ConvInteger and ConvTranspose (1-D to N-D,
// groups, dilations, auto_pad), as im2col / col2im around the shared matrix
// product, plus the sliding-window geometry every window op uses.
#include <algorithm>
#include <type_traits>

#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::reference {

std::string ShapeString(std::span<const int64_t> dims) { return absl::StrCat("[", absl::StrJoin(dims, ", "), "]"); }

absl::StatusOr<WindowAttrs> ParseWindowAttrs(const ir::Node& node) {
  WindowAttrs a;
  a.auto_pad = AttrString(node, "auto_pad", "NOTSET");
  if (a.auto_pad.empty()) a.auto_pad = "NOTSET";
  if (a.auto_pad != "NOTSET" && a.auto_pad != "SAME_UPPER" && a.auto_pad != "SAME_LOWER" && a.auto_pad != "VALID") {
    return absl::InvalidArgumentError(absl::StrCat("auto_pad '", a.auto_pad,
                                                   "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"));
  }
  a.kernel_shape = AttrInts(node, "kernel_shape");
  a.strides = AttrInts(node, "strides");
  a.dilations = AttrInts(node, "dilations");
  a.pads = AttrInts(node, "pads");
  a.ceil_mode = AttrInt(node, "ceil_mode", 0) != 0;
  for (auto [name, values] : {std::pair<const char*, const std::vector<int64_t>*>{"kernel_shape", &a.kernel_shape},
                              {"strides", &a.strides},
                              {"dilations", &a.dilations}}) {
    for (int64_t v : *values) {
      if (v < 1) return absl::InvalidArgumentError(absl::StrCat(name, " ", ShapeString(*values), " must be positive"));
    }
  }
  for (int64_t v : a.pads) {
    if (v < 0) return absl::InvalidArgumentError(absl::StrCat("pads ", ShapeString(a.pads), " must be non-negative"));
  }
  return a;
}

namespace {

absl::Status CheckLength(std::string_view name, const std::vector<int64_t>& v, size_t want) {
  if (!v.empty() && v.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(name), " ", ShapeString(v), " has ", v.size(), " values, expected ", want));
  }
  return absl::OkStatus();
}

int64_t CeilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

absl::StatusOr<Window> ResolveWindow(const WindowAttrs& attrs, std::span<const int64_t> in,
                                     std::span<const int64_t> kernel) {
  size_t r = in.size();
  if (kernel.size() != r) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel ", ShapeString(kernel), " does not match ", r, " spatial dims"));
  }
  ONNXKIT_RETURN_IF_ERROR(CheckLength("strides", attrs.strides, r));
  ONNXKIT_RETURN_IF_ERROR(CheckLength("dilations", attrs.dilations, r));
  ONNXKIT_RETURN_IF_ERROR(CheckLength("pads", attrs.pads, 2 * r));
  Window w;
  w.in.assign(in.begin(), in.end());
  w.kernel.assign(kernel.begin(), kernel.end());
  w.strides = attrs.strides.empty() ? std::vector<int64_t>(r, 1) : attrs.strides;
  w.dilations = attrs.dilations.empty() ? std::vector<int64_t>(r, 1) : attrs.dilations;
  w.pad_begin.assign(r, 0);
  w.pad_end.assign(r, 0);
  w.out.assign(r, 0);
  for (size_t d = 0; d < r; ++d) {
    if (kernel[d] < 1) return absl::InvalidArgumentError(absl::StrCat("kernel ", ShapeString(kernel), " must be positive"));
    auto span = CheckedMul(kernel[d] - 1, w.dilations[d]);
    auto eff = span ? CheckedAdd(*span, 1) : std::nullopt;
    if (!eff) return absl::InvalidArgumentError("kernel extent overflows");
    int64_t s = w.strides[d];
    if (attrs.auto_pad == "SAME_UPPER" || attrs.auto_pad == "SAME_LOWER") {
      w.out[d] = CeilDiv(in[d], s);
      auto need = CheckedAdd((w.out[d] - 1) * s, *eff);
      if (!need) return absl::InvalidArgumentError("padding overflows");
      int64_t total = std::max<int64_t>(0, *need - in[d]);
      w.pad_begin[d] = attrs.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[d] = total - w.pad_begin[d];
      continue;
    }
    if (attrs.auto_pad == "NOTSET" && !attrs.pads.empty()) {
      w.pad_begin[d] = attrs.pads[d];
      w.pad_end[d] = attrs.pads[d + r];
    }
    auto padded = CheckedAdd(in[d], w.pad_begin[d]);
    if (padded) padded = CheckedAdd(*padded, w.pad_end[d]);
    if (!padded) return absl::InvalidArgumentError("padded input size overflows");
    if (*padded < *eff) {
      return absl::InvalidArgumentError(absl::StrCat("window of extent ", *eff, " (kernel ", kernel[d], ", dilation ",
                                                     w.dilations[d], ") does not fit padded input dim ", *padded));
    }
    int64_t span_out = *padded - *eff;
    if (attrs.ceil_mode && attrs.auto_pad == "NOTSET") {
      w.out[d] = CeilDiv(span_out, s) + 1;
      // The last window must start inside the input or its begin padding.
      if ((w.out[d] - 1) * s >= in[d] + w.pad_begin[d]) --w.out[d];
    } else {
      w.out[d] = FloorDiv(span_out, s) + 1;
    }
  }
  auto in_size = CheckedElementCount(w.in);
  auto k_size = CheckedElementCount(w.kernel);
  auto out_size = CheckedElementCount(w.out);
  if (!in_size || !k_size || !out_size) return absl::InvalidArgumentError("window sizes overflow");
  w.in_size = *in_size;
  w.kernel_size = *k_size;
  w.out_size = *out_size;
  return w;
}

absl::StatusOr<Tensor> WindowTaps(const Window& w) {
  auto count = CheckedMul(w.kernel_size, w.out_size);
  if (!count) return absl::InvalidArgumentError("window tap table size overflows");
  ONNXKIT_ASSIGN_OR_RETURN(Tensor table, Scratch<int64_t>(*count));
  int64_t* p = table.mutable_data<int64_t>();
  size_t r = w.in.size();
  std::vector<int64_t> kpos(r, 0), opos(r, 0), off(r, 0);
  for (int64_t t = 0; t < w.kernel_size; ++t) {
    for (size_t d = 0; d < r; ++d) off[d] = kpos[d] * w.dilations[d] - w.pad_begin[d];
    std::fill(opos.begin(), opos.end(), 0);
    for (int64_t o = 0; o < w.out_size; ++o) {
      int64_t idx = 0;
      for (size_t d = 0; d < r && idx >= 0; ++d) {
        int64_t ix = opos[d] * w.strides[d] + off[d];
        idx = (ix < 0 || ix >= w.in[d]) ? -1 : idx * w.in[d] + ix;
      }
      *p++ = idx;
      for (size_t d = r; d-- > 0;) {
        if (++opos[d] < w.out[d]) break;
        opos[d] = 0;
      }
    }
    for (size_t d = r; d-- > 0;) {
      if (++kpos[d] < w.kernel[d]) break;
      kpos[d] = 0;
    }
  }
  return table;
}

namespace {

// Shapes of a convolution: x [N, C, in...], w [M, C/group, k...].
struct ConvShapes {
  int64_t n = 0, c = 0, m = 0, group = 1;
  Window window;
  std::vector<int64_t> out_shape;  // [N, M, out...]
};

absl::StatusOr<ConvShapes> ResolveConv(const WindowAttrs& attrs, int64_t group, const Tensor& x, const Tensor& w,
                                       const Tensor* bias) {
  if (x.rank() < 3 || w.rank() != x.rank()) {
    return absl::InvalidArgumentError(absl::StrCat("X ", DescribeTensor(x), " and W ", DescribeTensor(w),
                                                   " must have one rank of at least 3"));
  }
  ConvShapes s;
  s.n = x.dim(0);
  s.c = x.dim(1);
  s.m = w.dim(0);
  s.group = group;
  if (group < 1 || s.c != w.dim(1) * group || s.m % group != 0) {
    return absl::InvalidArgumentError(absl::StrCat("X ", DescribeTensor(x), " and W ", DescribeTensor(w),
                                                   " do not fit group ", group,
                                                   " (need C = W[1] * group and W[0] divisible by group)"));
  }
  std::span<const int64_t> kernel(w.shape().data() + 2, w.shape().size() - 2);
  if (!attrs.kernel_shape.empty() && !std::equal(kernel.begin(), kernel.end(), attrs.kernel_shape.begin(),
                                                 attrs.kernel_shape.end())) {
    return absl::InvalidArgumentError(absl::StrCat("kernel_shape ", ShapeString(attrs.kernel_shape),
                                                   " does not match W ", DescribeTensor(w)));
  }
  if (bias != nullptr && (bias->rank() != 1 || bias->dim(0) != s.m)) {
    return absl::InvalidArgumentError(absl::StrCat("B ", DescribeTensor(*bias), " must be [", s.m, "]"));
  }
  std::span<const int64_t> in(x.shape().data() + 2, x.shape().size() - 2);
  ONNXKIT_ASSIGN_OR_RETURN(s.window, ResolveWindow(attrs, in, kernel));
  s.out_shape = {s.n, s.m};
  s.out_shape.insert(s.out_shape.end(), s.window.out.begin(), s.window.out.end());
  if (!CheckedElementCount(s.out_shape)) return absl::InvalidArgumentError("output size overflows");
  return s;
}

// y[N, M, out] = conv(x[N, C, in], w[M, C/g, k]) + bias, all in type C.
template <typename C>
absl::Status ConvCore(const ConvShapes& s, const C* x, const C* w, const C* bias, C* y) {
  const Window& win = s.window;
  int64_t cg = s.c / s.group, mg = s.m / s.group;
  int64_t k = cg * win.kernel_size;
  bool pointwise = win.kernel_size == 1 && std::all_of(win.strides.begin(), win.strides.end(), [](int64_t v) { return v == 1; }) &&
                   std::all_of(win.pad_begin.begin(), win.pad_begin.end(), [](int64_t v) { return v == 0; }) &&
                   win.in == win.out;
  Tensor taps_t, col_t;
  if (!pointwise) {
    ONNXKIT_ASSIGN_OR_RETURN(taps_t, WindowTaps(win));
    auto col_size = CheckedMul(k, win.out_size);
    if (!col_size) return absl::InvalidArgumentError("im2col buffer size overflows");
    ONNXKIT_ASSIGN_OR_RETURN(col_t, Scratch<C>(*col_size));
  }
  const int64_t* taps = pointwise ? nullptr : taps_t.data<int64_t>();
  C* col = pointwise ? nullptr : col_t.mutable_data<C>();
  int64_t plane = win.kernel_size * win.out_size;
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t g = 0; g < s.group; ++g) {
      const C* xg = x + (n * s.c + g * cg) * win.in_size;
      const C* b = xg;
      if (!pointwise) {
        for (int64_t c = 0; c < cg; ++c) {
          const C* xc = xg + c * win.in_size;
          C* dst = col + c * plane;
          for (int64_t i = 0; i < plane; ++i) dst[i] = taps[i] >= 0 ? xc[taps[i]] : C{};
        }
        b = col;
      }
      C* yg = y + (n * s.m + g * mg) * win.out_size;
      MatMulAccumulate<C>(mg, win.out_size, k, w + g * mg * k, k, 1, b, win.out_size, yg, win.out_size, false);
      if (bias != nullptr) {
        for (int64_t m = 0; m < mg; ++m) {
          C bv = bias[g * mg + m];
          C* row = yg + m * win.out_size;
          for (int64_t i = 0; i < win.out_size; ++i) row[i] += bv;
        }
      }
    }
  }
  return absl::OkStatus();
}

class ConvKernel : public Kernel {
 public:
  ConvKernel(WindowAttrs attrs, int64_t group) : attrs_(std::move(attrs)), group_(group) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* w, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* bias, ctx.OptionalInput(2));
    if (w->dtype() != x->dtype() || (bias != nullptr && bias->dtype() != x->dtype())) {
      return absl::InvalidArgumentError("Conv inputs X, W and B must have one element type");
    }
    ONNXKIT_ASSIGN_OR_RETURN(ConvShapes s, ResolveConv(attrs_, group_, *x, *w, bias));
    return VisitFloat(x->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      using C = ComputeT<T>;
      std::vector<C> sx, sw, sb;
      const C* px = ElementsAs<T, C>(*x, sx);
      const C* pw = ElementsAs<T, C>(*w, sw);
      const C* pb = bias != nullptr ? ElementsAs<T, C>(*bias, sb) : nullptr;
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), s.out_shape));
      if constexpr (std::is_same_v<T, C>) {
        return ConvCore<C>(s, px, pw, pb, y->mutable_data<T>());
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(Tensor acc, Scratch<C>(y->size()));
        ONNXKIT_RETURN_IF_ERROR(ConvCore<C>(s, px, pw, pb, acc.mutable_data<C>()));
        for (int64_t i = 0; i < y->size(); ++i) y->mutable_data<T>()[i] = static_cast<T>(acc.data<C>()[i]);
        return absl::OkStatus();
      }
    });
  }

 private:
  WindowAttrs attrs_;
  int64_t group_;
};

int64_t Int8Or(const Tensor& t, int64_t i) { return t.dtype() == 3 ? t.data<int8_t>()[i] : t.data<uint8_t>()[i]; }

class ConvIntegerKernel : public Kernel {
 public:
  ConvIntegerKernel(WindowAttrs attrs, int64_t group) : attrs_(std::move(attrs)), group_(group) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* w, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x_zp, ctx.OptionalInput(2));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* w_zp, ctx.OptionalInput(3));
    for (const Tensor* t : {x, w, x_zp, w_zp}) {
      if (t != nullptr && t->dtype() != 2 && t->dtype() != 3) {
        return absl::InvalidArgumentError(absl::StrCat("ConvInteger needs int8 or uint8 tensors, got ", DescribeTensor(*t)));
      }
    }
    if ((x_zp != nullptr && x_zp->dtype() != x->dtype()) || (w_zp != nullptr && w_zp->dtype() != w->dtype())) {
      return absl::InvalidArgumentError("ConvInteger zero points must match their inputs' types");
    }
    ONNXKIT_ASSIGN_OR_RETURN(ConvShapes s, ResolveConv(attrs_, group_, *x, *w, nullptr));
    if (x_zp != nullptr && x_zp->size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("x_zero_point ", DescribeTensor(*x_zp), " must be a scalar"));
    }
    if (w_zp != nullptr && w_zp->size() != 1 && w_zp->size() != s.m) {
      return absl::InvalidArgumentError(
          absl::StrCat("w_zero_point ", DescribeTensor(*w_zp), " must be a scalar or have ", s.m, " values"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor xs, Scratch<uint64_t>(x->size()));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor ws, Scratch<uint64_t>(w->size()));
    int64_t xz = x_zp != nullptr ? Int8Or(*x_zp, 0) : 0;
    for (int64_t i = 0; i < x->size(); ++i) xs.mutable_data<uint64_t>()[i] = static_cast<uint64_t>(Int8Or(*x, i) - xz);
    int64_t per_m = s.m > 0 ? w->size() / s.m : 0;
    for (int64_t i = 0; i < w->size(); ++i) {
      int64_t wz = w_zp == nullptr ? 0 : Int8Or(*w_zp, w_zp->size() == 1 ? 0 : i / per_m);
      ws.mutable_data<uint64_t>()[i] = static_cast<uint64_t>(Int8Or(*w, i) - wz);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 6, s.out_shape));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor acc, Scratch<uint64_t>(y->size()));
    ONNXKIT_RETURN_IF_ERROR(ConvCore<uint64_t>(s, xs.data<uint64_t>(), ws.data<uint64_t>(), nullptr,
                                               acc.mutable_data<uint64_t>()));
    for (int64_t i = 0; i < y->size(); ++i) y->mutable_data<int32_t>()[i] = static_cast<int32_t>(acc.data<uint64_t>()[i]);
    return absl::OkStatus();
  }

 private:
  WindowAttrs attrs_;
  int64_t group_;
};

// ConvTranspose: y[N, M, out] from x[N, C, in] and w[C, M/group, k]. The
// window is the one of the matching Conv (from y back to x): its "input" is
// y's spatial dims and its "output" x's, so col2im scatters through the
// same tap table that im2col gathers through.
class ConvTransposeKernel : public Kernel {
 public:
  ConvTransposeKernel(WindowAttrs attrs, int64_t group, std::vector<int64_t> output_padding,
                      std::vector<int64_t> output_shape)
      : attrs_(std::move(attrs)), group_(group), output_padding_(std::move(output_padding)),
        output_shape_(std::move(output_shape)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* w, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* bias, ctx.OptionalInput(2));
    if (w->dtype() != x->dtype() || (bias != nullptr && bias->dtype() != x->dtype())) {
      return absl::InvalidArgumentError("ConvTranspose inputs X, W and B must have one element type");
    }
    if (x->rank() < 3 || w->rank() != x->rank()) {
      return absl::InvalidArgumentError(absl::StrCat("X ", DescribeTensor(*x), " and W ", DescribeTensor(*w),
                                                     " must have one rank of at least 3"));
    }
    int64_t c = x->dim(1);
    if (group_ < 1 || w->dim(0) != c || c % group_ != 0) {
      return absl::InvalidArgumentError(absl::StrCat("X ", DescribeTensor(*x), " and W ", DescribeTensor(*w),
                                                     " do not fit group ", group_,
                                                     " (need W[0] = C and C divisible by group)"));
    }
    auto m = CheckedMul(w->dim(1), group_);
    if (!m) return absl::InvalidArgumentError("output channel count overflows");
    if (bias != nullptr && (bias->rank() != 1 || bias->dim(0) != *m)) {
      return absl::InvalidArgumentError(absl::StrCat("B ", DescribeTensor(*bias), " must be [", *m, "]"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Window win, Resolve(*x, *w));
    std::vector<int64_t> out_shape = {x->dim(0), *m};
    out_shape.insert(out_shape.end(), win.in.begin(), win.in.end());
    if (!CheckedElementCount(out_shape)) return absl::InvalidArgumentError("output size overflows");
    return VisitFloat(x->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      using C = ComputeT<T>;
      std::vector<C> sx, sw, sb;
      const C* px = ElementsAs<T, C>(*x, sx);
      const C* pw = ElementsAs<T, C>(*w, sw);
      const C* pb = bias != nullptr ? ElementsAs<T, C>(*bias, sb) : nullptr;
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
      ONNXKIT_ASSIGN_OR_RETURN(Tensor acc, Scratch<C>(y->size()));
      ONNXKIT_RETURN_IF_ERROR(Core<C>(win, x->dim(0), c, *m, px, pw, pb, acc.mutable_data<C>()));
      for (int64_t i = 0; i < y->size(); ++i) y->mutable_data<T>()[i] = static_cast<T>(acc.data<C>()[i]);
      return absl::OkStatus();
    });
  }

 private:
  absl::StatusOr<Window> Resolve(const Tensor& x, const Tensor& w) const {
    size_t r = static_cast<size_t>(x.rank() - 2);
    std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) {
      return absl::InvalidArgumentError(absl::StrCat("kernel_shape ", ShapeString(attrs_.kernel_shape),
                                                     " does not match W ", DescribeTensor(w)));
    }
    for (auto [name, v] : {std::pair<const char*, const std::vector<int64_t>*>{"strides", &attrs_.strides},
                           {"dilations", &attrs_.dilations},
                           {"output_padding", &output_padding_}}) {
      ONNXKIT_RETURN_IF_ERROR(CheckLength(name, *v, r));
    }
    ONNXKIT_RETURN_IF_ERROR(CheckLength("pads", attrs_.pads, 2 * r));
    std::vector<int64_t> target;  // requested output spatial dims
    if (!output_shape_.empty()) {
      if (output_shape_.size() != r && output_shape_.size() != r + 2) {
        return absl::InvalidArgumentError(absl::StrCat("output_shape ", ShapeString(output_shape_), " does not fit ",
                                                       r, " spatial dims"));
      }
      target.assign(output_shape_.end() - static_cast<std::ptrdiff_t>(r), output_shape_.end());
    }
    bool same = attrs_.auto_pad == "SAME_UPPER" || attrs_.auto_pad == "SAME_LOWER";
    Window win;
    win.out.assign(x.shape().begin() + 2, x.shape().end());
    win.kernel = kernel;
    win.strides = attrs_.strides.empty() ? std::vector<int64_t>(r, 1) : attrs_.strides;
    win.dilations = attrs_.dilations.empty() ? std::vector<int64_t>(r, 1) : attrs_.dilations;
    win.pad_begin.assign(r, 0);
    win.pad_end.assign(r, 0);
    win.in.assign(r, 0);
    for (size_t d = 0; d < r; ++d) {
      int64_t op = output_padding_.empty() ? 0 : output_padding_[d];
      if (op < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("output_padding ", ShapeString(output_padding_), " must be non-negative"));
      }
      // Full extent: stride * (in - 1) + output_padding + (k - 1) * dilation + 1.
      auto a = CheckedMul(win.strides[d], std::max<int64_t>(win.out[d] - 1, 0));
      auto b = CheckedMul(kernel[d] - 1, win.dilations[d]);
      auto full = a && b ? CheckedAdd(*a, *b) : std::nullopt;
      if (full) full = CheckedAdd(*full, op);
      if (full) full = CheckedAdd(*full, 1);
      if (!full || kernel[d] < 1) return absl::InvalidArgumentError("ConvTranspose output size overflows");
      if (!target.empty() || same) {
        int64_t want = !target.empty() ? target[d] : win.out[d] * win.strides[d];
        if (want < 0) return absl::InvalidArgumentError("output_shape must be non-negative");
        int64_t total = *full - want;
        win.pad_begin[d] = attrs_.auto_pad == "SAME_UPPER" ? FloorDiv(total, 2) : total - FloorDiv(total, 2);
        win.pad_end[d] = total - win.pad_begin[d];
        win.in[d] = want;
      } else {
        if (!attrs_.pads.empty()) {
          win.pad_begin[d] = attrs_.pads[d];
          win.pad_end[d] = attrs_.pads[d + r];
        }
        win.in[d] = *full - win.pad_begin[d] - win.pad_end[d];
        if (win.in[d] < 0) {
          return absl::InvalidArgumentError(absl::StrCat("pads ", ShapeString(attrs_.pads),
                                                         " leave a negative output dim"));
        }
      }
    }
    auto in_size = CheckedElementCount(win.in);
    auto k_size = CheckedElementCount(win.kernel);
    auto out_size = CheckedElementCount(win.out);
    if (!in_size || !k_size || !out_size) return absl::InvalidArgumentError("window sizes overflow");
    win.in_size = *in_size;
    win.kernel_size = *k_size;
    win.out_size = *out_size;
    return win;
  }

  template <typename C>
  absl::Status Core(const Window& win, int64_t batch, int64_t c, int64_t m, const C* x, const C* w, const C* bias,
                    C* y) const {
    int64_t cg = c / group_, mg = m / group_;
    int64_t rows = mg * win.kernel_size;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor taps_t, WindowTaps(win));
    auto col_size = CheckedMul(rows, win.out_size);
    if (!col_size) return absl::InvalidArgumentError("col2im buffer size overflows");
    ONNXKIT_ASSIGN_OR_RETURN(Tensor col_t, Scratch<C>(*col_size));
    const int64_t* taps = taps_t.data<int64_t>();
    C* col = col_t.mutable_data<C>();
    int64_t plane = win.kernel_size * win.out_size;
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t g = 0; g < group_; ++g) {
        // col[mg * K, in_x] = w_g^T [mg * K, cg] * x_g [cg, in_x]
        const C* wg = w + g * cg * rows;
        const C* xg = x + (n * c + g * cg) * win.out_size;
        MatMulAccumulate<C>(rows, win.out_size, cg, wg, 1, rows, xg, win.out_size, col, win.out_size, false);
        for (int64_t j = 0; j < mg; ++j) {
          C* yc = y + (n * m + g * mg + j) * win.in_size;
          const C* src = col + j * plane;
          for (int64_t i = 0; i < plane; ++i) {
            if (taps[i] >= 0) yc[taps[i]] += src[i];
          }
          if (bias != nullptr) {
            for (int64_t i = 0; i < win.in_size; ++i) yc[i] += bias[g * mg + j];
          }
        }
      }
    }
    return absl::OkStatus();
  }

  WindowAttrs attrs_;
  int64_t group_;
  std::vector<int64_t> output_padding_;
  std::vector<int64_t> output_shape_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeConv(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(WindowAttrs attrs, ParseWindowAttrs(node));
  attrs.ceil_mode = false;
  return std::unique_ptr<Kernel>(new ConvKernel(std::move(attrs), AttrInt(node, "group", 1)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeConvInteger(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(WindowAttrs attrs, ParseWindowAttrs(node));
  attrs.ceil_mode = false;
  return std::unique_ptr<Kernel>(new ConvIntegerKernel(std::move(attrs), AttrInt(node, "group", 1)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeConvTranspose(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(WindowAttrs attrs, ParseWindowAttrs(node));
  return std::unique_ptr<Kernel>(new ConvTransposeKernel(std::move(attrs), AttrInt(node, "group", 1),
                                                         AttrInts(node, "output_padding"),
                                                         AttrInts(node, "output_shape")));
}

}  // namespace onnxkit::runner::reference
