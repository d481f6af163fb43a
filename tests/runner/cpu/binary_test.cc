// The cpu backend's broadcasting binary ops (Add, Sub, Mul, Div, Max, Min,
// Pow with a constant exponent; squares and cubes bit for bit) against the
// reference kernels.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>& BroadcastCases() {
  static const auto* cases = new std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
      {{7}, {7}},
      {{3, 5}, {5}},
      {{5}, {3, 5}},
      {{3, 1}, {1, 4}},
      {{2, 3, 4, 5}, {3, 1, 5}},
      {{1, 3, 1, 5}, {2, 1, 4, 1}},
      {{}, {2, 3}},
      {{2, 3}, {}},
      {{}, {}},
      {{1, 2, 1, 3, 2, 2}, {2, 1, 3, 1, 2}},
      {{1, 12, 128, 128}, {1, 1, 1, 128}},
  };
  return *cases;
}

TEST(CpuBinaryTest, ArithmeticMatchesReferenceOnBroadcasts) {
  uint32_t seed = 1;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    for (const auto& [a, b] : BroadcastCases()) {
      SCOPED_TRACE(::testing::Message() << op << " case " << seed);
      GraphBuilder g("g");
      g.Input("a").Input("b").Node(op, {"a", "b"}, {"y"}).Output("y");
      // Divisors kept away from 0 so that the quotients stay comparable.
      runner::Tensor tb =
          std::string(op) == "Div" ? RandomFloats(b, seed + 1, 0.5f, 2.f) : RandomFloats(b, seed + 1);
      ExpectCpuMatchesReference(g.Build(), {{"a", RandomFloats(a, seed)}, {"b", tb}});
      ++seed;
    }
  }
}

TEST(CpuBinaryTest, SpecialValuesFollowTheReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  runner::Tensor a = Floats({6}, {1.f, -1.f, 0.f, nan, 2.f, nan});
  runner::Tensor b = Floats({6}, {0.f, 0.f, 0.f, 1.f, nan, inf});
  for (const char* op : {"Div", "Max", "Min", "Add", "Mul"}) {
    SCOPED_TRACE(op);
    GraphBuilder g("g");
    g.Input("a").Input("b").Node(op, {"a", "b"}, {"y"}).Output("y");
    auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), {{"a", a}, {"b", b}});
    auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), {{"a", a}, {"b", b}});
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    const float* r = (*ref)[0].tensor().data<float>();
    const float* c = (*cpu)[0].tensor().data<float>();
    for (int i = 0; i < 6; ++i) {
      if (std::isnan(r[i])) {
        EXPECT_TRUE(std::isnan(c[i])) << "element " << i << " is " << c[i];
      } else {
        EXPECT_EQ(r[i], c[i]) << "element " << i;
      }
    }
  }
}

TEST(CpuBinaryTest, FallsBackForOtherTypesEmptyTensorsVariadicsAndMismatches) {
  GraphBuilder i("g");
  i.Input("a", pb::kInt64).Input("b", pb::kInt64).Node("Div", {"a", "b"}, {"y"}).Output("y", pb::kInt64);
  ExpectCpuMatchesReference(i.Build(), {{"a", Int64s({3}, {7, -7, 9})}, {"b", Int64s({1}, {2})}});
  GraphBuilder e("g");
  e.Input("a").Input("b").Node("Add", {"a", "b"}, {"y"}).Output("y");
  ExpectCpuMatchesReference(e.Build(), {{"a", RandomFloats({0, 3}, 1)}, {"b", RandomFloats({3}, 2)}});
  auto feeds = Feeds{{"a", RandomFloats({2, 3}, 1)}, {"b", RandomFloats({4}, 2)}};
  EXPECT_FALSE(RunGraphOn(runner::Backend::kReference, e.Build(), feeds).ok());
  EXPECT_FALSE(RunGraphOn(runner::Backend::kCpu, e.Build(), feeds).ok());
  GraphBuilder v("g");
  v.Input("a").Input("b").Input("c").Node("Max", {"a", "b", "c"}, {"y"}).Output("y");
  ExpectCpuMatchesReference(
      v.Build(),
      {{"a", RandomFloats({2, 3}, 1)}, {"b", RandomFloats({3}, 2)}, {"c", RandomFloats({2, 1}, 3)}});
}

