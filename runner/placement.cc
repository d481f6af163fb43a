// Placement of nodes between a device backend and the host.
#include "runner/placement.h"

#include "absl/container/flat_hash_map.h"

namespace onnxkit::runner {
namespace {

// Which sides hold a value so far.
struct Residence {
  bool host = false;
  bool device = false;
};

bool HasSubgraph(const ir::Node& node) {
  bool found = false;
  node.ForEachSubgraph([&](ir::Graph*) { found = true; });
  return found;
}

// Values of `graph`'s scope that `node` reads, directly or in its bodies.
void Uses(const ir::Node& node, const ir::Graph& graph, std::vector<const ir::Value*>* out) {
  for (const ir::Value* v : node.inputs()) {
    if (v != nullptr && v->graph() == &graph) out->push_back(v);
  }
  node.ForEachSubgraph([&](ir::Graph* sub) {
    for (const ir::Node* inner : sub->nodes()) Uses(*inner, graph, out);
    for (const ir::Value* o : sub->outputs()) {
      if (o->graph() == &graph) out->push_back(o);
    }
  });
}

}  // namespace

PlacementPlan PlanPlacement(const ir::Graph& graph, std::span<ir::Node* const> order,
                            const std::function<bool(const ir::Node&)>& on_device) {
  PlacementPlan plan;
  plan.place.reserve(order.size());
  plan.before.resize(order.size());
  // Values absent from the map are graph inputs or initializers: host.
  absl::flat_hash_map<const ir::Value*, Residence> where;
  std::vector<const ir::Value*> uses;
  for (size_t step = 0; step < order.size(); ++step) {
    const ir::Node& node = *order[step];
    const Place place = !HasSubgraph(node) && on_device(node) ? Place::kDevice : Place::kHost;
    plan.place.push_back(place);
    if (place == Place::kDevice) ++plan.device_steps;
    uses.clear();
    Uses(node, graph, &uses);
    for (const ir::Value* v : uses) {
      auto [it, fresh] = where.try_emplace(v);
      if (fresh) it->second.host = true;
      bool& there = place == Place::kDevice ? it->second.device : it->second.host;
      if (there) continue;
      there = true;
      plan.before[step].push_back({v, place});
      ++plan.num_transfers;
    }
    for (const ir::Value* out : node.outputs()) {
      if (out == nullptr || out->name().empty()) continue;
      Residence& r = where[out];
      r = Residence{};
      (place == Place::kDevice ? r.device : r.host) = true;
    }
  }
  for (const ir::Value* out : graph.outputs()) {
    auto it = where.find(out);
    if (it == where.end() || it->second.host) continue;
    it->second.host = true;
    plan.at_end.push_back({out, Place::kHost});
    ++plan.num_transfers;
  }
  return plan;
}

}  // namespace onnxkit::runner
