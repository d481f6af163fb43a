// Reference kernels: control flow ops (factories listed in control_flow.def),
// plus the tensor slicing/stacking helpers that control flow and sequence
// kernels share.
//
// If, Loop and Scan run their bodies through KernelContext::subgraphs(); the
// session checks its deadline before every node and every body run, so a
// Loop with a huge trip count stays bounded by the session's timeout.
#ifndef ONNXKIT_RUNNER_REFERENCE_CONTROL_FLOW_H_
#define ONNXKIT_RUNNER_REFERENCE_CONTROL_FLOW_H_

#include <span>
#include <string_view>
#include <vector>

#include "runner/kernel.h"

namespace onnxkit::runner::reference {

// control_flow_if_loop.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeIf(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeLoop(const ir::Node& node, const KernelInfo& info);

// control_flow_scan.cc: opset 8 (batched, sequence_lens) and opset 9+.
absl::StatusOr<std::unique_ptr<Kernel>> MakeScan8(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeScan9(const ir::Node& node, const KernelInfo& info);

// Type-generic tensor helpers (control_flow_tensors.cc). They copy elements
// of any type (strings, bool, packed sub-byte types included).
namespace tensor_ops {

// The part of `x` at `index` along `axis`, with that axis removed.
// Given x: float[2, 3, 4], axis 1, index 2 -> float[2, 4].
absl::StatusOr<Tensor> SliceAt(const Tensor& x, int64_t axis, int64_t index);
// Elements [start, start + count) along `axis` (the axis is kept).
absl::StatusOr<Tensor> SliceRange(const Tensor& x, int64_t axis, int64_t start, int64_t count);
// Concatenates `parts` along an existing `axis` (new_axis false: equal dims
// except at `axis`) or stacks them along a new `axis` of the result (new_axis
// true: equal shapes). `axis` is already normalized. `what` names the parts
// in errors ("scan output 0"). At least one part.
absl::StatusOr<Tensor> Concat(std::span<const Tensor> parts, int64_t axis, bool new_axis, std::string_view what);
// An empty tensor for a value the body declares (`type`, may be null):
// element type from the declaration (float when unknown), shape `lead`
// followed by the declared dims when all are known.
absl::StatusOr<Tensor> EmptyLike(const pb::TypeProto* type, std::vector<int64_t> lead);
// The element type a TypeProto declares for a tensor (or a sequence/optional
// of tensors), 0 when unknown.
int32_t DeclaredElemType(const pb::TypeProto* type);

}  // namespace tensor_ops
}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_CONTROL_FLOW_H_
