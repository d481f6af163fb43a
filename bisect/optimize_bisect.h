// `onnxkit bisect --optimize`: names the first rewrite of the optimizer
// that moves the outputs (passes::Optimize's binary search over the bisect
// limit, with verification), writes the model just before and just after
// that rewrite, and shrinks around it: the rewrite's node and its
// neighbours, cut from the model before it, still moved by the pipeline.
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
  int64_t nodes_before = 0;  // main-graph nodes of before.onnx
  int64_t nodes_after = 0;   // of model.onnx (the shrunk model, else after.onnx)
  bool shrunk = false;       // model.onnx is the small model around the rewrite
};

// Writes before.onnx, after.onnx, model.onnx (the shrunk model with
// test_data_set_0/, or after.onnx when shrinking failed), repro.sh and
// report.json into `output_dir` when a culprit is found. `repro_flags` are
// the optimize flags repro.sh passes ("--passes fuse-conv-bn --atol 0").
absl::StatusOr<OptimizeBisectResult> BisectOptimize(const std::string& model_path,
                                                    const passes::OptimizeOptions& options,
                                                    const std::filesystem::path& output_dir,
                                                    const std::string& onnxkit_binary,
                                                    const std::string& repro_flags = "");

struct ShrunkModel {
  pb::ModelProto model;
  std::filesystem::path inputs_dir;  // its test_data_set_0 (golden values), in scratch
  passes::Culprit culprit;           // the rewrite that moves the small model
};

// The culprit's node (found in `before` by the record's label, main graph
// only) grown by 1..3 hops of producers and consumers, made a model with
// golden values on the cut tensors (recorded on `before` with the
// verification inputs), the first such model that the same pipeline still
// moves by the same pass, less each neighbour it does not need. nullopt
// when none does or the node is not found.
absl::StatusOr<std::optional<ShrunkModel>> ShrinkAroundRewrite(const io::LoadedModel& before,
                                                               const passes::Culprit& culprit,
                                                               const passes::OptimizeOptions& options,
                                                               const std::filesystem::path& scratch);

}  // namespace onnxkit::bisect

#endif  // ONNXKIT_BISECT_OPTIMIZE_BISECT_H_
