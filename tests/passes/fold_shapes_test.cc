// Tests of the fold-shapes pass (passes/fold_shapes.cc): Shape, Size and
// the arithmetic on them replaced by constants where dims are known.
#include <string>
#include <string_view>

#include "gtest/gtest.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

PassResult MustRun(const pb::ModelProto& m, std::string_view passes = "fold-shapes") {
  absl::StatusOr<PassResult> r = RunPasses(m, passes);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return PassResult{};
  EXPECT_TRUE(r->report.failures.empty()) << r->report.failures[0].message;
  return *std::move(r);
}

// y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), index)), [-1])), x: float[dims].
GraphBuilder ReshapeByShape(std::vector<int64_t> dims, int64_t index) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, dims)
      .Initializer(InitializerFrom("index", Int64Scalar(index)))
      .Initializer(InitializerFrom("axes", Int64s({1}, {0})))
      .Initializer(InitializerFrom("minus1", Int64s({1}, {-1})))
      .Node("Shape", {"x"}, {"s"})
      .Node("Gather", {"s", "index"}, {"n"})
      .Node("Unsqueeze", {"n", "axes"}, {"n1"})
      .Node("Concat", {"n1", "minus1"}, {"t"}, {AttrInt("axis", 0)})
      .Node("Reshape", {"x", "t"}, {"y"})
      .Output("y", pb::kFloat);
  return g;
}

TEST(FoldShapesTest, ShapeGatherConcatChainBecomesAConstant) {
  pb::ModelProto m = ModelFromGraph(ReshapeByShape({8, 3, 4}, 0).Build());
  PassResult r = MustRun(m);
  EXPECT_EQ(OpCount(r.model, "Shape"), 0);
  EXPECT_EQ(OpCount(r.model, "Gather"), 0);
  EXPECT_EQ(OpCount(r.model, "Unsqueeze"), 0);
  EXPECT_EQ(OpCount(r.model, "Concat"), 0);
  EXPECT_EQ(OpCount(r.model, "Reshape"), 1);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({8, 3, 4}, 1)}});
  ExpectValid(r.model);
}

TEST(FoldShapesTest, SecondRunChangesNothing) {
  PassResult first = MustRun(ModelFromGraph(ReshapeByShape({8, 3, 4}, 0).Build()));
  EXPECT_EQ(MustRun(first.model).rewrites, 0);
}

TEST(FoldShapesTest, SymbolicDimStaysButKnownDimsFold) {
  // x: float[N, 3, 4]: Shape(x)[0] is unknown, Shape(x)[1] is 3.
  GraphBuilder g = ReshapeByShape({-1, 3, 4}, 0);
  pb::ModelProto m = ModelFromGraph(g.Build());
  PassResult r = MustRun(m);
  EXPECT_EQ(r.rewrites, 0);
  EXPECT_EQ(OpCount(r.model, "Shape"), 1);

  m = ModelFromGraph(ReshapeByShape({-1, 3, 4}, 1).Build());
  r = MustRun(m);
  EXPECT_EQ(OpCount(r.model, "Gather"), 0);
  EXPECT_EQ(OpCount(r.model, "Shape"), 0);  // it fed only the folded Gather
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({5, 3, 4}, 2)}});
}

TEST(FoldShapesTest, ShapeWithStartEndAndSize) {
  pb::ModelProto m =
      ModelFromGraph(GraphBuilder("main")
                         .Input("x", pb::kFloat, {{2, 3, 4}})
                         .Node("Shape", {"x"}, {"tail"}, {AttrInt("start", 1)})
                         .Node("Shape", {"x"}, {"mid"}, {AttrInt("start", -2), AttrInt("end", -1)})
                         .Node("Size", {"x"}, {"n"})
                         .Output("tail", pb::kInt64, {{2}})
                         .Output("mid", pb::kInt64, {{1}})
                         .Output("n", pb::kInt64, {{}})
                         .Build(),
                     17);
  PassResult r = MustRun(m);
  EXPECT_EQ(OpCount(r.model, "Shape"), 0);
  EXPECT_EQ(OpCount(r.model, "Size"), 0);
  ASSERT_EQ(r.model.graph->output.size(), 3u);
  EXPECT_EQ(r.model.graph->output[0].name, "tail");
  EXPECT_TRUE(r.model.graph->output[0].type.has_value());  // the declared type stays
  ExpectValid(r.model);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3, 4}, 3)}});
}

