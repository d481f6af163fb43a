// Factories of the cpu math kernels (math.def). Factories serving several
// ops pick the operation from the node's op type.
#ifndef ONNXKIT_RUNNER_CPU_MATH_H_
#define ONNXKIT_RUNNER_CPU_MATH_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "runner/kernel.h"

namespace onnxkit::runner::cpu {

using Factory = absl::StatusOr<std::unique_ptr<Kernel>>(const ir::Node& node, const KernelInfo& info);

// matmul.cc
Factory MakeMatMul;
Factory MakeGemm;
// matmul_integer.cc
Factory MakeMatMulInteger;
Factory MakeQLinearMatMul;
// common_ops.cc: Where, Expand, ScatterElements, RoiAlign, Cast, HardSigmoid /
// Floor / Ceil / Sign / Log / Softplus, InstanceNormalization and
// GroupNormalization, SwiGLU.
Factory MakeWhere;
Factory MakeExpand;
Factory MakeScatterElements;
Factory MakeRoiAlign;
Factory MakeCast;
Factory MakeUnaryRow;
Factory MakeInstanceNorm;
Factory MakeSwiGlu;
// rnn.cc: RNN, GRU, LSTM.
Factory MakeRecurrent;
// einsum.cc
Factory MakeEinsum;
// quantize_linear.cc
Factory MakeQuantizeLinear;
Factory MakeDequantizeLinear;
Factory MakeDynamicQuantizeLinear;
// eltwise.cc: Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Abs, Neg, Reciprocal,
// Elu, LeakyRelu, Softplus, HardSwish, Round, Gelu; Clip; Erf.
Factory MakeEltwise;
Factory MakeClip;
Factory MakeErf;
// binary.cc: Add, Sub, Mul, Div, Pow, Max, Min, Sum.
Factory MakeBinary;
// softmax_norm.cc: Softmax, LogSoftmax; LayerNormalization.
Factory MakeSoftmax;
Factory MakeLayerNorm;
// reduce.cc: ReduceMean/Sum/Max/Min/Prod/L1/L2/SumSquare.
Factory MakeReduce;
// How many reductions, in this process, folded strided rows (axes followed
// by kept dims) instead of running oneDNN's or the reference's: for tests.
int64_t StridedReductions();
// attention.cc: the Attention and RotaryEmbedding ops (the fused chains
// are in transformer.h).
Factory MakeAttention;
Factory MakeRotaryEmbedding;
// add_layer_norm.cc: RMSNormalization.
Factory MakeRmsNorm;
// signal.cc: DFT and STFT.
Factory MakeFourier;
// layout.cc
Factory MakeTranspose;
Factory MakeConcat;
Factory MakeDropout;
Factory MakePad;

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_MATH_H_
