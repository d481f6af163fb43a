// Tests of `onnxkit convert`'s adapters: each family fires, its result
// reproduces the original's outputs on the reference backend, and a node
// that cannot be converted blocks with its name and reason.
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
using passes::convert::ConvertResult;

ConvertResult ConvertTo(const pb::ModelProto& m, int64_t opset) {
  io::LoadedModel loaded;
  loaded.proto = m;
  passes::convert::ConvertOptions o;
  o.target_opset = opset;
  o.verify = false;
  auto r = passes::convert::Convert(loaded, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ConvertResult{};
}

TEST(ConvertAdaptersTest, ReduceMeanAxesUpAndDown) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3, 4}})
                                        .Node("ReduceMean", {"x"}, {"y"}, {AttrInts("axes", {1})}, "rm")
                                        .Output("y", pb::kFloat, {{2, 1, 4}})
                                        .Build(),
                                    13, 7);
  Feeds feeds = {{"x", RandomFloats({2, 3, 4}, 1)}};
  ConvertResult up = ConvertTo(m, 18);
  ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
  EXPECT_EQ(up.steps["ReduceMean 13->18 axes-attr-to-input"], 1);
  EXPECT_EQ(up.ir_after, 8);
  ExpectSameOutputs(m, up.model, feeds);
  ConvertResult down = ConvertTo(up.model, 11);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(down.steps["ReduceMean 18->13 axes-input-to-attr"], 1);
  ExpectSameOutputs(m, down.model, feeds);
}

TEST(ConvertAdaptersTest, ClipAttrsBecomeInputsAndBack) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{8}})
                                        .Node("Clip", {"x"}, {"y"}, {AttrFloat("min", -0.2f), AttrFloat("max", 0.3f)})
                                        .Output("y", pb::kFloat, {{8}})
                                        .Build(),
                                    9, 4);
  Feeds feeds = {{"x", RandomFloats({8}, 2)}};
  ConvertResult up = ConvertTo(m, 13);
  ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
  EXPECT_EQ(OpCount(up.model, "Clip"), 1);
  ExpectSameOutputs(m, up.model, feeds);
  ConvertResult down = ConvertTo(up.model, 9);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  ExpectSameOutputs(m, down.model, feeds);
}

TEST(ConvertAdaptersTest, SoftmaxUpFlattensANonLastAxis) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3, 4}})
                                        .Node("Softmax", {"x"}, {"y"}, {AttrInt("axis", 1)})
                                        .Output("y", pb::kFloat, {{2, 3, 4}})
                                        .Build(),
                                    11, 6);
  ConvertResult up = ConvertTo(m, 13);
  ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
  EXPECT_EQ(OpCount(up.model, "Flatten"), 1);
  ExpectSameOutputs(m, up.model, {{"x", RandomFloats({2, 3, 4}, 3)}});
}

TEST(ConvertAdaptersTest, GeluAndHardSwishExpandGoingDown) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 5}})
                                        .Node("Gelu", {"x"}, {"g"})
                                        .Node("HardSwish", {"g"}, {"y"})
                                        .Output("y", pb::kFloat, {{2, 5}})
                                        .Build(),
                                    20, 9);
  ConvertResult down = ConvertTo(m, 11);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(OpCount(down.model, "Gelu"), 0);
  EXPECT_EQ(OpCount(down.model, "Erf"), 1);
  EXPECT_EQ(OpCount(down.model, "HardSigmoid"), 1);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({2, 5}, 4)}});
}

TEST(ConvertAdaptersTest, LayerNormExpandsWithKnownRank) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 6}})
                                        .Initializer(RawFloatTensor("s", {6}, 1))
                                        .Initializer(RawFloatTensor("b", {6}, -2))
                                        .Node("LayerNormalization", {"x", "s", "b"}, {"y"}, {AttrInt("axis", -1)})
                                        .Output("y", pb::kFloat, {{2, 6}})
                                        .Build(),
                                    17, 8);
  ConvertResult down = ConvertTo(m, 13);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(OpCount(down.model, "ReduceMean"), 2);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({2, 6}, 5)}}, 1e-4, 1e-4);
}

