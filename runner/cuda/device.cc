// Device probing, the session context, and host<->device copies.
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "runner/cuda/context.h"
#include "runner/cuda/libraries.h"

namespace onnxkit::runner::cuda {
namespace {

// Copies in staging memory start 64 bytes apart.
size_t RoundUp(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

bool CompiledIn() { return true; }

absl::Status CudaStatus(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(Sv(what), ": ", cudaGetErrorString(error)));
}

absl::Status CublasStatus(cublasStatus_t status, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(Sv(what), ": ", Libs().cublasGetStatusString(status)));
}

absl::Status CudnnStatus(cudnnStatus_t status, std::string_view what) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(Sv(what), ": ", Libs().cudnnGetErrorString(status)));
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
  return LoadLibraries();
}

absl::StatusOr<std::shared_ptr<Context>> CreateContext(const ContextOptions& options) {
  ONNXKIT_RETURN_IF_ERROR(CheckDevice(options.device));
  auto context = std::shared_ptr<Context>(new Context());
  context->device_ = options.device;
  context->allow_tf32_ = options.allow_tf32;
  context->experimental_ = options.experimental;
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
  ONNXKIT_RETURN_IF_ERROR(CublasStatus(Libs().cublasCreate(&context->cublas_), "cublasCreate"));
  ONNXKIT_RETURN_IF_ERROR(
      CublasStatus(Libs().cublasSetStream(context->cublas_, context->stream_), "cublasSetStream"));
  // cuBLAS gets its workspace from here (32 MiB, what it asks for on
  // Hopper), so that products recorded in a CUDA graph allocate nothing.
  constexpr size_t kCublasWorkspace = size_t{32} << 20;
  ONNXKIT_RETURN_IF_ERROR(
      CudaStatus(cudaMalloc(&context->cublas_workspace_, kCublasWorkspace), "cuBLAS workspace allocation"));
  context->cublas_workspace_bytes_ = kCublasWorkspace;
  ONNXKIT_RETURN_IF_ERROR(
      CublasStatus(Libs().cublasSetWorkspace(context->cublas_, context->cublas_workspace_, kCublasWorkspace),
                   "cublasSetWorkspace"));
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaMalloc(reinterpret_cast<void**>(&context->error_flag_), sizeof(int)),
                                     "device allocation"));
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaMemset(context->error_flag_, 0, sizeof(int)), "device memset"));
  ONNXKIT_RETURN_IF_ERROR(CublasStatus(Libs().cublasLtCreate(&context->cublas_lt_), "cublasLtCreate"));
  ONNXKIT_RETURN_IF_ERROR(CudnnStatus(Libs().cudnnCreate(&context->cudnn_), "cudnnCreate"));
  ONNXKIT_RETURN_IF_ERROR(
      CudnnStatus(Libs().cudnnSetStream(context->cudnn_, context->stream_), "cudnnSetStream"));
  // The first MiB of pinned staging memory now, so that the first copy of a
  // run is not charged with the allocation.
  ONNXKIT_RETURN_IF_ERROR(context->Staging(size_t{1} << 20).status());
  return context;
}

Context::~Context() {
  if (capturing_) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream_, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (capture_pinned_ != nullptr) cudaFreeHost(capture_pinned_);
  if (error_flag_ != nullptr) cudaFree(error_flag_);
  if (cublas_workspace_ != nullptr) cudaFree(cublas_workspace_);
  if (cudnn_ != nullptr) Libs().cudnnDestroy(cudnn_);
  if (cublas_lt_ != nullptr) Libs().cublasLtDestroy(cublas_lt_);
  if (cublas_ != nullptr) Libs().cublasDestroy(cublas_);
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
  if (capturing_)
    return absl::FailedPreconditionError("pinned staging memory cannot grow while recording a CUDA graph");
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
  context.uploaded_bytes_ += static_cast<int64_t>(RoundUp(bytes));
  if (context.capturing_) {
    // Recorded: the copy reads pinned memory that stays as it is now for
    // every replay.
    if (context.capture_pinned_used_ + RoundUp(bytes) > context.capture_pinned_bytes_) {
      return absl::FailedPreconditionError("a recorded run uploads more than the run before it");
    }
    char* from = static_cast<char*>(context.capture_pinned_) + context.capture_pinned_used_;
    context.capture_pinned_used_ += RoundUp(bytes);
    std::memcpy(from, host.raw(), bytes);
    ONNXKIT_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(device.mutable_raw(), from, bytes, cudaMemcpyHostToDevice, context.stream()),
        "upload"));
    return device;
  }
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
  if (context.capturing_) {
    return absl::FailedPreconditionError("a device value is read on the host while recording a CUDA graph");
  }
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
  if (Capturing(context))
    return absl::FailedPreconditionError("cannot wait for the device while recording a CUDA graph");
  return CudaStatus(cudaStreamSynchronize(context.stream()), "synchronize");
}

