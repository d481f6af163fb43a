// Reference kernels: quantization ops (factories listed in quantization.def).
#ifndef ONNXKIT_RUNNER_REFERENCE_QUANTIZATION_H_
#define ONNXKIT_RUNNER_REFERENCE_QUANTIZATION_H_

#include "absl/status/statusor.h"
#include "runner/kernel.h"
#include "runner/reference/quant_scale_map.h"

namespace onnxkit::runner::reference {

// quantization_linear.cc: per-tensor, per-axis and blocked (De)QuantizeLinear
// for 8/16-bit, 4/2-bit (packed), float8 and float4 quantized types.
absl::Status QuantizeLinear(KernelContext& ctx);
absl::Status DequantizeLinear(KernelContext& ctx);
absl::Status DynamicQuantizeLinear(KernelContext& ctx);

// What the QuantizeLinear node of `ctx` does with x, its scale and zero
// point (null: none): the quantized element type, the floating-point type
// x / scale is computed in (numpy's promotion of theirs, or the `precision`
// attribute), whether float8/float4 results saturate, and which scale
// element each x element reads. InvalidArgument naming what does not fit.
// The CUDA kernels read the node the same way.
struct QuantizeSpec {
  int32_t out_type = 2;
  int32_t precision = 1;
  bool saturate = true;
  ScaleMap map;
};
absl::StatusOr<QuantizeSpec> QuantizeSpecOf(const KernelContext& ctx, const Tensor& x, const Tensor& scale,
                                            const Tensor* zp);
// DequantizeLinear's: the output type (the scale's, or `output_dtype`)
// and the scale map.
struct DequantizeSpec {
  int32_t out_type = 1;
  ScaleMap map;
};
absl::StatusOr<DequantizeSpec> DequantizeSpecOf(const KernelContext& ctx, const Tensor& x,
                                                const Tensor& scale, const Tensor* zp);

// quantization_qlinear.cc: uint8/int8 QLinearMatMul and QLinearConv.
absl::Status QLinearMatMul(KernelContext& ctx);
absl::Status QLinearConv(KernelContext& ctx);

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_QUANTIZATION_H_
