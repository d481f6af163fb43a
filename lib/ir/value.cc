// ir::Value: kind names, use-list edits, graph-output query.
#include "lib/ir/value.h"

#include <algorithm>

#include "lib/io/proto_codec.h"
#include "lib/ir/graph.h"

namespace onnxkit::ir {

const char* ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kUndefined:
      return "undefined value";
    case ValueKind::kGraphInput:
      return "graph input";
    case ValueKind::kInitializer:
      return "initializer";
    case ValueKind::kNodeOutput:
      return "node output";
  }
  return "value";
}

bool SameDescription(const pb::ValueInfoProto& a, const pb::ValueInfoProto& b) {
  if (a.present != b.present || a.unknown_fields != b.unknown_fields || a.doc_string != b.doc_string)
    return false;
  if (a.type.has_value() != b.type.has_value()) return false;
  if (a.type && io::Encode(*a.type) != io::Encode(*b.type)) return false;
  if (a.metadata_props.size() != b.metadata_props.size()) return false;
  for (size_t i = 0; i < a.metadata_props.size(); ++i) {
    const auto& x = a.metadata_props[i];
    const auto& y = b.metadata_props[i];
    if (x.key != y.key || x.value != y.value || x.present != y.present ||
        x.unknown_fields != y.unknown_fields) {
      return false;
    }
  }
  return true;
}

bool Value::IsGraphOutput() const {
  bool found = false;
  ForEachGraph(*static_cast<const Graph*>(graph_), [&](const Graph& g) {
    if (!found) found = std::find(g.outputs().begin(), g.outputs().end(), this) != g.outputs().end();
  });
  return found;
}

pb::ValueInfoProto& Value::mutable_info() {
  has_info_ = true;
  graph_->DropEntries(this, /*overrides_only=*/true);
  graph_->Touch();
  return info_;
}

bool Value::RemoveUse(Node* node, int index) {
  auto it = std::find(uses_.begin(), uses_.end(), Use{node, index});
  if (it == uses_.end()) return false;
  uses_.erase(it);
  return true;
}

}  // namespace onnxkit::ir
