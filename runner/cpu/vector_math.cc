// Float rows of runner/cpu/vector_math.h. Compiled with -fno-trapping-math
// (runner/CMakeLists.txt) so that loops with selects vectorize; no
// floating-point trap is ever enabled, so results are unchanged.
#include "runner/cpu/vector_math.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "runner/cpu/erf_approx.h"

namespace onnxkit::runner::cpu {
namespace {

constexpr double kLn2 = 0.69314718055994530942;

// log(m) for m in [sqrt(1/2), sqrt(2)]: 2 atanh(s), s = (m - 1) / (m + 1),
// |s| <= 0.1716, by its odd series up to s^19 (relative error below 1e-16
// from the series; the arithmetic adds a few double roundings).
inline double LogNearOne(double m) {
  const double f = m - 1, s = f / (2 + f), s2 = s * s;
  double p = 1.0 / 19;
  p = p * s2 + 1.0 / 17;
  p = p * s2 + 1.0 / 15;
  p = p * s2 + 1.0 / 13;
  p = p * s2 + 1.0 / 11;
  p = p * s2 + 1.0 / 9;
  p = p * s2 + 1.0 / 7;
  p = p * s2 + 1.0 / 5;
  p = p * s2 + 1.0 / 3;
  p = p * s2 + 1;
  return 2 * s * p;
}

// log(d) for a positive normal double d: d = m 2^e with m in
// [sqrt(1/2), sqrt(2)); the exponent is read as a double through the
// mantissa of 2^52 (bit operations only).
inline double LogPositive(double d) {
  const uint64_t bits = std::bit_cast<uint64_t>(d);
  const double e = std::bit_cast<double>((bits >> 52) | 0x4330000000000000ull) - (4503599627370496.0 + 1023);
  double m = std::bit_cast<double>((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
  const bool high = m > 1.4142135623730951;
  m = high ? m * 0.5 : m;
  return (high ? e + 1 : e) * kLn2 + LogNearOne(m);
}

// e^v for v in [-110, 0] (relative error below 1e-14): 2^n e^r with
// |r| <= ln2 / 2 and a degree-12 Taylor polynomial; 2^n built from the bits
// of n + 2^52 + 1023. Smaller v are taken as -110 (far below the smallest
// float); NaN stays NaN.
inline double ExpNonPositiveDouble(double v) {
  v = v < -110 ? -110 : v;
  constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const double n = (v * 1.4426950408889634 + kRound) - kRound;
  const double r = (v - n * 0.6931471805599453) - n * 2.3190468138462996e-17;
  double p = 1.0 / 479001600;
  p = p * r + 1.0 / 39916800;
  p = p * r + 1.0 / 3628800;
  p = p * r + 1.0 / 362880;
  p = p * r + 1.0 / 40320;
  p = p * r + 1.0 / 5040;
  p = p * r + 1.0 / 720;
  p = p * r + 1.0 / 120;
  p = p * r + 1.0 / 24;
  p = p * r + 1.0 / 6;
  p = p * r + 0.5;
  p = p * r + 1;
  p = p * r + 1;
  const uint64_t scale = std::bit_cast<uint64_t>(n + (4503599627370496.0 + 1023)) << 52;
  return p * std::bit_cast<double>(scale);
}

// 1 / (1 + e^-x): e^-|x| once, then r or e * r by the sign; NaN stays NaN.
__attribute__((always_inline)) inline float SigmoidOf(float x) {
  const float m = -std::fabs(x);
  const float e = ExpNonPositive(m < -100.f ? -100.f : m);  // e^-|x|
  const float r = 1.f / (1.f + e);
  return x >= 0.f ? r : (x < 0.f ? e * r : x);
}

// Near 0 the odd series (its next term is below 1e-12 there); elsewhere
// (1 - e^-2|x|) / (1 + e^-2|x|), whose subtraction loses little from 0.1 on.
__attribute__((always_inline)) inline float TanhOf(float x) {
  const float ax = std::fabs(x);
  const float x2 = x * x;
  const float series =
      x * (1.f + x2 * (-1.f / 3 + x2 * (2.f / 15 + x2 * (-17.f / 315 + x2 * (62.f / 2835)))));
  const float m = -2.f * ax;
  const float e = ExpNonPositive(m < -100.f ? -100.f : m);
  const float t = std::copysign((1.f - e) / (1.f + e), x);
  return ax < 0.1f ? series : t;
}

// std::clamp(v, -limit, limit): NaN passes through.
__attribute__((always_inline)) inline float ClipTo(float v, float limit) {
  return v < -limit ? -limit : (limit < v ? limit : v);
}

}  // namespace

// ExpNonPositive flushes to 0 below -87.3; inputs are clamped at -100 so
// that -inf (whose integer part is undefined) gives exactly 0 as well.
__attribute__((target_clones("avx512f", "avx2", "default"))) void SigmoidRow(float* v, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) v[i] = SigmoidOf(v[i]);
}

namespace {

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() and trip
// -Wmaybe-uninitialized when inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// SwishRowPortable's function on 16 floats. A swish row costs its vector
// operations, not its loads (about 0.3 ns a value on Zen 4 from L1 or L3
// alike), so they are kept to 19: e = e^m for m = -|x| (the sign bit set),
// m kept above -110 so that the infinities give e = 0 exactly (2^-159
// rounds to 0) and its integer part stays defined; e^m = 2^n e^r, 2^n by
// vscalefps, e^r for |r| <= ln(2)/2 by a degree-6 minimax polynomial
// (relative error 2e-9 before rounding); 1 / (1 + e) by vrcp14ps and one
// Newton step (relative error near 2^-28) instead of a division, which
// costs several times more. Between e^-87.3 and e^-104 e is subnormal
// rather than 0 (|swish(x)| < 2e-36 there).
__attribute__((target("avx512f"), always_inline)) inline __m512 Swish16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  const __m512 m = _mm512_max_ps(
      _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))),
      _mm512_set1_ps(-110.f));  // -|x|; a NaN x gives -110 (x carries it to the result)
  const __m512 nr = _mm512_roundscale_ps(_mm512_mul_ps(m, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(nr, _mm512_set1_ps(0.693359375f), m);
  r = _mm512_fnmadd_ps(nr, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.385082257911563e-3f), r, _mm512_set1_ps(8.374910801649094e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.166797548532486e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666418313980103e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.999999403953552e-1f));
  p = _mm512_fmadd_ps(p, r, one);
  p = _mm512_fmadd_ps(p, r, one);
  const __m512 e = _mm512_scalef_ps(p, nr);
  const __m512 d = _mm512_add_ps(one, e);
  __m512 q = _mm512_rcp14_ps(d);
  q = _mm512_mul_ps(q, _mm512_fnmadd_ps(d, q, _mm512_set1_ps(2.f)));  // 1 / (1 + e)
  // x >= 0: q; else (NaN included) e * q; then times x (NaN stays NaN).
  const __m512 s = _mm512_mask_mul_ps(q, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NGE_UQ), e, q);
  return _mm512_mul_ps(x, s);
}

