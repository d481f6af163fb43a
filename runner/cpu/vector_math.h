// Float rows of transcendental functions for the cpu kernels: only
// arithmetic, selects and bit operations, so the loops vectorize.
//
// Sigmoid and tanh (recurrent layers, runner/cpu/rnn.cc) compute in float:
// within a few ulp of the libm functions (absolute error below 2e-7 for
// tanh near 0.1); NaN stays NaN, -inf and +inf give the limits exactly, and
// values below e^-87 flush to 0 (no denormal results).
//
// Log and Softplus (the Log and Softplus kernels) compute in double to a
// few double roundings and round to float once, as the reference kernels do
// with libm's double functions: on every 97th float bit pattern (44 million
// values, tests/runner/cpu/vector_math_test.cc) the floats are the same.
// Log(0) is -inf, Log of a negative value NaN.
#ifndef ONNXKIT_RUNNER_CPU_VECTOR_MATH_H_
#define ONNXKIT_RUNNER_CPU_VECTOR_MATH_H_

#include <cstdint>

namespace onnxkit::runner::cpu {

// v[i] = 1 / (1 + e^-v[i]) for n values, in place.
void SigmoidRow(float* v, int64_t n);
// v[i] = tanh(v[i]) for n values, in place.
void TanhRow(float* v, int64_t n);
// y[i] = log(x[i]) for n values (y may be x).
void LogRow(const float* x, float* y, int64_t n);
// y[i] = log(1 + e^x[i]) for n values (y may be x).
void SoftplusRow(const float* x, float* y, int64_t n);

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_VECTOR_MATH_H_
