// percentile: cut the tails of the histogram. Symmetric: the p-th percentile
// of |x| gives [-T, T]; asymmetric: (100 - p) / 2 percent off each tail.
#include <algorithm>

#include "quantization/calibrators.h"

namespace onnxkit::quant {
namespace {

// The upper edge of the first bin where the cumulative count reaches `q`
// (a share of the total).
size_t EdgeAt(const std::vector<double>& hist, double q) {
  double total = 0;
  for (double c : hist) total += c;
  double acc = 0;
  for (size_t i = 0; i < hist.size(); ++i) {
    acc += hist[i];
    if (acc >= q * total) return i + 1;
  }
  return hist.size();
}

}  // namespace

Range PercentileRange(const TensorRange& t, double percentile, bool symmetric) {
  double p = std::clamp(percentile, 0.0, 100.0) / 100.0;
  const double n = static_cast<double>(t.hist.size());
  if (symmetric) {
    double amax = 0;
    std::vector<double> abs = AbsHistogram(t, &amax);
    double thr = amax * static_cast<double>(EdgeAt(abs, p)) / n;
    return Range{std::max(t.min, -thr), std::min(t.max, thr)};
  }
  const double width = (t.max - t.min) / n;
  double tail = (1 - p) / 2;
  std::vector<double> rev(t.hist.rbegin(), t.hist.rend());
  double lo = t.min + width * static_cast<double>(t.hist.size() - EdgeAt(rev, 1 - tail));
  double hi = t.min + width * static_cast<double>(EdgeAt(t.hist, 1 - tail));
  // The low edge: bins below it hold at most `tail` of the mass.
  return Range{std::max(t.min, lo), std::min(t.max, std::max(hi, lo))};
}

}  // namespace onnxkit::quant
