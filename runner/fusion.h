// Node chains the cpu backend runs as one kernel: a Conv and the nodes that
// follow it one by one (BatchNormalization and Mul / Add by per-channel
// constants folded into its weights, Relu / LeakyRelu / Clip / HardSwish /
// SiLU (a Sigmoid and the Mul of its input by it) / HardSwish written out
// (a HardSigmoid with alpha 1/6 and beta 1/2 and the Mul of its input by
// it) and a residual Add, or Sum of two, as post-ops, then possibly
// squeeze-and-excitation (GlobalAveragePool, 1x1 Conv, Relu / HardSwish /
// SiLU, 1x1 Conv, Sigmoid or HardSigmoid, and the Mul of the activated value
// by that gate, when a Conv follows), then possibly further Convs, each
// possibly after a channel shuffle (Reshape to [N, G, C/G, H, W], Transpose
// with perm 0, 2, 1, 3, 4, Reshape back: ShuffleNet's), a unit whose
// input an AveragePool also reads and a Concat joins, second, to the
// unit's result, possibly then an activation (ShuffleNet's stride-2 unit,
// in a chain holding a shuffle, when a Conv follows: the AveragePool reads
// the unit's input as its inner input, or X, and the Concat the pool's
// result as chained input and the unit's as inner input), and last
// possibly a MaxPool without Indices or a GlobalAveragePool); or a
// BatchNormalization, Mul / Add by per-channel constants and an activation
// as one per-channel pass, headed by the Concat making the
// BatchNormalization's input when the BatchNormalization is its only reader
// (DenseNet's pre-activation: the joined tensor is never made).
//
//   %c = Conv(%x, %w, %b); %n = BatchNormalization(%c, ...); %y = Relu(%n)
//
// becomes one step producing %y; %c and %n never exist. A Concat along the
// channels of two such Conv branches reading the same X (a SqueezeNet fire
// module's expand convolutions) is a chain too: the first branch, the
// second (its Conv takes X as a chain input, chained_input -1), then the
// Concat, taking the first branch's result as its inner input, and
// possibly a MaxPool of the Concat's result; its kernel writes each
// branch's result (pooled) into the Concat's. The session finds
// chains once (FindConvChains) and, in runs that use them, executes the
// chain at the position of its last node, with the inputs of every node of
// the chain concatenated (FusionChain::input_offset). A kernel that cannot
// run a chain fused for some inputs runs it node by node (MakeChainKernel).
#ifndef ONNXKIT_RUNNER_FUSION_H_
#define ONNXKIT_RUNNER_FUSION_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "lib/ir/ir.h"
#include "runner/kernel.h"
#include "runner/kernel_registry.h"

namespace onnxkit::runner {

enum class FusionKind {
  kConv,         // FindConvChains
  kQuantized,    // FindQuantizedChains
  kTransformer,  // FindTransformerChains
  kElementwise,  // FindElementwiseChains
  kDevice,       // element-wise nodes the cuda backend runs as one kernel (nodes and extra_inputs only)
};

struct FusionChain {
  FusionKind kind = FusionKind::kConv;
  // Head first; node k > 0 takes node k-1's output 0 as its input
  // chained_input[k]. The chain's result is the last node's output 0.
  std::vector<const ir::Node*> nodes;
  std::vector<int> chained_input;  // -1 for the head
  // Node k's input inner_input[k] (-1, or past the end: none) is output 0
  // of node inner_source[k], an earlier node than k - 1: a residual taken
  // from inside the chain (a ResNet block's input, when the chain runs on
  // through the block), or the x of a SiLU's or written-out HardSwish's Mul (node k - 2's output),
  // which exists only inside the fused kernel.
  std::vector<int> inner_input, inner_source;
  // Node k's input j is input input_offset[k] + j of the fused kernel (the
  // chained slot is passed as omitted).
  std::vector<int> input_offset;
  int num_inputs = 0;
  // Values the fused kernel reads beyond its nodes' inputs, as its inputs
  // num_inputs, num_inputs + 1, ... (null: omitted). A quantized chain reads
  // the quantized source, weights and their parameters here, in that order
  // (kQuantizedExtras), whether or not their DequantizeLinear nodes are in
  // the chain.
  std::vector<const ir::Value*> extra_inputs;
  // PackedWeightsChain: bits per code of its extra inputs' codes, and K.
  int packed_bits = 0;
  int64_t packed_k = 0;
  // Inputs the fused kernel reads in quantized form: input `slot` (a
  // DequantizeLinear's float output) is that of `dequantize` applied to the
  // extra inputs `extra`, `extra` + 1, `extra` + 2 (data, scale, zero
  // point). The session may skip such a DequantizeLinear when fused kernels
  // are its only readers; `slot` is then passed as omitted and a kernel
  // that needs it computes it (MakeBypassFallback).
  struct Bypass {
    int slot;
    int extra;
    const ir::Node* dequantize;
  };
  std::vector<Bypass> bypass;
  // Quantized chains (PlanQuantizedLayouts): the 8-bit source (every
  // quantized operand, for an elementwise chain) and the result are stored
  // channels-last, a 4-D tensor [N, C, H, W] held as [N, H, W, C].
  bool nhwc_in = false;
  bool nhwc_out = false;

