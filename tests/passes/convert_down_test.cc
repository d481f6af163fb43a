// Tests of the down-conversions that rewrite a node with older ops
// (passes/convert/adapters_down.cc and the Gelu tanh expansion): each fires,
// reproduces the original's outputs on the reference backend, and refuses
// what it cannot show to be the same.
#include <array>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "passes/convert/convert.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "runner/reference/float_types.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;
using passes::convert::ConvertResult;

std::string FirstBlocker(const ConvertResult& r) { return r.blockers.empty() ? "" : r.blockers[0].reason; }

TEST(ConvertDownTest, SoftmaxFamilyOnANonLastAxisRunsBetweenTransposes) {
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    for (int64_t axis : {0, 1, -2}) {
      SCOPED_TRACE(std::string(op) + " axis " + std::to_string(axis));
      pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                            .Input("x", pb::kFloat, {{2, 3, 4}})
                                            .Node(op, {"x"}, {"y"}, {AttrInt("axis", axis)})
                                            .Output("y", pb::kFloat, {{2, 3, 4}})
                                            .Build(),
                                        13, 7);
      ConvertResult down = ConvertTo(m, 11);
      ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
      EXPECT_EQ(OpCount(down.model, "Transpose"), 2);
      ExpectValid(down.model);
      ExpectSameOutputs(m, down.model, {{"x", RandomFloats({2, 3, 4}, 11)}});
    }
  }
}

TEST(ConvertDownTest, SoftmaxLastAxisNeedsNoTranspose) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Node("Softmax", {"x"}, {"y"}, {AttrInt("axis", 1)})
                                        .Output("y", pb::kFloat, {{2, 3}})
                                        .Build(),
                                    13, 7);
  ConvertResult down = ConvertTo(m, 11);
  ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
  EXPECT_EQ(OpCount(down.model, "Transpose"), 0);
}

TEST(ConvertDownTest, SoftmaxOfUnknownRankBlocks) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat)
                                        .Node("Softmax", {"x"}, {"y"}, {AttrInt("axis", 0)}, "soft")
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    13, 7);
  ConvertResult down = ConvertTo(m, 11);
  ASSERT_EQ(down.blockers.size(), 1u);
  EXPECT_THAT(down.blockers[0].node, HasSubstr("soft"));
  EXPECT_THAT(down.blockers[0].reason, HasSubstr("non-last axis"));
}

// ONNX Runtime's ai.onnx SimplifiedLayerNormalization has no ONNX schema:
// the blocker says how to write it as standard ops.
TEST(ConvertDownTest, OnnxRuntimeLayerNormalizationBlocksWithTheWayOut) {
  pb::ModelProto m =
      ModelFromGraph(GraphBuilder("g")
                         .Input("x", pb::kFloat, {{2, 4}})
                         .Input("gamma", pb::kFloat, {{4}})
                         .Node("SimplifiedLayerNormalization", {"x", "gamma"}, {"y"}, {}, "rms")
                         .Output("y", pb::kFloat, {{2, 4}})
                         .Build(),
                     21);
  ConvertResult down = ConvertTo(m, 17);
  ASSERT_EQ(down.blockers.size(), 1u);
  EXPECT_THAT(down.blockers[0].reason, HasSubstr("is unknown at opset 21"));
  EXPECT_THAT(down.blockers[0].reason, HasSubstr("--passes lower-contrib"));
}

TEST(ConvertDownTest, BlockerLabelsIndexTheGraphAsGiven) {
  // The first Softmax's adapter inserts two Transposes before the second:
  // the unnamed blocked node is still #1, not #3.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3, 4}})
                                        .Input("z", pb::kFloat)
                                        .Node("Softmax", {"x"}, {"a"}, {AttrInt("axis", 1)})
                                        .Node("Softmax", {"z"}, {"b"}, {AttrInt("axis", 0)})
                                        .Output("a", pb::kFloat, {{2, 3, 4}})
                                        .Output("b", pb::kFloat)
                                        .Build(),
                                    13, 7);
  ConvertResult down = ConvertTo(m, 11);
  ASSERT_EQ(down.blockers.size(), 1u);
  EXPECT_EQ(down.blockers[0].node, "#1 (Softmax)");
}

