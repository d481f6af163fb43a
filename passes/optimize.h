// The optimize driver behind `onnxkit optimize` (and `bisect --optimize`):
// pins input shapes, runs a pipeline with the pass manager, proves the
// result by execution, and when the outputs moved, names the first rewrite
// that moved them (a binary search over the bisect limit).
#ifndef ONNXKIT_PASSES_OPTIMIZE_H_
#define ONNXKIT_PASSES_OPTIMIZE_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/io/model_io.h"
#include "passes/manager.h"
#include "passes/pass.h"
#include "passes/verify.h"

namespace onnxkit::passes {

struct OptimizeOptions {
  std::vector<const PassInfo*> pipeline;
  ManagerOptions manager;  // base_dir is taken from the loaded model
  // --input-shape NAME=DIMS: main-graph inputs whose dims are pinned.
  std::vector<std::pair<std::string, std::vector<int64_t>>> input_shapes;
  // IR < 4 models list every initializer as a graph input. By default those
  // count as constants while optimizing (as ONNX Runtime treats them: IR < 4
  // cannot declare a constant any other way) and every initializer of the
  // result is listed as an input again; true keeps them feedable inputs.
  bool keep_initializer_inputs = false;
  bool verify = true;
  // Verify after every pass that changed the model, and stop at the first
  // that moved the outputs.
  bool verify_each = false;
  VerifyOptions verify_options;
};

// The rewrite that first moved the outputs beyond tolerance.
struct Culprit {
  std::string pass;
  int64_t rewrite = 0;  // its number (0 when it could not be narrowed)
  RewriteRecord record;
  std::string summary;  // how the outputs differ with that rewrite applied
};

struct OptimizeResult {
  pb::ModelProto model;  // the optimized model
  ManagerReport report;
  int64_t nodes_before = 0, nodes_after = 0;  // all graphs and functions
  std::map<std::string, int64_t> ops_before, ops_after;  // all graphs; "domain::Op" outside ai.onnx
  std::vector<std::string> pinned;  // "x: [1, 3, 224, 224]"
  bool verified = false;            // verification ran and the outputs match
  std::optional<VerifyResult> verification;
  std::string verify_inputs;        // what the verification ran on
  std::optional<Culprit> culprit;   // set when the outputs moved
  int64_t verify_runs = 0;          // executions of candidate models
};

// Optimizes `loaded` (its proto is copied; its folder and mapping serve
// external data). Errors: InvalidArgument for a bad --input-shape (exit 2),
// the original failing to run when verifying (exit 3), internal errors.
// Outputs that moved are not an error: `verified` is false and `culprit`
// names the rewrite.
absl::StatusOr<OptimizeResult> Optimize(const io::LoadedModel& loaded, const OptimizeOptions& options);

// What `run` does to a model before executing it on the cpu or cuda backend
// (runner::SessionOptions::rewrite): push-transpose and merge-transpose, in
// a model where some graph holds two Transposes or more, so that layout
// changes undoing each other (NHWC exports) are not executed; and in a
// model holding QuantizeLinear or DequantizeLinear, eliminate-identity and
// fold first (same-type Casts between them dropped, Constant nodes made
// initializers), so that the quantized chains fuse and hand 8-bit values to
// each other. Graph outputs keep their values (reductions may sum in
// another order). `base_dir` and `mapping` are the loaded model's.
absl::Status PrepareForRun(std::unique_ptr<ir::Model>& model, const std::filesystem::path& base_dir,
                           std::shared_ptr<const io::MappedFile> mapping);

// Parses "NAME=1x3x224x224" (also "NAME=1,3,224,224"); InvalidArgument.
absl::StatusOr<std::pair<std::string, std::vector<int64_t>>> ParseInputShape(const std::string& flag);

// Op histogram of every graph of the model and its functions.
std::map<std::string, int64_t> OpHistogram(const pb::ModelProto& model);

}  // namespace onnxkit::passes

#endif  // ONNXKIT_PASSES_OPTIMIZE_H_
