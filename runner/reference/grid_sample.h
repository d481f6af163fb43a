// The geometry of the reference GridSample kernel (shape_ops_sample.cc),
// shared with the fast kernel that must read the same pixels with the same
// weights: the attributes, and the input positions ("taps") and weights of
// a normalized grid coordinate along one axis.
#ifndef ONNXKIT_RUNNER_REFERENCE_GRID_SAMPLE_H_
#define ONNXKIT_RUNNER_REFERENCE_GRID_SAMPLE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "lib/ir/ir.h"

namespace onnxkit::runner::reference::grid {

enum class Mode { kLinear, kNearest, kCubic };
enum class Padding { kZeros, kBorder, kReflection };

struct Config {
  Mode mode = Mode::kLinear;
  Padding padding = Padding::kZeros;
  bool align_corners = false;
  bool only_4d = false;  // opset 16..19: 4-D inputs only
};

// The attributes of a GridSample node at `opset`; InvalidArgument for
// values outside the spec.
absl::StatusOr<Config> ParseGridSample(const ir::Node& node, int64_t opset);

// At most this many taps per axis (cubic).
constexpr int kMaxTaps = 4;

// The input positions (-1: a zero from the padding) and weights of
// normalized coordinate v on an axis of `len` pixels, in the reference's
// order; returns how many (1 nearest, 2 linear, 4 cubic). Nearest rounds
// half to even; a coordinate that is not finite reads as 0.
int Taps(const Config& c, double v, int64_t len, int64_t* index, double* weight);

}  // namespace onnxkit::runner::reference::grid

#endif  // ONNXKIT_RUNNER_REFERENCE_GRID_SAMPLE_H_
