// Reference kernels: sequence and optional ops (factories listed in
// sequence.def). Sequences hold tensors; their element type is kept on the
// RtValue so an empty sequence still knows it (SequenceEmpty's dtype).
#ifndef ONNXKIT_RUNNER_REFERENCE_SEQUENCE_H_
#define ONNXKIT_RUNNER_REFERENCE_SEQUENCE_H_

#include "runner/kernel.h"

namespace onnxkit::runner::reference {

// sequence_ops.cc
absl::Status SequenceConstruct(KernelContext& ctx);
absl::Status SequenceEmpty(KernelContext& ctx);
absl::Status SequenceAt(KernelContext& ctx);
absl::Status SequenceInsert(KernelContext& ctx);
absl::Status SequenceErase(KernelContext& ctx);
absl::Status SequenceLength(KernelContext& ctx);
absl::Status SplitToSequence(KernelContext& ctx);
absl::Status ConcatFromSequence(KernelContext& ctx);

// sequence_map_optional.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeSequenceMap(const ir::Node& node, const KernelInfo& info);
absl::Status Optional(KernelContext& ctx);
absl::Status OptionalHasElement(KernelContext& ctx);
absl::Status OptionalGetElement(KernelContext& ctx);

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_SEQUENCE_H_
