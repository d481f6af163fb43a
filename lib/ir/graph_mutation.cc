// ir::Graph mutation API (see graph.h for the Given / Execute / Result of
// each call). Every call validates first and changes nothing on error.
#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/ir/graph.h"

namespace onnxkit::ir {
namespace {

absl::Status CheckNoGraphAttribute(const pb::AttributeProto& a) {
  if (a.type == pb::kAttrGraph || a.type == pb::kAttrGraphs || a.g || !a.graphs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute '", Sv(a.name), "' holds a graph: use Node::AddSubgraph"));
  }
  return absl::OkStatus();
}

}  // namespace

Value* Graph::CreateValue(std::string_view hint) {
  std::string name = FreshName(hint);
  Touch();
  return NewValue(std::move(name), ValueKind::kUndefined);
}

absl::StatusOr<Node*> Graph::AddNode(NodeSpec spec, Position where) {
  if (where.kind != Position::Kind::kEnd) ONNXKIT_RETURN_IF_ERROR(CheckOwnNode(where.anchor));
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (spec.inputs[i] == nullptr) continue;
    ONNXKIT_RETURN_IF_ERROR(CheckVisible(spec.inputs[i], absl::StrCat("input ", i, " of new node")));
  }
  for (const pb::AttributeProto& a : spec.attributes) ONNXKIT_RETURN_IF_ERROR(CheckNoGraphAttribute(a));
  std::vector<Value*> declared(spec.outputs.size(), nullptr);
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    const std::string& name = spec.outputs[i];
    if (name.empty()) continue;
    for (size_t j = 0; j < i; ++j) {
      if (spec.outputs[j] == name) {
        return absl::InvalidArgumentError(
            absl::StrCat(Label(), ": new node names output '", Sv(name), "' twice"));
      }
    }
    Value* local = FindLocalValue(name);
    if (local != nullptr && local->kind() == ValueKind::kUndefined && !local->has_uses()) {
      declared[i] = local;
      continue;
    }
    ONNXKIT_RETURN_IF_ERROR(CheckNewName(name));
  }
  Node* n = NewNode(where);
  n->op_type_ = std::move(spec.op_type);
  n->domain_ = std::move(spec.domain);
  n->name_ = std::move(spec.name);
  ReserveName(n->name_);
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    n->inputs_.push_back(spec.inputs[i]);
    if (spec.inputs[i] != nullptr) spec.inputs[i]->AddUse(n, static_cast<int>(i));
  }
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    Value* v = declared[i];
    if (v == nullptr) {
      v = NewValue(std::move(spec.outputs[i]), ValueKind::kNodeOutput);
    } else {
      v->kind_ = ValueKind::kNodeOutput;
    }
    v->producer_ = n;
    v->producer_output_ = static_cast<int>(i);
    ReserveName(v->name());
    n->outputs_.push_back(v);
  }
  for (pb::AttributeProto& a : spec.attributes) n->attributes_.emplace_back(std::move(a));
  Touch();
  return n;
}

absl::Status Graph::RemoveNode(Node* node) {
  ONNXKIT_RETURN_IF_ERROR(CheckOwnNode(node));
  for (Value* v : node->outputs()) {
    if (v->has_uses()) {
      return absl::FailedPreconditionError(absl::StrCat(Label(), ": cannot remove node ", NodeLabel(*node),
                                                        ": its output '", Sv(v->name()), "' is used by node ",
                                                        NodeLabel(*v->uses().front().node)));
    }
    if (v->IsGraphOutput()) {
      return absl::FailedPreconditionError(absl::StrCat(Label(), ": cannot remove node ", NodeLabel(*node),
                                                        ": its output '", Sv(v->name()),
                                                        "' is a graph output"));
    }
  }
  node->ForEachSubgraph([](Graph* sub) { DropUsesIn(sub); });
  for (int i = 0; i < node->num_inputs(); ++i) {
    if (node->input(i) != nullptr) node->input(i)->RemoveUse(node, i);
  }
  for (Value* v : node->outputs()) {
    DropEntries(v, /*overrides_only=*/false);
    DeleteValue(v);
  }
  node_set_.erase(node);
  nodes_.erase(node->pos_);
  Touch();
  return absl::OkStatus();
}

absl::Status Graph::MoveNode(Node* node, Position where) {
  ONNXKIT_RETURN_IF_ERROR(CheckOwnNode(node));
  auto target = nodes_.end();
  if (where.kind != Position::Kind::kEnd) {
    ONNXKIT_RETURN_IF_ERROR(CheckOwnNode(where.anchor));
    if (where.anchor == node) return absl::OkStatus();
    target = where.kind == Position::Kind::kBefore ? where.anchor->pos_ : std::next(where.anchor->pos_);
  }
  nodes_.splice(target, nodes_, node->pos_);
  Touch();
  return absl::OkStatus();
}