// y = swish(x); y may be x.
__attribute__((target("avx512f"))) void SwishRowAvx512(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, Swish16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, k, Swish16(_mm512_maskz_loadu_ps(k, x + i)));
  }
}

// y = swish(x) * u, each product rounded once; y may be x.
__attribute__((target("avx512f"))) void SwishMulRowAvx512(const float* x, const float* u, float* y,
                                                          int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_mul_ps(Swish16(_mm512_loadu_ps(x + i)), _mm512_loadu_ps(u + i)));
  }
  if (i < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(
        y + i, k, _mm512_mul_ps(Swish16(_mm512_maskz_loadu_ps(k, x + i)), _mm512_maskz_loadu_ps(k, u + i)));
  }
}

__attribute__((target("avx512f"))) void CubeRowAvx512(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    _mm256_storeu_ps(y + i, _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_mul_pd(v, v), v)));
  }
  if (i < n) {  // the last values through a padded block
    alignas(32) float in[8] = {}, out[8];
    std::memcpy(in, x + i, static_cast<size_t>(n - i) * sizeof(float));
    const __m512d v = _mm512_cvtps_pd(_mm256_load_ps(in));
    _mm256_store_ps(out, _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_mul_pd(v, v), v)));
    std::memcpy(y + i, out, static_cast<size_t>(n - i) * sizeof(float));
  }
}

