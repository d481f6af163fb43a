// Tests of the merge-transpose pass (passes/merge_transpose.cc).
#include "gtest/gtest.h"
#include "tests/passes/eliminate_test_util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

// x[2, 3, 4] -> Relu -> Transpose(p1) -> Transpose(p2) -> y
pb::ModelProto TwoTransposes(std::vector<pb::AttributeProto> a1, std::vector<pb::AttributeProto> a2,
                             std::vector<int64_t> out_dims) {
  return ModelFromGraph(GraphBuilder("main")
                            .Input("x", pb::kFloat, {{2, 3, 4}})
                            .Node("Relu", {"x"}, {"r"})
                            .Node("Transpose", {"r"}, {"t"}, std::move(a1))
                            .Node("Transpose", {"t"}, {"y"}, std::move(a2))
                            .Output("y", pb::kFloat, std::move(out_dims))
                            .Build());
}

TEST(MergeTransposeTest, ComposesIntoOne) {
  pb::ModelProto m = TwoTransposes({AttrInts("perm", {1, 2, 0})}, {AttrInts("perm", {0, 2, 1})}, {3, 2, 4});
  PassResult r = RunOrFail(m, "merge-transpose");
  ASSERT_EQ(OpCount(r.model, "Transpose"), 1);
  const pb::NodeProto& t = r.model.graph->node[1];
  EXPECT_EQ(t.input[0], "r");
  EXPECT_EQ(t.attribute[0].ints, (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(OutputNames(r.model), OutputNames(m));
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3, 4}, 1)}}, 0, 0);
  ExpectFixedPoint(r.model, "merge-transpose");
}

TEST(MergeTransposeTest, InverseAndReversalPairsVanish) {
  for (const pb::ModelProto& m :
       {TwoTransposes({AttrInts("perm", {1, 2, 0})}, {AttrInts("perm", {2, 0, 1})}, {2, 3, 4}),
        TwoTransposes({}, {}, {2, 3, 4})}) {
    PassResult r = RunOrFail(m, "merge-transpose");
    EXPECT_EQ(OpCount(r.model, "Transpose"), 0);
    EXPECT_EQ(r.model.graph->node[0].output[0], "y");  // the Relu took the output name
    ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3, 4}, 2)}}, 0, 0);
  }
}

TEST(MergeTransposeTest, ReversalWithAPermUsesTheRank) {
  pb::ModelProto m = TwoTransposes({}, {AttrInts("perm", {0, 2, 1})}, {4, 2, 3});
  PassResult r = RunOrFail(m, "merge-transpose");
  EXPECT_EQ(OpCount(r.model, "Transpose"), 1);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3, 4}, 3)}}, 0, 0);
}

TEST(MergeTransposeTest, SharedIntermediateIsANearMiss) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", {1, 0})})
                                        .Node("Transpose", {"t"}, {"y"}, {AttrInts("perm", {1, 0})})
                                        .Node("Neg", {"t"}, {"n"})
                                        .Output("y", pb::kFloat, {{2, 3}})
                                        .Output("n", pb::kFloat, {{3, 2}})
                                        .Build());
  PassResult r = RunOrFail(m, "merge-transpose");
  EXPECT_EQ(r.rewrites, 0);
}

TEST(MergeTransposeTest, GraphInputThroughIdentityKeepsATranspose) {
  // y = T(T(x)) == x, but y cannot be renamed onto the graph input x: one
  // Transpose with the identity perm stays.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", {1, 0})})
                                        .Node("Transpose", {"t"}, {"y"}, {AttrInts("perm", {1, 0})})
                                        .Output("y", pb::kFloat, {{2, 3}})
                                        .Build());
  PassResult r = RunOrFail(m, "merge-transpose");
  EXPECT_EQ(OpCount(r.model, "Transpose"), 1);
  EXPECT_EQ(r.model.graph->node[0].attribute[0].ints, (std::vector<int64_t>{0, 1}));
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3}, 4)}}, 0, 0);
  ExpectFixedPoint(r.model, "merge-transpose");
}

TEST(MergeTransposeTest, MalformedPermsAreLeftAlone) {
  pb::ModelProto m = TwoTransposes({AttrInts("perm", {0, 0, 1})}, {AttrInts("perm", {0, 2, 1})}, {2, 4, 3});
  absl::StatusOr<PassResult> r = RunPasses(m, "merge-transpose");
  EXPECT_TRUE(!r.ok() || r->rewrites == 0);  // an error or no change
  pb::ModelProto wrong_rank = TwoTransposes({AttrInts("perm", {1, 0})}, {AttrInts("perm", {0, 2, 1})}, {2, 4, 3});
  r = RunPasses(wrong_rank, "merge-transpose");
  EXPECT_TRUE(!r.ok() || r->rewrites == 0);  // an error or no change
}

TEST(MergeTransposeTest, WorksInsideAnIfBody) {
  pb::GraphProto body = GraphBuilder("body")
                            .Node("Transpose", {"x"}, {"t1"}, {AttrInts("perm", {1, 0})})
                            .Node("Transpose", {"t1"}, {"t2"}, {AttrInts("perm", {1, 0})})
                            .Node("Transpose", {"t2"}, {"out"}, {AttrInts("perm", {1, 0})})
                            .Build();
  pb::ModelProto m = InIf(body, "out", {{"x", {2, 3}}}, {3, 2});
  PassResult r = RunOrFail(m, "merge-transpose");
  EXPECT_EQ(OpCount(r.model, "Transpose"), 2);  // one per branch
  ExpectSameOutputs(m, r.model, {{"c", BoolScalar(true)}, {"x", RandomFloats({2, 3}, 5)}}, 0, 0);
  ExpectFixedPoint(r.model, "merge-transpose");
}

}  // namespace
}  // namespace onnxkit::testing
