// Tests of `onnxkit convert`'s adapters: each family fires, its result
// reproduces the original's outputs on the reference backend, and a node
// that cannot be converted blocks with its name and reason.
#include <optional>

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
using passes::convert::ConvertResult;

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

TEST(ConvertAdaptersTest, HalfLayerNormExpandsInFloatAndCastsBack) {
  // stash_type 1: a float16 or bfloat16 input is normalized in float, then
  // scaled and shifted in its own type.
  for (int32_t half : {pb::kFloat16, pb::kBfloat16}) {
    SCOPED_TRACE(half);
    pb::ModelProto m =
        ModelFromGraph(GraphBuilder("g")
                           .Input("x", pb::kFloat, {{2, 6}})
                           .Initializer(RawFloatTensor("s", {6}, 1))
                           .Initializer(RawFloatTensor("b", {6}, -2))
                           .Node("Cast", {"x"}, {"xh"}, {AttrInt("to", half)})
                           .Node("Cast", {"s"}, {"sh"}, {AttrInt("to", half)})
                           .Node("Cast", {"b"}, {"bh"}, {AttrInt("to", half)})
                           .Node("LayerNormalization", {"xh", "sh", "bh"}, {"yh"}, {AttrInt("axis", -1)})
                           .Node("Cast", {"yh"}, {"y"}, {AttrInt("to", pb::kFloat)})
                           .Output("y", pb::kFloat, {{2, 6}})
                           .Build(),
                       17, 8);
    ConvertResult down = ConvertTo(m, 16);
    ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
    EXPECT_EQ(OpCount(down.model, "LayerNormalization"), 0);
    EXPECT_EQ(OpCount(down.model, "Cast"), 4 + 2);
    ExpectValid(down.model);
    const double tol = half == pb::kFloat16 ? 2e-3 : 2e-2;
    ExpectSameOutputs(m, down.model, {{"x", RandomFloats({2, 6}, 5)}}, tol, tol);
  }
}

// A normalization reading another's result (a patch embedding's norm, then
// a block's first norm, as in Swin): the second sees the first's expansion,
// typed as the output it replaced.
TEST(ConvertAdaptersTest, LayerNormAfterAnExpandedLayerNormExpandsToo) {
  pb::ModelProto m =
      ModelFromGraph(GraphBuilder("g")
                         .Input("x", pb::kFloat, {{2, 3, 6}})
                         .Initializer(RawFloatTensor("s", {6}, 1))
                         .Initializer(RawFloatTensor("b", {6}, -2))
                         .Node("LayerNormalization", {"x", "s", "b"}, {"n"}, {AttrInt("axis", -1)})
                         .Node("LayerNormalization", {"n", "b", "s"}, {"y"}, {AttrInt("axis", 2)})
                         .Output("y", pb::kFloat, {{2, 3, 6}})
                         .Build(),
                     17, 8);
  ConvertResult down = ConvertTo(m, 13);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(OpCount(down.model, "LayerNormalization"), 0);
  EXPECT_EQ(OpCount(down.model, "ReduceMean"), 4);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({2, 3, 6}, 6)}}, 1e-4, 1e-4);
}

// Trilu (14) going down: a constant mask where the last two dims and k are
// known (opset 9 and up), else one computed from the shape (11 and up); bool
// inputs are masked with And.
TEST(ConvertAdaptersTest, TriluExpandsGoingDown) {
  pb::ModelProto fixed = ModelFromGraph(GraphBuilder("g")
                                            .Input("x", pb::kFloat, {{2, 3, 5}})
                                            .Initializer(InitializerFrom("k", Int64Scalar(-1)))
                                            .Node("Trilu", {"x", "k"}, {"y"}, {}, "tri")
                                            .Node("Trilu", {"x"}, {"z"}, {AttrInt("upper", 0)})
                                            .Output("y", pb::kFloat, {{2, 3, 5}})
                                            .Output("z", pb::kFloat, {{2, 3, 5}})
                                            .Build(),
                                        14, 7);
  Feeds feeds = {{"x", RandomFloats({2, 3, 5}, 7)}};
  ConvertResult down = ConvertTo(fixed, 9);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(down.steps["Trilu 14->13 expand-trilu"], 2);
  EXPECT_EQ(OpCount(down.model, "Trilu"), 0);
  EXPECT_EQ(OpCount(down.model, "Range"), 0);
  ExpectSameOutputs(fixed, down.model, feeds, 0, 0);

  // Dims known only at run time and k an input: lower, with k = 1 and -2.
  pb::ModelProto dynamic = ModelFromGraph(GraphBuilder("g")
                                              .Input("x", pb::kFloat, {{-1, -1}})
                                              .Input("k", pb::kInt64, {{}})
                                              .Node("Trilu", {"x", "k"}, {"y"}, {AttrInt("upper", 0)})
                                              .Output("y", pb::kFloat, {{-1, -1}})
                                              .Build(),
                                          14, 7);
  ConvertResult down11 = ConvertTo(dynamic, 11);
  ASSERT_TRUE(down11.blockers.empty()) << down11.blockers[0].reason;
  EXPECT_EQ(OpCount(down11.model, "Range"), 2);
  for (int64_t k : {1, -2}) {
    ExpectSameOutputs(dynamic, down11.model, {{"x", RandomFloats({4, 6}, 8)}, {"k", Int64Scalar(k)}}, 0, 0);
  }
  // Range does not exist below 11: the Trilu blocks, named.
  ConvertResult down10 = ConvertTo(dynamic, 10);
  ASSERT_EQ(down10.blockers.size(), 1u);
  EXPECT_THAT(down10.blockers[0].node, HasSubstr("Trilu"));
  EXPECT_THAT(down10.blockers[0].reason, HasSubstr("Range (opset 11)"));

  pb::ModelProto flags = ModelFromGraph(GraphBuilder("g")
                                            .Input("x", pb::kBool, {{3, 3}})
                                            .Node("Trilu", {"x"}, {"y"})
                                            .Output("y", pb::kBool, {{3, 3}})
                                            .Build(),
                                        14, 7);
  ConvertResult bools = ConvertTo(flags, 13);
  ASSERT_TRUE(bools.blockers.empty()) << bools.blockers[0].reason;
  EXPECT_EQ(OpCount(bools.model, "And"), 1);
  ExpectSameOutputs(flags, bools.model,
                    {{"x", Bools({3, 3}, {true, true, false, true, true, true, false, true, true})}});
}

// Opset 6 and older broadcast only with broadcast=1, B lined up with A from
// `axis` on; going to 7, B gets trailing 1s (numpy broadcasting) and the
// attributes go. Gemm's C broadcasts at 7 whatever the flag said.
TEST(ConvertAdaptersTest, LegacyBroadcastBecomesNumpyBroadcastAtSeven) {
  pb::ModelProto m = ModelFromGraph(
      GraphBuilder("g")
          .Input("x", pb::kFloat, {{2, 3, 4, 5}})
          .Input("a", pb::kFloat, {{3, 6}})
          .Initializer(RawFloatTensor("bias", {3}, 1))
          .Initializer(RawFloatTensor("row", {4, 5}, -1))
          .Initializer(RawFloatTensor("w", {6, 2}, 0.5f))
          .Initializer(RawFloatTensor("c", {2}, 2))
          .Node("Add", {"x", "bias"}, {"s"}, {AttrInt("broadcast", 1), AttrInt("axis", 1)}, "add")
          .Node("Mul", {"s", "row"}, {"y"}, {AttrInt("broadcast", 1)})
          .Node("Gemm", {"a", "w", "c"}, {"z"}, {AttrInt("broadcast", 1)})
          .Output("y", pb::kFloat, {{2, 3, 4, 5}})
          .Output("z", pb::kFloat, {{3, 2}})
          .Build(),
      6, 3);
  Feeds feeds = {{"x", RandomFloats({2, 3, 4, 5}, 9)}, {"a", RandomFloats({3, 6}, 10)}};
  for (int64_t opset : {7, 13}) {
    ConvertResult up = ConvertTo(m, opset);
    ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
    EXPECT_EQ(up.steps["Add 6->7 legacy-broadcast"], 1);
    EXPECT_EQ(up.steps["Gemm 6->7 legacy-broadcast"], 1);
    EXPECT_EQ(OpCount(up.model, "Unsqueeze"), 1);
    ExpectSameOutputs(m, up.model, feeds, 0, 0);
    ExpectValid(up.model);
  }
  // An axis past what the ranks allow cannot be said with numpy broadcasting.
  pb::ModelProto bad =
      ModelFromGraph(GraphBuilder("g")
                         .Input("x", pb::kFloat, {{2, 3}})
                         .Initializer(RawFloatTensor("b", {3}, 1))
                         .Node("Add", {"x", "b"}, {"y"}, {AttrInt("broadcast", 1), AttrInt("axis", 2)})
                         .Output("y", pb::kFloat, {{2, 3}})
                         .Build(),
                     6, 3);
  ConvertResult blocked = ConvertTo(bad, 7);
  ASSERT_EQ(blocked.blockers.size(), 1u);
  EXPECT_THAT(blocked.blockers[0].reason, HasSubstr("does not fit"));
}