#pragma GCC diagnostic pop

bool SwishAvx512() {
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return avx512;
}

}  // namespace

void SwishRow(float* v, int64_t n) { SwishRowTo(v, v, n); }

void SwishRowTo(const float* x, float* y, int64_t n) {
  if (SwishAvx512()) {
    SwishRowAvx512(x, y, n);
    return;
  }
  if (x != y) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
  SwishRowPortable(y, n);
}

void CubeRow(const float* x, float* y, int64_t n) {
  if (SwishAvx512()) {
    CubeRowAvx512(x, y, n);
    return;
  }
  // Rounded to float as a conversion rounds to nearest, without converting
  // a value beyond the float range.
  constexpr double kMax = std::numeric_limits<float>::max(), kHalfUlp = 0x1p103;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i], r = d * d * d;
    y[i] = r >= kMax + kHalfUlp    ? std::numeric_limits<float>::infinity()
           : r > kMax              ? std::numeric_limits<float>::max()
           : r <= -kMax - kHalfUlp ? -std::numeric_limits<float>::infinity()
           : r < -kMax             ? -std::numeric_limits<float>::max()
                                   : static_cast<float>(r);
  }
}

void SwishMulRow(const float* x, const float* u, float* y, int64_t n) {
  if (SwishAvx512()) {
    SwishMulRowAvx512(x, u, y, n);
    return;
  }
  SwishRowTo(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] *= u[i];
}

// x * sigmoid(x) with sigmoid as SigmoidOf forms it (e = e^-|x|, r = 1 / (1 +
// e), e * r for negative x) and e flushed to 0 below e^-87.3.
__attribute__((target_clones("avx2", "default"))) void SwishRowPortable(float* v, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float x = v[i];
    const float m = -std::fabs(x);
    const float e = m < -87.3f ? 0.f : ExpNonPositive(m);
    const float r = 1.f / (1.f + e);
    v[i] = x * (x >= 0.f ? r : e * r);  // NaN: NaN * anything
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void TanhRow(float* v, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) v[i] = TanhOf(v[i]);
}

