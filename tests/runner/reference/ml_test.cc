// Tests of the text and ai.onnx.ml reference kernels (runner/reference/ml_*):
// string ops, TfIdfVectorizer, the ai.onnx.ml transforms and models, and the
// ai.onnx.preview.training optimizers, with their error paths.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using runner::RtValue;
using runner::Tensor;



// A float tensor attribute.
pb::AttributeProto AttrFloatTensor(std::string name, std::vector<float> v) {
  pb::TensorProto t;
  t.data_type = pb::kFloat;
  t.dims = {static_cast<int64_t>(v.size())};
  t.float_data = std::move(v);
  return AttrTensor(std::move(name), std::move(t));
}

// Runs one node (in `domain`, ai.onnx.ml imported at `ml_opset`) on
// `inputs`; returns its outputs.
absl::StatusOr<std::vector<RtValue>> RunOp(const std::string& op, const std::vector<Tensor>& inputs,
                                           std::vector<pb::AttributeProto> attrs = {}, int outputs = 1,
                                           const std::string& domain = "", int64_t ml_opset = 4) {
  GraphBuilder g("g");
  std::vector<std::string> names;
  std::vector<std::pair<std::string, RtValue>> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    g.Input(names.back(), inputs[i].dtype());
    feeds.emplace_back(names.back(), RtValue::FromTensor(inputs[i]));
  }
  std::vector<std::string> outs;
  for (int i = 0; i < outputs; ++i) outs.push_back("y" + std::to_string(i));
  g.Node(op, names, outs, std::move(attrs));
  g.graph().node.back().domain = domain;
  for (const std::string& o : outs) g.Output(o, 0);
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(g.Build(), 20);
  pb::OperatorSetIdProto ml;
  ml.domain = "ai.onnx.ml";
  ml.version = ml_opset;
  loaded.proto.opset_import.push_back(ml);
  auto session = runner::Session::Create(std::move(loaded));
  if (!session.ok()) return session.status();
  return (*session)->Run(std::move(feeds));
}

// --- Strings ---

