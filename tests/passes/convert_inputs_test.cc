// Tests of `onnxkit convert`'s attribute <-> input adapters (Pad, Slice,
// TopK, Split, Upsample/Resize) and of model-local functions: each fires and
// reproduces the original's outputs on the reference backend.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "passes/convert/convert.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;
using passes::convert::ConvertResult;

// Converts `m` to each of `targets` in turn, checking outputs after each.
void RoundTrip(const pb::ModelProto& m, std::vector<int64_t> targets, const Feeds& feeds) {
  pb::ModelProto cur = m;
  for (int64_t t : targets) {
    ConvertResult r = ConvertTo(cur, t);
    ASSERT_TRUE(r.blockers.empty()) << "opset " << t << ": " << r.blockers[0].node << " " << r.blockers[0].reason;
    ExpectSameOutputs(m, r.model, feeds);
    cur = r.model;
  }
}

TEST(ConvertInputsTest, PadSliceTopKSplitRoundTrip) {
  pb::ModelProto m = ModelFromGraph(
      GraphBuilder("g")
          .Input("x", pb::kFloat, {{4, 6}})
          .Node("Pad", {"x"}, {"p"}, {AttrInts("pads", {0, 1, 0, 1}), AttrFloat("value", 0.5f)})
          .Node("Slice", {"p"}, {"s"}, {AttrInts("starts", {1}), AttrInts("ends", {7}), AttrInts("axes", {1})})
          .Node("TopK", {"s"}, {"v", "i"}, {AttrInt("k", 2)})
          .Node("Split", {"s"}, {"a", "b"}, {AttrInt("axis", 1), AttrInts("split", {2, 4})})
          .Output("v", pb::kFloat, {{4, 2}})
          .Output("i", pb::kInt64, {{4, 2}})
          .Output("a", pb::kFloat, {{4, 2}})
          .Output("b", pb::kFloat, {{4, 4}})
          .Build(),
      9, 4);
  RoundTrip(m, {28, 13, 9}, {{"x", RandomFloats({4, 6}, 7)}});
}

TEST(ConvertInputsTest, UpsampleBecomesResizeAndBack) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{1, 1, 2, 3}})
                                        .Node("Upsample", {"x"}, {"y"},
                                              {AttrString("mode", "nearest"), AttrFloats("scales", {1, 1, 2, 2})})
                                        .Output("y", pb::kFloat, {{1, 1, 4, 6}})
                                        .Build(),
                                    7, 3);
  ConvertResult up = ConvertTo(m, 13);
  ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
  EXPECT_EQ(OpCount(up.model, "Resize"), 1);
  EXPECT_EQ(up.steps["Upsample 9->10 upsample-to-resize"], 1);
  Feeds feeds = {{"x", RandomFloats({1, 1, 2, 3}, 8)}};
  ExpectSameOutputs(m, up.model, feeds);
  RoundTrip(up.model, {8}, feeds);
}

TEST(ConvertInputsTest, FunctionBodiesConvertWithTheirOwnOpset) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Node("F", {"x"}, {"y"})
                                        .Output("y", pb::kFloat, {{2, 3}})
                                        .Build(),
                                    13, 8);
  m.graph->node[0].domain = "local";
  pb::OperatorSetIdProto local;
  local.domain = "local";
  local.version = 1;
  m.opset_import.push_back(local);
  pb::FunctionProto f;
  f.name = "F";
  f.domain = "local";
  f.input = {"a"};
  f.output = {"b"};
  f.node.push_back(MakeNode("ReduceSum", {"a"}, {"s"}, {AttrInt("keepdims", 1)}));
  f.node.push_back(MakeNode("Sub", {"a", "s"}, {"b"}));
  pb::OperatorSetIdProto onnx;
  onnx.version = 12;
  f.opset_import.push_back(onnx);
  m.functions.push_back(f);
  ConvertResult up = ConvertTo(m, 18);
  ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
  EXPECT_EQ(up.model.functions[0].opset_import[0].version, 18);
  EXPECT_TRUE(up.warnings.empty());
  EXPECT_EQ(up.steps["ReduceSum 11->13 axes-attr-to-input"], 1);
}

