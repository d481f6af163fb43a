// Tests of `onnxkit convert --ml-opset 5` on TreeEnsembleClassifier: with
// three or more classes it becomes a TreeEnsemble of per-class scores,
// ArgMax + Gather of the labels and the post_transform as an ai.onnx op,
// reproducing the classifier's outputs on the reference backend; the cases
// that have no such form block with their reason.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "passes/convert/convert.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;

// Two trees over 2 features (tree 0 splits on x0 then x1; tree 1 on x1),
// every leaf voting for each of `classes` classes with its own weight.
pb::ModelProto ClassifierModel(int64_t classes, std::vector<pb::AttributeProto> extra,
                               int32_t x_type = pb::kFloat, bool string_labels = false) {
  std::vector<int64_t> ct, cn, ci;
  std::vector<float> cw;
  const std::vector<std::pair<int64_t, int64_t>> leaves = {{0, 2}, {0, 3}, {0, 4}, {1, 1}, {1, 2}};
  float w = 0.125f;
  for (auto [tree, node] : leaves) {
    for (int64_t c = 0; c < classes; ++c) {
      ct.push_back(tree);
      cn.push_back(node);
      ci.push_back(c);
      cw.push_back(w);
      w = w * 1.7f - (w > 1 ? 1.3f : 0.f);
    }
  }
  std::vector<pb::AttributeProto> attrs = {
      AttrInts("nodes_treeids", {0, 0, 0, 0, 0, 1, 1, 1}),
      AttrInts("nodes_nodeids", {0, 1, 2, 3, 4, 0, 1, 2}),
      AttrInts("nodes_featureids", {0, 1, 0, 0, 0, 1, 0, 0}),
      AttrStrings("nodes_modes", {"BRANCH_LEQ", "BRANCH_GT", "LEAF", "LEAF", "LEAF", "BRANCH_LT", "LEAF", "LEAF"}),
      AttrFloats("nodes_values", {0.5f, 0.25f, 0, 0, 0, 0.6f, 0, 0}),
      AttrInts("nodes_truenodeids", {1, 3, 0, 0, 0, 1, 0, 0}),
      AttrInts("nodes_falsenodeids", {2, 4, 0, 0, 0, 2, 0, 0}),
      AttrInts("class_treeids", ct),
      AttrInts("class_nodeids", cn),
      AttrInts("class_ids", ci),
      AttrFloats("class_weights", cw)};
  if (string_labels) {
    std::vector<std::string> labels;
    for (int64_t c = 0; c < classes; ++c) labels.push_back(std::string(1, static_cast<char>('a' + c)));
    attrs.push_back(AttrStrings("classlabels_strings", labels));
  } else {
    std::vector<int64_t> labels;
    for (int64_t c = 0; c < classes; ++c) labels.push_back(100 + c);
    attrs.push_back(AttrInts("classlabels_int64s", labels));
  }
  for (auto& a : extra) attrs.push_back(a);
  GraphBuilder g("g");
  g.Input("x", x_type, {{-1, 2}})
      .Output("label", string_labels ? pb::kString : pb::kInt64, {{-1}})
      .Output("scores", pb::kFloat, {{-1, classes}});
  pb::NodeProto n = MakeNode("TreeEnsembleClassifier", {"x"}, {"label", "scores"}, std::move(attrs));
  n.domain = "ai.onnx.ml";
  g.graph().node.push_back(n);
  pb::ModelProto m = ModelFromGraph(g.Build(), 17, 8);
  pb::OperatorSetIdProto ml;
  ml.domain = "ai.onnx.ml";
  ml.version = 3;
  m.opset_import.push_back(ml);
  return m;
}

absl::StatusOr<passes::convert::ConvertResult> ToMl5(const pb::ModelProto& m) {
  io::LoadedModel loaded;
  loaded.proto = m;
  passes::convert::ConvertOptions o;
  o.target_opset = 21;
  o.target_ml_opset = 5;
  o.verify = false;
  return passes::convert::Convert(loaded, o);
}

int MlOps(const pb::ModelProto& m, std::string_view op) {
  int n = 0;
  for (const pb::NodeProto& node : m.graph->node) n += node.domain == "ai.onnx.ml" && node.op_type == op;
  return n;
}

TEST(ConvertMlClassifierTest, ThreeClassesBecomeTreeEnsembleArgMaxGather) {
  pb::ModelProto m = ClassifierModel(3, {});
  auto up = ToMl5(m);
  ASSERT_TRUE(up.ok()) << up.status();
  ASSERT_TRUE(up->blockers.empty()) << up->blockers[0].reason;
  EXPECT_EQ(up->steps["TreeEnsembleClassifier 3->5 classifier-to-tree-ensemble"], 1);
  EXPECT_EQ(MlOps(up->model, "TreeEnsemble"), 1);
  EXPECT_EQ(MlOps(up->model, "TreeEnsembleClassifier"), 0);
  EXPECT_EQ(OpCount(up->model, "ArgMax"), 1);
  EXPECT_EQ(OpCount(up->model, "Gather"), 1);
  ExpectValid(up->model);
  ExpectSameOutputs(m, up->model, {{"x", RandomFloats({32, 2}, 5)}});
}

TEST(ConvertMlClassifierTest, BaseValuesSoftmaxAndStringLabels) {
  pb::ModelProto m =
      ClassifierModel(4, {AttrFloats("base_values", {0.5f, -0.25f, 0, 1}), AttrString("post_transform", "SOFTMAX")},
                      pb::kFloat, true);
  auto up = ToMl5(m);
  ASSERT_TRUE(up.ok()) << up.status();
  ASSERT_TRUE(up->blockers.empty()) << up->blockers[0].reason;
  EXPECT_EQ(OpCount(up->model, "Softmax"), 1);
  EXPECT_EQ(OpCount(up->model, "Add"), 1);
  ExpectValid(up->model);
  ExpectSameOutputs(m, up->model, {{"x", RandomFloats({32, 2}, 9)}});
}

TEST(ConvertMlClassifierTest, LogisticOnIntegerFeatures) {
  pb::ModelProto m = ClassifierModel(3, {AttrString("post_transform", "LOGISTIC")}, pb::kInt64);
  auto up = ToMl5(m);
  ASSERT_TRUE(up.ok()) << up.status();
  ASSERT_TRUE(up->blockers.empty()) << up->blockers[0].reason;
  EXPECT_EQ(OpCount(up->model, "Sigmoid"), 1);
  EXPECT_EQ(OpCount(up->model, "Cast"), 1);
  ExpectSameOutputs(m, up->model, {{"x", Int64s({4, 2}, {0, 0, 1, 0, 0, 1, 1, 1})}});
}

TEST(ConvertMlClassifierTest, TwoClassesBlock) {
  auto up = ToMl5(ClassifierModel(2, {}));
  ASSERT_TRUE(up.ok()) << up.status();
  ASSERT_EQ(up->blockers.size(), 1u);
  EXPECT_THAT(up->blockers[0].reason, HasSubstr("two-class"));
}

TEST(ConvertMlClassifierTest, ProbitBlocks) {
  auto up = ToMl5(ClassifierModel(3, {AttrString("post_transform", "PROBIT")}));
  ASSERT_TRUE(up.ok()) << up.status();
  ASSERT_EQ(up->blockers.size(), 1u);
  EXPECT_THAT(up->blockers[0].reason, HasSubstr("PROBIT"));
}

}  // namespace
}  // namespace onnxkit::testing
