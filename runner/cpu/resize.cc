// cpu Resize (opsets 10..19) and Upsample (Resize-10's geometry) on oneDNN's resampling primitive, for
// float32 tensors of rank 3 to 5 whose N and C dims keep their size.
//
// oneDNN maps output coordinate y of an axis resized from `in` to `out` to
// the source coordinate s = (y + 0.5) * in / out - 0.5, computed in float:
// resampling_nearest reads element roundf(s) (ties away from zero),
// resampling_linear blends elements max(trunc(s), 0) and min(ceil(s), in - 1)
// with weights 1 - w and w = s - max(trunc(s), 0). That is ONNX's half_pixel
// transform (pytorch_half_pixel where the output size is above 1,
// half_pixel_symmetric where the output size is scale * in); oneDNN's
// nearest rounds ties up like round_prefer_ceil. Other attribute pairs
// agree on some geometries only: asymmetric with floor (Resize-10) under
// integer upscale factors k, where (y + 0.5) / k - 0.5 stays within 0.5 of
// floor(y / k); round_prefer_floor where no source coordinate is a tie;
// align_corners where in == out. Given scales enter ONNX's coordinate
// formula as given, while oneDNN uses out / in with out = floor(scale * in).
//
// So the kernel decides per geometry (input shape, output shape, scales),
// axis by axis: it computes the source elements and weights the reference
// kernel uses for every output coordinate (reference::resize::AxisTaps) and
// those oneDNN uses (the float formulas above), and runs oneDNN only when
// they agree: nearest reads the same element everywhere (the output is then
// an exact copy of the reference's), linear reads the same elements with
// weights within kWeightTolerance (the float rounding of s). N and C must
// map to themselves. Linear geometries where oneDNN multiplies an element
// by a zero weight (integral source coordinates, which the reference reads
// as one element), or reads elements the reference does not, go to the
// reference when the input holds an infinity or NaN (0 * inf is NaN).
//
// Geometries oneDNN does not share (align_corners, asymmetric, cubic,
// antialias, exclude_outside, tf_crop_and_resize, scales that are not
// out / in...) run on the backend's own loops when only the last two axes
// change size: the reference's taps and weights per output row and column
// (reference::resize::AxisTaps), each output row a blend of its taps' input
// rows, then each output element a blend of that row's columns, in float
// (the reference sums the products of the weights in double: values may
// differ in the last bits); planes and rows split among the threads.
// Inputs holding an infinity or NaN run on the reference there (its
// zero-weight taps make NaN of them; the row blends would not always).
//
// Falls back to the reference kernel (which also reports every error) for
// types other than float32, ranks below 2, empty tensors, geometries that
// resize an axis before the last two, and inputs the reference rejects.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/conv.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/resize_geometry.h"

namespace onnxkit::runner::cpu {
namespace {

using dnnl::memory;

namespace rs = reference::resize;

// How far oneDNN's linear weights (float) may be from the reference's
// (double): the float rounding of source coordinates up to ~16.
constexpr double kWeightTolerance = 1.0 / (1 << 20);
// oneDNN's resampling kernels address a plane with 32-bit byte offsets.
constexpr int64_t kMaxPlaneElements = int64_t{1} << 28;

// True when no geometry of this configuration can run on oneDNN.
bool NeverOnOneDnn(const rs::Config& c) {
  return c.mode == rs::Mode::kCubic || c.antialias || c.exclude_outside ||
         c.coord == rs::Coord::kTfCropAndResize;
}

// The elements (at most 2, possibly the same) oneDNN's resampling reads for
// output coordinate y of a spatial axis, and their weights (its formulas,
// in float).
rs::Taps OneDnnTaps(rs::Mode mode, int64_t y, int64_t in, int64_t out) {
  float s = (static_cast<float>(y) + 0.5f) * static_cast<float>(in) / static_cast<float>(out) - 0.5f;
  rs::Taps t;
  if (mode == rs::Mode::kNearest) {
    t.index = {static_cast<int64_t>(std::roundf(s))};
    t.weight = {1};
    return t;
  }
  int64_t trunc = static_cast<int64_t>(s);
  int64_t ceil = s < 0 ? 0 : static_cast<float>(trunc) == s ? trunc : trunc + 1;
  int64_t lo = std::max<int64_t>(trunc, 0);
  float w1 = std::fabs(s - static_cast<float>(lo));
  t.index = {lo, std::min(ceil, in - 1)};
  t.weight = {1.f - w1, w1};
  return t;
}

double WeightOf(const rs::Taps& t, int64_t index) {
  double w = 0;
  for (size_t k = 0; k < t.index.size(); ++k) w += t.index[k] == index ? t.weight[k] : 0.0;
  return w;
}

// Whether oneDNN computes the reference's result along one axis; `spatial`
// false: an N or C axis, which oneDNN copies. Clears *finite_safe where
// oneDNN weighs an element by zero or reads one the reference does not.
bool AxisAgrees(const rs::Config& c, int64_t in, int64_t out, double scale, bool spatial, bool* finite_safe) {
  if (!spatial && in != out) return false;
  std::vector<rs::Taps> reference = rs::AxisTaps(c, in, out, scale, 0.0, 1.0);
  for (int64_t y = 0; y < out; ++y) {
    const rs::Taps& ref = reference[static_cast<size_t>(y)];
    rs::Taps dnnl;
    if (spatial) {
      dnnl = OneDnnTaps(c.mode, y, in, out);
    } else {
      dnnl.index = {y};
      dnnl.weight = {1};
    }
    if (ref.outside || ref.index.empty()) return false;
    for (int64_t i : dnnl.index) {
      if (i < 0 || i >= in) return false;
    }
    for (const rs::Taps* t : {&ref, static_cast<const rs::Taps*>(&dnnl)}) {
      for (int64_t i : t->index) {
        if (std::fabs(WeightOf(ref, i) - WeightOf(dnnl, i)) > kWeightTolerance) return false;
      }
    }
    for (size_t k = 0; k < dnnl.index.size(); ++k) {
      bool read_by_reference =
          std::find(ref.index.begin(), ref.index.end(), dnnl.index[k]) != ref.index.end();
      if (dnnl.weight[k] == 0 || !read_by_reference) *finite_safe = false;
    }
  }
  return true;
}

// True when no element of the n floats at p is an infinity or NaN.
bool AllFinite(const float* p, int64_t n) {
  uint32_t special = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + i, sizeof bits);
    special |= (bits & 0x7f800000u) == 0x7f800000u;
  }
  return special == 0;
}

