// ir::Graph: storage, lookup, entries, walks. Mutations are in
// graph_mutation.cc.
#include "lib/ir/graph.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "lib/base/strings.h"
#include "lib/ir/model.h"

namespace onnxkit::ir {

Graph::Graph() = default;
Graph::~Graph() = default;

int Graph::depth() const {
  int d = 0;
  for (const Graph* g = parent_; g != nullptr; g = g->parent_) ++d;
  return d;
}

Graph* Graph::Root() {
  Graph* g = this;
  while (g->parent_ != nullptr) g = g->parent_;
  return g;
}

uint64_t Graph::version() const {
  const Graph* g = this;
  while (g->parent_ != nullptr) g = g->parent_;
  return g->version_;
}

void Graph::Touch() { Root()->version_++; }

bool Graph::IsSelfOrDescendantOf(const Graph* g) const {
  for (const Graph* p = this; p != nullptr; p = p->parent_) {
    if (p == g) return true;
  }
  return false;
}

namespace {

pb::ValueInfoProto Entry(const Value* v, const Box<pb::ValueInfoProto>& own) {
  pb::ValueInfoProto e = own ? *own : v->info();
  e.name = v->name();
  return e;
}

}  // namespace

pb::ValueInfoProto Graph::InputEntry(int i) const {
  return Entry(inputs_[static_cast<size_t>(i)], input_entries_[static_cast<size_t>(i)]);
}
pb::ValueInfoProto Graph::OutputEntry(int i) const {
  return Entry(outputs_[static_cast<size_t>(i)], output_entries_[static_cast<size_t>(i)]);
}
pb::ValueInfoProto Graph::ValueInfoEntry(int i) const {
  return Entry(value_info_[static_cast<size_t>(i)], value_info_entries_[static_cast<size_t>(i)]);
}

Value* Graph::FindLocalValue(std::string_view name) const {
  auto it = index_.find(Sv(name));
  return it == index_.end() ? nullptr : it->second;
}

Value* Graph::FindValue(std::string_view name) const {
  Value* declared = nullptr;
  for (const Graph* g = this; g != nullptr; g = g->parent_) {
    Value* v = g->FindLocalValue(name);
    if (v == nullptr) continue;
    if (v->kind() != ValueKind::kUndefined) return v;
    if (declared == nullptr) declared = v;
  }
  return declared;
}

Node* Graph::FindNode(std::string_view name) const {
  for (Node* n : nodes()) {
    if (n->name() == name) return n;
  }
  return nullptr;
}

bool Graph::NameInUse(std::string_view name) const {
  const Graph* root = this;
  while (root->parent_ != nullptr) root = root->parent_;
  bool found = false;
  ForEachGraph(*root, [&](const Graph& g) {
    if (!found) found = g.FindLocalValue(name) != nullptr;
  });
  return found;
}

std::string Graph::FreshName(std::string_view hint) {
  Graph* root = Root();
  if (root->names_ == nullptr) {
    root->names_ = std::make_unique<NameGenerator>();
    ReserveGraphNames(*root, root->names_.get());
    if (root->model_ != nullptr) {
      for (const pb::FunctionProto& f : root->model_->functions()) {
        ReserveFunctionNames(f, root->names_.get());
      }
    }
  }
  return root->names_->Fresh(hint, [root](std::string_view n) { return root->NameInUse(n); });
}

void Graph::ReserveName(std::string_view name) {
  Graph* root = Root();
  if (root->names_ != nullptr) root->names_->Reserve(name);
}

Value* Graph::NewValue(std::string name, ValueKind kind) {
  values_.push_back(std::unique_ptr<Value>(new Value(this, std::move(name), kind)));
  Value* v = values_.back().get();
  v->pos_ = std::prev(values_.end());
  IndexValue(v);
  return v;
}

void Graph::DeleteValue(Value* value) {
  UnindexValue(value);
  values_.erase(value->pos_);
}

void Graph::IndexValue(Value* value) {
  if (!value->name().empty()) index_[value->name()] = value;
}

void Graph::UnindexValue(Value* value) {
  auto it = index_.find(Sv(value->name()));
  if (it != index_.end() && it->second == value) index_.erase(it);
}

Node* Graph::NewNode(Position where) {
  auto it = nodes_.end();
  if (where.kind == Position::Kind::kBefore) it = where.anchor->pos_;
  if (where.kind == Position::Kind::kAfter) it = std::next(where.anchor->pos_);
  it = nodes_.insert(it, std::unique_ptr<Node>(new Node(this)));
  node_set_.insert(it->get());
  (*it)->pos_ = it;
  return it->get();
}

void Graph::DropUsesIn(Graph* graph) {
  for (Node* n : graph->nodes()) {
    for (int i = 0; i < n->num_inputs(); ++i) {
      if (n->input(i) != nullptr) n->input(i)->RemoveUse(n, i);
    }
    n->ForEachSubgraph([](Graph* sub) { DropUsesIn(sub); });
  }
}

void Graph::DropEntries(const Value* value, bool overrides_only) {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (inputs_[i] == value) input_entries_[i].reset();
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (outputs_[i] == value) output_entries_[i].reset();
  }
  for (size_t i = value_info_.size(); i-- > 0;) {
    if (value_info_[i] != value) continue;
    if (overrides_only) {
      value_info_entries_[i].reset();
    } else {
      value_info_.erase(value_info_.begin() + static_cast<std::ptrdiff_t>(i));
      value_info_entries_.erase(value_info_entries_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  if (!MayHoldSubgraphs()) return;
  for (Node* n : nodes()) {
    n->ForEachSubgraph([&](Graph* sub) { sub->DropEntries(value, overrides_only); });
  }
}

std::string Graph::Label() const { return absl::StrCat("graph '", Sv(name_), "'"); }

absl::Status Graph::CheckVisible(const Value* value, std::string_view what) const {
  if (value == nullptr) return absl::InvalidArgumentError(absl::StrCat(Label(), ": ", Sv(what), " is null"));
  if (value->kind() == ValueKind::kUndefined) {
    return absl::InvalidArgumentError(
        absl::StrCat(Label(), ": ", Sv(what), " '", Sv(value->name()), "' is declared but not defined"));
  }
  if (value->name().empty() || FindValue(value->name()) != value) {
    return absl::InvalidArgumentError(absl::StrCat(Label(), ": ", Sv(what), " '", Sv(value->name()),
                                                   "' is not visible here (it belongs to ",
                                                   value->graph()->Label(), ")"));
  }
  return absl::OkStatus();
}

absl::Status Graph::CheckNewName(std::string_view name) const {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(Label(), ": empty value name"));
  if (NameInUse(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Label(), ": name '", Sv(name), "' is already used in the model"));
  }
  return absl::OkStatus();
}

absl::Status Graph::CheckOwnNode(const Node* node) const {
  if (node == nullptr || node->graph() != this) {
    return absl::NotFoundError(absl::StrCat(Label(), ": node ",
                                            node == nullptr ? std::string("(null)") : NodeLabel(*node),
                                            " is not a node of this graph"));
  }
  return absl::OkStatus();
}

void ForEachGraph(Graph& graph, const std::function<void(Graph&)>& fn) {
  fn(graph);
  if (!graph.MayHoldSubgraphs()) return;
  for (Node* n : graph.nodes()) {
    n->ForEachSubgraph([&](Graph* sub) { ForEachGraph(*sub, fn); });
  }
}

void ForEachGraph(const Graph& graph, const std::function<void(const Graph&)>& fn) {
  fn(graph);
  if (!graph.MayHoldSubgraphs()) return;
  for (const Node* n : graph.nodes()) {
    n->ForEachSubgraph([&](const Graph* sub) { ForEachGraph(*sub, fn); });
  }
}

std::vector<Node*> Consumers(const Value& value) {
  std::vector<Node*> out;
  for (const Use& u : value.uses()) {
    if (std::find(out.begin(), out.end(), u.node) == out.end()) out.push_back(u.node);
  }
  return out;
}

}  // namespace onnxkit::ir
