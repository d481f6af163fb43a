// Conflicts between inferred and declared types (E0600, E0602), what the
// declarations contribute, and InferModel's contract on refused models.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/lib/infer/infer_test_util.h"

namespace onnxkit::infer::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

pb::ModelProto AddModel(int32_t out_type, std::optional<std::vector<int64_t>> out_dims) {
  pb::GraphProto g = GraphBuilder("main")
                         .Input("a", pb::kFloat, std::vector<int64_t>{2, 3})
                         .Input("b", pb::kFloat, std::vector<int64_t>{3})
                         .Node("Add", {"a", "b"}, {"y"}, {}, "add")
                         .Output("y", out_type, std::move(out_dims))
                         .Build();
  return ModelFromGraph(std::move(g), 17);
}

TEST(ConflictTest, ElementTypeIsE0600) {
  EXPECT_THAT(Issues(AddModel(pb::kInt64, std::vector<int64_t>{2, 3})),
              ElementsAre("E0600 graph 'main' › node 'add' (Add): 'y': inferred tensor(float), declared "
                          "tensor(int64)"));
}

TEST(ConflictTest, ShapesAreE0602) {
  EXPECT_THAT(Issues(AddModel(pb::kFloat, std::vector<int64_t>{2, 4})),
              ElementsAre("E0602 graph 'main' › node 'add' (Add): 'y': inferred shape [2, 3], declared [2, 4] (dim 1: "
                          "3 vs 4)"));
  EXPECT_THAT(Issues(AddModel(pb::kFloat, std::vector<int64_t>{2, 3, 1})),
              ElementsAre("E0602 graph 'main' › node 'add' (Add): 'y': inferred shape [2, 3] (rank 2), declared [2, 3, "
                          "1] (rank 3)"));
}

TEST(ConflictTest, SymbolicAndUnknownNeverConflict) {
  EXPECT_THAT(Issues(AddModel(pb::kFloat, std::vector<int64_t>{-1, -1})), IsEmpty());
  EXPECT_THAT(Issues(AddModel(pb::kFloat, std::nullopt)), IsEmpty());
  EXPECT_THAT(Issues(AddModel(0, std::nullopt)), IsEmpty());
}

TEST(ConflictTest, ValueInfoConflictsAndFillsGaps) {
  pb::GraphProto g = GraphBuilder("main")
                         .Input("a", pb::kFloat, std::vector<int64_t>{2, 3})
                         .Node("Relu", {"a"}, {"r"}, {}, "relu")
                         .Node("Custom", {"r"}, {"c"}, {}, "custom")
                         .Node("Relu", {"c"}, {"y"}, {}, "relu2")
                         .ValueInfo("r", pb::kFloat, std::vector<int64_t>{2, 5})
                         .ValueInfo("c", pb::kDouble, std::vector<int64_t>{7})
                         .Output("y")
                         .Build();
  g.node[1].domain = "com.example";
  pb::ModelProto m = ModelFromGraph(std::move(g), 17);
  EXPECT_THAT(Issues(m), ElementsAre("E0602 graph 'main' › node 'relu' (Relu): 'r': inferred shape [2, 3], declared "
                                     "[2, 5] (dim 1: 3 vs 5)",
                                     "E0600 graph 'main' › node 'relu2' (Relu): 'y': inferred tensor(double), "
                                     "declared tensor(float)"));
  // The custom op's output takes its declared type, which flows on.
  EXPECT_EQ(TypeOf(m, "c"), "double[7]");
  EXPECT_EQ(TypeOf(m, "y"), "double[7]");
}

TEST(ConflictTest, InitializerAgainstItsDeclaredInput) {
  pb::GraphProto g = GraphBuilder("main")
                         .Input("w", pb::kFloat, std::vector<int64_t>{3})
                         .Initializer(::onnxkit::testing::RawFloatTensor("w", {2}))
                         .Node("Relu", {"w"}, {"y"})
                         .Output("y")
                         .Build();
  EXPECT_THAT(Issues(ModelFromGraph(std::move(g), 17, 3)),
              ElementsAre("E0602 graph 'main' › initializer 'w': 'w': inferred shape [2], declared [3] (dim 0: 2 vs 3)"));
}