absl::StatusOr<Tensor> AllocateOnDevice(Context& context, int32_t dtype, std::vector<int64_t> shape) {
  return context.Allocate(dtype, std::move(shape));
}

absl::Status CopyInto(Context& context, const Tensor& host, const Tensor& device) {
  if (host.on_device() || !device.on_device() || host.dtype() != device.dtype() ||
      host.nbytes() != device.nbytes()) {
    return absl::InternalError("CopyInto takes a host tensor and a device tensor of the same type and size");
  }
  const size_t bytes = host.nbytes();
  if (bytes == 0) return absl::OkStatus();
  ONNXKIT_ASSIGN_OR_RETURN(void* staging, context.Staging(bytes));
  std::memcpy(staging, host.raw(), bytes);
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(const_cast<void*>(device.raw()), staging, bytes,
                                                     cudaMemcpyHostToDevice, context.stream()),
                                     "upload"));
  return CudaStatus(cudaStreamSynchronize(context.stream()), "upload");
}

absl::Status CopyOnDevice(Context& context, const Tensor& from, const Tensor& to) {
  if (!from.on_device() || !to.on_device() || from.dtype() != to.dtype() || from.nbytes() != to.nbytes()) {
    return absl::InternalError("CopyOnDevice takes two device tensors of the same type and size");
  }
  if (from.nbytes() == 0) return absl::OkStatus();
  return CudaStatus(cudaMemcpyAsync(const_cast<void*>(to.raw()), from.raw(), from.nbytes(),
                                    cudaMemcpyDeviceToDevice, context.stream()),
                    "device copy");
}

int64_t UploadedBytes(const Context& context) { return context.uploaded_bytes_; }

namespace {

absl::Status FlaggedError() {
  return absl::OutOfRangeError("a Gather index is out of range for its axis (found by the device kernel)");
}

}  // namespace

absl::Status CheckDeviceErrors(Context& context) {
  if (!context.check_pending_) return absl::OkStatus();
  if (context.capturing_) {
    return absl::FailedPreconditionError("cannot read device errors while recording a CUDA graph");
  }
  ONNXKIT_ASSIGN_OR_RETURN(void* staging, context.Staging(sizeof(int)));
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(staging, context.error_flag_, sizeof(int), cudaMemcpyDeviceToHost, context.stream()),
      "download"));
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(context.stream()), "download"));
  context.check_pending_ = false;
  int flag = 0;
  std::memcpy(&flag, staging, sizeof(int));
  if (flag == 0) return absl::OkStatus();
  ONNXKIT_RETURN_IF_ERROR(
      CudaStatus(cudaMemsetAsync(context.error_flag_, 0, sizeof(int), context.stream()), "memset"));
  return FlaggedError();
}

class CapturedRun {
 public:
  ~CapturedRun() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (pinned != nullptr) cudaFreeHost(pinned);
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  // The pinned memory the recorded uploads read.
  void* pinned = nullptr;
  // Whether the recorded kernels may flag device errors.
  bool checks = false;
};

absl::Status BeginCapture(Context& context, int64_t upload_bytes) {
  if (context.capturing_) return absl::InternalError("a CUDA graph capture is already open");
  if (upload_bytes < 0) return absl::InternalError("negative upload size");
  ONNXKIT_RETURN_IF_ERROR(CheckDeviceErrors(context));
  if (context.capture_pinned_ != nullptr) {
    cudaFreeHost(context.capture_pinned_);
    context.capture_pinned_ = nullptr;
  }
  context.capture_pinned_bytes_ = static_cast<size_t>(upload_bytes);
  context.capture_pinned_used_ = 0;
  if (upload_bytes > 0) {
    ONNXKIT_RETURN_IF_ERROR(CudaStatus(
        cudaMallocHost(&context.capture_pinned_, context.capture_pinned_bytes_), "pinned allocation"));
  }
  // Relaxed: host code of the run (shape arithmetic on the cpu backend) may
  // go on while the stream records.
  ONNXKIT_RETURN_IF_ERROR(
      CudaStatus(cudaStreamBeginCapture(context.stream(), cudaStreamCaptureModeRelaxed), "begin capture"));
  context.capturing_ = true;
  context.check_pending_ = false;
  return absl::OkStatus();
}

