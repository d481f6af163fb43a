// The CUDA backend of a binary built without CUDA (no nvcc, or
// ONNXKIT_ENABLE_CUDA=OFF): every entry point says so.
#include "runner/cuda/cuda_backend.h"

namespace onnxkit::runner::cuda {
namespace {

absl::Status NotBuilt() {
  return absl::FailedPreconditionError(
      "no CUDA device: this onnxkit was built without the CUDA backend (nvcc not found or ONNXKIT_ENABLE_CUDA=OFF)");
}

}  // namespace

class Context {};

bool CompiledIn() { return false; }
absl::Status CheckDevice(int) { return NotBuilt(); }
absl::Status LoadLibraries() { return NotBuilt(); }
absl::StatusOr<std::shared_ptr<Context>> CreateContext(const ContextOptions&) { return NotBuilt(); }
absl::StatusOr<Tensor> ToDevice(Context&, const Tensor&) { return NotBuilt(); }
absl::StatusOr<Tensor> ToHost(Context&, const Tensor&) { return NotBuilt(); }
absl::Status Synchronize(Context&) { return NotBuilt(); }
absl::StatusOr<Tensor> AllocateOnDevice(Context&, int32_t, std::vector<int64_t>) { return NotBuilt(); }
absl::Status CopyInto(Context&, const Tensor&, const Tensor&) { return NotBuilt(); }
absl::Status CopyOnDevice(Context&, const Tensor&, const Tensor&) { return NotBuilt(); }
int64_t UploadedBytes(const Context&) { return 0; }
absl::Status CheckDeviceErrors(Context&) { return NotBuilt(); }
class CapturedRun {};
absl::Status BeginCapture(Context&, int64_t) { return NotBuilt(); }
bool Capturing(const Context&) { return false; }
absl::StatusOr<std::shared_ptr<CapturedRun>> EndCapture(Context&) { return NotBuilt(); }
absl::StatusOr<std::vector<Tensor>> Replay(Context&, CapturedRun&, const std::vector<const Tensor*>&,
                                           const std::vector<Tensor>&, const std::vector<Tensor>&) {
  return NotBuilt();
}
absl::StatusOr<std::unique_ptr<CudaKernel>> MakeKernel(const std::shared_ptr<Context>&, const ir::Node&,
                                                       const KernelInfo&) {
  return NotBuilt();
}
bool ChainableOp(const ir::Node&) { return false; }
absl::StatusOr<std::unique_ptr<CudaKernel>> MakeElementwiseChain(const std::shared_ptr<Context>&,
                                                                 const std::vector<const ir::Node*>&,
                                                                 const std::vector<const ir::Value*>&) {
  return NotBuilt();
}
absl::StatusOr<std::unique_ptr<CudaKernel>> MakeConvChain(const std::shared_ptr<Context>&, const ir::Node&,
                                                          const ir::Node*,
                                                          const std::vector<const ir::Node*>&,
                                                          const std::vector<const ir::Value*>&) {
  return NotBuilt();
}
absl::StatusOr<std::unique_ptr<CudaKernel>> MakeMatMulBias(const std::shared_ptr<Context>&, const ir::Node&,
                                                           const ir::Node&, const ir::Node*) {
  return NotBuilt();
}
absl::StatusOr<std::unique_ptr<CudaKernel>> MakeStridedMatMul(const std::shared_ptr<Context>&,
                                                              const ir::Node*, const ir::Node*,
                                                              const ir::Node&, const ir::Node*) {
  return NotBuilt();
}
absl::StatusOr<std::unique_ptr<CudaKernel>> MakeSoftmaxChain(const std::shared_ptr<Context>&,
                                                             const std::vector<const ir::Node*>&,
                                                             const ir::Node&, int64_t,
                                                             const std::vector<const ir::Value*>&) {
  return NotBuilt();
}
bool HasKernel(std::string_view, std::string_view, int64_t) { return false; }
std::vector<std::string_view> KernelOps() { return {}; }

}  // namespace onnxkit::runner::cuda
