// Tests of the reference kernels for the ai.onnx.ml models and map ops:
// TreeEnsembleClassifier (with the two-class cases as ONNX Runtime runs
// them), SVMClassifier, SVMRegressor, CategoryMapper, FeatureVectorizer,
// DictVectorizer and CastMap, with their attribute checks. Expected values
// are worked out from the operator definitions in each test.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using runner::RtValue;
using runner::Tensor;

// Runs one ai.onnx.ml node on `feeds` (ai.onnx.ml imported at 3).
absl::StatusOr<std::vector<RtValue>> RunMl(const std::string& op, const std::vector<RtValue>& feeds,
                                           std::vector<pb::AttributeProto> attrs, int outputs = 2) {
  GraphBuilder g("g");
  std::vector<std::string> names;
  std::vector<std::pair<std::string, RtValue>> named;
  for (size_t i = 0; i < feeds.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    g.Input(names.back(), feeds[i].is_tensor() ? feeds[i].tensor().dtype() : 0);
    named.emplace_back(names.back(), feeds[i]);
  }
  std::vector<std::string> outs;
  for (int i = 0; i < outputs; ++i) outs.push_back("y" + std::to_string(i));
  g.Node(op, names, outs, std::move(attrs));
  g.graph().node.back().domain = "ai.onnx.ml";
  for (const std::string& o : outs) g.Output(o, 0);
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(g.Build(), 17);
  pb::OperatorSetIdProto ml;
  ml.domain = "ai.onnx.ml";
  ml.version = 3;
  loaded.proto.opset_import.push_back(ml);
  auto session = runner::Session::Create(std::move(loaded));
  if (!session.ok()) return session.status();
  return (*session)->Run(std::move(named));
}

RtValue T(Tensor t) { return RtValue::FromTensor(std::move(t)); }

float Logistic(float v) { return 1 / (1 + std::exp(-v)); }

// --- TreeEnsembleClassifier ---

// Tree 0: node 0 (x0 <= 0.5) -> leaf 1 (true) or leaf 2; tree 1: a lone
// leaf. `votes` are (tree, node, class, weight).
struct Vote {
  int64_t tree, node, cls;
  float weight;
};

std::vector<pb::AttributeProto> Forest(const std::vector<Vote>& votes) {
  std::vector<int64_t> tree, node, cls;
  std::vector<float> w;
  for (const Vote& v : votes) {
    tree.push_back(v.tree);
    node.push_back(v.node);
    cls.push_back(v.cls);
    w.push_back(v.weight);
  }
  return {AttrInts("nodes_treeids", {0, 0, 0, 1}),
          AttrInts("nodes_nodeids", {0, 1, 2, 0}),
          AttrInts("nodes_featureids", {0, 0, 0, 0}),
          AttrFloats("nodes_values", {0.5f, 0, 0, 0}),
          AttrStrings("nodes_modes", {"BRANCH_LEQ", "LEAF", "LEAF", "LEAF"}),
          AttrInts("nodes_truenodeids", {1, 0, 0, 0}),
          AttrInts("nodes_falsenodeids", {2, 0, 0, 0}),
          AttrInts("class_treeids", tree),
          AttrInts("class_nodeids", node),
          AttrInts("class_ids", cls),
          AttrFloats("class_weights", w)};
}

TEST(TreeEnsembleClassifierTest, LeavesVoteForSeveralClasses) {
  auto attrs = Forest({{0, 1, 0, 0.6f}, {0, 1, 1, 0.4f}, {0, 2, 2, 1.0f}, {0, 2, 1, 0.2f}, {1, 0, 1, 0.3f}});
  attrs.push_back(AttrInts("classlabels_int64s", {10, 20, 30}));
  auto out = RunMl("TreeEnsembleClassifier", {T(Floats({2, 1}, {0, 1}))}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  // Row 0 reaches leaf 1 and the lone leaf: [0.6, 0.4 + 0.3, 0]; row 1
  // leaf 2 and the lone leaf: [0, 0.2 + 0.3, 1].
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({20, 30}));
  std::vector<float> z = Values<float>((*out)[1].tensor());
  std::vector<float> want = {0.6f, 0.4f + 0.3f, 0, 0, 0.2f + 0.3f, 1};
  ASSERT_EQ(z.size(), want.size());
  for (size_t i = 0; i < z.size(); ++i) EXPECT_NEAR(z[i], want[i], 1e-6) << i;
}

