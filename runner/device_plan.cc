// Grouping main-graph nodes into device kernels (see the header).
#include "runner/device_plan.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace onnxkit::runner {
namespace {

class Planner {
 public:
  Planner(const std::vector<ir::Node*>& order, const DevicePlanHooks& hooks, size_t max_ops, size_t max_inputs)
      : order_(order), hooks_(hooks), max_ops_(max_ops), max_inputs_(max_inputs) {
    for (size_t i = 0; i < order.size(); ++i) position_[order[i]] = i;
  }

  std::vector<DeviceGroup> Plan(bool experimental) {
    for (const ir::Node* n : order_) PlanConv(n);
    if (experimental) {
      for (const ir::Node* n : order_) PlanMatMulBias(n);
      for (const ir::Node* n : order_) PlanStridedMatMul(n);
    }
    for (const ir::Node* n : order_) PlanElementwise(n, experimental);
    return std::move(groups_);
  }

 private:
  bool Available(const ir::Node* n) const {
    return n != nullptr && position_.contains(n) && hooks_.on_device(*n) && !taken_.contains(n);
  }
  bool Eligible(const ir::Node* n) const { return Available(n) && hooks_.chainable(*n); }
  const Tensor* Constant(const ir::Value* v) const { return v != nullptr ? hooks_.constant(*v) : nullptr; }
  static bool Default(const ir::Node* n, const char* op) { return n->op_type() == op && n->domain().empty(); }

  // The node that alone reads `v` (not a graph output), or null.
  static const ir::Node* OnlyReader(const ir::Value* v) {
    return v != nullptr && v->uses().size() == 1 && !v->IsGraphOutput() ? v->uses()[0].node : nullptr;
  }

  void Keep(DeviceGroup group) {
    if (!hooks_.make(group)) return;
    taken_.insert(group.nodes.begin(), group.nodes.end());
    groups_.push_back(std::move(group));
  }

  // Element-wise nodes after `start` (the value the chain has so far):
  // grown by the earliest reader of the chain's values (after all of them
  // in the order, as it reads one of them), then cut back until every value
  // but the last is read only inside the chain.
  std::vector<const ir::Node*> Grow(const ir::Value* start, std::vector<const ir::Node*> members,
                                    size_t limit) const {
    auto member = [&](const ir::Node* n) { return std::find(members.begin(), members.end(), n) != members.end(); };
    auto values = [&]() {
      std::vector<const ir::Value*> v;
      if (start != nullptr) v.push_back(start);
      for (const ir::Node* m : members) v.push_back(m->output(0));
      return v;
    };
    while (members.size() < limit) {
      const ir::Node* next = nullptr;
      bool blocked = false;
      for (const ir::Value* v : values()) {
        for (const ir::Use& use : v->uses()) {
          if (member(use.node)) continue;
          auto p = position_.find(use.node);
          if (p == position_.end()) {
            blocked = true;  // read inside a subgraph
          } else if (next == nullptr || p->second < position_.at(next)) {
            next = use.node;
          }
        }
      }
      if (blocked || next == nullptr || !Eligible(next)) break;
      members.push_back(next);
    }
    auto closed = [&]() {
      std::vector<const ir::Value*> v = values();
      for (size_t k = 0; k + 1 < v.size(); ++k) {
        if (v[k]->IsGraphOutput()) return false;
        for (const ir::Use& use : v[k]->uses()) {
          if (!member(use.node)) return false;
        }
      }
      return true;
    };
    while (!members.empty() && !closed()) members.pop_back();
    return members;
  }

  // The values `nodes` read that none of them (nor `inside`) makes.
  static std::vector<const ir::Value*> InputsOf(const std::vector<const ir::Node*>& nodes,
                                                const ir::Value* inside) {
    std::vector<const ir::Value*> inputs;
    for (const ir::Node* m : nodes) {
      for (const ir::Value* v : m->inputs()) {
        const bool made_inside = v == inside || (v != nullptr && v->producer() != nullptr &&
                                                 std::find(nodes.begin(), nodes.end(), v->producer()) != nodes.end());
        if (v != nullptr && !made_inside && std::find(inputs.begin(), inputs.end(), v) == inputs.end()) {
          inputs.push_back(v);
        }
      }
    }
    return inputs;
  }