// The forms of opset 1 (the first model-zoo exports) reach today's opsets:
// Pad's paddings, Concat's default axis, Reshape's shape attribute, Split's
// split input, Cast's type name, Upsample's two scales and Tile's tiles and
// axis.
TEST(ConvertAdaptersTest, FirstOpsetFormsComeUp) {
  pb::ModelProto m = ModelFromGraph(
      GraphBuilder("g")
          .Input("x", pb::kFloat, {{1, 1, 3, 3}})
          .Initializer(InitializerFrom("parts", Int64s({2}, {1, 1})))
          .Node("Relu", {"x"}, {"r"}, {AttrInts("consumed_inputs", {0})})
          .Node("Pad", {"r"}, {"p"},
                {AttrInts("paddings", {0, 0, 1, 0, 0, 0, 0, 1}), AttrFloat("value", 0.5f)})
          .Node("Concat", {"p", "p"}, {"c"})
          .Node("Reshape", {"c"}, {"y"}, {AttrInts("shape", {2, -1})})
          .Node("Split", {"c", "parts"}, {"s1", "s2"}, {AttrInt("axis", 1)})
          .Node("Add", {"s1", "s2"}, {"a"})
          .Node("Cast", {"a"}, {"d"}, {AttrString("to", "DOUBLE")})
          .Node("Upsample", {"d"}, {"z"}, {AttrFloat("height_scale", 2), AttrFloat("width_scale", 3)})
          .Output("y", pb::kFloat)
          .Output("z", pb::kDouble)
          .Build(),
      1, 3);
  Feeds feeds = {{"x", RandomFloats({1, 1, 3, 3}, 11)}};
  for (int64_t opset : {7, 13, 21}) {
    ConvertResult up = ConvertTo(m, opset);
    ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].node << ": " << up.blockers[0].reason;
    for (const char* step : {"Pad 1->2 paddings-to-pads", "Concat 1->4 default-axis",
                             "Reshape 1->5 shape-attr-to-input", "Split 1->2 split-input-to-attr",
                             "Cast 1->6 type-name-to-code", "Upsample 1->7 hw-scales-to-scales"}) {
      EXPECT_EQ(up.steps[step], 1) << step;
    }
    ExpectSameOutputs(m, up.model, feeds, 0, 0);
    ExpectValid(up.model);
  }
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
  // Max and Min do not broadcast below 8: the scalar bounds are broadcast
  // first by adding zeros of x's static shape.
  ConvertResult seven = ConvertTo(m, 7);
  ASSERT_TRUE(seven.blockers.empty()) << seven.blockers[0].reason;
  ExpectSameOutputs(m, seven.model, feeds);
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

TEST(ConvertAdaptersTest, BodyWeightsBecomeConstantsBelowIr4) {
  // A Loop body with its own initializer: IR 3 would need it listed as a
  // body input, which a body cannot have, so it becomes a Constant node.
  pb::GraphProto body = GraphBuilder("body")
                            .Input("i", pb::kInt64, {{}})
                            .Input("cond_in", pb::kBool, {{}})
                            .Input("v_in", pb::kFloat, {{3}})
                            .Initializer(InitializerFrom("step", Floats({3}, {0.5f, -1.f, 2.f})))
                            .Node("Identity", {"cond_in"}, {"cond_out"})
                            .Node("Add", {"v_in", "step"}, {"v_out"})
                            .Output("cond_out", pb::kBool, {{}})
                            .Output("v_out", pb::kFloat, {{3}})
                            .Build();
  pb::ModelProto m =
      ModelFromGraph(GraphBuilder("g")
                         .Input("x", pb::kFloat, {{3}})
                         .Initializer(InitializerFrom("trip", Int64s({}, {4})))
                         .Initializer(InitializerFrom("yes", Bools({}, {true})))
                         .Node("Loop", {"trip", "yes", "x"}, {"y"}, {AttrGraph("body", body)}, "loop")
                         .Output("y", pb::kFloat, {{3}})
                         .Build(),
                     11, 6);
  ConvertResult down = ConvertTo(m, 8);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(down.model.ir_version, 3);
  const pb::GraphProto& converted = *down.model.graph->node[0].attribute[0].g;
  EXPECT_TRUE(converted.initializer.empty());
  ASSERT_FALSE(converted.node.empty());
  EXPECT_EQ(converted.node[0].op_type, "Constant");
  EXPECT_EQ(converted.node[0].output[0], "step");
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({3}, 10)}});
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
  EXPECT_EQ(IrVersionForOpset(23), 11);
  EXPECT_EQ(IrVersionForOpset(24), 12);
  EXPECT_EQ(IrVersionForOpset(28), 13);
}

// Names of the main graph's inputs.
std::vector<std::string> InputNames(const pb::ModelProto& m) {
  std::vector<std::string> names;
  for (const pb::ValueInfoProto& v : m.graph->input) names.push_back(v.name);
  return names;
}

TEST(ConvertAdaptersTest, WeightsListedAsInputsBelowIr4StayConstantsAbove) {
  // IR 3, opset 7: the weight is listed as a graph input, as that IR requires.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Input("w", pb::kFloat, {{2, 3}})
                                        .Initializer(InitializerFrom("w", RandomFloats({2, 3}, 7)))
                                        .Node("Add", {"x", "w"}, {"y"})
                                        .Output("y", pb::kFloat, {{2, 3}})
                                        .Build(),
                                    7, 3);
  ConvertResult up = ConvertTo(m, 13);
  ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
  EXPECT_EQ(up.model.ir_version, 7);
  EXPECT_EQ(InputNames(up.model), std::vector<std::string>{"x"});
  ASSERT_EQ(up.model.graph->initializer.size(), 1u);
  EXPECT_EQ(up.steps["initializers no longer listed as inputs (IR < 4 -> IR >= 4)"], 1);
  ExpectValid(up.model);
  ExpectSameOutputs(m, up.model, {{"x", RandomFloats({2, 3}, 8)}});
  // Staying below IR 4 keeps it listed; going back down lists it again.
  ConvertResult eight = ConvertTo(m, 8);
  EXPECT_EQ(eight.model.ir_version, 3);
  EXPECT_EQ(InputNames(eight.model), (std::vector<std::string>{"x", "w"}));
  ConvertResult down = ConvertTo(up.model, 8);
  EXPECT_EQ(InputNames(down.model), (std::vector<std::string>{"x", "w"}));
}

// AffineGrid (20) and CenterCropPad (18) going down, for sizes known when
// converting: a constant grid times theta, and a Slice then a Pad.
TEST(ConvertAdaptersTest, AffineGridAndCenterCropPadExpandForKnownSizes) {
  for (int64_t align : {0, 1}) {
    for (const std::vector<int64_t>& size :
         {std::vector<int64_t>{2, 3, 4, 5}, std::vector<int64_t>{2, 1, 3, 1, 4}}) {
      SCOPED_TRACE(::testing::Message() << "align " << align << " size " << size.size());
      const int64_t k = static_cast<int64_t>(size.size()) - 2;
      std::vector<int64_t> out = {size[0]};
      out.insert(out.end(), size.begin() + 2, size.end());
      out.push_back(k);
      pb::ModelProto m = ModelFromGraph(
          GraphBuilder("g")
              .Input("theta", pb::kFloat, {{2, k, k + 1}})
              .Initializer(InitializerFrom("size", Int64s({static_cast<int64_t>(size.size())}, size)))
              .Node("AffineGrid", {"theta", "size"}, {"y"}, {AttrInt("align_corners", align)})
              .Output("y", pb::kFloat, out)
              .Build(),
          20, 9);
      ConvertResult down = ConvertTo(m, 16);
      ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
      EXPECT_EQ(OpCount(down.model, "AffineGrid"), 0);
      ExpectSameOutputs(m, down.model, {{"theta", RandomFloats({2, k, k + 1}, 40)}}, 1e-5, 1e-5);
    }
  }
  pb::ModelProto crop =
      ModelFromGraph(GraphBuilder("g")
                         .Input("x", pb::kFloat, {{5, 6, 3}})
                         .Initializer(InitializerFrom("shape", Int64s({2}, {3, 9})))
                         .Node("CenterCropPad", {"x", "shape"}, {"y"}, {AttrInts("axes", {0, -2})})
                         .Output("y", pb::kFloat, {{3, 9, 3}})
                         .Build(),
                     18, 8);
  ConvertResult down = ConvertTo(crop, 13);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(OpCount(down.model, "CenterCropPad"), 0);
  ExpectSameOutputs(crop, down.model, {{"x", RandomFloats({5, 6, 3}, 41)}}, 0, 0);
  // Dims known only at run time block, named.
  crop.graph->input[0] = GraphBuilder().Input("x", pb::kFloat, {{-1, 6, 3}}).Build().input[0];
  ConvertResult blocked = ConvertTo(crop, 13);
  ASSERT_EQ(blocked.blockers.size(), 1u);
  EXPECT_THAT(blocked.blockers[0].reason, HasSubstr("input dims"));
}

