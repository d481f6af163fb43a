// Tests of the cse pass (passes/cse.cc).
#include "gtest/gtest.h"
#include "tests/passes/eliminate_test_util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

TEST(CseTest, MergesRepeatedNodesAndChains) {
  // Two Relu(x) then two Sigmoid of them: after the Relus merge, the
  // Sigmoids read the same value and merge in the same run.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Node("Relu", {"x"}, {"a"})
                                        .Node("Relu", {"x"}, {"b"})
                                        .Node("Sigmoid", {"a"}, {"sa"})
                                        .Node("Sigmoid", {"b"}, {"sb"})
                                        .Node("Add", {"sa", "sb"}, {"y"})
                                        .Output("y", pb::kFloat, {{2, 3}})
                                        .Build());
  PassResult r = RunOrFail(m, "cse");
  EXPECT_EQ(OpCount(r.model, "Relu"), 1);
  EXPECT_EQ(OpCount(r.model, "Sigmoid"), 1);
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_LE(r.report.iterations, 2);
  EXPECT_EQ(OutputNames(r.model), OutputNames(m));
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3}, 1)}}, 0, 0);
  ExpectFixedPoint(r.model, "cse");
}

TEST(CseTest, AttributeOrderDoesNotMatterButValuesDo) {
  pb::ModelProto m = ModelFromGraph(
      GraphBuilder("main")
          .Input("x", pb::kFloat, {{1, 1, 4, 4}})
          .Node("MaxPool", {"x"}, {"p1"}, {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})})
          .Node("MaxPool", {"x"}, {"p2"}, {AttrInts("strides", {2, 2}), AttrInts("kernel_shape", {2, 2})})
          .Node("MaxPool", {"x"}, {"p3"}, {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {1, 1})})
          .Node("Add", {"p1", "p2"}, {"y"})
          .Output("y", pb::kFloat, {{1, 1, 2, 2}})
          .Output("p3", pb::kFloat, {{1, 1, 3, 3}})
          .Build());
  PassResult r = RunOrFail(m, "cse");
  EXPECT_EQ(OpCount(r.model, "MaxPool"), 2);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({1, 1, 4, 4}, 2)}}, 0, 0);
}

TEST(CseTest, NearMissesStay) {
  // Different inputs, input order, random ops, custom domains, If nodes.
  pb::GraphProto branch = GraphBuilder("b").Node("Neg", {"x"}, {"n"}).Output("n", pb::kFloat, {{2}}).Build();
  pb::GraphProto g = GraphBuilder("main")
                         .Input("x", pb::kFloat, {{2}})
                         .Input("z", pb::kFloat, {{2}})
                         .Input("c", pb::kBool, {{}})
                         .Node("Sub", {"x", "z"}, {"s1"})
                         .Node("Sub", {"z", "x"}, {"s2"})
                         .Node("RandomNormalLike", {"x"}, {"r1"})
                         .Node("RandomNormalLike", {"x"}, {"r2"})
                         .Node("Mystery", {"x"}, {"m1"})
                         .Node("Mystery", {"x"}, {"m2"})
                         .Node("If", {"c"}, {"i1"}, {AttrGraph("then_branch", branch), AttrGraph("else_branch", branch)})
                         .Build();
  for (const char* out : {"s1", "s2", "r1", "r2", "m1", "m2", "i1"}) g.output.push_back(MakeValueInfo(out, pb::kFloat));
  g.node[4].domain = "com.example";
  g.node[5].domain = "com.example";
  // The If's branches may not share names: give the else branch its own.
  g.node[6].attribute[1].g->node[0].output[0] = "n2";
  g.node[6].attribute[1].g->output[0].name = "n2";
  pb::ModelProto m = ModelFromGraph(g);
  pb::OperatorSetIdProto custom;
  custom.domain = "com.example";
  custom.version = 1;
  m.opset_import.push_back(custom);
  PassResult r = RunOrFail(m, "cse");
  EXPECT_EQ(r.rewrites, 0);
  EXPECT_EQ(r.model.graph->node.size(), 7u);
}

TEST(CseTest, GraphOutputsKeepTheirNames) {
  // The later Exp is a graph output: it goes, and the kept value takes its
  // name.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2}})
                                        .Node("Exp", {"x"}, {"e1"})
                                        .Node("Exp", {"x"}, {"e2"})
                                        .Node("Abs", {"e1"}, {"u"})
                                        .Output("e2", pb::kFloat, {{2}})
                                        .Output("u", pb::kFloat, {{2}})
                                        .Build());
  PassResult r = RunOrFail(m, "cse");
  EXPECT_EQ(OpCount(r.model, "Exp"), 1);
  EXPECT_EQ(OutputNames(r.model), OutputNames(m));
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2}, 4)}}, 0, 0);
  ExpectFixedPoint(r.model, "cse");
}

TEST(CseTest, WorksInsideAnIfBody) {
  pb::GraphProto body = GraphBuilder("body")
                            .Node("Tanh", {"x"}, {"t1"})
                            .Node("Tanh", {"x"}, {"t2"})
                            .Node("Mul", {"t1", "t2"}, {"out"})
                            .Build();
  pb::ModelProto m = InIf(body, "out", {{"x", {3}}}, {3});
  PassResult r = RunOrFail(m, "cse");
  EXPECT_EQ(OpCount(r.model, "Tanh"), 2);  // one per branch
  ExpectSameOutputs(m, r.model, {{"c", BoolScalar(true)}, {"x", RandomFloats({3}, 6)}}, 0, 0);
  ExpectFixedPoint(r.model, "cse");
}

}  // namespace
}  // namespace onnxkit::testing