TEST(ConvertAdaptersTest, BlockedNodesAreAllNamed) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Input("axes", pb::kInt64, {{1}})
                                        .Input("z", pb::kFloat)
                                        .Node("Unsqueeze", {"x", "axes"}, {"u"}, {}, "unsq")
                                        .Node("Softmax", {"z"}, {"s"}, {AttrInt("axis", 0)}, "soft")
                                        .Output("u", pb::kFloat)
                                        .Output("s", pb::kFloat)
                                        .Build(),
                                    13, 7);
  ConvertResult down = ConvertTo(m, 11);
  ASSERT_EQ(down.blockers.size(), 2u);
  EXPECT_THAT(down.blockers[0].node, HasSubstr("unsq"));
  EXPECT_THAT(down.blockers[0].reason, HasSubstr("not constant"));
  EXPECT_THAT(down.blockers[1].node, HasSubstr("soft"));
}

TEST(ConvertAdaptersTest, IfBodiesAreConverted) {
  pb::ModelProto m = IfModelWithOuterRefs();
  ConvertResult up = ConvertTo(m, 21);
  ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
  EXPECT_GT(up.steps.size(), 0u);
  EXPECT_EQ(up.model.opset_import[0].version, 21);
  ConvertResult down = ConvertTo(m, 9);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
}

TEST(ConvertAdaptersTest, TypesTheOlderOpLacksRunWidenedBetweenCasts) {
  // Max-8 and Greater-7 know only floats: int8 and uint8 run in float,
  // which holds every value, and come back through a Cast.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("a", pb::kInt8, {{6}})
                                        .Input("b", pb::kInt8, {{6}})
                                        .Node("Max", {"a", "b"}, {"y"}, {}, "max")
                                        .Node("Greater", {"a", "b"}, {"g"}, {}, "gt")
                                        .Node("Div", {"a", "b"}, {"d"}, {}, "div")
                                        .Output("y", pb::kInt8, {{6}})
                                        .Output("g", pb::kBool, {{6}})
                                        .Output("d", pb::kInt8, {{6}})
                                        .Build(),
                                    13, 7);
  Feeds feeds = {{"a", Int8s({6}, {-128, -7, 0, 5, 127, 3})}, {"b", Int8s({6}, {1, -7, 2, -5, 126, 4})}};
  ConvertResult down = ConvertTo(m, 7);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(down.steps["Max 12->11 widen-types"], 1);
  EXPECT_EQ(down.steps["Div 13->12 widen-types"], 1);  // Div-7 lacks int8: int32
  EXPECT_GE(OpCount(down.model, "Cast"), 4);
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, feeds, 0, 0);
}

TEST(ConvertAdaptersTest, WideningTheFloatOnlyOpsRefusesIntegers) {
  // PRelu-7 has no integer form, and float results would not be exact.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("a", pb::kInt32, {{3}})
                                        .Input("b", pb::kInt32, {{3}})
                                        .Node("PRelu", {"a", "b"}, {"y"}, {}, "prelu")
                                        .Output("y", pb::kInt32, {{3}})
                                        .Build(),
                                    13, 7);
  ConvertResult down = ConvertTo(m, 7);
  ASSERT_EQ(down.blockers.size(), 1u);
  EXPECT_THAT(down.blockers[0].reason, HasSubstr("not allowed by PRelu-7"));
}

TEST(ConvertAdaptersTest, NonFloatConstantBecomesAnInitializerBelowNine) {
  pb::TensorProto shape;
  shape.data_type = pb::kInt64;
  shape.dims = {2};
  shape.int64_data = {3, 2};
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{6}})
                                        .Node("Constant", {}, {"shape"}, {AttrTensor("value", shape)}, "c")
                                        .Node("Reshape", {"x", "shape"}, {"y"})
                                        .Output("y", pb::kFloat, {{3, 2}})
                                        .Build(),
                                    13, 7);
  ConvertResult down = ConvertTo(m, 8);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(down.steps["Constant 9->1 constant-to-initializer"], 1);
  EXPECT_EQ(OpCount(down.model, "Constant"), 0);
  EXPECT_EQ(down.ir_after, 3);
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({6}, 8)}});
}