bool Capturing(const Context& context) { return context.capturing_; }

absl::StatusOr<std::shared_ptr<CapturedRun>> EndCapture(Context& context) {
  if (!context.capturing_) return absl::InternalError("no CUDA graph capture is open");
  context.capturing_ = false;
  auto run = std::make_shared<CapturedRun>();
  run->pinned = context.capture_pinned_;
  context.capture_pinned_ = nullptr;
  context.capture_pinned_bytes_ = context.capture_pinned_used_ = 0;
  run->checks = context.check_pending_;
  context.check_pending_ = false;
  cudaError_t error = cudaStreamEndCapture(context.stream(), &run->graph);
  if (error != cudaSuccess || run->graph == nullptr) {
    cudaGetLastError();  // the failed capture's error is reported here, not by a later call
    return absl::FailedPreconditionError(
        absl::StrCat("the run could not be recorded as a CUDA graph: ", cudaGetErrorString(error)));
  }
  error = cudaGraphInstantiate(&run->exec, run->graph, 0);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(
        absl::StrCat("the recorded CUDA graph could not be instantiated: ", cudaGetErrorString(error)));
  }
  return run;
}

absl::StatusOr<std::vector<Tensor>> Replay(Context& context, CapturedRun& run,
                                           const std::vector<const Tensor*>& feeds,
                                           const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& outputs) {
  if (feeds.size() != inputs.size()) return absl::InternalError("replay: feeds and inputs differ in number");
  size_t total = 0;
  for (size_t i = 0; i < feeds.size(); ++i) {
    if (feeds[i]->on_device() || feeds[i]->dtype() != inputs[i].dtype() ||
        feeds[i]->shape() != inputs[i].shape()) {
      return absl::InternalError("replay: a feed differs from the recorded input");
    }
    total += RoundUp(feeds[i]->nbytes());
  }
  const size_t outputs_at = total;
  for (const Tensor& t : outputs) total += RoundUp(t.nbytes());
  const size_t flag_at = total;
  total += RoundUp(sizeof(int));
  ONNXKIT_ASSIGN_OR_RETURN(void* staging_raw, context.Staging(total));
  char* staging = static_cast<char*>(staging_raw);
  size_t at = 0;
  for (size_t i = 0; i < feeds.size(); ++i) {
    const size_t bytes = feeds[i]->nbytes();
    if (bytes == 0) continue;
    std::memcpy(staging + at, feeds[i]->raw(), bytes);
    ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(const_cast<void*>(inputs[i].raw()), staging + at,
                                                       bytes, cudaMemcpyHostToDevice, context.stream()),
                                       "upload"));
    at += RoundUp(bytes);
  }
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(run.exec, context.stream()), "CUDA graph launch"));
  at = outputs_at;
  for (const Tensor& t : outputs) {
    if (t.nbytes() == 0) continue;
    ONNXKIT_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(staging + at, t.raw(), t.nbytes(), cudaMemcpyDeviceToHost, context.stream()),
        "download"));
    at += RoundUp(t.nbytes());
  }
  if (run.checks) {
    ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(staging + flag_at, context.error_flag_, sizeof(int),
                                                       cudaMemcpyDeviceToHost, context.stream()),
                                       "download"));
  }
  ONNXKIT_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(context.stream()), "CUDA graph replay"));
  if (run.checks) {
    int flag = 0;
    std::memcpy(&flag, staging + flag_at, sizeof(int));
    if (flag != 0) {
      ONNXKIT_RETURN_IF_ERROR(
          CudaStatus(cudaMemsetAsync(context.error_flag_, 0, sizeof(int), context.stream()), "memset"));
      return FlaggedError();
    }
  }
  std::vector<Tensor> host;
  at = outputs_at;
  for (const Tensor& t : outputs) {
    ONNXKIT_ASSIGN_OR_RETURN(Tensor h, Tensor::AllocateUninitialized(t.dtype(), t.shape()));
    if (t.nbytes() > 0) {
      std::memcpy(h.mutable_raw(), staging + at, t.nbytes());
      at += RoundUp(t.nbytes());
    }
    host.push_back(std::move(h));
  }
  return host;
}

}  // namespace onnxkit::runner::cuda