TEST(ConvertDownTest, IfWithBranchesOfDifferentShapesBlocksBelow11) {
  auto model = [](std::vector<int64_t> else_dims) {
    GraphBuilder then_b("then");
    then_b.Node("Identity", {"x"}, {"t"}).Output("t", pb::kFloat, {{2, 3}});
    GraphBuilder else_b("else");
    else_b.Node("Identity", {"x"}, {"e"}).Output("e", pb::kFloat, else_dims);
    return ModelFromGraph(
        GraphBuilder("g")
            .Input("c", pb::kBool, {{}})
            .Input("x", pb::kFloat, {{2, 3}})
            .Node("If", {"c"}, {"y"},
                  {AttrGraph("then_branch", then_b.Build()), AttrGraph("else_branch", else_b.Build())}, "if")
            .Output("y", pb::kFloat)
            .Build(),
        13, 7);
  };
  ConvertResult differ = ConvertTo(model({6}), 10);
  ASSERT_EQ(differ.blockers.size(), 1u);
  EXPECT_THAT(differ.blockers[0].reason, HasSubstr("different shapes in the two branches"));
  EXPECT_TRUE(ConvertTo(model({2, 3}), 10).blockers.empty());
  EXPECT_TRUE(ConvertTo(model({6}), 11).blockers.empty());
}

// GroupNormalization `num_groups` 2 over 4 channels; `scale`/`bias` are
// initializers of `len` values, or graph inputs when empty.
pb::ModelProto GroupNorm(int64_t opset, std::vector<float> scale, std::vector<float> bias,
                         std::optional<std::vector<int64_t>> x_dims = std::vector<int64_t>{2, 4, 3, 2},
                         int64_t len = 2) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, x_dims);
  if (scale.empty()) {
    g.Input("s", pb::kFloat, std::vector<int64_t>{len}).Input("b", pb::kFloat, std::vector<int64_t>{len});
  } else {
    g.Initializer(InitializerFrom("s", Floats({static_cast<int64_t>(scale.size())}, scale)))
        .Initializer(InitializerFrom("b", Floats({static_cast<int64_t>(bias.size())}, bias)));
  }
  return ModelFromGraph(g.Node("GroupNormalization", {"x", "s", "b"}, {"y"}, {AttrInt("num_groups", 2)}, "gn")
                            .Output("y", pb::kFloat)
                            .Build(),
                        opset, 8);
}

