// SigmoidRow and TanhRow (runner/cpu/vector_math.h) against libm in double
// over a dense sweep of [-120, 120], the 0.1 boundary of tanh's series,
// tiny and huge values, NaN and the infinities.
#include "runner/cpu/vector_math.h"

#include <cmath>
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

TEST(VectorMathTest, NonFiniteValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  float s[] = {nan, inf, -inf, -nan};
  SigmoidRow(s, 4);
  EXPECT_TRUE(std::isnan(s[0]));
  EXPECT_EQ(s[1], 1.f);
  EXPECT_EQ(s[2], 0.f);
  EXPECT_TRUE(std::isnan(s[3]));
  float t[] = {nan, inf, -inf, -nan};
  TanhRow(t, 4);
  EXPECT_TRUE(std::isnan(t[0]));
  EXPECT_EQ(t[1], 1.f);
  EXPECT_EQ(t[2], -1.f);
  EXPECT_TRUE(std::isnan(t[3]));
}

}  // namespace
}  // namespace onnxkit::runner::cpu
