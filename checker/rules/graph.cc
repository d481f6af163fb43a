// Graph rules (E03xx), for the main graph, every If/Loop/Scan body (to
// limits::kMaxGraphDepth) and every model-local function body:
//   - names: not empty, graph inputs unique, initializers unique, SSA (one
//     producer per name), no node output shadowing an enclosing graph's name;
//   - every node input is defined in scope (this graph, enclosing graphs);
//   - order: a node uses only values produced before it (directly or in its
//     subgraphs); a dependency cycle is reported as such (E0303, naming the
//     nodes on it), not as an ordering problem;
//   - graph outputs are produced inside the graph;
//   - declared types are well formed; main-graph inputs and outputs typed.
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checker/rules/rules.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"
#include "lib/base/strings.h"

namespace onnxkit::checker::internal {
namespace {

// --- Declared types ----------------------------------------------------------

bool IsMapKeyType(int32_t t) {
  switch (t) {
    case pb::kInt8:
    case pb::kInt16:
    case pb::kInt32:
    case pb::kInt64:
    case pb::kUint8:
    case pb::kUint16:
    case pb::kUint32:
    case pb::kUint64:
    case pb::kString:
      return true;
    default:
      return false;
  }
}

std::string CheckShape(const pb::TensorShapeProto& shape) {
  if (shape.dim.size() > static_cast<size_t>(limits::kMaxRank)) {
    return absl::StrCat("rank ", shape.dim.size(), " exceeds the limit of ", limits::kMaxRank);
  }
  for (size_t i = 0; i < shape.dim.size(); ++i) {
    const auto& d = shape.dim[i];
    if (d.kind == pb::TensorShapeProto::Dimension::kValue && d.dim_value < 0) {
      return absl::StrCat("dimension #", i, " is ", d.dim_value, ", expected >= 0 (or a symbolic dim_param)");
    }
  }
  return "";
}

// Why `type` is not well formed; "" when it is. `strict` (main-graph inputs
// and outputs) requires tensor element types to be set.
std::string CheckType(const pb::TypeProto& type, bool strict, int depth) {
  if (depth > limits::kMaxMessageDepth) return "the type nests too deep";
  const int kinds = (type.tensor_type ? 1 : 0) + (type.sequence_type ? 1 : 0) + (type.map_type ? 1 : 0) +
                    (type.opaque_type ? 1 : 0) + (type.sparse_tensor_type ? 1 : 0) +
                    (type.optional_type ? 1 : 0);
  if (kinds > 1) return "the type sets several kinds (tensor, sequence, map...) at once";
  if (kinds == 0) return strict ? "the type is empty (no tensor_type, sequence_type, map_type...)" : "";
  auto elem = [&](int32_t elem_type, std::string_view what) -> std::string {
    if (elem_type == pb::kUndefined) {
      return strict ? absl::StrCat(Sv(what), " elem_type is undefined") : std::string();
    }
    if (!IsKnownDataType(elem_type)) {
      return absl::StrCat(Sv(what), " elem_type ", elem_type, " is not a known element type");
    }
    return "";
  };
  if (type.tensor_type) {
    std::string why = elem(type.tensor_type->elem_type, "tensor");
    if (why.empty() && type.tensor_type->shape) why = CheckShape(*type.tensor_type->shape);
    return why;
  }
  if (type.sparse_tensor_type) {
    std::string why = elem(type.sparse_tensor_type->elem_type, "sparse tensor");
    if (why.empty() && type.sparse_tensor_type->shape) why = CheckShape(*type.sparse_tensor_type->shape);
    return why;
  }
  if (type.sequence_type) {
    if (!type.sequence_type->elem_type) return strict ? "sequence type without elem_type" : "";
    return CheckType(*type.sequence_type->elem_type, strict, depth + 1);
  }
  if (type.optional_type) {
    if (!type.optional_type->elem_type) return strict ? "optional type without elem_type" : "";
    return CheckType(*type.optional_type->elem_type, strict, depth + 1);
  }
  if (type.map_type) {
    if (!IsMapKeyType(type.map_type->key_type)) {
      return absl::StrCat("map key_type ", ElemTypeLabel(type.map_type->key_type),
                          " is not an integer type or string");
    }
    if (!type.map_type->value_type) return strict ? "map type without value_type" : "";
    return CheckType(*type.map_type->value_type, strict, depth + 1);
  }
  return "";  // opaque
}

// --- Scopes ------------------------------------------------------------------

struct Def {
  enum Kind : uint8_t { kInput, kInitializer, kNodeOutput };
  Kind kind;
  int32_t node = -1;     // kNodeOutput: index of the producing node
  bool shadows = false;  // kNodeOutput: redefines an enclosing value (E0301)
};

// The names one graph (or function body) defines.
struct Frame {
  std::string location;
  const std::vector<pb::NodeProto>* nodes = nullptr;
  absl::flat_hash_map<std::string_view, Def> defs;  // an index, never iterated
};

// One use, by a node, of a value produced by a node of the same graph.
struct Use {
  int32_t producer;
  int32_t input;     // >= 0: index in the node's inputs; -1: see `implicit`
  int32_t implicit;  // index into GraphRules::implicit_ (a subgraph's use)
};

// A value a node's subgraph reads from the node's graph.
struct ImplicitUse {
  std::string name;
  std::string subgraph;  // "attribute 'body'"
};

class GraphRules {
 public:
  GraphRules(const ModelFacts& facts, Sink* sink) : facts_(facts), sink_(sink) {}

