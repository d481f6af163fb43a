// Shape functions of resampling and signal ops: Resize (sizes or scales,
// axes, keep_aspect_ratio_policy), Upsample, GridSample, AffineGrid,
// RoiAlign, Col2Im, DFT, STFT; ImageDecoder.
//
//   Resize([1, 3, 4, 4], scales=[1, 1, 2, 2]) -> [1, 3, 8, 8]  (floor(dim * scale))
//   Resize([1, 3, 4, 4], sizes=[1, 3, 5])     -> E0601 sizes has 3 values for 4 axes
//   DFT([1, 16, 1], onesided=1)              -> [1, 9, 2]
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/checked_math.h"
#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"

namespace onnxkit::infer {
namespace {

// floor(dim * scale) in float arithmetic, as onnx computes it.
std::optional<int64_t> ScaledDim(int64_t dim, double scale) {
  float v = std::floor(static_cast<float>(dim) * static_cast<float>(scale));
  if (!(v >= 0) || v >= 9.2e18f) return std::nullopt;
  return static_cast<int64_t>(v);
}

// Output dims of Resize/Upsample for per-axis `scales` over `axes`.
std::optional<Dims> ScaleDims(NodeContext& ctx, const Dims& in, const std::vector<int64_t>& axes,
                              const std::vector<double>& scales) {
  Dims out = in;
  for (size_t i = 0; i < axes.size(); ++i) {
    Dim& o = out[static_cast<size_t>(axes[i])];
    if (!o.value) {
      if (scales[i] != 1.0) o = Dim::Unknown();
      continue;
    }
    std::optional<int64_t> d = ScaledDim(*o.value, scales[i]);
    if (!d) {
      ctx.Fail(absl::StrCat("scale ", scales[i], " of axis ", axes[i], " gives an invalid size"));
      return std::nullopt;
    }
    o = Dim::Of(*d);
  }
  return out;
}

// The axes a Resize works on (all, or the `axes` attribute of opset 18).
std::optional<std::vector<int64_t>> ResizeAxes(NodeContext& ctx, int64_t rank) {
  std::vector<int64_t> axes;
  if (std::optional<std::vector<int64_t>> a = ctx.attr_ints("axes")) {
    for (int64_t x : *a) {
      std::optional<int64_t> axis = ctx.NormalizeAxis(x, rank, "axes value");
      if (!axis) return std::nullopt;
      axes.push_back(*axis);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  return axes;
}

// Resize with `sizes`, applying keep_aspect_ratio_policy (opset 18).
std::optional<Dims> SizeDims(NodeContext& ctx, const Dims& in, const std::vector<int64_t>& axes,
                             std::vector<int64_t> sizes) {
  const std::string policy = ctx.attr_string("keep_aspect_ratio_policy", "stretch");
  Dims out = in;
  if (policy != "stretch") {
    const bool not_larger = policy == "not_larger";
    float scale = not_larger ? std::numeric_limits<float>::max() : std::numeric_limits<float>::lowest();
    for (size_t i = 0; i < axes.size(); ++i) {
      const Dim& d = in[static_cast<size_t>(axes[i])];
      if (!d.value || *d.value == 0) return Dims(in.size());
      float s = static_cast<float>(sizes[i]) / static_cast<float>(*d.value);
      scale = not_larger ? std::min(scale, s) : std::max(scale, s);
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      float v = std::round(scale * static_cast<float>(*in[static_cast<size_t>(axes[i])].value));
      if (!(v >= 0) || v >= 9.2e18f) return Dims(in.size());
      sizes[i] = static_cast<int64_t>(v);
    }
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    if (sizes[i] < 0) {
      ctx.Fail(absl::StrCat("sizes ", IntsToString(sizes), " has the negative value ", sizes[i]));
      return std::nullopt;
    }
    out[static_cast<size_t>(axes[i])] = Dim::Of(sizes[i]);
  }
  return out;
}

}  // namespace

void ShapeResize(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  const int64_t rank = static_cast<int64_t>(in->size());
  std::optional<std::vector<int64_t>> axes = ResizeAxes(ctx, rank);
  if (!axes) return;
  const int scales_in = ctx.op() == "Upsample" || ctx.opset() < 11 ? 1 : 2;
  std::optional<std::vector<double>> scales;
  if (ctx.op() == "Upsample" && ctx.opset() < 9) {
    if (std::optional<std::vector<float>> s = ctx.attr_floats("scales")) scales.emplace(s->begin(), s->end());
  } else if (const std::vector<double>* s = ctx.input_floats(scales_in)) {
    scales = *s;
  }
  std::optional<std::vector<int64_t>> sizes = ctx.input_ints(3);
  std::optional<Dims> out;
  if (ctx.opset() >= 11 && ctx.has_input(3) && (!sizes || !sizes->empty())) {
    if (!sizes) {
      ctx.set_shape(0, Dims(in->size()));
      return;
    }
    if (sizes->size() != axes->size()) {
      ctx.Fail(absl::StrCat("sizes ", IntsToString(*sizes), " has ", sizes->size(), " values for ", axes->size(),
                            " axes"));
      return;
    }
    out = SizeDims(ctx, *in, *axes, *sizes);
  } else if (scales && !scales->empty()) {
    if (scales->size() != axes->size()) {
      ctx.Fail(absl::StrCat("scales has ", scales->size(), " values for ", axes->size(), " axes"));
      return;
    }
    for (size_t i = 0; i < scales->size(); ++i) {
      // Upsample only enlarges (Resize shrinks); neither takes scales <= 0.
      const bool upsample = ctx.op() == "Upsample";
      if (!(upsample ? (*scales)[i] >= 1.0 : (*scales)[i] > 0.0)) {
        ctx.Fail(absl::StrCat("scale ", (*scales)[i], " of axis ", (*axes)[i], " is not ",
                              upsample ? "at least 1 (Upsample only enlarges; Resize shrinks)" : "positive"));
        return;
      }
    }
    out = ScaleDims(ctx, *in, *axes, *scales);
  } else {
    out = Dims(in->size());
  }
  if (out) ctx.set_shape(0, std::move(*out));
}

void ShapeGridSample(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  const Dims* grid = ctx.input_shape(1);
  if (x == nullptr || grid == nullptr) return;
  if (x->size() < 3 || grid->size() != x->size()) {
    ctx.Fail(absl::StrCat("input ", DimsToString(*x), " and grid ", DimsToString(*grid),
                          " must have the same rank, at least 3"));
    return;
  }
  Dims out = {(*x)[0], (*x)[1]};
  out.insert(out.end(), grid->begin() + 1, grid->end() - 1);
  ctx.set_shape(0, std::move(out));
}

void ShapeAffineGrid(NodeContext& ctx) {
  std::optional<std::vector<int64_t>> size = ctx.input_ints(1);
  if (!size) return;
  if (size->size() != 4 && size->size() != 5) {
    ctx.Fail(absl::StrCat("size ", IntsToString(*size), " must have 4 or 5 values"));
    return;
  }
  Dims out = {Dim::Of((*size)[0])};
  for (size_t i = 2; i < size->size(); ++i) out.push_back(Dim::Of((*size)[i]));
  out.push_back(Dim::Of(static_cast<int64_t>(size->size()) - 2));
  for (const Dim& d : out) {
    if (*d.value < 0) {
      ctx.Fail(absl::StrCat("size ", IntsToString(*size), " has a negative value"));
      return;
    }
  }
  ctx.set_shape(0, std::move(out));
}

void ShapeRoiAlign(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  const Dims* rois = ctx.input_shape(1);
  Dim n = rois != nullptr && !rois->empty() ? (*rois)[0] : Dim::Unknown();
  if (!n.known()) {
    if (const Dims* b = ctx.input_shape(2); b != nullptr && !b->empty()) n = (*b)[0];
  }
  Dim c = x != nullptr && x->size() > 1 ? (*x)[1] : Dim::Unknown();
  ctx.set_shape(0, {n, c, Dim::Of(ctx.attr_int("output_height", 1)), Dim::Of(ctx.attr_int("output_width", 1))});
}

void ShapeCol2Im(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  std::optional<std::vector<int64_t>> image = ctx.input_ints(1);
  std::optional<std::vector<int64_t>> block = ctx.input_ints(2);
  if (in == nullptr || !image || !block) return;
  if (in->size() != 3 || image->size() != block->size()) {
    ctx.Fail(absl::StrCat("input ", DimsToString(*in), ", image_shape ", IntsToString(*image), " and block_shape ",
                          IntsToString(*block), " do not fit together"));
    return;
  }
  std::optional<int64_t> block_size = CheckedElementCount(*block);
  if (!block_size || *block_size == 0) {
    ctx.Fail(absl::StrCat("block_shape ", IntsToString(*block), " is empty, negative or overflowing"));
    return;
  }
  Dims out = {(*in)[0], Dim::Unknown()};
  if (const Dim& c = (*in)[1]; c.value) {
    if (*c.value % *block_size != 0) {
      ctx.Fail(absl::StrCat("dim 1 of input ", DimsToString(*in), " is not divisible by the block size ",
                            *block_size));
      return;
    }
    out[1] = Dim::Of(*c.value / *block_size);
  }
  for (int64_t d : *image) out.push_back(d >= 0 ? Dim::Of(d) : Dim::Unknown());
  ctx.set_shape(0, std::move(out));
}

void ShapeDFT(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  const int64_t rank = static_cast<int64_t>(in->size());
  if (rank < 2) {
    ctx.Fail(absl::StrCat("input must have rank at least 2, got rank ", rank));
    return;
  }
  std::optional<int64_t> axis_value =
      ctx.opset() >= 20 ? (ctx.has_input(2) ? ctx.input_scalar(2) : std::optional<int64_t>(-2))
                        : std::optional<int64_t>(ctx.attr_int("axis", 1));
  if (!axis_value) return;
  std::optional<int64_t> axis = ctx.NormalizeAxis(*axis_value, rank);
  if (!axis) return;
  if (*axis == rank - 1) {
    ctx.Fail(absl::StrCat("axis ", *axis_value, " is the last (complex) dim"));
    return;
  }
  Dim n = (*in)[static_cast<size_t>(*axis)];
  if (ctx.has_input(1)) {
    std::optional<int64_t> length = ctx.input_scalar(1);
    n = length && *length >= 0 ? Dim::Of(*length) : Dim::Unknown();
  }
  Dims out = *in;
  out.back() = Dim::Of(2);
  const bool onesided = ctx.attr_int("onesided", 0) != 0;
  if (onesided && ctx.attr_int("inverse", 0) != 0) {
    // Inverse of a one-sided (real) transform: a real signal of dft_length,
    // by default 2 * (n - 1).
    out.back() = Dim::Of(1);
    if (!ctx.has_input(1)) n = n.value && *n.value > 0 ? Dim::Of(2 * (*n.value - 1)) : Dim::Unknown();
  } else if (onesided) {
    n = n.value ? Dim::Of(*n.value / 2 + 1) : Dim::Unknown();
  }
  out[static_cast<size_t>(*axis)] = n;
  ctx.set_shape(0, std::move(out));
}

void ShapeSTFT(NodeContext& ctx) {
  const Dims* signal = ctx.input_shape(0);
  if (signal == nullptr || signal->size() != 3) return;
  std::optional<int64_t> step = ctx.input_scalar(1);
  std::optional<int64_t> length = ctx.input_scalar(3);
  if (!length) {
    if (const Dims* w = ctx.input_shape(2); w != nullptr && w->size() == 1 && (*w)[0].value) length = *(*w)[0].value;
  }
  Dim frames = Dim::Unknown();
  Dim bins = Dim::Unknown();
  if (length && *length > 0) {
    bins = Dim::Of(ctx.attr_int("onesided", 1) != 0 ? *length / 2 + 1 : *length);
    if (step && *step > 0 && (*signal)[1].value && *(*signal)[1].value >= *length) {
      frames = Dim::Of((*(*signal)[1].value - *length) / *step + 1);
    }
  }
  ctx.set_shape(0, {(*signal)[0], frames, bins, Dim::Of(2)});
}

// ImageDecoder: uint8 [H, W, 3] (RGB, BGR) or [H, W, 1] (Grayscale); H and
// W are the stream's.
void ShapeImageDecoder(NodeContext& ctx) {
  ctx.set_elem(0, pb::kUint8);
  const std::string format = ctx.attr_string("pixel_format", "RGB");
  if (format != "RGB" && format != "BGR" && format != "Grayscale") return;
  ctx.set_shape(0, {Dim::Unknown(), Dim::Unknown(), Dim::Of(format == "Grayscale" ? 1 : 3)});
}

}  // namespace onnxkit::infer
