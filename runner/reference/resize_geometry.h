// The geometry of the reference Resize / Upsample kernels (shape_ops_resize.cc),
// shared with fast kernels that must compute exactly what it computes:
// the attributes, the output shape and scales resolved from the inputs,
// and the input positions ("taps") and weights of every output coordinate
// of an axis.
#ifndef ONNXKIT_RUNNER_REFERENCE_RESIZE_GEOMETRY_H_
#define ONNXKIT_RUNNER_REFERENCE_RESIZE_GEOMETRY_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "runner/kernel.h"
#include "runner/tensor.h"

namespace onnxkit::runner::reference::resize {

enum class Mode { kNearest, kLinear, kCubic };
enum class Coord {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize
};
// kLegacy: Resize-10 and Upsample's nearest, which has no nearest_mode: the
// source coordinate rounded up on an axis that shrinks (scale < 1), down on
// every other axis, as the ONNX opset-10 Resize tests and ONNX Runtime read
// it (Resize-11's "floor" only where no axis shrinks).
enum class Rounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kLegacy };
enum class Policy { kStretch, kNotLarger, kNotSmaller };
// Where the scales come from: Upsample-1 attributes, Upsample-7 attribute,
// a scales input (Upsample-9/10, Resize-10), or Resize-11+ inputs.
enum class Form { kUpsample1, kUpsample7, kScalesInput, kResize };

struct Config {
  Form form = Form::kResize;
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  Rounding rounding = Rounding::kRoundPreferFloor;
  Policy policy = Policy::kStretch;
  double cubic_a = -0.75;
  double extrapolation = 0;
  bool exclude_outside = false;
  bool antialias = false;
  std::optional<std::vector<int64_t>> axes;
  std::vector<float> attr_scales;  // Upsample-1/7
};

// The attributes of a Resize / Upsample node at `opset`; InvalidArgument
// for values outside the spec.
absl::StatusOr<Config> ParseResize(const ir::Node& node, int64_t opset);
absl::StatusOr<Config> ParseUpsample(const ir::Node& node, int64_t opset);

// Per axis of X: the scale, the output size and the roi.
struct Geometry {
  std::vector<double> scales, roi_start, roi_end;
  std::vector<int64_t> out_shape;
};

// The geometry for input X of `ctx` (scales / sizes / roi read from the
// inputs); InvalidArgument naming what is wrong.
absl::StatusOr<Geometry> ResolveGeometry(KernelContext& ctx, const Config& c, const Tensor& x);
// The same from X's shape and the constant scales, sizes and roi (each
// null when absent); what `onnxkit convert` uses to expand a Resize.
absl::StatusOr<Geometry> ResolveGeometry(const Config& c, const std::vector<int64_t>& x_shape, const Tensor* scales,
                                         const Tensor* sizes, const Tensor* roi);

// The input positions and weights of one output coordinate of an axis;
// `outside` when tf_crop_and_resize maps it outside the input.
struct Taps {
  std::vector<int64_t> index;
  std::vector<double> weight;
  bool outside = false;
};

// The taps of every output coordinate of an axis of `in` elements resized
// to `out` (neighbors of the original coordinate, edge-clamped, as in the
// ONNX reference implementation).
std::vector<Taps> AxisTaps(const Config& c, int64_t in, int64_t out, double scale, double roi_start,
                           double roi_end);

// Every axis's taps flattened for kernels that sum them in float (the cuda
// Resize): per axis d, output coordinate c has count[d][c] taps (0: outside
// the input or none, the extrapolation value) starting at entry
// first[d][c] of offset[d] (input element offsets along the axis, its
// stride in a packed X of `x_shape` included) and weight[d] (1 for
// nearest). The output element is the sum over the product of the axes'
// taps of the weights' product times the input element.
struct FlatTaps {
  std::vector<std::vector<int64_t>> first, count, offset;
  std::vector<std::vector<float>> weight;
};
FlatTaps FlattenTaps(const Config& c, const std::vector<int64_t>& x_shape, const Geometry& g);

}  // namespace onnxkit::runner::reference::resize

#endif  // ONNXKIT_RUNNER_REFERENCE_RESIZE_GEOMETRY_H_
