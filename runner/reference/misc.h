// Reference kernels: misc ops (factories listed in misc.def).
#ifndef ONNXKIT_RUNNER_REFERENCE_MISC_H_
#define ONNXKIT_RUNNER_REFERENCE_MISC_H_

#include "runner/kernel.h"

namespace onnxkit::runner::reference {

absl::Status Identity(KernelContext& ctx);
// image_decode.cc
absl::Status ImageDecoder(KernelContext& ctx);
absl::StatusOr<std::unique_ptr<Kernel>> MakeConstant(const ir::Node& node, const KernelInfo& info);

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_MISC_H_
