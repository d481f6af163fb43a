// Tests of subgraph extraction: minimal node sets, outer-scope values of
// subgraphs, types, IR < 4 initializer inputs, and every error.
#include "lib/extract/extract.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::extract {
namespace {

using ::onnxkit::testing::GraphBuilder;
using ::onnxkit::testing::MakeNode;
using ::onnxkit::testing::ModelFromGraph;
using ::onnxkit::testing::RawFloatTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> NodeOutputs(const pb::ModelProto& m) {
  std::vector<std::string> out;
  for (const auto& n : m.graph->node) out.push_back(n.output[0]);
  return out;
}

std::vector<std::string> Names(const std::vector<pb::ValueInfoProto>& list) {
  std::vector<std::string> out;
  for (const auto& vi : list) out.push_back(vi.name);
  return out;
}

// x -> Relu a -> Add(a, w) b -> Neg c ;  x -> Sigmoid d (unrelated)
pb::ModelProto Chain() {
  return ModelFromGraph(GraphBuilder("chain")
                            .Input("x", pb::kFloat, {{2, 3}})
                            .Initializer(RawFloatTensor("w", {2, 3}, 1))
                            .Initializer(RawFloatTensor("unused", {4}))
                            .Node("Relu", {"x"}, {"a"})
                            .Node("Sigmoid", {"x"}, {"d"})
                            .Node("Add", {"a", "w"}, {"b"})
                            .Node("Neg", {"b"}, {"c"})
                            .ValueInfo("a", pb::kFloat, {{2, 3}})
                            .ValueInfo("b", pb::kFloat, {{2, 3}})
                            .ValueInfo("d", pb::kFloat, {{2, 3}})
                            .Output("c", pb::kFloat, {{2, 3}})
                            .Output("d", pb::kFloat, {{2, 3}})
                            .Build());
}

TEST(ExtractTest, KeepsOnlyWhatTheOutputsNeed) {
  ExtractStats stats;
  auto out = ExtractModel(Chain(), {{"a"}, {"c"}}, &stats);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(NodeOutputs(*out), ElementsAre("b", "c"));
  EXPECT_THAT(Names(out->graph->input), ElementsAre("a"));
  EXPECT_THAT(Names(out->graph->output), ElementsAre("c"));
  ASSERT_EQ(out->graph->initializer.size(), 1u);
  EXPECT_EQ(out->graph->initializer[0].name, "w");
  EXPECT_THAT(Names(out->graph->value_info), ElementsAre("b"));
  ASSERT_TRUE(out->graph->input[0].type);
  EXPECT_EQ(out->graph->input[0].type->tensor_type->elem_type, pb::kFloat);
  EXPECT_EQ(stats.nodes_kept, 2);
  EXPECT_EQ(stats.nodes_total, 4);
  EXPECT_EQ(out->opset_import.size(), 1u);
}

TEST(ExtractTest, WholeModelIsItself) {
  auto out = ExtractModel(Chain(), {{"x"}, {"c", "d"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(NodeOutputs(*out), ElementsAre("a", "d", "b", "c"));
}

TEST(ExtractTest, MissingDependencyNamesTheTensors) {
  auto out = ExtractModel(Chain(), {{}, {"c"}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("'x'"));
}

TEST(ExtractTest, UnknownNameSuggestsACloseOne) {
  auto out = ExtractModel(Chain(), {{"x"}, {"cc"}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("'cc'"));
  auto in = ExtractModel(Chain(), {{"nope"}, {"c"}});
  EXPECT_EQ(in.status().code(), absl::StatusCode::kNotFound);
}

TEST(ExtractTest, RejectsEmptyAndDuplicateRequests) {
  EXPECT_EQ(ExtractModel(Chain(), {{"x"}, {}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExtractModel(Chain(), {{"x", "x"}, {"c"}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExtractModel(Chain(), {{"x"}, {"c", "c"}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExtractModel(Chain(), {{""}, {"c"}}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ExtractTest, PullsInValuesUsedInsideSubgraphs) {
  // then-branch uses outer value "s" = Sigmoid(x): extracting y from (c, x)
  // must keep the Sigmoid even though no node input of If names "s".
  pb::GraphProto then_branch = GraphBuilder("then").Node("Add", {"x", "s"}, {"t"}).Output("t").Build();
  pb::GraphProto else_branch = GraphBuilder("else").Node("Neg", {"x"}, {"e"}).Output("e").Build();
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("c", pb::kBool, {{}})
                                        .Input("x", pb::kFloat, {{2}})
                                        .Node("Sigmoid", {"x"}, {"s"})
                                        .Node("Relu", {"x"}, {"unrelated"})
                                        .Node("If", {"c"}, {"y"},
                                              {::onnxkit::testing::AttrGraph("then_branch", then_branch),
                                               ::onnxkit::testing::AttrGraph("else_branch", else_branch)})
                                        .Output("y", pb::kFloat, {{2}})
                                        .Output("unrelated", pb::kFloat, {{2}})
                                        .Build());
  auto out = ExtractModel(m, {{"c", "x"}, {"y"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(NodeOutputs(*out), ElementsAre("s", "y"));
  // Without x, the outer use inside the body makes x missing.
  auto missing = ExtractModel(m, {{"c"}, {"y"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("'x'"));
}

TEST(ExtractTest, InfersTypesTheModelDoesNotDeclare) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Node("Relu", {"x"}, {"a"})
                                        .Node("Transpose", {"a"}, {"b"})
                                        .Output("b", pb::kFloat, {{3, 2}})
                                        .Build());
  auto out = ExtractModel(m, {{"a"}, {"b"}});
  ASSERT_TRUE(out.ok()) << out.status();
  const pb::TypeProto* type = out->graph->input[0].type.get();
  ASSERT_NE(type, nullptr);
  ASSERT_TRUE(type->tensor_type && type->tensor_type->shape);
  ASSERT_EQ(type->tensor_type->shape->dim.size(), 2u);
  EXPECT_EQ(type->tensor_type->shape->dim[0].dim_value, 2);
  auto no_infer = ExtractModel(m, {{"a"}, {"b"}, /*infer_types=*/false});
  ASSERT_FALSE(no_infer.ok());
  EXPECT_THAT(std::string(no_infer.status().message()), HasSubstr("type of tensor 'a' is unknown"));
}

TEST(ExtractTest, InitializersBecomeInputsBeforeIr4) {
  pb::ModelProto m = Chain();
  m.ir_version = 3;
  m.opset_import[0].version = 9;
  auto out = ExtractModel(m, {{"a"}, {"c"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Names(out->graph->input), ElementsAre("a", "w"));
}

TEST(ExtractTest, AnInitializerCanBeCutIntoAnInput) {
  auto out = ExtractModel(Chain(), {{"a", "w"}, {"c"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->graph->initializer.empty());
  EXPECT_THAT(Names(out->graph->input), ElementsAre("a", "w"));
}

TEST(ExtractTest, EveryLightModelCutsInHalf) {
  auto dir = ::onnxkit::testing::TestdataPath("models/light");
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".onnx") continue;
    auto loaded = io::LoadModel(entry.path());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const pb::GraphProto& g = *loaded->proto.graph;
    // Cut from the first graph input that is not an initializer to the
    // output of the node in the middle.
    std::string input;
    for (const auto& vi : g.input) {
      bool init = false;
      for (const auto& t : g.initializer) init |= t.name == vi.name;
      if (!init) input = vi.name;
    }
    std::string mid = g.node[g.node.size() / 2].output[0];
    auto out = ExtractModel(loaded->proto, {{input}, {mid}});
    ASSERT_TRUE(out.ok()) << entry.path() << ": " << out.status();
    EXPECT_LT(out->graph->node.size(), g.node.size());
    EXPECT_GT(out->graph->node.size(), 0u);
    ++models;
  }
  EXPECT_EQ(models, 9);
}

}  // namespace
}  // namespace onnxkit::extract
