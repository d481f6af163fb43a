// The range guard (see range_guard.h): magnitudes observed during one run,
// and the nodes they keep float32.
#include "passes/convert/range_guard.h"

#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "lib/io/proto.h"
#include "passes/convert/precision_tensor.h"

namespace onnxkit::passes::convert {
namespace {

// Appends every node of `g` and of the bodies below it, in pre-order.
void CollectBodyNodes(const ir::Graph& g, std::vector<ir::Node*>* out) {
  for (ir::Node* n : g.nodes()) {
    out->push_back(n);
    n->ForEachSubgraph([out](const ir::Graph* body) { CollectBodyNodes(*body, out); });
  }
}

}  // namespace

RangeLimits RangeGuardLimits(int32_t target) {
  // Smallest normal values: float16 2^-14, bfloat16 2^-126.
  return RangeLimits{static_cast<double>(TargetMax(target)) / 2,
                     target == pb::kBfloat16 ? std::ldexp(1.0, -126) : std::ldexp(1.0, -14)};
}

std::function<absl::Status(const ir::Value&, const runner::RtValue&)> MagnitudeObserver(
    ValueMagnitudes* seen) {
  return [seen](const ir::Value& value, const runner::RtValue& v) -> absl::Status {
    if (!v.is_tensor() || v.tensor().dtype() != pb::kFloat) return absl::OkStatus();
    const float* p = v.tensor().data<float>();
    float max = 0;
    bool any = false;
    for (int64_t i = 0; i < v.tensor().size(); ++i) {
      if (!std::isfinite(p[i])) continue;
      max = std::max(max, std::fabs(p[i]));
      any = true;
    }
    if (!any) return absl::OkStatus();
    auto [it, fresh] = seen->try_emplace(value.name(), max);
    if (!fresh) it->second = std::max(it->second, max);
    return absl::OkStatus();
  };
}

std::vector<ir::Node*> NodesBeyondRange(ir::Graph& main, const ValueMagnitudes& seen,
                                        const RangeLimits& limits) {
  auto beyond = [&](const ir::Value* v) {
    if (v == nullptr || v->name().empty()) return false;
    auto it = seen.find(v->name());
    if (it == seen.end()) return false;
    const double m = it->second;
    return m > limits.high || (m > 0 && m < limits.low);
  };
  auto touches = [&](const ir::Node* n) {
    for (const ir::Value* v : n->inputs()) {
      if (beyond(v)) return true;
    }
    for (const ir::Value* v : n->outputs()) {
      if (beyond(v)) return true;
    }
    return false;
  };
  // A body ran when any value bound to its inputs or computed by its nodes
  // was seen (a branch not taken, a Loop run zero times did not).
  auto observed = [&](const ir::Graph& body) {
    for (const ir::Value* v : body.inputs()) {
      if (v != nullptr && seen.contains(v->name())) return true;
    }
    for (const ir::Node* n : body.nodes()) {
      for (const ir::Value* v : n->outputs()) {
        if (v != nullptr && !v->name().empty() && seen.contains(v->name())) return true;
      }
    }
    return false;
  };
  std::vector<ir::Node*> all;
  CollectBodyNodes(main, &all);
  absl::flat_hash_set<const ir::Node*> keep;
  for (ir::Node* n : all) {
    if (!touches(n)) continue;
    keep.insert(n);
    // Of its bodies, those that did not run are kept whole: nothing is
    // known of what they compute.
    n->ForEachSubgraph([&](const ir::Graph* body) {
      if (observed(*body)) return;
      std::vector<ir::Node*> inside;
      CollectBodyNodes(*body, &inside);
      keep.insert(inside.begin(), inside.end());
    });
  }
  std::vector<ir::Node*> out;
  for (ir::Node* n : all) {
    if (keep.contains(n)) out.push_back(n);
  }
  return out;
}

}  // namespace onnxkit::passes::convert
