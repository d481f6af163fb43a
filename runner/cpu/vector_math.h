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
// v[i] = v[i] / (1 + e^-v[i]) (swish, SiLU) for n values, in place: within
// 3e-7 relative of libm in double, absolute 2e-36 where the result is
// tiny (values below -87.3); NaN stays NaN, +inf gives +inf and -inf NaN
// (-inf * sigmoid(-inf) = -inf * 0), as the Sigmoid and Mul nodes.
void SwishRow(float* v, int64_t n);
// y[i] = swish(x[i]), as SwishRow; y may be x.
void SwishRowTo(const float* x, float* y, int64_t n);
// y[i] = swish(x[i]) * u[i], the product rounded once (as a Mul node after
// the swish); y may be x, not u.
void SwishMulRow(const float* x, const float* u, float* y, int64_t n);
// The same without AVX-512 (what SwishRow runs on processors without it).
void SwishRowPortable(float* v, int64_t n);
// v[i] = tanh(v[i]) for n values, in place.
void TanhRow(float* v, int64_t n);
// One LSTM step of n units without peepholes or input_forget, with the
// default activations
// (sigmoid, tanh, tanh), every unit in one pass: g holds the recurrent
// product's gates i, o, f, c (n values each), xg the input projection's
// (biases included), clip the clip limit (or null). Updates the cell state c
// and writes the hidden state h. Each activation is SigmoidRow's or
// TanhRow's function; NaN and infinities propagate as through the
// gate-by-gate steps.
void LstmCellRow(const float* g, const float* xg, const float* clip, float* h, float* c, int64_t n);
// One GRU step of n units with linear_before_reset and the default
// activations (sigmoid, tanh): g holds the recurrent product's z, r and h
// parts, xg the input projection's (biases included, but for the candidate's
// recurrent bias rb, added before scaling by r), clip the clip limit (or
// null). Updates h.
void GruCellRow(const float* g, const float* xg, const float* rb, const float* clip, float* h, int64_t n);
// y[i] = x[i]^3 for n values (y may be x): in double (the square exact,
// the cube rounded once), then rounded to float (beyond the float range:
// infinity), bit for bit the reference's pow in double.
void CubeRow(const float* x, float* y, int64_t n);
// y[i] = log(x[i]) for n values (y may be x).
void LogRow(const float* x, float* y, int64_t n);
// y[i] = log(1 + e^x[i]) for n values (y may be x).
void SoftplusRow(const float* x, float* y, int64_t n);
// y[i] = x[i] * tanh(log(1 + e^x[i])) (Mish) for n values (y may be x), in
// double rounded to float once; NaN stays NaN, +inf gives +inf and -inf
// NaN (-inf * tanh(0)), as the Mish node and Softplus, Tanh, Mul do.
void MishRow(const float* x, float* y, int64_t n);
// y[i] = log(sum over r < rows of e^x[r * stride + i]) for n values i
// (ReduceLogSumExp over a strided axis), as the reference computes it: the
// largest value m taken out, the sum of e^(x - m) in double, log(sum) + m
// rounded to float once. Every x must be finite (m is then, and the sum is
// in [1, rows]).
void LogSumExpColumns(const float* x, int64_t rows, int64_t stride, int64_t n, float* y);
// The same over n > 0 contiguous values.
float LogSumExpRow(const float* x, int64_t n);
// y[i] = sin(x[i]) (cos with `cosine`) computed in double and rounded to
// float once, as the reference does with libm: the argument reduced by
// multiples of pi/2 (in three parts) and the Taylor series of sin and cos
// on what is left (|r| <= pi/4, error near double rounding); |x| >= 2^19,
// infinities and NaN through libm. y may be x.
void SinCosRow(const float* x, float* y, int64_t n, bool cosine);
// y[i] = Selu(x[i]) as the reference computes it in double (gamma * x above
// 0, else gamma * (alpha * e^x - alpha)), e^x by the vectorized
// exponential (relative error below 1e-14); y may be x.
void SeluRow(const float* x, float* y, int64_t n, double alpha, double gamma);
// y[i] = Celu(x[i]) = max(0, x) + min(0, alpha * expm1(x / alpha)) in double
// (expm1 by its series near 0, through the vectorized exponential below
// -0.5: within 1e-14), NaN giving 0 as the reference's max and min do; y
// may be x.
void CeluRow(const float* x, float* y, int64_t n, double alpha);
// y[i] = atan, asin or acos of x[i] in double, rounded to float once as the
// reference does with libm: one arctangent (series on a reduced argument,
// error near double rounding) for all three; NaN and |x| > 1 (asin, acos)
// give NaN, signed zeros keep their sign. y may be x.
enum class ArcFunction { kAtan, kAsin, kAcos };
void ArcRow(const float* x, float* y, int64_t n, ArcFunction f);

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_VECTOR_MATH_H_
