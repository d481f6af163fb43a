// Topological order of a graph's nodes, computed on demand.
//
// Edges: a node depends on the producers (in the same graph) of its inputs
// and of every outer-scope value used inside its subgraphs, so ordering a
// parent graph respects what its If/Loop/Scan bodies read.
#ifndef ONNXKIT_LIB_IR_TOPO_H_
#define ONNXKIT_LIB_IR_TOPO_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/ir/graph.h"

namespace onnxkit::ir {

// The nodes of `graph` (not of its subgraphs) in a topological order. Stable:
// Kahn's algorithm taking, among ready nodes, the earliest in the current
// list order, so an already sorted graph keeps its order. A cycle gives
// InvalidArgument naming one node on the cycle.
absl::StatusOr<std::vector<Node*>> TopologicalOrder(const Graph& graph);

// Reorders the node list of `graph` (not of subgraphs) topologically; on a
// cycle the list is left unchanged and the error returned.
absl::Status SortTopologically(Graph& graph);

}  // namespace onnxkit::ir

#endif  // ONNXKIT_LIB_IR_TOPO_H_
