// The inference engine: walks a model's graphs in topological order, types
// each node's outputs (schema, then the op's shape function), compares them
// with the declared types, and records issues. Internal to lib/infer;
// InferModel (infer.h) is the public entry point, InferredTypes the one tests
// use to look at what was inferred.
#ifndef ONNXKIT_LIB_INFER_ENGINE_H_
#define ONNXKIT_LIB_INFER_ENGINE_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "lib/infer/context.h"
#include "lib/infer/infer.h"
#include "lib/infer/types.h"
#include "lib/ir/model.h"
#include "lib/ops/schema.h"

namespace onnxkit::infer {

// At most this many issues are recorded per model (the checker keeps at
// most checker::kMaxDiagnostics diagnostics per file anyway).
inline constexpr size_t kMaxIssues = 10000;

class Engine : public SubgraphInferrer {
 public:
  explicit Engine(const ir::Model& model);

  // Infers the main graph (and, through the nodes, every body).
  void Run();

  // Types of the outputs of a node that has no schema (a custom domain's
  // op), from its inputs' states: one entry per output, nullopt where
  // unknown. Without one, such outputs stay unknown.
  using OpaqueTyper = std::function<std::vector<std::optional<Type>>(
      const ir::Node& node, const std::vector<const ValueState*>& inputs)>;
  void set_opaque_typer(OpaqueTyper typer) { opaque_typer_ = std::move(typer); }

  const std::vector<InferenceIssue>& issues() const { return issues_; }
  // The state of every value inferred, by name (all graphs; names are
  // unique in a model's graph tree).
  std::map<std::string, ValueState> States() const;

  std::vector<Type> InferBody(const ir::Graph& body, const std::vector<Type>& inputs) override;

 private:
  // Infers `graph`: its inputs get `inputs` (merged with their declared
  // types; null: the declared types), initializers their tensors' types.
  void InferGraph(const ir::Graph& graph, const std::vector<Type>* inputs);
  void InferNode(const ir::Node& node);
  void CheckOutputConstraints(const ops::OpSchema& schema, const ir::Node& node, NodeContext& ctx);
  // Inputs whose type only inference knows: allowed by their formal, and
  // the same type wherever a type variable binds them.
  // True when it reported one (the node's outputs are then not checked).
  bool CheckInputConstraints(const ops::OpSchema& schema, const ir::Node& node, NodeContext& ctx);
  // Stores `inferred` for `value` after comparing it with the declared type.
  // `location` is called only when an issue is reported (a node's label can walk
  // its graph).
  void Settle(const ir::Value* value, ValueState inferred, absl::FunctionRef<std::string()> location);
  void CheckGraphOutputs(const ir::Graph& graph);
  // The state of `value`, created from its declared type when missing.
  const ValueState* StateOf(const ir::Value* value);
  void Report(IssueKind rule, std::string location, std::string message);
  std::string GraphLocation(const ir::Graph& graph) const;
  std::string NodeLocation(const ir::Node& node) const;

  const ir::Model& model_;
  OpaqueTyper opaque_typer_;
  // (canonical domain, name) of the model-local functions: their calls are opaque.
  std::set<std::pair<std::string, std::string>> functions_;
  // Values are never removed, so pointers to states stay valid.
  std::unordered_map<const ir::Value*, ValueState> states_;
  std::vector<const ir::Value*> order_;  // values in the order they got a state
  std::unordered_set<const ir::Value*> reported_;  // values with a conflict already reported
  std::vector<InferenceIssue> issues_;
};

// What inference found for every value of `model`, by name, as types with
// shapes (for tests and tools); empty when ir::FromProto refuses the model.
std::map<std::string, pb::TypeProto> InferredTypes(const pb::ModelProto& model);

}  // namespace onnxkit::infer

#endif  // ONNXKIT_LIB_INFER_ENGINE_H_