// The window functions (17) going down: a constant for a known size, else
// computed over Range (opset 11); periodic and symmetric, every output type
// the window is cast to, sizes 0 and 1 (the symmetric one is 0 / 0).
TEST(ConvertAdaptersTest, WindowFunctionsExpandBelow17) {
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    for (int64_t periodic : {0, 1}) {
      for (int32_t type : {pb::kFloat, pb::kDouble, pb::kFloat16, pb::kInt32}) {
        for (int64_t size : {0, 1, 7, 16}) {
          SCOPED_TRACE(::testing::Message()
                       << op << " periodic " << periodic << " type " << type << " size " << size);
          std::vector<pb::AttributeProto> attrs = {AttrInt("periodic", periodic),
                                                   AttrInt("output_datatype", type)};
          pb::ModelProto fixed = ModelFromGraph(GraphBuilder("g")
                                                    .Initializer(InitializerFrom("n", Int64s({}, {size})))
                                                    .Node(op, {"n"}, {"w"}, attrs)
                                                    .Output("w", type, {{size}})
                                                    .Build(),
                                                17, 8);
          ConvertResult down = ConvertTo(fixed, 9);
          ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
          EXPECT_EQ(OpCount(down.model, op), 0);
          ExpectSameOutputs(fixed, down.model, {}, 0, 0);
          pb::ModelProto fed = ModelFromGraph(GraphBuilder("g")
                                                  .Input("n", pb::kInt32, {{}})
                                                  .Node(op, {"n"}, {"w"}, attrs)
                                                  .Output("w", type, {{-1}})
                                                  .Build(),
                                              17, 8);
          down = ConvertTo(fed, 11);
          ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
          ExpectSameOutputs(fed, down.model, {{"n", Int32s({}, {static_cast<int32_t>(size)})}}, 1e-12, 1e-12);
        }
      }
    }
  }
}

// STFT (17) going down as a strided Conv over the basis times the window:
// real and complex signals, onesided or not, odd and even frames, a window
// fed at run time, frame_length alone; frame_step fed at run time blocks.
TEST(ConvertAdaptersTest, StftBecomesAConvolutionBelow17) {
  struct Case {
    int64_t channels, frame, hop;
    bool onesided, window, window_fed, frame_input;
  };
  const Case cases[] = {{1, 16, 4, true, true, false, true},
                        {1, 15, 5, true, true, true, false},
                        {2, 8, 3, false, false, false, true},
                        {2, 9, 2, true, true, false, false},
                        {1, 7, 7, false, false, false, true}};
  const int64_t batch = 2, length = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "channels " << c.channels << " frame " << c.frame << " hop " << c.hop
                                      << " onesided " << c.onesided << " window " << c.window);
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, {{batch, length, c.channels}});
    g.Initializer(InitializerFrom("hop", Int64s({}, {c.hop})));
    std::vector<std::string> in = {"x", "hop", c.window ? "w" : "", c.frame_input ? "n" : ""};
    if (c.window && c.window_fed) g.Input("w", pb::kFloat, {{c.frame}});
    if (c.window && !c.window_fed) g.Initializer(RawFloatTensor("w", {c.frame}, 3));
    if (c.frame_input) g.Initializer(InitializerFrom("n", Int64s({}, {c.frame})));
    while (in.back().empty()) in.pop_back();
    g.Node("STFT", in, {"y"}, {AttrInt("onesided", c.onesided)}).Output("y", pb::kFloat);
    pb::ModelProto m = ModelFromGraph(g.Build(), 17, 8);
    Feeds feeds = {{"x", RandomFloats({batch, length, c.channels}, 5, -1, 1)}};
    if (c.window && c.window_fed) feeds.push_back({"w", RandomFloats({c.frame}, 6, 0, 1)});
    for (int64_t opset : {16, 11}) {
      ConvertResult down = ConvertTo(m, opset);
      ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
      EXPECT_EQ(OpCount(down.model, "STFT"), 0);
      EXPECT_EQ(OpCount(down.model, "Conv"), 1);
      ExpectSameOutputs(m, down.model, feeds, 1e-5, 1e-5);
    }
  }
  pb::ModelProto fed = ModelFromGraph(GraphBuilder("g")
                                          .Input("x", pb::kFloat, {{1, 32, 1}})
                                          .Input("hop", pb::kInt64, {{}})
                                          .Initializer(InitializerFrom("n", Int64s({}, {8})))
                                          .Node("STFT", {"x", "hop", "", "n"}, {"y"})
                                          .Output("y", pb::kFloat)
                                          .Build(),
                                      17, 8);
  ConvertResult blocked = ConvertTo(fed, 16);
  ASSERT_EQ(blocked.blockers.size(), 1u);
  EXPECT_THAT(blocked.blockers[0].reason, HasSubstr("frame_step"));
}

// DFT (17) going down as one MatMul along its axis: real and complex
// inputs, every axis before the last, forward and inverse, one-sided (its
// inverse too: the default length, even and odd lengths, fewer bins than
// the length needs and more), and dft_length padding and truncating.
TEST(ConvertAdaptersTest, DftBecomesAMatMulBelow17) {
  struct Case {
    int64_t axis, channels, length;  // length 0: no dft_length
    bool inverse, onesided;
  };
  const Case cases[] = {{1, 1, 0, false, false}, {1, 2, 0, true, false},   {2, 1, 0, false, true},
                        {-2, 2, 0, false, true}, {0, 2, 12, false, false}, {1, 1, 5, true, false},
                        {2, 2, 9, false, true},  {1, 2, 0, true, true},    {2, 1, 0, true, true},
                        {1, 2, 12, true, true},  {0, 2, 9, true, true},    {1, 2, 4, true, true}};
  const std::vector<int64_t> shape = {3, 8, 7};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "axis " << c.axis << " channels " << c.channels << " length "
                                      << c.length << " inverse " << c.inverse << " onesided " << c.onesided);
    std::vector<int64_t> x_shape = shape;
    x_shape.push_back(c.channels);
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, x_shape);
    std::vector<std::string> in = {"x"};
    if (c.length > 0) {
      g.Initializer(InitializerFrom("len", Int64s({}, {c.length})));
      in.push_back("len");
    }
    g.Node("DFT", in, {"y"},
           {AttrInt("axis", c.axis), AttrInt("inverse", c.inverse), AttrInt("onesided", c.onesided)})
        .Output("y", pb::kFloat);
    pb::ModelProto m = ModelFromGraph(g.Build(), 17, 8);
    for (int64_t opset : {16, 11}) {
      ConvertResult down = ConvertTo(m, opset);
      ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
      EXPECT_EQ(OpCount(down.model, "DFT"), 0);
      ExpectSameOutputs(m, down.model, {{"x", RandomFloats(x_shape, 7)}}, 1e-5, 1e-5);
    }
  }
}

// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (12) going down:
// every reduction, class weights, ignore_index (also a class that occurs),
// [N, C] and [N, C, d1, d2] inputs, int32 and int64 targets, log_prob.
TEST(ConvertAdaptersTest, LossesExpandBelow12) {
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    for (const char* reduction : {"none", "sum", "mean"}) {
      for (int variant = 0; variant < 4; ++variant) {
        const bool weighted = variant & 1, ignore = variant & 2, spatial = variant >= 2;
        const int32_t label_type = variant == 1 ? pb::kInt32 : pb::kInt64;
        SCOPED_TRACE(::testing::Message() << op << " " << reduction << " variant " << variant);
        const std::vector<int64_t> x_shape =
            spatial ? std::vector<int64_t>{2, 4, 3, 2} : std::vector<int64_t>{5, 4};
        std::vector<int64_t> t_shape = x_shape;
        t_shape.erase(t_shape.begin() + 1);
        GraphBuilder g("g");
        g.Input("x", pb::kFloat, x_shape).Input("t", label_type, t_shape);
        std::vector<std::string> in = {"x", "t"};
        if (weighted) {
          g.Initializer(RawFloatTensor("w", {4}, 5));
          in.push_back("w");
        }
        std::vector<pb::AttributeProto> attrs = {AttrString("reduction", reduction)};
        if (ignore) attrs.push_back(AttrInt("ignore_index", 2));
        const bool sce = std::string(op) == "SoftmaxCrossEntropyLoss";
        std::vector<std::string> out = {"y"};
        if (sce) out.push_back("logp");
        g.Node(op, in, out, attrs).Output("y", pb::kFloat);
        if (sce) g.Output("logp", pb::kFloat);
        pb::ModelProto m = ModelFromGraph(g.Build(), 13, 8);
        runner::Tensor t = RandomInts(label_type, t_shape, 9, 0, 3);
        ConvertResult down = ConvertTo(m, 11);
        ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
        EXPECT_EQ(OpCount(down.model, op), 0);
        ExpectSameOutputs(m, down.model, {{"x", RandomFloats(x_shape, 8, -3, 3)}, {"t", t}}, 1e-5, 1e-5);
      }
    }
  }
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{5, 4}})
                                        .Input("t", pb::kInt64, {{5}})
                                        .Node("NegativeLogLikelihoodLoss", {"x", "t"}, {"y"})
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    13, 8);
  ConvertResult blocked = ConvertTo(m, 10);
  ASSERT_EQ(blocked.blockers.size(), 1u);
  EXPECT_THAT(blocked.blockers[0].reason, HasSubstr("GatherElements (opset 11)"));
}

}  // namespace
pb::TensorProto Named(const runner::Tensor& t, std::string name) { return runner::TensorToProto(t, name); }

// A Resize at opset 19 with constant scales or sizes (and roi).
pb::ModelProto ResizeModel(std::vector<pb::AttributeProto> attrs, std::vector<int64_t> x_shape,
                           std::optional<runner::Tensor> scales, std::optional<runner::Tensor> sizes,
                           std::optional<runner::Tensor> roi = std::nullopt) {
  GraphBuilder b("g");
  b.Input("x", pb::kFloat, x_shape);
  std::vector<std::string> in = {"x", roi ? "roi" : "", scales ? "scales" : "", sizes ? "sizes" : ""};
  while (!in.empty() && in.back().empty()) in.pop_back();
  if (roi) b.Initializer(Named(*roi, "roi"));
  if (scales) b.Initializer(Named(*scales, "scales"));
  if (sizes) b.Initializer(Named(*sizes, "sizes"));
  b.Node("Resize", in, {"y"}, std::move(attrs), "resize");
  b.Output("y", pb::kFloat);
  return ModelFromGraph(b.Build(), 19, 9);
}

TEST(ConvertAdaptersTest, ResizeWithoutAnOlderFormExpandsIntoGathers) {
  struct Case {
    std::string what;
    pb::ModelProto model;
    std::vector<int64_t> x_shape;
  };
  std::vector<Case> cases;
  cases.push_back({"cubic half_pixel upsampling",
                   ResizeModel({AttrString("mode", "cubic")}, {1, 2, 4, 5}, Floats({4}, {1, 1, 2, 1.5f}), {}),
                   {1, 2, 4, 5}});
  cases.push_back({"linear half_pixel downsampling with antialias",
                   ResizeModel({AttrString("mode", "linear"), AttrInt("antialias", 1)}, {1, 1, 8, 9},
                               Floats({4}, {1, 1, 0.5f, 0.4f}), {}),
                   {1, 1, 8, 9}});
  cases.push_back({"sizes on two axes, not_larger",
                   ResizeModel({AttrString("mode", "linear"), AttrInts("axes", {2, 3}),
                                AttrString("keep_aspect_ratio_policy", "not_larger")},
                               {1, 1, 4, 6}, {}, Int64s({2}, {7, 8})),
                   {1, 1, 4, 6}});
  cases.push_back({"nearest round_prefer_ceil align_corners",
                   ResizeModel({AttrString("mode", "nearest"), AttrString("nearest_mode", "round_prefer_ceil"),
                                AttrString("coordinate_transformation_mode", "align_corners")},
                               {1, 1, 3, 4}, {}, Int64s({4}, {1, 1, 7, 5})),
                   {1, 1, 3, 4}});
  cases.push_back({"tf_crop_and_resize with extrapolation",
                   ResizeModel({AttrString("mode", "linear"),
                                AttrString("coordinate_transformation_mode", "tf_crop_and_resize"),
                                AttrFloat("extrapolation_value", 10)},
                               {1, 1, 4, 4}, {}, Int64s({4}, {1, 1, 3, 3}),
                               Floats({8}, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f})),
                   {1, 1, 4, 4}});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Feeds feeds = {{"x", RandomFloats(c.x_shape, 7)}};
    for (int64_t target : {7, 10, 13}) {
      SCOPED_TRACE(target);
      ConvertResult r = ConvertTo(c.model, target);
      ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
      if (target < 11) {
        EXPECT_EQ(OpCount(r.model, "Resize") + OpCount(r.model, "Upsample"), 0);
        EXPECT_GT(OpCount(r.model, "Gather"), 0);
      }
      ExpectSameOutputs(c.model, r.model, feeds, 1e-5, 1e-4);
      ExpectValid(r.model);
    }
  }
}

TEST(ConvertAdaptersTest, ResizeThatOlderOpsSayIsNotExpanded) {
  // asymmetric nearest/floor is Upsample's meaning: no Gathers.
  pb::ModelProto m = ResizeModel({AttrString("mode", "nearest"), AttrString("nearest_mode", "floor"),
                                  AttrString("coordinate_transformation_mode", "asymmetric")},
                                 {1, 1, 2, 3}, Floats({4}, {1, 1, 2, 2}), {});
  ConvertResult r = ConvertTo(m, 8);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  EXPECT_EQ(OpCount(r.model, "Upsample"), 1);
  EXPECT_EQ(OpCount(r.model, "Gather"), 0);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({1, 1, 2, 3}, 8)}});
}

// Resize-10's nearest rounds the source coordinate up on an axis that
// shrinks and down on one that grows (the ONNX opset-10 test: 1..8 as 2x4
// shrunk by 0.6 is [1, 3]; ONNX Runtime reads it so). Going up it becomes
// nearest_mode "ceil" or "floor", or Gathers when both directions meet.
pb::ModelProto Resize10(std::vector<int64_t> shape, std::vector<float> scales) {
  GraphBuilder b("g");
  b.Input("x", pb::kFloat, shape);
  b.Initializer(Named(Floats({4}, scales), "scales"));
  b.Node("Resize", {"x", "scales"}, {"y"}, {AttrString("mode", "nearest")}, "resize");
  b.Output("y", pb::kFloat);
  return ModelFromGraph(b.Build(), 10, 5);
}

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  return v;
}

std::vector<float> OutputOf(const pb::ModelProto& m, const Feeds& feeds) {
  absl::StatusOr<std::vector<runner::RtValue>> out = RunModel(m, feeds);
  if (!out.ok() || out->empty()) {
    ADD_FAILURE() << out.status();
    return {};
  }
  const runner::Tensor& y = (*out)[0].tensor();
  return std::vector<float>(y.data<float>(), y.data<float>() + y.size());
}

std::string NearestModeOf(const pb::ModelProto& m) {
  for (const pb::NodeProto& n : m.graph->node) {
    for (const pb::AttributeProto& a : n.attribute) {
      if (n.op_type == "Resize" && a.name == "nearest_mode") return a.s;
    }
  }
  return "";
}

