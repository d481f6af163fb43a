// cpu Resize (opsets 10..19) on oneDNN's resampling primitive, for float32
// tensors of rank 3 to 5 whose N and C dims keep their size.
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
// Falls back to the reference kernel (which also reports every error) for
// cubic, linear with antialias, exclude_outside, tf_crop_and_resize, types
// other than float32, other ranks, resized N or C dims, empty tensors,
// geometries that do not agree, and inputs the reference rejects.
#include <algorithm>
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

class ResizeKernel : public CpuKernel {
 public:
  ResizeKernel(std::unique_ptr<Kernel> fallback, std::optional<rs::Config> config)
      : CpuKernel(std::move(fallback)), config_(std::move(config)) {}

  absl::Status Run(KernelContext& ctx) override {
    if (!config_ || NeverOnOneDnn(*config_)) return Fallback(ctx);
    absl::StatusOr<const Tensor*> input = ctx.Input(0);
    if (!input.ok()) return Fallback(ctx);
    const Tensor& x = **input;
    if (x.dtype() != pb::kFloat || x.rank() < 3 || x.rank() > 5 || x.size() == 0) return Fallback(ctx);
    // The output shape and scales as the reference resolves them (which
    // also reports unusable inputs).
    absl::StatusOr<rs::Geometry> geometry = rs::ResolveGeometry(ctx, *config_, x);
    if (!geometry.ok()) return Fallback(ctx);
    const std::vector<int64_t>& out = geometry->out_shape;
    const std::vector<double>& scales = geometry->scales;
    if (!decided_ || x.shape() != in_shape_ || out != out_shape_ || scales != scales_) {
      supported_ = Decide(x.shape(), out, scales);
      decided_ = true;
      in_shape_ = x.shape();
      out_shape_ = out;
      scales_ = scales;
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
  std::vector<double> scales_;
  // The primitive and the shapes it was built for.
  std::vector<int64_t> primitive_in_, primitive_out_;
  memory::desc src_, dst_;
  dnnl::primitive primitive_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeResize(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  absl::StatusOr<reference::resize::Config> config = reference::resize::ParseResize(node, info.opset);
  return std::unique_ptr<Kernel>(new ResizeKernel(
      std::move(fallback),
      config.ok() ? std::optional<reference::resize::Config>(*std::move(config)) : std::nullopt));
}

}  // namespace onnxkit::runner::cpu
