// Reference kernels: quantization ops (factories listed in quantization.def).
#ifndef ONNXKIT_RUNNER_REFERENCE_QUANTIZATION_H_
#define ONNXKIT_RUNNER_REFERENCE_QUANTIZATION_H_

#include "runner/kernel.h"

namespace onnxkit::runner::reference {

// quantization_linear.cc: per-tensor, per-axis and blocked (De)QuantizeLinear
// for 8/16-bit, 4/2-bit (packed), float8 and float4 quantized types.
absl::Status QuantizeLinear(KernelContext& ctx);
absl::Status DequantizeLinear(KernelContext& ctx);
absl::Status DynamicQuantizeLinear(KernelContext& ctx);

// quantization_qlinear.cc: uint8/int8 QLinearMatMul and QLinearConv.
absl::Status QLinearMatMul(KernelContext& ctx);
absl::Status QLinearConv(KernelContext& ctx);

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_QUANTIZATION_H_
