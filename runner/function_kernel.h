// Model-local functions as kernels: a call node runs the function's body
// (instantiated once per call site, with the caller's attributes substituted
// for attribute references) in an isolated scope.
#ifndef ONNXKIT_RUNNER_FUNCTION_KERNEL_H_
#define ONNXKIT_RUNNER_FUNCTION_KERNEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "lib/ir/ir.h"
#include "runner/kernel.h"

namespace onnxkit::runner {

// The body of `function` for the call `caller`: every attribute of a body
// node (including nodes of nested subgraphs) that refers to a function
// attribute (ref_attr_name) takes the caller's value, else the function's
// default, else is dropped.
absl::StatusOr<std::unique_ptr<ir::Graph>> InstantiateFunction(const pb::FunctionProto& function,
                                                               const ir::Node& caller);

class FunctionKernel : public Kernel {
 public:
  // `body` is owned by the session and outlives the kernel.
  explicit FunctionKernel(const ir::Graph* body) : body_(body) {}
  absl::Status Run(KernelContext& ctx) override;

 private:
  const ir::Graph* body_;
};

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_FUNCTION_KERNEL_H_
