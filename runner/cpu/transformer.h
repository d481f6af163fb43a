// The cpu kernels of transformer chains (runner/fusion.h, kind
// kTransformer; found by runner/fusion_transformer.cc).
#ifndef ONNXKIT_RUNNER_CPU_TRANSFORMER_H_
#define ONNXKIT_RUNNER_CPU_TRANSFORMER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runner/fusion.h"
#include "runner/kernel.h"

namespace onnxkit::runner::cpu {

// A kernel running `chain`: MatMul + bias as one packed product with the
// bias added to the accumulators (matmul_packed.h); the erf GELU as one
// vector pass computing the chain's own expression
// ((x / c, erf, + one) * x) * half; SiLU as one SwishRow pass (and the
// Mul by SwiGLU's other projection in the same pass) and Mish (Softplus,
// Tanh, Mul) as one MishRow pass; attention (attention.cc); a
// residual Add + LayerNormalization or a written-out layer normalization
// (add_layer_norm.cc). Inputs it does not cover (other types,
// shapes, non-scalar constants, no AVX-512) run the chain node by node.
absl::StatusOr<std::unique_ptr<Kernel>> MakeTransformerChain(const FusionChain& chain, const KernelInfo& info);

// The kernels of one chain shape each; `fallback` runs the chain node by
// node for inputs they do not cover.
absl::StatusOr<std::unique_ptr<Kernel>> MakeAttentionChain(const FusionChain& chain, const KernelInfo& info,
                                                           std::unique_ptr<Kernel> fallback);
// matmul.cc: true when `bias` is a float bias of n values along the last
// axis that leaves a product's shape (rank `rank`) as it is.
bool MatMulBiasFits(const Tensor& bias, int rank, int64_t n);
// matmul.cc: a MatMul (`matmul`, constant 2-D B) whose product gets the
// float bias of input `bias_input` of the kernel added, as one oneDNN
// matmul; used for KernelInfo::bf16 (in bfloat16). Other inputs run
// `fallback`.
std::unique_ptr<Kernel> MakeMatMulBias(const ir::Node& matmul, const KernelInfo& info, int bias_input,
                                       std::unique_ptr<Kernel> fallback);
absl::StatusOr<std::unique_ptr<Kernel>> MakeAddLayerNormChain(const FusionChain& chain, const KernelInfo& info,
                                                              std::unique_ptr<Kernel> fallback);
absl::StatusOr<std::unique_ptr<Kernel>> MakeDecomposedLayerNormChain(const FusionChain& chain,
                                                                     const KernelInfo& info,
                                                                     std::unique_ptr<Kernel> fallback);

// An element-wise chain (runner/fusion.h, kind kElementwise) as one pass
// over blocks of 4096 values: each node's operation in float in the nodes'
// order (Tanh, Sigmoid and Erf by the cpu backend's vector functions, a
// Pow's cube in double), its other operand one value, a tensor of the
// chain's shape or a row along its last axis. Other shapes and types, and
// a Pow by other than 2 or 3, run the nodes one by one.
absl::StatusOr<std::unique_ptr<Kernel>> MakeElementwiseChain(const FusionChain& chain,
                                                             const KernelInfo& info);

// matmul_integer.cc: MatMulInteger -> Cast to float -> Mul by a scale.
absl::StatusOr<std::unique_ptr<Kernel>> MakeMatMulIntegerScaleChain(const FusionChain& chain,
                                                                    std::unique_ptr<Kernel> fallback);

// matmul_nbits.cc: a MatMul whose float weights were dequantized from
// 4-bit blocks (a chain of the MatMul alone, the codes, scales and zero
// points as its extra inputs): up to 4 rows of A multiply the codes.
absl::StatusOr<std::unique_ptr<Kernel>> MakePackedMatMulChain(const FusionChain& chain,
                                                              const KernelInfo& info,
                                                              std::unique_ptr<Kernel> fallback);

// matmul_nbits.cc: a Gather of rows of a table dequantized from 4- or
// 8-bit blocks (GatherBlockQuantized; the codes, scales and zero points as
// the chain's extra inputs): the gathered rows alone are dequantized.
absl::StatusOr<std::unique_ptr<Kernel>> MakePackedGatherChain(const FusionChain& chain,
                                                              std::unique_ptr<Kernel> fallback);

absl::StatusOr<std::unique_ptr<Kernel>> MakeRmsNormChain(const FusionChain& chain, const KernelInfo& info,
                                                         std::unique_ptr<Kernel> fallback);

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_TRANSFORMER_H_
