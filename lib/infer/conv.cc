// Shape functions of convolutions and pooling: Conv, ConvInteger,
// QLinearConv, DeformConv, ConvTranspose, MaxPool, AveragePool, LpPool, the
// global pools, MaxUnpool.
//
// Spatial output dims follow onnx's convPoolShapeInference:
//   NOTSET/VALID  out = floor((in + pad_begin + pad_end - ((k-1)*d+1)) / s) + 1
//                 (ceil with ceil_mode, dropping a last window that starts
//                 in the end padding)
//   SAME_*        out = ceil(in / s)
//   Conv(X [1, 3, 32, 32], W [16, 3, 3, 3], pads 1, strides 2) -> [1, 16, 16, 16]
//   Conv(X [1, 4, 8, 8], W [16, 3, 3, 3], group 1) -> E0601 channels 4 vs 3 * 1
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"
#include "lib/base/checked_math.h"
#include "lib/base/strings.h"

namespace onnxkit::infer {
namespace {

// Attributes shared by convolutions and pools, validated against the
// number of spatial dims.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::string auto_pad;
};

// A list attribute of `n` entries (defaulting to `fallback` each); fails on
// a length mismatch or a value below `min`.
std::optional<std::vector<int64_t>> ListAttr(NodeContext& ctx, std::string_view name, size_t n, int64_t fallback,
                                            int64_t min) {
  std::optional<std::vector<int64_t>> v = ctx.attr_ints(name);
  if (!v) return std::vector<int64_t>(n, fallback);
  if (v->size() != n) {
    ctx.Fail(absl::StrCat("attribute '", Sv(name), "' has ", v->size(), " values, expected ", n));
    return std::nullopt;
  }
  for (int64_t x : *v) {
    if (x < min) {
      ctx.Fail(absl::StrCat("attribute '", Sv(name), "' value ", x, " is below ", min));
      return std::nullopt;
    }
  }
  return v;
}

// Reads the window attributes for `n` spatial dims; the kernel from
// `kernel_shape` or else from the weight's dims 2... (`weight` may be null).
std::optional<Window> ReadWindow(NodeContext& ctx, size_t n, const Dims* weight, bool dilations) {
  Window w;
  if (ctx.has_attr("kernel_shape")) {
    std::optional<std::vector<int64_t>> k = ListAttr(ctx, "kernel_shape", n, 1, 1);
    if (!k) return std::nullopt;
    w.kernel = std::move(*k);
  } else {
    if (weight == nullptr || weight->size() != n + 2) return std::nullopt;
    for (size_t i = 0; i < n; ++i) {
      const Dim& d = (*weight)[i + 2];
      if (!d.value || *d.value < 1) return std::nullopt;
      w.kernel.push_back(*d.value);
    }
  }
  auto strides = ListAttr(ctx, "strides", n, 1, 1);
  auto dil = dilations ? ListAttr(ctx, "dilations", n, 1, 1) : std::optional(std::vector<int64_t>(n, 1));
  auto pads = ListAttr(ctx, "pads", 2 * n, 0, 0);
  if (!strides || !dil || !pads) return std::nullopt;
  w.strides = std::move(*strides);
  w.dilations = std::move(*dil);
  w.pads = std::move(*pads);
  w.auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  return w;
}

// The spatial output dims of a convolution or pool over `in` (spatial dims).
std::optional<Dims> WindowOutput(NodeContext& ctx, const Dims& in, const Window& w, bool ceil_mode) {
  Dims out;
  for (size_t i = 0; i < in.size(); ++i) {
    std::optional<int64_t> ek = CheckedMul(w.kernel[i] - 1, w.dilations[i]);
    if (ek) ek = CheckedAdd(*ek, 1);
    if (!ek) {
      ctx.Fail(absl::StrCat("effective kernel size of spatial dim ", i, " overflows int64"));
      return std::nullopt;
    }
    if (!in[i].value) {
      out.push_back(Dim::Unknown());
      continue;
    }
    const int64_t x = *in[i].value;
    const int64_t s = w.strides[i];
    if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      out.push_back(Dim::Of(x / s + (x % s != 0 ? 1 : 0)));
      continue;
    }
    int64_t pad_begin = w.auto_pad == "VALID" ? 0 : w.pads[i];
    int64_t pad_end = w.auto_pad == "VALID" ? 0 : w.pads[i + in.size()];
    std::optional<int64_t> padded = CheckedAdd(x, pad_begin);
    if (padded) padded = CheckedAdd(*padded, pad_end);
    if (!padded) {
      ctx.Fail(absl::StrCat("padded size of spatial dim ", i, " overflows int64"));
      return std::nullopt;
    }
    if (*padded < *ek) {
      ctx.Fail(absl::StrCat("kernel extent ", *ek, " is larger than the padded input size ", *padded,
                            " of spatial dim ", i));
      return std::nullopt;
    }
    int64_t span = *padded - *ek;
    int64_t dim = span / s + 1;
    if (ceil_mode && span % s != 0) {
      ++dim;
      // A last window starting in the end padding is dropped.
      std::optional<int64_t> start = CheckedMul(dim - 1, s);
      if (!start || *start >= x + pad_begin) --dim;
    }
    out.push_back(Dim::Of(dim));
  }
  return out;
}

