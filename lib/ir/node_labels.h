// NodeLabels: ir::NodeLabel for many nodes of graphs that do not change in
// the meantime (a run's observer labelling every value's producer).
// NodeLabel counts an unnamed node's position on each call; this indexes
// each graph's positions once.
#ifndef ONNXKIT_LIB_IR_NODE_LABELS_H_
#define ONNXKIT_LIB_IR_NODE_LABELS_H_

#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "lib/ir/node.h"

namespace onnxkit::ir {

class NodeLabels {
 public:
  // NodeLabel(node), for a node whose graph has not changed since the
  // first label of that graph.
  std::string Of(const Node& node);

 private:
  std::map<const Graph*, absl::flat_hash_map<const Node*, int>> positions_;
};

}  // namespace onnxkit::ir

#endif  // ONNXKIT_LIB_IR_NODE_LABELS_H_
