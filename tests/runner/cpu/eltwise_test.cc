// The cpu backend's element-wise kernels against the reference kernels.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

TEST(CpuEltwiseTest, ReluMatchesReferenceOnSeveralRanks) {
  for (std::vector<int64_t> shape :
       std::vector<std::vector<int64_t>>{{7}, {3, 5}, {2, 3, 4, 5}, {1, 2, 1, 3, 2, 2}}) {
    GraphBuilder g("g");
    g.Input("x").Node("Relu", {"x"}, {"y"}).Output("y");
    ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats(shape, 7)}});
  }
}

TEST(CpuEltwiseTest, ReluFallsBackForOtherTypesAndEmptyTensors) {
  GraphBuilder g("g");
  g.Input("x", pb::kInt64).Node("Relu", {"x"}, {"y"}).Output("y", pb::kInt64);
  ExpectCpuMatchesReference(g.Build(), {{"x", Int64s({4}, {-2, -1, 0, 3})}});
  GraphBuilder e("g");
  e.Input("x").Node("Relu", {"x"}, {"y"}).Output("y");
  ExpectCpuMatchesReference(e.Build(), {{"x", RandomFloats({0, 3}, 1)}});
}

TEST(CpuEltwiseTest, ReluGivesTheRightValues) {
  GraphBuilder g("g");
  g.Input("x").Node("Relu", {"x"}, {"y"}).Output("y");
  auto out = RunGraphOn(runner::Backend::kCpu, g.Build(), {{"x", Floats({4}, {-1.5f, 0.f, 2.f, -0.f})}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorsClose(Floats({4}, {0.f, 0.f, 2.f, 0.f}), (*out)[0].tensor(), 0, 0, "y");
}

struct UnaryCase {
  const char* op;
  std::vector<pb::AttributeProto> attrs;
  float lo = -3.f, hi = 3.f;
  int64_t opset = 18;
};

TEST(CpuEltwiseTest, UnaryOpsMatchReference) {
  const std::vector<UnaryCase> cases = {
      {"Sigmoid", {}},
      {"Tanh", {}},
      {"Exp", {}},
      {"Log", {}, 0.01f, 5.f},
      {"Sqrt", {}, 0.f, 5.f},
      {"Abs", {}},
      {"Neg", {}},
      {"Reciprocal", {}, 0.5f, 3.f},
      {"Elu", {}},
      {"Elu", {AttrFloat("alpha", 0.3f)}},
      {"LeakyRelu", {}},
      {"LeakyRelu", {AttrFloat("alpha", 0.2f)}},
      {"Softplus", {}},
      {"HardSwish", {}, -5.f, 5.f},
      {"Round", {}, -4.f, 4.f},
      {"Gelu", {}, -3.f, 3.f, 20},
      {"Gelu", {AttrString("approximate", "tanh")}, -3.f, 3.f, 20},
      {"Erf", {}, -4.f, 4.f},
      {"Clip", {AttrFloat("min", -0.5f), AttrFloat("max", 0.7f)}, -3.f, 3.f, 6},
      {"Clip", {}, -3.f, 3.f, 6},
  };
  uint32_t seed = 1;
  for (const UnaryCase& c : cases) {
    for (std::vector<int64_t> shape :
         std::vector<std::vector<int64_t>>{{}, {7}, {3, 5}, {2, 3, 4, 5}, {1, 2, 1, 3, 2, 2}}) {
      SCOPED_TRACE(::testing::Message() << c.op << " rank " << shape.size() << " opset " << c.opset);
      GraphBuilder g("g");
      g.Input("x").Node(c.op, {"x"}, {"y"}, c.attrs).Output("y");
      ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats(shape, seed++, c.lo, c.hi)}}, c.opset);
    }
  }
}

// Expects NaN where the reference gives NaN and the same value elsewhere
// (within float tolerance).
void ExpectSameSpecials(const pb::GraphProto& graph, const runner::Tensor& x, int64_t opset) {
  auto ref = RunGraphOn(runner::Backend::kReference, graph, {{"x", x}}, opset);
  auto cpu = RunGraphOn(runner::Backend::kCpu, graph, {{"x", x}}, opset);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const float* r = (*ref)[0].tensor().data<float>();
  const float* c = (*cpu)[0].tensor().data<float>();
  for (int64_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "x = " << x.data<float>()[i]);
    if (std::isnan(r[i])) {
      EXPECT_TRUE(std::isnan(c[i])) << "got " << c[i];
    } else if (std::isinf(r[i])) {
      EXPECT_EQ(r[i], c[i]);
    } else {
      EXPECT_NEAR(r[i], c[i], 1e-5 + 1e-4 * std::fabs(r[i]));
    }
  }
}

TEST(CpuEltwiseTest, SpecialValuesFollowTheReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  runner::Tensor x = Floats({9}, {nan, inf, -inf, 0.f, -0.f, -1.f, 1.f, 100.f, -100.f});
  const std::vector<UnaryCase> cases = {
      {"Relu", {}},
      {"Sigmoid", {}},
      {"Tanh", {}},
      {"Exp", {}},
      {"Log", {}},
      {"Sqrt", {}},
      {"Abs", {}},
      {"Neg", {}},
      {"Reciprocal", {}},
      {"Elu", {}},
      {"LeakyRelu", {}},
      {"Softplus", {}},
      {"HardSwish", {}},
      {"Round", {}},
      {"Erf", {}},
      {"Gelu", {}, 0, 0, 20},
      {"Gelu", {AttrString("approximate", "tanh")}, 0, 0, 20},
      {"Clip", {AttrFloat("min", -0.5f), AttrFloat("max", 0.7f)}, 0, 0, 6},
  };
  for (const UnaryCase& c : cases) {
    SCOPED_TRACE(c.op);
    GraphBuilder g("g");
    g.Input("x").Node(c.op, {"x"}, {"y"}, c.attrs).Output("y");
    ExpectSameSpecials(g.Build(), x, c.opset);
  }
}