  void CheckGraph(const pb::GraphProto& g, const std::string& location, int depth, bool is_main);
  void CheckFunction(const pb::FunctionProto& f);

 private:
  std::string Describe(const Frame& frame, const Def& def, std::string_view name) const;
  void CheckDeclaredType(const pb::ValueInfoProto& vi, std::string_view what, bool strict,
                         const std::string& location);
  void DefineNodeOutputs(Frame* frame);
  // Inputs defined in scope, order and cycles, then the subgraphs.
  void CheckNodes(Frame* frame, int depth);
  bool DefinedOutside(std::string_view name) const;
  void ReportOrder(const Frame& frame, const std::vector<std::vector<Use>>& uses,
                   const std::vector<ImplicitUse>& implicit);
  void ReportCycle(const Frame& frame, const std::vector<std::vector<Use>>& uses,
                   const std::vector<int32_t>& component, int32_t start);

  const ModelFacts& facts_;
  Sink* sink_;
  std::vector<const Frame*> outer_;  // enclosing scopes, innermost last
  bool depth_reported_ = false;
};

std::string GraphRules::Describe(const Frame& frame, const Def& def, std::string_view name) const {
  switch (def.kind) {
    case Def::kInput:
      return absl::StrCat("graph input ", Quote(name));
    case Def::kInitializer:
      return absl::StrCat("initializer ", Quote(name));
    case Def::kNodeOutput:
      return NodeLabel((*frame.nodes)[def.node], def.node);
  }
  return "";
}

void GraphRules::CheckDeclaredType(const pb::ValueInfoProto& vi, std::string_view what, bool strict,
                                   const std::string& location) {
  if (!vi.type) {
    if (strict) {
      sink_->Report(rules::kE0309, location, absl::StrCat(Sv(what), " ", Quote(vi.name), " has no type"),
                    "declare the element type (and shape) of every main-graph input and output");
    }
    return;
  }
  std::string why = CheckType(*vi.type, strict, 0);
  if (!why.empty()) {
    sink_->Report(rules::kE0309, location, absl::StrCat(Sv(what), " ", Quote(vi.name), ": ", why));
  }
}

bool GraphRules::DefinedOutside(std::string_view name) const {
  for (const Frame* f : outer_) {
    if (f->defs.count(name) > 0) return true;
  }
  return false;
}

void GraphRules::DefineNodeOutputs(Frame* frame) {
  const std::vector<pb::NodeProto>& nodes = *frame->nodes;
  for (size_t j = 0; j < nodes.size() && !sink_->stopped(); ++j) {
    const pb::NodeProto& node = nodes[j];
    for (size_t k = 0; k < node.output.size(); ++k) {
      const std::string& out = node.output[k];
      if (out.empty()) continue;  // an omitted optional output
      auto [it, inserted] = frame->defs.try_emplace(out, Def{Def::kNodeOutput, static_cast<int32_t>(j)});
      if (!inserted) {
        const Def& prev = it->second;
        std::string message =
            prev.kind == Def::kNodeOutput && prev.node == static_cast<int32_t>(j)
                ? absl::StrCat("output ", Quote(out), " appears twice in the node's outputs")
                : absl::StrCat("output ", Quote(out), " is already produced by ",
                               Describe(*frame, prev, out));
        sink_->Report(rules::kE0300, Join(frame->location, NodeLabel(node, j)), std::move(message),
                      "every value must have exactly one producer (static single assignment)");
      } else if (DefinedOutside(out)) {
        it->second.shadows = true;  // uses are ambiguous: no order checks for them
        sink_->Report(rules::kE0301, Join(frame->location, NodeLabel(node, j)),
                      absl::StrCat("output ", Quote(out), " shadows a value of an enclosing graph"),
                      "rename the output; subgraphs may read enclosing values but not redefine them");
      }
    }
  }
}

void GraphRules::CheckNodes(Frame* frame, int depth) {
  const std::vector<pb::NodeProto>& nodes = *frame->nodes;
  const bool descend = depth + 1 <= limits::kMaxGraphDepth;
  std::vector<std::vector<Use>> uses(nodes.size());
  std::vector<ImplicitUse> implicit;
  bool forward = false;
  for (size_t j = 0; j < nodes.size() && !sink_->stopped(); ++j) {
    const pb::NodeProto& node = nodes[j];
    // Records a use of `name`; false when it is defined nowhere in scope.
    auto use = [&](std::string_view name, int32_t input, int32_t implicit_index) {
      auto it = frame->defs.find(name);
      if (it == frame->defs.end()) return DefinedOutside(name);
      if (it->second.kind == Def::kNodeOutput && !it->second.shadows) {
        uses[j].push_back({it->second.node, input, implicit_index});
        if (it->second.node >= static_cast<int32_t>(j)) forward = true;
      }
      return true;
    };
    for (size_t k = 0; k < node.input.size(); ++k) {
      const std::string& in = node.input[k];
      if (in.empty() || use(in, static_cast<int32_t>(k), -1)) continue;
      sink_->Report(rules::kE0304, Join(frame->location, NodeLabel(node, j)),
                    absl::StrCat("input ", Quote(in), " (#", k,
                                 ") is not defined: no graph input, initializer or node output in scope "
                                 "has this name"));
    }
    if (!descend) continue;
    // Values the node's subgraphs read from outside; a name defined nowhere
    // is reported inside the subgraph.
    for (const SubgraphRef& sub : Subgraphs(node)) {
      for (std::string& name : OuterReferences(*sub.graph, depth + 1)) {
        auto it = frame->defs.find(name);
        if (it == frame->defs.end() || it->second.kind != Def::kNodeOutput || it->second.shadows) continue;
        implicit.push_back({std::move(name), sub.label});
        use(implicit.back().name, -1, static_cast<int32_t>(implicit.size() - 1));
      }
    }
  }
  if (forward && !sink_->stopped()) ReportOrder(*frame, uses, implicit);
  if (!descend) {
    for (const pb::NodeProto& node : nodes) {
      if (Subgraphs(node).empty() || depth_reported_) continue;
      depth_reported_ = true;
      sink_->Report(rules::kE0104, frame->location,
                    absl::StrCat("subgraphs nest deeper than ", limits::kMaxGraphDepth,
                                 " levels (limits::kMaxGraphDepth); deeper graphs are not checked"));
    }
    return;
  }
  // Subgraphs see every value of this graph (their order is checked above).
  outer_.push_back(frame);
  for (size_t j = 0; j < nodes.size() && !sink_->stopped(); ++j) {
    for (const SubgraphRef& sub : Subgraphs(nodes[j])) {
      CheckGraph(*sub.graph, Join(Join(frame->location, NodeLabel(nodes[j], j)), sub.label), depth + 1,
                 /*is_main=*/false);
    }
  }
  outer_.pop_back();
}

// Strongly connected components of the "uses" relation (Tarjan, iterative).
std::vector<int32_t> Components(const std::vector<std::vector<Use>>& uses) {
  const int32_t n = static_cast<int32_t>(uses.size());
  std::vector<int32_t> index(n, -1), low(n, 0), component(n, -1), stack;
  std::vector<bool> on_stack(n, false);
  std::vector<std::pair<int32_t, size_t>> calls;  // (node, next use)
  int32_t counter = 0, components = 0;
  for (int32_t root = 0; root < n; ++root) {
    if (index[root] != -1) continue;
    auto visit = [&](int32_t v) {
      index[v] = low[v] = counter++;
      stack.push_back(v);
      on_stack[v] = true;
      calls.push_back({v, 0});
    };
    visit(root);
    while (!calls.empty()) {
      const int32_t v = calls.back().first;
      const size_t next = calls.back().second;
      if (next < uses[v].size()) {
        ++calls.back().second;
        const int32_t w = uses[v][next].producer;
        if (index[w] == -1) {
          visit(w);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        int32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = false;
          component[w] = components;
        } while (w != v);
        ++components;
      }
      calls.pop_back();
      if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[v]);
    }
  }
  return component;
}

void GraphRules::ReportCycle(const Frame& frame, const std::vector<std::vector<Use>>& uses,
                             const std::vector<int32_t>& component, int32_t start) {
  // Breadth-first search from `start` along uses, inside its component,
  // back to `start`: start uses p1, p1 uses p2, ..., pk uses start.
  std::unordered_map<int32_t, int32_t> parent;
  std::vector<int32_t> queue = {start};
  int32_t last = -1;
  for (size_t q = 0; q < queue.size() && last < 0; ++q) {
    for (const Use& u : uses[queue[q]]) {
      if (u.producer == start) {
        last = queue[q];
        break;
      }
      if (component[u.producer] == component[start] && parent.emplace(u.producer, queue[q]).second) {
        queue.push_back(u.producer);
      }
    }
  }
  // Data flows the other way: start -> pk -> ... -> p1 -> start.
  std::vector<int32_t> flow = {start};
  for (int32_t v = last; v >= 0 && v != start; v = parent[v]) flow.push_back(v);
  flow.push_back(start);
  constexpr size_t kMaxShown = 8;
  std::vector<std::string> labels;
  for (size_t i = 0; i < flow.size(); ++i) {
    if (flow.size() > kMaxShown && i == kMaxShown - 2) {
      labels.push_back(absl::StrCat("... (", flow.size() - kMaxShown + 1, " more)"));
      i = flow.size() - 2;
      continue;
    }
    labels.push_back(NodeLabel((*frame.nodes)[flow[i]], flow[i]));
  }
  const pb::NodeProto& node = (*frame.nodes)[start];
  sink_->Report(rules::kE0303, Join(frame.location, NodeLabel(node, start)),
                absl::StrCat("nodes form a cycle: ", absl::StrJoin(labels, " \xe2\x86\x92 ")),
                "a graph must be acyclic; values carried between iterations belong in a Loop or Scan body");
}

void GraphRules::ReportOrder(const Frame& frame, const std::vector<std::vector<Use>>& uses,
                             const std::vector<ImplicitUse>& implicit) {
  const std::vector<int32_t> component = Components(uses);
  std::vector<bool> cycle_reported(uses.size(), false);  // by component id
  for (size_t j = 0; j < uses.size() && !sink_->stopped(); ++j) {
    const pb::NodeProto& node = (*frame.nodes)[j];
    for (const Use& u : uses[j]) {
      if (u.producer < static_cast<int32_t>(j)) continue;
      if (component[u.producer] == component[j]) {
        if (!cycle_reported[component[j]]) {
          cycle_reported[component[j]] = true;
          ReportCycle(frame, uses, component, static_cast<int32_t>(j));
        }
        continue;
      }
      const std::string producer = NodeLabel((*frame.nodes)[u.producer], u.producer);
      std::string what = u.input >= 0
                             ? absl::StrCat("input ", Quote(node.input[u.input]), " (#", u.input, ")")
                             : absl::StrCat(implicit[u.implicit].subgraph, " reads ",
                                            Quote(implicit[u.implicit].name), ", which");
      sink_->Report(
          rules::kE0302, Join(frame.location, NodeLabel(node, j)),
          absl::StrCat(what, " is produced by a later node, ", producer, " (this node is #", j, ")"),
          "sort the nodes topologically: every producer before its consumers");
    }
  }
}

void GraphRules::CheckGraph(const pb::GraphProto& g, const std::string& location, int depth, bool is_main) {
  Frame frame;
  frame.location = location;
  frame.nodes = &g.node;
  frame.defs.reserve(g.input.size() + g.initializer.size() + g.sparse_initializer.size() + g.node.size());
  if (is_main && g.name.empty()) {
    sink_->Report(rules::kE0310, location, "the main graph has no name");
  }
  for (size_t i = 0; i < g.input.size() && !sink_->stopped(); ++i) {
    const pb::ValueInfoProto& vi = g.input[i];
    if (vi.name.empty()) {
      sink_->Report(rules::kE0308, location, absl::StrCat("graph input #", i, " has an empty name"));
      continue;
    }
    if (!frame.defs.try_emplace(vi.name, Def{Def::kInput}).second) {
      sink_->Report(rules::kE0306, location, absl::StrCat("graph input ", Quote(vi.name), " appears twice"));
      continue;
    }
    CheckDeclaredType(vi, "graph input", is_main, location);
  }
  // Initializers, dense then sparse: unique among themselves; one may share
  // its name with a graph input (the input's default value).
  absl::flat_hash_map<std::string_view, size_t> initializers;
  auto define_initializer = [&](const std::string& name, std::string_view what, size_t i) {
    if (name.empty()) {
      sink_->Report(rules::kE0308, location, absl::StrCat(Sv(what), " #", i, " has an empty name"));
      return;
    }
    if (!initializers.emplace(name, i).second) {
      sink_->Report(rules::kE0307, location, absl::StrCat(Sv(what), " ", Quote(name), " appears twice"),
                    "initializer names must be unique across initializer and sparse_initializer");
      return;
    }
    auto [it, inserted] = frame.defs.try_emplace(name, Def{Def::kInitializer});
    if (inserted && facts_.ir_version >= 1 && facts_.ir_version < 4) {
      sink_->Report(rules::kE0311, location,
                    absl::StrCat(Sv(what), " ", Quote(name),
                                 " is not a graph input (required before IR version 4; "
                                 "the model is IR version ",
                                 facts_.ir_version, ")"));
    }
  };
  for (size_t i = 0; i < g.initializer.size() && !sink_->stopped(); ++i) {
    define_initializer(g.initializer[i].name, "initializer", i);
  }
  for (size_t i = 0; i < g.sparse_initializer.size() && !sink_->stopped(); ++i) {
    const pb::SparseTensorProto& s = g.sparse_initializer[i];
    static const std::string kNoName;  // an lvalue: the maps keep views of the name
    define_initializer(s.values ? s.values->name : kNoName, "sparse initializer", i);
  }
  DefineNodeOutputs(&frame);
  for (size_t i = 0; i < g.value_info.size() && !sink_->stopped(); ++i) {
    const pb::ValueInfoProto& vi = g.value_info[i];
    if (vi.name.empty()) {
      sink_->Report(rules::kE0308, location, absl::StrCat("value_info #", i, " has an empty name"));
      continue;
    }
    CheckDeclaredType(vi, "value_info", /*strict=*/false, location);
  }
  CheckNodes(&frame, depth);
  for (size_t i = 0; i < g.output.size() && !sink_->stopped(); ++i) {
    const pb::ValueInfoProto& vi = g.output[i];
    if (vi.name.empty()) {
      sink_->Report(rules::kE0308, location, absl::StrCat("graph output #", i, " has an empty name"));
      continue;
    }
    if (frame.defs.count(vi.name) == 0) {
      const bool outer = DefinedOutside(vi.name);
      sink_->Report(rules::kE0305, location,
                    absl::StrCat("graph output ", Quote(vi.name),
                                 outer ? " is a value of an enclosing graph, not produced in this graph"
                                       : " is not produced by any node, graph input or initializer"),
                    outer ? "pass it through an Identity node inside the subgraph" : "");
    }
    CheckDeclaredType(vi, "graph output", is_main, location);
  }
}

void GraphRules::CheckFunction(const pb::FunctionProto& f) {
  Frame frame;
  frame.location = FunctionLabel(f);
  frame.nodes = &f.node;
  for (const std::string& in : f.input) {
    if (!in.empty()) frame.defs.try_emplace(in, Def{Def::kInput});  // duplicates: E0210
  }
  DefineNodeOutputs(&frame);
  for (const pb::ValueInfoProto& vi : f.value_info) {
    CheckDeclaredType(vi, "value_info", /*strict=*/false, frame.location);
  }
  CheckNodes(&frame, 0);
  for (const std::string& out : f.output) {
    if (out.empty() || frame.defs.count(out) > 0 || sink_->stopped()) continue;
    sink_->Report(rules::kE0305, frame.location,
                  absl::StrCat("function output ", Quote(out),
                               " is not produced by any node or input of the "
                               "function"));
  }
}

}  // namespace

void CheckGraphRules(const pb::ModelProto& model, const ModelFacts& facts, Sink* sink) {
  GraphRules rules(facts, sink);
  if (model.graph) rules.CheckGraph(*model.graph, GraphLabel(*model.graph), 0, /*is_main=*/true);
  for (const pb::FunctionProto& f : model.functions) {
    if (sink->stopped()) break;
    rules.CheckFunction(f);
  }
}

}  // namespace onnxkit::checker::internal