TEST(ConvertAdaptersTest, Resize10NearestKeepsItsRoundingGoingUp) {
  using ::testing::ElementsAre;
  Feeds shrink = {{"x", Floats({1, 1, 2, 4}, Iota(8))}};
  pb::ModelProto down = Resize10({1, 1, 2, 4}, {1, 1, 0.6f, 0.6f});
  EXPECT_THAT(OutputOf(down, shrink), ElementsAre(1.f, 3.f));
  for (int64_t target : {11, 13, 19}) {
    SCOPED_TRACE(target);
    ConvertResult r = ConvertTo(down, target);
    ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
    EXPECT_EQ(NearestModeOf(r.model), "ceil");
    EXPECT_THAT(OutputOf(r.model, shrink), ElementsAre(1.f, 3.f));
    // And back down: ceil where every axis shrinks is Resize-10 again.
    ConvertResult back = ConvertTo(r.model, 10);
    ASSERT_TRUE(back.blockers.empty()) << back.blockers[0].reason;
    EXPECT_EQ(OpCount(back.model, "Resize"), 1);
    EXPECT_THAT(OutputOf(back.model, shrink), ElementsAre(1.f, 3.f));
  }
  // Rows doubled (rounded down), columns of 5 shrunk to 3 (rounded up).
  Feeds mixed_in = {{"x", Floats({1, 1, 2, 5}, Iota(10))}};
  pb::ModelProto mixed = Resize10({1, 1, 2, 5}, {1, 1, 2, 0.6f});
  EXPECT_THAT(OutputOf(mixed, mixed_in),
              ElementsAre(1.f, 3.f, 5.f, 1.f, 3.f, 5.f, 6.f, 8.f, 10.f, 6.f, 8.f, 10.f));
  ConvertResult r = ConvertTo(mixed, 13);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  EXPECT_EQ(OpCount(r.model, "Resize"), 0);
  EXPECT_THAT(OutputOf(r.model, mixed_in),
              ElementsAre(1.f, 3.f, 5.f, 1.f, 3.f, 5.f, 6.f, 8.f, 10.f, 6.f, 8.f, 10.f));
  ExpectValid(r.model);
  // Growing only: floor.
  pb::ModelProto up = Resize10({1, 1, 2, 3}, {1, 1, 2, 1.5f});
  ConvertResult u = ConvertTo(up, 11);
  ASSERT_TRUE(u.blockers.empty()) << u.blockers[0].reason;
  EXPECT_EQ(NearestModeOf(u.model), "floor");
  ExpectSameOutputs(up, u.model, {{"x", RandomFloats({1, 1, 2, 3}, 3)}});
}

// Shrinking Resize-10 has no Upsample (whose scales are at least 1): below
// 10 it becomes Gathers.
TEST(ConvertAdaptersTest, ShrinkingResize10BecomesGathersBelow10) {
  Feeds shrink = {{"x", Floats({1, 1, 2, 4}, Iota(8))}};
  pb::ModelProto down = Resize10({1, 1, 2, 4}, {1, 1, 0.6f, 0.6f});
  ConvertResult r = ConvertTo(down, 9);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  EXPECT_EQ(OpCount(r.model, "Upsample"), 0);
  EXPECT_THAT(OutputOf(r.model, shrink), ::testing::ElementsAre(1.f, 3.f));
  ExpectValid(r.model);
  // Growing: Upsample.
  ConvertResult u = ConvertTo(Resize10({1, 1, 2, 3}, {1, 1, 2, 1.5f}), 9);
  ASSERT_TRUE(u.blockers.empty()) << u.blockers[0].reason;
  EXPECT_EQ(OpCount(u.model, "Upsample"), 1);
}

TEST(ConvertAdaptersTest, SplitIntoEqualPartsGetsNumOutputsFrom18) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 6}})
                                        .Node("Split", {"x"}, {"a", "b", "c"}, {AttrInt("axis", 1)}, "split")
                                        .Output("a", pb::kFloat)
                                        .Output("b", pb::kFloat)
                                        .Output("c", pb::kFloat)
                                        .Build(),
                                    13, 7);
  for (int64_t target : {18, 21}) {
    ConvertResult r = ConvertTo(m, target);
    ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
    ASSERT_EQ(r.model.graph->node.size(), 1u);
    int64_t num_outputs = 0;
    for (const pb::AttributeProto& a : r.model.graph->node[0].attribute) {
      if (a.name == "num_outputs") num_outputs = a.i;
    }
    EXPECT_EQ(num_outputs, 3);
    ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 6}, 4)}});
    ExpectValid(r.model);
  }
}

TEST(ConvertAdaptersTest, PadWrapBlocksBelow19) {
  GraphBuilder b("g");
  b.Input("x", pb::kFloat, {{2, 3}});
  b.Initializer(Named(Int64s({4}, {0, 1, 0, 1}), "pads"));
  b.Node("Pad", {"x", "pads"}, {"y"}, {AttrString("mode", "wrap")}, "pad");
  b.Output("y", pb::kFloat);
  ConvertResult r = ConvertTo(ModelFromGraph(b.Build(), 19, 9), 18);
  ASSERT_EQ(r.blockers.size(), 1u);
  EXPECT_THAT(r.blockers[0].reason, HasSubstr("mode 'wrap'"));
}

// An empty constant axes input going down: a reduction over every axis has
// no axes attribute (not an empty one); Squeeze of nothing is an Identity.
TEST(ConvertAdaptersTest, EmptyAxesInputsGoDownWithoutAnEmptyAttribute) {
  for (std::string op : {"ReduceMin", "Squeeze"}) {
    SCOPED_TRACE(op);
    GraphBuilder b("g");
    b.Input("x", pb::kFloat, {{1, 3, 1}});
    b.Initializer(Named(Int64s({0}, {}), "axes"));
    b.Node(op, {"x", "axes"}, {"y"}, {}, "n");
    b.Output("y", pb::kFloat);
    pb::ModelProto m = ModelFromGraph(b.Build(), 18, 8);
    ConvertResult r = ConvertTo(m, 11);
    ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
    for (const pb::NodeProto& n : r.model.graph->node) {
      for (const pb::AttributeProto& a : n.attribute) EXPECT_NE(a.name, "axes") << n.op_type;
    }
    EXPECT_EQ(OpCount(r.model, "Squeeze"), 0);
    ExpectSameOutputs(m, r.model, {{"x", RandomFloats({1, 3, 1}, 5)}});
    ExpectValid(r.model);
  }
}

// From IR 4 an initializer that is also a graph input is a default the
// caller may replace: not a constant to build attributes from.
TEST(ConvertAdaptersTest, OverridableInitializerIsNotAConstant) {
  GraphBuilder b("g");
  b.Input("x", pb::kFloat, {{2, 3}});
  b.Input("ax", pb::kInt64, {{1}});
  b.Initializer(Named(Int64s({1}, {0}), "ax"));
  b.Node("Unsqueeze", {"x", "ax"}, {"y"}, {}, "unsq");
  b.Output("y", pb::kFloat);
  ConvertResult r = ConvertTo(ModelFromGraph(b.Build(), 13, 7), 11);
  ASSERT_EQ(r.blockers.size(), 1u);
  EXPECT_THAT(r.blockers[0].reason, HasSubstr("not constant"));
}

// Flatten's output is 2-D whatever its input's rank: Softmax(axis=-1) after
// it goes below 11 (where a negative axis needs the rank).
TEST(ConvertAdaptersTest, FlattenOutputRankIsKnownWithoutTheInputs) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat)
                                        .Node("Flatten", {"x"}, {"f"}, {AttrInt("axis", 1)}, "flat")
                                        .Node("Softmax", {"f"}, {"y"}, {AttrInt("axis", -1)}, "soft")
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    13, 7);
  ConvertResult r = ConvertTo(m, 10);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3, 4}, 6)}});
}

// Local functions need IR 8 whatever the opset.
TEST(ConvertAdaptersTest, LocalFunctionsKeepIr8GoingDown) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2}})
                                        .Node("Relu", {"x"}, {"y"}, {}, "r")
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    15, 8);
  pb::FunctionProto f;
  f.name = "MyRelu";
  f.domain = "local";
  f.input = {"a"};
  f.output = {"b"};
  pb::NodeProto n;
  n.op_type = "Relu";
  n.input = {"a"};
  n.output = {"b"};
  f.node.push_back(n);
  pb::OperatorSetIdProto onnx;
  onnx.version = 15;
  f.opset_import.push_back(onnx);
  m.functions.push_back(f);
  ConvertResult r = ConvertTo(m, 13);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  EXPECT_EQ(r.model.ir_version, 8);
}

