// Reference kernels that sample images through coordinate grids:
// GridSample (opset 16 4-D bilinear/nearest/bicubic, opset 20+ N-D
// linear/nearest/cubic; padding zeros/border/reflection; align_corners),
// AffineGrid (2-D and 3-D) and Col2Im (N-D, pads/strides/dilations).
// All compute in double.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/grid_sample.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {
namespace {

using shape_ops::ShapeString;

enum class GridMode { kLinear, kNearest, kCubic };
enum class GridPadding { kZeros, kBorder, kReflection };

// Reflects x into [lo, hi] by the nearer border, repeatedly.
double Reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    double dx = lo - x;
    double n = std::floor(dx / range);
    double r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    double n = std::floor(dx / range);
    double r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

// Pixel i with weight appended at `n`: padded by zeros, the border, or
// reflection.
void AddTap(const grid::Config& c, int64_t i, double weight, int64_t len, double lo, double hi,
            int64_t* index, double* w, int& n) {
  if (i < 0 || i >= len) {
    if (c.padding == grid::Padding::kZeros) {
      i = -1;
    } else if (c.padding == grid::Padding::kBorder) {
      i = std::clamp<int64_t>(i, 0, len - 1);
    } else {
      i = std::clamp<int64_t>(static_cast<int64_t>(Reflect(static_cast<double>(i), lo, hi)), 0, len - 1);
    }
  }
  index[n] = i;
  w[n] = weight;
  ++n;
}

class GridSampleKernel : public Kernel {
 public:
  explicit GridSampleKernel(grid::Config c) : c_(c) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* grid, ctx.Input(1));
    int64_t k = x->rank() - 2;  // spatial dims
    bool ok = k >= 1 && grid->rank() == k + 2 && grid->dim(0) == x->dim(0) &&
              grid->dim(static_cast<int>(k + 1)) == k && (!c_.only_4d || k == 2);
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("grid ", DescribeTensor(*grid), " does not fit input ",
                                                     DescribeTensor(*x),
                                                     c_.only_4d ? " (opset 16 takes 4-D input)" : ""));
    }
    std::vector<int64_t> out_shape = {x->dim(0), x->dim(1)};
    for (int64_t d = 1; d <= k; ++d) out_shape.push_back(grid->dim(static_cast<int>(d)));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> data, shape_ops::ReadDoubles(*x, "X"));
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> g, shape_ops::ReadDoubles(*grid, "grid"));
    std::vector<int64_t> dims(x->shape().begin() + 2, x->shape().end());
    std::vector<int64_t> strides = Strides(dims);
    int64_t image = x->size() / std::max<int64_t>(x->dim(0) * x->dim(1), 1);
    int64_t points = 1;
    for (int64_t d = 1; d <= k; ++d) points *= grid->dim(static_cast<int>(d));
    std::vector<std::array<int64_t, grid::kMaxTaps>> idx(static_cast<size_t>(k));
    std::vector<std::array<double, grid::kMaxTaps>> w(static_cast<size_t>(k));
    std::vector<int> taps(static_cast<size_t>(k));
    int64_t n_count = x->dim(0), c_count = x->dim(1);
    for (int64_t n = 0; n < n_count; ++n) {
      for (int64_t p = 0; p < points; ++p) {
        // Grid coordinates come innermost dim first (x, y, z).
        for (int64_t d = 0; d < k; ++d) {
          double v = g[static_cast<size_t>((n * points + p) * k + (k - 1 - d))];
          const size_t a = static_cast<size_t>(d);
          taps[a] = grid::Taps(c_, v, dims[a], idx[a].data(), w[a].data());
        }
        for (int64_t c = 0; c < c_count; ++c) {
          const double* plane = data.data() + (n * c_count + c) * image;
          ONNXKIT_RETURN_IF_ERROR(shape_ops::StoreDouble(*y, (n * c_count + c) * points + p,
                                                         Combine(plane, strides, taps, idx, w)));
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  // Sum over the product of the axes' taps.
  static double Combine(const double* plane, const std::vector<int64_t>& strides,
                        const std::vector<int>& taps,
                        const std::vector<std::array<int64_t, grid::kMaxTaps>>& idx,
                        const std::vector<std::array<double, grid::kMaxTaps>>& w) {
    size_t k = idx.size();
    std::vector<size_t> at(k, 0);
    double sum = 0;
    while (true) {
      double weight = 1;
      int64_t src = 0;
      bool zero = false;
      for (size_t d = 0; d < k; ++d) {
        int64_t i = idx[d][at[d]];
        zero = zero || i < 0;
        weight *= w[d][at[d]];
        src += i * strides[d];
      }
      if (!zero) sum += weight * plane[src];
      size_t d = k;
      while (d > 0 && ++at[d - 1] == static_cast<size_t>(taps[d - 1])) at[--d] = 0;
      if (d == 0) break;
    }
    return sum;
  }

  grid::Config c_;
};

}  // namespace

namespace grid {

absl::StatusOr<Config> ParseGridSample(const ir::Node& node, int64_t opset) {
  Config c;
  bool v16 = opset < 20;
  c.only_4d = v16;
  std::string mode = AttrString(node, "mode", v16 ? "bilinear" : "linear");
  if (mode == "linear" || mode == "bilinear") {
    c.mode = Mode::kLinear;
  } else if (mode == "nearest") {
    c.mode = Mode::kNearest;
  } else if (mode == "cubic" || mode == "bicubic") {
    c.mode = Mode::kCubic;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("GridSample mode '", mode, "' is not one of linear, nearest, cubic"));
  }
  std::string pad = AttrString(node, "padding_mode", "zeros");
  if (pad == "zeros") {
    c.padding = Padding::kZeros;
  } else if (pad == "border") {
    c.padding = Padding::kBorder;
  } else if (pad == "reflection") {
    c.padding = Padding::kReflection;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("GridSample padding_mode '", pad, "' is not one of zeros, border, reflection"));
  }
  c.align_corners = AttrInt(node, "align_corners", 0) != 0;
  return c;
}

