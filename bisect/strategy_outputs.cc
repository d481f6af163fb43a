// outputs: keep only the cone of one graph output (the nodes that compute
// it), trying outputs in order. Cheap and large when a mismatch shows on one
// output of several.
#include <algorithm>

#include "bisect/strategies.h"

namespace onnxkit::bisect {

absl::Status ReduceOutputs(Reducer& r) {
  const pb::ModelProto& m = r.current();
  if (!m.graph || m.graph->output.size() < 2) return absl::OkStatus();
  std::vector<std::vector<int>> cones;
  for (const auto& out : m.graph->output) {
    std::vector<int> cone = ConeOf(*m.graph, {out.name});
    if (!cone.empty() && static_cast<int>(cone.size()) < r.nodes()) cones.push_back(std::move(cone));
  }
  std::sort(cones.begin(), cones.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
  auto first = r.TryFirst(static_cast<int>(cones.size()), [&](int i) { return r.WithNodes(cones[static_cast<size_t>(i)]); });
  return first.status();
}

}  // namespace onnxkit::bisect
