// Placement of a graph's nodes on a device backend with per-node fallback
// to the host (the way ONNX Runtime partitions a graph between execution
// providers): each node runs on the device when `on_device` says so, else
// on the host; values are made where their node runs, graph inputs and
// initializers start on the host, and a value crosses to the other side
// once, before its first use there (copies only at partition boundaries).
// Graph outputs made on the device go back to the host at the end.
//
// The session runs its cuda steps by this plan and copies lazily, which
// gives exactly these copies unless a kernel declines the run-time types
// of its inputs (the node then runs on the host, and the run reports it).
#ifndef ONNXKIT_RUNNER_PLACEMENT_H_
#define ONNXKIT_RUNNER_PLACEMENT_H_

#include <functional>
#include <span>
#include <vector>

#include "lib/ir/ir.h"

namespace onnxkit::runner {

enum class Place { kHost, kDevice };

struct Transfer {
  const ir::Value* value;
  Place to;
};

struct PlacementPlan {
  std::vector<Place> place;                    // per step of `order`
  std::vector<std::vector<Transfer>> before;   // per step: copies it needs first
  std::vector<Transfer> at_end;                // graph outputs brought to the host
  int device_steps = 0;                       // steps placed on the device
  int num_transfers = 0;                       // copies in all
};

// Plans `order` (a topological order of `graph`'s nodes). Nodes with
// subgraphs always run on the host (their bodies read outer values there).
PlacementPlan PlanPlacement(const ir::Graph& graph, std::span<ir::Node* const> order,
                            const std::function<bool(const ir::Node&)>& on_device);

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_PLACEMENT_H_
