// erf for float vector loops, shared by the cpu Erf kernel and the fused
// GELU chain so that fused and unfused runs use one approximation: only
// arithmetic, comparisons that keep NaN, and bit operations, so loops over
// it vectorize.
#ifndef ONNXKIT_RUNNER_CPU_ERF_APPROX_H_
#define ONNXKIT_RUNNER_CPU_ERF_APPROX_H_

#include <bit>
#include <cmath>
#include <cstdint>

namespace onnxkit::runner::cpu {

// exp(v) for v in [-88, 0]: 2^n * e^r with |r| <= ln2 / 2 and a degree-7
// Taylor polynomial; only arithmetic and bit operations, so it vectorizes.
inline float ExpNonPositive(float v) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer
  float n = (v * kLog2e + kRound) - kRound;
  float r = (v - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.f / 5040;
  p = p * r + 1.f / 720;
  p = p * r + 1.f / 120;
  p = p * r + 1.f / 24;
  p = p * r + 1.f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits > 0 ? bits : 0);
}

// erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7):
// 1 - t (a1 + t (a2 + ... a5 t)) exp(-x^2), t = 1 / (1 + p |x|).
inline float ErfApprox(float x) {
  float ax = std::fabs(x);
  float t = 1.f / (1.f + 0.3275911f * ax);
  float poly =
      t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  float sq = ax * ax;
  float e = ExpNonPositive(-(sq < 88.f ? sq : 88.f));
  float r = 1.f - poly * e;
  r = x < 0 ? -r : r;
  return x != x ? x : r;  // NaN stays NaN
}

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_ERF_APPROX_H_
