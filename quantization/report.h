// The quantized model's error against float, measured by running both on
// held-out samples: per quantized activation (the float tensor against its
// DequantizeLinear output, captured by name with observers) and per graph
// output (with top-1 agreement along the last axis).
#ifndef ONNXKIT_QUANTIZATION_REPORT_H_
#define ONNXKIT_QUANTIZATION_REPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/io/model_io.h"
#include "quantization/calibration.h"
#include "quantization/qdq.h"
#include "runner/kernel_registry.h"

namespace onnxkit::quant {

// Error accumulated over samples: sums, so the metrics of several samples
// are those of their concatenation.
struct ErrorStats {
  double signal = 0, noise = 0, dot = 0, actual = 0, max_abs = 0;
  int64_t rows = 0, top1_match = 0;  // top-1 along the last axis (graph outputs)
  // clamp_zero: compare with max(expected, 0) (a range narrowed by a Relu).
  void Add(const runner::Tensor& expected, const runner::Tensor& actual, bool top1, bool clamp_zero = false);
  double sqnr_db() const;   // capped at 200 (identical tensors)
  double cosine() const;
  double top1() const;      // -1 when not measured
};

struct TensorError {
  const ActivationRecord* record;
  ErrorStats stats;
};

struct OutputError {
  std::string name;
  ErrorStats stats;
};

struct ErrorReport {
  std::vector<TensorError> tensors;  // record order
  std::vector<OutputError> outputs;
  double min_output_sqnr() const;
  double min_output_cosine() const;  // 1 without outputs
};

class Evaluator {
 public:
  // Runs the float model on every sample of `holdout` once, keeping its
  // outputs (samples are rebuilt on demand).
  // A run past `timeout_seconds` (0: none) fails.
  static absl::StatusOr<std::unique_ptr<Evaluator>> Create(const io::LoadedModel& float_model,
                                                           const SampleSource* holdout,
                                                           runner::Backend backend,
                                                           double timeout_seconds = 0);
  // Output errors of `qdq` (reference backend); with `records`, also the
  // error of every quantized activation (the float model runs again).
  absl::StatusOr<ErrorReport> Evaluate(const pb::ModelProto& qdq, const std::vector<ActivationRecord>* records) const;

 private:
  Evaluator() = default;
  const io::LoadedModel* float_model_ = nullptr;
  const SampleSource* holdout_ = nullptr;
  runner::Backend backend_ = runner::Backend::kCpu;
  double timeout_seconds_ = 0;
  std::vector<std::vector<runner::RtValue>> expected_;
  std::vector<std::string> output_names_;
};

}  // namespace onnxkit::quant

#endif  // ONNXKIT_QUANTIZATION_REPORT_H_
