// Tests of `onnxkit convert --ml-opset`: LabelEncoder and the tree
// ensembles move between ai.onnx.ml opsets 1 and 5, each result reproduces
// the original's outputs on the reference backend (which runs
// TreeEnsembleRegressor through its TreeEnsemble form), and what has no
// equivalent blocks with its reason.
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "passes/convert/convert.h"
#include "runner/convert.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;

#define ASSIGN_OK(lhs, expr)                          \
  auto lhs##_or = (expr);                             \
  ASSERT_TRUE(lhs##_or.ok()) << lhs##_or.status();    \
  auto& lhs = *lhs##_or
using passes::convert::ConvertResult;

pb::ModelProto MlModel(pb::GraphProto g, int64_t ml_opset, std::optional<int64_t> onnx_opset = 13) {
  pb::ModelProto m = ModelFromGraph(std::move(g), onnx_opset.value_or(13), 8);
  if (!onnx_opset) m.opset_import.clear();
  pb::OperatorSetIdProto ml;
  ml.domain = "ai.onnx.ml";
  ml.version = ml_opset;
  m.opset_import.push_back(ml);
  return m;
}

pb::NodeProto MlNode(std::string op, std::vector<std::string> in, std::vector<std::string> out,
                     std::vector<pb::AttributeProto> attrs) {
  pb::NodeProto n = MakeNode(std::move(op), std::move(in), std::move(out), std::move(attrs));
  n.domain = "ai.onnx.ml";
  return n;
}

absl::StatusOr<ConvertResult> ConvertMl(const pb::ModelProto& m, int64_t ml_opset, int64_t opset = 13) {
  io::LoadedModel loaded;
  loaded.proto = m;
  passes::convert::ConvertOptions o;
  o.target_opset = opset;
  o.target_ml_opset = ml_opset;
  o.verify = false;
  return passes::convert::Convert(loaded, o);
}

int MlOpCount(const pb::ModelProto& m, std::string_view op) {
  int n = 0;
  for (const pb::NodeProto& node : m.graph->node) n += node.domain == "ai.onnx.ml" && node.op_type == op;
  return n;
}

// Two trees over 3 features: tree 0 splits on x0 then x2, tree 1 is a lone
// leaf; base values are added.
pb::GraphProto RegressorGraph(std::string aggregate, std::vector<float> base) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{-1, 3}})
      .Output("y", pb::kFloat, {{-1, 1}});
  g.graph().node.push_back(MlNode(
      "TreeEnsembleRegressor", {"x"}, {"y"},
      {AttrInts("nodes_treeids", {0, 0, 0, 0, 0, 1}), AttrInts("nodes_nodeids", {0, 1, 2, 3, 4, 0}),
       AttrInts("nodes_featureids", {0, 2, 0, 0, 0, 0}),
       AttrStrings("nodes_modes", {"BRANCH_LEQ", "BRANCH_GT", "LEAF", "LEAF", "LEAF", "LEAF"}),
       AttrFloats("nodes_values", {0.1f, -0.3f, 0, 0, 0, 0}), AttrInts("nodes_truenodeids", {1, 3, 0, 0, 0, 0}),
       AttrInts("nodes_falsenodeids", {2, 4, 0, 0, 0, 0}), AttrInts("target_treeids", {0, 0, 0, 1}),
       AttrInts("target_nodeids", {2, 3, 4, 0}), AttrInts("target_ids", {0, 0, 0, 0}),
       AttrFloats("target_weights", {1.5f, -2.25f, 0.75f, 0.5f}), AttrInt("n_targets", 1),
       AttrString("aggregate_function", std::move(aggregate)), AttrFloats("base_values", std::move(base))}));
  return g.Build();
}

TEST(ConvertMlTest, RegressorBecomesTreeEnsembleAndBack) {
  pb::ModelProto m = MlModel(RegressorGraph("SUM", {0.25f}), 1);
  Feeds feeds = {{"x", RandomFloats({16, 3}, 7)}};
  ASSIGN_OK(up, ConvertMl(m, 5, 21));
  ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
  EXPECT_EQ(up.steps["TreeEnsembleRegressor 3->5 regressor-to-tree-ensemble"], 1);
  EXPECT_EQ(MlOpCount(up.model, "TreeEnsemble"), 1);
  EXPECT_EQ(MlOpCount(up.model, "TreeEnsembleRegressor"), 0);
  EXPECT_EQ(OpCount(up.model, "Add"), 1);  // base_values
  EXPECT_EQ(up.ir_after, 10);
  ExpectValid(up.model);
  ExpectSameOutputs(m, up.model, feeds);

  ASSIGN_OK(down, ConvertMl(up.model, 1, 13));
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(MlOpCount(down.model, "TreeEnsembleRegressor"), 1);
  EXPECT_EQ(down.ir_after, 7);
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, feeds);
}

