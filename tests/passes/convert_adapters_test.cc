// Tests of `onnxkit convert`'s adapters: each family fires, its result
// reproduces the original's outputs on the reference backend, and a node
// that cannot be converted blocks with its name and reason.
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
                                        .Node("Unsqueeze", {"x", "axes"}, {"u"}, {}, "unsq")
                                        .Node("Softmax", {"x"}, {"s"}, {AttrInt("axis", 0)}, "soft")
                                        .Output("u", pb::kFloat)
                                        .Output("s", pb::kFloat, {{2, 3}})
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
