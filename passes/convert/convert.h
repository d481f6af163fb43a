// The convert driver behind `onnxkit convert`: moves a model's ai.onnx
// opset up or down, one operator version step at a time (adapters.def for
// the steps that change an op, a checked no-op for the others), in every
// graph (If/Loop/Scan bodies) and in model-local functions that import
// ai.onnx; sets the IR version the target opset requires; collects every
// node that blocks the conversion; then, when asked, moves float32 weights
// and computation to float16 or bfloat16 (precision.h) and brings external
// data inline (inline_data.h); proves the result by execution.
//
//   ConvertOptions o; o.target_opset = 13;
//   ONNXKIT_ASSIGN_OR_RETURN(ConvertResult r, Convert(loaded, o));
//   if (!r.blockers.empty()) ... each names its graph, node and reason
#ifndef ONNXKIT_PASSES_CONVERT_CONVERT_H_
#define ONNXKIT_PASSES_CONVERT_CONVERT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/io/model_io.h"
#include "passes/convert/inline_data.h"
#include "passes/convert/precision.h"
#include "passes/verify.h"

namespace onnxkit::passes::convert {

inline constexpr int64_t kMinTargetOpset = 7;
inline constexpr int64_t kMaxTargetOpset = 28;

inline constexpr int64_t kMinTargetMlOpset = 1;
inline constexpr int64_t kMaxTargetMlOpset = 5;

struct ConvertOptions {
  // 0: the opset stays as it is.
  int64_t target_opset = 0;
  // Target ai.onnx.ml opset (1..5); nullopt: ai.onnx.ml nodes stay as they are.
  std::optional<int64_t> target_ml_opset;
  // float32 -> float16 / bfloat16 after the opset step.
  std::optional<PrecisionOptions> precision;
  // Bring external data inline; refused past `max_inline_bytes`.
  bool inline_external_data = false;
  int64_t max_inline_bytes = limits::kMaxProtoBytes;
  // IR version of the result; nullopt: IrVersionForOpset(target_opset)
  // going down, and at least the model's own going up.
  std::optional<int64_t> ir_version;
  // Collect blockers and step counts only: no result model, no verification.
  bool dry_run = false;
  bool verify = true;
  VerifyOptions verify_options;
};

// A node that cannot be converted.
struct Blocker {
  std::string graph;  // "main", "main/'if' (If)/then_branch", "function 'f'"
  std::string node;   // NodeLabel
  std::string reason;
};

struct ConvertResult {
  pb::ModelProto model;  // the converted model (empty on dry runs or when blocked)
  int64_t source_opset = 0;
  int64_t target_opset = 0;
  // ai.onnx.ml opsets (0: the model imports none).
  int64_t source_ml_opset = 0, target_ml_opset = 0;
  int64_t ir_before = 0, ir_after = 0;
  std::vector<Blocker> blockers;
  // Steps applied, by "Op vA->vB adapter" ("generic" for checked no-ops).
  std::map<std::string, int64_t> steps;
  int64_t nodes_converted = 0;  // ai.onnx nodes visited (all graphs)
  std::vector<std::string> warnings;  // ops of other domains kept, ...
  bool verified = false;
  std::optional<VerifyResult> verification;
  std::string verify_inputs;
  std::optional<PrecisionReport> precision;
  std::optional<InlineReport> inlined;
};

// Converts `loaded` (its proto is copied). Errors: InvalidArgument for a
// target outside [kMinTargetOpset, kMaxTargetOpset] (0 aside) or an ml
// target outside [kMinTargetMlOpset, kMaxTargetMlOpset], a model importing
// no ai.onnx opset (an ai.onnx.ml-only model converting its ml opset aside)
// or asking for precision without one; ResourceExhausted when inlining would
// pass max_inline_bytes; the original failing to run when verifying; internal
// errors. Blocked nodes and outputs that differ are not errors: see
// `blockers` and `verified`.
absl::StatusOr<ConvertResult> Convert(const io::LoadedModel& loaded, const ConvertOptions& options);

// The IR version an ai.onnx opset needs (the ONNX release that introduced
// the opset): 7-8 -> 3, 9 -> 4, 10 -> 5, 11 -> 6, 12-14 -> 7, 15-18 -> 8,
// 19-20 -> 9, 21-22 -> 10, 23+ -> 11.
int64_t IrVersionForOpset(int64_t opset);
// The same for ai.onnx.ml: 1 -> 3, 2 -> 6, 3 -> 8, 4 -> 9, 5 -> 10.
int64_t IrVersionForMlOpset(int64_t opset);

}  // namespace onnxkit::passes::convert

#endif  // ONNXKIT_PASSES_CONVERT_CONVERT_H_
