// Factories of the CUDA kernels (kernels.def) and what they share.
// Factories serving several ops pick the operation from the node's op type.
#ifndef ONNXKIT_RUNNER_CUDA_KERNELS_H_
#define ONNXKIT_RUNNER_CUDA_KERNELS_H_

#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runner/cuda/context.h"
#include "runner/cuda/cuda_backend.h"
#include "runner/cuda/launch.h"

namespace onnxkit::runner::cuda {

using Factory = absl::StatusOr<std::unique_ptr<CudaKernel>>(const std::shared_ptr<Context>& context,
                                                            const ir::Node& node, const KernelInfo& info);

// elementwise_kernels.cc: Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Abs, Neg,
// Reciprocal, LeakyRelu, Elu, Erf, Gelu, Floor, Ceil, HardSigmoid; Add, Sub,
// Mul, Div, Pow, Max, Min; Cast.
Factory MakeUnary;
Factory MakeBinary;
Factory MakeCast;
// Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor, Not.
Factory MakeCompare;
// layout_kernels.cc: Transpose; Softmax, LogSoftmax.
Factory MakeTranspose;
Factory MakeSoftmax;
// matmul.cc (cuBLAS): MatMul, Gemm.
Factory MakeMatMul;
Factory MakeGemm;
// conv.cc (cuDNN): Conv.
Factory MakeConv;
// nn_kernels.cc: BatchNormalization, LayerNormalization, LRN, pooling, Clip, Sum.
Factory MakeBatchNorm;
Factory MakeLayerNorm;
Factory MakeLrn;
Factory MakePool;
Factory MakeClip;
Factory MakeSum;
// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceSumSquare, ReduceL2.
Factory MakeReduce;
// Resize and Upsample (null unless the context is experimental).
Factory MakeResize;
// QuantizeLinear and DequantizeLinear (null unless the context is experimental).
Factory MakeQuantizeLinear;
// data_kernels.cc: views and shape queries, Concat, Slice, Gather, Expand.
Factory MakeView;
Factory MakeConcat;
Factory MakeSlice;
Factory MakeGather;
Factory MakeExpand;
// data_kernels.cc: Where.
Factory MakeWhere;

// The element-wise op of `node` with its attributes (elementwise_kernels.cc);
// nullopt when the CUDA kernels have none for it.
std::optional<ChainOp> ElementwiseOpOf(const ir::Node& node);

// The tensor inputs [0, n) of ctx, or nullopt when one is missing or is
// not a tensor (the node then runs on the cpu backend).
std::optional<std::vector<const Tensor*>> TensorInputs(const KernelContext& ctx, int n);

// The rows LaunchSoftmax normalizes in a tensor of `shape`: `outer` *
// `inner` rows of `len` elements, along `axis` (normalized), or, with
// `flatten` (opsets before 13), over everything from `axis` on.
struct SoftmaxRows {
  int64_t outer = 1, len = 1, inner = 1;
};
SoftmaxRows SoftmaxRowsOf(const std::vector<int64_t>& shape, int64_t axis, bool flatten);

// Internal error naming `what` when a launch failed.
absl::Status Launched(cudaError_t error, std::string_view what);

// The geometry broadcasting `in` (right-aligned) to `out` for
// LaunchStridedCopy / LaunchBinary operand a; nullopt above kMaxRank.
std::optional<StridedGeometry> BroadcastGeometry(const std::vector<int64_t>& in, const std::vector<int64_t>& out);

}  // namespace onnxkit::runner::cuda

#endif  // ONNXKIT_RUNNER_CUDA_KERNELS_H_