TEST(ConvertDownTest, GroupNormalization18GoesUpPerChannelAndDownAsInstanceNorm) {
  Feeds feeds = {{"x", RandomFloats({2, 4, 3, 2}, 7)}};
  // Constants and a known channel count: repeated per channel.
  pb::ModelProto m = GroupNorm(18, {0.5f, -2.0f}, {0.25f, 3.0f});
  ConvertResult up = ConvertTo(m, 21);
  ASSERT_TRUE(up.blockers.empty()) << FirstBlocker(up);
  EXPECT_EQ(up.steps["GroupNormalization 18->21 scale-per-channel"], 1);
  EXPECT_EQ(OpCount(up.model, "Expand"), 0);
  EXPECT_EQ(up.model.graph->initializer.size(), 2u);  // the per-group ones went
  ExpectSameOutputs(m, up.model, feeds);
  ExpectValid(up.model);
  // Scales fed at run time, channels unknown: expanded by the graph.
  Feeds fed = feeds;
  fed.push_back({"s", Floats({2}, {1.5f, -0.75f})});
  fed.push_back({"b", Floats({2}, {-1.0f, 0.5f})});
  pb::ModelProto dynamic = GroupNorm(18, {}, {}, std::nullopt);
  ConvertResult up_dynamic = ConvertTo(dynamic, 21);
  ASSERT_TRUE(up_dynamic.blockers.empty()) << FirstBlocker(up_dynamic);
  EXPECT_EQ(OpCount(up_dynamic.model, "Expand"), 2);
  ExpectSameOutputs(dynamic, up_dynamic.model, fed);
  // And back down (written out: 18 is deprecated).
  ConvertResult back = ConvertTo(up.model, 18);
  ASSERT_TRUE(back.blockers.empty()) << FirstBlocker(back);
  EXPECT_EQ(OpCount(back.model, "GroupNormalization"), 0);
  ExpectSameOutputs(m, back.model, feeds);
  // Below 18 (no GroupNormalization): one InstanceNormalization over the
  // grouped channels takes the per-group scale and bias.
  for (int64_t opset : {17, 9}) {
    SCOPED_TRACE(opset);
    ConvertResult below = ConvertTo(m, opset);
    ASSERT_TRUE(below.blockers.empty()) << FirstBlocker(below);
    EXPECT_EQ(below.steps["GroupNormalization 18->17 instance-norm-of-groups"], 1);
    EXPECT_EQ(OpCount(below.model, "GroupNormalization"), 0);
    EXPECT_EQ(OpCount(below.model, "InstanceNormalization"), 1);
    EXPECT_EQ(OpCount(below.model, "Mul"), 0);
    ExpectSameOutputs(m, below.model, feeds);
    ExpectValid(below.model);
  }
  // Channels that do not divide into the groups block.
  ConvertResult odd = ConvertTo(GroupNorm(18, {1, 1}, {0, 0}, std::vector<int64_t>{1, 5, 2, 2}), 21);
  ASSERT_EQ(odd.blockers.size(), 1u);
  EXPECT_THAT(odd.blockers[0].reason, HasSubstr("do not divide"));
}

TEST(ConvertDownTest, GroupNormalizationIsWrittenOutGoingDown) {
  Feeds feeds = {{"x", RandomFloats({2, 4, 3, 2}, 8)}};
  pb::ModelProto distinct = GroupNorm(21, {0.5f, 1.5f, -2.0f, 3.0f}, {1, -1, 0.25f, 0});
  for (int64_t opset : {20, 18, 9}) {
    SCOPED_TRACE(opset);
    ConvertResult down = ConvertTo(distinct, opset);
    ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
    EXPECT_EQ(down.steps["GroupNormalization 21->18 write-out"], 1);
    EXPECT_EQ(OpCount(down.model, "GroupNormalization"), 0);
    EXPECT_EQ(OpCount(down.model, "InstanceNormalization"), 1);
    ExpectSameOutputs(distinct, down.model, feeds);
    ExpectValid(down.model);
  }
  // Scale and bias fed at run time: the same.
  Feeds fed = feeds;
  fed.push_back({"s", Floats({4}, {1.5f, -0.75f, 2, 0})});
  fed.push_back({"b", Floats({4}, {-1.0f, 0.5f, 0, 3})});
  pb::ModelProto dynamic = GroupNorm(21, {}, {}, std::vector<int64_t>{2, 4, 3, 2}, 4);
  ConvertResult down_dynamic = ConvertTo(dynamic, 18);
  ASSERT_TRUE(down_dynamic.blockers.empty()) << FirstBlocker(down_dynamic);
  ExpectSameOutputs(dynamic, down_dynamic.model, fed);
  // Without the input's rank the affine cannot be shaped: blocked.
  ConvertResult unranked =
      ConvertTo(GroupNorm(21, {0.5f, 1.5f, -2.0f, 3.0f}, {1, -1, 0.25f, 0}, std::nullopt), 18);
  ASSERT_EQ(unranked.blockers.size(), 1u);
  EXPECT_THAT(unranked.blockers[0].reason, HasSubstr("rank"));
}

pb::ModelProto SteppedSlice(std::optional<std::vector<int64_t>> dims) {
  return ModelFromGraph(GraphBuilder("g")
                            .Input("x", pb::kFloat, dims)
                            .Initializer(InitializerFrom("starts", Int64s({3}, {-1, 0, 1})))
                            .Initializer(InitializerFrom("ends", Int64s({3}, {std::numeric_limits<int64_t>::min(), 9, 100})))
                            .Initializer(InitializerFrom("axes", Int64s({3}, {0, 2, -1})))
                            .Initializer(InitializerFrom("steps", Int64s({3}, {-2, 1, 3})))
                            .Node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"}, {}, "slice")
                            .Output("y", pb::kFloat)
                            .Build(),
                        13, 7);
}

