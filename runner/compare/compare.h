// Numerical comparison of two runtime values (outputs of two executions, or
// an execution against reference data): error metrics and a verdict against
// tolerances.
#ifndef ONNXKIT_RUNNER_COMPARE_COMPARE_H_
#define ONNXKIT_RUNNER_COMPARE_COMPARE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/value.h"

namespace onnxkit::runner {

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// Default tolerances by element type: float 1e-5/1e-4, double 1e-9/1e-7,
// float16 1e-3/1e-3, bfloat16 1e-2/1e-2, float8 types 1e-1/1e-1, integers,
// bools and strings exact.
Tolerance DefaultTolerance(int32_t dtype);

// Metrics of `actual` against `expected`. An element is within tolerance
// when |a - e| <= atol + rtol * |e|; NaN matches NaN, ±Inf match themselves.
struct Metrics {
  bool comparable = true;  // same kind, dtype and shape
  std::string mismatch;    // why not comparable
  int64_t elements = 0;
  double max_abs = 0, mean_abs = 0;
  double max_rel = 0;        // largest |a - e| / |e| where e is finite and not 0
  double cosine = 1;         // cosine similarity (1 for two all-zero tensors)
  double sqnr_db = 0;        // 10 log10(|e|^2 / |a-e|^2); +inf when equal
  int64_t out_of_tolerance = 0;
  int64_t nan_inf_mismatches = 0;
  int64_t worst_index = -1;  // linear index of the largest |a - e| (or first NaN/Inf mismatch)
  double worst_actual = 0, worst_expected = 0;
  bool within_tolerance = true;
  Tolerance tolerance;

  double share_out_of_tolerance() const {
    return elements == 0 ? 0 : static_cast<double>(out_of_tolerance) / static_cast<double>(elements);
  }
};

// Compares two values. Sequences compare element by element (metrics
// aggregated); optionals by presence then value; maps by keys then values.
Metrics CompareValues(const RtValue& actual, const RtValue& expected, std::optional<Tolerance> tolerance = std::nullopt);

// Human-readable one-line summary of metrics.
std::string FormatMetrics(const Metrics& m);

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_COMPARE_COMPARE_H_
