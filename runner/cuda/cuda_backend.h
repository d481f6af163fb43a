// The CUDA backend as the rest of the runner sees it: no CUDA type appears
// here, so the session and the apps build the same with or without CUDA.
//
// Built with CUDA (nvcc found, ONNXKIT_ENABLE_CUDA on), the CUDA runtime is
// linked statically: it loads the driver (libcuda) only when first asked for
// a device, so the binary starts and runs other backends on a machine with
// no driver. cuBLAS and cuDNN are loaded (dlopen) once a device is found,
// so that other commands do not pay for mapping them and the binary starts
// where they are missing. Built without CUDA, every entry point says so and
// CheckDevice fails.
//
// A session on the cuda backend holds one Context (device, stream, library
// handles, pinned staging memory). Device tensors are runner Tensors whose
// Buffer is MemoryKind::kCuda; host code never reads them, the session
// copies them to the host where a cpu kernel or the caller needs them.
#ifndef ONNXKIT_RUNNER_CUDA_CUDA_BACKEND_H_
#define ONNXKIT_RUNNER_CUDA_CUDA_BACKEND_H_

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/ir/ir.h"
#include "runner/kernel.h"
#include "runner/tensor.h"

namespace onnxkit::runner::cuda {

// Whether this binary has the CUDA backend.
bool CompiledIn();

// OK when CUDA device `index` can be used. Otherwise FailedPrecondition
// starting "no CUDA device", saying why (built without CUDA, no driver, no
// device, index out of range, cuBLAS or cuDNN missing).
absl::Status CheckDevice(int index);

// Loads cuBLAS and cuDNN (once per process; CheckDevice does it when it
// finds the device). FailedPrecondition starting "no CUDA device" when one
// of them or an entry the backend uses is missing. Needs no device.
absl::Status LoadLibraries();

struct ContextOptions {
  int device = 0;
  // fp32 matrix products and convolutions may use TF32 tensor cores
  // (about 1e-3 relative error instead of 1e-6).
  bool allow_tf32 = false;
  // Kernels written but not yet run on a GPU are used too (now: Gemm's
  // bias and C on cuBLASLt, MatMul batches against one B as one product,
  // Resize and Upsample, QuantizeLinear and DequantizeLinear).
  bool experimental = false;
};

class Context;

// The context of one session on device `options.device` (CheckDevice first).
absl::StatusOr<std::shared_ptr<Context>> CreateContext(const ContextOptions& options);

// Copies through pinned staging memory; both wait for the copy to finish.
absl::StatusOr<Tensor> ToDevice(Context& context, const Tensor& host);
absl::StatusOr<Tensor> ToHost(Context& context, const Tensor& device);
// Waits for every kernel queued on the context's stream.
absl::Status Synchronize(Context& context);
// An uninitialized device tensor (freed when its last reference goes).
absl::StatusOr<Tensor> AllocateOnDevice(Context& context, int32_t dtype, std::vector<int64_t> shape);
// Uploads `host` into `device` (same element type and size), waiting.
absl::Status CopyInto(Context& context, const Tensor& host, const Tensor& device);
// Queues a copy of device tensor `from` into `to` (same element type and size).
absl::Status CopyOnDevice(Context& context, const Tensor& from, const Tensor& to);
// Bytes ToDevice has copied up in this context so far.
int64_t UploadedBytes(const Context& context);

// Errors found by device kernels (a Gather index out of range in device
// indices): OutOfRange once such a kernel flagged one since the last check
// (the flag is then cleared). Waits for the stream when a kernel that can
// flag one was queued since the last check; otherwise returns at once.
absl::Status CheckDeviceErrors(Context& context);

// CUDA graphs: a run recorded once and replayed with one launch. While a
// capture is open the context's stream records work instead of running
// it: ToDevice copies from pinned host memory kept for the replays (at
// most `upload_bytes` in all), while ToHost, Synchronize and
// CheckDeviceErrors fail (a run that needs them cannot be recorded).
class CapturedRun;
absl::Status BeginCapture(Context& context, int64_t upload_bytes);
bool Capturing(const Context& context);
// Closes the capture (also after a failed one); the recorded run, ready to
// launch (nothing of it has run yet).
absl::StatusOr<std::shared_ptr<CapturedRun>> EndCapture(Context& context);
// Runs `run` once: uploads the host tensors `feeds` into the device tensors
// `inputs` it was recorded reading, launches it, and returns host copies of
// the device tensors `outputs` it was recorded writing (one wait in all),
// or the device errors it flagged (CheckDeviceErrors).
absl::StatusOr<std::vector<Tensor>> Replay(Context& context, CapturedRun& run,
                                           const std::vector<const Tensor*>& feeds,
                                           const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& outputs);

// A kernel running on the device: it reads device tensors and sets device
// tensors as its outputs (KernelContext::SetOutput).
class CudaKernel : public Kernel {
 public:
  // Whether this kernel runs the node for these inputs (element types,
  // ranks, shapes known only at run time). False: the session runs the node
  // on the cpu backend. Reads only types and shapes, never element values.
  virtual bool Accepts(const KernelContext& ctx) const = 0;