TEST(StringNormalizerTest, DropsStopwordsCaseInsensitivelyAndUppercases) {
  auto out = RunOp("StringNormalizer", {Strings({1, 4}, {"Monday", "tuesday", "MONDAY", "ok"})},
                   {AttrStrings("stopwords", {"monday"}), AttrString("case_change_action", "UPPER")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().shape(), std::vector<int64_t>({1, 2}));
  EXPECT_EQ((*out)[0].tensor().strings(), std::vector<std::string>({"TUESDAY", "OK"}));
}

TEST(StringNormalizerTest, ChangesTheCaseOfNonAsciiLettersAndKeepsBrokenBytes) {
  // "ÉCOLE", "ΣΟΦΙΑ", "naïve", a lone continuation byte, "Straße".
  const std::vector<std::string> in = {
      "\xC3\x89"
      "COLE",
      "\xCE\xA3\xCE\x9F\xCE\xA6\xCE\x99\xCE\x91", "na\xC3\xAFve", "a\x80Z",
      "Stra\xC3\x9F"
      "e"};
  auto lower = RunOp("StringNormalizer", {Strings({5}, in)}, {AttrString("case_change_action", "LOWER")});
  ASSERT_TRUE(lower.ok()) << lower.status();
  EXPECT_EQ((*lower)[0].tensor().strings(),
            std::vector<std::string>({"\xC3\xA9"
                                      "cole",
                                      "\xCF\x83\xCE\xBF\xCF\x86\xCE\xB9\xCE\xB1", "na\xC3\xAFve", "a\x80z",
                                      "stra\xC3\x9F"
                                      "e"}));
  auto upper = RunOp("StringNormalizer", {Strings({5}, in)}, {AttrString("case_change_action", "UPPER")});
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ((*upper)[0].tensor().strings()[2], "NA\xC3\x8FVE");
  // Stopwords compare case-insensitively beyond ASCII too.
  auto dropped = RunOp("StringNormalizer", {Strings({2}, {"\xC3\x89T\xC3\x89", "x"})},
                       {AttrStrings("stopwords", {"\xC3\xA9t\xC3\xA9"})});
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ((*dropped)[0].tensor().strings(), std::vector<std::string>({"x"}));
}

TEST(StringNormalizerTest, AllDroppedGivesOneEmptyString) {
  auto out = RunOp("StringNormalizer", {Strings({2}, {"a", "a"})},
                   {AttrStrings("stopwords", {"a"}), AttrInt("is_case_sensitive", 1)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().strings(), std::vector<std::string>({""}));
}

TEST(StringNormalizerTest, RejectsOtherShapesAndActions) {
  auto out = RunOp("StringNormalizer", {Strings({2, 2}, {"a", "b", "c", "d"})});
  EXPECT_FALSE(out.ok());
  out = RunOp("StringNormalizer", {Strings({1}, {"a"})}, {AttrString("case_change_action", "TITLE")});
  EXPECT_FALSE(out.ok());
}

TEST(StringConcatTest, Broadcasts) {
  auto out = RunOp("StringConcat", {Strings({2}, {"a", "b"}), Strings({}, {"!"})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().strings(), std::vector<std::string>({"a!", "b!"}));
}

TEST(StringSplitTest, WhitespaceAndDelimiterModes) {
  auto out = RunOp("StringSplit", {Strings({2}, {"  a b  c ", ""})}, {}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().shape(), std::vector<int64_t>({2, 3}));
  EXPECT_EQ((*out)[0].tensor().strings(), std::vector<std::string>({"a", "b", "c", "", "", ""}));
  EXPECT_EQ(Values<int64_t>((*out)[1].tensor()), std::vector<int64_t>({3, 0}));
  out = RunOp("StringSplit", {Strings({1}, {"a,,b,c"})}, {AttrString("delimiter", ","), AttrInt("maxsplit", 2)}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().strings(), std::vector<std::string>({"a", "", "b,c"}));
}

TEST(RegexFullMatchTest, MatchesWholeStrings) {
  auto out = RunOp("RegexFullMatch", {Strings({3}, {"abc", "abcd", "x"})}, {AttrString("pattern", "a[b-c]+")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint8_t>((*out)[0].tensor()), std::vector<uint8_t>({1, 0, 0}));
}

TEST(RegexFullMatchTest, BadPatternIsAnError) {
  auto out = RunOp("RegexFullMatch", {Strings({1}, {"a"})}, {AttrString("pattern", "a(")});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("invalid pattern"), absl::string_view::npos) << out.status();
}

TEST(RegexFullMatchTest, NestedQuantifiersStayPolynomial) {
  auto out = RunOp("RegexFullMatch", {Strings({1}, {std::string(40, 'a') + "b"})}, {AttrString("pattern", "(a*)*c")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint8_t>((*out)[0].tensor()), std::vector<uint8_t>({0}));
}

// --- TfIdfVectorizer ---

TEST(TfIdfVectorizerTest, CountsUnigramsOnceAndSkipBigrams) {
  // pool: unigrams {1, 2}, bigram {(1, 2)}; X = [1, 3, 2, 1, 2].
  std::vector<pb::AttributeProto> attrs = {AttrInt("min_gram_length", 1), AttrInt("max_gram_length", 2),
                                           AttrInt("max_skip_count", 1), AttrString("mode", "TF"),
                                           AttrInts("ngram_counts", {0, 2}), AttrInts("ngram_indexes", {0, 1, 2}),
                                           AttrInts("pool_int64s", {1, 2, 1, 2})};
  auto out = RunOp("TfIdfVectorizer", {Int64s({5}, {1, 3, 2, 1, 2})}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  // unigrams: 1 twice, 2 twice; bigram (1,2): adjacent once (positions 3,4), skip 1 once (0,2).
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({2, 2, 2}));
}

TEST(TfIdfVectorizerTest, IdfUsesWeightsWhereCountsArePositive) {
  std::vector<pb::AttributeProto> attrs = {AttrInt("min_gram_length", 1), AttrInt("max_gram_length", 1),
                                           AttrInt("max_skip_count", 0), AttrString("mode", "IDF"),
                                           AttrInts("ngram_counts", {0}), AttrInts("ngram_indexes", {1, 0}),
                                           AttrStrings("pool_strings", {"a", "b"}), AttrFloats("weights", {0.5f, 3})};
  auto out = RunOp("TfIdfVectorizer", {Strings({2, 2}, {"a", "a", "c", "b"})}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().shape(), std::vector<int64_t>({2, 2}));
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({0, 3, 0.5f, 0}));
}

TEST(TfIdfVectorizerTest, PoolThatDoesNotSplitIntoNgramsIsAnError) {
  std::vector<pb::AttributeProto> attrs = {AttrInt("min_gram_length", 2), AttrInt("max_gram_length", 2),
                                           AttrInt("max_skip_count", 0), AttrString("mode", "TF"),
                                           AttrInts("ngram_counts", {0, 0}), AttrInts("ngram_indexes", {0}),
                                           AttrInts("pool_int64s", {1, 2, 3})};
  auto out = RunOp("TfIdfVectorizer", {Int64s({2}, {1, 2})}, attrs);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("ngram_counts"), absl::string_view::npos) << out.status();
}

// --- ai.onnx.ml ---

TEST(LabelEncoderTest, StringsToInt64WithDefault) {
  auto out = RunOp("LabelEncoder", {Strings({3}, {"b", "x", "a"})},
                   {AttrStrings("keys_strings", {"a", "b"}), AttrInts("values_int64s", {10, 20}), AttrInt("default_int64", 7)},
                   1, "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({20, 7, 10}));
}

TEST(LabelEncoderTest, FloatKeysMatchNaNAndNegativeZero) {
  auto out = RunOp("LabelEncoder", {Floats({2}, {std::nanf(""), -0.0f})},
                   {AttrFloats("keys_floats", {std::nanf(""), 0.0f}), AttrStrings("values_strings", {"nan", "zero"})}, 1,
                   "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().strings(), std::vector<std::string>({"nan", "zero"}));
}

TEST(LabelEncoderTest, KeyAndValueCountsMustMatch) {
  auto out = RunOp("LabelEncoder", {Strings({1}, {"a"})},
                   {AttrStrings("keys_strings", {"a", "b"}), AttrInts("values_int64s", {1})}, 1, "ai.onnx.ml");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ArrayFeatureExtractorTest, PicksColumnsAndRejectsBadIndices) {
  auto out = RunOp("ArrayFeatureExtractor", {Floats({2, 3}, {1, 2, 3, 4, 5, 6}), Int64s({2}, {2, 0})}, {}, 1, "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({3, 1, 6, 4}));
  out = RunOp("ArrayFeatureExtractor", {Floats({3}, {1, 2, 3}), Int64s({1}, {1})}, {}, 1, "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().shape(), std::vector<int64_t>({1, 1}));
  out = RunOp("ArrayFeatureExtractor", {Floats({3}, {1, 2, 3}), Int64s({1}, {3})}, {}, 1, "ai.onnx.ml");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kOutOfRange);
}

TEST(BinarizerTest, ComparesWithTheThreshold) {
  auto out = RunOp("Binarizer", {Floats({3}, {-1, 0.5f, 2})}, {AttrFloat("threshold", 0.5f)}, 1, "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({0, 0, 1}));
}

// One tree: node 0: x[0] <= 1 ? leaf 0 (target 0, 10) : node 1; node 1: x[1] == 5 ? leaf 1 (target 1, 20) : leaf 2 (target 1, 30).
std::vector<pb::AttributeProto> TreeAttrs() {
  pb::TensorProto modes;
  modes.data_type = pb::kUint8;
  modes.dims = {2};
  modes.int32_data = {0, 4};
  return {AttrInts("nodes_featureids", {0, 1}), AttrFloatTensor("nodes_splits", {1, 5}), AttrTensor("nodes_modes", modes),
          AttrInts("nodes_truenodeids", {0, 1}), AttrInts("nodes_falsenodeids", {1, 2}), AttrInts("nodes_trueleafs", {1, 1}),
          AttrInts("nodes_falseleafs", {0, 1}), AttrInts("leaf_targetids", {0, 1, 1}),
          AttrFloatTensor("leaf_weights", {10, 20, 30}), AttrInts("tree_roots", {0}), AttrInt("n_targets", 2)};
}

TEST(TreeEnsembleTest, RoutesRowsToLeaves) {
  auto out = RunOp("TreeEnsemble", {Floats({3, 2}, {0, 0, 2, 5, 2, 6})}, TreeAttrs(), 1, "ai.onnx.ml", 5);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({10, 0, 0, 20, 0, 30}));
}

TEST(TreeEnsembleTest, FeatureOutsideTheInputIsAnError) {
  auto out = RunOp("TreeEnsemble", {Floats({1, 1}, {0})}, TreeAttrs(), 1, "ai.onnx.ml", 5);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kOutOfRange) << out.status();
}

TEST(TreeEnsembleTest, CyclesAreAnError) {
  std::vector<pb::AttributeProto> attrs = TreeAttrs();
  attrs[6] = AttrInts("nodes_falseleafs", {0, 0});  // node 1 false branch -> node 2: out of range
  auto out = RunOp("TreeEnsemble", {Floats({1, 2}, {2, 6})}, attrs, 1, "ai.onnx.ml", 5);
  ASSERT_FALSE(out.ok());
  attrs = TreeAttrs();
  attrs[4] = AttrInts("nodes_falsenodeids", {1, 0});  // node 1 false -> node 0
  attrs[6] = AttrInts("nodes_falseleafs", {0, 0});
  out = RunOp("TreeEnsemble", {Floats({1, 2}, {2, 6})}, attrs, 1, "ai.onnx.ml", 5);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("cycle"), absl::string_view::npos) << out.status();
}

TEST(TreeEnsembleTest, MinAndMaxOfATargetNoLeafFeedsAreZero) {
  // Row [0, 0] reaches leaf 0 (target 0) only: target 1 gets no leaf.
  for (int64_t aggregate : {2, 3}) {
    std::vector<pb::AttributeProto> attrs = TreeAttrs();
    attrs.push_back(AttrInt("aggregate_function", aggregate));
    auto out = RunOp("TreeEnsemble", {Floats({2, 2}, {0, 0, 2, 5})}, attrs, 1, "ai.onnx.ml", 5);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({10, 0, 0, 20}));
  }
}

TEST(TreeEnsembleTest, MemberBranchSendsNaNWhereMissingValuesGo) {
  // Node 0: x[0] in {1, 3} ? leaf 0 (1) : leaf 1 (2).
  auto attrs = [](int64_t missing_true) {
    pb::TensorProto modes;
    modes.data_type = pb::kUint8;
    modes.dims = {1};
    modes.int32_data = {6};
    return std::vector<pb::AttributeProto>{AttrInts("nodes_featureids", {0}),
                                           AttrFloatTensor("nodes_splits", {0}),
                                           AttrTensor("nodes_modes", modes),
                                           AttrInts("nodes_truenodeids", {0}),
                                           AttrInts("nodes_falsenodeids", {1}),
                                           AttrInts("nodes_trueleafs", {1}),
                                           AttrInts("nodes_falseleafs", {1}),
                                           AttrInts("nodes_missing_value_tracks_true", {missing_true}),
                                           AttrFloatTensor("membership_values", {1, 3}),
                                           AttrInts("leaf_targetids", {0, 0}),
                                           AttrFloatTensor("leaf_weights", {1, 2}),
                                           AttrInts("tree_roots", {0}),
                                           AttrInt("n_targets", 1)};
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto out = RunOp("TreeEnsemble", {Floats({3, 1}, {3, 2, nan})}, attrs(0), 1, "ai.onnx.ml", 5);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({1, 2, 2}));
  out = RunOp("TreeEnsemble", {Floats({3, 1}, {3, 2, nan})}, attrs(1), 1, "ai.onnx.ml", 5);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({1, 2, 1}));
}

TEST(TreeEnsembleRegressorTest, LeavesFeedingSeveralTargets) {
  // Two trees, each x[0] <= 1 ? leaf 1 : leaf 2, every leaf feeding both
  // targets (sklearn's multi-output regressors): tree 0 leaves (1, 2) and
  // (3, 4), tree 1 leaves (5, 6) and (7, 8).
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {
      {"SUM", {6, 8, 10, 12}}, {"AVERAGE", {3, 4, 5, 6}}, {"MIN", {1, 2, 3, 4}}, {"MAX", {5, 6, 7, 8}}};
  for (const auto& [aggregate, expected] : cases) {
    SCOPED_TRACE(aggregate);
    std::vector<pb::AttributeProto> attrs = {
        AttrInts("nodes_treeids", {0, 0, 0, 1, 1, 1}),
        AttrInts("nodes_nodeids", {0, 1, 2, 0, 1, 2}),
        AttrInts("nodes_featureids", {0, 0, 0, 0, 0, 0}),
        AttrStrings("nodes_modes", {"BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF"}),
        AttrFloats("nodes_values", {1, 0, 0, 1, 0, 0}),
        AttrInts("nodes_truenodeids", {1, 0, 0, 1, 0, 0}),
        AttrInts("nodes_falsenodeids", {2, 0, 0, 2, 0, 0}),
        AttrInts("target_treeids", {0, 0, 0, 0, 1, 1, 1, 1}),
        AttrInts("target_nodeids", {1, 1, 2, 2, 1, 1, 2, 2}),
        AttrInts("target_ids", {0, 1, 0, 1, 0, 1, 0, 1}),
        AttrFloats("target_weights", {1, 2, 3, 4, 5, 6, 7, 8}),
        AttrInt("n_targets", 2),
        AttrString("aggregate_function", aggregate)};
    auto out = RunOp("TreeEnsembleRegressor", {Floats({2, 1}, {0, 2})}, attrs, 1, "ai.onnx.ml", 3);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values<float>((*out)[0].tensor()), expected);
  }
}

