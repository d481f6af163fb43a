// Precision conversion for `onnxkit convert --float16 / --bfloat16`: float32
// weights and computation of the main graph become float16 or bfloat16.
//
// What changes, per node of the main graph and of If/Loop/Scan bodies:
//   - a node is converted when its op is ai.onnx, not on the kept list
//     (KeptOpReason), not named by `keep_float32`, its schema at the model's
//     opset allows the target type for every float32 type parameter it binds,
//     and it does not compute on integer-derived floats (below); its float32
//     outputs become the target type;
//   - initializers and Constant values read only by converted nodes are
//     rewritten in the target type (values beyond its range clamped to its
//     largest finite value, each such tensor named in a warning); one read
//     by both kinds gets a converted copy;
//   - Cast(to=FLOAT) is retargeted to the target type unless every reader of
//     its output needs float32;
//   - a Cast is inserted only where a value crosses between a converted and
//     a kept node (or a graph input/output), one per value and type.
// Kept float32:
//   - graph inputs and outputs (with keep_io_types; off: float32 inputs and
//     outputs of the main graph take the target type);
//   - the inputs and outputs of If/Loop/Scan nodes and of their bodies (the
//     body's nodes are converted inside; outer values they read arrive
//     through a Cast where needed);
//   - model-local functions and nodes of other domains (called as they are);
//   - floats computed only from integers and constants (Cast from an integer
//     type, then arithmetic): shape and index arithmetic, exact in float32
//     but not in float16 past 2048;
//   - inputs whose formal type does not allow the target type (Resize scales)
//     or that carry coordinates (Resize roi);
//   - a group of would-be converted nodes that reads no weight (a constant
//     of more than 64 elements) and touches no main graph input or output:
//     between float32 nodes it would only add Casts;
//   - with observed magnitudes (the range guard, range_guard.h), a node that
//     would convert but reads or writes a float32 value outside the guard's
//     limits on the inputs the original ran on.
// Float32 values only: float64 and values already in the target type are left
// as they are, so converting a converted model changes nothing.
#ifndef ONNXKIT_PASSES_CONVERT_PRECISION_H_
#define ONNXKIT_PASSES_CONVERT_PRECISION_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "lib/infer/types.h"
#include "lib/io/external_data.h"
#include "lib/ir/ir.h"
#include "passes/convert/range_guard.h"

namespace onnxkit::passes::convert {

struct PrecisionOptions {
  int32_t target = 0;  // pb::kFloat16 or pb::kBfloat16
  bool keep_io_types = true;
  // Op types or node names that stay float32, on top of the kept list.
  std::vector<std::string> keep_float32;
  // Run the original once first and keep float32 the nodes whose float32
  // values pass the target's range (range_guard.h). Convert does the run.
  bool range_guard = true;
};

struct RangeGuardReport {
  bool applied = false;  // magnitudes were observed and used
  RangeLimits limits;    // RangeGuardLimits(target)
  // The nodes it kept float32 (NodeLabel), in pre-order; only nodes that
  // would have converted otherwise.
  std::vector<std::string> nodes;
};

struct PrecisionReport {
  int64_t nodes_converted = 0;
  // Nodes that touch float32 and stay float32, by reason ("kept list: Range",
  // "--keep-float32", "schema: no tensor(float16) at opset 11", ...).
  std::map<std::string, int64_t> kept;
  int64_t casts_inserted = 0;
  int64_t casts_retargeted = 0;
  int64_t tensors_converted = 0;  // initializers and Constant values
  int64_t tensor_bytes_before = 0, tensor_bytes_after = 0;
  // Tensors with values beyond the target range, with the count clamped.
  std::vector<std::pair<std::string, int64_t>> clamped;
  RangeGuardReport range_guard;
  std::vector<std::string> warnings;
};

// Why `op` (ai.onnx) stays float32 when converting to `target`; nullopt when
// it may be converted. The list, with reasons, is in precision_policy.cc.
std::optional<std::string_view> KeptOpReason(std::string_view op, int32_t target);

// Converts `model` (ai.onnx at `opset`) in place. `states` are the inferred
// value types (infer::Engine::States); `resolver` reads external data (may be
// null when the model has none); `observed` are the magnitudes of the range
// guard (null: no guard). Errors: a target that is not float16 or
// bfloat16 (InvalidArgument), unreadable tensor data, internal errors.
absl::Status ConvertPrecision(ir::Model& model, int64_t opset, const PrecisionOptions& options,
                              const std::map<std::string, infer::ValueState>& states,
                              io::ExternalDataResolver* resolver, const ValueMagnitudes* observed,
                              PrecisionReport* report);

// "float16" / "bfloat16".
const char* PrecisionName(int32_t target);

}  // namespace onnxkit::passes::convert

#endif  // ONNXKIT_PASSES_CONVERT_PRECISION_H_
