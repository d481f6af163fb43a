// Tests of the fuse-conv-bn pass (passes/fuse_conv_bn.cc).
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

struct ConvBnOptions {
  bool bias = true;
  int64_t bn_channels = 4;
  std::vector<int64_t> w_dims = {4, 3, 3, 3};
  std::vector<pb::AttributeProto> bn_attrs = {AttrFloat("epsilon", 1e-3f)};
  std::vector<std::string> bn_outputs = {"z"};
  bool extra_user = false;  // the Conv output also feeds a Relu
  int32_t dtype = pb::kFloat;
};

// x[1,3,8,8] -> Conv(w, b) -> BatchNormalization -> z
GraphBuilder ConvBnBuilder(const ConvBnOptions& o = {}) {
  GraphBuilder g("main");
  const int64_t c = o.bn_channels;
  auto init = [&](const std::string& name, const runner::Tensor& t) {
    g.Initializer(InitializerFrom(name, fuse::ConvertFloats(t, o.dtype)));
  };
  g.Input("x", o.dtype, {{1, 3, 8, 8}});
  init("w", RandomFloats(o.w_dims, 2));
  init("s", RandomFloats({c}, 3, 0.5f, 1.5f));
  init("o", RandomFloats({c}, 4));
  init("m", RandomFloats({c}, 5));
  init("v", RandomFloats({c}, 6, 0.25f, 2.f));
  std::vector<std::string> conv_inputs = {"x", "w"};
  if (o.bias) {
    init("b", RandomFloats({o.w_dims[0]}, 7));
    conv_inputs.push_back("b");
  }
  g.Node("Conv", conv_inputs, {"y"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv")
      .Node("BatchNormalization", {"y", "s", "o", "m", "v"}, o.bn_outputs, o.bn_attrs, "bn")
      .Output("z", o.dtype, {{1, c, 8, 8}});
  if (o.extra_user) g.Node("Relu", {"y"}, {"r"}).Output("r", o.dtype, {{1, 4, 8, 8}});
  return g;
}

const Feeds kFeeds = {{"x", RandomFloats({1, 3, 8, 8}, 1)}};

TEST(FuseConvBnTest, AnInfiniteFactorIsNotFolded) {
  // var 0 and epsilon 0: scale / sqrt(0) is infinite, the folded weights
  // would hold NaN (0 x inf) where the BatchNormalization gives +-inf.
  GraphBuilder g("main");
  runner::Tensor v = RandomFloats({4}, 6, 0.25f, 2.f);
  v.mutable_data<float>()[2] = 0;
  g.Input("x", pb::kFloat, {{1, 3, 8, 8}})
      .Initializer(InitializerFrom("w", RandomFloats({4, 3, 3, 3}, 2)))
      .Initializer(InitializerFrom("s", RandomFloats({4}, 3, 0.5f, 1.5f)))
      .Initializer(InitializerFrom("o", RandomFloats({4}, 4)))
      .Initializer(InitializerFrom("m", RandomFloats({4}, 5)))
      .Initializer(InitializerFrom("v", v))
      .Node("Conv", {"x", "w"}, {"y"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv")
      .Node("BatchNormalization", {"y", "s", "o", "m", "v"}, {"z"}, {AttrFloat("epsilon", 0.f)}, "bn")
      .Output("z", pb::kFloat, {{1, 4, 8, 8}});
  ExpectNoChange(ModelFromGraph(g.Build(), 15), "fuse-conv-bn");
}

TEST(FuseConvBnTest, FoldsBatchNormIntoWeightsAndBias) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "with bias" : "without bias");
    pb::ModelProto m = ModelFromGraph(ConvBnBuilder({.bias = bias}).Build(), 15);
    PassResult r = fuse::Run(m, "fuse-conv-bn");
    EXPECT_EQ(r.rewrites, 1);
    EXPECT_EQ(OpCount(r.model, "BatchNormalization"), 0);
    EXPECT_EQ(OpCount(r.model, "Conv"), 1);
    ASSERT_EQ(r.model.graph->node.size(), 1u);
    EXPECT_EQ(r.model.graph->node[0].input.size(), 3u);
    EXPECT_EQ(r.model.graph->node[0].output[0], "z");  // the BN's output keeps its name
    EXPECT_EQ(r.model.graph->initializer.size(), 2u);  // old weights and BN params dropped
    ExpectSameOutputs(m, r.model, kFeeds, 1e-4, 1e-4);
    ExpectValid(r.model);
    ExpectFixedPoint(r.model, "fuse-conv-bn");
  }
}

TEST(FuseConvBnTest, FoldsFloat16AndDoubleWeights) {
  for (int32_t dtype : {pb::kFloat16, pb::kDouble}) {
    SCOPED_TRACE(dtype);
    pb::ModelProto m = ModelFromGraph(ConvBnBuilder({.dtype = dtype}).Build(), 15);
    PassResult r = fuse::Run(m, "fuse-conv-bn");
    EXPECT_EQ(r.rewrites, 1);
    EXPECT_EQ(OpCount(r.model, "BatchNormalization"), 0);
    for (const pb::TensorProto& t : r.model.graph->initializer) EXPECT_EQ(t.data_type, dtype);
    const double tol = dtype == pb::kFloat16 ? 2e-2 : 1e-9;
    ExpectSameOutputs(m, r.model, {{"x", fuse::ConvertFloats(kFeeds[0].second, dtype)}}, tol, tol);
    ExpectValid(r.model);
  }
}

TEST(FuseConvBnTest, WorksAtOldOpsetsAndKeepsSharedWeights) {
  // Opset 9: no training_mode; the weights also feed a second Conv, so they stay.
  GraphBuilder g = ConvBnBuilder();
  g.Node("Conv", {"x", "w"}, {"y2"}, {}, "conv2").Output("y2", pb::kFloat, {{1, 4, 6, 6}});
  pb::ModelProto m = ModelFromGraph(g.Build(), 9);
  PassResult r = fuse::Run(m, "fuse-conv-bn");
  EXPECT_EQ(r.rewrites, 1);
  EXPECT_EQ(OpCount(r.model, "BatchNormalization"), 0);
  ExpectSameOutputs(m, r.model, kFeeds, 1e-4, 1e-4);
}

TEST(FuseConvBnTest, NearMissesDoNotFire) {
  {
    SCOPED_TRACE("conv output used twice");
    ExpectNoChange(ModelFromGraph(ConvBnBuilder({.extra_user = true}).Build(), 15), "fuse-conv-bn");
  }
  {
    SCOPED_TRACE("training mode");
    ConvBnOptions o;
    o.bn_attrs.push_back(AttrInt("training_mode", 1));
    ExpectNoChange(ModelFromGraph(ConvBnBuilder(o).Build(), 15), "fuse-conv-bn");
  }
  {
    SCOPED_TRACE("running statistics requested (opset 9 training)");
    ConvBnOptions o;
    o.bn_outputs = {"z", "rm", "rv"};
    ExpectNoChange(ModelFromGraph(ConvBnBuilder(o).Build(), 9), "fuse-conv-bn");
  }
  {
    SCOPED_TRACE("spatial=0 at opset 7");
    ConvBnOptions o;
    o.bn_attrs.push_back(AttrInt("spatial", 0));
    ExpectNoChange(ModelFromGraph(ConvBnBuilder(o).Build(), 7), "fuse-conv-bn");
  }
  {
    SCOPED_TRACE("mean fed at run time");
    GraphBuilder g = ConvBnBuilder();
    pb::GraphProto graph = g.Build();
    std::erase_if(graph.initializer, [](const pb::TensorProto& t) { return t.name == "m"; });
    graph.input.push_back(MakeValueInfo("m", pb::kFloat, std::vector<int64_t>{4}));
    ExpectNoChange(ModelFromGraph(graph, 15), "fuse-conv-bn");
  }
  {
    SCOPED_TRACE("weights fed at run time");
    pb::GraphProto graph = ConvBnBuilder().Build();
    graph.input.push_back(MakeValueInfo("w", pb::kFloat, std::vector<int64_t>{4, 3, 3, 3}));
    ExpectNoChange(ModelFromGraph(graph, 15), "fuse-conv-bn");  // an overridable initializer
  }
}

TEST(FuseConvBnTest, MalformedModelsAreLeftAlone) {
  {
    SCOPED_TRACE("BN parameters of the wrong channel count");
    ExpectNoChange(ModelFromGraph(ConvBnBuilder({.bn_channels = 5}).Build(), 15), "fuse-conv-bn");
  }
  {
    SCOPED_TRACE("weights of rank 2");
    ExpectNoChange(ModelFromGraph(ConvBnBuilder({.bias = false, .w_dims = {4, 27}}).Build(), 15),
                   "fuse-conv-bn");
  }
  {
    SCOPED_TRACE("bias of the wrong size");
    pb::GraphProto graph = ConvBnBuilder().Build();
    for (pb::TensorProto& t : graph.initializer) {
      if (t.name == "b") t = InitializerFrom("b", RandomFloats({3}, 7));
    }
    ExpectNoChange(ModelFromGraph(graph, 15), "fuse-conv-bn");
  }
  {
    SCOPED_TRACE("BN with too few inputs");
    pb::GraphProto graph = ConvBnBuilder().Build();
    graph.node[1].input.resize(3);
    ExpectNoChange(ModelFromGraph(graph, 15), "fuse-conv-bn");
  }
}

TEST(FuseConvBnTest, FoldsInsideAnIfBody) {
  pb::GraphProto body = ConvBnBuilder().Build();
  pb::ModelProto m = fuse::InIf(body, "z", {1, 3, 8, 8}, {1, 4, 8, 8}, 15);
  PassResult r = fuse::Run(m, "fuse-conv-bn");
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_EQ(OpCount(r.model, "BatchNormalization"), 0);
  EXPECT_EQ(OpCount(r.model, "Conv"), 2);
  for (bool c : {true, false}) {
    ExpectSameOutputs(m, r.model, {{"c", c ? fuse::TrueScalar() : fuse::FalseScalar()}, kFeeds[0]}, 1e-4,
                      1e-4);
  }
  ExpectValid(r.model);
  ExpectFixedPoint(r.model, "fuse-conv-bn");
}

}  // namespace
}  // namespace onnxkit::testing