TEST(TreeEnsembleClassifierTest, ClassesWithoutAVoteCannotWin) {
  // Votes -1 (class 0) and -2 (class 1): class 2 has no score and stays out
  // of the choice although its 0 is larger.
  auto attrs = Forest({{0, 1, 0, -1}, {0, 2, 0, -1}, {1, 0, 1, -2}});
  attrs.push_back(AttrStrings("classlabels_strings", {"a", "b", "c"}));
  auto out = RunMl("TreeEnsembleClassifier", {T(Floats({1, 1}, {0}))}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().strings(), std::vector<std::string>({"a"}));
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({-1, -2, 0}));
}

TEST(TreeEnsembleClassifierTest, BaseValuesThenSoftmax) {
  auto attrs = Forest({{0, 1, 0, 1}, {0, 2, 1, 1}, {1, 0, 2, 0.5f}});
  attrs.push_back(AttrInts("classlabels_int64s", {0, 1, 2}));
  attrs.push_back(AttrFloats("base_values", {0.5f, -1, 2}));
  attrs.push_back(AttrString("post_transform", "SOFTMAX"));
  auto out = RunMl("TreeEnsembleClassifier", {T(Floats({1, 1}, {0}))}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  const double s[3] = {1 + 0.5, 0 - 1, 0.5 + 2};
  const double sum = std::exp(s[0]) + std::exp(s[1]) + std::exp(s[2]);
  std::vector<float> z = Values<float>((*out)[1].tensor());
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(z[static_cast<size_t>(c)], std::exp(s[c]) / sum, 1e-6);
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({2}));
}

TEST(TreeEnsembleClassifierTest, BinaryWithVotesForClassOneOnly) {
  // All weights >= 0 and one class id: class 1 when its score is > 0.5;
  // class 0 has no score and shows 0.
  auto attrs = Forest({{0, 1, 1, 0.4f}, {0, 2, 1, 0.1f}, {1, 0, 1, 0.3f}});
  attrs.push_back(AttrInts("classlabels_int64s", {4, 9}));
  auto out = RunMl("TreeEnsembleClassifier", {T(Floats({2, 1}, {0, 1}))}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({9, 4}));
  std::vector<float> z = Values<float>((*out)[1].tensor());
  EXPECT_EQ(z[0], 0);
  EXPECT_NEAR(z[1], 0.7f, 1e-6);
  EXPECT_EQ(z[2], 0);
  EXPECT_NEAR(z[3], 0.4f, 1e-6);
}

TEST(TreeEnsembleClassifierTest, BinaryWithVotesForClassZeroOnly) {
  // Positive weights for class 0 alone: the single score s decides (> 0.5
  // is class 1) and Z is [1 - p, p], p = logistic(s) under LOGISTIC.
  auto attrs = Forest({{0, 1, 0, 0.4f}, {0, 2, 0, 0.1f}, {1, 0, 0, 0.3f}});
  attrs.push_back(AttrInts("classlabels_int64s", {0, 1}));
  attrs.push_back(AttrString("post_transform", "LOGISTIC"));
  auto out = RunMl("TreeEnsembleClassifier", {T(Floats({2, 1}, {0, 1}))}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({1, 0}));
  std::vector<float> z = Values<float>((*out)[1].tensor());
  EXPECT_NEAR(z[0], 1 - Logistic(0.7f), 1e-6);
  EXPECT_NEAR(z[1], Logistic(0.7f), 1e-6);
  EXPECT_NEAR(z[2], 1 - Logistic(0.4f), 1e-6);
  EXPECT_NEAR(z[3], Logistic(0.4f), 1e-6);
}