// Conv-like: X at `x_in`, W at `w_in`; output [N, M, spatial...].
void ConvLike(NodeContext& ctx, int x_in, int w_in) {
  const Dims* x = ctx.input_shape(x_in);
  const Dims* w = ctx.input_shape(w_in);
  if (x == nullptr) return;
  if (x->size() < 2) {
    ctx.Fail(absl::StrCat("input X must have rank at least 2, got rank ", x->size()));
    return;
  }
  if (w != nullptr && w->size() != x->size()) {
    ctx.Fail(absl::StrCat("weight rank ", w->size(), " differs from input rank ", x->size()));
    return;
  }
  const int64_t group = ctx.attr_int("group", 1);
  if (group < 1) {
    ctx.Fail(absl::StrCat("attribute 'group' is ", group, ", expected at least 1"));
    return;
  }
  if (w != nullptr && (*x)[1].value && (*w)[1].value) {
    std::optional<int64_t> channels = CheckedMul(*(*w)[1].value, group);
    if (!channels || *channels != *(*x)[1].value) {
      ctx.Fail(absl::StrCat("input channels ", *(*x)[1].value, " do not match weight channels ", *(*w)[1].value,
                            " * group ", group));
      return;
    }
  }
  const size_t n = x->size() - 2;
  std::optional<Window> win = ReadWindow(ctx, n, w, /*dilations=*/true);
  Dims out = {(*x)[0], w != nullptr ? (*w)[0] : Dim::Unknown()};
  if (!win) {
    if (ctx.failed()) return;
    out.resize(x->size());
    ctx.set_shape(0, std::move(out));
    return;
  }
  std::optional<Dims> spatial = WindowOutput(ctx, Dims(x->begin() + 2, x->end()), *win, false);
  if (!spatial) return;
  out.insert(out.end(), spatial->begin(), spatial->end());
  ctx.set_shape(0, std::move(out));
}

}  // namespace

void ShapeConv(NodeContext& ctx) { ConvLike(ctx, 0, 1); }
void ShapeQLinearConv(NodeContext& ctx) { ConvLike(ctx, 0, 3); }

void ShapePool(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  if (x == nullptr) return;
  if (x->size() < 2) {
    ctx.Fail(absl::StrCat("input X must have rank at least 2, got rank ", x->size()));
    return;
  }
  if (!ctx.has_attr("kernel_shape")) {
    ctx.Fail("attribute 'kernel_shape' is required");
    return;
  }
  std::optional<Window> win = ReadWindow(ctx, x->size() - 2, nullptr, /*dilations=*/true);
  if (!win) return;
  std::optional<Dims> spatial =
      WindowOutput(ctx, Dims(x->begin() + 2, x->end()), *win, ctx.attr_int("ceil_mode", 0) != 0);
  if (!spatial) return;
  Dims out = {(*x)[0], (*x)[1]};
  out.insert(out.end(), spatial->begin(), spatial->end());
  ctx.set_shape(0, out);
  ctx.set_shape(1, std::move(out));  // MaxPool's Indices
}

void ShapeGlobalPool(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  if (x == nullptr) return;
  if (x->size() < 2) {
    ctx.Fail(absl::StrCat("input X must have rank at least 2, got rank ", x->size()));
    return;
  }
  Dims out(x->size(), Dim::Of(1));
  out[0] = (*x)[0];
  out[1] = (*x)[1];
  ctx.set_shape(0, std::move(out));
}