TEST(FoldShapesTest, UnknownShapesAndMalformedNodesChangeNothing) {
  // No declared shape; a Gather index out of range (its Shape input folds);
  // Shape without input.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat)
                                        .Input("z", pb::kFloat, {{2, 3}})
                                        .Initializer(InitializerFrom("nine", Int64Scalar(9)))
                                        .Node("Shape", {"x"}, {"s"})
                                        .Node("Shape", {"z"}, {"sz"})
                                        .Node("Gather", {"sz", "nine"}, {"g"})
                                        .Node("Shape", {}, {"e"})
                                        .Output("s", pb::kInt64)
                                        .Output("g", pb::kInt64)
                                        .Output("e", pb::kInt64)
                                        .Build());
  absl::StatusOr<PassResult> r = RunPasses(m, "fold-shapes");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(OpCount(r->model, "Gather"), 1);
  EXPECT_EQ(OpCount(r->model, "Shape"), 2);
}

TEST(FoldShapesTest, FoldsInsideIfBodies) {
  pb::GraphProto then_branch = GraphBuilder("then")
                                   .Node("Shape", {"x"}, {"s"})
                                   .Node("Reshape", {"x", "s"}, {"u"})
                                   .Output("u", pb::kFloat, {{2, 3}})
                                   .Build();
  pb::GraphProto else_branch =
      GraphBuilder("else").Node("Neg", {"x"}, {"e"}).Output("e", pb::kFloat, {{2, 3}}).Build();
  pb::ModelProto m =
      ModelFromGraph(GraphBuilder("main")
                         .Input("c", pb::kBool, {{}})
                         .Input("x", pb::kFloat, {{2, 3}})
                         .Node("If", {"c"}, {"y"},
                               {AttrGraph("then_branch", then_branch), AttrGraph("else_branch", else_branch)})
                         .Output("y", pb::kFloat, {{2, 3}})
                         .Build());
  PassResult r = MustRun(m);
  EXPECT_EQ(OpCount(r.model, "Shape"), 0);
  for (bool c : {true, false}) {
    ExpectSameOutputs(m, r.model, {{"c", BoolScalar(c)}, {"x", RandomFloats({2, 3}, 4)}});
  }
}

TEST(FoldShapesTest, OverridableInitializersAreNotKnown) {
  // IR 3: "w" is an initializer and a graph input, so it may be fed with
  // another shape; "k" (declared [2, 3]) is a plain input.
  pb::GraphProto g = GraphBuilder("main")
                         .Input("k", pb::kFloat, {{2, 3}})
                         .Input("w", pb::kFloat)
                         .Initializer(RawFloatTensor("w", {2, 3}))
                         .Node("Shape", {"w"}, {"sw"})
                         .Node("Shape", {"k"}, {"sk"})
                         .Output("sw", pb::kInt64)
                         .Output("sk", pb::kInt64)
                         .Build();
  pb::ModelProto m = ModelFromGraph(g, 17, /*ir_version=*/3);
  PassResult r = MustRun(m);
  EXPECT_EQ(OpCount(r.model, "Shape"), 1);
  EXPECT_EQ(r.model.graph->initializer.size(), 1u);  // IR 3: a Constant node, no new initializer
  EXPECT_EQ(OpCount(r.model, "Constant"), 1);
  ExpectSameOutputs(m, r.model, {{"k", RandomFloats({2, 3}, 5)}});
}

}  // namespace
}  // namespace onnxkit::testing