// No clip is a limit of +inf: ClipTo is then the identity, infinities and
// NaN included.
__attribute__((target_clones("avx512f", "avx2", "default"))) void LstmCellRow(const float* g, const float* xg,
                                                                              const float* clip, float* h,
                                                                              float* c, int64_t n) {
  const float limit = clip != nullptr ? *clip : INFINITY;
  const float *gi = g, *go = g + n, *gf = g + 2 * n, *gc = g + 3 * n;
  const float *xi = xg, *xo = xg + n, *xf = xg + 2 * n, *xc = xg + 3 * n;
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) {
    const float i = SigmoidOf(ClipTo(gi[k] + xi[k], limit));
    const float f = SigmoidOf(ClipTo(gf[k] + xf[k], limit));
    const float cell = f * c[k] + i * TanhOf(ClipTo(gc[k] + xc[k], limit));
    c[k] = cell;
    h[k] = SigmoidOf(ClipTo(go[k] + xo[k], limit)) * TanhOf(cell);
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void GruCellRow(const float* g, const float* xg,
                                                                             const float* rb,
                                                                             const float* clip, float* h,
                                                                             int64_t n) {
  const float *gz = g, *gr = g + n, *gh = g + 2 * n;
  const float *xz = xg, *xr = xg + n, *xh = xg + 2 * n;
  const float limit = clip != nullptr ? *clip : INFINITY;
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) {
    const float z = SigmoidOf(ClipTo(gz[k] + xz[k], limit));
    const float r = SigmoidOf(ClipTo(gr[k] + xr[k], limit));
    const float cand = TanhOf(ClipTo(xh[k] + r * (gh[k] + rb[k]), limit));
    h[k] = (1.f - z) * cand + z * h[k];
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void LogRow(const float* x, float* y, int64_t n) {
  constexpr float kInf = INFINITY;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    // Every positive float is a normal double; others are fixed below.
    const double d = v > 0 && v < kInf ? static_cast<double>(v) : 1.0;
    float r = static_cast<float>(LogPositive(d));
    r = v == 0 ? -kInf : r;
    r = v == kInf ? kInf : r;
    r = v < 0 ? NAN : r;
    r = v != v ? v : r;
    y[i] = r;
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void SoftplusRow(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double a = v < 0 ? -v : v;  // NaN stays NaN
    const double e = ExpNonPositiveDouble(-a);  // in (0, 1]
    // log1p(e): its series below 1e-4, else log(1 + e) with 1 + e in (1, 2].
    const double series = e * (1 - e * (0.5 - e * (1.0 / 3 - e * 0.25)));
    const double w = 1 + e;
    const bool high = w > 1.4142135623730951;
    const double wide = (high ? kLn2 : 0) + LogNearOne(high ? w * 0.5 : w);
    const double l = e < 1e-4 ? series : wide;
    y[i] = static_cast<float>((v > 0 ? v : 0) + l);
  }
}

// With e = e^-|x|, tanh(log(1 + e^x)) = ((1 + e^x)^2 - 1) / ((1 + e^x)^2 + 1)
// is e (e + 2) / (e (e + 2) + 2) for x <= 0 and, numerator and denominator
// divided by e^2x, (1 + 2e) / (1 + 2e + 2e^2) for x > 0: no overflow, no
// cancellation, one division. Below -110 it is 0 (x e^x is far below the
// smallest float there), so -inf gives -inf * 0, NaN.
__attribute__((target_clones("avx512f", "avx2", "default"))) void MishRow(const float* x, float* y,
                                                                          int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double a = v < 0 ? -v : v;            // NaN stays NaN
    const double e = ExpNonPositiveDouble(-a);  // in (0, 1]
    const bool positive = v > 0;
    const double num = positive ? 1 + 2 * e : e * (e + 2);
    const double t = num / (num + (positive ? 2 * e * e : 2.0));
    y[i] = static_cast<float>(v * (v < -110 ? 0.0 : t));
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void LogSumExpColumns(const float* x,
                                                                                   int64_t rows,
                                                                                   int64_t stride, int64_t n,
                                                                                   float* y) {
  constexpr int64_t kBlock = 256;
  float m[kBlock];
  double s[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t k = std::min(kBlock, n - b);
    const float* xb = x + b;
#pragma omp simd
    for (int64_t i = 0; i < k; ++i) m[i] = xb[i];
    for (int64_t r = 1; r < rows; ++r) {
      const float* row = xb + r * stride;
#pragma omp simd
      for (int64_t i = 0; i < k; ++i) m[i] = row[i] > m[i] ? row[i] : m[i];
    }
#pragma omp simd
    for (int64_t i = 0; i < k; ++i) s[i] = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = xb + r * stride;
#pragma omp simd
      for (int64_t i = 0; i < k; ++i) s[i] += ExpNonPositiveDouble(static_cast<double>(row[i]) - m[i]);
    }
#pragma omp simd
    for (int64_t i = 0; i < k; ++i) y[b + i] = static_cast<float>(LogPositive(s[i]) + m[i]);
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) float LogSumExpRow(const float* x, int64_t n) {
  float m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += ExpNonPositiveDouble(static_cast<double>(x[i]) - m);
  return static_cast<float>(LogPositive(s) + m);
}

namespace {

// sin(r) and cos(r) for |r| <= pi/4 in double: their Taylor series to r^21
// and r^20 (truncation below 1e-24).
inline double SinSmall(double r) {
  const double r2 = r * r;
  double p = -1.0 / 51090942171709440000.0;  // -1/21!
  p = p * r2 + 1.0 / 121645100408832000.0;
  p = p * r2 - 1.0 / 355687428096000.0;
  p = p * r2 + 1.0 / 1307674368000.0;
  p = p * r2 - 1.0 / 6227020800.0;
  p = p * r2 + 1.0 / 39916800.0;
  p = p * r2 - 1.0 / 362880.0;
  p = p * r2 + 1.0 / 5040.0;
  p = p * r2 - 1.0 / 120.0;
  p = p * r2 + 1.0 / 6.0;
  return r - r * r2 * p;
}
inline double CosSmall(double r) {
  const double r2 = r * r;
  double p = 1.0 / 2432902008176640000.0;  // 1/20!
  p = p * r2 - 1.0 / 6402373705728000.0;
  p = p * r2 + 1.0 / 20922789888000.0;
  p = p * r2 - 1.0 / 87178291200.0;
  p = p * r2 + 1.0 / 479001600.0;
  p = p * r2 - 1.0 / 3628800.0;
  p = p * r2 + 1.0 / 40320.0;
  p = p * r2 - 1.0 / 720.0;
  p = p * r2 + 1.0 / 24.0;
  p = p * r2 - 0.5;
  return 1 + r2 * p;
}

// Inputs below this magnitude are reduced by multiples of pi/2 in three
// parts (the first of 33 bits, so k times it is exact); the others take
// std::sin / std::cos.
constexpr float kSinCosDirect = 0x1p19f;

template <bool kCosine>
__attribute__((always_inline)) inline void SinCosLoop(const float* x, float* y, int64_t n) {
  constexpr double kTwoOverPi = 0.63661977236758134308;
  constexpr double kPio2a = 1.57079632673412561417e+00;  // pi/2 = a + b + c
  constexpr double kPio2b = 6.07710050630396597660e-11;
  constexpr double kPio2c = 2.02226624879595063154e-21;
  constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52
  int rare = 0;
#pragma omp simd reduction(| : rare)
  for (int64_t i = 0; i < n; ++i) {
    const bool direct = std::fabs(x[i]) < kSinCosDirect;
    const double v = direct ? x[i] : 0.0;
    // k = round(v * 2 / pi); its low bits are those of t's mantissa (an
    // integer read from bits vectorizes where a conversion would not).
    const double t = v * kTwoOverPi + kRound;
    const double k = t - kRound;
    const double r = ((v - k * kPio2a) - k * kPio2b) - k * kPio2c;
    const uint64_t q = (std::bit_cast<uint64_t>(t) + (kCosine ? 1 : 0)) & 3;  // cos(x) = sin(x + pi/2)
    const double s = SinSmall(r), c = CosSmall(r);
    double out = (q & 1) ? c : s;
    out = (q & 2) ? -out : out;
    if constexpr (!kCosine) out = v == 0 ? v : out;  // sin(-0) is -0
    // The others keep their input for the second pass (y may be x; a
    // reduced result is within [-1, 1], so they are told apart).
    y[i] = direct ? static_cast<float>(out) : x[i];
    rare |= !direct;
  }
  if (rare == 0) return;
  for (int64_t i = 0; i < n; ++i) {
    if (!(std::fabs(y[i]) < kSinCosDirect)) {
      const double v = y[i];
      y[i] = static_cast<float>(kCosine ? std::cos(v) : std::sin(v));
    }
  }
}

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) void SinCosRow(const float* x, float* y,
                                                                            int64_t n, bool cosine) {
  if (cosine) {
    SinCosLoop<true>(x, y, n);
  } else {
    SinCosLoop<false>(x, y, n);
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void SeluRow(const float* x, float* y, int64_t n,
                                                                          double alpha, double gamma) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double e = ExpNonPositiveDouble(v > 0 ? 0.0 : v);  // NaN stays NaN
    y[i] = static_cast<float>(v > 0 ? gamma * v : gamma * (alpha * e - alpha));
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void CeluRow(const float* x, float* y, int64_t n,
                                                                          double alpha) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double u = v / alpha;
    // expm1(u) for u <= 0: e^u - 1 below -0.5 (no cancellation to speak
    // of), its series to u^17 above (truncation below 1e-20).
    const double w = u < 0 ? u : 0.0;    // NaN stays NaN
    double p = 1.0 / 355687428096000.0;  // 1/17!
    p = p * w + 1.0 / 20922789888000.0;
    p = p * w + 1.0 / 1307674368000.0;
    p = p * w + 1.0 / 87178291200.0;
    p = p * w + 1.0 / 6227020800.0;
    p = p * w + 1.0 / 479001600.0;
    p = p * w + 1.0 / 39916800.0;
    p = p * w + 1.0 / 3628800.0;
    p = p * w + 1.0 / 362880.0;
    p = p * w + 1.0 / 40320.0;
    p = p * w + 1.0 / 5040.0;
    p = p * w + 1.0 / 720.0;
    p = p * w + 1.0 / 120.0;
    p = p * w + 1.0 / 24.0;
    p = p * w + 1.0 / 6.0;
    p = p * w + 0.5;
    const double series = w + w * w * p;
    const double em1 = w < -0.5 ? ExpNonPositiveDouble(w) - 1 : series;
    // The reference's std::max(0, x) + std::min(0, alpha * expm1(x / alpha)),
    // NaN giving 0 as those do.
    const double e = alpha * em1;
    y[i] = static_cast<float>((0.0 < v ? v : 0.0) + (e < 0.0 ? e : 0.0));
  }
}

namespace {

// atan(a) for a >= 0 (NaN stays NaN, +inf gives pi/2) in double: above 1
// through pi/2 - atan(1/a), above tan(pi/12) through pi/6 + atan of
// (t sqrt3 - 1) / (t + sqrt3), then the odd series to u^31 on |u| <=
// tan(pi/12) (truncation below 1e-18 of u).
inline double AtanNonNegative(double a) {
  constexpr double kPi2 = 1.5707963267948966192, kPi6 = 0.52359877559829887308;
  constexpr double kSqrt3 = 1.7320508075688772935, kTanPi12 = 0.26794919243112270647;
  // Both sides of each choice are computed (a division only on one side
  // keeps the loop from vectorizing).
  const bool inverted = a > 1;
  const double reciprocal = 1 / a;
  const double t = inverted ? reciprocal : a;
  const bool shifted = t > kTanPi12;
  const double moved = (t * kSqrt3 - 1) / (t + kSqrt3);
  const double u = shifted ? moved : t;
  const double u2 = u * u;
  double p = -1.0 / 31;
  p = p * u2 + 1.0 / 29;
  p = p * u2 - 1.0 / 27;
  p = p * u2 + 1.0 / 25;
  p = p * u2 - 1.0 / 23;
  p = p * u2 + 1.0 / 21;
  p = p * u2 - 1.0 / 19;
  p = p * u2 + 1.0 / 17;
  p = p * u2 - 1.0 / 15;
  p = p * u2 + 1.0 / 13;
  p = p * u2 - 1.0 / 11;
  p = p * u2 + 1.0 / 9;
  p = p * u2 - 1.0 / 7;
  p = p * u2 + 1.0 / 5;
  p = p * u2 - 1.0 / 3;
  double r = u + u * u2 * p;
  r = shifted ? kPi6 + r : r;
  return inverted ? kPi2 - r : r;
}

}  // namespace

namespace {

template <ArcFunction F>
__attribute__((always_inline)) inline void ArcLoop(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    double r;
    if constexpr (F == ArcFunction::kAtan) {
      r = std::copysign(AtanNonNegative(std::fabs(v)), v);
    } else if constexpr (F == ArcFunction::kAsin) {
      // asin(v) = atan(v / sqrt(1 - v^2)); 1 - v^2 as (1 - v)(1 + v),
      // exact for a float v. |v| > 1 gives NaN, |v| = 1 pi/2.
      r = std::copysign(AtanNonNegative(std::fabs(v) / std::sqrt((1 - v) * (1 + v))), v);
    } else {
      // acos(v) = 2 atan(sqrt((1 - v) / (1 + v))): 0 at 1, pi at -1.
      r = 2 * AtanNonNegative(std::sqrt((1 - v) / (1 + v)));
    }
    y[i] = static_cast<float>(r);
  }
}

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) void ArcRow(const float* x, float* y, int64_t n,
                                                                         ArcFunction f) {
  switch (f) {
    case ArcFunction::kAtan:
      ArcLoop<ArcFunction::kAtan>(x, y, n);
      break;
    case ArcFunction::kAsin:
      ArcLoop<ArcFunction::kAsin>(x, y, n);
      break;
    case ArcFunction::kAcos:
      ArcLoop<ArcFunction::kAcos>(x, y, n);
      break;
  }
}

}  // namespace onnxkit::runner::cpu
