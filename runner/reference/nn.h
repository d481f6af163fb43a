// Reference kernels: neural-network ops (factories listed in nn.def), and
// the helpers the nn_*.cc files share: a row-major matrix product, the
// geometry of sliding windows (Conv, pooling) and element conversion to the
// accumulation type.
#ifndef ONNXKIT_RUNNER_REFERENCE_NN_H_
#define ONNXKIT_RUNNER_REFERENCE_NN_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "runner/kernel.h"

namespace onnxkit::runner::reference {

// --- Factories (nn.def) ---

// nn_gemm.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeGemm(const ir::Node& node, const KernelInfo& info);
absl::Status MatMul(KernelContext& ctx);
absl::Status MatMulInteger(KernelContext& ctx);
absl::Status Det(KernelContext& ctx);
// nn_conv.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeConv(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeConvInteger(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeConvTranspose(const ir::Node& node, const KernelInfo& info);
// nn_pool.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeMaxPool(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeAveragePool(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeLpPool(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeGlobalAveragePool(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeGlobalMaxPool(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeGlobalLpPool(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeMaxUnpool(const ir::Node& node, const KernelInfo& info);
// nn_roi.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeMaxRoiPool(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeRoiAlign(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeNonMaxSuppression(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeDeformConv(const ir::Node& node, const KernelInfo& info);
// nn_norm.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeBatchNormalization(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeInstanceNormalization(const ir::Node& node,
                                                                  const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeLayerNormalization(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeGroupNormalization(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeRMSNormalization(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeLRN(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeLpNormalization(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeMeanVarianceNormalization(const ir::Node& node,
                                                                      const KernelInfo& info);
// nn_softmax.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeSoftmax(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeLogSoftmax(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeHardmax(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeShrink(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeNegativeLogLikelihoodLoss(const ir::Node& node,
                                                                      const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeSoftmaxCrossEntropyLoss(const ir::Node& node,
                                                                    const KernelInfo& info);
// nn_rnn.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeRNN(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeGRU(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeLSTM(const ir::Node& node, const KernelInfo& info);
// nn_attention.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeAttention(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeRotaryEmbedding(const ir::Node& node, const KernelInfo& info);
// RotaryEmbedding's X as batch, sequence, heads and head size: 4-D X is
// [B, H, S, D], 3-D [B, S, H * D] with num_heads; nullopt for other shapes.
struct RotaryDims {
  int64_t b = 0, s = 0, h = 0, d = 0;
};
std::optional<RotaryDims> RotaryDimsOf(const Tensor& x, int64_t num_heads);
absl::StatusOr<std::unique_ptr<Kernel>> MakeFlexAttention(const ir::Node& node, const KernelInfo& info);
// nn_sequence_models.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeLinearAttention(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeCausalConvWithState(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeSwiGlu(const ir::Node& node, const KernelInfo& info);
// nn_einsum.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeEinsum(const ir::Node& node, const KernelInfo& info);

// --- Helpers shared by the nn_*.cc files ---

// c[i, j] (row-major, row stride ldc) = (accumulate ? c[i, j] : 0)
//   + sum over k of a[i * a_row + k * a_col] * b[k * ldb + j]
// for i < m, j < n, k < k_dim. A is read through strides (so a transposed A
// costs nothing); B's rows are contiguous. Instantiated for float, double and
// uint64_t (integer products wrap modulo 2^64, which is what a cast back to a
// narrower two's-complement type needs).
template <typename C>
void MatMulAccumulate(int64_t m, int64_t n, int64_t k_dim, const C* a, int64_t a_row, int64_t a_col,
                      const C* b, int64_t ldb, C* c, int64_t ldc, bool accumulate);

// A tensor's elements as the accumulation type C: no copy when the element
// type already is C, else converted into `storage`.
template <typename T, typename C>
const C* ElementsAs(const Tensor& t, std::vector<C>& storage) {
  if constexpr (std::is_same_v<T, C>) {
    return t.data<T>();
  } else {
    storage.resize(static_cast<size_t>(t.size()));
    const T* p = t.data<T>();
    for (size_t i = 0; i < storage.size(); ++i) {
      if constexpr (std::is_arithmetic_v<T>) {
        storage[i] = static_cast<C>(p[i]);
      } else {
        storage[i] = static_cast<C>(static_cast<float>(p[i]));  // Float16, BFloat16
      }
    }
    return storage.data();
  }
}

// The elements of a float tensor (float16, float, double, bfloat16) as
// doubles; empty for other types.
std::vector<double> FloatsAsDoubles(const Tensor& t);

// A zero-filled scratch buffer of `count` elements of C (float, double,
// int64_t or uint64_t), held as a tensor so it counts against the memory
// limit and fails cleanly when too large.
template <typename C>
absl::StatusOr<Tensor> Scratch(int64_t count) {
  constexpr int32_t kDtype = std::is_same_v<C, float>     ? 1
                             : std::is_same_v<C, double>  ? 11
                             : std::is_same_v<C, int64_t> ? 7
                                                          : 13;
  static_assert(sizeof(C) == (kDtype == 1 ? 4 : 8));
  return Tensor::Allocate(kDtype, {count});
}

// Sliding-window attributes shared by Conv, ConvTranspose, ConvInteger,
// DeformConv and the pooling ops, as written on the node (empty: absent).
struct WindowAttrs {
  std::string auto_pad = "NOTSET";  // NOTSET, SAME_UPPER, SAME_LOWER, VALID
  std::vector<int64_t> kernel_shape;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;  // begins then ends
  bool ceil_mode = false;
};

// Reads and checks (values positive, pads non-negative, auto_pad known) the
// window attributes of `node`.
absl::StatusOr<WindowAttrs> ParseWindowAttrs(const ir::Node& node);

// A window resolved against the spatial dims of one input.
struct Window {
  std::vector<int64_t> in;  // input spatial dims
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pad_begin, pad_end;
  std::vector<int64_t> out;                            // output spatial dims
  int64_t in_size = 1, kernel_size = 1, out_size = 1;  // products
};

// Resolves `attrs` for spatial input dims `in` and kernel dims `kernel`
// (from the weights or kernel_shape): checks attribute lengths, computes the
// pads auto_pad asks for and the output dims (floor, or ceil with
// ceil_mode, where a last window must start inside the input or its begin
// padding). InvalidArgument when a dim would be negative or overflow.
absl::StatusOr<Window> ResolveWindow(const WindowAttrs& attrs, std::span<const int64_t> in,
                                     std::span<const int64_t> kernel);

// For every kernel tap t (row-major over the kernel dims) and output
// position o, the linear input index the window reads, or -1 where it reads
// padding: taps[t * out_size + o].
absl::StatusOr<Tensor> WindowTaps(const Window& w);

// "[1, 2, 3]"
std::string ShapeString(std::span<const int64_t> dims);

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_NN_H_