TEST(ConvertDownTest, SliceStepsBecomeGathersOfTheIndexList) {
  pb::ModelProto m = SteppedSlice(std::vector<int64_t>{5, 2, 6, 8});
  ConvertResult down = ConvertTo(m, 9);
  ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
  EXPECT_EQ(OpCount(down.model, "Gather"), 2);  // axes 0 (step -2) and 3 (step 3)
  EXPECT_EQ(OpCount(down.model, "Slice"), 1);   // axis 2, step 1
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({5, 2, 6, 8}, 12)}}, 0, 0);
}

TEST(ConvertDownTest, SliceStepsOnASymbolicShapeBlock) {
  pb::ModelProto m = SteppedSlice(std::vector<int64_t>{5, 2, -1, 8});
  ConvertResult down = ConvertTo(m, 9);
  ASSERT_EQ(down.blockers.size(), 1u);
  EXPECT_THAT(down.blockers[0].reason, HasSubstr("static input shape"));
}

TEST(ConvertDownTest, SliceStepsOverAHugeAxisBlockWithoutListingIt) {
  pb::ModelProto m = SteppedSlice(std::vector<int64_t>{int64_t{1} << 40, 2, 6, 8});
  ConvertResult down = ConvertTo(m, 9);
  ASSERT_EQ(down.blockers.size(), 1u);
  EXPECT_THAT(down.blockers[0].reason, HasSubstr("too many indices"));
}

TEST(ConvertDownTest, FloatEqualIsWrittenWithOrderAndNaNTests) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("a", pb::kFloat, {{2, 4}})
                                        .Input("b", pb::kFloat, {{4}})
                                        .Node("Equal", {"a", "b"}, {"eq"})
                                        .Node("GreaterOrEqual", {"a", "b"}, {"ge"})
                                        .Node("LessOrEqual", {"b", "a"}, {"le"})
                                        .Output("eq", pb::kBool, {{2, 4}})
                                        .Output("ge", pb::kBool, {{2, 4}})
                                        .Output("le", pb::kBool, {{2, 4}})
                                        .Build(),
                                    13, 7);
  Feeds feeds = {{"a", Floats({2, 4}, {1, nan, inf, -inf, 2, 0, -0.f, nan})}, {"b", Floats({4}, {1, nan, inf, 5})}};
  ConvertResult down = ConvertTo(m, 9);
  ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
  EXPECT_EQ(OpCount(down.model, "Equal"), 0);
  EXPECT_EQ(OpCount(down.model, "GreaterOrEqual"), 0);
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, feeds, 0, 0);
}

TEST(ConvertDownTest, IntegerEqualStaysEqualOrWidens) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("a", pb::kInt64, {{3}})
                                        .Input("b", pb::kInt64, {{3}})
                                        .Input("c", pb::kInt8, {{3}})
                                        .Node("Equal", {"a", "b"}, {"e"})
                                        .Node("Equal", {"c", "c"}, {"f"})
                                        .Output("e", pb::kBool, {{3}})
                                        .Output("f", pb::kBool, {{3}})
                                        .Build(),
                                    13, 7);
  ConvertResult down = ConvertTo(m, 9);
  ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
  EXPECT_EQ(OpCount(down.model, "Equal"), 2);
  EXPECT_EQ(down.steps["Equal 11->10 widen-types"], 1);
  ExpectSameOutputs(m, down.model,
                    {{"a", Int64s({3}, {1, 2, 3})}, {"b", Int64s({3}, {1, 0, 3})}, {"c", Int8s({3}, {-1, 0, 7})}}, 0,
                    0);
}