TEST(TreeEnsembleClassifierTest, BinaryMixedWeightsUseTheSign) {
  // Mixed signs for class 0 alone: class 1 when s > 0, Z = [-s, s].
  auto attrs = Forest({{0, 1, 0, -0.5f}, {0, 2, 0, 0.5f}, {1, 0, 0, 0.25f}});
  attrs.push_back(AttrStrings("classlabels_strings", {"no", "yes"}));
  auto out = RunMl("TreeEnsembleClassifier", {T(Floats({2, 1}, {0, 1}))}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().strings(), std::vector<std::string>({"no", "yes"}));
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({0.25f, -0.25f, -0.75f, 0.75f}));
}

TEST(TreeEnsembleClassifierTest, BinaryOneBaseValueAddsToTheSingleScore) {
  auto attrs = Forest({{0, 1, 0, -0.5f}, {0, 2, 0, 0.5f}, {1, 0, 0, 0.25f}});
  attrs.push_back(AttrInts("classlabels_int64s", {0, 1}));
  attrs.push_back(AttrFloats("base_values", {0.5f}));
  auto out = RunMl("TreeEnsembleClassifier", {T(Floats({1, 1}, {0}))}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  // s = -0.5 + 0.25 + 0.5 = 0.25 > 0: class 1; mixed weights: Z = [-s, s].
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({1}));
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({-0.25f, 0.25f}));
}

TEST(TreeEnsembleClassifierTest, DoubleWeightsAsTensors) {
  auto attrs = Forest({});
  attrs.erase(attrs.end() - 4, attrs.end());
  attrs.push_back(AttrInts("class_treeids", {0, 0, 1}));
  attrs.push_back(AttrInts("class_nodeids", {1, 2, 0}));
  attrs.push_back(AttrInts("class_ids", {0, 1, 1}));
  pb::TensorProto w;
  w.data_type = pb::kDouble;
  w.dims = {3};
  w.double_data = {2.5, 1.25, 0.5};
  attrs.push_back(AttrTensor("class_weights_as_tensor", w));
  attrs.push_back(AttrInts("classlabels_int64s", {0, 1, 2}));
  auto out = RunMl("TreeEnsembleClassifier", {T(Floats({1, 1}, {1}))}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({1}));
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({0, 1.75f, 0}));
}

TEST(TreeEnsembleClassifierTest, InvalidAttributesAreErrors) {
  auto with = [](std::vector<Vote> votes, std::vector<pb::AttributeProto> extra) {
    auto attrs = Forest(votes);
    for (auto& a : extra) attrs.push_back(a);
    return RunMl("TreeEnsembleClassifier", {T(Floats({1, 1}, {0}))}, attrs);
  };
  auto labels = AttrInts("classlabels_int64s", {0, 1, 2});
  EXPECT_FALSE(with({{0, 1, 3, 1}}, {labels}).ok());   // class id past the labels
  EXPECT_FALSE(with({{0, 1, -1, 1}}, {labels}).ok());  // negative class id
  EXPECT_FALSE(with({{0, 0, 0, 1}}, {labels}).ok());   // votes at an interior node
  EXPECT_FALSE(with({{0, 7, 0, 1}}, {labels}).ok());   // no such node
  EXPECT_FALSE(with({{0, 1, 0, 1}}, {labels, AttrFloats("base_values", {1, 2})}).ok());
  EXPECT_FALSE(with({{0, 1, 0, 1}}, {}).ok());  // no labels
  EXPECT_FALSE(with({{0, 1, 0, 1}}, {labels, AttrStrings("classlabels_strings", {"a", "b", "c"})}).ok());
  auto attrs = Forest({{0, 1, 0, 1}});
  attrs.push_back(labels);
  attrs[5] = AttrInts("nodes_truenodeids", {5, 0, 0, 0});  // branch to a missing node
  auto out = RunMl("TreeEnsembleClassifier", {T(Floats({1, 1}, {0}))}, attrs);
  EXPECT_FALSE(out.ok());
  attrs = Forest({{0, 1, 0, 1}});
  attrs.push_back(labels);
  attrs[10] = AttrFloats("class_weights", {1, 2});  // lengths disagree
  out = RunMl("TreeEnsembleClassifier", {T(Floats({1, 1}, {0}))}, attrs);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("class_"), std::string::npos) << out.status();
}

