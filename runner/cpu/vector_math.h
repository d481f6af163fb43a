// Sigmoid and tanh over float rows for the cpu kernels that apply them
// inside a larger kernel (recurrent layers, runner/cpu/rnn.cc): only
// arithmetic, selects and bit operations, so the loops vectorize. Within a
// few ulp of the libm functions (absolute error below 2e-7 for tanh near
// 0.1); NaN stays NaN, -inf and +inf give the limits exactly, and values
// below e^-87 flush to 0 (no denormal results).
#ifndef ONNXKIT_RUNNER_CPU_VECTOR_MATH_H_
#define ONNXKIT_RUNNER_CPU_VECTOR_MATH_H_

#include <cstdint>

namespace onnxkit::runner::cpu {

// v[i] = 1 / (1 + e^-v[i]) for n values, in place.
void SigmoidRow(float* v, int64_t n);
// v[i] = tanh(v[i]) for n values, in place.
void TanhRow(float* v, int64_t n);

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_VECTOR_MATH_H_
