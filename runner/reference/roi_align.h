// RoiAlign's attributes, sampling grids and bilinear sample points as the
// kernels use them. Shared by the reference kernel (nn_roi.cc) and the cpu
// backend's (runner/cpu/common_ops.cc), so both sample a roi at the same
// points with the same weights and reject the same rois.
#ifndef ONNXKIT_RUNNER_REFERENCE_ROI_ALIGN_H_
#define ONNXKIT_RUNNER_REFERENCE_ROI_ALIGN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runner/kernel.h"

namespace onnxkit::runner::reference {

struct RoiAlignOptions {
  bool max_mode = false;
  bool half_pixel = true;  // false: output_half_pixel (opset 10's only mode)
  int64_t out_h = 1, out_w = 1, sampling_ratio = 0;
  double scale = 1;
};

// The node's attributes; InvalidArgument for modes that do not exist and
// non-positive output sizes.
absl::StatusOr<RoiAlignOptions> ParseRoiAlign(const ir::Node& node, const KernelInfo& info);

// A roi's sampling grid: its batch image, its corner and bin sizes in the
// feature map, and the sample points per bin on each axis.
struct RoiGrid {
  int64_t batch = 0;
  double x0 = 0, y0 = 0, bin_h = 0, bin_w = 0;
  int64_t grid_h = 0, grid_w = 0, points = 0;  // points: out_h * out_w * grid_h * grid_w, at most 2^22
};

// The grid of roi `ri` (coordinates `roi`: x1, y1, x2, y2; batch index `b`
// of `n` images), or the error that makes it unusable (a batch index out
// of range, an adaptive grid or a point count beyond bounds).
absl::StatusOr<RoiGrid> MakeRoiGrid(const RoiAlignOptions& o, int64_t ri, int64_t b, int64_t n, const double* roi);

// A bilinear sample point on an h x w plane: the offsets of its four
// corners and their weights (hy hx, hy lx, ly hx, ly lx); `zero` (a sample
// of value 0 that reads nothing) beyond one pixel outside.
struct RoiTap {
  int64_t o1 = 0, o2 = 0, o3 = 0, o4 = 0;
  double w1 = 0, w2 = 0, w3 = 0, w4 = 0;
  bool zero = true;
};

// Replaces `taps` with grid g's sample points on an h x w plane: bin by bin
// (out_h rows of out_w bins), each bin's grid_h x grid_w samples row by row.
void RoiTaps(const RoiAlignOptions& o, const RoiGrid& g, int64_t h, int64_t w, std::vector<RoiTap>& taps);

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_ROI_ALIGN_H_
