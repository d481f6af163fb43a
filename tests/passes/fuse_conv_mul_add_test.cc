// Tests of the fuse-conv-mul-add pass (passes/fuse_conv_mul_add.cc).
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/passes/fuse_test_util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

using fuse::ExpectFixedPoint;
using fuse::ExpectNoChange;

const Feeds kFeeds = {{"x", RandomFloats({1, 3, 8, 8}, 1)}};

// x[1,3,8,8] -> Conv(w[4,3,3,3] [, b]) -> Mul(mul_c) -> Add(add_c) -> z
GraphBuilder ConvMulAdd(std::vector<int64_t> mul_dims, std::vector<int64_t> add_dims, bool bias = true) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{1, 3, 8, 8}}).Initializer(InitializerFrom("w", RandomFloats({4, 3, 3, 3}, 2)));
  std::vector<std::string> conv_inputs = {"x", "w"};
  if (bias) {
    g.Initializer(InitializerFrom("b", RandomFloats({4}, 3)));
    conv_inputs.push_back("b");
  }
  g.Node("Conv", conv_inputs, {"y"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv")
      .Initializer(InitializerFrom("mc", RandomFloats(mul_dims, 4, 0.5f, 2.f)))
      .Initializer(InitializerFrom("ac", RandomFloats(add_dims, 5)))
      .Node("Mul", {"y", "mc"}, {"t"}, {}, "mul")
      .Node("Add", {"ac", "t"}, {"z"}, {}, "add")
      .Output("z", pb::kFloat, {{1, 4, 8, 8}});
  return g;
}

TEST(FuseConvMulAddTest, FoldsPerChannelMulAndAdd) {
  struct Case {
    std::vector<int64_t> mul, add;
    bool bias;
  };
  for (const Case& c : {Case{{4, 1, 1}, {1, 4, 1, 1}, true}, Case{{}, {4, 1, 1}, false},
                        Case{{1}, {1, 1, 1}, true}, Case{{1, 4, 1, 1}, {}, false}}) {
    SCOPED_TRACE(::testing::PrintToString(c.mul) + " " + ::testing::PrintToString(c.add));
    pb::ModelProto m = ModelFromGraph(ConvMulAdd(c.mul, c.add, c.bias).Build(), 13);
    PassResult r = fuse::Run(m, "fuse-conv-mul-add");
    EXPECT_EQ(r.rewrites, 2);
    ASSERT_EQ(r.model.graph->node.size(), 1u);
    EXPECT_EQ(r.model.graph->node[0].op_type, "Conv");
    EXPECT_EQ(r.model.graph->node[0].input.size(), 3u);  // a bias was created when absent
    EXPECT_EQ(r.model.graph->node[0].output[0], "z");
    EXPECT_EQ(r.model.graph->initializer.size(), 2u);
    ExpectSameOutputs(m, r.model, kFeeds, 1e-4, 1e-4);
    ExpectValid(r.model);
    ExpectFixedPoint(r.model, "fuse-conv-mul-add");
  }
}

TEST(FuseConvMulAddTest, MulAloneKeepsAConvWithoutBias) {
  pb::GraphProto g = GraphBuilder("main")
                         .Input("x", pb::kFloat, {{1, 3, 8, 8}})
                         .Initializer(InitializerFrom("w", RandomFloats({4, 3, 3, 3}, 2)))
                         .Initializer(InitializerFrom("mc", RandomFloats({4, 1, 1}, 4)))
                         .Node("Conv", {"x", "w"}, {"y"})
                         .Node("Mul", {"mc", "y"}, {"z"})
                         .Output("z", pb::kFloat, {{1, 4, 6, 6}})
                         .Build();
  pb::ModelProto m = ModelFromGraph(g, 13);
  PassResult r = fuse::Run(m, "fuse-conv-mul-add");
  EXPECT_EQ(r.rewrites, 1);
  ASSERT_EQ(r.model.graph->node.size(), 1u);
  EXPECT_EQ(r.model.graph->node[0].input.size(), 2u);
  ExpectSameOutputs(m, r.model, kFeeds, 1e-4, 1e-4);
}

TEST(FuseConvMulAddTest, NearMissesDoNotFire) {
  {
    SCOPED_TRACE("Mul varies along a spatial axis");
    pb::ModelProto m = ModelFromGraph(ConvMulAdd({4, 8, 8}, {1, 1, 8}).Build(), 13);
    ExpectNoChange(m, "fuse-conv-mul-add");
  }
  {
    SCOPED_TRACE("constant of higher rank than the Conv output");
    ExpectNoChange(ModelFromGraph(ConvMulAdd({1, 1, 4, 1, 1}, {1, 1, 1, 1, 1}).Build(), 13),
                   "fuse-conv-mul-add");
  }
  {
    SCOPED_TRACE("Conv output also used elsewhere");
    GraphBuilder g = ConvMulAdd({4, 1, 1}, {4, 1, 1});
    g.Output("y", pb::kFloat, {{1, 4, 8, 8}});
    ExpectNoChange(ModelFromGraph(g.Build(), 13), "fuse-conv-mul-add");
  }
  {
    SCOPED_TRACE("factor fed at run time");
    pb::GraphProto g = ConvMulAdd({4, 1, 1}, {4, 1, 1}).Build();
    g.node[1].input[1] = "x2";
    g.node[2].input[0] = "x2";
    g.input.push_back(MakeValueInfo("x2", pb::kFloat, std::vector<int64_t>{4, 1, 1}));
    ExpectNoChange(ModelFromGraph(g, 13), "fuse-conv-mul-add");
  }
}

// Opset 6: x -> Conv -> Mul(mc [dims]) -> Add(ac [dims]) -> z with the
// legacy broadcast attributes on both (`axis` < 0: none; `constant_first`:
// the Add's constant is A).
pb::ModelProto LegacyConvMulAdd(std::vector<int64_t> dims, int64_t broadcast, int64_t axis,
                                bool constant_first = false) {
  std::vector<pb::AttributeProto> attrs;
  if (broadcast >= 0) attrs.push_back(AttrInt("broadcast", broadcast));
  if (axis >= 0) attrs.push_back(AttrInt("axis", axis));
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{1, 3, 8, 8}})
      .Initializer(InitializerFrom("w", RandomFloats({4, 3, 3, 3}, 2)))
      .Initializer(InitializerFrom("mc", RandomFloats(dims, 4, 0.5f, 2.f)))
      .Initializer(InitializerFrom("ac", RandomFloats(dims, 5)))
      .Node("Conv", {"x", "w"}, {"y"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv")
      .Node("Mul", {"y", "mc"}, {"t"}, attrs, "mul")
      .Node("Add", constant_first ? std::vector<std::string>{"ac", "t"} : std::vector<std::string>{"t", "ac"},
            {"z"}, attrs, "add")
      .Output("z", pb::kFloat, {{1, 4, 8, 8}});
  return ModelFromGraph(g.Build(), 6);
}

TEST(FuseConvMulAddTest, FoldsLegacyBroadcastsBelowOpset7) {
  // [4] from axis 1: along the channels (caffe2-era exports write biases so).
  pb::ModelProto m = LegacyConvMulAdd({4}, 1, 1);
  PassResult r = fuse::Run(m, "fuse-conv-mul-add");
  EXPECT_EQ(r.rewrites, 2);
  ASSERT_EQ(r.model.graph->node.size(), 1u);
  EXPECT_EQ(r.model.graph->node[0].input.size(), 3u);
  ExpectSameOutputs(m, r.model, kFeeds, 1e-4, 1e-4);
  ExpectValid(r.model);
  // [4, 1, 1] aligned at the end: the channels too.
  m = LegacyConvMulAdd({4, 1, 1}, 1, -1);
  r = fuse::Run(m, "fuse-conv-mul-add");
  EXPECT_EQ(r.rewrites, 2);
  ExpectSameOutputs(m, r.model, kFeeds, 1e-4, 1e-4);
  {
    SCOPED_TRACE("[8] aligned at the end: along the width");
    ExpectNoChange(LegacyConvMulAdd({8}, 1, -1), "fuse-conv-mul-add");
  }
  {
    SCOPED_TRACE("[8] from axis 2: along the height");
    ExpectNoChange(LegacyConvMulAdd({8}, 1, 2), "fuse-conv-mul-add");
  }
  {
    SCOPED_TRACE("broadcast 0 or absent: operands of one shape only (the model is invalid)");
    ExpectNoChange(LegacyConvMulAdd({4}, 0, 1), "fuse-conv-mul-add");
    ExpectNoChange(LegacyConvMulAdd({4}, -1, 1), "fuse-conv-mul-add");
  }
  {
    SCOPED_TRACE("the constant as A: the Conv's output would be broadcast");
    pb::ModelProto c = LegacyConvMulAdd({4}, 1, 1, true);
    PassResult only_mul = fuse::Run(c, "fuse-conv-mul-add");
    EXPECT_EQ(only_mul.rewrites, 1);
    EXPECT_EQ(only_mul.model.graph->node.size(), 2u);
  }
}

TEST(FuseConvMulAddTest, InfiniteFactorsAreNotFolded) {
  // Folded, an infinite factor makes inf x 0 = NaN weights where the
  // unfused Mul gives +-inf only where values reach it.
  for (float factor : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    runner::Tensor mc = RandomFloats({4, 1, 1}, 4, 0.5f, 2.f);
    mc.mutable_data<float>()[1] = factor;
    GraphBuilder g("main");
    g.Input("x", pb::kFloat, {{1, 3, 8, 8}})
        .Initializer(InitializerFrom("w", RandomFloats({4, 3, 3, 3}, 2)))
        .Initializer(InitializerFrom("mc", mc))
        .Node("Conv", {"x", "w"}, {"y"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv")
        .Node("Mul", {"y", "mc"}, {"z"}, {}, "mul")
        .Output("z", pb::kFloat, {{1, 4, 8, 8}});
    ExpectNoChange(ModelFromGraph(g.Build(), 13), "fuse-conv-mul-add");
  }
}

TEST(FuseConvMulAddTest, MalformedModelsAreLeftAlone) {
  // A per-channel constant of the wrong channel count, and weights of rank 2.
  ExpectNoChange(ModelFromGraph(ConvMulAdd({3, 1, 1}, {5, 1, 1}).Build(), 13), "fuse-conv-mul-add");
  pb::GraphProto g = ConvMulAdd({4, 1, 1}, {4, 1, 1}).Build();
  for (pb::TensorProto& t : g.initializer) {
    if (t.name == "w") t = InitializerFrom("w", RandomFloats({4, 27}, 2));
  }
  ExpectNoChange(ModelFromGraph(g, 13), "fuse-conv-mul-add");
}

TEST(FuseConvMulAddTest, FoldsInsideAnIfBody) {
  pb::ModelProto m =
      fuse::InIf(ConvMulAdd({4, 1, 1}, {4, 1, 1}).Build(), "z", {1, 3, 8, 8}, {1, 4, 8, 8}, 13);
  PassResult r = fuse::Run(m, "fuse-conv-mul-add");
  EXPECT_EQ(r.rewrites, 4);
  EXPECT_EQ(OpCount(r.model, "Mul") + OpCount(r.model, "Add"), 0);
  for (bool c : {true, false}) {
    ExpectSameOutputs(m, r.model, {{"c", c ? fuse::TrueScalar() : fuse::FalseScalar()}, kFeeds[0]}, 1e-4,
                      1e-4);
  }
  ExpectValid(r.model);
  ExpectFixedPoint(r.model, "fuse-conv-mul-add");
}

}  // namespace
}  // namespace onnxkit::testing
