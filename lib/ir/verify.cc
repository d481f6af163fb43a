// Verify: the IR invariants listed in verify.h, checked from scratch.
#include "lib/ir/verify.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/base/limits.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"

namespace onnxkit::ir {

class Verifier {
 public:
  explicit Verifier(const Graph& root) {
    ForEachGraph(root, [this](const Graph& g) {
      for (const Node* n : g.nodes()) live_nodes_.insert(n);
    });
  }

  absl::Status Check(const Graph& g, int depth) {
    if (depth > limits::kMaxGraphDepth) return Fail(g, "subgraphs nested deeper than limits::kMaxGraphDepth");
    ONNXKIT_RETURN_IF_ERROR(CheckValues(g));
    ONNXKIT_RETURN_IF_ERROR(CheckLists(g));
    for (const Node* n : g.nodes()) {
      ONNXKIT_RETURN_IF_ERROR(CheckNode(g, *n));
      for (const Graph* sub : n->Subgraphs()) {
        if (sub->parent() != &g || sub->owner_node() != n || sub->model() != nullptr) {
          return Fail(g, absl::StrCat("subgraph '", Sv(sub->name()), "' of node ", NodeLabel(*n),
                                      " has inconsistent parent, owner or model pointers"));
        }
        ONNXKIT_RETURN_IF_ERROR(Check(*sub, depth + 1));
      }
    }
    return absl::OkStatus();
  }

 private:
  static absl::Status Fail(const Graph& g, std::string_view what) {
    return absl::InternalError(absl::StrCat("ir verify: graph '", Sv(g.name()), "': ", Sv(what)));
  }
  static std::string V(const Value* v) { return absl::StrCat("value '", Sv(v->name()), "'"); }

  absl::Status CheckValues(const Graph& g) {
    size_t named = 0;
    for (const Value* v : g.values()) {
      if (v->graph() != &g) return Fail(g, absl::StrCat(V(v), " has a wrong graph pointer"));
      if (!v->name().empty()) {
        ++named;
        if (g.FindLocalValue(v->name()) != v) return Fail(g, absl::StrCat(V(v), " is not in the name index"));
      } else if (v->kind() != ValueKind::kNodeOutput) {
        return Fail(g, absl::StrCat("a ", ValueKindName(v->kind()), " has an empty name"));
      }
      if ((v->kind() == ValueKind::kNodeOutput) != (v->producer() != nullptr)) {
        return Fail(g, absl::StrCat(V(v), ": producer does not match its kind"));
      }
      if (v->producer() != nullptr && (v->producer()->graph() != &g || v->producer_output() < 0 ||
                                       v->producer_output() >= v->producer()->num_outputs() ||
                                       v->producer()->output(v->producer_output()) != v)) {
        return Fail(g, absl::StrCat(V(v), ": producer does not list it as output ", v->producer_output()));
      }
      bool has_data = v->initializer() != nullptr || v->sparse_initializer() != nullptr;
      if ((v->kind() == ValueKind::kInitializer) != has_data ||
          (v->initializer() != nullptr && v->sparse_initializer() != nullptr)) {
        return Fail(g, absl::StrCat(V(v), ": initializer data does not match its kind"));
      }
      bool listed = std::find(g.inputs().begin(), g.inputs().end(), v) != g.inputs().end();
      if (listed != v->is_graph_input() || (v->kind() == ValueKind::kGraphInput && !listed)) {
        return Fail(g, absl::StrCat(V(v), ": graph input flag does not match the input list"));
      }
      if (v->kind() == ValueKind::kUndefined && v->has_uses()) {
        return Fail(g, absl::StrCat(V(v), " is used but not defined"));
      }
      if (v->name().empty() && v->has_uses()) return Fail(g, "an omitted node output has uses");
      for (const Use& u : v->uses()) {
        if (!live_nodes_.contains(u.node)) return Fail(g, absl::StrCat(V(v), " has a use by a removed node"));
        if (u.input_index < 0 || u.input_index >= u.node->num_inputs() || u.node->input(u.input_index) != v) {
          return Fail(g, absl::StrCat(V(v), " lists a use by node ", NodeLabel(*u.node), " input ",
                                      u.input_index, " which is not it"));
        }
      }
    }
    if (named != g.index_.size()) return Fail(g, "the name index has stale entries");
    return absl::OkStatus();
  }

