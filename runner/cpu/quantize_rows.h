// Vectorized rows of QuantizeLinear / DequantizeLinear with the reference's
// arithmetic (quantize_linear.cc), for the cpu kernels of quantized chains.
#ifndef ONNXKIT_RUNNER_CPU_QUANTIZE_ROWS_H_
#define ONNXKIT_RUNNER_CPU_QUANTIZE_ROWS_H_

#include <cstdint>

namespace onnxkit::runner::cpu {

// y[i] = saturate(round_half_even(x[i] / scale) + zp) for y of type
// `y_type` (uint8 or int8); NaN gives zp.
void QuantizeFloatRow(const float* x, void* y, int32_t y_type, int64_t n, float scale, int32_t zp);
// y[i] = float(x[i] - zp) * scale for x of type `x_type` (uint8 or int8).
void DequantizeByteRow(const void* x, int32_t x_type, float* y, int64_t n, float scale, int32_t zp);

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_QUANTIZE_ROWS_H_
