// `onnxkit bisect --optimize`: names the first rewrite of the optimizer
// that moves the outputs (passes::Optimize's binary search over the bisect
// limit, with verification), and writes the model just before and just
// after that rewrite.
#ifndef ONNXKIT_BISECT_OPTIMIZE_BISECT_H_
#define ONNXKIT_BISECT_OPTIMIZE_BISECT_H_

#include <filesystem>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "passes/optimize.h"

namespace onnxkit::bisect {

struct OptimizeBisectResult {
  std::optional<passes::Culprit> culprit;  // none: the optimized outputs match
  int64_t verify_runs = 0;
  double seconds = 0;
};

// Writes before.onnx, after.onnx (= model.onnx), repro.sh and report.json
// into `output_dir` when a culprit is found.
absl::StatusOr<OptimizeBisectResult> BisectOptimize(const std::string& model_path,
                                                    const passes::OptimizeOptions& options,
                                                    const std::filesystem::path& output_dir,
                                                    const std::string& onnxkit_binary);

}  // namespace onnxkit::bisect

#endif  // ONNXKIT_BISECT_OPTIMIZE_BISECT_H_
