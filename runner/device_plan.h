// Which main-graph nodes a cuda session runs together as one device kernel
// each (Session::PlanDeviceChains makes the kernels): pure graph matching,
// apart from the CUDA code, so that it is tested on every machine.
#ifndef ONNXKIT_RUNNER_DEVICE_PLAN_H_
#define ONNXKIT_RUNNER_DEVICE_PLAN_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "lib/ir/ir.h"
#include "runner/tensor.h"

namespace onnxkit::runner {

enum class DeviceGroupKind {
  // Conv with constant weights, the BatchNormalization after it (constant
  // parameters; folded in) and/or the element-wise nodes after those.
  kConv,
  // MatMul with constant 2-D weights, the Add of a constant row of N
  // elements, then the Add of a residual when one follows (experimental).
  kMatMulBias,
  // MatMul with the Transposes that make its operands and/or the one that
  // alone reads its result (experimental).
  kStridedMatMul,
  // Element-wise nodes and the Softmax or LogSoftmax that alone reads
  // their result (experimental).
  kSoftmax,
  // Two or more element-wise nodes.
  kElementwise,
};

struct DeviceGroup {
  DeviceGroupKind kind = DeviceGroupKind::kElementwise;
  // Every node of the group in graph order; the last makes its result.
  std::vector<const ir::Node*> nodes;
  // The kernel's inputs in its order (null: an absent optional input):
  // kConv: the Conv's three, the normalization's four, then `extra`;
  // kMatMulBias: A, B, the bias, the residual (when there is one);
  // kStridedMatMul: the sources of A and B (a Transpose's input, or the
  // MatMul's own); kSoftmax and kElementwise: what the nodes read from
  // outside the group.
  std::vector<const ir::Value*> inputs;
  // kConv and kMatMulBias: the Conv or MatMul; kStridedMatMul: the MatMul.
  const ir::Node* head = nullptr;
  // kConv: the normalization (or null), the element-wise nodes after it
  // and the values they read from outside the group.
  const ir::Node* norm = nullptr;
  std::vector<const ir::Node*> elementwise;
  std::vector<const ir::Value*> extra;
  // kMatMulBias.
  const ir::Node* bias_add = nullptr;
  const ir::Node* residual_add = nullptr;
  // kStridedMatMul (each may be null, not all three).
  const ir::Node* transpose_a = nullptr;
  const ir::Node* transpose_b = nullptr;
  const ir::Node* transpose_y = nullptr;
  // kSoftmax (`elementwise` holds the nodes before it).
  const ir::Node* softmax = nullptr;
};

struct DevicePlanHooks {
  // Whether the node runs on the device (it has a device kernel and was not
  // folded away).
  std::function<bool(const ir::Node&)> on_device;
  // The value's constant tensor (an initializer or a folded value), or null.
  std::function<const Tensor*(const ir::Value&)> constant;
  // Whether the node is an element-wise op the chain kernels compute.
  std::function<bool(const ir::Node&)> chainable;
  // Makes the group's kernel; false when it cannot run as one (its nodes
  // stay free for later groups). Called in the order the groups are kept.
  std::function<bool(const DeviceGroup&)> make;
};

// The groups, in the order they are made: Conv groups, then (when
// `experimental`) linear layers and strided products, then element-wise
// runs (with their Softmax when `experimental`). A node joins at most one
// group; every value inside a group but its result is read only inside it
// (never a graph output nor read by a subgraph). At most `max_ops`
// element-wise nodes a group and `max_inputs` inputs of a chain kernel.
std::vector<DeviceGroup> PlanDeviceGroups(const std::vector<ir::Node*>& order, const DevicePlanHooks& hooks,
                                          bool experimental, size_t max_ops = 8, size_t max_inputs = 8);

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_DEVICE_PLAN_H_
