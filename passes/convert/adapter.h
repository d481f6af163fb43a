// The adapter interface of `onnxkit convert`: one adapter moves one node
// across one version step of its operator (the since_version where ONNX
// changed it), up or down. Adapters are listed in adapters.def; a step
// without a row gets the generic check (steps.cc): types must be allowed at
// the target, added attributes must hold their defaults, inputs and outputs
// must fit the target's signature.
//
// An adapter that cannot convert its node returns Block(reason) and leaves
// the node untouched; the driver collects every blocked node.
#ifndef ONNXKIT_PASSES_CONVERT_ADAPTER_H_
#define ONNXKIT_PASSES_CONVERT_ADAPTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "lib/ir/ir.h"
#include "lib/ops/schema.h"
#include "passes/pass.h"

namespace onnxkit::passes::convert {

enum class Direction { kUp, kDown };

// One step of one node: from the schema `from` to the schema `to` (adjacent
// versions of the op; `to` is null when the op does not exist at the
// target side of the step, e.g. Gelu below 20).
struct Step {
  ir::Graph* graph = nullptr;
  ir::Node* node = nullptr;
  PassContext* ctx = nullptr;
  Direction direction = Direction::kUp;
  int64_t boundary = 0;  // since_version of the newer schema of the step
  int64_t target = 0;    // the opset the conversion goes to
  const ops::OpSchema* from = nullptr;
  const ops::OpSchema* to = nullptr;
  // Nodes an adapter created that still have to be converted further (an
  // expansion going down), with the opset they are written for.
  std::vector<ir::Node*>* created = nullptr;
  // Set by an adapter that removed `node` (replaced it by other nodes).
  bool replaced = false;
  // The generic step blocks when an input's formal name changes; adapters
  // that know the rename is harmless clear this.
  bool check_names = true;
};

// The status an adapter returns for a node it cannot convert.
absl::Status Block(std::string reason);
bool IsBlock(const absl::Status& status);

using AdapterFn = absl::Status (*)(Step& step);

struct AdapterRow {
  std::string_view op;
  int64_t boundary;  // since_version of the newer schema
  Direction direction;
  std::string_view name;  // kebab-case, reported in --json
  AdapterFn fn;
};

// The rows of adapters.def.
const std::vector<AdapterRow>& AllAdapters();
// The row for (op, boundary, direction); null when none.
const AdapterRow* FindAdapter(std::string_view op, int64_t boundary, Direction direction);

// The generic step (no adapter row): checks and no-op edits only.
absl::Status GenericStep(Step& step);

// --- Helpers adapters share (helpers.cc) ---

// Adds an int64 1-D initializer (or Constant in a function body).
absl::StatusOr<ir::Value*> AddInts(Step& step, std::string_view hint, const std::vector<int64_t>& v);
// Adds a scalar constant of `dtype` holding `v` (float or int types; for
// int types `v` must be a whole number in range, else a Block).
absl::StatusOr<ir::Value*> AddScalar(Step& step, std::string_view hint, int32_t dtype, double v);
// Adds an integer (or bool) scalar constant holding `v` exactly; a Block
// when `v` does not fit `dtype`.
absl::StatusOr<ir::Value*> AddIntScalar(Step& step, std::string_view hint, int32_t dtype, int64_t v);
// Adds a scalar constant of float type `elem` holding `v` (float16 and
// bfloat16 as a float constant and a Cast).
absl::StatusOr<ir::Value*> AddFloatScalar(Step& step, std::string_view hint, int32_t elem, double v);
// Whether `elem` is known and one of float, double, float16, bfloat16.
bool IsFloatElem(std::optional<int32_t> elem);
// The int64 values of constant input `i`; nullopt if absent or not constant.
std::optional<std::vector<int64_t>> ConstInts(Step& step, int i);
// Adds a node before step.node, with fresh output names from `hint`.
absl::StatusOr<ir::Node*> AddBefore(Step& step, std::string op, std::vector<ir::Value*> inputs, int num_outputs,
                                    std::vector<pb::AttributeProto> attrs = {});
// A one-output node before step.node (AddBefore); its output.
absl::StatusOr<ir::Value*> Op(Step& step, std::string op, std::vector<ir::Value*> inputs,
                              std::vector<pb::AttributeProto> attrs = {});
// Dims [start, end) of `x`'s shape, as a 1-D int64 value (Shape-15).
absl::StatusOr<ir::Value*> Dims(Step& step, ir::Value* x, int64_t start, int64_t end);
// Dim `axis` of `x`'s shape as an int64 scalar.
absl::StatusOr<ir::Value*> DimScalar(Step& step, ir::Value* x, int64_t axis);
// Routes output `i` of step.node to `value` (through an Identity, so that a
// graph output keeps its own producer); a graph output's name goes to
// `renames`, to be given to the Identity once the node is gone.
absl::Status RouteOutput(Step& step, int i, ir::Value* value,
                         std::vector<std::pair<ir::Value*, std::string>>& renames);
// GridSample-20 on 5-D inputs expanded into opset-19 ops (adapters_grid.cc).
absl::Status ExpandGridSampleNd(Step& step);
// Input `i` of step.node; null when absent or omitted.
ir::Value* PresentInput(const Step& step, int i);
// Dim `i` of `v` when known (and v not null).
std::optional<int64_t> KnownDim(Step& step, const ir::Value* v, size_t i);
// Rank of `value` when known.
std::optional<int64_t> RankOf(Step& step, const ir::Value* value);
// Replaces step.node by a chain whose final value is `result` (output 0):
// every use of node output 0 goes to `result`, and the node is removed
// (step.replaced is set).
absl::Status ReplaceNodeOutput(Step& step, ir::Value* result);
// ReplaceNodeOutput(result) for output 0 after routing each other output
// `i` to its value (RouteOutput); marks the node replaced.
absl::Status ReplaceNodeOutputs(Step& step, ir::Value* result,
                                const std::vector<std::pair<int, ir::Value*>>& others);
// Types `value` as a tensor of `elem` with the dims of `like` where known,
// so later steps (broadcast checks, expansions) see the shape of values
// adapters create.
void TypeLike(Step& step, ir::Value* value, int32_t elem, const ir::Value* like);
// Trims trailing omitted inputs of the node.
absl::Status TrimInputs(Step& step);

}  // namespace onnxkit::passes::convert

#endif  // ONNXKIT_PASSES_CONVERT_ADAPTER_H_
