// Weight-only blocked quantization (--weights-only): the constant weight of
// MatMul / Gemm is stored int4 or int8 with one symmetric scale per block of
// `block_size` elements along the reduction axis and dequantized in the
// graph (DequantizeLinear with block_size, opset 21); activations stay
// float, so nothing is calibrated.
//
// Before: %y = MatMul(%a, %w)                     (w a float [K, N] constant)
// After:  %wd = DequantizeLinear(%w_quantized, %w_scale, axis=0, block_size=B)
//         %y  = MatMul(%a, %wd)                   (w_quantized int4 [K, N],
//                                                   w_scale float [ceil(K/B), N])
#ifndef ONNXKIT_QUANTIZATION_BLOCKED_H_
#define ONNXKIT_QUANTIZATION_BLOCKED_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "lib/io/model_io.h"
#include "quantization/qdq.h"
#include "runner/tensor.h"

namespace onnxkit::quant {

inline constexpr int64_t kWeightsOnlyOpset = 21;

struct BlockedWeight {
  runner::Tensor data;   // int4 (packed) or int8, the weight's shape
  runner::Tensor scale;  // float, the weight's shape with dim `axis` = ceil(dim / block)
};

// Symmetric per block along `axis`: scale = max|w| / 7 (int4) or / 127
// (int8) over the block (1 when the block is all zero), q = round half to
// even of w / scale, clamped to [-7, 7] / [-127, 127]; non-finite values
// store 0. InvalidArgument for a non-float weight, a bad axis, bits other
// than 4 and 8, or block < 1.
absl::StatusOr<BlockedWeight> QuantizeBlocked(const runner::Tensor& w, int axis, int64_t block, int bits);

struct WeightsOnlyOptions {
  int bits = 4;
  int64_t block_size = 32;
};

// Rewrites MatMul (float constant B of rank >= 2, blocked along its
// second-to-last axis) and Gemm (constant B: axis 0, or 1 with transB), as
// selected by options' op filters (--op-types, --exclude-ops,
// --exclude-nodes, keep_float). FailedPrecondition below opset 21.
absl::StatusOr<QdqResult> QuantizeWeightsOnly(const io::LoadedModel& model, const QdqOptions& options,
                                              const WeightsOnlyOptions& wo);

}  // namespace onnxkit::quant

#endif  // ONNXKIT_QUANTIZATION_BLOCKED_H_
