// FromProto: pb::ModelProto -> ir::Model, moving everything (no tensor data
// is copied).
//
// Each graph is imported in two phases:
//   1. definitions: inputs, initializers, sparse initializers, nodes and their
//      outputs (so a node may use a value produced later in the file, and a
//      subgraph may use any value of an enclosing graph);
//   2. resolution: value_info and output entries, then, node by node, the
//      input names (nearest enclosing definition) and the node's subgraphs
//      (recursively, both phases).
// Use lists thus follow a pre-order of the file.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/limits.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/ir/model.h"

namespace onnxkit::ir {

class Importer {
 public:
  // Imports `gp` into the empty graph `g` (its parent and owner already set).
  // `where` names the graph in messages.
  absl::Status ImportGraph(pb::GraphProto gp, Graph* g, int depth, const std::string& where);

 private:
  struct PendingGraph {
    Graph* graph;
    pb::GraphProto proto;
    std::string attr_name;
  };
  struct PendingNode {
    Node* node;
    int index;
    std::vector<std::string> inputs;
    std::vector<PendingGraph> subgraphs;
  };

  static std::string Label(const std::string& name, const std::string& op_type, int index);
  static std::string Describe(const Value* v);
  absl::Status Define(Graph* g, const std::string& where, Value* v, const std::string& what);
  absl::Status DefineNode(pb::NodeProto np, Graph* g, int index, const std::string& where,
                          std::vector<PendingNode>* pending);
  static void AttachEntry(Value* v, pb::ValueInfoProto vi, std::vector<Box<pb::ValueInfoProto>>* entries);
  absl::Status ResolveEntries(pb::GraphProto& gp, Graph* g, const std::string& where);
  absl::Status ResolveNode(PendingNode& p, Graph* g, int depth, const std::string& where);
};

std::string Importer::Label(const std::string& name, const std::string& op_type, int index) {
  if (!name.empty()) return absl::StrCat("node '", Sv(name), "' (", Sv(op_type), ")");
  return absl::StrCat("node #", index, " (", Sv(op_type), ")");
}

std::string Importer::Describe(const Value* v) {
  if (v->kind() != ValueKind::kNodeOutput) return ValueKindName(v->kind());
  const Node* n = v->producer();
  return absl::StrCat("output ", v->producer_output(), " of node ",
                      n->name().empty() ? std::string("(unnamed)") : absl::StrCat("'", Sv(n->name()), "'"),
                      " (", Sv(n->op_type()), ")");
}

// Indexes `v`, freshly created as `what`, unless its name is taken.
absl::Status Importer::Define(Graph* g, const std::string& where, Value* v, const std::string& what) {
  if (v->name().empty()) return absl::OkStatus();
  auto [it, inserted] = g->index_.try_emplace(v->name(), v);
  if (inserted) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(where, ": value '", Sv(v->name()), "' is defined twice: as ",
                                                 Describe(it->second), " and as ", what));
}

absl::Status Importer::DefineNode(pb::NodeProto np, Graph* g, int index, const std::string& where,
                                  std::vector<PendingNode>* pending) {
  Node* n = g->NewNode(Position::End());
  n->op_type_ = std::move(np.op_type);
  n->domain_ = std::move(np.domain);
  n->name_ = std::move(np.name);
  n->overload_ = std::move(np.overload);
  n->doc_string_ = std::move(np.doc_string);
  n->metadata_props_ = std::move(np.metadata_props);
  n->extra_.present = np.present;
  n->extra_.unknown_fields = std::move(np.unknown_fields);
  std::string label = Label(n->name_, n->op_type_, index);
  PendingNode p{n, index, std::move(np.input), {}};
  for (size_t k = 0; k < np.output.size(); ++k) {
    // Created unindexed, then indexed by Define (which detects duplicates).
    g->values_.push_back(
        std::unique_ptr<Value>(new Value(g, std::move(np.output[k]), ValueKind::kNodeOutput)));
    Value* v = g->values_.back().get();
    v->pos_ = std::prev(g->values_.end());
    v->producer_ = n;
    v->producer_output_ = static_cast<int>(k);
    n->outputs_.push_back(v);
    ONNXKIT_RETURN_IF_ERROR(Define(g, where, v, absl::StrCat("output ", k, " of ", label)));
  }
  n->attributes_.reserve(np.attribute.size());
  for (pb::AttributeProto& ap : np.attribute) {
    if (ap.type == pb::kAttrGraph && !ap.g) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", label, ": attribute '", Sv(ap.name), "' has type GRAPH but no graph"));
    }
    Attribute a;
    auto new_subgraph = [&](pb::GraphProto gp) {
      auto sub = std::make_unique<Graph>();
      sub->parent_ = g;
      sub->owner_node_ = n;
      g->Root()->has_subgraphs_ = true;
      p.subgraphs.push_back(PendingGraph{sub.get(), std::move(gp), ap.name});
      return sub;
    };
    if (ap.g) {
      a.g = new_subgraph(std::move(*ap.g));
      ap.g.reset();
    }
    for (pb::GraphProto& gp : ap.graphs) a.graphs.push_back(new_subgraph(std::move(gp)));
    ap.graphs.clear();
    a.proto = std::move(ap);
    n->attributes_.push_back(std::move(a));
  }
  pending->push_back(std::move(p));
  return absl::OkStatus();
}

