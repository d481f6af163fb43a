// Calibrators: each turns what calibration recorded about a tensor (exact
// range, signed histogram over it) into the range [lo, hi] to quantize to.
// One file per method: minmax.cc, percentile.cc, entropy.cc, mse.cc.
#ifndef ONNXKIT_QUANTIZATION_CALIBRATORS_H_
#define ONNXKIT_QUANTIZATION_CALIBRATORS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "quantization/calibration.h"

namespace onnxkit::quant {

enum class Method { kMinMax, kPercentile, kEntropy, kMse };

struct Range {
  double lo = 0, hi = 0;
};

struct CalibratorOptions {
  Method method = Method::kMinMax;
  double percentile = 99.99;
  // The range is used symmetrically (int8 activations): methods search
  // over |x|.
  bool symmetric = false;
};

// The range of one tensor. Histogram methods fall back to min/max when the
// tensor has no histogram or fewer values than bins.
Range ComputeRange(const TensorRange& t, const CalibratorOptions& options);

Range MinMaxRange(const TensorRange& t);
Range PercentileRange(const TensorRange& t, double percentile, bool symmetric);
Range EntropyRange(const TensorRange& t, bool symmetric);
Range MseRange(const TensorRange& t, bool symmetric);

// The histogram of |x| in bins over [0, max(|min|, |max|)], re-binned from
// the signed histogram (each signed bin goes, by its centre, to one bin).
std::vector<double> AbsHistogram(const TensorRange& t, double* amax);

// "minmax" ... ; InvalidArgument listing the valid names.
absl::StatusOr<Method> ParseMethod(std::string_view name);
std::string_view MethodName(Method m);

}  // namespace onnxkit::quant

#endif  // ONNXKIT_QUANTIZATION_CALIBRATORS_H_
