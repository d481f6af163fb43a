// The cpu backend's Softmax, LogSoftmax (coerced 2-D before opset 13, one
// axis from 13) and LayerNormalization against the reference kernels.
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

TEST(CpuSoftmaxTest, MatchesReferenceOnAxesAndOpsets) {
  uint32_t seed = 1;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (int64_t opset : {11, 13}) {
      for (std::vector<int64_t> shape :
           std::vector<std::vector<int64_t>>{{7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 4, 2, 2}}) {
        int64_t rank = static_cast<int64_t>(shape.size());
        for (int64_t axis = -rank; axis < rank; ++axis) {
          SCOPED_TRACE(::testing::Message()
                       << op << " opset " << opset << " rank " << rank << " axis " << axis);
          GraphBuilder g("g");
          g.Input("x").Node(op, {"x"}, {"y"}, {AttrInt("axis", axis)}).Output("y");
          ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats(shape, seed++, -5.f, 5.f)}}, opset);
        }
      }
      SCOPED_TRACE(::testing::Message() << op << " default axis, opset " << opset);
      GraphBuilder d("g");
      d.Input("x").Node(op, {"x"}, {"y"}).Output("y");
      ExpectCpuMatchesReference(d.Build(), {{"x", RandomFloats({2, 3, 4}, seed++, -5.f, 5.f)}}, opset);
    }
  }
}

TEST(CpuSoftmaxTest, FallsBackForBadAxesEmptyTensorsAndOtherTypes) {
  GraphBuilder g("g");
  g.Input("x").Node("Softmax", {"x"}, {"y"}, {AttrInt("axis", 3)}).Output("y");
  auto feeds = Feeds{{"x", RandomFloats({2, 3}, 1)}};
  EXPECT_FALSE(RunGraphOn(runner::Backend::kReference, g.Build(), feeds).ok());
  EXPECT_FALSE(RunGraphOn(runner::Backend::kCpu, g.Build(), feeds).ok());
  GraphBuilder e("g");
  e.Input("x").Node("Softmax", {"x"}, {"y"}).Output("y");
  ExpectCpuMatchesReference(e.Build(), {{"x", RandomFloats({0, 3}, 1)}});
  ExpectCpuMatchesReference(e.Build(), {{"x", RandomFloats({}, 1)}});
  GraphBuilder d("g");
  d.Input("x", pb::kDouble).Node("Softmax", {"x"}, {"y"}).Output("y", pb::kDouble);
  auto x = runner::Tensor::Allocate(pb::kDouble, {2, 3});
  ASSERT_TRUE(x.ok()) << x.status();
  for (int64_t i = 0; i < x->size(); ++i) x->mutable_data<double>()[i] = 0.25 * static_cast<double>(i) - 0.5;
  ExpectCpuMatchesReference(d.Build(), {{"x", *x}});
}

void ExpectLayerNorm(std::vector<int64_t> shape, int64_t axis, bool bias, std::vector<int64_t> scale_shape,
                     uint32_t seed, std::vector<std::string> outputs = {"y"}) {
  SCOPED_TRACE(::testing::Message() << "rank " << shape.size() << " axis " << axis << " bias " << bias
                                    << " outputs " << outputs.size());
  GraphBuilder g("g");
  g.Input("x").Input("s");
  Feeds feeds = {{"x", RandomFloats(shape, seed, -3.f, 3.f)}, {"s", RandomFloats(scale_shape, seed + 1)}};
  std::vector<std::string> inputs = {"x", "s"};
  if (bias) {
    g.Input("b");
    feeds.emplace_back("b", RandomFloats(scale_shape, seed + 2));
    inputs.push_back("b");
  }
  g.Node("LayerNormalization", inputs, outputs, {AttrInt("axis", axis), AttrFloat("epsilon", 1e-3f)});
  for (const std::string& o : outputs) {
    if (!o.empty()) g.Output(o);
  }
  ExpectCpuMatchesReference(g.Build(), feeds, 17, 1e-4, 1e-4);
}

TEST(CpuLayerNormTest, MatchesReferenceOnAxesAndParams) {
  uint32_t seed = 100;
  ExpectLayerNorm({4, 16}, -1, true, {16}, seed++);
  ExpectLayerNorm({4, 16}, -1, false, {16}, seed++);
  ExpectLayerNorm({2, 3, 8}, 1, true, {3, 8}, seed++);
  ExpectLayerNorm({2, 3, 8}, 1, true, {1, 3, 8}, seed++);
  ExpectLayerNorm({2, 3, 4, 5}, 0, true, {2, 3, 4, 5}, seed++);
  ExpectLayerNorm({2, 3, 4, 5}, -2, false, {4, 5}, seed++);
  ExpectLayerNorm({1, 128, 768}, -1, true, {768}, seed++);
  ExpectLayerNorm({7}, 0, true, {7}, seed++);
}

TEST(CpuLayerNormTest, StatisticsOutputsAndBroadcastParamsFallBack) {
  ExpectLayerNorm({3, 8}, -1, true, {8}, 1, {"y", "mean", "inv_std"});
  ExpectLayerNorm({3, 8}, -1, true, {8}, 2, {"y", "", "inv_std"});
  ExpectLayerNorm({3, 8}, -1, true, {1}, 3);  // scale broadcast over the row
  ExpectLayerNorm({0, 8}, -1, true, {8}, 4);
}

TEST(CpuSoftmaxTest, NaNAndInfinityFollowTheReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  runner::Tensor x = Floats({4, 3}, {nan, 1.f, 2.f, inf, 1.f, 0.f, -inf, -1.f, 0.f, -inf, -inf, -inf});
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    SCOPED_TRACE(op);
    GraphBuilder g("g");
    g.Input("x").Node(op, {"x"}, {"y"}).Output("y");
    auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), {{"x", x}});
    auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), {{"x", x}});
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    for (int64_t i = 0; i < x.size(); ++i) {
      float rv = (*ref)[0].tensor().data<float>()[i], cv = (*cpu)[0].tensor().data<float>()[i];
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

}  // namespace
}  // namespace onnxkit::testing
