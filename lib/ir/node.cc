// ir::Node and ir::Attribute: attribute access and subgraph attachment.
#include "lib/ir/node.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "lib/base/strings.h"
#include "lib/ir/graph.h"
#include "lib/ir/node_labels.h"

namespace onnxkit::ir {

Attribute::Attribute() = default;
Attribute::Attribute(pb::AttributeProto p) : proto(std::move(p)) {}
Attribute::Attribute(Attribute&&) noexcept = default;
Attribute& Attribute::operator=(Attribute&&) noexcept = default;
Attribute::~Attribute() = default;

namespace {
std::atomic<uint64_t> next_node_serial{1};
}  // namespace

Node::Node(Graph* graph) : graph_(graph), serial_(next_node_serial.fetch_add(1, std::memory_order_relaxed)) {}

Node::~Node() = default;

const Attribute* Node::FindAttribute(std::string_view name) const {
  for (const Attribute& a : attributes_) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

Attribute* Node::FindAttribute(std::string_view name) {
  for (Attribute& a : attributes_) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

std::optional<int64_t> Node::GetInt(std::string_view name) const {
  const Attribute* a = FindAttribute(name);
  if (a == nullptr || a->type() != pb::kAttrInt) return std::nullopt;
  return a->proto.i;
}

std::optional<float> Node::GetFloat(std::string_view name) const {
  const Attribute* a = FindAttribute(name);
  if (a == nullptr || a->type() != pb::kAttrFloat) return std::nullopt;
  return a->proto.f;
}

std::optional<std::string> Node::GetString(std::string_view name) const {
  const Attribute* a = FindAttribute(name);
  if (a == nullptr || a->type() != pb::kAttrString) return std::nullopt;
  return a->proto.s;
}

std::optional<std::vector<int64_t>> Node::GetInts(std::string_view name) const {
  const Attribute* a = FindAttribute(name);
  if (a == nullptr || a->type() != pb::kAttrInts) return std::nullopt;
  return a->proto.ints;
}

void Node::DropAttributeUses(Attribute& a) {
  if (a.g) Graph::DropUsesIn(a.g.get());
  for (auto& g : a.graphs) Graph::DropUsesIn(g.get());
}

void Node::SetAttribute(pb::AttributeProto attr) {
  attr.g.reset();
  attr.graphs.clear();
  graph_->Touch();
  for (Attribute& a : attributes_) {
    if (a.name() == attr.name) {
      DropAttributeUses(a);
      a = Attribute(std::move(attr));
      return;
    }
  }
  attributes_.emplace_back(std::move(attr));
}

bool Node::RemoveAttribute(std::string_view name) {
  for (auto it = attributes_.begin(); it != attributes_.end(); ++it) {
    if (it->name() != name) continue;
    DropAttributeUses(*it);
    attributes_.erase(it);
    graph_->Touch();
    return true;
  }
  return false;
}

Graph* Node::AddSubgraph(std::string attr_name) {
  Attribute a;
  a.proto.name = std::move(attr_name);
  a.proto.type = pb::kAttrGraph;
  a.g = std::make_unique<Graph>();
  a.g->parent_ = graph_;
  a.g->owner_node_ = this;
  graph_->Root()->has_subgraphs_ = true;
  Graph* g = a.g.get();
  graph_->Touch();
  for (Attribute& old : attributes_) {
    if (old.name() == a.name()) {
      DropAttributeUses(old);
      old = std::move(a);
      return g;
    }
  }
  attributes_.push_back(std::move(a));
  return g;
}

std::vector<Graph*> Node::Subgraphs() const {
  std::vector<Graph*> out;
  for (const Attribute& a : attributes_) {
    if (a.g) out.push_back(a.g.get());
    for (const auto& g : a.graphs) out.push_back(g.get());
  }
  return out;
}

namespace {
std::string UnnamedLabel(int index, const Node& node) {
  return absl::StrCat("#", index, " (", Sv(node.op_type()), ")");
}
}  // namespace

std::string NodeLabel(const Node& node) {
  if (!node.name().empty()) return absl::StrCat("'", Sv(node.name()), "' (", Sv(node.op_type()), ")");
  int index = 0;
  if (node.graph() != nullptr) {
    for (const Node* n : node.graph()->nodes()) {
      if (n == &node) break;
      ++index;
    }
  }
  return UnnamedLabel(index, node);
}

std::string NodeLabels::Of(const Node& node) {
  if (!node.name().empty() || node.graph() == nullptr) return NodeLabel(node);
  auto [it, added] = positions_.try_emplace(node.graph());
  if (added) {
    int index = 0;
    for (const Node* n : node.graph()->nodes()) it->second.emplace(n, index++);
  }
  auto at = it->second.find(&node);
  return at == it->second.end() ? NodeLabel(node) : UnnamedLabel(at->second, node);
}

}  // namespace onnxkit::ir