TEST(ConvertAdaptersTest, ClipWithFedBoundsBecomesMaxAndMin) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 4}})
                                        .Input("lo", pb::kFloat, {{}})
                                        .Input("hi", pb::kFloat, {{}})
                                        .Node("Clip", {"x", "lo", "hi"}, {"y"}, {}, "clip")
                                        .Output("y", pb::kFloat, {{2, 4}})
                                        .Build(),
                                    13, 7);
  Feeds feeds = {{"x", RandomFloats({2, 4}, 9)}, {"lo", Floats({}, {-0.25f})}, {"hi", Floats({}, {0.5f})}};
  ConvertResult down = ConvertTo(m, 9);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(OpCount(down.model, "Clip"), 0);
  EXPECT_EQ(OpCount(down.model, "Max"), 1);
  EXPECT_EQ(OpCount(down.model, "Min"), 1);
  ExpectSameOutputs(m, down.model, feeds);
  // Max and Min do not broadcast below 8: a scalar bound cannot go there.
  ConvertResult seven = ConvertTo(m, 7);
  ASSERT_FALSE(seven.blockers.empty());
  EXPECT_THAT(seven.blockers[0].reason, HasSubstr("does not broadcast"));
}

TEST(ConvertAdaptersTest, InferenceDropoutLosesItsSeedGoingDown) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{5}})
                                        .Node("Dropout", {"x"}, {"y"}, {AttrInt("seed", 7)}, "drop")
                                        .Output("y", pb::kFloat, {{5}})
                                        .Build(),
                                    13, 7);
  ConvertResult down = ConvertTo(m, 10);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({5}, 4)}});
}

TEST(ConvertAdaptersTest, LayerNormMeanAndInvStdDevOutputsSurviveTheExpansion) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{3, 4}})
                                        .Initializer(RawFloatTensor("s", {4}, 1))
                                        .Node("LayerNormalization", {"x", "s"}, {"y", "mean", "inv"},
                                              {AttrInt("axis", 1)})
                                        .Output("y", pb::kFloat, {{3, 4}})
                                        .Output("mean", pb::kFloat, {{3, 1}})
                                        .Output("inv", pb::kFloat, {{3, 1}})
                                        .Build(),
                                    17, 8);
  ConvertResult down = ConvertTo(m, 13);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(OpCount(down.model, "LayerNormalization"), 0);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({3, 4}, 6)}}, 1e-4, 1e-4);
}

TEST(ConvertAdaptersTest, SelectLastIndexBecomesAReversedArgMax) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 4}})
                                        .Node("ArgMax", {"x"}, {"y"}, {AttrInt("axis", 1), AttrInt("select_last_index", 1)})
                                        .Output("y", pb::kInt64, {{2, 1}})
                                        .Build(),
                                    13, 7);
  // Ties: the last maximum must win (index 3 and 2).
  Feeds feeds = {{"x", Floats({2, 4}, {5, 1, 0, 5, 2, 7, 7, -1})}};
  ConvertResult down = ConvertTo(m, 11);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(OpCount(down.model, "Slice"), 1);
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, feeds, 0, 0);
  // Slice has no step below 10: the reversal becomes a Gather there.
  ConvertResult nine = ConvertTo(m, 9);
  ASSERT_TRUE(nine.blockers.empty()) << nine.blockers[0].reason;
  EXPECT_EQ(OpCount(nine.model, "Gather"), 1);
  ExpectSameOutputs(m, nine.model, feeds, 0, 0);
}

TEST(ConvertAdaptersTest, IrVersionTable) {
  using passes::convert::IrVersionForOpset;
  EXPECT_EQ(IrVersionForOpset(7), 3);
  EXPECT_EQ(IrVersionForOpset(9), 4);
  EXPECT_EQ(IrVersionForOpset(11), 6);
  EXPECT_EQ(IrVersionForOpset(13), 7);
  EXPECT_EQ(IrVersionForOpset(17), 8);
  EXPECT_EQ(IrVersionForOpset(19), 9);
  EXPECT_EQ(IrVersionForOpset(21), 10);
}

}  // namespace
}  // namespace onnxkit::testing