TEST(ConvertMlTest, AverageOfTreesSurvivesTheRoundTrip) {
  pb::ModelProto m = MlModel(RegressorGraph("AVERAGE", {}), 3);
  ASSIGN_OK(up, ConvertMl(m, 5, 21));
  ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
  EXPECT_EQ(OpCount(up.model, "Add"), 0);
  ExpectSameOutputs(m, up.model, {{"x", RandomFloats({9, 3}, 3)}});
}

TEST(ConvertMlTest, RegressorRunsOnIntegerFeatures) {
  GraphBuilder g("g");
  g.Input("x", pb::kInt64, {{-1, 1}}).Output("y", pb::kFloat, {{-1, 1}});
  g.graph().node.push_back(MlNode(
      "TreeEnsembleRegressor", {"x"}, {"y"},
      {AttrInts("nodes_treeids", {0, 0, 0}), AttrInts("nodes_nodeids", {0, 1, 2}), AttrInts("nodes_featureids", {0, 0, 0}),
       AttrStrings("nodes_modes", {"BRANCH_LT", "LEAF", "LEAF"}), AttrFloats("nodes_values", {2.5f, 0, 0}),
       AttrInts("nodes_truenodeids", {1, 0, 0}), AttrInts("nodes_falsenodeids", {2, 0, 0}),
       AttrInts("target_treeids", {0, 0}), AttrInts("target_nodeids", {1, 2}), AttrInts("target_ids", {0, 0}),
       AttrFloats("target_weights", {-1.f, 4.f}), AttrInt("n_targets", 1)}));
  pb::ModelProto m = MlModel(g.Build(), 1);
  ASSIGN_OK(out, RunModel(m, {{"x", Int64s({4, 1}, {1, 2, 3, 9})}}));
  ASSERT_EQ(out.size(), 1u);
  const runner::Tensor& y = out[0].tensor();
  EXPECT_EQ(y.dtype(), pb::kFloat);
  EXPECT_THAT(std::vector<float>(y.data<float>(), y.data<float>() + 4), ::testing::ElementsAre(-1.f, -1.f, 4.f, 4.f));
  // Up to 5 the integer X is cast to float first.
  ASSIGN_OK(up, ConvertMl(m, 5, 21));
  ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
  EXPECT_EQ(OpCount(up.model, "Cast"), 1);
  ExpectSameOutputs(m, up.model, {{"x", Int64s({4, 1}, {1, 2, 3, 9})}});
}

TEST(ConvertMlTest, LeafFeedingTwoTargetsBlocksWithItsReason) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{-1, 1}}).Output("y", pb::kFloat, {{-1, 2}});
  g.graph().node.push_back(MlNode(
      "TreeEnsembleRegressor", {"x"}, {"y"},
      {AttrInts("nodes_treeids", {0}), AttrInts("nodes_nodeids", {0}), AttrInts("nodes_featureids", {0}),
       AttrStrings("nodes_modes", {"LEAF"}), AttrFloats("nodes_values", {0}), AttrInts("nodes_truenodeids", {0}),
       AttrInts("nodes_falsenodeids", {0}), AttrInts("target_treeids", {0, 0}), AttrInts("target_nodeids", {0, 0}),
       AttrInts("target_ids", {0, 1}), AttrFloats("target_weights", {1.f, 2.f}), AttrInt("n_targets", 2)}));
  pb::ModelProto m = MlModel(g.Build(), 3);
  ASSIGN_OK(up, ConvertMl(m, 5, 21));
  ASSERT_EQ(up.blockers.size(), 1u);
  EXPECT_THAT(up.blockers[0].reason, HasSubstr("a leaf feeds several targets"));
  EXPECT_TRUE(!up.model.graph || up.model.graph->node.empty());
}