// half_pixel_symmetric (Resize-19) is half_pixel where the output length is
// exactly scale * in: sizes, whole scales (any length), or scales whose
// products with a static length are whole. Elsewhere it expands into
// Gathers on a static shape, and blocks on a dynamic one (it used to go
// down unchanged, a mode older Resizes do not have).
TEST(ConvertAdaptersTest, HalfPixelSymmetricGoesDownAsHalfPixelOrGathers) {
  const pb::AttributeProto hps = AttrString("coordinate_transformation_mode", "half_pixel_symmetric");
  auto mode_of = [](const pb::ModelProto& m) -> std::string {
    for (const auto& n : m.graph->node) {
      for (const auto& a : n.attribute) {
        if (n.op_type == "Resize" && a.name == "coordinate_transformation_mode") return a.s;
      }
    }
    return "";
  };
  struct Case {
    std::string what;
    pb::ModelProto model;
    bool stays_resize;
  };
  std::vector<Case> cases;
  cases.push_back(
      {"sizes", ResizeModel({AttrString("mode", "linear"), hps}, {1, 1, 4, 5}, {}, Int64s({4}, {1, 1, 7, 3})),
       true});
  cases.push_back(
      {"whole scales on a dynamic batch",
       ResizeModel({AttrString("mode", "linear"), hps}, {-1, 1, 4, 5}, Floats({4}, {1, 1, 2, 3}), {}), true});
  cases.push_back(
      {"scales 0.5 on an even length",
       ResizeModel({AttrString("mode", "linear"), hps}, {1, 1, 4, 6}, Floats({4}, {1, 1, 0.5f, 1.5f}), {}),
       true});
  cases.push_back(
      {"scales 0.6 (2.4 elements)",
       ResizeModel({AttrString("mode", "linear"), hps}, {1, 1, 4, 5}, Floats({4}, {1, 1, 0.6f, 1.7f}), {}),
       false});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ConvertResult r = ConvertTo(c.model, 13);
    ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
    EXPECT_EQ(OpCount(r.model, "Resize"), c.stays_resize ? 1 : 0);
    if (c.stays_resize) {
      EXPECT_EQ(mode_of(r.model), "half_pixel");
    }
    std::vector<int64_t> shape = {1, 1, 4, 5};
    if (c.what.find("even") != std::string::npos) shape = {1, 1, 4, 6};
    ExpectSameOutputs(c.model, r.model, {{"x", RandomFloats(shape, 11)}}, 1e-5, 1e-5);
    ExpectValid(r.model);
  }
  ConvertResult blocked = ConvertTo(
      ResizeModel({AttrString("mode", "linear"), hps}, {1, 1, -1, 5}, Floats({4}, {1, 1, 0.6f, 1}), {}), 13);
  ASSERT_EQ(blocked.blockers.size(), 1u);
  EXPECT_THAT(blocked.blockers[0].reason, HasSubstr("'half_pixel_symmetric' is not accepted by Resize-18"));
}

TEST(ConvertAdaptersTest, ResizeWithRuntimeScalesBlocksWithBothReasons) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{1, 1, 4, 4}})
                                        .Input("scales", pb::kFloat, {{4}})
                                        .Node("Resize", {"x", "", "scales"}, {"y"}, {AttrString("mode", "cubic")}, "rs")
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    19, 9);
  ConvertResult r = ConvertTo(m, 10);
  ASSERT_EQ(r.blockers.size(), 1u);
  EXPECT_THAT(r.blockers[0].reason, HasSubstr("cubic"));
  EXPECT_THAT(r.blockers[0].reason, HasSubstr("'scales' is not constant"));
}

TEST(ConvertAdaptersTest, ResizeOfAnUnknownShapeBlocks) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{-1, 1, 4, 4}})
                                        .Initializer(Named(Floats({4}, {1, 1, 2, 2}), "scales"))
                                        .Node("Resize", {"x", "", "scales"}, {"y"}, {AttrString("mode", "cubic")}, "rs")
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    19, 9);
  ConvertResult r = ConvertTo(m, 10);
  ASSERT_EQ(r.blockers.size(), 1u);
  EXPECT_THAT(r.blockers[0].reason, HasSubstr("static shape"));
}

// Axes computed from a static shape (Range(0, Size(Shape(x)), 1)), as
// function expansions write them: known to inference, so the older
// ReduceMean takes them as an attribute and Range (opset 11) folds away.
TEST(ConvertAdaptersTest, InputsComputedFromStaticShapesAreConstantsGoingDown) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Initializer(Named(Int64Scalar(1), "start"))
                                        .Initializer(Named(Int64Scalar(1), "one"))
                                        .Node("Shape", {"x"}, {"shape"})
                                        .Node("Size", {"shape"}, {"rank"})
                                        .Node("Range", {"start", "rank", "one"}, {"axes"})
                                        .Node("ReduceMean", {"x", "axes"}, {"y"}, {}, "rm")
                                        .Output("y", pb::kFloat, {{2, 1}})
                                        .Build(),
                                    18, 8);
  Feeds feeds = {{"x", RandomFloats({2, 3}, 9)}};
  for (int64_t target : {7, 12}) {
    ConvertResult r = ConvertTo(m, target);
    ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
    EXPECT_EQ(OpCount(r.model, "Range"), 0);
    EXPECT_EQ(OpCount(r.model, "Shape"), 0);
    ExpectSameOutputs(m, r.model, feeds);
  }
  // With a symbolic dim the rank is still known, so this holds too; an
  // unknown rank does not fold and blocks.
  pb::ModelProto unknown = m;
  unknown.graph->input[0].type = TensorType(pb::kFloat);
  ConvertResult r = ConvertTo(unknown, 10);
  EXPECT_FALSE(r.blockers.empty());
}

TEST(ConvertAdaptersTest, PoolingFeaturesOlderVersionsLackBecomeADepthwiseConv) {
  struct Case {
    std::string op;
    std::vector<pb::AttributeProto> attrs;
    bool dilated = true;
  };
  std::vector<Case> cases = {
      {"AveragePool",
       {AttrInts("kernel_shape", {3, 2}), AttrInts("dilations", {2, 1}), AttrInts("pads", {1, 0, 2, 1}),
        AttrInt("count_include_pad", 0), AttrInt("ceil_mode", 1), AttrInts("strides", {2, 2})}},
      {"AveragePool",
       {AttrInts("kernel_shape", {2, 2}), AttrInts("dilations", {2, 2}), AttrInts("pads", {1, 1, 1, 1}),
        AttrInt("count_include_pad", 1)}},
      {"AveragePool", {AttrInts("kernel_shape", {3, 3}), AttrInt("ceil_mode", 1), AttrInts("strides", {2, 2})}, false},
      {"LpPool", {AttrInts("kernel_shape", {2, 3}), AttrInts("dilations", {2, 2}), AttrInt("p", 3)}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op + " " + std::to_string(c.attrs.size()));
    pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                          .Input("x", pb::kFloat, {{1, 3, 9, 8}})
                                          .Node(c.op, {"x"}, {"y"}, c.attrs, "pool")
                                          .Output("y", pb::kFloat)
                                          .Build(),
                                      19, 9);
    Feeds feeds = {{"x", RandomFloats({1, 3, 9, 8}, 11)}};
    for (int64_t target : {7, 12}) {
      SCOPED_TRACE(target);
      ConvertResult r = ConvertTo(m, target);
      ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
      // ceil_mode alone exists from opset 10.
      EXPECT_EQ(OpCount(r.model, "Conv"), c.dilated || target < 10 ? 1 : 0);
      EXPECT_EQ(OpCount(r.model, c.op), c.dilated || target < 10 ? 0 : 1);
      ExpectSameOutputs(m, r.model, feeds, 1e-5, 1e-4);
    }
  }
}

TEST(ConvertAdaptersTest, PoolingTheOlderOpSaysStaysAPool) {
  // ceil_mode that changes nothing, dilations of 1.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{1, 2, 8, 8}})
                                        .Node("AveragePool", {"x"}, {"y"},
                                              {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2}),
                                               AttrInt("ceil_mode", 1), AttrInts("dilations", {1, 1})},
                                              "pool")
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    19, 9);
  ConvertResult r = ConvertTo(m, 7);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  EXPECT_EQ(OpCount(r.model, "AveragePool"), 1);
  EXPECT_EQ(OpCount(r.model, "Conv"), 0);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({1, 2, 8, 8}, 12)}});
}

TEST(ConvertAdaptersTest, SplitNumOutputsPastTheLengthGivesEmptyOutputs) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Node("Split", {"x"}, {"a", "b", "c"}, {AttrInt("num_outputs", 3)}, "split")
                                        .Output("a", pb::kFloat)
                                        .Output("b", pb::kFloat)
                                        .Output("c", pb::kFloat)
                                        .Build(),
                                    18, 8);
  ConvertResult r = ConvertTo(m, 11);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3}, 13)}});
}

