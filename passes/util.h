// Helpers every pass shares: iterating over nodes while rewriting, reading
// constants, adding initializers, replacing values without renaming a
// graph's inputs or outputs.
#ifndef ONNXKIT_PASSES_UTIL_H_
#define ONNXKIT_PASSES_UTIL_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/ir/attributes.h"
#include "lib/ir/ir.h"
#include "passes/pass.h"
#include "runner/tensor.h"

namespace onnxkit::passes {

// The nodes of `graph` in order, as a copy (rewrites may remove nodes).
// Check IsLive before touching a node a previous rewrite may have removed.
std::vector<ir::Node*> SnapshotNodes(const ir::Graph& graph);
// True while `node` is still a node of `graph` (not removed by a rewrite);
// constant time (Graph::HasNode).
bool IsLive(const ir::Graph& graph, const ir::Node* node);

// The constant tensor behind `value`: an initializer that is not also a
// graph input (IR < 4 style inputs can be fed, so they are not constant),
// or the `value` attribute of the Constant node producing it. Null otherwise
// (also for Constant's value_float / value_ints ... forms: see ConstantTensor).
const pb::TensorProto* ConstantProto(const ir::Value& value);
// True when `value` is constant (ConstantProto, or a Constant node of any
// value_* form).
bool IsConstantValue(const ir::Value& value);
// The constant's data as a runner tensor (external data read through
// ctx.resolver()); NotFound when `value` is not constant.
absl::StatusOr<runner::Tensor> ConstantTensor(const ir::Value& value, PassContext& ctx);
// A constant scalar (or one-element tensor) as double; nullopt otherwise.
std::optional<double> ConstantScalar(const ir::Value& value, PassContext& ctx);

// Adds an initializer holding `t` to `graph` with a fresh name from `hint`
// (in a model-local function body, which holds no initializers, a Constant
// node at the start of the body).
absl::StatusOr<ir::Value*> AddConstant(ir::Graph& graph, std::string_view hint, const runner::Tensor& t);
// A Constant node holding `t`, placed before `anchor` (at the end when
// null), its output named from `hint`: for graphs that cannot take a new
// initializer (function bodies; IR < 4 graphs, which list every initializer
// as an input).
absl::StatusOr<ir::Value*> AddConstantNode(ir::Graph& graph, ir::Node* anchor, std::string_view hint,
                                           const runner::Tensor& t);

// Whether `old_value` (an output of a node of `graph`) can be replaced by
// `replacement` everywhere: always when old_value is no graph output; when
// it is one, only if `replacement` can take over its name (a node output of
// the same graph that is not itself a graph output).
// Lists every initializer of `graph` that is not a graph input as one,
// typed from its tensor where it has no type (IR < 4 requires this).
absl::Status ListInitializersAsInputs(ir::Graph& graph);
// The initializers of every subgraph below `graph` (If/Loop/Scan bodies)
// become Constant nodes at the start of their body, under the same names: a
// body cannot list them as inputs, which IR < 4 would require.
absl::Status BodyInitializersToConstants(ir::Graph& graph);

// Renames every value a subgraph defines under a name an enclosing graph
// defines too (shadowing, which ONNX forbids: check's E0301) to a fresh
// name; uses follow. Returns how many were renamed. Tools keyed by value
// name (calibration ranges, dumps) then tell the two apart.
absl::StatusOr<int> RenameShadowingValues(ir::Graph& root);

bool CanReplace(const ir::Value& old_value, const ir::Value& replacement);
// Replaces every use of `old_value` by `replacement`, then removes the
// producer of old_value if none of its outputs is used any more. When
// old_value was a graph output, `replacement` is renamed to its name (so
// graph outputs keep their names). Call CanReplace first.
absl::Status ReplaceValue(ir::Graph& graph, ir::Value* old_value, ir::Value* replacement);

// Removes `node` if no output of it is used or a graph output; returns
// whether it did.
absl::StatusOr<bool> RemoveIfDead(ir::Graph& graph, ir::Node* node);

// Known element type and dims of `value` from ctx.State or its declared type;
// nullopt when unknown. Dims: nullopt for an unknown rank, -1 for an unknown
// or symbolic dim.
std::optional<int32_t> ElemType(const ir::Value& value, const PassContext& ctx);
std::optional<std::vector<int64_t>> KnownShape(const ir::Value& value, const PassContext& ctx);

// The single consumer node of `value`, when exactly one node uses it once
// and it is not a graph output; null otherwise.
ir::Node* SoleConsumer(const ir::Value& value);

// Attribute builders (lib/ir/attributes.h), spelled here as the passes use them.
using ir::FloatAttr;
using ir::FloatsAttr;
using ir::IntAttr;
using ir::IntsAttr;
using ir::StringAttr;
using ir::StringsAttr;

}  // namespace onnxkit::passes

#endif  // ONNXKIT_PASSES_UTIL_H_