void Importer::AttachEntry(Value* v, pb::ValueInfoProto vi, std::vector<Box<pb::ValueInfoProto>>* entries) {
  if (!v->has_info_) {
    v->info_ = std::move(vi);
    v->has_info_ = true;
    entries->emplace_back();
  } else if (SameDescription(v->info_, vi)) {
    entries->emplace_back();
  } else {
    entries->emplace_back();
    entries->back() = std::move(vi);
  }
}

absl::Status Importer::ResolveEntries(pb::GraphProto& gp, Graph* g, const std::string& where) {
  for (size_t i = 0; i < gp.value_info.size(); ++i) {
    pb::ValueInfoProto& vi = gp.value_info[i];
    if (vi.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": value_info entry ", i, " has an empty name"));
    }
    Value* v = g->FindValue(vi.name);
    if (v == nullptr) v = g->NewValue(vi.name, ValueKind::kUndefined);  // an orphan entry
    g->value_info_.push_back(v);
    AttachEntry(v, std::move(vi), &g->value_info_entries_);
  }
  for (size_t i = 0; i < gp.output.size(); ++i) {
    pb::ValueInfoProto& vi = gp.output[i];
    Value* v = vi.name.empty() ? nullptr : g->FindValue(vi.name);
    if (v == nullptr || v->kind() == ValueKind::kUndefined) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": graph output ", i, " '", Sv(vi.name),
                                                     "' is not defined in this graph or an enclosing one"));
    }
    g->outputs_.push_back(v);
    AttachEntry(v, std::move(vi), &g->output_entries_);
  }
  return absl::OkStatus();
}

absl::Status Importer::ResolveNode(PendingNode& p, Graph* g, int depth, const std::string& where) {
  Node* n = p.node;
  n->inputs_.reserve(p.inputs.size());
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    const std::string& name = p.inputs[k];
    Value* v = nullptr;
    if (!name.empty()) {
      v = g->FindValue(name);
      if (v == nullptr || v->kind() == ValueKind::kUndefined) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", Label(n->name_, n->op_type_, p.index),
                                                       ": input ", k, " '", Sv(name),
                                                       "' is not defined in this graph or an enclosing one"));
      }
      v->AddUse(n, static_cast<int>(k));
    }
    n->inputs_.push_back(v);
  }
  for (PendingGraph& sub : p.subgraphs) {
    std::string sub_where = absl::StrCat(where, " > ", Label(n->name_, n->op_type_, p.index), " attribute '",
                                         Sv(sub.attr_name), "' > graph '", Sv(sub.proto.name), "'");
    if (depth + 1 > limits::kMaxGraphDepth) {
      return absl::ResourceExhaustedError(absl::StrCat(sub_where, ": subgraphs nested deeper than ",
                                                       limits::kMaxGraphDepth,
                                                       " levels (limits::kMaxGraphDepth)"));
    }
    ONNXKIT_RETURN_IF_ERROR(ImportGraph(std::move(sub.proto), sub.graph, depth + 1, sub_where));
  }
  return absl::OkStatus();
}