// A function F(a; axis, alpha) = LeakyRelu(Softmax(a, axis=@axis),
// alpha=@alpha) at opset 11, called with axis 0 and alpha 0.5.
pb::ModelProto ReferencingFunctionModel() {
  pb::ModelProto m =
      ModelFromGraph(GraphBuilder("g")
                         .Input("x", pb::kFloat, {{2, 3}})
                         .Node("F", {"x"}, {"y"}, {AttrInt("axis", 0), AttrFloat("alpha", 0.5f)})
                         .Output("y", pb::kFloat, {{2, 3}})
                         .Build(),
                     11, 8);
  m.graph->node[0].domain = "local";
  pb::OperatorSetIdProto local;
  local.domain = "local";
  local.version = 1;
  m.opset_import.push_back(local);
  auto ref = [](const std::string& name, pb::AttributeType type) {
    pb::AttributeProto a;
    a.name = name;
    a.type = type;
    a.ref_attr_name = name;
    return a;
  };
  pb::FunctionProto f;
  f.name = "F";
  f.domain = "local";
  f.input = {"a"};
  f.output = {"b"};
  f.attribute = {"axis", "alpha"};
  f.node.push_back(MakeNode("Softmax", {"a"}, {"s"}, {ref("axis", pb::kAttrInt)}, "soft"));
  f.node.push_back(MakeNode("LeakyRelu", {"s"}, {"b"}, {ref("alpha", pb::kAttrFloat)}, "leaky"));
  pb::OperatorSetIdProto onnx;
  onnx.version = 11;
  f.opset_import.push_back(onnx);
  m.functions.push_back(f);
  return m;
}

TEST(ConvertInputsTest, AttributesTakenFromTheCallerBlockTheStepsThatReadThem) {
  // Softmax 11 -> 13 must know the axis: blocked, not guessed.
  pb::ModelProto m = ReferencingFunctionModel();
  ConvertResult up = ConvertTo(m, 13);
  ASSERT_EQ(up.blockers.size(), 1u);
  EXPECT_EQ(up.blockers[0].graph, "function 'F'");
  EXPECT_THAT(
      up.blockers[0].reason,
      HasSubstr("attribute 'axis' takes the function's attribute 'axis', whose value differs per call"));
  // Steps that carry attributes over as they are keep the references.
  m.functions[0].node.erase(m.functions[0].node.begin());
  m.functions[0].node[0].input = {"a"};
  ConvertResult leaky = ConvertTo(m, 16);
  ASSERT_TRUE(leaky.blockers.empty()) << leaky.blockers[0].reason;
  ASSERT_EQ(leaky.model.functions[0].node.size(), 1u);
  EXPECT_EQ(leaky.model.functions[0].node[0].attribute[0].ref_attr_name, "alpha");
  ExpectSameOutputs(m, leaky.model, {{"x", RandomFloats({2, 3}, 9)}});
}

TEST(ConvertInputsTest, SequencesBlockOlderVersionsThatTakeTensorsOnly) {
  // Identity takes sequences from opset 14: going down to 13 blocks.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2}})
                                        .Node("SequenceConstruct", {"x", "x"}, {"s"})
                                        .Node("Identity", {"s"}, {"t"}, {}, "id")
                                        .Node("ConcatFromSequence", {"t"}, {"y"}, {AttrInt("axis", 0)})
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    16, 8);
  ConvertResult down = ConvertTo(m, 13);
  ASSERT_EQ(down.blockers.size(), 1u);
  EXPECT_THAT(down.blockers[0].reason, HasSubstr("of type seq(tensor(float)) is not allowed by Identity-13"));
  ConvertResult fourteen = ConvertTo(m, 14);
  EXPECT_TRUE(fourteen.blockers.empty()) << fourteen.blockers[0].reason;
}

}  // namespace
}  // namespace onnxkit::testing
