// minmax: the exact observed range; also the method table and the shared
// |x| histogram helper.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/base/strings.h"
#include "quantization/calibrators.h"

namespace onnxkit::quant {

Range MinMaxRange(const TensorRange& t) { return Range{t.min, t.max}; }

std::vector<double> AbsHistogram(const TensorRange& t, double* amax) {
  *amax = std::max(std::fabs(t.min), std::fabs(t.max));
  std::vector<double> out(t.hist.size(), 0.0);
  if (t.hist.empty() || *amax <= 0) return out;
  const double width = (t.max - t.min) / static_cast<double>(t.hist.size());
  const double n = static_cast<double>(out.size());
  for (size_t i = 0; i < t.hist.size(); ++i) {
    if (t.hist[i] == 0) continue;
    double centre = std::fabs(t.min + (static_cast<double>(i) + 0.5) * width);
    auto b = static_cast<int64_t>(centre / *amax * n);
    out[static_cast<size_t>(std::clamp<int64_t>(b, 0, static_cast<int64_t>(out.size()) - 1))] += t.hist[i];
  }
  return out;
}

Range ComputeRange(const TensorRange& t, const CalibratorOptions& options) {
  // Fewer values than bins: too sparse for a histogram search (a pooled
  // vector of a few dozen values), the exact range is best.
  if (t.hist.empty() || options.method == Method::kMinMax || t.max <= t.min ||
      t.count < static_cast<int64_t>(t.hist.size())) {
    return MinMaxRange(t);
  }
  switch (options.method) {
    case Method::kPercentile:
      return PercentileRange(t, options.percentile, options.symmetric);
    case Method::kEntropy:
      return EntropyRange(t, options.symmetric);
    case Method::kMse:
      return MseRange(t, options.symmetric);
    default:
      return MinMaxRange(t);
  }
}

absl::StatusOr<Method> ParseMethod(std::string_view name) {
  if (name == "minmax") return Method::kMinMax;
  if (name == "percentile") return Method::kPercentile;
  if (name == "entropy") return Method::kEntropy;
  if (name == "mse") return Method::kMse;
  return absl::InvalidArgumentError(
      absl::StrCat("--method '", Sv(name), "' is unknown; valid: minmax, percentile, entropy, mse"));
}

std::string_view MethodName(Method m) {
  switch (m) {
    case Method::kMinMax: return "minmax";
    case Method::kPercentile: return "percentile";
    case Method::kEntropy: return "entropy";
    case Method::kMse: return "mse";
  }
  return "minmax";
}

}  // namespace onnxkit::quant
