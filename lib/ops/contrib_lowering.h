// ONNX Runtime's contrib ops written as standard ONNX ops.
//
// Models saved by ONNX Runtime's optimizer (optimizedModelFilePath, the
// transformers optimizer) and by its quantizer's QOperator format carry ops of
// the com.microsoft domain, and below opset 17 an ai.onnx LayerNormalization
// that ONNX itself only has from 17. LowerContribOps rewrites each node of
// these it knows, in every graph of the model, as ops of the model's ai.onnx
// opset, with the same semantics:
//
//   com.microsoft::FusedConv     Conv, Add of the optional sum input, activation
//   com.microsoft::FusedGemm     Gemm, activation
//   com.microsoft::FusedMatMul   Transposes (transA/transB, transBatchA/B),
//                                MatMul, Mul by alpha
//   com.microsoft::Gelu, BiasGelu, FastGelu, QuickGelu   their formulas
//   com.microsoft::SkipLayerNormalization, SkipSimplifiedLayerNormalization
//   ai.onnx LayerNormalization (below opset 17), SimplifiedLayerNormalization
//   com.microsoft::QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
//     QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat
//                                DequantizeLinear, the float op, QuantizeLinear
//   com.microsoft::QGemm, QLinearSoftmax (last axis)   the same way
//   com.microsoft::MatMulIntegerToFloat, DynamicQuantizeMatMul
//                                [DynamicQuantizeLinear,] MatMulInteger,
//                                Cast to float, Mul by the scales, Add of bias
//   com.microsoft::MatMulNBits   the 4-/8-bit codes unpacked, Sub of the zero
//                                points, Mul by the scales, Transpose, MatMul
//   com.microsoft::GatherBlockQuantized   the uint8 table's codes unpacked and
//                                dequantized per block, then Gather
//   com.microsoft::QuantizeLinear, DequantizeLinear   the ai.onnx ops
//   com.microsoft::Attention, MultiHeadAttention, GroupQueryAttention
//                                per-head MatMul, Softmax, MatMul with the
//                                masks (key padding, attention bias, causal,
//                                local window) as additions, softcap as
//                                Tanh, sink logits as one more softmax
//                                column; past state
//                                concatenated, GroupQueryAttention's present
//                                cache gathered into ONNX Runtime's layout
//   com.microsoft::RotaryEmbedding   Gathers of the caches, Slices, Muls
//   com.microsoft::MoE, QMoE     Softmax, TopK and ScatterElements for the
//                                routing weights; every expert's two
//                                MatMuls on every row, weighted and summed
//                                (QMoE: the codes dequantized first)
//   com.microsoft::EmbedLayerNormalization   Gathers, Adds, normalization,
//                                the mask count
//
// The activations are those ONNX Runtime fuses: Relu, Tanh, Sigmoid,
// LeakyRelu, Clip, HardSigmoid. A node whose form the rewrite cannot express
// (an unknown element type or rank where one is needed, an unknown
// activation, channels_last) is left as it is and listed in `left`.
// The outputs keep their names; new values and nodes get fresh names.
//
//   ContribLowering r = LowerContribOps(model).value();
//   // r.lowered: 33, r.left: {"com.microsoft::Attention: not supported (2 nodes)"}
#ifndef ONNXKIT_LIB_OPS_CONTRIB_LOWERING_H_
#define ONNXKIT_LIB_OPS_CONTRIB_LOWERING_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/ir/model.h"

namespace onnxkit::ops {

struct ContribLowering {
  int lowered = 0;
  // One line per kind of node left: "com.microsoft::X: why (N nodes)".
  std::vector<std::string> left;
  // MatMulNBits nodes of 4- or 8-bit codes, float A, uint8 or no zero points and
  // constant (initializer) codes, scales and zero points, by the MatMul
  // written for them (its B is their dequantization): a backend may
  // multiply by the codes instead. GatherBlockQuantized nodes of the same
  // (float scales) by the Gather written for them (`gather`: its data is
  // the table's dequantization, rows of k): a backend may dequantize the
  // gathered rows alone. Names in `graph`; zero_points "" when absent.
  struct PackedWeights {
    const ir::Graph* graph = nullptr;
    std::string node, codes, scales, zero_points;
    int bits = 4;
    int64_t k = 0;  // the MatMul's inner dimension (A's last), or a row's length
    bool gather = false;
    int64_t n = 0;  // the MatMul's columns (N; 0 for a Gather)
  };
  std::vector<PackedWeights> packed;
};

// True for a node LowerContribOps may rewrite (com.microsoft ops; ai.onnx
// LayerNormalization below 17 and SimplifiedLayerNormalization).
bool IsContribNode(const ir::Model& model, std::string_view domain, std::string_view op);

// True for a com.microsoft op this file can rewrite (FusedConv, Attention...).
bool IsLowerableContribOp(std::string_view domain, std::string_view op);

// True when some graph of `model` has a node IsContribNode accepts.
bool HasContribNodes(const ir::Model& model);

// Rewrites the contrib nodes of every graph of `model` (model-local function
// bodies are not visited). Errors only when the graph API refuses a rewrite,
// which leaves the model partly rewritten.
absl::StatusOr<ContribLowering> LowerContribOps(ir::Model& model);

// The nodes of `graph` alone (a graph of a model; none for a function
// body): each contrib node that can be rewritten is, when `allow(node)` says
// so, in rounds while a round rewrites one (a rewrite can make the types
// of the nodes after it known: a chain of contrib nodes, as an LLM's layers,
// is written out in one call). Returns how many were.
absl::StatusOr<int> LowerContribNodes(ir::Graph& graph, const std::function<bool(const ir::Node&)>& allow);

}  // namespace onnxkit::ops

#endif  // ONNXKIT_LIB_OPS_CONTRIB_LOWERING_H_