absl::Status Graph::ReplaceAllUsesWith(Value* old_value, Value* new_value) {
  if (old_value == nullptr || new_value == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(Label(), ": ReplaceAllUsesWith on a null value"));
  }
  if (old_value == new_value) return absl::OkStatus();
  for (const Use& u : old_value->uses()) {
    // The message (a node label can walk the graph) is made only on failure.
    if (u.node->graph()->CheckVisible(new_value, "replacement").ok()) continue;
    return u.node->graph()->CheckVisible(
        new_value, absl::StrCat("replacement of '", Sv(old_value->name()), "' in node ", NodeLabel(*u.node)));
  }
  absl::Status status;
  ForEachGraph(*old_value->graph(), [&](Graph& g) {
    if (!status.ok()) return;
    if (std::find(g.outputs_.begin(), g.outputs_.end(), old_value) == g.outputs_.end()) return;
    status =
        g.CheckVisible(new_value, absl::StrCat("replacement of graph output '", Sv(old_value->name()), "'"));
  });
  ONNXKIT_RETURN_IF_ERROR(status);
  for (const Use& u : old_value->uses()) {
    u.node->inputs_[static_cast<size_t>(u.input_index)] = new_value;
    new_value->AddUse(u.node, u.input_index);
  }
  old_value->uses_.clear();
  ForEachGraph(*old_value->graph(), [&](Graph& g) {
    for (size_t i = 0; i < g.outputs_.size(); ++i) {
      if (g.outputs_[i] != old_value) continue;
      // The entry keeps describing the output (its declared type).
      pb::ValueInfoProto entry = g.OutputEntry(static_cast<int>(i));
      g.outputs_[i] = new_value;
      if (SameDescription(entry, new_value->info())) {
        g.output_entries_[i].reset();
      } else {
        g.output_entries_[i] = std::move(entry);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status Graph::SetInput(Node* node, int index, Value* value) {
  ONNXKIT_RETURN_IF_ERROR(CheckOwnNode(node));
  if (index < 0 || index >= node->num_inputs()) {
    return absl::OutOfRangeError(absl::StrCat(Label(), ": node ", NodeLabel(*node), " has ",
                                              node->num_inputs(), " inputs, no input ", index));
  }
  if (value != nullptr) ONNXKIT_RETURN_IF_ERROR(CheckVisible(value, absl::StrCat("new input ", index)));
  Value*& slot = node->inputs_[static_cast<size_t>(index)];
  if (slot != nullptr) slot->RemoveUse(node, index);
  slot = value;
  if (value != nullptr) value->AddUse(node, index);
  Touch();
  return absl::OkStatus();
}

absl::Status Graph::AppendInput(Node* node, Value* value) {
  ONNXKIT_RETURN_IF_ERROR(CheckOwnNode(node));
  if (value != nullptr) ONNXKIT_RETURN_IF_ERROR(CheckVisible(value, "appended input"));
  node->inputs_.push_back(value);
  if (value != nullptr) value->AddUse(node, node->num_inputs() - 1);
  Touch();
  return absl::OkStatus();
}

absl::Status Graph::RemoveInput(Node* node, int index) {
  ONNXKIT_RETURN_IF_ERROR(CheckOwnNode(node));
  if (index < 0 || index >= node->num_inputs()) {
    return absl::OutOfRangeError(absl::StrCat(Label(), ": node ", NodeLabel(*node), " has ",
                                              node->num_inputs(), " inputs, no input ", index));
  }
  if (Value* v = node->input(index)) v->RemoveUse(node, index);
  for (int j = index + 1; j < node->num_inputs(); ++j) {
    Value* v = node->input(j);
    if (v == nullptr) continue;
    for (Use& u : v->uses_) {
      if (u.node == node && u.input_index == j) {
        u.input_index = j - 1;
        break;
      }
    }
  }
  node->inputs_.erase(node->inputs_.begin() + index);
  Touch();
  return absl::OkStatus();
}

absl::StatusOr<Value*> Graph::AddInput(std::string_view name, std::optional<pb::TypeProto> type) {
  ONNXKIT_RETURN_IF_ERROR(CheckNewName(name));
  Value* v = NewValue(std::string(name), ValueKind::kUndefined);
  if (type.has_value()) {
    v->info_.type = std::move(*type);
    v->has_info_ = true;
  }
  ReserveName(name);
  ONNXKIT_RETURN_IF_ERROR(AddInput(v));
  return v;
}

absl::Status Graph::AddInput(Value* value) {
  if (value == nullptr || value->graph() != this) {
    return absl::InvalidArgumentError(absl::StrCat(Label(), ": AddInput needs a value of this graph"));
  }
  if (value->is_graph_input() || value->kind() == ValueKind::kNodeOutput || value->name().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(Label(), ": ", ValueKindName(value->kind()), " '",
                                                   Sv(value->name()), "' cannot become a graph input"));
  }
  if (value->kind() == ValueKind::kUndefined) value->kind_ = ValueKind::kGraphInput;
  value->is_graph_input_ = true;
  inputs_.push_back(value);
  input_entries_.emplace_back();
  Touch();
  return absl::OkStatus();
}

absl::Status Graph::RemoveInput(Value* value) {
  auto it = std::find(inputs_.begin(), inputs_.end(), value);
  if (value == nullptr || it == inputs_.end()) {
    return absl::NotFoundError(absl::StrCat(Label(), ": value is not a graph input of this graph"));
  }
  bool deleting = value->kind() == ValueKind::kGraphInput;
  if (deleting && (value->has_uses() || value->IsGraphOutput())) {
    return absl::FailedPreconditionError(
        absl::StrCat(Label(), ": cannot remove graph input '", Sv(value->name()), "': it is used"));
  }
  size_t i = static_cast<size_t>(it - inputs_.begin());
  inputs_.erase(it);
  input_entries_.erase(input_entries_.begin() + static_cast<std::ptrdiff_t>(i));
  value->is_graph_input_ = false;
  if (deleting) {
    DropEntries(value, /*overrides_only=*/false);
    DeleteValue(value);
  }
  Touch();
  return absl::OkStatus();
}

absl::Status Graph::AddOutput(Value* value) {
  ONNXKIT_RETURN_IF_ERROR(CheckVisible(value, "new graph output"));
  outputs_.push_back(value);
  output_entries_.emplace_back();
  Touch();
  return absl::OkStatus();
}

absl::Status Graph::RemoveOutput(int index) {
  if (index < 0 || static_cast<size_t>(index) >= outputs_.size()) {
    return absl::OutOfRangeError(
        absl::StrCat(Label(), ": has ", outputs_.size(), " outputs, no output ", index));
  }
  outputs_.erase(outputs_.begin() + index);
  output_entries_.erase(output_entries_.begin() + index);
  Touch();
  return absl::OkStatus();
}

absl::StatusOr<Value*> Graph::AddInitializer(pb::TensorProto tensor) {
  std::string name = tensor.name.empty() ? FreshName("init") : tensor.name;
  if (!tensor.name.empty()) ONNXKIT_RETURN_IF_ERROR(CheckNewName(name));
  tensor.name = name;
  Value* v = NewValue(name, ValueKind::kInitializer);
  v->tensor_ = std::make_unique<pb::TensorProto>(std::move(tensor));
  initializers_.push_back(v);
  ReserveName(name);
  Touch();
  return v;
}

absl::StatusOr<Value*> Graph::AddSparseInitializer(pb::SparseTensorProto tensor) {
  if (!tensor.values) {
    return absl::InvalidArgumentError(absl::StrCat(Label(), ": sparse initializer without values"));
  }
  std::string name = tensor.values->name.empty() ? FreshName("init") : tensor.values->name;
  if (!tensor.values->name.empty()) ONNXKIT_RETURN_IF_ERROR(CheckNewName(name));
  tensor.values->name = name;
  Value* v = NewValue(name, ValueKind::kInitializer);
  v->sparse_ = std::make_unique<pb::SparseTensorProto>(std::move(tensor));
  sparse_initializers_.push_back(v);
  ReserveName(name);
  Touch();
  return v;
}

absl::Status Graph::RemoveInitializer(Value* value) {
  if (value == nullptr || value->graph() != this || value->kind() != ValueKind::kInitializer) {
    return absl::NotFoundError(absl::StrCat(Label(), ": value is not an initializer of this graph"));
  }
  bool deleting = !value->is_graph_input();
  if (deleting && (value->has_uses() || value->IsGraphOutput())) {
    return absl::FailedPreconditionError(
        absl::StrCat(Label(), ": cannot remove initializer '", Sv(value->name()), "': it is used"));
  }
  auto& list = value->tensor_ ? initializers_ : sparse_initializers_;
  auto it = std::find(list.begin(), list.end(), value);
  if (it == list.end()) {
    return absl::InternalError(absl::StrCat(Label(), ": initializer '", Sv(value->name()), "' is not listed"));
  }
  list.erase(it);
  value->tensor_.reset();
  value->sparse_.reset();
  if (deleting) {
    DropEntries(value, /*overrides_only=*/false);
    DeleteValue(value);
  } else {
    value->kind_ = ValueKind::kGraphInput;
  }
  Touch();
  return absl::OkStatus();
}

absl::Status Graph::RenameValue(Value* value, std::string_view new_name) {
  if (value == nullptr || value->graph() != this) {
    return absl::NotFoundError(absl::StrCat(Label(), ": value is not a value of this graph"));
  }
  if (value->name() == new_name) return absl::OkStatus();
  ONNXKIT_RETURN_IF_ERROR(CheckNewName(new_name));
  UnindexValue(value);
  value->name_ = std::string(new_name);
  IndexValue(value);
  ReserveName(new_name);
  Touch();
  return absl::OkStatus();
}

absl::Status Graph::MoveNodeToSubgraph(Node* node, Graph* subgraph) {
  ONNXKIT_RETURN_IF_ERROR(CheckOwnNode(node));
  if (subgraph == nullptr || subgraph == this || !subgraph->IsSelfOrDescendantOf(this)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Label(), ": MoveNodeToSubgraph needs a subgraph of this graph"));
  }
  for (const Graph* g = subgraph; g != this; g = g->parent_) {
    if (g->owner_node_ == node) {
      return absl::InvalidArgumentError(
          absl::StrCat(Label(), ": cannot move node ", NodeLabel(*node), " into its own subgraph"));
    }
  }
  // Inputs, and outer values read inside the node's subgraphs, must keep
  // resolving to the same values from their new place.
  absl::Status status;
  auto check_visible = [&](const Value* v) {
    if (status.ok() && v != nullptr && subgraph->FindValue(v->name()) != v) {
      status =
          absl::FailedPreconditionError(absl::StrCat(Label(), ": cannot move node ", NodeLabel(*node), ": '",
                                                     Sv(v->name()), "' is shadowed in ", subgraph->Label()));
    }
  };
  for (Value* v : node->inputs()) check_visible(v);
  node->ForEachSubgraph([&](Graph* sub) {
    ForEachGraph(*sub, [&](Graph& g) {
      for (Node* n : g.nodes()) {
        for (Value* v : n->inputs()) {
          if (v != nullptr && !v->graph()->IsSelfOrDescendantOf(sub)) check_visible(v);
        }
      }
    });
  });
  ONNXKIT_RETURN_IF_ERROR(status);
  for (Value* v : node->outputs()) {
    for (const Use& u : v->uses()) {
      if (!u.node->graph()->IsSelfOrDescendantOf(subgraph)) {
        return absl::FailedPreconditionError(
            absl::StrCat(Label(), ": cannot move node ", NodeLabel(*node), ": its output '", Sv(v->name()),
                         "' is used by node ", NodeLabel(*u.node), " outside ", subgraph->Label()));
      }
    }
    bool outside_output = false;
    ForEachGraph(*this, [&](const Graph& g) {
      if (!g.IsSelfOrDescendantOf(subgraph) &&
          std::find(g.outputs_.begin(), g.outputs_.end(), v) != g.outputs_.end()) {
        outside_output = true;
      }
    });
    if (outside_output || (!v->name().empty() && subgraph->FindLocalValue(v->name()) != nullptr)) {
      return absl::FailedPreconditionError(
          absl::StrCat(Label(), ": cannot move node ", NodeLabel(*node), ": its output '", Sv(v->name()),
                       "' is a graph output outside, or a name taken in, ", subgraph->Label()));
    }
  }
  // Move the node, its outputs and their value_info entries.
  subgraph->nodes_.splice(subgraph->nodes_.end(), nodes_, node->pos_);
  node_set_.erase(node);
  subgraph->node_set_.insert(node);
  node->graph_ = subgraph;
  node->ForEachSubgraph([&](Graph* sub) {
    sub->parent_ = subgraph;
    subgraph->Root()->has_subgraphs_ = true;
  });
  for (Value* v : node->outputs()) {
    UnindexValue(v);
    subgraph->values_.splice(subgraph->values_.end(), values_, v->pos_);
    v->graph_ = subgraph;
    subgraph->IndexValue(v);
    for (size_t i = 0; i < value_info_.size();) {
      if (value_info_[i] != v) {
        ++i;
        continue;
      }
      subgraph->value_info_.push_back(v);
      subgraph->value_info_entries_.push_back(std::move(value_info_entries_[i]));
      value_info_.erase(value_info_.begin() + static_cast<std::ptrdiff_t>(i));
      value_info_entries_.erase(value_info_entries_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  Touch();
  return absl::OkStatus();
}

}  // namespace onnxkit::ir