TEST(NormalizerTest, MaxAndL2Rows) {
  auto out = RunOp("Normalizer", {Floats({2, 2}, {-2, 1, 3, 4})}, {AttrString("norm", "MAX")}, 1, "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({-1, 0.5f, 0.75f, 1}));
  out = RunOp("Normalizer", {Floats({2}, {3, 4})}, {AttrString("norm", "L2")}, 1, "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR((*out)[0].tensor().data<float>()[0], 0.6f, 1e-6);
  EXPECT_NEAR((*out)[0].tensor().data<float>()[1], 0.8f, 1e-6);
  out = RunOp("Normalizer", {Floats({2}, {3, 4})}, {AttrString("norm", "L3")}, 1, "ai.onnx.ml");
  EXPECT_FALSE(out.ok());
}

TEST(ScalerTest, PerColumnOffsetAndScale) {
  auto out = RunOp("Scaler", {Int64s({2, 2}, {1, 2, 3, 4})}, {AttrFloats("offset", {1, 0}), AttrFloats("scale", {2})}, 1,
                   "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({0, 4, 4, 8}));
  out = RunOp("Scaler", {Floats({1, 2}, {1, 2})}, {AttrFloats("offset", {1, 2, 3})}, 1, "ai.onnx.ml");
  EXPECT_FALSE(out.ok());
}

TEST(ImputerTest, ReplacesNaNPerColumn) {
  auto out = RunOp("Imputer", {Floats({2, 2}, {std::nanf(""), 1, 2, std::nanf("")})},
                   {AttrFloats("imputed_value_floats", {10, 20}), AttrFloat("replaced_value_float", std::nanf(""))}, 1,
                   "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({10, 1, 2, 20}));
}

TEST(OneHotEncoderTest, EncodesAndRejectsUnknownWithoutZeros) {
  auto out = RunOp("OneHotEncoder", {Int64s({2}, {3, 1})}, {AttrInts("cats_int64s", {1, 3})}, 1, "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().shape(), std::vector<int64_t>({2, 2}));
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({0, 1, 1, 0}));
  out = RunOp("OneHotEncoder", {Int64s({1}, {2})}, {AttrInts("cats_int64s", {1, 3}), AttrInt("zeros", 0)}, 1, "ai.onnx.ml");
  EXPECT_FALSE(out.ok());
}

TEST(LinearRegressorTest, TwoTargets) {
  auto out = RunOp("LinearRegressor", {Floats({1, 2}, {1, 2})},
                   {AttrFloats("coefficients", {1, 1, 2, -1}), AttrFloats("intercepts", {0.5f, 0}), AttrInt("targets", 2)}, 1,
                   "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({3.5f, 0}));
  out = RunOp("LinearRegressor", {Floats({1, 2}, {1, 2})}, {AttrFloats("coefficients", {1, 1, 2})}, 1, "ai.onnx.ml");
  EXPECT_FALSE(out.ok());
}

TEST(LinearClassifierTest, BinaryScoresBecomeTwoColumns) {
  auto out = RunOp("LinearClassifier", {Floats({2, 1}, {1, -1})},
                   {AttrFloats("coefficients", {2}), AttrInts("classlabels_ints", {7, 9})}, 2, "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int64_t>((*out)[0].tensor()), std::vector<int64_t>({9, 7}));
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({-2, 2, 2, -2}));
}

TEST(ZipMapTest, OneMapPerRow) {
  auto out = RunOp("ZipMap", {Floats({2, 2}, {1, 2, 3, 4})}, {AttrStrings("classlabels_strings", {"a", "b"})}, 1,
                   "ai.onnx.ml");
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE((*out)[0].is_sequence());
  ASSERT_EQ((*out)[0].elements().size(), 2u);
  const RtValue& m = (*out)[0].elements()[1];
  ASSERT_TRUE(m.is_map());
  EXPECT_EQ(m.map_keys().strings(), std::vector<std::string>({"a", "b"}));
  EXPECT_EQ(m.map_values().elements()[1].tensor().data<float>()[0], 4);
}

// --- ai.onnx.preview.training ---

absl::StatusOr<std::vector<RtValue>> RunTraining(const std::string& op, const std::vector<Tensor>& inputs,
                                                 std::vector<pb::AttributeProto> attrs, int outputs) {
  GraphBuilder g("g");
  std::vector<std::string> names, outs;
  std::vector<std::pair<std::string, RtValue>> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    g.Input(names.back(), inputs[i].dtype());
    feeds.emplace_back(names.back(), RtValue::FromTensor(inputs[i]));
  }
  for (int i = 0; i < outputs; ++i) outs.push_back("y" + std::to_string(i));
  g.Node(op, names, outs, std::move(attrs));
  g.graph().node.back().domain = "ai.onnx.preview.training";
  for (const std::string& o : outs) g.Output(o, 0);
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(g.Build(), 17);
  pb::OperatorSetIdProto training;
  training.domain = "ai.onnx.preview.training";
  training.version = 1;
  loaded.proto.opset_import.push_back(training);
  auto session = runner::Session::Create(std::move(loaded));
  if (!session.ok()) return session.status();
  return (*session)->Run(std::move(feeds));
}

TEST(TrainingTest, AdagradStep) {
  // g = 2, H' = 0 + 4, X' = 1 - 0.5 * 2 / (2 + 0) = 0.5 (epsilon 0).
  auto out = RunTraining("Adagrad", {Floats({}, {0.5f}), Int64s({}, {0}), Floats({1}, {1}), Floats({1}, {2}), Floats({1}, {0})},
                         {AttrFloat("epsilon", 0)}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({0.5f}));
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({4}));
}

TEST(TrainingTest, MomentumNesterovAndArityErrors) {
  // V' = 0.5 * 1 + 1 * 2 (T = 0: beta taken as 1) = 2.5; X' = 1 - 0.1 * (2 + 0.5 * 2.5) = 0.675.
  auto out = RunTraining("Momentum", {Floats({}, {0.1f}), Int64s({}, {0}), Floats({1}, {1}), Floats({1}, {2}), Floats({1}, {1})},
                         {AttrFloat("alpha", 0.5f), AttrFloat("beta", 0.3f), AttrString("mode", "nesterov")}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR((*out)[0].tensor().data<float>()[0], 0.675f, 1e-6);
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({2.5f}));
  out = RunTraining("Momentum", {Floats({}, {0.1f}), Int64s({}, {0}), Floats({1}, {1}), Floats({1}, {2})}, {}, 2);
  EXPECT_FALSE(out.ok());
}

}  // namespace
}  // namespace onnxkit::testing
