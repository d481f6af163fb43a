// Helpers shared by the fuse-* passes: op and use tests that stay inside one
// graph, constant scalars and float tensors as doubles, Conv weights, and
// putting one new node in place of a matched pattern. The normalization
// patterns have their own helpers in passes/fuse_norm_util.h.
#ifndef ONNXKIT_PASSES_FUSE_UTIL_H_
#define ONNXKIT_PASSES_FUSE_UTIL_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/ir/ir.h"
#include "passes/pass.h"
#include "runner/tensor.h"

namespace onnxkit::passes {

// True when `node` is non-null and the ai.onnx op `op`.
bool IsOp(const ir::Node* node, std::string_view op);
// The producer of `value` when it is the ai.onnx op `op` of `graph`; null
// otherwise (also for a null value).
ir::Node* ProducerOp(const ir::Value* value, std::string_view op, const ir::Graph& graph);
// The sole consumer of `value` (passes::SoleConsumer) when it is the ai.onnx
// op `op` and a node of `graph` itself (not of a subgraph); null otherwise.
ir::Node* ConsumerOp(const ir::Value& value, std::string_view op, const ir::Graph& graph);
// True when `value` is no graph output and each of its uses is by one of
// `users` (a pattern's intermediate that nothing else reads).
bool OnlyUsedBy(const ir::Value& value, std::initializer_list<const ir::Node*> users);
// For a node with two inputs, one of them `x`: the other one (x itself for
// f(x, x)); null when `x` is not an input or the node has another arity.
ir::Value* OtherInput(const ir::Node& node, const ir::Value* x);

// Float element types the folding passes compute with: float, float16, double.
bool IsFoldableFloat(int32_t dtype);
// The elements of a float, float16 or double tensor; nullopt for other types.
std::optional<std::vector<double>> ToDoubles(const runner::Tensor& t);
// A float, float16 or double tensor of `shape` holding `values`, each
// rounded once from double.
absl::StatusOr<runner::Tensor> FromDoubles(int32_t dtype, std::vector<int64_t> shape,
                                           const std::vector<double>& values);
// The constant behind `value` when it is of a foldable float type; nullopt
// otherwise (not constant, unreadable, other type).
std::optional<runner::Tensor> FloatConstant(const ir::Value* value, PassContext& ctx);

// A constant of one element and rank <= 1 (so that it never broadcasts a
// rank-1 or larger operand to a higher rank); nullopt otherwise.
std::optional<double> SmallScalar(const ir::Value* value, PassContext& ctx);
// True when SmallScalar(value) is within a relative 1e-4 of `expected`
// (1e-3 for a float16 and 5e-3 for a bfloat16 constant, whose rounding is
// coarser).
bool ScalarNear(const ir::Value* value, double expected, PassContext& ctx);

// Puts a node built from `spec` (its outputs are set here: one, named after
// `old_out`) in place of `old_out`: adds it before old_out's producer, moves
// every use of old_out to it (and the name, when old_out is a graph output
// or once old_out is gone), then removes each node of `matched` nothing uses
// any more. old_out must be a node output of `graph` whose producer has no
// other output in use (passes::CanReplace).
absl::StatusOr<ir::Node*> ReplaceWithNode(ir::Graph& graph, ir::NodeSpec spec, ir::Value* old_out,
                                          const std::vector<ir::Node*>& matched);
// Removes the initializer or Constant node behind `value` when it belongs
// to `graph` and nothing uses it any more (weights replaced by a fold).
absl::Status DropIfUnused(ir::Graph& graph, ir::Value* value);
// DropIfUnused on each distinct value of `values` (a value listed twice,
// such as one initializer feeding two inputs, is dropped once).
absl::Status DropAllIfUnused(ir::Graph& graph, const std::vector<ir::Value*>& values);
// ReplaceValue(graph, old_value, replacement), then gives `replacement` the
// name of old_value (when that name is free), so the fused result keeps the
// name the pattern's last output had.
absl::Status ReplaceKeepingName(ir::Graph& graph, ir::Value* old_value, ir::Value* replacement);

// The constant weights of a Conv as doubles: W of rank >= 3 with `channels`
// = W.dims[0] output channels, B of [channels] (zeros when absent).
struct ConvWeights {
  int32_t dtype = 0;
  std::vector<int64_t> w_shape;
  std::vector<double> w;
  std::vector<double> b;
  int64_t channels = 0;
  bool has_bias = false;
};
// Nullopt when `conv` is no Conv with constant float W (and B) of
// consistent shapes.
std::optional<ConvWeights> ReadConvWeights(const ir::Node& conv, PassContext& ctx);
// Makes new initializers of `weights` the W and B of `conv` (B written only
// when has_bias; appended when the Conv had none) and drops the old ones
// when nothing else uses them.
absl::Status WriteConvWeights(ir::Graph& graph, ir::Node& conv, const ConvWeights& weights);
// True when folding w' = w * factor[c], b' = b * factor[c] + shift[c] gives
// values finite in the weights' type wherever w and b were finite. An
// infinite factor or an overflow would change what the nodes compute (the
// unfused ops make +-inf or NaN only where the values reach them): the fold
// is then skipped.
bool FoldStaysFinite(const ConvWeights& weights, const std::vector<double>& factor,
                     const std::vector<double>& shift);

}  // namespace onnxkit::passes

#endif  // ONNXKIT_PASSES_FUSE_UTIL_H_
