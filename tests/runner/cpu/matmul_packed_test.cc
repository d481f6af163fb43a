// The packed matrix product (runner/cpu/matmul_packed.h) against a plain
// triple loop: row and column tails of every size around the 8 x 48 tile,
// a bias, strided rows, two threads, and NaN / infinities in either operand
// landing where the plain loop puts them. Then a session MatMul with a
// constant B (which takes the packed path) against the reference backend.
#include "runner/cpu/matmul_packed.h"

#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

using runner::cpu::PackedGemm;
using runner::cpu::PackedMatrix;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// C = A B (+ bias) in double, rounded: the expectation.
std::vector<float> Plain(const std::vector<float>& a, int64_t m, int64_t lda, const std::vector<float>& b, int64_t k,
                         int64_t n, const float* bias) {
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = bias != nullptr ? bias[j] : 0.0;
      for (int64_t q = 0; q < k; ++q) s += double{a[i * lda + q]} * b[q * n + j];
      c[i * n + j] = static_cast<float>(s);
    }
  }
  return c;
}

void ExpectSame(const std::vector<float>& want, const std::vector<float>& got, int64_t m, int64_t n, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float e = want[i * n + j], a = got[i * ldc + j];
      SCOPED_TRACE(::testing::Message() << "row " << i << " column " << j);
      if (std::isnan(e)) {
        EXPECT_TRUE(std::isnan(a)) << a;
      } else if (std::isinf(e)) {
        EXPECT_EQ(e, a);
      } else {
        EXPECT_NEAR(e, a, 1e-4 * (1 + std::fabs(e)));
      }
    }
  }
}

void Check(int64_t m, int64_t k, int64_t n, bool bias, int64_t pad, uint32_t seed, bool plant = false) {
  SCOPED_TRACE(::testing::Message() << m << "x" << k << "x" << n << " bias " << bias << " pad " << pad);
  const int64_t lda = k + pad, ldc = n + pad;
  std::vector<float> a = Random(static_cast<size_t>(m * lda), seed);
  std::vector<float> b = Random(static_cast<size_t>(k * n), seed + 1);
  std::vector<float> bv = Random(static_cast<size_t>(n), seed + 2);
  if (plant) {
    a[0] = kNaN;                                   // row 0 all NaN
    if (m > 2) a[2 * lda + k - 1] = kInf;          // row 2 infinite unless cancelled
    b[(k - 1) * n + n - 1] = -kInf;                // last column
    if (n > 3) b[3] = kNaN;                        // column 3 all NaN
    bv[n / 2] = kInf;
  }
  absl::StatusOr<PackedMatrix> packed = PackedMatrix::Pack(b.data(), k, n);
  ASSERT_TRUE(packed.ok()) << packed.status();
  std::vector<float> c(static_cast<size_t>(m * ldc), 7.f);
  PackedGemm(a.data(), m, lda, *packed, bias ? bv.data() : nullptr, c.data(), ldc);
  ExpectSame(Plain(a, m, lda, b, k, n, bias ? bv.data() : nullptr), c, m, n, ldc);
  for (int64_t i = 0; i < m; ++i) {  // the padding between rows is left alone
    for (int64_t j = n; j < ldc; ++j) EXPECT_EQ(c[i * ldc + j], 7.f);
  }
}

class PackedGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!runner::cpu::PackedGemmAvailable()) GTEST_SKIP() << "no AVX-512 on this CPU";
  }
};

TEST_F(PackedGemmTest, MatchesPlainLoopOnTails) {
  uint32_t seed = 1;
  for (int64_t m : {1, 7, 8, 9, 23}) {
    for (int64_t n : {1, 15, 16, 47, 48, 49, 100}) {
      Check(m, 13, n, (m + n) % 2 == 0, 0, seed++);
    }
  }
  Check(130, 96, 97, true, 3, seed++);
  Check(3, 1, 5, false, 1, seed++);
}

TEST_F(PackedGemmTest, RowBlocksAndTwoThreads) {
  Check(520, 1024, 100, true, 0, 11);  // rows beyond one L2 block
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  Check(37, 40, 200, true, 2, 12);
  Check(9, 8, 50, false, 0, 13);  // two panels, one each
  omp_set_num_threads(saved);
}

TEST_F(PackedGemmTest, NonFiniteValuesPropagate) {
  Check(11, 9, 50, true, 0, 21, true);
  Check(4, 30, 5, false, 1, 22, true);
}

TEST_F(PackedGemmTest, RefusesEmptyMatrices) {
  float one = 1.f;
  EXPECT_FALSE(PackedMatrix::Pack(&one, 0, 1).ok());
  EXPECT_FALSE(PackedMatrix::Pack(&one, 1, -1).ok());
}

TEST(PackedMatMulSessionTest, ConstantWeightsMatchReference) {
  for (bool plant : {false, true}) {
    GraphBuilder g("g");
    g.Input("a");
    runner::Tensor a = RandomFloats({2, 9, 40}, 31);
    if (plant) {
      a.mutable_data<float>()[5] = kNaN;
      a.mutable_data<float>()[100] = kInf;
    }
    g.Initializer(InitializerFrom("b", RandomFloats({40, 90}, 32)));
    g.Node("MatMul", {"a", "b"}, {"y"}).Output("y");
    ExpectCpuMatchesReference(g.Build(), {{"a", a}}, 18, 1e-4, 1e-4);
  }
}

}  // namespace
}  // namespace onnxkit::testing