  // Conv, a normalization folded in, element-wise ops after.
  void PlanConv(const ir::Node* conv) {
    if (!Default(conv, "Conv") || !Available(conv) || conv->num_outputs() != 1 || conv->num_inputs() < 2) return;
    const ir::Value* bias = conv->num_inputs() > 2 ? conv->input(2) : nullptr;
    if (Constant(conv->input(1)) == nullptr || (bias != nullptr && Constant(bias) == nullptr)) return;
    const ir::Value* result = conv->output(0);
    const ir::Node* norm = nullptr;
    if (const ir::Node* n = OnlyReader(result); n != nullptr) {
      bool ok = Default(n, "BatchNormalization") && Available(n) && n->num_inputs() == 5 && n->input(0) == result;
      for (int i = 1; ok && i < 5; ++i) ok = Constant(n->input(i)) != nullptr;
      for (int i = 1; ok && i < n->num_outputs(); ++i) ok = n->output(i) == nullptr || n->output(i)->name().empty();
      if (ok) {
        norm = n;
        result = n->output(0);
      }
    }
    DeviceGroup g;
    g.kind = DeviceGroupKind::kConv;
    g.head = conv;
    g.norm = norm;
    g.elementwise = Grow(result, {}, max_ops_ - 1);
    if (norm == nullptr && g.elementwise.empty()) return;
    g.extra = InputsOf(g.elementwise, result);
    if (g.extra.size() + 2 > max_inputs_) return;
    g.nodes = {conv};
    if (norm != nullptr) g.nodes.push_back(norm);
    g.nodes.insert(g.nodes.end(), g.elementwise.begin(), g.elementwise.end());
    g.inputs = {conv->input(0), conv->input(1), bias, nullptr, nullptr, nullptr, nullptr};
    for (int i = 1; norm != nullptr && i < 5; ++i) g.inputs[static_cast<size_t>(2 + i)] = norm->input(i);
    g.inputs.insert(g.inputs.end(), g.extra.begin(), g.extra.end());
    Keep(std::move(g));
  }

  // The Add that alone reads `v` and adds another value to it, or null.
  const ir::Node* SoleAdd(const ir::Value* v) const {
    const ir::Node* n = OnlyReader(v);
    const bool ok = n != nullptr && Default(n, "Add") && Available(n) && n->num_inputs() == 2 &&
                    n->num_outputs() == 1 && n->input(0) != n->input(1) && n->input(0) != nullptr &&
                    n->input(1) != nullptr;
    return ok ? n : nullptr;
  }
  static const ir::Value* OtherOperand(const ir::Node* add, const ir::Value* v) {
    return add->input(0) == v ? add->input(1) : add->input(0);
  }

  // A linear layer: MatMul with constant 2-D weights, the Add of a constant
  // bias row (one element per column), then the Add of a residual when one
  // follows. Before the element-wise runs, which would take the Adds.
  void PlanMatMulBias(const ir::Node* matmul) {
    if (!Default(matmul, "MatMul") || !Available(matmul) || matmul->num_inputs() != 2 ||
        matmul->num_outputs() != 1 || matmul->input(0) == nullptr) {
      return;
    }
    const Tensor* weights = Constant(matmul->input(1));
    const ir::Node* add = SoleAdd(matmul->output(0));
    if (weights == nullptr || weights->rank() != 2 || add == nullptr) return;
    const ir::Value* bias = OtherOperand(add, matmul->output(0));
    const Tensor* row = Constant(bias);
    if (row == nullptr || row->size() != weights->dim(1)) return;
    DeviceGroup g;
    g.kind = DeviceGroupKind::kMatMulBias;
    g.head = matmul;
    g.bias_add = add;
    g.residual_add = SoleAdd(add->output(0));
    g.nodes = {matmul, add};
    g.inputs = {matmul->input(0), matmul->input(1), bias};
    if (g.residual_add != nullptr) {
      g.nodes.push_back(g.residual_add);
      g.inputs.push_back(OtherOperand(g.residual_add, add->output(0)));
    }
    Keep(std::move(g));
  }

