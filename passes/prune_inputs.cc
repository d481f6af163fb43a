// prune-inputs: removes main-graph inputs nothing uses. This changes the
// model's interface (callers must stop feeding them), so it is not part of
// the default pipeline.
// Before: main(%x, %unused, %w = initializer listed as input) { %y = Relu(%x) }
// After:  main(%x) { %y = Relu(%x) }
//
// Decisions:
//   - Only the main graph of a model: inputs of If/Loop/Scan bodies are
//     positional, and function inputs are the function's signature.
//   - An input that is also a graph output stays (the model passes it
//     through).
//   - An unused initializer listed as an input (IR < 4, an overridable
//     default) loses both its input entry and its data.
//   - Allow is anchored at the graph's first node; a main graph without
//     nodes keeps its inputs.
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

bool IsUnusedInput(const ir::Value& value) { return !value.has_uses() && !value.IsGraphOutput(); }

class PruneInputs : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    if (graph.model() == nullptr || graph.parent() != nullptr) return false;
    if (graph.nodes().empty()) return false;
    const ir::Node* anchor = *graph.nodes().begin();
    std::vector<ir::Value*> unused;
    for (ir::Value* in : graph.inputs()) {
      if (IsUnusedInput(*in)) unused.push_back(in);
    }
    bool changed = false;
    for (ir::Value* in : unused) {
      if (!ctx.Allow(*anchor, absl::StrCat("unused input '", in->name(), "'"))) continue;
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, in));
      changed = true;
    }
    return changed;
  }

 private:
  static absl::Status Rewrite(ir::Graph& graph, ir::Value* input) {
    bool initializer = input->kind() == ir::ValueKind::kInitializer;
    // Unlisting an initializer keeps it as a constant: drop that too.
    ONNXKIT_RETURN_IF_ERROR(graph.RemoveInput(input));
    if (initializer) ONNXKIT_RETURN_IF_ERROR(graph.RemoveInitializer(input));
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Pass> CreatePruneInputs() { return std::make_unique<PruneInputs>(); }

}  // namespace onnxkit::passes
