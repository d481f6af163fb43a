// mse: the range minimizing the quantization error of the histogram. The
// candidates shrink the observed range by k/256 (k = 1..256); each bin
// centre is fake-quantized with the candidate's scale and zero point
// (uint8 asymmetric, or int8 symmetric) and the count-weighted squared
// error is summed.
#include <algorithm>
#include <cmath>
#include <limits>

#include "quantization/calibrators.h"

namespace onnxkit::quant {

Range MseRange(const TensorRange& t, bool symmetric) {
  const size_t n = t.hist.size();
  const double width = (t.max - t.min) / static_cast<double>(n);
  const double amax = std::max(std::fabs(t.min), std::fabs(t.max));
  double best = std::numeric_limits<double>::infinity();
  Range best_range = MinMaxRange(t);
  for (int k = 256; k >= 1; --k) {
    double f = k / 256.0;
    double lo, hi, scale, zp, qmin, qmax;
    if (symmetric) {
      lo = -amax * f;
      hi = amax * f;
      qmin = -127;
      qmax = 127;
      scale = (hi - lo) / 254;
      zp = 0;
    } else {
      lo = std::min(t.min * f, 0.0);
      hi = std::max(t.max * f, 0.0);
      qmin = 0;
      qmax = 255;
      scale = (hi - lo) / 255;
      zp = std::nearbyint(-lo / (scale > 0 ? scale : 1));
    }
    if (scale <= 0) continue;
    double err = 0;
    for (size_t i = 0; i < n; ++i) {
      if (t.hist[i] == 0) continue;
      double c = t.min + (static_cast<double>(i) + 0.5) * width;
      double q = std::clamp(std::nearbyint(c / scale) + zp, qmin, qmax);
      double d = (q - zp) * scale - c;
      err += t.hist[i] * d * d;
    }
    if (err < best) {
      best = err;
      best_range = Range{std::max(t.min, lo), std::min(t.max, hi)};
    }
  }
  return best_range;
}

}  // namespace onnxkit::quant
