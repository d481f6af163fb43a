// Tests of the dce pass (passes/dce.cc).
#include "gtest/gtest.h"
#include "tests/passes/eliminate_test_util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"

namespace onnxkit::testing {
namespace {

pb::ModelProto DeadChainModel() {
  return ModelFromGraph(GraphBuilder("main")
                            .Input("x", pb::kFloat, {{2, 3}})
                            .Initializer(RawFloatTensor("w", {2, 3}))
                            .Initializer(RawFloatTensor("unused_w", {4}))
                            .Node("Add", {"x", "w"}, {"a"})
                            .Node("Neg", {"a"}, {"t"})
                            .Node("Relu", {"t"}, {"u"})
                            .Node("Abs", {"x"}, {"y"})
                            .Output("y", pb::kFloat, {{2, 3}})
                            .Build());
}

TEST(DceTest, RemovesDeadChainAndUnusedInitializers) {
  pb::ModelProto m = DeadChainModel();
  PassResult r = RunOrFail(m, "dce");
  EXPECT_EQ(NodeCount(r.model), 1);
  EXPECT_EQ(OpCount(r.model, "Abs"), 1);
  EXPECT_TRUE(r.model.graph->initializer.empty());
  EXPECT_EQ(OutputNames(r.model), OutputNames(m));
  // The whole chain goes in one run of the pass.
  EXPECT_LE(r.report.iterations, 2);  // the second iteration finds nothing
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3}, 1)}});
  ExpectFixedPoint(r.model, "dce");
}

TEST(DceTest, KeepsLiveNodesInputsAndOverridableInitializers) {
  // IR 3: "w" is an initializer listed as a graph input (a feedable
  // default); "z" is an unused graph input. Both stay.
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2}})
      .Input("z", pb::kFloat, {{2}})
      .Input("w", pb::kFloat, {{2}})
      .Initializer(RawFloatTensor("w", {2}))
      .Node("Neg", {"x"}, {"n"})
      .Node("Abs", {"n"}, {"y"})
      .Output("y", pb::kFloat, {{2}})
      .Output("n", pb::kFloat, {{2}});
  pb::ModelProto m = ModelFromGraph(g.Build(), 17, 3);
  PassResult r = RunOrFail(m, "dce");
  EXPECT_EQ(r.rewrites, 0);
  EXPECT_EQ(NodeCount(r.model), 2);
  EXPECT_EQ(r.model.graph->input.size(), 3u);
  EXPECT_EQ(r.model.graph->initializer.size(), 1u);
}

TEST(DceTest, KeepsValuesUsedOnlyInsideASubgraph) {
  pb::ModelProto m = IfModelWithOuterRefs();
  PassResult r = RunOrFail(m, "dce");
  EXPECT_EQ(r.rewrites, 0);
  EXPECT_EQ(r.model.graph->initializer.size(), 1u);  // "w" is read by the then branch
}

TEST(DceTest, CustomOpsAndOddNodesNeverCrash) {
  // A dead node of an unknown custom op goes; a node without outputs stays.
  pb::GraphProto g = GraphBuilder("main")
                         .Input("x", pb::kFloat, {{2}})
                         .Node("Mystery", {"x"}, {"m"})
                         .Node("Sink", {"x"}, {})
                         .Node("Neg", {"x"}, {"y"})
                         .Output("y", pb::kFloat, {{2}})
                         .Build();
  g.node[0].domain = "com.example";
  g.node[1].domain = "com.example";
  pb::ModelProto m = ModelFromGraph(g);
  pb::OperatorSetIdProto custom;
  custom.domain = "com.example";
  custom.version = 1;
  m.opset_import.push_back(custom);
  PassResult r = RunOrFail(m, "dce");
  ASSERT_EQ(r.model.graph->node.size(), 2u);
  EXPECT_EQ(r.model.graph->node[0].op_type, "Sink");
  EXPECT_EQ(r.model.graph->node[1].op_type, "Neg");
}

TEST(DceTest, WorksInsideAnIfBody) {
  pb::GraphProto body = GraphBuilder("body")
                            .Initializer(RawFloatTensor("k", {2}))
                            .Node("Neg", {"x"}, {"dead"})
                            .Node("Relu", {"dead"}, {"dead2"})
                            .Node("Abs", {"x"}, {"out"})
                            .Build();
  pb::ModelProto m = InIf(body, "out", {{"x", {2}}}, {2});
  PassResult r = RunOrFail(m, "dce");
  EXPECT_EQ(OpCount(r.model, "Neg"), 0);
  EXPECT_EQ(OpCount(r.model, "Relu"), 0);
  EXPECT_EQ(OpCount(r.model, "Abs"), 2);
  const pb::GraphProto& then_branch = *r.model.graph->node[0].attribute[0].g;
  EXPECT_TRUE(then_branch.initializer.empty());
  EXPECT_EQ(OutputNames(r.model), OutputNames(m));
  ExpectSameOutputs(m, r.model, {{"c", BoolScalar(true)}, {"x", RandomFloats({2}, 2)}});
  ExpectFixedPoint(r.model, "dce");
}

TEST(DceTest, BisectLimitStopsPartWay) {
  passes::ManagerOptions options;
  options.bisect_limit = 1;
  absl::StatusOr<PassResult> r = RunPasses(DeadChainModel(), "dce", options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rewrites, 1);
  EXPECT_EQ(NodeCount(r->model), 3);  // only the last dead node (Relu) went
}

}  // namespace
}  // namespace onnxkit::testing
