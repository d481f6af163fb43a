// The quantize driver behind `onnxkit quantize`: calibrate (or take a
// saved calibration), insert QDQ, measure the error on held-out samples,
// and with a target SQNR keep the most sensitive layers in float until it
// is met (the best model found is returned either way).
#ifndef ONNXKIT_QUANTIZATION_QUANTIZE_H_
#define ONNXKIT_QUANTIZATION_QUANTIZE_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/io/model_io.h"
#include "quantization/blocked.h"
#include "quantization/calibration.h"
#include "quantization/qdq.h"
#include "quantization/report.h"

namespace onnxkit::quant {

// The default pre-processing: constants folded (weights behind
// Identity/Transpose become initializers that can be stored int8), and
// layout Transposes moved through the ops that ignore layout until they
// cancel (NHWC exports), so that fewer tensors are quantized on both sides
// of one; only reductions may sum in another order.
inline constexpr std::string_view kDefaultPreprocess =
    "fold,eliminate-identity,dce,push-transpose,merge-transpose";

struct QuantizeOptions {
  QdqOptions qdq;
  // Passes run before calibrating (passes/passes.def names; empty: none).
  std::string preprocess = std::string(kDefaultPreprocess);
  // --mode dynamic: MatMul weights int8 + DynamicQuantizeLinear/MatMulInteger;
  // no calibration (samples, when given, only measure the error).
  bool dynamic = false;
  // --weights-only: MatMul/Gemm weights blocked int4/int8 (blocked.h); no
  // calibration (samples, when given, only measure the error).
  bool weights_only = false;
  WeightsOnlyOptions weights_only_options;
  // A model importing an older ai.onnx opset is first converted to this
  // one (passes/convert); 0: never. FailedPrecondition when it cannot be.
  int64_t min_opset = 0;
  // A model importing an older ai.onnx opset than this is converted to it
  // first when it can be (static QDQ: per-channel weights need opset 13);
  // where the conversion is blocked the model keeps its opset (min_opset
  // still applies) and the result carries a warning.
  int64_t preferred_opset = 0;
  int holdout = 2;  // the last N samples measure the error (not calibrated on)
  std::optional<double> target_sqnr_db;
  // Every output's cosine similarity with float must reach this; with
  // target_sqnr_db both must hold. The fallback ranks by the worst margin,
  // a cosine c counted as -10 log10(1 - c) dB.
  std::optional<double> target_cosine;
  std::optional<Calibration> calibration;  // --load-calibration: skip calibrating
  runner::Backend backend = runner::Backend::kCpu;  // calibration and float runs
  double timeout_seconds = 0;                       // per run of a model (0: none)
  int bins = 2048;
  bool report_tensors = true;
  std::vector<std::pair<std::string, std::string>> metadata;  // added to metadata_props
  std::function<void(const std::string& stage, int index, int total)> progress;
};

struct Sensitivity {
  std::string node;
  double sqnr_db = 0;  // output SQNR with this node alone left in float
  double cosine = 0;   // the worst output's cosine with it
};

struct QuantizeResult {
  QdqResult qdq;
  Calibration calibration;
  ErrorReport report;
  std::vector<std::string> kept_float;  // --target-sqnr fallback, in the order chosen
  std::vector<Sensitivity> sensitivity;
  bool target_met = true;
  int calibration_samples = 0, holdout_samples = 0;
  std::string samples;  // description
  std::vector<std::string> warnings;
};

// `samples` may be null only with options.calibration, dynamic or weights_only, and then no error is
// measured. Errors: InvalidArgument (options, samples), FailedPrecondition
// (opset), the model failing to run (its status).
absl::StatusOr<QuantizeResult> Quantize(const io::LoadedModel& model, const SampleSource* samples,
                                        const QuantizeOptions& options);

}  // namespace onnxkit::quant

#endif  // ONNXKIT_QUANTIZATION_QUANTIZE_H_
