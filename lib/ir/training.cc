#include "lib/ir/training.h"

#include "lib/ir/graph.h"
#include "lib/ir/node.h"

namespace onnxkit::ir {

bool DifferentiatedByGradient(const Graph& graph) {
  for (const Node* node : graph.nodes()) {
    if (node->op_type() == "Gradient" && node->domain() == "ai.onnx.preview.training") return true;
  }
  return false;
}

}  // namespace onnxkit::ir
