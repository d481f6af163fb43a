// The cpu backend's BatchNormalization and LRN kernels against the
// reference kernels, and the cases that fall back (training mode, legacy
// opsets, even LRN sizes, other types).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

Feeds BatchNormFeeds(const std::vector<int64_t>& shape, uint32_t seed) {
  int64_t c = shape[1];
  return {{"x", RandomFloats(shape, seed, -3.f, 3.f)},
          {"scale", RandomFloats({c}, seed + 1)},
          {"bias", RandomFloats({c}, seed + 2)},
          {"mean", RandomFloats({c}, seed + 3)},
          {"var", RandomFloats({c}, seed + 4, 0.1f, 2.f)}};
}

pb::GraphProto BatchNormGraph(std::vector<pb::AttributeProto> attrs, int outputs = 1) {
  GraphBuilder g("g");
  g.Input("x").Input("scale").Input("bias").Input("mean").Input("var");
  std::vector<std::string> names = {"y", "running_mean", "running_var", "saved_mean", "saved_var"};
  names.resize(static_cast<size_t>(outputs));
  g.Node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, names, std::move(attrs));
  for (const std::string& n : names) g.Output(n);
  return g.Build();
}

TEST(CpuNormTest, BatchNormalizationInferenceMatchesReference) {
  uint32_t seed = 1;
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{
           {2, 3}, {1, 4, 9}, {2, 8, 5, 7}, {1, 64, 28, 28}, {2, 3, 2, 3, 4}, {1, 2, 1, 2, 1, 3}}) {
    for (int64_t opset : {9, 15, 18}) {
      SCOPED_TRACE(std::to_string(shape.size()) + "-d opset " + std::to_string(opset));
      ExpectCpuMatchesReference(BatchNormGraph({AttrFloat("epsilon", 1e-3f)}), BatchNormFeeds(shape, seed++), opset);
    }
  }
}

TEST(CpuNormTest, BatchNormalizationFallbacksMatchReference) {
  // Training mode (opset 15), statistics outputs (opset 9), spatial = 0
  // (opset 7), and float64.
  ExpectCpuMatchesReference(BatchNormGraph({AttrInt("training_mode", 1)}, 3), BatchNormFeeds({2, 3, 4, 4}, 1), 15,
                            1e-4, 1e-4);
  ExpectCpuMatchesReference(BatchNormGraph({}, 5), BatchNormFeeds({2, 3, 4}, 2), 9, 1e-4, 1e-4);
  GraphBuilder s("g");
  s.Input("x").Input("scale").Input("bias").Input("mean").Input("var");
  s.Node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}, {AttrInt("spatial", 0)}).Output("y");
  Feeds per_element = {{"x", RandomFloats({2, 3, 2}, 3)},     {"scale", RandomFloats({3, 2}, 4)},
                       {"bias", RandomFloats({3, 2}, 5)},     {"mean", RandomFloats({3, 2}, 6)},
                       {"var", RandomFloats({3, 2}, 7, 0.5f, 1.f)}};
  ExpectCpuMatchesReference(s.Build(), per_element, 7);
  // Parameters of the wrong size: the reference's error.
  Feeds bad = BatchNormFeeds({1, 3, 2, 2}, 8);
  bad[1].second = RandomFloats({4}, 9);
  auto ref = RunGraphOn(runner::Backend::kReference, BatchNormGraph({}), bad);
  auto cpu = RunGraphOn(runner::Backend::kCpu, BatchNormGraph({}), bad);
  ASSERT_FALSE(ref.ok());
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(ref.status().code(), cpu.status().code());
}

TEST(CpuNormTest, LrnMatchesReference) {
  for (int64_t size : {1, 3, 5, 4}) {
    for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{2, 7, 5, 5}, {1, 16, 3}, {1, 6, 2, 3, 4}}) {
      SCOPED_TRACE("size " + std::to_string(size));
      GraphBuilder g("g");
      g.Input("x")
          .Node("LRN", {"x"}, {"y"},
                {AttrInt("size", size), AttrFloat("alpha", 0.01f), AttrFloat("beta", 0.6f), AttrFloat("bias", 1.5f)})
          .Output("y");
      ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats(shape, static_cast<uint32_t>(size), -2.f, 2.f)}}, 18,
                                1e-5, 1e-4);
    }
  }
}

}  // namespace
}  // namespace onnxkit::testing