TEST(ConvertDownTest, PowOnIntegersRunsInDouble) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("a", pb::kInt32, {{5}})
                                        .Input("b", pb::kInt32, {{5}})
                                        .Input("x", pb::kFloat, {{5}})
                                        .Input("n", pb::kInt64, {{5}})
                                        .Node("Pow", {"a", "b"}, {"p"}, {}, "pow")
                                        .Node("Pow", {"x", "n"}, {"q"})
                                        .Output("p", pb::kInt32, {{5}})
                                        .Output("q", pb::kFloat, {{5}})
                                        .Build(),
                                    13, 7);
  Feeds feeds = {{"a", Int32s({5}, {2, -3, 7, 1, -1})},
                 {"b", Int32s({5}, {10, 3, 0, -4, 5})},
                 {"x", Floats({5}, {1.5f, -2, 0.25f, 3, 10})},
                 {"n", Int64s({5}, {3, 2, -2, 0, 7})}};
  ConvertResult down = ConvertTo(m, 11);
  ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
  EXPECT_EQ(down.steps["Pow 12->7 pow-in-double"], 2);
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, feeds, 0, 0);
}

TEST(ConvertDownTest, Int64MaxAndMinBecomeWhereChains) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("a", pb::kInt64, {{2, 3}})
                                        .Input("b", pb::kInt64, {{3}})
                                        .Input("c", pb::kInt64, {{1, 1}})
                                        .Node("Max", {"a", "b", "c"}, {"hi"})
                                        .Node("Min", {"a", "b"}, {"lo"})
                                        .Output("hi", pb::kInt64, {{2, 3}})
                                        .Output("lo", pb::kInt64, {{2, 3}})
                                        .Build(),
                                    13, 7);
  Feeds feeds = {{"a", Int64s({2, 3}, {int64_t{1} << 60, -5, 3, 0, 9, -(int64_t{1} << 62)})},
                 {"b", Int64s({3}, {(int64_t{1} << 60) + 1, -6, 3})},
                 {"c", Int64s({1, 1}, {4})}};
  ConvertResult down = ConvertTo(m, 9);
  ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
  EXPECT_EQ(OpCount(down.model, "Max") + OpCount(down.model, "Min"), 0);
  EXPECT_EQ(OpCount(down.model, "Where"), 3);
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, feeds, 0, 0);
  // Below 9 Greater takes floats only: the chain cannot be written.
  ConvertResult below = ConvertTo(m, 8);
  EXPECT_FALSE(below.blockers.empty());
}

pb::TensorProto RandomInit(const std::string& name, std::vector<int64_t> dims, uint32_t seed) {
  return InitializerFrom(name, RandomFloats(std::move(dims), seed, -0.5f, 0.5f));
}

TEST(ConvertDownTest, BatchFirstLstmRunsSequenceFirstBetweenTransposes) {
  // batch 2, sequence 3, input 4, hidden 5, bidirectional.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3, 4}})
                                        .Input("h0", pb::kFloat, {{2, 2, 5}})
                                        .Initializer(RandomInit("w", {2, 20, 4}, 21))
                                        .Initializer(RandomInit("r", {2, 20, 5}, 22))
                                        .Initializer(RandomInit("bias", {2, 40}, 23))
                                        .Node("LSTM", {"x", "w", "r", "bias", "", "h0"}, {"y", "yh", "yc"},
                                              {AttrInt("hidden_size", 5), AttrInt("layout", 1),
                                               AttrString("direction", "bidirectional")},
                                              "lstm")
                                        .Output("y", pb::kFloat, {{2, 3, 2, 5}})
                                        .Output("yh", pb::kFloat, {{2, 2, 5}})
                                        .Output("yc", pb::kFloat, {{2, 2, 5}})
                                        .Build(),
                                    14, 7);
  ConvertResult down = ConvertTo(m, 13);
  ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
  EXPECT_EQ(down.steps["LSTM 14->7 batch-first-transposes"], 1);
  EXPECT_EQ(OpCount(down.model, "Transpose"), 5);  // x, h0; y, yh, yc
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({2, 3, 4}, 24)}, {"h0", RandomFloats({2, 2, 5}, 25)}});
}