// Relu, LeakyRelu and Abs of at most 1024 elements run a loop, larger ones
// oneDNN: both sides of the threshold give the reference's values, the
// special ones included, at both ends of the tensor.
TEST(CpuEltwiseTest, SmallAndLargeTensorsAgreeWithTheReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> specials = {nan, inf, -inf, 0.f, -0.f, -1.f, 1.f, -100.f};
  for (int64_t n : {int64_t{9}, int64_t{1024}, int64_t{1025}, int64_t{5000}}) {
    runner::Tensor x = RandomFloats({n}, static_cast<uint32_t>(n), -3.f, 3.f);
    float* px = x.mutable_data<float>();
    for (size_t i = 0; i < specials.size() && static_cast<int64_t>(i) < n; ++i) {
      px[i] = specials[i];
      px[n - 1 - static_cast<int64_t>(i)] = specials[i];
    }
    for (const UnaryCase& c :
         std::vector<UnaryCase>{{"Relu", {}}, {"LeakyRelu", {AttrFloat("alpha", 0.3f)}}, {"Abs", {}}}) {
      SCOPED_TRACE(::testing::Message() << c.op << " of " << n);
      GraphBuilder g("g");
      g.Input("x").Node(c.op, {"x"}, {"y"}, c.attrs).Output("y");
      ExpectSameSpecials(g.Build(), x, c.opset);
    }
  }
}

TEST(CpuEltwiseTest, RoundHalvesToEven) {
  GraphBuilder g("g");
  g.Input("x").Node("Round", {"x"}, {"y"}).Output("y");
  ExpectCpuMatchesReference(g.Build(), {{"x", Floats({6}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f})}}, 18,
                            0, 0);
}

TEST(CpuEltwiseTest, ErfIsCloseToStdErfOnALargeRange) {
  GraphBuilder g("g");
  g.Input("x").Node("Erf", {"x"}, {"y"}).Output("y");
  runner::Tensor x = RandomFloats({100003}, 3, -6.f, 6.f);
  auto out = RunGraphOn(runner::Backend::kCpu, g.Build(), {{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status();
  double worst = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    double want = std::erf(static_cast<double>(x.data<float>()[i]));
    worst = std::max(worst, std::fabs(want - (*out)[0].tensor().data<float>()[i]));
  }
  EXPECT_LT(worst, 1e-6);
  const float inf = std::numeric_limits<float>::infinity();
  runner::Tensor special = Floats({5}, {inf, -inf, 0.f, -0.f, 1e-20f});
  ExpectCpuMatchesReference(g.Build(), {{"x", special}}, 18, 1e-7, 0);
  auto nan = RunGraphOn(runner::Backend::kCpu, g.Build(), {{"x", Floats({1}, {std::nanf("")})}});
  ASSERT_TRUE(nan.ok()) << nan.status();
  EXPECT_TRUE(std::isnan((*nan)[0].tensor().data<float>()[0]));
}

TEST(CpuEltwiseTest, ClipWithBoundInputs) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int bounds = 0; bounds < 4; ++bounds) {
    SCOPED_TRACE(::testing::Message() << "bounds " << bounds);
    GraphBuilder g("g");
    g.Input("x");
    Feeds feeds = {{"x", RandomFloats({4, 5}, 9, -2.f, 2.f)}};
    std::vector<std::string> inputs = {"x", "", ""};
    if (bounds & 1) {
      g.Input("lo");
      inputs[1] = "lo";
      feeds.emplace_back("lo", Floats({}, {-0.5f}));
    }
    if (bounds & 2) {
      g.Input("hi");
      inputs[2] = "hi";
      feeds.emplace_back("hi", Floats({1}, {0.25f}));
    }
    g.Node("Clip", inputs, {"y"}).Output("y");
    ExpectCpuMatchesReference(g.Build(), feeds, 18, 0, 0);
  }
  // min > max gives max everywhere (a fallback); infinite bounds clip nothing.
  GraphBuilder g("g");
  g.Input("x").Input("lo").Input("hi").Node("Clip", {"x", "lo", "hi"}, {"y"}).Output("y");
  ExpectCpuMatchesReference(
      g.Build(),
      {{"x", RandomFloats({9}, 2)}, {"lo", Floats({}, {0.5f})}, {"hi", Floats({}, {-0.5f})}}, 18, 0,
      0);
  ExpectCpuMatchesReference(
      g.Build(),
      {{"x", RandomFloats({9}, 2)}, {"lo", Floats({}, {-inf})}, {"hi", Floats({}, {inf})}}, 18, 0,
      0);
}

TEST(CpuEltwiseTest, UnaryOpsFallBackForOtherTypesAndEmptyTensors) {
  for (const char* op : {"Abs", "Neg"}) {
    GraphBuilder g("g");
    g.Input("x", pb::kInt64).Node(op, {"x"}, {"y"}).Output("y", pb::kInt64);
    ExpectCpuMatchesReference(g.Build(), {{"x", Int64s({4}, {-2, -1, 0, 3})}});
  }
  for (const char* op : {"Sigmoid", "Erf", "Clip"}) {
    GraphBuilder e("g");
    e.Input("x").Node(op, {"x"}, {"y"}).Output("y");
    ExpectCpuMatchesReference(e.Build(), {{"x", RandomFloats({2, 0}, 1)}});
  }
}

}  // namespace
}  // namespace onnxkit::testing
