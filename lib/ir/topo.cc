// Topological order: Kahn's algorithm with ties broken by list position.
#include "lib/ir/topo.h"

#include <functional>
#include <queue>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"

namespace onnxkit::ir {
namespace {

// The node of `graph` that is, or (through subgraphs) contains, `user`.
const Node* AnchorIn(const Graph& graph, const Node* user) {
  while (user != nullptr && user->graph() != &graph) user = user->graph()->owner_node();
  return user;
}

// One node on a cycle among the nodes not emitted (in-degree left > 0).
int NodeOnCycle(const std::vector<std::vector<int>>& preds, const std::vector<int>& indegree) {
  int start = 0;
  while (indegree[static_cast<size_t>(start)] == 0) ++start;
  std::vector<bool> seen(indegree.size(), false);
  int at = start;
  while (!seen[static_cast<size_t>(at)]) {
    seen[static_cast<size_t>(at)] = true;
    for (int p : preds[static_cast<size_t>(at)]) {
      if (indegree[static_cast<size_t>(p)] > 0) {
        at = p;
        break;
      }
    }
  }
  return at;
}

}  // namespace

absl::StatusOr<std::vector<Node*>> TopologicalOrder(const Graph& graph) {
  std::vector<Node*> nodes(graph.nodes().begin(), graph.nodes().end());
  absl::flat_hash_map<const Node*, int> position;
  position.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) position[nodes[i]] = static_cast<int>(i);
  std::vector<int> indegree(nodes.size(), 0);
  std::vector<std::vector<int>> succs(nodes.size());
  std::vector<std::vector<int>> preds(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const Value* v : nodes[i]->outputs()) {
      for (const Use& u : v->uses()) {
        const Node* anchor = AnchorIn(graph, u.node);
        auto it = anchor == nullptr ? position.end() : position.find(anchor);
        if (it == position.end()) continue;  // not a user in this graph tree
        succs[i].push_back(it->second);
        preds[static_cast<size_t>(it->second)].push_back(static_cast<int>(i));
        ++indegree[static_cast<size_t>(it->second)];
      }
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (indegree[i] == 0) ready.push(static_cast<int>(i));
  }
  std::vector<Node*> order;
  order.reserve(nodes.size());
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(nodes[static_cast<size_t>(i)]);
    for (int s : succs[static_cast<size_t>(i)]) {
      if (--indegree[static_cast<size_t>(s)] == 0) ready.push(s);
    }
  }
  if (order.size() != nodes.size()) {
    const Node* n = nodes[static_cast<size_t>(NodeOnCycle(preds, indegree))];
    return absl::InvalidArgumentError(
        absl::StrCat("graph '", Sv(graph.name()), "' has a cycle through node ", NodeLabel(*n)));
  }
  return order;
}

absl::Status SortTopologically(Graph& graph) {
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<Node*> order, TopologicalOrder(graph));
  for (Node* n : order) ONNXKIT_RETURN_IF_ERROR(graph.MoveNode(n, Position::End()));
  return absl::OkStatus();
}

}  // namespace onnxkit::ir