TEST(ConvertDownTest, BatchFirstGruWithOnlyYhUsed) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{3, 4, 2}})
                                        .Initializer(RandomInit("w", {1, 9, 2}, 31))
                                        .Initializer(RandomInit("r", {1, 9, 3}, 32))
                                        .Node("GRU", {"x", "w", "r"}, {"", "yh"},
                                              {AttrInt("hidden_size", 3), AttrInt("layout", 1)})
                                        .Output("yh", pb::kFloat, {{3, 1, 3}})
                                        .Build(),
                                    14, 7);
  ConvertResult down = ConvertTo(m, 9);
  ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
  EXPECT_EQ(OpCount(down.model, "Transpose"), 2);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({3, 4, 2}, 33)}});
}

TEST(ConvertDownTest, GeluTanhExpands) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{3, 7}})
                                        .Node("Gelu", {"x"}, {"y"}, {AttrString("approximate", "tanh")})
                                        .Output("y", pb::kFloat, {{3, 7}})
                                        .Build(),
                                    20, 9);
  ConvertResult down = ConvertTo(m, 11);
  ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
  EXPECT_EQ(OpCount(down.model, "Gelu"), 0);
  EXPECT_EQ(OpCount(down.model, "Tanh"), 1);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({3, 7}, 41, -4, 4)}}, 1e-5, 1e-5);
}

TEST(ConvertDownTest, DepthToSpaceCrdBecomesReshapeTransposeReshape) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 8, 2, 3}})
                                        .Node("DepthToSpace", {"x"}, {"y"},
                                              {AttrInt("blocksize", 2), AttrString("mode", "CRD")})
                                        .Output("y", pb::kFloat, {{2, 2, 4, 6}})
                                        .Build(),
                                    13, 7);
  ConvertResult down = ConvertTo(m, 9);
  ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
  EXPECT_EQ(OpCount(down.model, "DepthToSpace"), 0);
  EXPECT_EQ(OpCount(down.model, "Reshape"), 2);
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({2, 8, 2, 3}, 51)}}, 0, 0);
  // DCR is DepthToSpace-1's only mode: it stays.
  pb::ModelProto dcr = m;
  dcr.graph->node[0].attribute[1].s = "DCR";
  ConvertResult plain = ConvertTo(dcr, 9);
  ASSERT_TRUE(plain.blockers.empty()) << FirstBlocker(plain);
  EXPECT_EQ(OpCount(plain.model, "DepthToSpace"), 1);
}

pb::ModelProto CeilPool(std::vector<int64_t> dims, std::vector<int64_t> kernel, std::vector<int64_t> strides,
                        std::vector<int64_t> pads) {
  return ModelFromGraph(GraphBuilder("g")
                            .Input("x", pb::kFloat, dims)
                            .Node("MaxPool", {"x"}, {"y", "i"},
                                  {AttrInts("kernel_shape", kernel), AttrInts("strides", strides),
                                   AttrInts("pads", pads), AttrInt("ceil_mode", 1)},
                                  "pool")
                            .Output("y", pb::kFloat)
                            .Output("i", pb::kInt64)
                            .Build(),
                        12, 7);
}

TEST(ConvertDownTest, MaxPoolCeilModeBecomesEndPadding) {
  // 7 wide, kernel 3, stride 2: ceil gives 4 windows, floor 3; and a last
  // window that would start in the end padding (6 wide, kernel 2, stride
  // 2, pad 1 at the end) is dropped.
  for (auto [w, k, s, pe] : {std::array<int64_t, 4>{7, 3, 2, 0}, std::array<int64_t, 4>{6, 2, 2, 1},
                             std::array<int64_t, 4>{9, 3, 3, 0}}) {
    SCOPED_TRACE(absl::StrCat(w, " ", k, " ", s, " ", pe));
    pb::ModelProto m = CeilPool({1, 2, 5, w}, {2, k}, {1, s}, {0, 0, 1, pe});
    ConvertResult down = ConvertTo(m, 9);
    ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
    EXPECT_EQ(down.steps["MaxPool 10->8 ceil-by-end-padding"], 1);
    ExpectValid(down.model);
    ExpectSameOutputs(m, down.model, {{"x", RandomFloats({1, 2, 5, w}, 52)}}, 0, 0);
  }
}

