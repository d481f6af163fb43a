// entropy: the TensorRT threshold search. Over the histogram of |x| (2048
// bins), for each candidate threshold bin i >= 128: P = bins[0, i) with the
// clipped mass added to its last bin; Q = P's bins merged into 128 levels
// (256 when the tensor is never negative) and spread back evenly over the
// bins that were non-zero; the threshold minimizing KL(P || Q) wins (the
// last of equal ones). The range is [-T, T] clamped to the observed range.
#include <algorithm>
#include <cmath>
#include <limits>

#include "quantization/calibrators.h"

namespace onnxkit::quant {
namespace {

double KlDivergence(const std::vector<double>& bins, size_t i, size_t levels) {
  std::vector<double> p(bins.begin(), bins.begin() + static_cast<std::ptrdiff_t>(i));
  double outliers = 0;
  for (size_t j = i; j < bins.size(); ++j) outliers += bins[j];
  p[i - 1] += outliers;
  std::vector<double> q(i, 0.0);
  for (size_t g = 0; g < levels; ++g) {
    size_t start = g * i / levels, end = (g + 1) * i / levels;
    double mass = 0;
    size_t nonzero = 0;
    for (size_t j = start; j < end; ++j) {
      mass += bins[j];
      if (bins[j] != 0) ++nonzero;
    }
    if (nonzero == 0) continue;
    for (size_t j = start; j < end; ++j) q[j] = bins[j] != 0 ? mass / static_cast<double>(nonzero) : 0;
  }
  double sp = 0, sq = 0;
  for (size_t j = 0; j < i; ++j) {
    sp += p[j];
    sq += q[j];
  }
  if (sp <= 0 || sq <= 0) return std::numeric_limits<double>::infinity();
  double kl = 0;
  for (size_t j = 0; j < i; ++j) {
    if (p[j] <= 0) continue;
    if (q[j] <= 0) return std::numeric_limits<double>::infinity();
    double pj = p[j] / sp, qj = q[j] / sq;
    kl += pj * std::log(pj / qj);
  }
  return kl;
}

}  // namespace

Range EntropyRange(const TensorRange& t, bool symmetric) {
  double amax = 0;
  std::vector<double> bins = AbsHistogram(t, &amax);
  const size_t n = bins.size();
  const size_t levels = (!symmetric && t.min >= 0) ? 256 : 128;
  if (n <= levels || amax <= 0) return MinMaxRange(t);
  if (n > 1) bins[0] = bins[1];  // the spike of zeros after ReLU says nothing of the range
  double best = std::numeric_limits<double>::infinity();
  size_t best_i = n;
  for (size_t i = levels; i <= n; ++i) {
    double kl = KlDivergence(bins, i, levels);
    if (kl <= best) {
      best = kl;
      best_i = i;
    }
  }
  double thr = amax * static_cast<double>(best_i) / static_cast<double>(n);
  return Range{std::max(t.min, -thr), std::min(t.max, thr)};
}

}  // namespace onnxkit::quant