TEST(TreeEnsembleClassifierTest, PerClassCopiesAreBounded) {
  // 5000 one-leaf trees, each voting for its own class: one copy of all
  // 5000 trees per class would be 25M nodes from a few hundred KB.
  const int64_t n = 5000;
  std::vector<int64_t> ids(n), zeros(n, 0);
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  std::vector<pb::AttributeProto> attrs = {AttrInts("nodes_treeids", ids),
                                           AttrInts("nodes_nodeids", zeros),
                                           AttrInts("nodes_featureids", zeros),
                                           AttrFloats("nodes_values", std::vector<float>(n, 0)),
                                           AttrStrings("nodes_modes", std::vector<std::string>(n, "LEAF")),
                                           AttrInts("nodes_truenodeids", zeros),
                                           AttrInts("nodes_falsenodeids", zeros),
                                           AttrInts("class_treeids", ids),
                                           AttrInts("class_nodeids", zeros),
                                           AttrInts("class_ids", ids),
                                           AttrFloats("class_weights", std::vector<float>(n, 1)),
                                           AttrInts("classlabels_int64s", ids)};
  auto out = RunMl("TreeEnsembleClassifier", {T(Floats({1, 1}, {0}))}, attrs);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("limit"), std::string::npos) << out.status();
}

// --- SVMClassifier / SVMRegressor ---

TEST(SvmClassifierTest, OneVersusOneVotesWithALinearKernel) {
  // Support vectors sv0 = (1, 0) of class 0, sv1 = (0, 1) of class 1,
  // sv2 = (1, 1) of class 2; coefficient rows a and b.
  const std::vector<float> a = {1, -1, 0.5f}, b = {-0.5f, 2, -1}, rho = {0.1f, -0.2f, 0.3f};
  std::vector<float> coef = a;
  coef.insert(coef.end(), b.begin(), b.end());
  std::vector<pb::AttributeProto> attrs = {
      AttrInts("vectors_per_class", {1, 1, 1}), AttrFloats("support_vectors", {1, 0, 0, 1, 1, 1}),
      AttrFloats("coefficients", coef),         AttrFloats("rho", rho),
      AttrString("kernel_type", "LINEAR"),      AttrInts("classlabels_ints", {7, 8, 9})};
  const float x0 = 2, x1 = -1;
  auto out = RunMl("SVMClassifier", {T(Floats({1, 2}, {x0, x1}))}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  const float k0 = x0, k1 = x1, k2 = x0 + x1;
  // Pair (i, j): class i's vectors use coefficient row j - 1, class j's row i.
  const float s01 = a[0] * k0 + a[1] * k1 + rho[0];
  const float s02 = b[0] * k0 + a[2] * k2 + rho[1];
  const float s12 = b[1] * k1 + b[2] * k2 + rho[2];
  int votes[3] = {0, 0, 0};
  ++votes[s01 > 0 ? 0 : 1];
  ++votes[s02 > 0 ? 0 : 2];
  ++votes[s12 > 0 ? 1 : 2];
  const int best = static_cast<int>(std::max_element(votes, votes + 3) - votes);
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({7 + best}));
  std::vector<float> z = Values<float>((*out)[1].tensor());
  ASSERT_EQ(z.size(), 3u);
  EXPECT_NEAR(z[0], s01, 1e-5);
  EXPECT_NEAR(z[1], s02, 1e-5);
  EXPECT_NEAR(z[2], s12, 1e-5);
}