TEST(CpuBinaryTest, PowWithConstantExponentMatchesReference) {
  uint32_t seed = 50;
  for (float e : {2.f, 3.f, 0.5f, -1.f, 0.f, 1.f, 2.5f}) {
    for (std::vector<int64_t> e_shape : std::vector<std::vector<int64_t>>{{}, {1}}) {
      SCOPED_TRACE(::testing::Message() << "exponent " << e << " rank " << e_shape.size());
      GraphBuilder g("g");
      pb::TensorProto exponent;
      exponent.name = "e";
      exponent.data_type = pb::kFloat;
      exponent.dims = e_shape;
      exponent.float_data = {e};
      g.Input("x").Initializer(exponent).Node("Pow", {"x", "e"}, {"y"}).Output("y");
      // Non-integer exponents need non-negative bases (NaN otherwise).
      bool integral = e == std::floor(e);
      ExpectCpuMatchesReference(g.Build(),
                                {{"x", RandomFloats({3, 4, 5}, seed++, integral ? -2.f : 0.1f, 2.f)}});
    }
  }
  // Special bases.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float e : {2.f, 0.f, -1.f, 0.5f}) {
    SCOPED_TRACE(::testing::Message() << "special bases, exponent " << e);
    GraphBuilder g("g");
    pb::TensorProto exponent;
    exponent.name = "e";
    exponent.data_type = pb::kFloat;
    exponent.float_data = {e};
    g.Input("x").Initializer(exponent).Node("Pow", {"x", "e"}, {"y"}).Output("y");
    runner::Tensor x = Floats({5}, {nan, inf, -inf, 0.f, -0.f});
    auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), {{"x", x}});
    auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), {{"x", x}});
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    for (int64_t i = 0; i < x.size(); ++i) {
      float rv = (*ref)[0].tensor().data<float>()[i], cv = (*cpu)[0].tensor().data<float>()[i];
      if (std::isnan(rv)) {
        EXPECT_TRUE(std::isnan(cv)) << "element " << i << " is " << cv;
      } else {
        EXPECT_EQ(rv, cv) << "element " << i;
      }
    }
  }
  // A fed exponent falls back.
  GraphBuilder f("g");
  f.Input("x").Input("e").Node("Pow", {"x", "e"}, {"y"}).Output("y");
  ExpectCpuMatchesReference(f.Build(),
                            {{"x", RandomFloats({3, 4}, 1, 0.1f, 2.f)}, {"e", RandomFloats({4}, 2)}});
}

TEST(CpuBinaryTest, SquaresAndCubesAreTheReferencesBitForBit) {
  // Every length of a partial block, then many chunks on 2 threads; values
  // whose powers overflow, subnormals, signed zeros, NaN and infinities.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> special = {nan, inf, -inf, 0.f, -0.f, 3e13f, -3e13f, 2e19f, 1e-40f, -1e-30f, 7.f};
  for (float e : {2.f, 3.f}) {
    GraphBuilder g("g");
    g.Input("x")
        .Initializer(InitializerFrom("e", Floats({}, {e})))
        .Node("Pow", {"x", "e"}, {"y"})
        .Output("y");
    const pb::GraphProto graph = g.Build();
    for (int64_t n : {1, 7, 8, 9, 23, 100003}) {
      SCOPED_TRACE(::testing::Message() << "exponent " << e << ", " << n << " values");
      runner::Tensor x = RandomFloats({n}, static_cast<uint32_t>(n), -50.f, 50.f);
      for (size_t i = 0; i < special.size() && i < static_cast<size_t>(n); ++i) {
        x.mutable_data<float>()[n - 1 - static_cast<int64_t>(i)] = special[i];
      }
      auto ref = RunGraphOn(runner::Backend::kReference, graph, {{"x", x}});
      auto cpu = RunGraphOn(runner::Backend::kCpu, graph, {{"x", x}}, 18, 2);
      ASSERT_TRUE(ref.ok()) << ref.status();
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      for (int64_t i = 0; i < n; ++i) {
        const float rv = (*ref)[0].tensor().data<float>()[i], cv = (*cpu)[0].tensor().data<float>()[i];
        if (std::isnan(rv)) {
          EXPECT_TRUE(std::isnan(cv)) << "element " << i << " is " << cv;
        } else {
          EXPECT_EQ(std::bit_cast<uint32_t>(rv), std::bit_cast<uint32_t>(cv))
              << "element " << i << ": " << x.data<float>()[i] << " gives " << rv << " and " << cv;
        }
      }
    }
  }
}

}  // namespace
}  // namespace onnxkit::testing
