// lower-contrib: writes the com.microsoft ops ONNX Runtime's optimizer and
// QOperator quantizer emit (and its ai.onnx LayerNormalization below opset
// 17) as the standard ops they stand for, so that other runtimes can run the
// model. The rewrites are those of lib/ops/contrib_lowering.h, which the
// runner applies when it loads such a model.
// Before: %y = com.microsoft::FusedConv[activation = "Relu"](%x, %w, %b)
// After:  %c = Conv(%x, %w, %b); %y = Relu(%c)
//
// Decisions:
//   - Not in the default pipeline: for a model meant for ONNX Runtime the
//     contrib ops are its fast path. Run it first (--passes
//     lower-contrib,default) and the fusions that follow turn the written-out
//     patterns into LayerNormalization / Gelu where the opset has them.
//   - A node that cannot be written so (unknown element type or rank, an
//     op or form not covered) stays as it is.
//   - Model-local function bodies are not visited.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/ops/contrib_lowering.h"
#include "passes/pass_list.h"

namespace onnxkit::passes {
namespace {

class LowerContrib : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(int lowered, ops::LowerContribNodes(graph, [&](const ir::Node& node) {
                               return ctx.Allow(
                                   node, absl::StrCat(node.domain().empty() ? "ai.onnx" : node.domain(),
                                                      "::", node.op_type(), " as standard ops"));
                             }));
    return lowered > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateLowerContrib() { return std::make_unique<LowerContrib>(); }

}  // namespace onnxkit::passes