std::vector<pb::AttributeProto> BinaryRbf() {
  return {AttrInts("vectors_per_class", {1, 1}), AttrFloats("support_vectors", {0, 0, 1, 1}),
          AttrFloats("coefficients", {1, -1}),   AttrFloats("rho", {0.05f}),
          AttrString("kernel_type", "RBF"),      AttrFloats("kernel_params", {0.5f, 0, 0}),
          AttrInts("classlabels_ints", {0, 1})};
}

float BinaryRbfScore(float x0, float x1) {
  return std::exp(-0.5f * (x0 * x0 + x1 * x1)) -
         std::exp(-0.5f * ((x0 - 1) * (x0 - 1) + (x1 - 1) * (x1 - 1))) + 0.05f;
}

TEST(SvmClassifierTest, BinaryScoreVotesForClassZeroWhenPositive) {
  auto out = RunMl("SVMClassifier", {T(Floats({2, 2}, {0, 0, 1, 1}))}, BinaryRbf());
  ASSERT_TRUE(out.ok()) << out.status();
  const float s0 = BinaryRbfScore(0, 0), s1 = BinaryRbfScore(1, 1);
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({s0 > 0 ? 0 : 1, s1 > 0 ? 0 : 1}));
  std::vector<float> z = Values<float>((*out)[1].tensor());
  ASSERT_EQ(z.size(), 4u);
  EXPECT_NEAR(z[0], -s0, 1e-6);
  EXPECT_NEAR(z[1], s0, 1e-6);
  EXPECT_NEAR(z[2], -s1, 1e-6);
  EXPECT_NEAR(z[3], s1, 1e-6);
}

TEST(SvmClassifierTest, BinaryProbabilitiesFromProbAB) {
  auto attrs = BinaryRbf();
  attrs.push_back(AttrFloats("prob_a", {-2}));
  attrs.push_back(AttrFloats("prob_b", {0.25f}));
  auto out = RunMl("SVMClassifier", {T(Floats({1, 2}, {0.2f, 0.1f}))}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  const float s = BinaryRbfScore(0.2f, 0.1f);
  const float p = 1 / (1 + std::exp(s * -2 + 0.25f));  // P(class 0)
  std::vector<float> z = Values<float>((*out)[1].tensor());
  ASSERT_EQ(z.size(), 2u);
  EXPECT_NEAR(z[0], p, 2e-3);  // pairwise coupling stops within 0.005 / k
  EXPECT_NEAR(z[1], 1 - p, 2e-3);
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({s > 0 ? 0 : 1}));
}

TEST(SvmClassifierTest, LinearModeScoresEachClass) {
  std::vector<pb::AttributeProto> attrs = {AttrFloats("coefficients", {1, 0, 0, 1, -1, -1}),
                                           AttrFloats("rho", {0.5f}),
                                           AttrStrings("classlabels_strings", {"a", "b", "c"})};
  auto out = RunMl("SVMClassifier", {T(Floats({2, 2}, {3, 1, -2, -4}))}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().strings(), std::vector<std::string>({"a", "c"}));
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({3.5f, 1.5f, -3.5f, -1.5f, -3.5f, 6.5f}));
}

