// Device probing, the session context, and host<->device copies.
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/base/data_type.h"
#include "lib/base/strings.h"
#include "lib/base/status_macros.h"
#include "runner/cuda/context.h"

namespace onnxkit::runner::cuda {

bool CompiledIn() { return true; }

absl::Status CudaStatus(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(Sv(what), ": ", cudaGetErrorString(error)));
}

absl::Status CublasStatus(cublasStatus_t status, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(Sv(what), ": ", cublasGetStatusString(status)));
}

absl::Status CudnnStatus(cudnnStatus_t status, std::string_view what) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(Sv(what), ": ", cudnnGetErrorString(status)));
}

absl::Status CheckDevice(int index) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaErrorNoDevice || (error == cudaSuccess && count == 0)) {
    return absl::FailedPreconditionError("no CUDA device: the driver reports none");
  }
  if (error == cudaErrorInsufficientDriver) {
    return absl::FailedPreconditionError(
        "no CUDA device: the CUDA driver (libcuda) is missing or older than this build needs");
  }
  if (error != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat("no CUDA device: ", cudaGetErrorString(error)));
  }
  if (index < 0 || index >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device ", index, ": this machine has ", count, " (0 to ", count - 1, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Context>> CreateContext(const ContextOptions& options) {
  ONNXKIT_RETURN_IF_ERROR(CheckDevice(options.device));
  auto context = std::shared_ptr<Context>(new Context());
  context->device_ = options.device;
  context->allow_tf32_ = options.allow_tf32;
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(options.device), "cudaSetDevice"));
  ONNXKIT_RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&context->stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  // Keep freed device memory in the pool between runs instead of returning
  // it to the driver at every synchronisation.
  cudaMemPool_t pool = nullptr;
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaDeviceGetDefaultMemPool(&pool, options.device), "memory pool"));
  uint64_t threshold = std::numeric_limits<uint64_t>::max();
  ONNXKIT_RETURN_IF_ERROR(
      CudaStatus(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), "memory pool"));
  ONNXKIT_RETURN_IF_ERROR(CublasStatus(cublasCreate(&context->cublas_), "cublasCreate"));
  ONNXKIT_RETURN_IF_ERROR(CublasStatus(cublasSetStream(context->cublas_, context->stream_), "cublasSetStream"));
  ONNXKIT_RETURN_IF_ERROR(CudnnStatus(cudnnCreate(&context->cudnn_), "cudnnCreate"));
  ONNXKIT_RETURN_IF_ERROR(CudnnStatus(cudnnSetStream(context->cudnn_, context->stream_), "cudnnSetStream"));
  return context;
}

Context::~Context() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (staging_ != nullptr) cudaFreeHost(staging_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::StatusOr<std::shared_ptr<Buffer>> Context::Scratch(size_t bytes) {
  void* data = nullptr;
  if (bytes > 0) {
    ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaMallocAsync(&data, bytes, stream_), "device allocation"));
  }
  std::shared_ptr<Context> self = shared_from_this();
  return Buffer::Adopt(data, bytes, MemoryKind::kCuda, [self](void* p) {
    if (p != nullptr) cudaFreeAsync(p, self->stream_);
  });
}

absl::StatusOr<Tensor> Context::Allocate(int32_t dtype, std::vector<int64_t> shape) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && count > std::numeric_limits<int64_t>::max() / d)) {
      return absl::InvalidArgumentError("device tensor shape has a negative dim or too many elements");
    }
    count *= d;
  }
  std::optional<int64_t> bytes = RawByteSize(dtype, count);
  if (!bytes || dtype == 8) {
    return absl::InvalidArgumentError(absl::StrCat("no device tensors of element type ", Sv(DataTypeName(dtype))));
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> buffer, Scratch(static_cast<size_t>(*bytes)));
  return Tensor::Wrap(dtype, std::move(shape), std::move(buffer));
}

absl::StatusOr<void*> Context::Staging(size_t bytes) {
  if (bytes <= staging_bytes_) return staging_;
  if (staging_ != nullptr) {
    ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "synchronize"));
    cudaFreeHost(staging_);
    staging_ = nullptr;
    staging_bytes_ = 0;
  }
  size_t grown = std::max(bytes, size_t{1} << 20);
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaMallocHost(&staging_, grown), "pinned allocation"));
  staging_bytes_ = grown;
  return staging_;
}

absl::StatusOr<Tensor> ToDevice(Context& context, const Tensor& host) {
  if (host.on_device()) return host;
  if (host.is_string()) return absl::InvalidArgumentError("string tensors stay on the host");
  ONNXKIT_ASSIGN_OR_RETURN(Tensor device, context.Allocate(host.dtype(), host.shape()));
  size_t bytes = host.nbytes();
  if (bytes == 0) return device;
  ONNXKIT_ASSIGN_OR_RETURN(void* staging, context.Staging(bytes));
  std::memcpy(staging, host.raw(), bytes);
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(device.mutable_raw(), staging, bytes, cudaMemcpyHostToDevice, context.stream()), "upload"));
  // The staging memory is reused by the next copy: wait for this one.
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(context.stream()), "upload"));
  return device;
}

absl::StatusOr<Tensor> ToHost(Context& context, const Tensor& device) {
  if (!device.on_device()) return device;
  ONNXKIT_ASSIGN_OR_RETURN(Tensor host, Tensor::AllocateUninitialized(device.dtype(), device.shape()));
  size_t bytes = device.nbytes();
  if (bytes == 0) return host;
  ONNXKIT_ASSIGN_OR_RETURN(void* staging, context.Staging(bytes));
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(staging, device.raw(), bytes, cudaMemcpyDeviceToHost, context.stream()), "download"));
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(context.stream()), "download"));
  std::memcpy(host.mutable_raw(), staging, bytes);
  return host;
}

absl::Status Synchronize(Context& context) {
  return CudaStatus(cudaStreamSynchronize(context.stream()), "synchronize");
}

}  // namespace onnxkit::runner::cuda