TEST(ConvertDownTest, MaxPoolCeilModeOnASymbolicShapeBlocks) {
  pb::ModelProto m = CeilPool({1, 2, 5, -1}, {2, 3}, {1, 2}, {0, 0, 0, 0});
  ConvertResult down = ConvertTo(m, 9);
  ASSERT_EQ(down.blockers.size(), 1u);
  EXPECT_THAT(down.blockers[0].reason, HasSubstr("static spatial dims"));
}

runner::Tensor Halfs(std::vector<int64_t> shape, const std::vector<float>& v) {
  std::vector<uint16_t> bits;
  for (float f : v) bits.push_back(runner::Float16::FromFloat(f));
  return MakeTensor<uint16_t>(pb::kFloat16, std::move(shape), bits);
}

TEST(ConvertDownTest, QLinearMatMulHalfScalesBecomeFloat) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("a", pb::kUint8, {{2, 3}})
                                        .Input("b", pb::kUint8, {{3, 2}})
                                        .Input("ys", pb::kFloat16, {{}})
                                        .Initializer(InitializerFrom("as", Halfs({}, {0.0123f})))
                                        .Initializer(InitializerFrom("az", Uint8s({}, {113})))
                                        .Initializer(InitializerFrom("bs", Halfs({}, {0.00457f})))
                                        .Initializer(InitializerFrom("bz", Uint8s({}, {98})))
                                        .Initializer(InitializerFrom("yz", Uint8s({}, {120})))
                                        .Node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"})
                                        .Output("y", pb::kUint8, {{2, 2}})
                                        .Build(),
                                    21, 9);
  ConvertResult down = ConvertTo(m, 10);
  ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
  EXPECT_EQ(OpCount(down.model, "Cast"), 1);  // the fed y_scale; the others are constants
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model,
                    {{"a", Uint8s({2, 3}, {208, 236, 0, 238, 3, 214})},
                     {"b", Uint8s({3, 2}, {152, 51, 244, 60, 26, 255})},
                     {"ys", Halfs({}, {0.0107f})}},
                    0, 0);
}

TEST(ConvertDownTest, DequantizeHalfScaleRunsInFloatQuantizeBlocks) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kInt8, {{6}})
                                        .Input("h", pb::kFloat16, {{6}})
                                        .Initializer(InitializerFrom("s", Halfs({}, {0.37f})))
                                        .Initializer(InitializerFrom("z", Int8s({}, {-3})))
                                        .Node("DequantizeLinear", {"x", "s", "z"}, {"y"}, {}, "dq")
                                        .Node("QuantizeLinear", {"h", "s", "z"}, {"q"}, {}, "q")
                                        .Output("y", pb::kFloat16, {{6}})
                                        .Output("q", pb::kInt8, {{6}})
                                        .Build(),
                                    19, 9);
  ConvertResult down = ConvertTo(m, 13);
  ASSERT_EQ(down.blockers.size(), 1u);
  EXPECT_THAT(down.blockers[0].node, HasSubstr("q"));
  EXPECT_THAT(down.blockers[0].reason, HasSubstr("float16"));
  // Without the QuantizeLinear the rest converts, with the same outputs.
  m.graph->node.pop_back();
  m.graph->output.pop_back();
  ConvertResult dq = ConvertTo(m, 13);
  ASSERT_TRUE(dq.blockers.empty()) << FirstBlocker(dq);
  ExpectValid(dq.model);
  ExpectSameOutputs(m, dq.model, {{"x", Int8s({6}, {-128, -3, 0, 5, 127, 77})}, {"h", Halfs({6}, {0, 0, 0, 0, 0, 0})}},
                    0, 0);
}