TEST(ConvertAdaptersTest, InferenceDropoutDropsARatioFedAtRunTime) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{4}})
                                        .Input("r", pb::kFloat, {{}})
                                        .Node("Dropout", {"x", "r"}, {"y"}, {}, "drop")
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    13, 7);
  ConvertResult r = ConvertTo(m, 10);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  runner::Tensor ratio = Floats({}, {0.5f});
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({4}, 14)}, {"r", ratio}});
  // Training mode fed at run time still blocks: Dropout-10 cannot draw.
  pb::ModelProto training = ModelFromGraph(GraphBuilder("g")
                                               .Input("x", pb::kFloat, {{4}})
                                               .Input("t", pb::kBool, {{}})
                                               .Node("Dropout", {"x", "", "t"}, {"y"}, {}, "drop")
                                               .Output("y", pb::kFloat)
                                               .Build(),
                                           13, 7);
  EXPECT_FALSE(ConvertTo(training, 10).blockers.empty());
}

// Scan-8 with batch 1 and no sequence_lens goes up: the batch axis is
// squeezed off the states and scan inputs and put back on every output; the
// body and the (reversed) directions stay.
pb::ModelProto Scan8(int64_t batch) {
  pb::GraphProto body = GraphBuilder("body")
                            .Input("sum_in", pb::kFloat, {{2}})
                            .Input("next", pb::kFloat, {{2}})
                            .Node("Add", {"sum_in", "next"}, {"sum_out"})
                            .Node("Mul", {"sum_out", "next"}, {"scan_out"})
                            .Output("sum_out", pb::kFloat, {{2}})
                            .Output("scan_out", pb::kFloat, {{2}})
                            .Build();
  return ModelFromGraph(
      GraphBuilder("g")
          .Input("init", pb::kFloat, {{batch, 2}})
          .Input("x", pb::kFloat, {{batch, 3, 2}})
          .Node("Scan", {"", "init", "x"}, {"y", "z"},
                {AttrInt("num_scan_inputs", 1), AttrInts("directions", {1}), AttrGraph("body", body)}, "scan")
          .Node("Relu", {"z"}, {"r"})
          .Output("y", pb::kFloat, {{batch, 2}})
          .Output("z", pb::kFloat, {{batch, 3, 2}})
          .Output("r", pb::kFloat, {{batch, 3, 2}})
          .Build(),
      8);
}

TEST(ConvertAdaptersTest, ScanOfBatchOneGoesUp) {
  pb::ModelProto m = Scan8(1);
  for (int64_t to : {9, 16, 21}) {
    ConvertResult up = ConvertTo(m, to);
    ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
    ExpectValid(up.model);
    ExpectSameOutputs(m, up.model, {{"init", RandomFloats({1, 2}, 21)}, {"x", RandomFloats({1, 3, 2}, 22)}},
                      0, 0);
    EXPECT_EQ(up.model.graph->output[0].name, "y");
  }
  ConvertResult batched = ConvertTo(Scan8(2), 9);
  ASSERT_FALSE(batched.blockers.empty());
  EXPECT_THAT(batched.blockers[0].reason, HasSubstr("batch size 2"));
}

// Exporters write a disabled dropout as training_mode=true with ratio 0:
// it drops nothing, so it converts; a real ratio in training mode blocks.
TEST(ConvertAdaptersTest, TrainingDropoutOfRatioZeroGoesDown) {
  auto model = [](float ratio) {
    return ModelFromGraph(GraphBuilder("g")
                              .Input("x", pb::kFloat, {{4}})
                              .Initializer(InitializerFrom("r", Floats({}, {ratio})))
                              .Initializer(InitializerFrom("t", MakeTensor<uint8_t>(pb::kBool, {}, {1})))
                              .Node("Dropout", {"x", "r", "t"}, {"y", "mask"}, {}, "drop")
                              .Node("Cast", {"mask"}, {"m"}, {AttrInt("to", pb::kFloat)})
                              .Output("y", pb::kFloat)
                              .Output("m", pb::kFloat)
                              .Build(),
                          17, 8);
  };
  pb::ModelProto zero = model(0.f);
  ConvertResult r = ConvertTo(zero, 11);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  ExpectSameOutputs(zero, r.model, {{"x", RandomFloats({4}, 15)}});
  ConvertResult real = ConvertTo(model(0.3f), 11);
  ASSERT_FALSE(real.blockers.empty());
  EXPECT_THAT(real.blockers[0].reason, HasSubstr("ratio 0.3"));
}

// Dropout's mask is the input's type below 10 and bool from 10: a mask
// nothing reads is dropped (the light models of the backend suite declare
// one), a mask that is read is cast (all ones / true in inference).
TEST(ConvertAdaptersTest, DropoutMaskChangesTypeAtOpset10) {
  for (bool read : {false, true}) {
    SCOPED_TRACE(read ? "mask read" : "mask unused");
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, {{2, 3}});
    g.Node("Dropout", {"x"}, {"y", "mask"}, {AttrFloat("ratio", 0.3f)}, "drop");
    g.Output("y", pb::kFloat, {{2, 3}});
    if (read) {
      g.Node("Mul", {"y", "mask"}, {"z"}, {}, "mul");
      g.Output("z", pb::kFloat, {{2, 3}});
    }
    pb::ModelProto m = ModelFromGraph(g.Build(), 9, 7);
    ConvertResult up = ConvertTo(m, 13);
    ASSERT_TRUE(up.blockers.empty()) << up.blockers[0].reason;
    EXPECT_EQ(OpCount(up.model, "Cast"), read ? 1 : 0);
    const Feeds feeds = {{"x", RandomFloats({2, 3}, 40)}};
    ExpectSameOutputs(m, up.model, feeds);
    // And back down to 9: the bool mask cast to float again.
    ConvertResult down = ConvertTo(up.model, 9);
    ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
    ExpectSameOutputs(m, down.model, feeds);
  }
  // Only the mask read, not the output: the node goes with its mask's
  // rerouting (the adapter must not touch it after that).
  for (int64_t from : {9, 13}) {
    SCOPED_TRACE(from);
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, {{2, 3}}).Node("Dropout", {"x"}, {"y", "mask"}, {}, "drop");
    if (from == 9) {
      g.Node("Add", {"x", "mask"}, {"z"}, {}, "add");
    } else {
      g.Node("Where", {"mask", "x", "x"}, {"z"}, {}, "where");
    }
    pb::ModelProto m = ModelFromGraph(g.Output("z", pb::kFloat, {{2, 3}}).Build(), from, 7);
    ConvertResult r = ConvertTo(m, from == 9 ? 13 : 9);
    ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
    ExpectValid(r.model);
    ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3}, 41)}});
  }
  // A mask that is a graph output would change the output's type: refused.
  pb::ModelProto m13 = ModelFromGraph(GraphBuilder("g")
                                          .Input("x", pb::kFloat, {{4}})
                                          .Node("Dropout", {"x"}, {"y", "mask"}, {}, "drop")
                                          .Output("y", pb::kFloat, {{4}})
                                          .Output("mask", pb::kBool, {{4}})
                                          .Build(),
                                      13, 7);
  ConvertResult down = ConvertTo(m13, 9);
  ASSERT_FALSE(down.blockers.empty());
  EXPECT_THAT(down.blockers[0].reason, HasSubstr("graph output"));
}

TEST(ConvertAdaptersTest, OneHotIndicesFedAtRunTimeWrapLikeOpset11) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("i", pb::kInt64, {{2, 3}})
                                        .Initializer(Named(Int64s({1}, {5}), "depth"))
                                        .Initializer(Named(Floats({2}, {0, 1}), "values"))
                                        .Node("OneHot", {"i", "depth", "values"}, {"y"}, {AttrInt("axis", -1)}, "oh")
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    11, 6);
  ConvertResult r = ConvertTo(m, 9);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  EXPECT_EQ(OpCount(r.model, "Where"), 1);
  // Negative, in range, and out of range both ways.
  ExpectSameOutputs(m, r.model, {{"i", Int64s({2, 3}, {-1, 0, 4, -5, 7, -9})}});
}

TEST(ConvertAdaptersTest, BroadcastingMaxBelowEightAddsZerosOfTheOutputShape) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("a", pb::kFloat, {{2, 3}})
                                        .Input("b", pb::kFloat, {{3}})
                                        .Node("Max", {"a", "b"}, {"y"}, {}, "max")
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    13, 7);
  ConvertResult r = ConvertTo(m, 7);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  EXPECT_EQ(OpCount(r.model, "Add"), 1);
  ExpectSameOutputs(m, r.model, {{"a", RandomFloats({2, 3}, 15)}, {"b", RandomFloats({3}, 16)}});
}