// The own loops' plan for one geometry: the taps of the last two axes,
// each coordinate given the same number (the most any has; the others
// padded with zero weights on their first tap).
struct TapPlan {
  int64_t planes = 0, in_h = 1, in_w = 0, out_h = 1, out_w = 0;
  int rows_k = 1, cols_k = 1;
  std::vector<int64_t> row_index, col_index;  // out_h x rows_k, out_w x cols_k
  std::vector<float> row_weight, col_weight;
  std::vector<uint8_t> row_outside, col_outside;  // tf_crop_and_resize past the input
  float extrapolation = 0;
  bool nearest = false;
};

// Lays one axis's taps out as `k` per coordinate; false when a coordinate
// has none.
bool FlattenTaps(const std::vector<rs::Taps>& taps, int* k, std::vector<int64_t>* index,
                 std::vector<float>* weight, std::vector<uint8_t>* outside) {
  size_t most = 1;
  for (const rs::Taps& t : taps) {
    if (!t.outside && t.index.empty()) return false;
    most = std::max(most, t.index.size());
  }
  *k = static_cast<int>(most);
  index->assign(taps.size() * most, 0);
  weight->assign(taps.size() * most, 0.f);
  outside->assign(taps.size(), 0);
  for (size_t o = 0; o < taps.size(); ++o) {
    const rs::Taps& t = taps[o];
    (*outside)[o] = t.outside;
    if (t.outside) continue;
    for (size_t j = 0; j < most; ++j) {
      (*index)[o * most + j] = t.index[j < t.index.size() ? j : 0];
      (*weight)[o * most + j] = j < t.index.size() ? static_cast<float>(t.weight[j]) : 0.f;
    }
  }
  return true;
}

// The plan of the own loops for X of `in` resized to `out`; nullopt when an
// axis before the last two changes (or is not read one to one).
std::optional<TapPlan> PlanTaps(const rs::Config& c, const std::vector<int64_t>& in,
                                const std::vector<int64_t>& out, const rs::Geometry& g) {
  const size_t rank = in.size();
  if (rank < 2) return std::nullopt;
  TapPlan p;
  p.planes = 1;
  for (size_t d = 0; d + 2 < rank; ++d) {
    if (in[d] != out[d]) return std::nullopt;
    std::vector<rs::Taps> taps = rs::AxisTaps(c, in[d], out[d], g.scales[d], g.roi_start[d], g.roi_end[d]);
    for (int64_t o = 0; o < out[d]; ++o) {
      const rs::Taps& t = taps[static_cast<size_t>(o)];
      if (t.outside || t.index.empty() || t.index[0] != o || t.weight[0] != 1) return std::nullopt;
      for (size_t j = 1; j < t.index.size(); ++j) {
        if (t.weight[j] != 0) return std::nullopt;
      }
    }
    p.planes *= in[d];
  }
  const size_t hd = rank - 2, wd = rank - 1;
  // Planes past oneDNN's bound go to the reference, whose allocation of the
  // output reports sizes that cannot be (before any taps are laid out).
  if (out[hd] <= 0 || out[wd] <= 0 || out[hd] >= kMaxPlaneElements / out[wd]) return std::nullopt;
  p.in_h = in[hd];
  p.in_w = in[wd];
  p.out_h = out[hd];
  p.out_w = out[wd];
  if (!FlattenTaps(rs::AxisTaps(c, in[hd], out[hd], g.scales[hd], g.roi_start[hd], g.roi_end[hd]), &p.rows_k,
                   &p.row_index, &p.row_weight, &p.row_outside) ||
      !FlattenTaps(rs::AxisTaps(c, in[wd], out[wd], g.scales[wd], g.roi_start[wd], g.roi_end[wd]), &p.cols_k,
                   &p.col_index, &p.col_weight, &p.col_outside)) {
    return std::nullopt;
  }
  p.extrapolation = static_cast<float>(c.extrapolation);
  p.nearest = c.mode == rs::Mode::kNearest;
  return p;
}

