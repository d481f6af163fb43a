// cpu GridSample over float32 4-D inputs: X [N, C, H, W] sampled at the
// points of grid [N, Ho, Wo, 2]. Each point's taps come from the reference
// kernel's geometry (reference::grid::Taps, in double: the same pixels and
// weights, every mode, padding and align_corners) and serve every channel
// of the point: the weight products go to float and the sums run in float
// in the reference's tap order (it sums in double, so values may differ in
// the last bits). Points are split among the threads. Other ranks and
// types, and inputs the reference rejects, run on the reference kernel.
#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>

#include "lib/base/status_macros.h"
#include "runner/cpu/conv.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/reference/grid_sample.h"

namespace onnxkit::runner::cpu {
namespace {

namespace grid = reference::grid;

// grid::Taps for linear sampling with zero padding (the common case), inline:
// the same arithmetic, in double.
inline int LinearZeroTaps(double v, int64_t len, bool align_corners, int64_t* index, double* weight) {
  const double dl = static_cast<double>(len);
  double x = align_corners ? (v + 1) / 2 * (dl - 1) : ((v + 1) * dl - 1) / 2;
  if (!std::isfinite(x)) x = 0;
  x = std::clamp(x, -1.0e9, 1.0e9);
  const double fl = std::floor(x), t = x - fl;
  const int64_t x0 = static_cast<int64_t>(fl);
  index[0] = x0 >= 0 && x0 < len ? x0 : -1;
  index[1] = x0 + 1 >= 0 && x0 + 1 < len ? x0 + 1 : -1;
  weight[0] = 1 - t;
  weight[1] = t;
  return 2;
}

std::atomic<int64_t> g_runs{0};

class GridSampleKernel : public CpuKernel {
 public:
  GridSampleKernel(std::unique_ptr<Kernel> fallback, std::optional<grid::Config> config)
      : CpuKernel(std::move(fallback)), config_(config) {}

  absl::Status Run(KernelContext& ctx) override {
    if (!config_) return Fallback(ctx);
    absl::StatusOr<const Tensor*> xs = ctx.Input(0), gs = ctx.Input(1);
    if (!xs.ok() || !gs.ok()) return Fallback(ctx);
    const Tensor &x = **xs, &g = **gs;
    if (x.dtype() != pb::kFloat || g.dtype() != pb::kFloat || x.rank() != 4 || g.rank() != 4 ||
        g.dim(0) != x.dim(0) || g.dim(3) != 2 || x.size() == 0 || g.size() == 0) {
      return Fallback(ctx);
    }
    const int64_t n_count = x.dim(0), channels = x.dim(1), h = x.dim(2), w = x.dim(3);
    const int64_t points = g.dim(1) * g.dim(2), plane = h * w;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y,
                             ctx.AllocateOutputUninitialized(0, pb::kFloat, {n_count, channels, g.dim(1), g.dim(2)}));
    const float* xd = x.data<float>();
    const float* gd = g.data<float>();
    float* yd = y->mutable_data<float>();
    const grid::Config c = *config_;
    const bool linear_zeros = c.mode == grid::Mode::kLinear && c.padding == grid::Padding::kZeros;
    auto point = [&](int64_t q) {
      const int64_t n = q / points, p = q % points;
      std::array<int64_t, grid::kMaxTaps> iy, ix;
      std::array<double, grid::kMaxTaps> wy, wx;
      // Grid coordinates come x first; the reference's taps run over the
      // rows, then the columns.
      int ny, nx;
      if (linear_zeros) {
        ny = LinearZeroTaps(gd[2 * q + 1], h, c.align_corners, iy.data(), wy.data());
        nx = LinearZeroTaps(gd[2 * q], w, c.align_corners, ix.data(), wx.data());
      } else {
        ny = grid::Taps(c, gd[2 * q + 1], h, iy.data(), wy.data());
        nx = grid::Taps(c, gd[2 * q], w, ix.data(), wx.data());
      }
      std::array<int64_t, grid::kMaxTaps * grid::kMaxTaps> offset;
      std::array<float, grid::kMaxTaps * grid::kMaxTaps> weight;
      int taps = 0;
      for (int a = 0; a < ny; ++a) {
        for (int b = 0; b < nx; ++b) {
          if (iy[static_cast<size_t>(a)] < 0 || ix[static_cast<size_t>(b)] < 0) continue;  // a padding zero
          offset[static_cast<size_t>(taps)] = iy[static_cast<size_t>(a)] * w + ix[static_cast<size_t>(b)];
          weight[static_cast<size_t>(taps)] =
              static_cast<float>(wy[static_cast<size_t>(a)] * wx[static_cast<size_t>(b)]);
          ++taps;
        }
      }
      const float* image = xd + n * channels * plane;
      float* out = yd + n * channels * points + p;
      for (int64_t ch = 0; ch < channels; ++ch) {
        const float* src = image + ch * plane;
        float sum = 0;
        for (int t = 0; t < taps; ++t) sum += weight[static_cast<size_t>(t)] * src[offset[static_cast<size_t>(t)]];
        out[ch * points] = sum;
      }
    };
    g_runs.fetch_add(1, std::memory_order_relaxed);
    const int64_t total = n_count * points;
    // A thread for every 16K outputs begun.
    constexpr int64_t kMinPerThread = int64_t{1} << 14;
    const int64_t threads = std::min<int64_t>(omp_get_max_threads(), total * channels / kMinPerThread + 1);
    if (threads <= 1) {
      for (int64_t q = 0; q < total; ++q) point(q);
    } else {
#pragma omp parallel for num_threads(static_cast <int>(threads)) schedule(static)
      for (int64_t q = 0; q < total; ++q) point(q);
    }
    return absl::OkStatus();
  }

 private:
  std::optional<grid::Config> config_;  // none: attributes the reference rejects
};

}  // namespace

int64_t CpuGridSampleRuns() { return g_runs.load(std::memory_order_relaxed); }

absl::StatusOr<std::unique_ptr<Kernel>> MakeGridSample(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  absl::StatusOr<grid::Config> config = grid::ParseGridSample(node, info.opset);
  return std::unique_ptr<Kernel>(
      new GridSampleKernel(std::move(fallback), config.ok() ? std::optional<grid::Config>(*config) : std::nullopt));
}

}  // namespace onnxkit::runner::cpu
