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

// y[i] = QuantizeLinear(op(DequantizeLinear(a[i]), DequantizeLinear(b[i])))
// for a, b and y of one 8-bit type `type` (uint8 or int8), op 0 Add, 1 Sub,
// 2 Mul, 3 Div: the float operations of the rows above, in the same order,
// none contracted (this file is compiled without contraction).
void BinaryByteRow(int op, const void* a, const void* b, void* y, int32_t type, int64_t n, float sa, int32_t za,
                   float sb, int32_t zb, float sy, int32_t zy);

// The same with the second operand given in float: y[i] =
// QuantizeLinear(op(DequantizeLinear(q[i]), f[i])) when `q_first`, else
// QuantizeLinear(op(f[i], DequantizeLinear(q[i]))); q and y of one type.
void BinaryByteFloatRow(int op, bool q_first, const void* q, const float* f, void* y, int32_t type, int64_t n,
                        float sq, int32_t zq, float sy, int32_t zy);

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_QUANTIZE_ROWS_H_
