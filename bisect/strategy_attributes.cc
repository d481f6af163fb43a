// attributes: drop node attributes one at a time (graph attributes of
// If/Loop/Scan are kept); a drop the schema forbids (a required attribute)
// is an invalid candidate and costs no oracle call. A candidate declares no
// dims for its outputs and no value_info (the drop may change shapes).
#include "bisect/strategies.h"

namespace onnxkit::bisect {

absl::Status DropAttributes(Reducer& r) {
  for (size_t n = 0; r.current().graph && n < r.current().graph->node.size() && !r.OutOfBudget(); ++n) {
    size_t a = 0;
    while (a < r.current().graph->node[n].attribute.size() && !r.OutOfBudget()) {
      const pb::AttributeProto& attr = r.current().graph->node[n].attribute[a];
      if (attr.g || !attr.graphs.empty()) {
        ++a;
        continue;
      }
      pb::ModelProto base = r.current();
      auto got = r.TryFirst(1, [&](int) -> absl::StatusOr<pb::ModelProto> {
        pb::ModelProto m = base;
        pb::GraphProto& g = m.graph.mutable_value();
        auto& attrs = g.node[n].attribute;
        attrs.erase(attrs.begin() + static_cast<std::ptrdiff_t>(a));
        // The dropped attribute (pads, strides, axes...) may change the
        // shapes downstream: declared dims would contradict them.
        g.value_info.clear();
        for (pb::ValueInfoProto& out : g.output) {
          if (out.type && out.type->tensor_type)
            out.type.mutable_value().tensor_type.mutable_value().shape.reset();
        }
        return m;
      });
      if (!got.ok()) return got.status();
      if (*got < 0) ++a;  // kept: next attribute; dropped: same index now names the next
    }
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::bisect
