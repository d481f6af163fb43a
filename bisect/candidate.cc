// Candidate construction: node subsets as standalone models, cones, feeds.
#include "bisect/candidate.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"

namespace onnxkit::bisect {
namespace {

// Adds to `reads` the names `graph` reads from outer scopes.
void OuterReads(const pb::GraphProto& graph, std::set<std::string>& defined_outside_unused,
                std::vector<std::string>& reads, std::set<std::string>& seen, int depth) {
  if (depth > 64) return;  // bodies nest a bounded depth in valid models
  std::set<std::string> defined;
  for (const auto& i : graph.input) defined.insert(i.name);
  for (const auto& t : graph.initializer) defined.insert(t.name);
  for (const auto& n : graph.node) {
    std::vector<std::string> inner;
    for (const auto& in : n.input) inner.push_back(in);
    for (const auto& a : n.attribute) {
      std::vector<std::string> sub_reads;
      std::set<std::string> sub_seen;
      if (a.g) OuterReads(*a.g, defined_outside_unused, sub_reads, sub_seen, depth + 1);
      for (const auto& g : a.graphs) OuterReads(g, defined_outside_unused, sub_reads, sub_seen, depth + 1);
      inner.insert(inner.end(), sub_reads.begin(), sub_reads.end());
    }
    for (const auto& name : inner) {
      if (!name.empty() && defined.count(name) == 0 && seen.insert(name).second) reads.push_back(name);
    }
    for (const auto& out : n.output) defined.insert(out);
  }
}

}  // namespace

const pb::TypeProto* TypeSource::Find(const std::string& name) const {
  if (golden_ != nullptr) {
    const pb::TypeProto* t = golden_->TypeOf(name);
    if (t != nullptr && t->tensor_type) return t;
  }
  auto it = inferred_.find(name);
  return it == inferred_.end() ? nullptr : &it->second;
}

std::vector<std::string> NodeReads(const pb::NodeProto& node) {
  std::vector<std::string> reads;
  std::set<std::string> seen;
  for (const auto& in : node.input) {
    if (!in.empty() && seen.insert(in).second) reads.push_back(in);
  }
  std::set<std::string> unused;
  for (const auto& a : node.attribute) {
    if (a.g) OuterReads(*a.g, unused, reads, seen, 1);
    for (const auto& g : a.graphs) OuterReads(g, unused, reads, seen, 1);
  }
  return reads;
}

std::vector<int> ConeOf(const pb::GraphProto& graph, const std::vector<std::string>& names) {
  std::map<std::string, int> producer;
  for (size_t i = 0; i < graph.node.size(); ++i) {
    for (const auto& out : graph.node[i].output) producer.emplace(out, static_cast<int>(i));
  }
  std::vector<bool> in_cone(graph.node.size(), false);
  std::vector<std::string> stack(names.begin(), names.end());
  while (!stack.empty()) {
    std::string name = std::move(stack.back());
    stack.pop_back();
    auto it = producer.find(name);
    if (it == producer.end() || in_cone[static_cast<size_t>(it->second)]) continue;
    in_cone[static_cast<size_t>(it->second)] = true;
    for (auto& r : NodeReads(graph.node[static_cast<size_t>(it->second)])) stack.push_back(std::move(r));
  }
  std::vector<int> cone;
  for (size_t i = 0; i < in_cone.size(); ++i) {
    if (in_cone[i]) cone.push_back(static_cast<int>(i));
  }
  return cone;
}

absl::StatusOr<pb::ModelProto> KeepNodes(const pb::ModelProto& model, const std::vector<int>& keep,
                                         const TypeSource& types) {
  if (!model.graph) return absl::InvalidArgumentError("model has no graph");
  const pb::GraphProto& g = *model.graph;
  std::vector<int> sorted = keep;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  pb::ModelProto out = model;
  pb::GraphProto& ng = out.graph.mutable_value();
  ng.node.clear();
  ng.input.clear();
  ng.output.clear();
  ng.initializer.clear();
  ng.value_info.clear();
  std::set<std::string> produced, read;
  std::vector<std::string> read_order;
  for (int i : sorted) {
    if (i < 0 || static_cast<size_t>(i) >= g.node.size()) return absl::InvalidArgumentError("node index out of range");
    const pb::NodeProto& n = g.node[static_cast<size_t>(i)];
    for (auto& r : NodeReads(n)) {
      if (produced.count(r) == 0 && read.insert(r).second) read_order.push_back(r);
    }
    for (const auto& o : n.output) {
      if (!o.empty()) produced.insert(o);
    }
    ng.node.push_back(n);
  }
  std::set<std::string> all_read;
  for (const auto& n : ng.node) {
    for (auto& r : NodeReads(n)) all_read.insert(r);
  }
  std::set<std::string> inits, inputs_added;
  for (const auto& t : g.initializer) {
    if (read.count(t.name) > 0) {
      ng.initializer.push_back(t);
      inits.insert(t.name);
    }
  }
  for (const auto& in : g.input) {
    if (read.count(in.name) > 0) {
      ng.input.push_back(in);
      inputs_added.insert(in.name);
    }
  }
  for (const auto& name : read_order) {
    if (inits.count(name) > 0 || inputs_added.count(name) > 0) continue;
    pb::ValueInfoProto vi;
    vi.name = name;
    if (const pb::TypeProto* t = types.Find(name)) vi.type = *t;
    ng.input.push_back(std::move(vi));
    inputs_added.insert(name);
  }
  std::set<std::string> outputs;
  for (const auto& o : g.output) {
    if (produced.count(o.name) > 0 && outputs.insert(o.name).second) ng.output.push_back(o);
  }
  for (const auto& n : ng.node) {
    for (const auto& o : n.output) {
      if (o.empty() || all_read.count(o) > 0 || !outputs.insert(o).second) continue;
      pb::ValueInfoProto vi;
      vi.name = o;
      if (const pb::TypeProto* t = types.Find(o)) vi.type = *t;
      ng.output.push_back(std::move(vi));
    }
  }
  for (const auto& vi : g.value_info) {
    if (produced.count(vi.name) > 0 && outputs.count(vi.name) == 0) ng.value_info.push_back(vi);
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, runner::RtValue>>> GoldenFeeds(const pb::ModelProto& model,
                                                                                 const GoldenStore& golden) {
  std::vector<std::pair<std::string, runner::RtValue>> feeds;
  if (!model.graph) return feeds;
  std::set<std::string> inits;
  for (const auto& t : model.graph->initializer) inits.insert(t.name);
  for (const auto& in : model.graph->input) {
    if (inits.count(in.name) > 0) continue;
    ONNXKIT_ASSIGN_OR_RETURN(runner::RtValue v, golden.Load(in.name));
    feeds.emplace_back(in.name, std::move(v));
  }
  // Initializers the original run was fed instead (--input NAME=FILE of an
  // initializer that is also a graph input), after the required inputs.
  std::set<std::string> overridden;
  for (const auto& [name, value] : golden.original_feeds()) overridden.insert(name);
  for (const auto& in : model.graph->input) {
    if (inits.count(in.name) == 0 || overridden.count(in.name) == 0) continue;
    ONNXKIT_ASSIGN_OR_RETURN(runner::RtValue v, golden.Load(in.name));
    feeds.emplace_back(in.name, std::move(v));
  }
  return feeds;
}

int MainNodeCount(const pb::ModelProto& model) {
  return model.graph ? static_cast<int>(model.graph->node.size()) : 0;
}

namespace {

int GraphNodeCount(const pb::GraphProto& graph) {
  int n = static_cast<int>(graph.node.size());
  for (const pb::NodeProto& node : graph.node) {
    for (const pb::AttributeProto& a : node.attribute) {
      if (a.g) n += GraphNodeCount(*a.g);
      for (const pb::GraphProto& g : a.graphs) n += GraphNodeCount(g);
    }
  }
  return n;
}

}  // namespace

int TotalNodeCount(const pb::ModelProto& model) { return model.graph ? GraphNodeCount(*model.graph) : 0; }

}  // namespace onnxkit::bisect