TEST(SvmClassifierTest, InvalidAttributesAndInputsAreErrors) {
  auto run = [](std::vector<pb::AttributeProto> attrs, Tensor x) {
    return RunMl("SVMClassifier", {T(std::move(x))}, attrs);
  };
  auto attrs = BinaryRbf();
  attrs[2] = AttrFloats("coefficients", {1});
  EXPECT_FALSE(run(attrs, Floats({1, 2}, {0, 0})).ok());
  attrs = BinaryRbf();
  attrs[0] = AttrInts("vectors_per_class", {1, 1, 1});
  EXPECT_FALSE(run(attrs, Floats({1, 2}, {0, 0})).ok());
  attrs = BinaryRbf();
  attrs[0] = AttrInts("vectors_per_class", {int64_t{1} << 62, int64_t{1} << 62});
  EXPECT_FALSE(run(attrs, Floats({1, 2}, {0, 0})).ok());
  attrs = BinaryRbf();
  attrs[3] = AttrFloats("rho", {});
  EXPECT_FALSE(run(attrs, Floats({1, 2}, {0, 0})).ok());
  attrs = BinaryRbf();
  attrs[5] = AttrFloats("kernel_params", {0.5f, 0});
  EXPECT_FALSE(run(attrs, Floats({1, 2}, {0, 0})).ok());
  attrs = BinaryRbf();
  attrs.push_back(AttrFloats("prob_a", {1}));
  EXPECT_FALSE(run(attrs, Floats({1, 2}, {0, 0})).ok());
  attrs = BinaryRbf();
  attrs[4] = AttrString("kernel_type", "CUBIC");
  EXPECT_FALSE(run(attrs, Floats({1, 2}, {0, 0})).ok());
  auto out = run(BinaryRbf(), Floats({1, 3}, {0, 0, 0}));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("features"), std::string::npos) << out.status();
}

TEST(SvmRegressorTest, RbfSumAndOneClassSign) {
  std::vector<pb::AttributeProto> attrs = {AttrInt("n_supports", 2),
                                           AttrFloats("support_vectors", {0, 0, 1, 1}),
                                           AttrFloats("coefficients", {0.5f, -2}),
                                           AttrFloats("rho", {0.25f}),
                                           AttrString("kernel_type", "RBF"),
                                           AttrFloats("kernel_params", {1, 0, 0})};
  auto out = RunMl("SVMRegressor", {T(Floats({2, 2}, {0, 0, 1, 0}))}, attrs, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  const float r0 = 0.5f - 2 * std::exp(-2.0f) + 0.25f,
              r1 = 0.5f * std::exp(-1.0f) - 2 * std::exp(-1.0f) + 0.25f;
  std::vector<float> y = Values<float>((*out)[0].tensor());
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0], r0, 1e-6);
  EXPECT_NEAR(y[1], r1, 1e-6);
  attrs.push_back(AttrInt("one_class", 1));
  out = RunMl("SVMRegressor", {T(Floats({2, 2}, {0, 0, 1, 0}))}, attrs, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()),
            std::vector<float>({r0 > 0 ? 1.0f : -1.0f, r1 > 0 ? 1.0f : -1.0f}));
  attrs[2] = AttrFloats("coefficients", {0.5f});
  EXPECT_FALSE(RunMl("SVMRegressor", {T(Floats({1, 2}, {0, 0}))}, attrs, 1).ok());
}

// --- Categories and maps ---

TEST(CategoryMapperTest, BothDirectionsWithDefaults) {
  std::vector<pb::AttributeProto> attrs = {AttrStrings("cats_strings", {"a", "b"}),
                                           AttrInts("cats_int64s", {5, 6}), AttrInt("default_int64", -7)};
  auto out = RunMl("CategoryMapper", {T(Strings({3}, {"b", "z", "a"}))}, attrs, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({6, -7, 5}));
  out = RunMl("CategoryMapper", {T(Int64s({1, 3}, {5, 1, 6}))}, attrs, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().shape(), std::vector<int64_t>({1, 3}));
  EXPECT_EQ((*out)[0].tensor().strings(), std::vector<std::string>({"a", "_Unused", "b"}));
  attrs[1] = AttrInts("cats_int64s", {5});
  EXPECT_FALSE(RunMl("CategoryMapper", {T(Strings({1}, {"a"}))}, attrs, 1).ok());
}

