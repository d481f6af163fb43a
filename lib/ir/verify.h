// Verify: the IR's own invariants, checked from scratch.
//
// Used by tests and, after each pass, by the pass manager (like LLVM's
// -verify-each). A failure is a bug in onnxkit (a pass or the IR), reported as
// Internal with the graph, node and value concerned.
#ifndef ONNXKIT_LIB_IR_VERIFY_H_
#define ONNXKIT_LIB_IR_VERIFY_H_

#include "absl/status/status.h"
#include "lib/ir/graph.h"
#include "lib/ir/model.h"

namespace onnxkit::ir {

// Checks, for the graph and every subgraph:
//   - owner pointers: node->graph(), value->graph(), subgraph parent and
//     owner node, the model's main graph;
//   - SSA: one value per name per graph; the name index matches the values;
//   - producers match outputs both ways;
//   - use lists match node inputs both ways (multiplicity included);
//   - every node input is defined and resolves, by name, to itself from the
//     node's graph (visible, not shadowed);
//   - graph inputs, initializers, outputs and value_info entries are
//     consistent with value kinds; graph outputs are defined and visible;
//   - nesting within limits::kMaxGraphDepth.
absl::Status Verify(const Graph& graph);
absl::Status Verify(const Model& model);

}  // namespace onnxkit::ir

#endif  // ONNXKIT_LIB_IR_VERIFY_H_
