// Reference kernels: reduction ops (factories listed in reduction.def).
#ifndef ONNXKIT_RUNNER_REFERENCE_REDUCTION_H_
#define ONNXKIT_RUNNER_REFERENCE_REDUCTION_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runner/kernel.h"

namespace onnxkit::runner::reference {

// reduction_ops.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceSum(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceMean(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceMax(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceMin(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceProd(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceL1(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceL2(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceLogSum(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceLogSumExp(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceSumSquare(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeArgMax(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeArgMin(const ir::Node& node, const KernelInfo& info);

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_REDUCTION_H_
