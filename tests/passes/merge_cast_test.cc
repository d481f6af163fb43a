// Tests of the merge-cast pass (passes/merge_cast.cc).
#include <string>

#include "gtest/gtest.h"
#include "tests/passes/eliminate_test_util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

struct Case {
  std::string label;
  int32_t a, b, c;
  int casts_left;  // after the pass
};

// x_in: float[2, 3] -> Cast(a) -> Relu -> Cast(b) -> Cast(c) -> y
// (the Relu makes the chain start at a node output of type a).
pb::ModelProto CastChain(const Case& k) {
  return ModelFromGraph(GraphBuilder("main")
                            .Input("x_in", pb::kFloat, {{2, 3}})
                            .Node("Cast", {"x_in"}, {"xa"}, {AttrInt("to", k.a)})
                            .Node("Identity", {"xa"}, {"x"})
                            .ValueInfo("x", k.a, {{2, 3}})
                            .Node("Cast", {"x"}, {"m"}, {AttrInt("to", k.b)})
                            .Node("Cast", {"m"}, {"y"}, {AttrInt("to", k.c)})
                            .Output("y", k.c, {{2, 3}})
                            .Build());
}

class MergeCastTest : public ::testing::TestWithParam<Case> {};

TEST_P(MergeCastTest, MergesOnlyExactWidenings) {
  const Case& k = GetParam();
  pb::ModelProto m = CastChain(k);
  PassResult r = RunOrFail(m, "merge-cast");
  EXPECT_EQ(OpCount(r.model, "Cast"), 1 + k.casts_left);
  EXPECT_EQ(OutputNames(r.model), OutputNames(m));
  ExpectSameOutputs(m, r.model, {{"x_in", RandomFloats({2, 3}, 1, -100.f, 100.f)}}, 0, 0);
  ExpectFixedPoint(r.model, "merge-cast");
}

INSTANTIATE_TEST_SUITE_P(
    Types, MergeCastTest,
    ::testing::Values(Case{"f16_f32_f64", pb::kFloat16, pb::kFloat, pb::kDouble, 1},
                      Case{"i8_i32_i64", pb::kInt8, pb::kInt32, pb::kInt64, 1},
                      Case{"u8_i16_f32", pb::kUint8, pb::kInt16, pb::kFloat, 1},
                      Case{"i16_f32_i8", pb::kInt16, pb::kFloat, pb::kInt8, 2},  // int -> float -> int
                      Case{"i8_i32_u8", pb::kInt8, pb::kInt32, pb::kUint8, 1},    // wraps the same
                      Case{"f32_f16_f32", pb::kFloat, pb::kFloat16, pb::kFloat, 2},
                      Case{"f32_i32_f32", pb::kFloat, pb::kInt32, pb::kFloat, 2},
                      Case{"i32_f32_i64", pb::kInt32, pb::kFloat, pb::kInt64, 2},
                      Case{"f16_f32_f16", pb::kFloat16, pb::kFloat, pb::kFloat16, 0},
                      Case{"i8_i64_i8", pb::kInt8, pb::kInt64, pb::kInt8, 0}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.label; });

TEST(MergeCastChainTest, TypeFromTheProducingCastAndSharedIntermediate) {
  // No declared type for "h": A comes from the Cast producing it. The
  // second pair shares its intermediate and stays.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{4}})
                                        .Node("Cast", {"x"}, {"h"}, {AttrInt("to", pb::kFloat16)})
                                        .Node("Cast", {"h"}, {"f"}, {AttrInt("to", pb::kFloat)})
                                        .Node("Cast", {"f"}, {"y"}, {AttrInt("to", pb::kDouble)})
                                        .Node("Cast", {"x"}, {"d"}, {AttrInt("to", pb::kDouble)})
                                        .Node("Cast", {"d"}, {"z"}, {AttrInt("to", pb::kFloat)})
                                        .Output("y", pb::kDouble, {{4}})
                                        .Output("z", pb::kFloat, {{4}})
                                        .Output("d", pb::kDouble, {{4}})
                                        .Build());
  PassResult r = RunOrFail(m, "merge-cast");
  // h -> f -> y merges to h -> y; x -> h stays (float -> float16 rounds).
  EXPECT_EQ(OpCount(r.model, "Cast"), 4);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({4}, 2)}}, 0, 0);
  ExpectFixedPoint(r.model, "merge-cast");
}

TEST(MergeCastChainTest, UnknownTypesAndBadAttributesAreLeftAlone) {
  // "x" has no type, so A is unknown; "v" feeds a Cast to an unknown type
  // and a Cast without "to".
  pb::GraphProto g = GraphBuilder("main")
                         .Input("x", 0)
                         .Input("v", pb::kInt8, {{2}})
                         .Node("Cast", {"x"}, {"m"}, {AttrInt("to", pb::kDouble)})
                         .Node("Cast", {"m"}, {"y"}, {AttrInt("to", pb::kFloat)})
                         .Node("Cast", {"v"}, {"w"}, {AttrInt("to", pb::kInt32)})
                         .Node("Cast", {"w"}, {"z"}, {AttrInt("to", 99999)})
                         .Node("Cast", {"v"}, {"u"}, {AttrInt("to", pb::kInt32)})
                         .Node("Cast", {"u"}, {"t"})
                         .Output("y")
                         .Output("z")
                         .Output("t")
                         .Build();
  absl::StatusOr<PassResult> r = RunPasses(ModelFromGraph(g), "merge-cast");
  EXPECT_TRUE(!r.ok() || r->rewrites == 0);  // an error or no change
}

TEST(MergeCastChainTest, WorksInsideAnIfBody) {
  pb::GraphProto body = GraphBuilder("body")
                            .Node("Cast", {"x"}, {"d"}, {AttrInt("to", pb::kDouble)})
                            .Node("Cast", {"d"}, {"out"}, {AttrInt("to", pb::kFloat)})
                            .Build();
  pb::ModelProto m = InIf(body, "out", {{"x", {3}}}, {3});
  PassResult r = RunOrFail(m, "merge-cast");
  // float -> double -> float is exact, but "out" cannot be renamed onto the
  // outer "x": the pair becomes nothing only where it can. Here: stays.
  EXPECT_EQ(r.rewrites, 0);
  pb::GraphProto body2 = GraphBuilder("body")
                             .Node("Neg", {"x"}, {"n"})
                             .ValueInfo("n", pb::kFloat, {{3}})
                             .Node("Cast", {"n"}, {"d"}, {AttrInt("to", pb::kDouble)})
                             .Node("Cast", {"d"}, {"out"}, {AttrInt("to", pb::kFloat)})
                             .Build();
  pb::ModelProto m2 = InIf(body2, "out", {{"x", {3}}}, {3});
  PassResult r2 = RunOrFail(m2, "merge-cast");
  EXPECT_EQ(OpCount(r2.model, "Cast"), 0);
  ExpectSameOutputs(m2, r2.model, {{"c", BoolScalar(true)}, {"x", RandomFloats({3}, 3)}}, 0, 0);
  ExpectFixedPoint(r2.model, "merge-cast");
}

}  // namespace
}  // namespace onnxkit::testing