// Output row `oy` of plane x (in_h x in_w) into y (out_w), `blend` scratch
// of in_w floats.
void ResizeRow(const TapPlan& p, const float* x, int64_t oy, float* blend, float* y) {
  const size_t ky = static_cast<size_t>(p.rows_k), kx = static_cast<size_t>(p.cols_k);
  if (p.row_outside[static_cast<size_t>(oy)]) {
    std::fill(y, y + p.out_w, p.extrapolation);
    return;
  }
  const int64_t* ri = p.row_index.data() + static_cast<size_t>(oy) * ky;
  const float* rw = p.row_weight.data() + static_cast<size_t>(oy) * ky;
  const float* row;
  if (p.nearest) {
    row = x + ri[0] * p.in_w;
  } else {
    const float* first = x + ri[0] * p.in_w;
    const float w0 = rw[0];
    for (int64_t i = 0; i < p.in_w; ++i) blend[i] = w0 * first[i];
    for (size_t k = 1; k < ky; ++k) {
      const float* r = x + ri[k] * p.in_w;
      const float wk = rw[k];
      for (int64_t i = 0; i < p.in_w; ++i) blend[i] += wk * r[i];
    }
    row = blend;
  }
  const int64_t* ci = p.col_index.data();
  const float* cw = p.col_weight.data();
  for (int64_t o = 0; o < p.out_w; ++o) {
    const size_t at = static_cast<size_t>(o) * kx;
    if (p.col_outside[static_cast<size_t>(o)]) {
      y[o] = p.extrapolation;
      continue;
    }
    if (p.nearest) {
      y[o] = row[ci[at]];
      continue;
    }
    float sum = 0;
    for (size_t k = 0; k < kx; ++k) sum += cw[at + k] * row[ci[at + k]];
    y[o] = sum;
  }
}

std::atomic<int64_t> g_own_resize_runs{0};

void RunTapPlan(const TapPlan& p, const float* x, float* y) {
  g_own_resize_runs.fetch_add(1, std::memory_order_relaxed);
  const int64_t rows = p.planes * p.out_h, in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  // A thread for every 64K outputs begun.
  constexpr int64_t kMinPerThread = int64_t{1} << 16;
  const int threads =
      static_cast<int>(std::min<int64_t>(omp_get_max_threads(), rows * p.out_w / kMinPerThread + 1));
  // (One thread: no OpenMP region, see ParallelFor.)
  auto rows_of = [&](int64_t first, int64_t last) {
    std::vector<float> blend(static_cast<size_t>(p.in_w));
    for (int64_t r = first; r < last; ++r) {
      const int64_t plane = r / p.out_h, oy = r % p.out_h;
      ResizeRow(p, x + plane * in_plane, oy, blend.data(), y + plane * out_plane + oy * p.out_w);
    }
  };
  if (threads <= 1) {
    rows_of(0, rows);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) rows_of(rows * t / threads, rows * (t + 1) / threads);
}

class ResizeKernel : public CpuKernel {
 public:
  ResizeKernel(std::unique_ptr<Kernel> fallback, std::optional<rs::Config> config)
      : CpuKernel(std::move(fallback)), config_(std::move(config)) {}