int Taps(const Config& c, double v, int64_t len, int64_t* index, double* weight) {
  double dl = static_cast<double>(len);
  double x = c.align_corners ? (v + 1) / 2 * (dl - 1) : ((v + 1) * dl - 1) / 2;
  double lo = c.align_corners ? 0 : -0.5, hi = c.align_corners ? dl - 1 : dl - 0.5;
  if (!std::isfinite(x)) x = 0;
  if (c.mode == Mode::kNearest) x = std::nearbyint(x);
  if (x < lo || x > hi) {
    if (c.padding == Padding::kBorder) x = std::clamp(x, 0.0, dl - 1);
    if (c.padding == Padding::kReflection) x = Reflect(x, lo, hi);
  }
  x = std::clamp(x, -1.0e9, 1.0e9);
  int n = 0;
  if (c.mode == Mode::kNearest) {
    AddTap(c, static_cast<int64_t>(x), 1.0, len, lo, hi, index, weight, n);
    return n;
  }
  double fl = std::floor(x), t = x - fl;
  int64_t x0 = static_cast<int64_t>(fl);
  if (c.mode == Mode::kLinear) {
    AddTap(c, x0, 1 - t, len, lo, hi, index, weight, n);
    AddTap(c, x0 + 1, t, len, lo, hi, index, weight, n);
    return n;
  }
  const double a = -0.75;
  double k[4] = {((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                 ((a + 2) * t - (a + 3)) * t * t + 1, ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                 ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a};
  for (int i = 0; i < 4; ++i) AddTap(c, x0 - 1 + i, k[i], len, lo, hi, index, weight, n);
  return n;
}

}  // namespace grid

absl::StatusOr<std::unique_ptr<Kernel>> MakeGridSample(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(grid::Config c, grid::ParseGridSample(node, info.opset));
  return std::unique_ptr<Kernel>(new GridSampleKernel(c));
}

absl::Status AffineGrid(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* theta, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* size_t_, ctx.Input(1));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> size, shape_ops::ReadInts(*size_t_, "size"));
  if (size.size() != 4 && size.size() != 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("size ", ShapeString(size), " must be [N, C, H, W] or [N, C, D, H, W]"));
  }
  int64_t k = static_cast<int64_t>(size.size()) - 2;  // 2 or 3 spatial dims
  if (theta->rank() != 3 || theta->dim(0) != size[0] || theta->dim(1) != k || theta->dim(2) != k + 1) {
    return absl::InvalidArgumentError(absl::StrCat("theta ", DescribeTensor(*theta), " must be [", size[0],
                                                   ", ", k, ", ", k + 1, "] for size ", ShapeString(size)));
  }
  bool align = AttrInt(ctx.node(), "align_corners", 0) != 0;
  std::vector<int64_t> out_shape = {size[0]};
  for (int64_t d = 2; d < static_cast<int64_t>(size.size()); ++d) {
    if (size[static_cast<size_t>(d)] < 0)
      return absl::InvalidArgumentError(absl::StrCat("size ", ShapeString(size), " has a negative dim"));
    out_shape.push_back(size[static_cast<size_t>(d)]);
  }
  out_shape.push_back(k);
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, theta->dtype(), out_shape));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> th, shape_ops::ReadDoubles(*theta, "theta"));
  std::vector<int64_t> spatial(out_shape.begin() + 1, out_shape.end() - 1);
  auto base = [align](int64_t i, int64_t len) {
    if (align) return len <= 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(len - 1);
    return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(len) - 1.0;
  };
  int64_t out = 0;
  for (int64_t n = 0; n < size[0]; ++n) {
    absl::Status status;
    ForEachIndex(spatial, [&](const std::vector<int64_t>& c) {
      // Homogeneous point (x, y[, z], 1): x runs along the last dim.
      std::vector<double> point(static_cast<size_t>(k + 1), 1.0);
      for (int64_t d = 0; d < k; ++d) {
        size_t axis = static_cast<size_t>(k - 1 - d);
        point[static_cast<size_t>(d)] = base(c[axis], spatial[axis]);
      }
      for (int64_t r = 0; r < k; ++r) {
        double v = 0;
        for (int64_t j = 0; j <= k; ++j)
          v += th[static_cast<size_t>((n * k + r) * (k + 1) + j)] * point[static_cast<size_t>(j)];
        if (status.ok()) status = shape_ops::StoreDouble(*y, out, v);
        ++out;
      }
    });
    ONNXKIT_RETURN_IF_ERROR(status);
  }
  return absl::OkStatus();
}