  // A Transpose with a perm that alone reads `read`'s producer side: the
  // node `n` itself, when it is one.
  bool TransposeOf(const ir::Node* n, const ir::Value* read) const {
    return n != nullptr && Default(n, "Transpose") && Available(n) && n->num_outputs() == 1 &&
           n->num_inputs() == 1 && n->input(0) == read && n->GetInts("perm").has_value();
  }

  // A MatMul reading its operands through the Transposes that made them
  // and writing its result through the one that alone reads it.
  void PlanStridedMatMul(const ir::Node* matmul) {
    if (!Default(matmul, "MatMul") || !Available(matmul) || matmul->num_inputs() != 2 ||
        matmul->num_outputs() != 1 || matmul->input(0) == nullptr || matmul->input(1) == nullptr) {
      return;
    }
    const ir::Node* sources[2] = {nullptr, nullptr};
    for (int i = 0; i < 2; ++i) {
      const ir::Value* v = matmul->input(i);
      const ir::Node* t = v->producer();
      if (OnlyReader(v) == matmul && t != nullptr && TransposeOf(t, t->input(0))) sources[i] = t;
    }
    const ir::Node* reader = OnlyReader(matmul->output(0));
    const ir::Node* after = TransposeOf(reader, matmul->output(0)) ? reader : nullptr;
    if (sources[0] == nullptr && sources[1] == nullptr && after == nullptr) return;
    DeviceGroup g;
    g.kind = DeviceGroupKind::kStridedMatMul;
    g.head = matmul;
    g.transpose_a = sources[0];
    g.transpose_b = sources[1];
    g.transpose_y = after;
    for (const ir::Node* t : sources) {
      if (t != nullptr) g.nodes.push_back(t);
    }
    std::sort(g.nodes.begin(), g.nodes.end(),
              [&](const ir::Node* x, const ir::Node* y) { return position_.at(x) < position_.at(y); });
    g.nodes.push_back(matmul);
    if (after != nullptr) g.nodes.push_back(after);
    g.inputs = {sources[0] != nullptr ? sources[0]->input(0) : matmul->input(0),
                sources[1] != nullptr ? sources[1]->input(0) : matmul->input(1)};
    Keep(std::move(g));
  }

  // A run of element-wise nodes from `head`; with `softmax`, the Softmax or
  // LogSoftmax that alone reads its result joins it (then one node is run
  // enough).
  void PlanElementwise(const ir::Node* head, bool softmax) {
    if (!Eligible(head) || head->output(0) == nullptr) return;
    std::vector<const ir::Node*> members = Grow(nullptr, {head}, max_ops_);
    if (members.empty()) return;
    std::vector<const ir::Value*> inputs = InputsOf(members, nullptr);
    if (inputs.size() > max_inputs_) return;
    const ir::Node* s = softmax ? OnlyReader(members.back()->output(0)) : nullptr;
    if (s != nullptr && (Default(s, "Softmax") || Default(s, "LogSoftmax")) && Available(s) && s->num_inputs() == 1 &&
        s->num_outputs() == 1) {
      DeviceGroup g;
      g.kind = DeviceGroupKind::kSoftmax;
      g.elementwise = members;
      g.softmax = s;
      g.nodes = members;
      g.nodes.push_back(s);
      g.inputs = inputs;
      const size_t kept = groups_.size();
      Keep(std::move(g));
      if (groups_.size() > kept) return;
    }
    if (members.size() < 2) return;
    DeviceGroup g;
    g.kind = DeviceGroupKind::kElementwise;
    g.elementwise = members;
    g.nodes = std::move(members);
    g.inputs = std::move(inputs);
    Keep(std::move(g));
  }

  const std::vector<ir::Node*>& order_;
  const DevicePlanHooks& hooks_;
  size_t max_ops_, max_inputs_;
  absl::flat_hash_map<const ir::Node*, size_t> position_;
  absl::flat_hash_set<const ir::Node*> taken_;
  std::vector<DeviceGroup> groups_;
};

}  // namespace

std::vector<DeviceGroup> PlanDeviceGroups(const std::vector<ir::Node*>& order, const DevicePlanHooks& hooks,
                                          bool experimental, size_t max_ops, size_t max_inputs) {
  return Planner(order, hooks, max_ops, max_inputs).Plan(experimental);
}

}  // namespace onnxkit::runner
