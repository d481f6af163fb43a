// dce: removes nodes whose outputs nothing uses, and unused initializers.
// Before: %t = Neg(%x); %u = Relu(%t); %y = Abs(%x)   graph outputs (%y), initializers (%w unused)
// After:  %y = Abs(%x)                               graph outputs (%y)
//
// Decisions:
//   - A node is dead when none of its outputs has a use (in this graph or a
//     subgraph) or is a graph output. Nodes are visited last to first, so a
//     whole dead chain goes in one run. ONNX ops have no side effects, so
//     this holds for every domain, custom ones included. A node with no
//     outputs at all is kept: it can only exist for an effect outside ONNX.
//   - Initializers that are constant (not listed as graph inputs) go when
//     unused. An initializer listed as a graph input (IR < 4) is part of the
//     model's interface: dce keeps it, prune-inputs removes it.
//   - Graph inputs are never removed (prune-inputs does that for the main
//     graph; subgraph inputs are positional).
//   - PassContext::Allow needs an anchor node; removing an initializer is
//     anchored at the graph's first node, or the node owning the graph. A
//     main graph without nodes keeps its unused initializers.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

bool IsDead(const ir::Node& node) {
  if (node.num_outputs() == 0) return false;
  for (const ir::Value* out : node.outputs()) {
    if (out != nullptr && (out->has_uses() || out->IsGraphOutput())) return false;
  }
  return true;
}

bool IsDeadInitializer(const ir::Value& value) {
  return value.kind() == ir::ValueKind::kInitializer && !value.is_graph_input() && !value.has_uses() &&
         !value.IsGraphOutput();
}

// The node Allow is anchored at for a rewrite without a node of its own.
const ir::Node* GraphAnchor(const ir::Graph& graph) {
  if (!graph.nodes().empty()) return *graph.nodes().begin();
  return graph.owner_node();
}

class Dce : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    bool changed = false;
    std::vector<ir::Node*> nodes = SnapshotNodes(graph);
    // Last to first: removing a node can only make earlier nodes dead.
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      ir::Node* node = *it;
      if (!IsDead(*node)) continue;
      if (!ctx.Allow(*node, "dead node")) continue;
      ONNXKIT_RETURN_IF_ERROR(graph.RemoveNode(node));
      changed = true;
    }
    ONNXKIT_ASSIGN_OR_RETURN(bool removed, RemoveDeadInitializers(graph, ctx));
    return changed || removed;
  }

 private:
  static absl::StatusOr<bool> RemoveDeadInitializers(ir::Graph& graph, PassContext& ctx) {
    std::vector<ir::Value*> dead;
    for (ir::Value* v : graph.initializers()) {
      if (IsDeadInitializer(*v)) dead.push_back(v);
    }
    for (ir::Value* v : graph.sparse_initializers()) {
      if (IsDeadInitializer(*v)) dead.push_back(v);
    }
    bool changed = false;
    for (ir::Value* v : dead) {
      const ir::Node* anchor = GraphAnchor(graph);
      if (anchor == nullptr) break;
      if (!ctx.Allow(*anchor, absl::StrCat("unused initializer '", v->name(), "'"))) continue;
      ONNXKIT_RETURN_IF_ERROR(graph.RemoveInitializer(v));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateDce() { return std::make_unique<Dce>(); }

}  // namespace onnxkit::passes
