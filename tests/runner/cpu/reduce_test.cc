// The cpu backend's Reduce* ops against the reference kernels: axes as an
// attribute (before opset 18; ReduceSum 13) or an input, keepdims,
// noop_with_empty_axes, and the fallbacks (empty inputs, bad axes, types).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runner/cpu/math.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

const char* const kOps[] = {"ReduceMean", "ReduceSum", "ReduceMax",       "ReduceMin",      "ReduceProd",
                            "ReduceL1",   "ReduceL2",  "ReduceSumSquare", "ReduceLogSumExp"};

const std::vector<std::vector<int64_t>>& AxesCases() {
  static const auto* cases =
      new std::vector<std::vector<int64_t>>{{}, {0}, {-1}, {1, 2}, {0, 3}, {0, 1, 2, 3}, {2, -4}};
  return *cases;
}

TEST(CpuReduceTest, AxesAttributeMatchesReference) {
  uint32_t seed = 1;
  for (const char* op : kOps) {
    for (const std::vector<int64_t>& axes : AxesCases()) {
      for (int64_t keepdims : {0, 1}) {
        SCOPED_TRACE(::testing::Message() << op << " axes " << axes.size() << " keepdims " << keepdims);
        std::vector<pb::AttributeProto> attrs = {AttrInt("keepdims", keepdims)};
        if (!axes.empty()) attrs.push_back(AttrInts("axes", axes));
        GraphBuilder g("g");
        g.Input("x").Node(op, {"x"}, {"y"}, attrs).Output("y");
        ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats({2, 3, 4, 5}, seed++, 0.5f, 1.5f)}}, 11,
                                  1e-4, 1e-4);
      }
    }
  }
}

TEST(CpuReduceTest, AxesInputMatchesReference) {
  uint32_t seed = 200;
  for (const char* op : kOps) {
    for (const std::vector<int64_t>& axes : AxesCases()) {
      for (int64_t noop : {0, 1}) {
        SCOPED_TRACE(::testing::Message() << op << " axes " << axes.size() << " noop " << noop);
        GraphBuilder g("g");
        g.Input("x").Input("axes", pb::kInt64);
        g.Node(op, {"x", "axes"}, {"y"}, {AttrInt("noop_with_empty_axes", noop)}).Output("y");
        ExpectCpuMatchesReference(g.Build(),
                                  {{"x", RandomFloats({2, 3, 4, 5}, seed++, 0.5f, 1.5f)},
                                   {"axes", Int64s({static_cast<int64_t>(axes.size())}, axes)}},
                                  18, 1e-4, 1e-4);
      }
      // Axes omitted.
      GraphBuilder o("g");
      o.Input("x").Node(op, {"x"}, {"y"}, {AttrInt("keepdims", 0)}).Output("y");
      ExpectCpuMatchesReference(o.Build(), {{"x", RandomFloats({3, 4}, seed++, 0.5f, 1.5f)}}, 18, 1e-4, 1e-4);
    }
  }
}

// Axes with kept dims after them (the channels of NCHW, the batch) fold
// strided rows: every op, rows of more than one chunk, and enough values
// for the threads.
TEST(CpuReduceTest, AxesBeforeKeptDimsFoldStridedRows) {
  uint32_t seed = 400;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {{{1, 16, 9, 9}, {1}},
                                                                                    {{3, 4, 40, 40}, {1}},
                                                                                    {{2, 5, 6, 7}, {1, 2}},
                                                                                    {{8, 4096}, {0}},
                                                                                    {{2, 16, 64, 64}, {-3}}};
  for (const char* op : kOps) {
    for (const auto& [shape, axes] : cases) {
      SCOPED_TRACE(::testing::Message() << op << " rank " << shape.size() << " axis " << axes[0]);
      const int64_t before = runner::cpu::StridedReductions();
      GraphBuilder g("g");
      g.Input("x").Node(op, {"x"}, {"y"}, {AttrInts("axes", axes), AttrInt("keepdims", 0)}).Output("y");
      ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats(shape, seed++, 0.9f, 1.1f)}}, 11, 1e-4, 1e-4);
      EXPECT_EQ(runner::cpu::StridedReductions(), before + 1);
    }
  }
}

