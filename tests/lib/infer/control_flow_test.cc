// If/Loop/Scan bodies (outer-scope values, body input types, outputs from
// bodies), sequences and optionals.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/lib/infer/infer_test_util.h"

namespace onnxkit::infer::testing {
namespace {

using ::onnxkit::testing::AttrGraph;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

TEST(IfTest, OuterScopeValuesAndBranchUnion) {
  pb::ModelProto m = ::onnxkit::testing::IfModelWithOuterRefs();
  EXPECT_EQ(TypeOf(m, "t"), "float[2]");
  EXPECT_EQ(TypeOf(m, "y"), "float[2]");
  EXPECT_THAT(Issues(m), IsEmpty());

  pb::GraphProto then_branch = GraphBuilder("then").Node("Concat", {"x", "x"}, {"t"}, {AttrInt("axis", 0)}).Output("t").Build();
  pb::GraphProto else_branch = GraphBuilder("else").Node("Neg", {"x"}, {"e"}).Output("e").Build();
  pb::GraphProto main = GraphBuilder("main")
                            .Input("c", pb::kBool, std::vector<int64_t>{})
                            .Input("x", pb::kFloat, std::vector<int64_t>{2, 3})
                            .Node("If", {"c"}, {"y"},
                                  {AttrGraph("then_branch", then_branch), AttrGraph("else_branch", else_branch)}, "if")
                            .Output("y")
                            .Build();
  EXPECT_EQ(TypeOf(ModelFromGraph(main, 17), "y"), "float[?, 3]");
}

TEST(IfTest, IssuesInsideBranchesNameTheBranch) {
  pb::GraphProto then_branch =
      GraphBuilder("then").Node("MatMul", {"x", "x"}, {"t"}, {}, "mm").Output("t").Build();
  pb::GraphProto else_branch = GraphBuilder("else").Node("Neg", {"x"}, {"e"}).Output("e").Build();
  pb::GraphProto main = GraphBuilder("main")
                            .Input("c", pb::kBool, std::vector<int64_t>{})
                            .Input("x", pb::kFloat, std::vector<int64_t>{2, 3})
                            .Node("If", {"c"}, {"y"},
                                  {AttrGraph("then_branch", then_branch), AttrGraph("else_branch", else_branch)}, "if")
                            .Output("y")
                            .Build();
  EXPECT_THAT(Issues(ModelFromGraph(main, 17)),
              ElementsAre("E0601 graph 'main' › node 'if' (If) › attribute 'then_branch' › graph 'then' › node 'mm' "
                          "(MatMul): MatMul: inner dimensions differ: A [2, 3] and B [2, 3] (3 vs 2)"));
}

TEST(IfTest, KnownConditionSkipsTheDeadBranch) {
  pb::GraphProto then_branch =
      GraphBuilder("then").Node("MatMul", {"x", "x"}, {"t"}, {}, "mm").Output("t").Build();
  pb::GraphProto else_branch = GraphBuilder("else").Node("Neg", {"x"}, {"e"}).Output("e").Build();
  pb::TensorProto cond = Ints("c", {0}, true);
  cond.data_type = pb::kBool;
  cond.int64_data.clear();
  cond.int32_data = {0};
  pb::GraphProto main = GraphBuilder("main")
                            .Input("x", pb::kFloat, std::vector<int64_t>{2, 3})
                            .Initializer(cond)
                            .Node("If", {"c"}, {"y"},
                                  {AttrGraph("then_branch", then_branch), AttrGraph("else_branch", else_branch)}, "if")
                            .Output("y")
                            .Build();
  pb::ModelProto m = ModelFromGraph(main, 17);
  EXPECT_THAT(Issues(m), IsEmpty());
  EXPECT_EQ(TypeOf(m, "y"), "float[2, 3]");
}

TEST(LoopTest, BodyInputsAndScanOutputs) {
  pb::GraphProto body = GraphBuilder("body")
                            .Input("i", pb::kInt64, std::vector<int64_t>{})
                            .Input("cond_in", pb::kBool, std::vector<int64_t>{})
                            .Input("v", pb::kFloat, std::vector<int64_t>{2})
                            .Node("Identity", {"cond_in"}, {"cond_out"})
                            .Node("Add", {"v", "w"}, {"v_out"})
                            .Node("Unsqueeze", {"i", "axes"}, {"scan"})
                            .Output("cond_out", pb::kBool)
                            .Output("v_out")
                            .Output("scan", pb::kInt64)
                            .Build();
  pb::GraphProto main = GraphBuilder("main")
                            .Input("m", pb::kInt64, std::vector<int64_t>{})
                            .Input("c", pb::kBool, std::vector<int64_t>{})
                            .Input("v0", pb::kFloat, std::vector<int64_t>{2})
                            .Initializer(::onnxkit::testing::RawFloatTensor("w", {2}))
                            .Initializer(Ints("axes", {0}))
                            .Node("Loop", {"m", "c", "v0"}, {"v_final", "scans"}, {AttrGraph("body", body)}, "loop")
                            .Output("v_final")
                            .Output("scans", pb::kInt64)
                            .Build();
  pb::ModelProto m = ModelFromGraph(main, 17);
  EXPECT_THAT(Issues(m), IsEmpty());
  EXPECT_EQ(TypeOf(m, "i"), "int64[]");
  EXPECT_EQ(TypeOf(m, "v_out"), "float[2]");
  EXPECT_EQ(TypeOf(m, "v_final"), "float[2]");
  EXPECT_EQ(TypeOf(m, "scans"), "int64[?, 1]");
}

TEST(ScanTest, ScanAxesAndOutputs) {
  pb::GraphProto body = GraphBuilder("body")
                            .Input("sum_in", pb::kFloat)
                            .Input("x_t", pb::kFloat)
                            .Node("Add", {"sum_in", "x_t"}, {"sum_out"})
                            .Node("Identity", {"sum_out"}, {"y_t"})
                            .Output("sum_out")
                            .Output("y_t")
                            .Build();
  pb::GraphProto main = GraphBuilder("main")
                            .Input("init", pb::kFloat, std::vector<int64_t>{4})
                            .Input("x", pb::kFloat, std::vector<int64_t>{4, 5})
                            .Node("Scan", {"init", "x"}, {"sum", "ys"},
                                  {AttrGraph("body", body), AttrInt("num_scan_inputs", 1), AttrInts("scan_input_axes", {1})},
                                  "scan")
                            .Output("sum")
                            .Output("ys")
                            .Build();
  pb::ModelProto m = ModelFromGraph(main, 17);
  EXPECT_THAT(Issues(m), IsEmpty());
  EXPECT_EQ(TypeOf(m, "x_t"), "float[4]");
  EXPECT_EQ(TypeOf(m, "sum"), "float[4]");
  EXPECT_EQ(TypeOf(m, "ys"), "float[5, 4]");
}

TEST(SequenceTest, ConstructAtConcat) {
  pb::GraphProto g = GraphBuilder("g")
                         .Input("a", pb::kFloat, std::vector<int64_t>{2, 3})
                         .Input("b", pb::kFloat, std::vector<int64_t>{2, 3})
                         .Initializer(Ints("zero", {0}, true))
                         .Node("SequenceConstruct", {"a", "b"}, {"s"})
                         .Node("SequenceAt", {"s", "zero"}, {"first"})
                         .Node("ConcatFromSequence", {"s"}, {"cat"}, {AttrInt("axis", 0)})
                         .Node("SequenceLength", {"s"}, {"n"})
                         .Node("SequenceEmpty", {}, {"empty"}, {AttrInt("dtype", pb::kInt32)})
                         .Build();
  pb::ModelProto m = ModelFromGraph(g, 17);
  EXPECT_EQ(TypeOf(m, "s"), "seq(tensor(float))");
  EXPECT_EQ(TypeOf(m, "first"), "float[2, 3]");
  EXPECT_EQ(TypeOf(m, "cat"), "float[?, 3]");
  EXPECT_EQ(TypeOf(m, "n"), "int64[]");
  EXPECT_EQ(TypeOf(m, "empty"), "seq(tensor(int32))");
}

TEST(OptionalTest, WrapAndUnwrap) {
  pb::GraphProto g = GraphBuilder("g")
                         .Input("a", pb::kFloat, std::vector<int64_t>{2})
                         .Node("Optional", {"a"}, {"o"})
                         .Node("OptionalHasElement", {"o"}, {"has"})
                         .Node("OptionalGetElement", {"o"}, {"back"})
                         .Build();
  pb::ModelProto m = ModelFromGraph(g, 18);
  EXPECT_EQ(TypeOf(m, "o"), "optional(tensor(float))");
  EXPECT_EQ(TypeOf(m, "has"), "bool[]");
  EXPECT_EQ(TypeOf(m, "back"), "float[2]");
}

}  // namespace
}  // namespace onnxkit::infer::testing