void ShapeConvTranspose(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  const Dims* w = ctx.input_shape(1);
  if (x == nullptr) return;
  if (x->size() < 2) {
    ctx.Fail(absl::StrCat("input X must have rank at least 2, got rank ", x->size()));
    return;
  }
  if (w != nullptr && w->size() != x->size()) {
    ctx.Fail(absl::StrCat("weight rank ", w->size(), " differs from input rank ", x->size()));
    return;
  }
  const int64_t group = ctx.attr_int("group", 1);
  if (group < 1) {
    ctx.Fail(absl::StrCat("attribute 'group' is ", group, ", expected at least 1"));
    return;
  }
  if (w != nullptr && (*x)[1].value && (*w)[0].value && *(*x)[1].value != *(*w)[0].value) {
    ctx.Fail(absl::StrCat("input channels ", *(*x)[1].value, " do not match weight dim 0 (", *(*w)[0].value, ")"));
    return;
  }
  const size_t n = x->size() - 2;
  Dims out = {(*x)[0], w != nullptr ? ctx.Mul((*w)[1], Dim::Of(group)) : Dim::Unknown()};
  std::optional<Window> win = ReadWindow(ctx, n, w, /*dilations=*/true);
  std::optional<std::vector<int64_t>> output_padding = ListAttr(ctx, "output_padding", n, 0, 0);
  if (ctx.failed()) return;
  if (std::optional<std::vector<int64_t>> shape = ctx.attr_ints("output_shape")) {
    if (shape->size() != n) {
      ctx.Fail(absl::StrCat("attribute 'output_shape' has ", shape->size(), " values, expected ", n));
      return;
    }
    for (int64_t v : *shape) out.push_back(v >= 0 ? Dim::Of(v) : Dim::Unknown());
    ctx.set_shape(0, std::move(out));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const Dim& in = (*x)[i + 2];
    if (!win || !in.value) {
      out.push_back(Dim::Unknown());
      continue;
    }
    const int64_t s = win->strides[i];
    std::optional<int64_t> dim;
    if (win->auto_pad == "SAME_UPPER" || win->auto_pad == "SAME_LOWER") {
      dim = CheckedMul(*in.value, s);
    } else {
      // s * (in - 1) + output_padding + (k - 1) * d + 1 - pads
      std::optional<int64_t> ek = CheckedMul(win->kernel[i] - 1, win->dilations[i]);
      dim = CheckedMul(s, *in.value > 0 ? *in.value - 1 : 0);
      if (dim && ek) dim = CheckedAdd(*dim, *ek);
      if (dim) dim = CheckedAdd(*dim, (*output_padding)[i]);
      if (dim) dim = CheckedAdd(*dim, 1);
      if (dim && win->auto_pad != "VALID") dim = SignedSub(*dim, win->pads[i]);
      if (dim && win->auto_pad != "VALID") dim = SignedSub(*dim, win->pads[i + n]);
    }
    if (!dim || *dim < 0) {
      ctx.Fail(absl::StrCat("output spatial dim ", i, " is ", dim ? absl::StrCat("negative (", *dim, ")")
                                                                   : std::string("overflowing int64")));
      return;
    }
    out.push_back(Dim::Of(*dim));
  }
  ctx.set_shape(0, std::move(out));
}

void ShapeMaxUnpool(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  if (x == nullptr || x->size() < 2) return;
  if (std::optional<std::vector<int64_t>> shape = ctx.input_ints(2)) {
    if (!ctx.CheckRank(static_cast<int64_t>(shape->size()), "output")) return;
    Dims out;
    for (int64_t v : *shape) out.push_back(v >= 0 ? Dim::Of(v) : Dim::Unknown());
    ctx.set_shape(0, std::move(out));
    return;
  }
  if (ctx.has_input(2)) return;
  const size_t n = x->size() - 2;
  std::optional<Window> win = ReadWindow(ctx, n, nullptr, /*dilations=*/false);
  if (!win) return;
  Dims out = {(*x)[0], (*x)[1]};
  for (size_t i = 0; i < n; ++i) {
    const Dim& in = (*x)[i + 2];
    std::optional<int64_t> dim;
    if (in.value) dim = CheckedMul(*in.value > 0 ? *in.value - 1 : 0, win->strides[i]);
    if (dim) dim = CheckedAdd(*dim, win->kernel[i]);
    if (dim) dim = SignedSub(*dim, win->pads[i]);
    if (dim) dim = SignedSub(*dim, win->pads[i + n]);
    out.push_back(dim && *dim >= 0 ? Dim::Of(*dim) : Dim::Unknown());
  }
  ctx.set_shape(0, std::move(out));
}

}  // namespace onnxkit::infer