TEST(CpuReduceTest, LogSumExpOfLargeValuesIsTheReferencesToTheLastBit) {
  // Values far past e^88 (a float's range) over the channels, the last
  // axis and everything: the largest value is taken out first, the sum is
  // in double, so the cpu result rounds like the reference's.
  uint32_t seed = 900;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 64, 30, 30}, {1}}, {{3, 7, 1000}, {-1}}, {{5, 300}, {}}, {{4, 3, 50}, {0, 1}}};
  for (const auto& [shape, axes] : cases) {
    SCOPED_TRACE(::testing::Message() << "rank " << shape.size() << " axes " << axes.size());
    GraphBuilder g("g");
    std::vector<pb::AttributeProto> attrs;
    if (!axes.empty()) attrs.push_back(AttrInts("axes", axes));
    g.Input("x").Node("ReduceLogSumExp", {"x"}, {"y"}, attrs).Output("y");
    Feeds feeds{{"x", RandomFloats(shape, seed++, -300.f, 300.f)}};
    auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), feeds, 13);
    auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), feeds, 13);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    const runner::Tensor& r = (*ref)[0].tensor();
    const runner::Tensor& c = (*cpu)[0].tensor();
    ASSERT_EQ(r.shape(), c.shape());
    int differ = 0;
    for (int64_t i = 0; i < r.size(); ++i) {
      const float rv = r.data<float>()[i], cv = c.data<float>()[i];
      ASSERT_TRUE(std::isfinite(cv)) << "element " << i;
      if (rv != cv && ++differ <= 3) ADD_FAILURE() << "element " << i << ": " << cv << " vs " << rv;
    }
  }
}

TEST(CpuReduceTest, FallsBackForEmptyInputsBadAxesAndOtherTypes) {
  GraphBuilder g("g");
  g.Input("x").Input("axes", pb::kInt64).Node("ReduceSum", {"x", "axes"}, {"y"}).Output("y");
  pb::GraphProto graph = g.Build();
  ExpectCpuMatchesReference(graph, {{"x", RandomFloats({0, 3}, 1)}, {"axes", Int64s({1}, {0})}});
  ExpectCpuMatchesReference(graph, {{"x", RandomFloats({2, 1}, 1)}, {"axes", Int64s({1}, {1})}});
  for (const std::vector<int64_t>& bad : std::vector<std::vector<int64_t>>{{2}, {0, 0}, {-3}}) {
    auto feeds =
        Feeds{{"x", RandomFloats({2, 3}, 1)}, {"axes", Int64s({static_cast<int64_t>(bad.size())}, bad)}};
    EXPECT_FALSE(RunGraphOn(runner::Backend::kReference, graph, feeds).ok());
    EXPECT_FALSE(RunGraphOn(runner::Backend::kCpu, graph, feeds).ok());
  }
  GraphBuilder i("g");
  i.Input("x", pb::kInt64).Node("ReduceMax", {"x"}, {"y"}, {AttrInt("keepdims", 0)}).Output("y", pb::kInt64);
  ExpectCpuMatchesReference(i.Build(), {{"x", Int64s({2, 2}, {1, 5, -3, 2})}});
}

TEST(CpuReduceTest, NaNAndInfinityFollowTheReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  runner::Tensor x = Floats({4, 3}, {nan, 1.f, 2.f, inf, 1.f, -inf, 3.f, -1.f, 0.f, -inf, -2.f, -3.f});
  for (const char* op : kOps) {
    for (int64_t axis : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << op << " axis " << axis);
      GraphBuilder g("g");
      g.Input("x").Node(op, {"x"}, {"y"}, {AttrInts("axes", {axis})}).Output("y");
      auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), {{"x", x}}, 11);
      auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), {{"x", x}}, 11);
      ASSERT_TRUE(ref.ok()) << ref.status();
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      const runner::Tensor& r = (*ref)[0].tensor();
      const runner::Tensor& c = (*cpu)[0].tensor();
      ASSERT_EQ(r.shape(), c.shape());
      for (int64_t i = 0; i < r.size(); ++i) {
        float rv = r.data<float>()[i], cv = c.data<float>()[i];
        if (std::isnan(rv)) {
          EXPECT_TRUE(std::isnan(cv)) << "element " << i << " is " << cv;
        } else if (std::isinf(rv)) {
          EXPECT_EQ(rv, cv) << "element " << i;
        } else {
          EXPECT_NEAR(rv, cv, 1e-5) << "element " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace onnxkit::testing
