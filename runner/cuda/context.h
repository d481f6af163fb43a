// The device state of one session (internal to runner/cuda): device,
// stream, cuBLAS, cuBLASLt and cuDNN handles, pinned staging memory, and device
// allocation from the stream-ordered pool (memory freed by one kernel is
// reused by the next without a device-wide synchronisation).
#ifndef ONNXKIT_RUNNER_CUDA_CONTEXT_H_
#define ONNXKIT_RUNNER_CUDA_CONTEXT_H_

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runner/cuda/cuda_backend.h"
#include "runner/tensor.h"

namespace onnxkit::runner::cuda {

class Context : public std::enable_shared_from_this<Context> {
 public:
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasLtHandle_t cublas_lt() const { return cublas_lt_; }
  // The workspace cuBLAS and cuBLASLt share (their calls are ordered on the
  // one stream).
  void* gemm_workspace() const { return cublas_workspace_; }
  size_t gemm_workspace_bytes() const { return cublas_workspace_bytes_; }
  bool allow_tf32() const { return allow_tf32_; }
  bool experimental() const { return experimental_; }

  // An uninitialized device tensor, freed (stream-ordered) when its last
  // reference goes.
  absl::StatusOr<Tensor> Allocate(int32_t dtype, std::vector<int64_t> shape);
  // Scratch device memory for one kernel call (workspace), freed the same way.
  absl::StatusOr<std::shared_ptr<Buffer>> Scratch(size_t bytes);
  // At least `bytes` of pinned host memory (grown on demand; refused while
  // a capture is open: growing it waits for the stream).
  absl::StatusOr<void*> Staging(size_t bytes);

  // The device word kernels set to flag an error (CheckDeviceErrors), and
  // the call a kernel makes when it queues work that may set it.
  int* error_flag() const { return error_flag_; }
  void ExpectErrorCheck() { check_pending_ = true; }

 private:
  friend absl::StatusOr<std::shared_ptr<Context>> CreateContext(const ContextOptions& options);
  friend absl::StatusOr<Tensor> ToDevice(Context& context, const Tensor& host);
  friend absl::StatusOr<Tensor> ToHost(Context& context, const Tensor& device);
  friend int64_t UploadedBytes(const Context& context);
  friend absl::Status CheckDeviceErrors(Context& context);
  friend absl::Status BeginCapture(Context& context, int64_t upload_bytes);
  friend bool Capturing(const Context& context);
  friend absl::StatusOr<std::shared_ptr<CapturedRun>> EndCapture(Context& context);
  friend absl::StatusOr<std::vector<Tensor>> Replay(Context& context, CapturedRun& run,
                                                    const std::vector<const Tensor*>& feeds,
                                                    const std::vector<Tensor>& inputs,
                                                    const std::vector<Tensor>& outputs);
  Context() = default;

  int device_ = 0;
  bool allow_tf32_ = false;
  bool experimental_ = false;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasLtHandle_t cublas_lt_ = nullptr;
  void* staging_ = nullptr;
  size_t staging_bytes_ = 0;
  // cuBLAS's workspace (its own would be allocated where a capture cannot
  // record it).
  void* cublas_workspace_ = nullptr;
  size_t cublas_workspace_bytes_ = 0;
  int* error_flag_ = nullptr;
  bool check_pending_ = false;
  int64_t uploaded_bytes_ = 0;
  // While a capture is open: the pinned memory uploads are recorded from.
  bool capturing_ = false;
  void* capture_pinned_ = nullptr;
  size_t capture_pinned_bytes_ = 0, capture_pinned_used_ = 0;
};

// Status helpers: Internal errors naming the call and the library's message.
absl::Status CudaStatus(cudaError_t error, std::string_view what);
absl::Status CublasStatus(cublasStatus_t status, std::string_view what);
absl::Status CudnnStatus(cudnnStatus_t status, std::string_view what);

}  // namespace onnxkit::runner::cuda

#endif  // ONNXKIT_RUNNER_CUDA_CONTEXT_H_
