// subgraphs: replace an If node by the nodes of its then (or else) branch,
// branch outputs renamed onto the If's outputs through Identity nodes and
// branch initializers moved to the main graph. Loop and Scan bodies are
// kept whole (the node stays or goes as one unit under ddmin).
//   Before: y = If(c) { then: t = Add(x, w) -> t } { else: e = Neg(x) -> e }
//   After:  t = Add(x, w); y = Identity(t)
#include "bisect/strategies.h"

namespace onnxkit::bisect {
namespace {

absl::StatusOr<pb::ModelProto> InlineIf(const pb::ModelProto& model, size_t index, const std::string& branch) {
  pb::ModelProto out = model;
  pb::GraphProto& g = out.graph.mutable_value();
  const pb::NodeProto node = g.node[index];
  const pb::GraphProto* body = nullptr;
  for (const auto& a : node.attribute) {
    if (a.name == branch && a.g) body = &*a.g;
  }
  if (body == nullptr || body->output.size() != node.output.size()) {
    return absl::InvalidArgumentError("no such branch");
  }
  std::vector<pb::NodeProto> nodes(body->node.begin(), body->node.end());
  for (size_t j = 0; j < node.output.size(); ++j) {
    if (node.output[j].empty()) continue;
    pb::NodeProto id;
    id.op_type = "Identity";
    id.name = node.name + "/inlined_" + std::to_string(j);
    id.input.push_back(body->output[j].name);
    id.output.push_back(node.output[j]);
    nodes.push_back(std::move(id));
  }
  for (const auto& t : body->initializer) g.initializer.push_back(t);
  g.node.erase(g.node.begin() + static_cast<std::ptrdiff_t>(index));
  g.node.insert(g.node.begin() + static_cast<std::ptrdiff_t>(index), nodes.begin(), nodes.end());
  return out;
}

}  // namespace

absl::Status InlineSubgraphs(Reducer& r) {
  for (bool again = true; again && !r.OutOfBudget();) {
    again = false;
    const pb::GraphProto& g = *r.current().graph;
    std::vector<std::pair<size_t, std::string>> tries;
    for (size_t i = 0; i < g.node.size(); ++i) {
      if (g.node[i].op_type == "If" && g.node[i].domain.empty()) {
        tries.emplace_back(i, "then_branch");
        tries.emplace_back(i, "else_branch");
      }
    }
    pb::ModelProto base = r.current();
    auto got = r.TryFirst(static_cast<int>(tries.size()), [&](int k) {
      return InlineIf(base, tries[static_cast<size_t>(k)].first, tries[static_cast<size_t>(k)].second);
    });
    if (!got.ok()) return got.status();
    again = *got >= 0;
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::bisect