// A TreeEnsemble whose root tests set membership of x0 in {1, 4, 7}.
pb::ModelProto MembershipModel() {
  auto tensor = [](std::string name, int32_t dtype, std::vector<double> v) {
    auto t = runner::Tensor::Allocate(dtype, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == pb::kUint8) t->mutable_data<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
      if (dtype == pb::kFloat) t->mutable_data<float>()[i] = static_cast<float>(v[i]);
    }
    return AttrTensor(name, runner::TensorToProto(*t, name));
  };
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{-1, 2}}).Output("y", pb::kFloat, {{-1, 1}});
  g.graph().node.push_back(MlNode(
      "TreeEnsemble", {"x"}, {"y"},
      {AttrInts("nodes_featureids", {0, 1}), tensor("nodes_modes", pb::kUint8, {6, 0}),
       tensor("nodes_splits", pb::kFloat, {0, 0.5}), AttrInts("nodes_truenodeids", {1, 0}),
       AttrInts("nodes_trueleafs", {0, 1}), AttrInts("nodes_falsenodeids", {2, 1}), AttrInts("nodes_falseleafs", {1, 1}),
       tensor("membership_values", pb::kFloat, {1, 4, 7, NAN}), AttrInts("leaf_targetids", {0, 0, 0}),
       tensor("leaf_weights", pb::kFloat, {10, 20, 30}), AttrInts("tree_roots", {0}), AttrInt("n_targets", 1),
       AttrInt("aggregate_function", 1)}));
  return MlModel(g.Build(), 5, 21);
}

TEST(ConvertMlTest, SetMembershipBecomesAChainOfEqualities) {
  pb::ModelProto m = MembershipModel();
  Feeds feeds = {{"x", Floats({6, 2}, {1, 0, 4, 1, 7, 0, 2, 0, 5, 1, 7, 0.9f})}};
  ASSIGN_OK(down, ConvertMl(m, 3, 21));
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(down.steps["TreeEnsemble 5->4 tree-ensemble-to-regressor"], 1);
  ASSERT_EQ(MlOpCount(down.model, "TreeEnsembleRegressor"), 1);
  int eq = 0;
  for (const pb::AttributeProto& a : down.model.graph->node[0].attribute) {
    if (a.name == "nodes_modes") eq = static_cast<int>(std::count(a.strings.begin(), a.strings.end(), "BRANCH_EQ"));
  }
  EXPECT_EQ(eq, 3);
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, feeds);
}

TEST(ConvertMlTest, LabelEncoderClassesBecomeKeysAndBack) {
  GraphBuilder g("g");
  g.Input("s", pb::kString, {{4}}).Output("y", pb::kInt64, {{4}});
  g.graph().node.push_back(
      MlNode("LabelEncoder", {"s"}, {"y"}, {AttrStrings("classes_strings", {"cat", "dog", "eel"}), AttrInt("default_int64", 9)}));
  pb::ModelProto m = MlModel(g.Build(), 1, std::nullopt);
  Feeds feeds = {{"s", Strings({4}, {"eel", "cat", "yak", "dog"})}};
  ASSIGN_OK(up, ConvertMl(m, 4));
  ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
  EXPECT_EQ(up.steps["LabelEncoder 1->2 classes-to-keys-values"], 1);
  EXPECT_EQ(up.source_opset, 0);  // a model of ml nodes alone gains no ai.onnx import
  ExpectSameOutputs(m, up.model, feeds);
  ASSIGN_OK(down, ConvertMl(up.model, 1));
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  ExpectSameOutputs(m, down.model, feeds);
}

TEST(ConvertMlTest, NonPositionalLabelEncoderCannotGoToOne) {
  GraphBuilder g("g");
  g.Input("k", pb::kInt64, {{2}}).Output("y", pb::kString, {{2}});
  g.graph().node.push_back(MlNode("LabelEncoder", {"k"}, {"y"},
                                  {AttrInts("keys_int64s", {3, 5}), AttrStrings("values_strings", {"a", "b"})}));
  ASSIGN_OK(down, ConvertMl(MlModel(g.Build(), 2), 1));
  ASSERT_EQ(down.blockers.size(), 1u);
  EXPECT_THAT(down.blockers[0].reason, HasSubstr("not the positions"));
}

TEST(ConvertMlTest, MlTargetOutOfRangeIsRefused) {
  pb::ModelProto m = MlModel(RegressorGraph("SUM", {}), 1);
  EXPECT_EQ(ConvertMl(m, 6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConvertMl(m, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace onnxkit::testing