  // Where input i must be when Run is called: on the device (host values
  // are copied up), on the host (values the kernel reads with host code:
  // shapes, axes, indices, bounds; device values are copied down), or
  // either (the kernel reads only its shape).
  enum class Side { kDevice, kHost, kAny };
  virtual Side InputSide(int /*i*/) const { return Side::kDevice; }
};

// The CUDA kernel of `node`, or null when the backend has none for its op
// at that opset or its attributes (the node then runs on the cpu backend).
absl::StatusOr<std::unique_ptr<CudaKernel>> MakeKernel(const std::shared_ptr<Context>& context,
                                                       const ir::Node& node, const KernelInfo& info);

// Whether `node` is an element-wise op (one output; unary, or binary with
// two inputs) that MakeElementwiseChain can fuse.
bool ChainableOp(const ir::Node& node);
// One kernel running the element-wise nodes `nodes` (each reads only the
// outputs of earlier ones and `inputs`, the kernel's inputs in this order);
// its output is the last node's. Null when they cannot run as one.
absl::StatusOr<std::unique_ptr<CudaKernel>> MakeElementwiseChain(const std::shared_ptr<Context>& context,
                                                                 const std::vector<const ir::Node*>& nodes,
                                                                 const std::vector<const ir::Value*>& inputs);

// One kernel computing the Softmax or LogSoftmax node `softmax` (of opset
// `softmax_opset`) of the last of the element-wise `nodes` (as
// MakeElementwiseChain's), whose result is never stored (a scale and a
// mask before attention's Softmax). Null when they cannot run as one.
absl::StatusOr<std::unique_ptr<CudaKernel>> MakeSoftmaxChain(const std::shared_ptr<Context>& context,
                                                             const std::vector<const ir::Node*>& nodes,
                                                             const ir::Node& softmax, int64_t softmax_opset,
                                                             const std::vector<const ir::Value*>& inputs);

// One kernel running Conv `conv`, then (when not null) BatchNormalization
// `batch_norm` on its output (folded into the weights and bias; they and
// its parameters must be constants), then the element-wise `nodes` (each
// reading the value before them, outputs of earlier ones and `extra`).
// Its inputs: the Conv's three (a missing bias null), the normalization's
// four (or nulls), then `extra`. Null when they cannot run as one.
absl::StatusOr<std::unique_ptr<CudaKernel>> MakeConvChain(const std::shared_ptr<Context>& context,
                                                          const ir::Node& conv, const ir::Node* batch_norm,
                                                          const std::vector<const ir::Node*>& nodes,
                                                          const std::vector<const ir::Value*>& extra);

// One cuBLASLt product running MatMul `matmul`, the Add `bias_add` of a
// bias row to its result, and, when not null, the Add `residual_add` of a
// tensor of the same shape to that. Its inputs: the MatMul's two, the
// bias, then the residual. Null when they cannot run as one.
absl::StatusOr<std::unique_ptr<CudaKernel>> MakeMatMulBias(const std::shared_ptr<Context>& context,
                                                           const ir::Node& matmul, const ir::Node& bias_add,
                                                           const ir::Node* residual_add);

// One strided batched product running MatMul `matmul` with the Transposes
// that make its operands (`transpose_a`, `transpose_b`) and the one that
// reads its result (`transpose_y`), each null when absent. Its inputs: the
// sources of A and B (a Transpose's input, or the MatMul's own). Null when
// they cannot run as one.
absl::StatusOr<std::unique_ptr<CudaKernel>> MakeStridedMatMul(const std::shared_ptr<Context>& context,
                                                              const ir::Node* transpose_a,
                                                              const ir::Node* transpose_b,
                                                              const ir::Node& matmul,
                                                              const ir::Node* transpose_y);

// Whether the CUDA kernel table covers `op` of `domain` at `opset` (the
// same table MakeKernel reads; empty when built without CUDA).
bool HasKernel(std::string_view domain, std::string_view op, int64_t opset);

// The ops of the CUDA kernel table, in table order (for documentation).
std::vector<std::string_view> KernelOps();

}  // namespace onnxkit::runner::cuda

#endif  // ONNXKIT_RUNNER_CUDA_CUDA_BACKEND_H_