  absl::Status Run(KernelContext& ctx) override {
    if (!config_) return Fallback(ctx);
    absl::StatusOr<const Tensor*> input = ctx.Input(0);
    if (!input.ok()) return Fallback(ctx);
    const Tensor& x = **input;
    if (x.dtype() != pb::kFloat || x.rank() < 2 || x.size() == 0) return Fallback(ctx);
    // The output shape and scales as the reference resolves them (which
    // also reports unusable inputs).
    absl::StatusOr<rs::Geometry> geometry = rs::ResolveGeometry(ctx, *config_, x);
    if (!geometry.ok()) return Fallback(ctx);
    const std::vector<int64_t>& out = geometry->out_shape;
    const std::vector<double>& scales = geometry->scales;
    if (!decided_ || x.shape() != in_shape_ || out != out_shape_ || scales != scales_ ||
        geometry->roi_start != roi_start_ || geometry->roi_end != roi_end_) {
      supported_ =
          !NeverOnOneDnn(*config_) && x.rank() >= 3 && x.rank() <= 5 && Decide(x.shape(), out, scales);
      taps_.reset();
      if (!supported_) taps_ = PlanTaps(*config_, x.shape(), out, *geometry);
      decided_ = true;
      in_shape_ = x.shape();
      out_shape_ = out;
      scales_ = scales;
      roi_start_ = geometry->roi_start;
      roi_end_ = geometry->roi_end;
    }
    if (taps_) {
      if (!AllFinite(x.data<float>(), x.size())) return Fallback(ctx);
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, out));
      RunTapPlan(*taps_, x.data<float>(), y->mutable_data<float>());
      return absl::OkStatus();
    }
    if (!supported_) return Fallback(ctx);
    if (!finite_safe_ && !AllFinite(x.data<float>(), x.size())) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, out));
    std::unordered_map<int, memory> args;
    ONNXKIT_RETURN_IF_ERROR(Guard("resampling memory", [&] {
      args[DNNL_ARG_SRC] = UserMemory(x, src_);
      args[DNNL_ARG_DST] = UserMemory(*y, dst_);
    }));
    return Execute("resampling", primitive_, args);
  }

 private:
  // Whether oneDNN computes the reference's result for this geometry; builds
  // the primitive (kept while the shapes stay) when it does.
  bool Decide(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
              const std::vector<double>& scales) {
    int64_t in_plane = 1, out_plane = 1;
    for (size_t d = 2; d < in.size(); ++d) {
      if (out[d] <= 0) return false;
      in_plane *= in[d];
      out_plane *= out[d];
      if (in_plane >= kMaxPlaneElements || out_plane >= kMaxPlaneElements) return false;
    }
    finite_safe_ = true;
    for (size_t d = 0; d < in.size(); ++d) {
      bool safe = true;
      if (!AxisAgrees(*config_, in[d], out[d], scales[d], d >= 2, &safe)) return false;
      finite_safe_ = finite_safe_ && safe;
    }
    if (primitive_ && in == primitive_in_ && out == primitive_out_) return true;
    primitive_ = dnnl::primitive();
    src_ = PlainDesc(in, memory::data_type::f32);
    dst_ = PlainDesc(out, memory::data_type::f32);
    dnnl::algorithm alg = config_->mode == rs::Mode::kNearest ? dnnl::algorithm::resampling_nearest
                                                              : dnnl::algorithm::resampling_linear;
    absl::Status s = Guard("resampling", [&] {
      dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference, alg, src_, dst_);
      primitive_ = dnnl::resampling_forward(dnnl::resampling_forward::primitive_desc(d, Engine()));
    });
    if (!s.ok()) {
      primitive_ = dnnl::primitive();
      return false;
    }
    primitive_in_ = in;
    primitive_out_ = out;
    return true;
  }

  std::optional<rs::Config> config_;  // none: attributes the reference rejects
  // The geometry decided last and the decision.
  bool decided_ = false;
  bool supported_ = false;
  bool finite_safe_ = true;  // oneDNN also matches on inputs with Inf/NaN
  std::vector<int64_t> in_shape_, out_shape_;
  std::vector<double> scales_, roi_start_, roi_end_;
  std::optional<TapPlan> taps_;  // the own loops' plan, where oneDNN does not fit
  // The primitive and the shapes it was built for.
  std::vector<int64_t> primitive_in_, primitive_out_;
  memory::desc src_, dst_;
  dnnl::primitive primitive_;
};

}  // namespace

int64_t OwnResizeRuns() { return g_own_resize_runs.load(std::memory_order_relaxed); }

namespace {

// The kernel for a Resize or Upsample node whose attributes parsed to
// `config` (an error leaves every run to the reference kernel, which
// reports it).
absl::StatusOr<std::unique_ptr<Kernel>> MakeResizeKernel(const ir::Node& node, const KernelInfo& info,
                                                         absl::StatusOr<reference::resize::Config> config) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  return std::unique_ptr<Kernel>(new ResizeKernel(
      std::move(fallback),
      config.ok() ? std::optional<reference::resize::Config>(*std::move(config)) : std::nullopt));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeResize(const ir::Node& node, const KernelInfo& info) {
  return MakeResizeKernel(node, info, reference::resize::ParseResize(node, info.opset));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeUpsample(const ir::Node& node, const KernelInfo& info) {
  return MakeResizeKernel(node, info, reference::resize::ParseUpsample(node, info.opset));
}

}  // namespace onnxkit::runner::cpu