absl::Status Col2Im(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* image_t, ctx.Input(1));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* block_t, ctx.Input(2));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> image, shape_ops::ReadInts(*image_t, "image_shape"));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> block, shape_ops::ReadInts(*block_t, "block_shape"));
  size_t k = image.size();
  std::vector<int64_t> dil = AttrInts(ctx.node(), "dilations", std::vector<int64_t>(k, 1));
  std::vector<int64_t> strides = AttrInts(ctx.node(), "strides", std::vector<int64_t>(k, 1));
  std::vector<int64_t> pads = AttrInts(ctx.node(), "pads", std::vector<int64_t>(2 * k, 0));
  if (k == 0 || block.size() != k || dil.size() != k || strides.size() != k || pads.size() != 2 * k ||
      x->rank() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Col2Im: input ", DescribeTensor(*x), ", image_shape ", ShapeString(image), ", block_shape ",
        ShapeString(block), " and the dilations/strides/pads attributes do not agree"));
  }
  // Blocks per dim, and their product (must be the input's last dim).
  std::vector<int64_t> blocks(k);
  int64_t block_count = 1, kernel = 1;
  for (size_t d = 0; d < k; ++d) {
    bool valid = image[d] >= 0 && block[d] > 0 && dil[d] > 0 && strides[d] > 0 && pads[d] >= 0 &&
                 pads[d + k] >= 0 && image[d] < (int64_t{1} << 40) && block[d] < (int64_t{1} << 20) &&
                 dil[d] < (int64_t{1} << 20) && pads[d] < (int64_t{1} << 40) &&
                 pads[d + k] < (int64_t{1} << 40);
    int64_t span = valid ? dil[d] * (block[d] - 1) + 1 : 0;
    int64_t room = valid ? image[d] + pads[d] + pads[d + k] - span : -1;
    if (!valid || room < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Col2Im: block ", ShapeString(block), " does not fit image ", ShapeString(image), " on dim ", d));
    }
    blocks[d] = room / strides[d] + 1;
    auto bc = CheckedMul(block_count, blocks[d]);
    auto kc = CheckedMul(kernel, block[d]);
    if (!bc || !kc) return absl::InvalidArgumentError("Col2Im: too many blocks");
    block_count = *bc;
    kernel = *kc;
  }
  int64_t n = x->dim(0), ck = x->dim(1), l = x->dim(2);
  if (ck % kernel != 0 || l != block_count) {
    return absl::InvalidArgumentError(absl::StrCat("Col2Im: input ", DescribeTensor(*x), " must be [N, C * ",
                                                   kernel, ", ", block_count, "]"));
  }
  int64_t c = ck / kernel;
  std::vector<int64_t> out_shape = {n, c};
  out_shape.insert(out_shape.end(), image.begin(), image.end());
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> in, shape_ops::ReadDoubles(*x, "input"));
  std::vector<double> acc(static_cast<size_t>(y->size()), 0.0);
  std::vector<int64_t> img_strides = Strides(image);
  int64_t image_size = y->size() / std::max<int64_t>(n * c, 1);
  int64_t src = 0;
  for (int64_t plane = 0; plane < n * c; ++plane) {
    ForEachIndex(block, [&](const std::vector<int64_t>& kc) {
      ForEachIndex(blocks, [&](const std::vector<int64_t>& pc) {
        int64_t dst = 0;
        bool inside = true;
        for (size_t d = 0; d < k && inside; ++d) {
          int64_t pos = pc[d] * strides[d] - pads[d] + kc[d] * dil[d];
          inside = pos >= 0 && pos < image[d];
          dst += pos * img_strides[d];
        }
        if (inside) acc[static_cast<size_t>(plane * image_size + dst)] += in[static_cast<size_t>(src)];
        ++src;
      });
    });
  }
  for (int64_t i = 0; i < y->size(); ++i)
    ONNXKIT_RETURN_IF_ERROR(shape_ops::StoreDouble(*y, i, acc[static_cast<size_t>(i)]));
  return absl::OkStatus();
}

}  // namespace onnxkit::runner::reference