TEST(FeatureVectorizerTest, CutsAndPadsEachInput) {
  auto out = RunMl("FeatureVectorizer", {T(Floats({2, 3}, {1, 2, 3, 4, 5, 6})), T(Int64s({2, 1}, {7, 8}))},
                   {AttrInts("inputdimensions", {2, 3})}, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().shape(), std::vector<int64_t>({2, 5}));
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({1, 2, 7, 0, 0, 4, 5, 8, 0, 0}));
  EXPECT_FALSE(RunMl("FeatureVectorizer", {T(Floats({2, 1}, {1, 2})), T(Floats({3, 1}, {1, 2, 3}))},
                     {AttrInts("inputdimensions", {1, 1})}, 1)
                   .ok());
  EXPECT_FALSE(
      RunMl("FeatureVectorizer", {T(Floats({1, 1}, {1}))}, {AttrInts("inputdimensions", {-1})}, 1).ok());
}

RtValue Map(Tensor keys, std::vector<Tensor> values) {
  std::vector<RtValue> seq;
  for (Tensor& v : values) seq.push_back(RtValue::FromTensor(std::move(v)));
  return RtValue::FromMap(std::move(keys), RtValue::FromSequence(std::move(seq)));
}

TEST(DictVectorizerTest, VocabularyOrderAndMissingKeys) {
  RtValue m = Map(Strings({3}, {"b", "x", "a"}),
                  {Tensor::Scalar<float>(pb::kFloat, 2), Tensor::Scalar<float>(pb::kFloat, 9),
                   Tensor::Scalar<float>(pb::kFloat, 1)});
  auto out = RunMl("DictVectorizer", {m}, {AttrStrings("string_vocabulary", {"a", "c", "b"})}, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().shape(), std::vector<int64_t>({1, 3}));
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({1, 0, 2}));
  RtValue im = Map(Int64s({2}, {4, 2}),
                   {Tensor::Scalar<int64_t>(pb::kInt64, 40), Tensor::Scalar<int64_t>(pb::kInt64, 20)});
  out = RunMl("DictVectorizer", {im}, {AttrInts("int64_vocabulary", {2, 3, 4})}, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({20, 0, 40}));
  EXPECT_FALSE(RunMl("DictVectorizer", {m}, {AttrInts("int64_vocabulary", {2})}, 1).ok());
  EXPECT_FALSE(RunMl("DictVectorizer", {T(Floats({1}, {1}))}, {AttrInts("int64_vocabulary", {2})}, 1).ok());
}

TEST(CastMapTest, DenseSparseAndCasts) {
  RtValue m = Map(Int64s({3}, {3, 0, 1}),
                  {Tensor::Scalar<float>(pb::kFloat, 1.5f), Tensor::Scalar<float>(pb::kFloat, -2),
                   Tensor::Scalar<float>(pb::kFloat, 7.25f)});
  auto out = RunMl("CastMap", {m}, {}, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({-2, 7.25f, 1.5f}));  // key order
  out =
      RunMl("CastMap", {m},
            {AttrString("map_form", "SPARSE"), AttrInt("max_map", 5), AttrString("cast_to", "TO_INT64")}, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({-2, 7, 0, 1, 0}));
  out =
      RunMl("CastMap", {m},
            {AttrString("map_form", "SPARSE"), AttrInt("max_map", 3), AttrString("cast_to", "TO_STRING")}, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().strings(), std::vector<std::string>({"-2.000000", "7.250000", "0.f"}));
  RtValue s = Map(Int64s({2}, {1, 0}), {Strings({}, {"12"}), Strings({}, {"x"})});
  EXPECT_FALSE(RunMl("CastMap", {s}, {}, 1).ok());  // "x" is no number
  RtValue neg = Map(Int64s({1}, {-1}), {Tensor::Scalar<float>(pb::kFloat, 1)});
  EXPECT_FALSE(RunMl("CastMap", {neg}, {AttrString("map_form", "SPARSE")}, 1).ok());
  EXPECT_FALSE(RunMl("CastMap", {m}, {AttrString("cast_to", "TO_BYTES")}, 1).ok());
}

}  // namespace
}  // namespace onnxkit::testing
