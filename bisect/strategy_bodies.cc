// bodies: remove dead nodes from the bodies of the main graph's Loop and
// Scan nodes (ddmin keeps or drops such a node as one unit). A body node is
// dead when no body output is among its outputs and no other body node
// reads them; each round tries all dead nodes of one body at once, then one
// at a time (the failure may sit in a dead node), until nothing changes.
//   Before: Loop body { t = Abs(x); d = Neg(t); u = Sin(d) -> t }
//   After:  Loop body { t = Abs(x) -> t }   (after two rounds: u, then d)
#include <set>

#include "bisect/strategies.h"

namespace onnxkit::bisect {
namespace {

struct BodyNodes {
  size_t node = 0;       // the Loop/Scan in the main graph
  size_t attribute = 0;  // its body attribute
  std::vector<int> dead;
};

std::vector<int> DeadNodes(const pb::GraphProto& body) {
  std::set<std::string> used;
  for (const auto& out : body.output) used.insert(out.name);
  for (const auto& n : body.node) {
    for (const std::string& name : NodeReads(n)) used.insert(name);
  }
  std::vector<int> dead;
  for (size_t i = 0; i < body.node.size(); ++i) {
    bool any = false;
    for (const std::string& out : body.node[i].output) any = any || (!out.empty() && used.count(out) > 0);
    if (!any) dead.push_back(static_cast<int>(i));
  }
  return dead;
}

std::vector<BodyNodes> FindDead(const pb::GraphProto& g) {
  std::vector<BodyNodes> found;
  for (size_t i = 0; i < g.node.size(); ++i) {
    const pb::NodeProto& n = g.node[i];
    if (!n.domain.empty() || (n.op_type != "Loop" && n.op_type != "Scan")) continue;
    for (size_t a = 0; a < n.attribute.size(); ++a) {
      if (n.attribute[a].name != "body" || !n.attribute[a].g) continue;
      std::vector<int> dead = DeadNodes(*n.attribute[a].g);
      if (!dead.empty()) found.push_back({i, a, std::move(dead)});
    }
  }
  return found;
}

// `model` without body nodes `drop` of body (node, attribute).
pb::ModelProto WithoutBodyNodes(const pb::ModelProto& model, const BodyNodes& where,
                                const std::vector<int>& drop) {
  pb::ModelProto out = model;
  pb::GraphProto& body =
      out.graph.mutable_value().node[where.node].attribute[where.attribute].g.mutable_value();
  std::set<int> gone(drop.begin(), drop.end());
  std::vector<pb::NodeProto> kept;
  for (size_t i = 0; i < body.node.size(); ++i) {
    if (gone.count(static_cast<int>(i)) == 0) kept.push_back(body.node[i]);
  }
  body.node.assign(kept.begin(), kept.end());
  return out;
}

}  // namespace

absl::Status RemoveDeadBodyNodes(Reducer& r) {
  for (bool again = true; again && !r.OutOfBudget();) {
    again = false;
    if (!r.current().graph) return absl::OkStatus();
    pb::ModelProto base = r.current();
    std::vector<std::pair<const BodyNodes*, std::vector<int>>> tries;
    std::vector<BodyNodes> dead = FindDead(*base.graph);
    for (const BodyNodes& b : dead) {
      tries.emplace_back(&b, b.dead);
      if (b.dead.size() > 1) {
        for (int d : b.dead) tries.emplace_back(&b, std::vector<int>{d});
      }
    }
    auto got = r.TryFirst(static_cast<int>(tries.size()), [&](int k) -> absl::StatusOr<pb::ModelProto> {
      const auto& t = tries[static_cast<size_t>(k)];
      return WithoutBodyNodes(base, *t.first, t.second);
    });
    if (!got.ok()) return got.status();
    again = *got >= 0;
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::bisect