  absl::Status CheckLists(const Graph& g) {
    if (g.input_entries_.size() != g.inputs_.size() || g.output_entries_.size() != g.outputs_.size() ||
        g.value_info_entries_.size() != g.value_info_.size()) {
      return Fail(g, "entry lists out of step");
    }
    absl::flat_hash_set<const Value*> seen;
    for (const Value* v : g.inputs()) {
      if (v == nullptr || v->graph() != &g || !seen.insert(v).second)
        return Fail(g, "bad or repeated graph input");
    }
    seen.clear();
    for (const auto* list : {&g.initializers(), &g.sparse_initializers()}) {
      for (const Value* v : *list) {
        if (v == nullptr || v->graph() != &g || v->kind() != ValueKind::kInitializer ||
            !seen.insert(v).second) {
          return Fail(g, "bad or repeated initializer");
        }
        bool dense = list == &g.initializers();
        if ((dense && v->initializer() == nullptr) || (!dense && v->sparse_initializer() == nullptr)) {
          return Fail(g, absl::StrCat(V(v), " is in the wrong initializer list"));
        }
      }
    }
    for (const Value* v : g.values()) {
      if (v->kind() == ValueKind::kInitializer && !seen.contains(v)) {
        return Fail(g, absl::StrCat(V(v), " is an initializer missing from the initializer lists"));
      }
    }
    for (const Value* v : g.outputs()) {
      if (v == nullptr || v->kind() == ValueKind::kUndefined || v->name().empty() ||
          g.FindValue(v->name()) != v) {
        return Fail(g, absl::StrCat("graph output ", v == nullptr ? std::string("(null)") : V(v),
                                    " is not defined or not visible"));
      }
    }
    for (const Value* v : g.value_info()) {
      if (v == nullptr || v->name().empty() || g.FindValue(v->name()) != v) {
        return Fail(g, "a value_info entry does not resolve to its value");
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckNode(const Graph& g, const Node& n) {
    if (n.graph() != &g) return Fail(g, absl::StrCat("node ", NodeLabel(n), " has a wrong graph pointer"));
    for (int k = 0; k < n.num_outputs(); ++k) {
      const Value* v = n.output(k);
      if (v == nullptr || v->producer() != &n || v->producer_output() != k || v->graph() != &g) {
        return Fail(g, absl::StrCat("node ", NodeLabel(n), " output ", k, " does not name it as producer"));
      }
    }
    for (int k = 0; k < n.num_inputs(); ++k) {
      const Value* v = n.input(k);
      if (v == nullptr) continue;
      if (v->kind() == ValueKind::kUndefined || v->name().empty() || g.FindValue(v->name()) != v) {
        return Fail(g, absl::StrCat("node ", NodeLabel(n), " input ", k, " '", Sv(v->name()),
                                    "' is not defined or not visible by its name"));
      }
      if (std::count(v->uses().begin(), v->uses().end(), Use{const_cast<Node*>(&n), k}) != 1) {
        return Fail(g, absl::StrCat("node ", NodeLabel(n), " input ", k,
                                    " is not listed once in the uses of ", V(v)));
      }
    }
    return absl::OkStatus();
  }

  absl::flat_hash_set<const Node*> live_nodes_;
};

absl::Status Verify(const Graph& graph) { return Verifier(graph).Check(graph, graph.depth()); }

absl::Status Verify(const Model& model) {
  if (model.graph().model() != &model || model.graph().parent() != nullptr) {
    return absl::InternalError("ir verify: the main graph does not point back to its model");
  }
  return Verify(model.graph());
}

}  // namespace onnxkit::ir