TEST(ConflictTest, ModelsFromProtoRefusesGiveNoIssues) {
  pb::ModelProto m = AddModel(pb::kInt64, std::vector<int64_t>{2, 3});
  m.graph->node[0].input[1] = "undefined";
  EXPECT_THAT(InferModel(m), IsEmpty());
  m.graph.reset();
  EXPECT_THAT(InferModel(m), IsEmpty());
  EXPECT_THAT(InferredTypes(m), IsEmpty());
}

TEST(ConflictTest, UnknownOpsAndFunctionCallsAreOpaque) {
  pb::GraphProto g = GraphBuilder("main")
                         .Input("a", pb::kFloat, std::vector<int64_t>{2})
                         .Node("Square", {"a"}, {"y"}, {}, "call")
                         .Output("y", pb::kInt64, std::vector<int64_t>{9})
                         .Build();
  g.node[0].domain = "local";
  pb::ModelProto m = ModelFromGraph(std::move(g), 17);
  pb::OperatorSetIdProto local;
  local.domain = "local";
  local.version = 1;
  m.opset_import.push_back(local);
  pb::FunctionProto f;
  f.name = "Square";
  f.domain = "local";
  f.input = {"x"};
  f.output = {"y"};
  f.node.push_back(MakeNode("Mul", {"x", "x"}, {"y"}));
  m.functions.push_back(f);
  EXPECT_THAT(Issues(m), IsEmpty());
  EXPECT_EQ(TypeOf(m, "y"), "int64[9]");
}

TEST(ConflictTest, OpsWithoutShapeFunctionsStillGetTypes) {
  // Unique has a shape function for its rank only; NonMaxSuppression a
  // fixed [?, 3]; Det its batch dims.
  EXPECT_EQ(Infer({.op = "Det", .inputs = {In("x", {4, 3, 3})}}), "float[4]");
  EXPECT_EQ(Infer({.op = "NonMaxSuppression", .inputs = {In("b", {1, 6, 4}), In("s", {1, 1, 6})}}), "int64[?, 3]");
  EXPECT_EQ(Infer({.op = "Einsum", .inputs = {In("x", {4, 3, 3})}}), "float?");  // no equation: unknown shape
  EXPECT_THAT(IssuesOf({.op = "Einsum", .inputs = {In("x", {4, 3, 3})}}), IsEmpty());
}

TEST(ConflictTest, InferredSequenceThroughATensorOnlyOpIsE0603) {
  // Identity-13 takes tensors; from 16 on sequences and optionals too.
  auto model = [](int64_t opset) {
    pb::GraphProto g = GraphBuilder("main")
                           .Input("a", pb::kFloat, std::vector<int64_t>{2})
                           .Node("SequenceConstruct", {"a", "a"}, {"s"}, {}, "make")
                           .Node("Identity", {"s"}, {"t"}, {}, "id")
                           .Node("SequenceLength", {"t"}, {"y"}, {}, "len")
                           .Output("y", pb::kInt64, std::vector<int64_t>{})
                           .Build();
    return ModelFromGraph(std::move(g), opset);
  };
  std::vector<std::string> issues = Issues(model(13));
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_THAT(issues[0], ::testing::StartsWith("E0603 graph 'main' › node 'id' (Identity): input 's' (#0) is "
                                               "seq(tensor(float)), but Identity-13 allows T in {"));
  EXPECT_THAT(Issues(model(16)), IsEmpty());
}

// A type only inference knows (Relu's output) bound with an initializer's
// other type to Add's T: the node rules cannot see it, inference does.
TEST(ConflictTest, InferredTypeVariableMismatchIsE0603) {
  pb::TensorProto b;
  b.name = "b";
  b.data_type = pb::kInt64;
  b.dims = {2};
  b.int64_data = {1, 2};
  pb::GraphProto g = GraphBuilder("main")
                         .Input("x", pb::kFloat, std::vector<int64_t>{2})
                         .Initializer(std::move(b))
                         .Node("Relu", {"x"}, {"r"}, {}, "relu")
                         .Node("Add", {"r", "b"}, {"y"}, {}, "add")
                         .Output("y", pb::kFloat, std::vector<int64_t>{2})
                         .Build();
  std::vector<std::string> issues = Issues(ModelFromGraph(std::move(g), 17));
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_THAT(issues[0],
              ::testing::StartsWith("E0603 graph 'main' › node 'add' (Add): type variable T of Add-14 is "
                                    "tensor(float) for input 'r' (#0) but tensor(int64) for input 'b' (#1)"));
}

}  // namespace
}  // namespace onnxkit::infer::testing
