// SigmoidRow and TanhRow (runner/cpu/vector_math.h) against libm in double
// over a dense sweep of [-120, 120], the 0.1 boundary of tanh's series,
// tiny and huge values, NaN and the infinities.
#include "runner/cpu/vector_math.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace onnxkit::runner::cpu {
namespace {

std::vector<float> Sweep() {
  std::vector<float> v;
  for (int i = -1200000; i <= 1200000; ++i) v.push_back(static_cast<float>(i) * 1e-4f);
  for (float x : {0.1f, std::nextafter(0.1f, 0.f), std::nextafter(0.1f, 1.f), 1e-30f, -1e-30f, 1e-40f, 0.f,
                  -0.f, 1e30f, -1e30f, 3e38f, -3e38f}) {
    v.push_back(x);
  }
  return v;
}

template <typename F, typename Ref>
void ExpectClose(F row, Ref ref, double atol, double rtol, const char* what) {
  std::vector<float> x = Sweep();
  std::vector<float> y = x;
  row(y.data(), static_cast<int64_t>(y.size()));
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double r = ref(static_cast<double>(x[i]));
    double err = std::fabs(y[i] - r) - (atol + rtol * std::fabs(r));
    if (err > worst) worst = err, worst_x = x[i];
  }
  EXPECT_EQ(worst, 0) << what << " beyond tolerance at x = " << worst_x;
}

TEST(VectorMathTest, SigmoidMatchesLibm) {
  ExpectClose(
      SigmoidRow, [](double x) { return 1 / (1 + std::exp(-x)); }, 1e-38, 4e-7, "sigmoid");
}

TEST(VectorMathTest, TanhMatchesLibm) {
  ExpectClose(
      TanhRow, [](double x) { return std::tanh(x); }, 1e-38, 4e-7, "tanh");
}

TEST(VectorMathTest, SwishMatchesLibm) {
  for (auto row : {SwishRow, SwishRowPortable}) {
    ExpectClose(
        row, [](double x) { return x / (1 + std::exp(-x)); }, 2e-36, 3e-7, "swish");
  }
  // Every length of a partial vector.
  for (int64_t n = 1; n <= 40; ++n) {
    std::vector<float> v(static_cast<size_t>(n) + 1, 7.0f);
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i) * 0.25f - 5.0f;
    SwishRow(v.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(i) * 0.25 - 5.0;
      EXPECT_NEAR(v[static_cast<size_t>(i)], x / (1 + std::exp(-x)), 3e-6) << "n " << n << " i " << i;
    }
    EXPECT_EQ(v.back(), 7.0f) << "wrote past n = " << n;
  }
}

// SwishRowTo and SwishMulRow are SwishRow's values (times u, rounded once),
// into another row or in place, for every length of a partial vector.
TEST(VectorMathTest, SwishIntoAnotherRowAndTimesAnotherRow) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n = 1; n <= 40; ++n) {
    std::vector<float> x(static_cast<size_t>(n)), u(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      x[static_cast<size_t>(i)] = static_cast<float>(i) * 0.7f - 12.0f;
      u[static_cast<size_t>(i)] = 1.5f - static_cast<float>(i) * 0.1f;
    }
    x[0] = nan;
    if (n > 2) x[2] = -inf;
    if (n > 3) u[3] = inf;
    std::vector<float> want = x;
    SwishRow(want.data(), n);
    std::vector<float> to(static_cast<size_t>(n) + 1, 7.0f);
    SwishRowTo(x.data(), to.data(), n);
    std::vector<float> times(static_cast<size_t>(n) + 1, 7.0f), in_place = x;
    SwishMulRow(x.data(), u.data(), times.data(), n);
    SwishMulRow(in_place.data(), u.data(), in_place.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      const float product = want[k] * u[k];
      EXPECT_EQ(std::bit_cast<uint32_t>(to[k]), std::bit_cast<uint32_t>(want[k])) << "n " << n << " i " << i;
      if (std::isnan(product)) {
        EXPECT_TRUE(std::isnan(times[k]) && std::isnan(in_place[k])) << "n " << n << " i " << i;
      } else {
        EXPECT_EQ(times[k], product) << "n " << n << " i " << i;
        EXPECT_EQ(in_place[k], product) << "n " << n << " i " << i;
      }
    }
    EXPECT_EQ(to.back(), 7.0f) << "wrote past n = " << n;
    EXPECT_EQ(times.back(), 7.0f) << "wrote past n = " << n;
  }
}

TEST(VectorMathTest, NonFiniteValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  float s[] = {nan, inf, -inf, -nan};
  SigmoidRow(s, 4);
  EXPECT_TRUE(std::isnan(s[0]));
  EXPECT_EQ(s[1], 1.f);
  EXPECT_EQ(s[2], 0.f);
  EXPECT_TRUE(std::isnan(s[3]));
  // swish(-inf) = -inf * sigmoid(-inf) = -inf * 0: NaN, as the nodes.
  for (auto row : {SwishRow, SwishRowPortable}) {
    float w[] = {nan, inf, -inf, -nan, -0.f};
    row(w, 5);
    EXPECT_TRUE(std::isnan(w[0]));
    EXPECT_EQ(w[1], inf);
    EXPECT_TRUE(std::isnan(w[2]));
    EXPECT_TRUE(std::isnan(w[3]));
    EXPECT_EQ(w[4], 0.f);
  }
  float t[] = {nan, inf, -inf, -nan};
  TanhRow(t, 4);
  EXPECT_TRUE(std::isnan(t[0]));
  EXPECT_EQ(t[1], 1.f);
  EXPECT_EQ(t[2], -1.f);
  EXPECT_TRUE(std::isnan(t[3]));
}

}  // namespace
}  // namespace onnxkit::runner::cpu

