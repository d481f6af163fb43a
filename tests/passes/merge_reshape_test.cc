// Tests of the merge-reshape pass (passes/merge_reshape.cc).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/passes/eliminate_test_util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

pb::TensorProto I64(const std::string& name, std::vector<int64_t> v) {
  return InitializerFrom(name, Int64s({static_cast<int64_t>(v.size())}, v));
}

TEST(MergeReshapeTest, ChainBecomesOneReshape) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2, 3, 4}})
                                        .Initializer(I64("axes", {0}))
                                        .Initializer(I64("s", {6, 4}))
                                        .Node("Unsqueeze", {"x", "axes"}, {"u"})
                                        .Node("Flatten", {"u"}, {"f"}, {AttrInt("axis", 2)})
                                        .Node("Reshape", {"f", "s"}, {"y"})
                                        .Output("y", pb::kFloat, {{6, 4}})
                                        .Build());
  PassResult r = RunOrFail(m, "merge-reshape");
  EXPECT_EQ(NodeCount(r.model), 1);
  EXPECT_EQ(OpCount(r.model, "Reshape"), 1);
  EXPECT_EQ(r.model.graph->node[0].input[0], "x");
  EXPECT_EQ(OutputNames(r.model), OutputNames(m));
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3, 4}, 1)}}, 0, 0);
  ExpectFixedPoint(r.model, "merge-reshape");
}

TEST(MergeReshapeTest, SharedIntermediateAndUnknownDimsAreNearMisses) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Input("v", pb::kFloat, {{-1, 3}})
                                        .Initializer(I64("axes", {0}))
                                        .Node("Unsqueeze", {"x", "axes"}, {"u"})
                                        .Node("Squeeze", {"u", "axes"}, {"y"})
                                        .Node("Neg", {"u"}, {"n"})
                                        .Node("Unsqueeze", {"v", "axes"}, {"vu"})
                                        .Node("Squeeze", {"vu", "axes"}, {"z"})
                                        .Output("y", pb::kFloat, {{2, 3}})
                                        .Output("n", pb::kFloat, {{1, 2, 3}})
                                        .Output("z", pb::kFloat, {{-1, 3}})
                                        .Build());
  PassResult r = RunOrFail(m, "merge-reshape");
  EXPECT_EQ(r.rewrites, 0);
}

TEST(MergeReshapeTest, EmptyTensorsNeedAllowzero) {
  auto model = [](int64_t opset) {
    return ModelFromGraph(GraphBuilder("main")
                              .Input("x", pb::kFloat, {{2, 0}})
                              .Initializer(I64("axes", {0}))
                              .Node("Unsqueeze", {"x", "axes"}, {"u"})
                              .Node("Flatten", {"u"}, {"y"}, {AttrInt("axis", 1)})
                              .Output("y", pb::kFloat, {{1, 0}})
                              .Build(),
                          opset);
  };
  pb::ModelProto m = model(17);
  PassResult r = RunOrFail(m, "merge-reshape");
  ASSERT_EQ(OpCount(r.model, "Reshape"), 1);
  EXPECT_EQ(r.model.graph->node[0].attribute.size(), 1u);  // allowzero=1
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 0}, 2)}}, 0, 0);
  PassResult old = RunOrFail(model(13), "merge-reshape");
  EXPECT_EQ(old.rewrites, 0);
}

TEST(MergeReshapeTest, MalformedChainsAreLeftAlone) {
  // A Reshape without a shape input, and one whose element count does not
  // match: inference knows no output shape, nothing merges, nothing crashes.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Initializer(I64("s", {7}))
                                        .Node("Reshape", {"x"}, {"a"})
                                        .Node("Reshape", {"a", "s"}, {"y"})
                                        .Output("y", pb::kFloat)
                                        .Build());
  absl::StatusOr<PassResult> r = RunPasses(m, "merge-reshape");
  EXPECT_TRUE(!r.ok() || r->rewrites == 0);  // an error or no change
}

TEST(MergeReshapeTest, WorksInsideAnIfBody) {
  pb::GraphProto body = GraphBuilder("body")
                            .Initializer(I64("axes", {0}))
                            .Initializer(I64("s", {3, 2}))
                            .Node("Unsqueeze", {"x", "axes"}, {"u"})
                            .Node("Squeeze", {"u", "axes"}, {"q"})
                            .Node("Reshape", {"q", "s"}, {"out"})
                            .Build();
  pb::ModelProto m = InIf(body, "out", {{"x", {2, 3}}}, {3, 2});
  PassResult r = RunOrFail(m, "merge-reshape");
  EXPECT_EQ(OpCount(r.model, "Unsqueeze"), 0);
  EXPECT_EQ(OpCount(r.model, "Squeeze"), 0);
  EXPECT_EQ(OpCount(r.model, "Reshape"), 2);  // one per branch
  EXPECT_EQ(r.model.graph->node[0].attribute[0].g->output[0].name, "out");
  ExpectSameOutputs(m, r.model, {{"c", BoolScalar(false)}, {"x", RandomFloats({2, 3}, 3)}}, 0, 0);
  ExpectFixedPoint(r.model, "merge-reshape");
}

TEST(MergeReshapeTest, FunctionBodiesGetAConstantNode) {
  // Functions have no initializers: the merged shape is a Constant node.
  pb::FunctionProto f;
  f.name = "f";
  f.domain = "local";
  f.input = {"X"};
  f.output = {"Y"};
  pb::OperatorSetIdProto onnx;
  onnx.version = 17;
  f.opset_import.push_back(onnx);
  f.node.push_back(MakeNode("Constant", {}, {"axes"}, {AttrTensor("value", I64("", {0}))}));
  f.node.push_back(MakeNode("Constant", {}, {"s"}, {AttrTensor("value", I64("", {6}))}));
  f.node.push_back(MakeNode("Unsqueeze", {"X", "axes"}, {"U"}));
  f.node.push_back(MakeNode("Reshape", {"U", "s"}, {"Y"}));
  f.value_info.push_back(MakeValueInfo("Y", pb::kFloat, std::vector<int64_t>{6}));
  pb::GraphProto g = GraphBuilder("main")
                         .Input("x", pb::kFloat, {{2, 3}})
                         .Node("f", {"x"}, {"y"})
                         .Output("y", pb::kFloat, {{6}})
                         .Build();
  g.node[0].domain = "local";
  pb::ModelProto m = ModelFromGraph(g);
  pb::OperatorSetIdProto local;
  local.domain = "local";
  local.version = 1;
  m.opset_import.push_back(local);
  m.functions.push_back(f);
  PassResult r = RunOrFail(m, "merge-reshape");
  ASSERT_EQ(r.model.functions.size(), 1u);
  int unsqueezes = 0, reshapes = 0;
  for (const pb::NodeProto& n : r.model.functions[0].node) {
    unsqueezes += n.op_type == "Unsqueeze";
    reshapes += n.op_type == "Reshape";
  }
  EXPECT_EQ(unsqueezes, 0);
  EXPECT_EQ(reshapes, 1);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3}, 4)}}, 0, 0);
  ExpectFixedPoint(r.model, "merge-reshape");
}

}  // namespace
}  // namespace onnxkit::testing