// QuantizeLinear-21's output_dtype without a zero point becomes a zero
// point of zeros in that type (a scalar for a scalar scale, one per axis
// entry for a per-axis one).
TEST(ConvertDownTest, QuantizeOutputDtypeBecomesAZeroPoint) {
  for (bool per_axis : {false, true}) {
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, {{2, 3}});
    if (per_axis) {
      g.Initializer(InitializerFrom("s", Floats({3}, {0.01f, 0.02f, 0.05f})));
    } else {
      g.Initializer(InitializerFrom("s", Floats({}, {0.02f})));
    }
    g.Node("QuantizeLinear", {"x", "s"}, {"q"}, {AttrInt("output_dtype", pb::kInt8), AttrInt("axis", 1)}, "q")
        .Output("q", pb::kInt8, {{2, 3}});
    pb::ModelProto m = ModelFromGraph(g.Build(), 21);
    for (int64_t to : {20, 19, 13}) {
      ConvertResult down = ConvertTo(m, to);
      ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down) << " per_axis " << per_axis << " to " << to;
      ExpectValid(down.model);
      ExpectSameOutputs(m, down.model, {{"x", Floats({2, 3}, {-1.3f, -0.2f, 0.f, 0.4f, 2.9f, 9.f})}}, 0, 0);
    }
  }
  // A type older versions have no zero point for here blocks, naming it.
  pb::ModelProto wide = ModelFromGraph(
      GraphBuilder("g")
          .Input("x", pb::kFloat, {{2}})
          .Initializer(InitializerFrom("s", Floats({}, {0.02f})))
          .Node("QuantizeLinear", {"x", "s"}, {"q"}, {AttrInt("output_dtype", pb::kInt16)}, "q")
          .Output("q", pb::kInt16, {{2}})
          .Build(),
      21);
  ConvertResult blocked = ConvertTo(wide, 20);
  ASSERT_FALSE(blocked.blockers.empty());
}

TEST(ConvertDownTest, HalfRangeRunsInFloat) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("start", pb::kFloat16, {{}})
                                        .Input("limit", pb::kFloat16, {{}})
                                        .Input("delta", pb::kFloat16, {{}})
                                        .Node("Range", {"start", "limit", "delta"}, {"y"})
                                        .Output("y", pb::kFloat16)
                                        .Build(),
                                    27, 10);
  ConvertResult down = ConvertTo(m, 11);
  ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
  EXPECT_EQ(OpCount(down.model, "Cast"), 4);
  ExpectSameOutputs(m, down.model,
                    {{"start", Halfs({}, {1.3f})}, {"limit", Halfs({}, {7.9f})}, {"delta", Halfs({}, {0.7f})}}, 0, 0);
}

TEST(ConvertDownTest, ReductionThatReducesNothingBecomesIdentity) {
  // noop_with_empty_axes=1 and no axes: the input as it is.
  for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMean"}) {
    SCOPED_TRACE(op);
    pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                          .Input("x", pb::kFloat, {{2, 3}})
                                          .Node(op, {"x"}, {"y"}, {AttrInt("noop_with_empty_axes", 1)}, "r")
                                          .Output("y", pb::kFloat, {{2, 3}})
                                          .Build(),
                                      18, 8);
    ConvertResult down = ConvertTo(m, 11);
    ASSERT_TRUE(down.blockers.empty()) << FirstBlocker(down);
    EXPECT_EQ(OpCount(down.model, op), 0);
    EXPECT_EQ(OpCount(down.model, "Identity"), 1);
    ExpectValid(down.model);
    ExpectSameOutputs(m, down.model, {{"x", RandomFloats({2, 3}, 21)}}, 0, 0);
  }
  // The L2 norm of one element is not the element: blocked.
  pb::ModelProto l2 =
      ModelFromGraph(GraphBuilder("g")
                         .Input("x", pb::kFloat, {{2, 3}})
                         .Node("ReduceL2", {"x"}, {"y"}, {AttrInt("noop_with_empty_axes", 1)}, "r")
                         .Output("y", pb::kFloat, {{2, 3}})
                         .Build(),
                     18, 8);
  ConvertResult blocked = ConvertTo(l2, 17);
  ASSERT_EQ(blocked.blockers.size(), 1u);
  EXPECT_THAT(blocked.blockers[0].reason, HasSubstr("no older equivalent for this reduction"));
}

}  // namespace
}  // namespace onnxkit::testing
