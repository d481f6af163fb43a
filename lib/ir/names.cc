// NameGenerator and the walks that seed it.
#include "lib/ir/names.h"

#include "absl/strings/str_cat.h"
#include "lib/base/limits.h"
#include "lib/base/strings.h"
#include "lib/ir/graph.h"

namespace onnxkit::ir {

std::string NameGenerator::Fresh(std::string_view hint, absl::FunctionRef<bool(std::string_view)> in_use) {
  std::string base = hint.empty() ? std::string("v") : std::string(hint);
  if (!IsReserved(base) && !in_use(base)) {
    reserved_.insert(base);
    return base;
  }
  int64_t& next = next_suffix_[base];
  for (;;) {
    ++next;
    std::string candidate = absl::StrCat(base, "_", next);
    if (!IsReserved(candidate) && !in_use(candidate)) {
      reserved_.insert(candidate);
      return candidate;
    }
  }
}

void NameGenerator::Reserve(std::string_view name) {
  if (!name.empty()) reserved_.insert(std::string(name));
}

bool NameGenerator::IsReserved(std::string_view name) const { return reserved_.contains(Sv(name)); }

void ReserveGraphNames(const Graph& graph, NameGenerator* names) {
  ForEachGraph(graph, [names](const Graph& g) {
    for (const Value* v : g.values()) names->Reserve(v->name());
    for (const Node* n : g.nodes()) names->Reserve(n->name());
  });
}

namespace {

void ReservePbGraph(const pb::GraphProto& g, NameGenerator* names, int depth);

void ReservePbNodes(const std::vector<pb::NodeProto>& nodes, NameGenerator* names, int depth) {
  for (const pb::NodeProto& n : nodes) {
    names->Reserve(n.name);
    for (const std::string& s : n.input) names->Reserve(s);
    for (const std::string& s : n.output) names->Reserve(s);
    if (depth >= limits::kMaxMessageDepth) continue;  // the decoder never nests deeper
    for (const pb::AttributeProto& a : n.attribute) {
      if (a.g) ReservePbGraph(*a.g, names, depth + 1);
      for (const pb::GraphProto& g : a.graphs) ReservePbGraph(g, names, depth + 1);
    }
  }
}

void ReservePbGraph(const pb::GraphProto& g, NameGenerator* names, int depth) {
  for (const auto& vi : g.input) names->Reserve(vi.name);
  for (const auto& vi : g.output) names->Reserve(vi.name);
  for (const auto& vi : g.value_info) names->Reserve(vi.name);
  for (const auto& t : g.initializer) names->Reserve(t.name);
  for (const auto& t : g.sparse_initializer) {
    if (t.values) names->Reserve(t.values->name);
  }
  ReservePbNodes(g.node, names, depth);
}

}  // namespace

void ReserveFunctionNames(const pb::FunctionProto& function, NameGenerator* names) {
  for (const std::string& s : function.input) names->Reserve(s);
  for (const std::string& s : function.output) names->Reserve(s);
  for (const auto& vi : function.value_info) names->Reserve(vi.name);
  ReservePbNodes(function.node, names, 0);
}

}  // namespace onnxkit::ir