namespace onnxkit::runner::cpu {
namespace {

// Every 97th float bit pattern (positive and negative, normal, denormal,
// infinite and NaN) and the values around 1.
std::vector<float> ManyFloats() {
  std::vector<float> v;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 97) {
    v.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  }
  for (int i = -5000; i <= 5000; ++i) v.push_back(1.f + static_cast<float>(i) * 1e-7f);
  return v;
}

template <typename Row, typename Ref>
void ExpectReferenceRounding(Row row, Ref ref, const char* what) {
  std::vector<float> x = ManyFloats();
  std::vector<float> y(x.size());
  row(x.data(), y.data(), static_cast<int64_t>(x.size()));
  int64_t differ = 0;
  float first = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float expected = static_cast<float>(ref(static_cast<double>(x[i])));
    const bool same = std::isnan(expected) ? std::isnan(y[i]) : expected == y[i];
    if (!same && differ++ == 0) first = x[i];
  }
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << x.size() << " differ from the double function "
                       << "rounded to float, first at x = " << first;
}

TEST(VectorMathTest, LogRoundsAsTheDoubleLog) {
  ExpectReferenceRounding(
      LogRow, [](double x) { return std::log(x); }, "log");
}

TEST(VectorMathTest, SoftplusRoundsAsTheDoubleSoftplus) {
  ExpectReferenceRounding(
      SoftplusRow, [](double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); },
      "softplus");
}

TEST(VectorMathTest, SinAndCosRoundAsTheDoubleFunctions) {
  ExpectReferenceRounding([](const float* x, float* y, int64_t n) { SinCosRow(x, y, n, false); },
                          [](double x) { return std::sin(x); }, "sin");
  ExpectReferenceRounding([](const float* x, float* y, int64_t n) { SinCosRow(x, y, n, true); },
                          [](double x) { return std::cos(x); }, "cos");
  // In place, with values past the reduced range mixed in.
  std::vector<float> v = {0.5f, 1e7f, -3.f, std::numeric_limits<float>::infinity(), 7e5f, -0.f};
  std::vector<float> want;
  for (float f : v) want.push_back(static_cast<float>(std::sin(static_cast<double>(f))));
  SinCosRow(v.data(), v.data(), static_cast<int64_t>(v.size()), false);
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(v[i])) << i;
    } else {
      EXPECT_EQ(v[i], want[i]) << i;
    }
  }
  EXPECT_TRUE(std::signbit(v[5]));
}

TEST(VectorMathTest, AtanAsinAcosRoundAsTheDoubleFunctions) {
  ExpectReferenceRounding([](const float* x, float* y, int64_t n) { ArcRow(x, y, n, ArcFunction::kAtan); },
                          [](double x) { return std::atan(x); }, "atan");
  ExpectReferenceRounding([](const float* x, float* y, int64_t n) { ArcRow(x, y, n, ArcFunction::kAsin); },
                          [](double x) { return std::asin(x); }, "asin");
  ExpectReferenceRounding([](const float* x, float* y, int64_t n) { ArcRow(x, y, n, ArcFunction::kAcos); },
                          [](double x) { return std::acos(x); }, "acos");
}

TEST(VectorMathTest, CeluRoundsAsTheDoubleCelu) {
  // expm1 by its series near 0 and through the exponential below -0.5:
  // the reference's float but for rare last-bit roundings.
  for (double alpha : {1.0, 0.25, 4.0}) {
    std::vector<float> x = ManyFloats();
    std::vector<float> y(x.size());
    CeluRow(x.data(), y.data(), static_cast<int64_t>(x.size()), alpha);
    int64_t off = 0, last_bit = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const float want = static_cast<float>(std::max(0.0, v) + std::min(0.0, alpha * std::expm1(v / alpha)));
      if (want == y[i] || (std::isnan(want) && std::isnan(y[i]))) continue;
      if (std::fabs(static_cast<double>(y[i]) - want) <= std::fabs(static_cast<double>(want)) * 1.2e-7) {
        ++last_bit;
      } else if (off++ < 3) {
        ADD_FAILURE() << "celu(" << x[i] << ", " << alpha << ") = " << y[i] << ", reference " << want;
      }
    }
    EXPECT_EQ(off, 0);
    EXPECT_LT(last_bit, static_cast<int64_t>(x.size()) / 100000) << "last-bit differences, alpha " << alpha;
  }
}

TEST(VectorMathTest, SeluIsWithinItsExponentialsErrorOfTheReference) {
  // gamma * (alpha * e^x - alpha) cancels near 0, where the vectorized
  // exponential's 1e-14 (libm's is about 1e-16) shows: within 1e-13
  // absolute there, else the same float but for a last-bit rounding.
  const double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;
  std::vector<float> x = ManyFloats();
  std::vector<float> y(x.size());
  SeluRow(x.data(), y.data(), static_cast<int64_t>(x.size()), alpha, gamma);
  int64_t off = 0, last_bit = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const float want = static_cast<float>(v > 0 ? gamma * v : gamma * (alpha * std::exp(v) - alpha));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << "x = " << x[i];
      continue;
    }
    if (want == y[i]) continue;
    const double err = std::fabs(static_cast<double>(y[i]) - want);
    if (err <= 1e-13) continue;
    if (err <= std::fabs(static_cast<double>(want)) * 1.2e-7) {
      ++last_bit;
    } else if (off++ < 3) {
      ADD_FAILURE() << "selu(" << x[i] << ") = " << y[i] << ", reference " << want;
    }
  }
  EXPECT_EQ(off, 0);
  EXPECT_LT(last_bit, static_cast<int64_t>(x.size()) / 10000) << "last-bit differences";
}

}  // namespace
}  // namespace onnxkit::runner::cpu