absl::Status Importer::ImportGraph(pb::GraphProto gp, Graph* g, int depth, const std::string& where) {
  g->name_ = std::move(gp.name);
  g->doc_string_ = std::move(gp.doc_string);
  g->metadata_props_ = std::move(gp.metadata_props);
  g->quantization_annotation_ = std::move(gp.quantization_annotation);
  g->extra_.present = gp.present;
  g->extra_.unknown_fields = std::move(gp.unknown_fields);
  // Phase 1: definitions.
  for (size_t i = 0; i < gp.input.size(); ++i) {
    pb::ValueInfoProto& vi = gp.input[i];
    if (vi.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": graph input ", i, " has an empty name"));
    }
    Value* v = new Value(g, vi.name, ValueKind::kGraphInput);
    g->values_.push_back(std::unique_ptr<Value>(v));
    v->pos_ = std::prev(g->values_.end());
    ONNXKIT_RETURN_IF_ERROR(Define(g, where, v, "graph input"));
    v->is_graph_input_ = true;
    g->inputs_.push_back(v);
    AttachEntry(v, std::move(vi), &g->input_entries_);
  }
  for (size_t i = 0; i < gp.initializer.size(); ++i) {
    pb::TensorProto& t = gp.initializer[i];
    if (t.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": initializer ", i, " has an empty name"));
    }
    Value* v = g->FindLocalValue(t.name);
    if (v != nullptr && v->kind() == ValueKind::kGraphInput) {
      v->kind_ = ValueKind::kInitializer;  // an input with a default (IR < 4 style)
    } else {
      v = new Value(g, t.name, ValueKind::kInitializer);
      g->values_.push_back(std::unique_ptr<Value>(v));
      v->pos_ = std::prev(g->values_.end());
      ONNXKIT_RETURN_IF_ERROR(Define(g, where, v, "initializer"));
    }
    v->tensor_ = std::make_unique<pb::TensorProto>(std::move(t));
    g->initializers_.push_back(v);
  }
  for (size_t i = 0; i < gp.sparse_initializer.size(); ++i) {
    pb::SparseTensorProto& t = gp.sparse_initializer[i];
    if (!t.values || t.values->name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": sparse initializer ", i, " has no name"));
    }
    Value* v = g->FindLocalValue(t.values->name);
    if (v != nullptr && v->kind() == ValueKind::kGraphInput) {
      v->kind_ = ValueKind::kInitializer;
    } else {
      v = new Value(g, t.values->name, ValueKind::kInitializer);
      g->values_.push_back(std::unique_ptr<Value>(v));
      v->pos_ = std::prev(g->values_.end());
      ONNXKIT_RETURN_IF_ERROR(Define(g, where, v, "sparse initializer"));
    }
    v->sparse_ = std::make_unique<pb::SparseTensorProto>(std::move(t));
    g->sparse_initializers_.push_back(v);
  }
  std::vector<PendingNode> pending;
  pending.reserve(gp.node.size());
  for (size_t i = 0; i < gp.node.size(); ++i) {
    ONNXKIT_RETURN_IF_ERROR(DefineNode(std::move(gp.node[i]), g, static_cast<int>(i), where, &pending));
  }
  // Phase 2: resolution.
  ONNXKIT_RETURN_IF_ERROR(ResolveEntries(gp, g, where));
  for (PendingNode& p : pending) ONNXKIT_RETURN_IF_ERROR(ResolveNode(p, g, depth, where));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Model>> FromProto(pb::ModelProto proto) {
  if (!proto.graph) return absl::InvalidArgumentError("model has no graph");
  auto model = std::make_unique<Model>();
  model->set_ir_version(proto.ir_version);
  model->set_producer_name(std::move(proto.producer_name));
  model->set_producer_version(std::move(proto.producer_version));
  model->set_domain(std::move(proto.domain));
  model->set_model_version(proto.model_version);
  model->set_doc_string(std::move(proto.doc_string));
  model->opset_import() = std::move(proto.opset_import);
  model->metadata_props() = std::move(proto.metadata_props);
  model->training_info() = std::move(proto.training_info);
  model->functions() = std::move(proto.functions);
  model->extra().present = proto.present;
  model->extra().unknown_fields = std::move(proto.unknown_fields);
  std::string where = absl::StrCat("graph '", Sv(proto.graph->name), "'");
  ONNXKIT_RETURN_IF_ERROR(Importer().ImportGraph(std::move(*proto.graph), &model->graph(), 0, where));
  return model;
}

absl::StatusOr<std::unique_ptr<Graph>> FunctionBodyFromProto(const pb::FunctionProto& function) {
  pb::GraphProto gp;
  gp.name = function.name;
  for (const std::string& s : function.input) gp.input.emplace_back().name = s;
  for (const std::string& s : function.output) gp.output.emplace_back().name = s;
  gp.node = function.node;
  gp.value_info = function.value_info;
  auto g = std::make_unique<Graph>();
  std::string where = absl::StrCat("function '", Sv(function.domain), ":", Sv(function.name), "'");
  ONNXKIT_RETURN_IF_ERROR(Importer().ImportGraph(std::move(gp), g.get(), 0, where));
  return g;
}

}  // namespace onnxkit::ir