TEST(ConvertAdaptersTest, ReshapeAllowzeroGoesWhereTheShapeHoldsNoZero) {
  for (bool zero : {false, true}) {
    std::vector<int64_t> in_shape = zero ? std::vector<int64_t>{0, 3} : std::vector<int64_t>{2, 3};
    std::vector<int64_t> shape = zero ? std::vector<int64_t>{3, 0} : std::vector<int64_t>{3, 2};
    pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                          .Input("x", pb::kFloat, in_shape)
                                          .Initializer(Named(Int64s({2}, shape), "shape"))
                                          .Node("Reshape", {"x", "shape"}, {"y"}, {AttrInt("allowzero", 1)}, "r")
                                          .Output("y", pb::kFloat)
                                          .Build(),
                                      14, 7);
    ConvertResult r = ConvertTo(m, 13);
    ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
    EXPECT_EQ(OpCount(r.model, "Reshape"), zero ? 0 : 1);
    ExpectSameOutputs(m, r.model, {{"x", RandomFloats(in_shape, 17)}});
  }
}

TEST(ConvertAdaptersTest, TopKSmallestIsTheNegatedLargestBelowEleven) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{3, 5}})
                                        .Initializer(Named(Int64s({1}, {2}), "k"))
                                        .Node("TopK", {"x", "k"}, {"values", "indices"}, {AttrInt("largest", 0)}, "topk")
                                        .Output("values", pb::kFloat)
                                        .Output("indices", pb::kInt64)
                                        .Build(),
                                    11, 6);
  ConvertResult r = ConvertTo(m, 10);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  EXPECT_EQ(OpCount(r.model, "Neg"), 2);
  // Ties too: the lower index first in both.
  ExpectSameOutputs(m, r.model, {{"x", Floats({3, 5}, {3, 1, 2, 1, 5, 0, 0, -1, 4, 4, 9, 8, 7, 6, 5})}});
  EXPECT_EQ(r.model.graph->output[0].name, "values");
}

TEST(ConvertAdaptersTest, PerAxisDequantizeBelowThirteenIsWrittenOut) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kUint8, {{2, 3, 2}})
                                        .Initializer(Named(Floats({3}, {0.5f, 0.125f, 2.0f}), "scale"))
                                        .Initializer(Named(Uint8s({3}, {0, 128, 7}), "zero"))
                                        .Node("DequantizeLinear", {"x", "scale", "zero"}, {"y"}, {AttrInt("axis", 1)}, "dq")
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    13, 7);
  ConvertResult r = ConvertTo(m, 10);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  EXPECT_EQ(OpCount(r.model, "DequantizeLinear"), 0);
  ExpectSameOutputs(m, r.model, {{"x", Uint8s({2, 3, 2}, {0, 1, 127, 128, 255, 7, 3, 9, 200, 100, 50, 25})}}, 0, 0);
}

// A quantized bias: int32 per axis, with no zero point or one of zeros
// (values past 2^24 round in the Cast as in the operator); a nonzero int32
// zero point blocks, with its reason.
TEST(ConvertAdaptersTest, PerAxisInt32DequantizeBelowThirteen) {
  const Feeds feeds = {{"x", Int32s({2, 3}, {0, -7, 123456789, -2147483647, 16777217, 5})}};
  for (int zero : {-1, 0, 3}) {
    SCOPED_TRACE("zero point " + std::to_string(zero));
    GraphBuilder g("g");
    g.Input("x", pb::kInt32, {{2, 3}}).Initializer(Named(Floats({3}, {0.5f, 1e-3f, 3.0f}), "scale"));
    std::vector<std::string> in = {"x", "scale"};
    if (zero >= 0) {
      g.Initializer(Named(Int32s({3}, {0, zero, 0}), "zero"));
      in.push_back("zero");
    }
    pb::ModelProto m = ModelFromGraph(
        g.Node("DequantizeLinear", in, {"y"}, {AttrInt("axis", 1)}, "dq").Output("y", pb::kFloat).Build(), 13,
        7);
    ConvertResult r = ConvertTo(m, 10);
    if (zero > 0) {
      ASSERT_EQ(r.blockers.size(), 1u);
      EXPECT_NE(r.blockers[0].reason.find("zero point below 13 must be a constant of zeros"),
                std::string::npos)
          << r.blockers[0].reason;
      continue;
    }
    ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
    EXPECT_EQ(OpCount(r.model, "DequantizeLinear"), 0);
    ExpectSameOutputs(m, r.model, feeds, 0, 0);
  }
}

// What QAT exports write: per-axis weight quantization, and per-tensor
// scales and zero points as one-element 1-D tensors (constant, or from an
// Identity).
TEST(ConvertAdaptersTest, PerAxisQuantizeAndOneElementScalesGoBelowThirteen) {
  for (bool int8 : {false, true}) {
    SCOPED_TRACE(int8 ? "int8" : "uint8");
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, {{2, 3, 4}})
        .Initializer(Named(Floats({3}, {0.5f, 0.125f, 0.01f}), "scale"))
        .Initializer(Named(Floats({1}, {0.25f}), "scale1"));
    if (int8) {
      g.Initializer(Named(Int8s({3}, {0, -3, 7}), "zero")).Initializer(Named(Int8s({1}, {-2}), "zero1"));
    } else {
      g.Initializer(Named(Uint8s({3}, {0, 128, 7}), "zero")).Initializer(Named(Uint8s({1}, {3}), "zero1"));
    }
    pb::ModelProto m =
        ModelFromGraph(g.Node("QuantizeLinear", {"x", "scale", "zero"}, {"q"}, {AttrInt("axis", 1)}, "q_axis")
                           .Node("Identity", {"zero1"}, {"zero1_fed"})
                           .Node("QuantizeLinear", {"x", "scale1", "zero1_fed"}, {"q1"}, {}, "q_tensor")
                           .Node("DequantizeLinear", {"q1", "scale1", "zero1"}, {"dq1"}, {}, "dq_tensor")
                           .Output("q", int8 ? pb::kInt8 : pb::kUint8)
                           .Output("dq1", pb::kFloat)
                           .Build(),
                       13, 7);
    // Ties at .5 (round half to even), and values past the range (saturation).
    const Feeds feeds = {
        {"x", Floats({2, 3, 4}, {0.25f,  0.75f,  -0.25f,  100.f,  0.0625f, 0.1875f, -30.f, 30.f,  //
                                 0.005f, 0.015f, -0.005f, 0.3f,                                   //
                                 1.25f,  -1.25f, 63.9f,   -64.1f, 0.f,     1.f,     -1.f,  16.f,  //
                                 0.025f, -2.f,   2.f,     0.035f})}};
    ConvertResult r12 = ConvertTo(m, 12);
    ASSERT_TRUE(r12.blockers.empty()) << r12.blockers[0].reason;
    EXPECT_EQ(OpCount(r12.model, "Round"), 1);
    ExpectSameOutputs(m, r12.model, feeds, 0, 0);
    ConvertResult r11 = ConvertTo(m, 11);
    ASSERT_TRUE(r11.blockers.empty()) << r11.blockers[0].reason;
    ExpectSameOutputs(m, r11.model, feeds, 0, 0);
    // Below 11 there is no Round: the per-axis node blocks, and says why.
    ConvertResult r10 = ConvertTo(m, 10);
    ASSERT_EQ(r10.blockers.size(), 1u);
    EXPECT_NE(r10.blockers[0].reason.find("Round, which needs opset 11"), std::string::npos)
        << r10.blockers[0].reason;
  }
  // Per-tensor nodes with one-element scales alone go down to 10.
  pb::ModelProto t = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{4}})
                                        .Initializer(Named(Floats({1}, {0.25f}), "scale1"))
                                        .Initializer(Named(Uint8s({1}, {3}), "zero1"))
                                        .Node("QuantizeLinear", {"x", "scale1", "zero1"}, {"q"}, {}, "q")
                                        .Output("q", pb::kUint8)
                                        .Build(),
                                    13, 7);
  ConvertResult r10 = ConvertTo(t, 10);
  ASSERT_TRUE(r10.blockers.empty()) << r10.blockers[0].reason;
  ExpectValid(r10.model);
  ExpectSameOutputs(t, r10.model, {{"x", Floats({4}, {0.125f, -1.f, 70.f, 0.375f})}}, 0, 0);
}

}  // namespace onnxkit::testing