  int InnerInput(size_t k) const { return k < inner_input.size() ? inner_input[k] : -1; }
  // True when `v` is made and used only inside the chain.
  bool Internal(const ir::Value* v) const {
    for (size_t k = 0; k + 1 < nodes.size(); ++k) {
      if (nodes[k]->output(0) == v) return true;
    }
    return false;
  }

  const ir::Node& head() const { return *nodes.front(); }
  const ir::Node& tail() const { return *nodes.back(); }
};

// The chain of `matmul` alone (kind kTransformer) whose float weights are
// the dequantization of 4- or 8-bit blocks (`bits`): `packed` (codes,
// scales, zero points or null) become its extra inputs, which the cpu
// kernel reads instead of the weights (which the session may not compute);
// `k`: A's last dimension.
FusionChain PackedWeightsChain(const ir::Node& matmul, const std::vector<const ir::Value*>& packed, int bits,
                               int64_t k);

// Chains of `graph` (in its topological order `order`) the cpu backend can
// fuse, Concat chains first. `is_constant` tells which values are the same in every run; nodes
// for which `skip` is true (folded ones) are never part of a chain. Every
// value inside a chain is used only inside it and is not a graph output; it
// has one use (the next node), or, after an activation, two: the next
// Conv and a later residual Add or Sum of the chain (inner_input), or
// the two Convs of a projection block, its shortcut's first (the next
// node) and its main branch's, which reads it as inner input 0 (its
// chained_input -1) after the shortcut's nodes.
std::vector<FusionChain> FindConvChains(const std::vector<ir::Node*>& order, const ir::Graph& graph,
                                        const std::function<bool(const ir::Value*)>& is_constant,
                                        const std::function<bool(const ir::Node*)>& skip);

// Quantized chains (kind kQuantized) of `graph`, as above. Weighted chains
// start with the source's DequantizeLinear when the op is its only use, else
// with the op; the weights' DequantizeLinear (folded: its inputs are
// constant; or, for a MatMul of two activations, bypassed) is never part of
// the chain. Scales and zero points must be
// constant; the kernel checks their types and shapes.
// `is_scalar`: a constant of one element (an elementwise op with such an
// operand belongs in a lookup chain).
std::vector<FusionChain> FindQuantizedChains(const std::vector<ir::Node*>& order, const ir::Graph& graph,
                                             const std::function<bool(const ir::Value*)>& is_constant,
                                             const std::function<bool(const ir::Value*)>& is_scalar,
                                             const std::function<bool(const ir::Node*)>& skip);

// Transformer chains (kind kTransformer) of `graph`, as above
// (fusion_transformer.cc): MatMul by a constant followed by the Add of a
// constant bias; attention MatMul, Div, Add (mask), Softmax, MatMul; Add
// then LayerNormalization; and the erf GELU Div, Erf, Add, Mul, Mul, whose
// input feeds both the Div and the first Mul.
std::vector<FusionChain> FindTransformerChains(const std::vector<ir::Node*>& order, const ir::Graph& graph,
                                               const std::function<bool(const ir::Value*)>& is_constant,
                                               const std::function<bool(const ir::Node*)>& skip);

// Element-wise chains (kind kElementwise) of `graph`, as above
// (fusion_transformer.cc): at least kMinElementwiseChain nodes of Add, Sub,
// Mul, Div, Pow (exponent constant), Tanh, Erf, Sigmoid, Relu, Neg, Abs,
// Sqrt and Reciprocal, each after the first taking the previous one's
// result as one operand (the tanh GELU as exporters write it, for one).
// Their other operands come from outside the chain; the kernel checks that
// each is one value, a tensor of the chain's shape, or a row along its last
// axis.
constexpr size_t kMinElementwiseChain = 4;
std::vector<FusionChain> FindElementwiseChains(const std::vector<ir::Node*>& order, const ir::Graph& graph,
                                               const std::function<bool(const ir::Value*)>& is_constant,
                                               const std::function<bool(const ir::Node*)>& skip);

// Chooses channels-last storage for the 8-bit values passed between the
// quantized chains of `graph` (FusionChain::nhwc_in / nhwc_out), so that
// int8 convolutions, which compute channels-last, read and write their
// values without reordering them. A value is stored so only when its
// producer is a 2-D Conv, elementwise, lookup or concatenation chain, it is 4-D, it is
// not a graph output, and every reader is such a chain's kernel: a Conv or
// lookup chain starting with its DequantizeLinear, or an elided
// (`elided`) DequantizeLinear all of whose uses are Conv or elementwise
// chains that bypass it. An elementwise or concatenation chain computes on
// every operand and its result in one layout, so its values are all
// channels-last or none.
// The parameters of every DequantizeLinear and QuantizeLinear involved must
// be single values (`is_scalar`: a constant of one element, or omitted).
void PlanQuantizedLayouts(std::vector<FusionChain>& chains, const ir::Graph& graph,
                          const absl::flat_hash_set<const ir::Node*>& elided,
                          const std::function<bool(const ir::Value*)>& is_scalar);

// Writes each QLinearConv and QLinearMatMul of `graph` (ai.onnx opset
// `opset`) whose scales and zero points are constants, and whose weights
// are for a QLinearConv, as DequantizeLinear nodes, the float op (a
// QLinearConv's int32 bias as Cast(bias) * x_scale * w_scale) and a
// QuantizeLinear: the pattern the quantized chains find, so that a model in
// ONNX Runtime's QOperator form runs int8 and channels-last like its QDQ
// form. Per-channel weight scales need opset 13 (the DequantizeLinear
// axis); other nodes stay. A MaxPool of the 8-bit result of a
// QuantizeLinear (positive constant scale) becomes DequantizeLinear,
// MaxPool and QuantizeLinear with its parameters, exactly. Then the
// DequantizeLinear nodes of one value with the same scale and zero point
// merge into one (QOperator ops written out each dequantize their inputs).
// Returns how many nodes were written out or merged.
absl::StatusOr<int> ExpandQLinearOps(ir::Graph& graph, int64_t opset);

// Data movement ops (Reshape, Transpose, Flatten, Squeeze, Unsqueeze) a
// lookup-shaped chain DequantizeLinear -> op -> QuantizeLinear may run on
// the quantized tensor itself (when both have the same parameters).
bool IsQuantizedMovementOp(const ir::Node& node);

// The extra inputs of a weighted quantized chain, in order.
enum QuantizedExtra { kQxData, kQxScale, kQxZeroPoint, kQwData, kQwScale, kQwZeroPoint, kQuantizedExtras };

// A kernel that runs the nodes of `chain` one after another with their own
// kernels of `backend` (the fallback of a fused kernel), taking the fused
// kernel's inputs and producing the last node's outputs.
// MakeChainKernel for a chain with bypassed inputs: computes any of them
// that was skipped (omitted) with its DequantizeLinear, then runs the chain.
absl::StatusOr<std::unique_ptr<Kernel>> MakeBypassFallback(const FusionChain& chain, Backend backend,
                                                           const KernelInfo& info);

// `counted`: its runs count as fallbacks (ChainFallbackRuns).
absl::StatusOr<std::unique_ptr<Kernel>> MakeChainKernel(const FusionChain& chain, Backend backend,
                                                        const KernelInfo& info, bool counted = true);

// How many times, in this process, a chain ran node by node (its fused
// kernel could not take the inputs): for tests.
int64_t ChainFallbackRuns();

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_FUSION_H_
