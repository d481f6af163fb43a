// Tests of the range guard of `onnxkit convert --float16 / --bfloat16`
// (passes/convert/range_guard.h): models built here whose float32
// activations pass float16's range (65504) fail verification when converted
// unguarded and pass with the guard, which keeps the overflowing nodes
// float32.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "passes/convert/convert.h"
#include "passes/convert/range_guard.h"
#include "runner/tensor.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using passes::convert::ConvertResult;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Guarded {
  int32_t target = pb::kFloat16;
  bool guard = true;
  bool verify = true;
  bool dry_run = false;
};

absl::StatusOr<ConvertResult> Precision(const pb::ModelProto& m, Guarded g = {}) {
  io::LoadedModel loaded;
  loaded.proto = m;
  passes::convert::ConvertOptions o;
  passes::convert::PrecisionOptions p;
  p.target = g.target;
  p.range_guard = g.guard;
  o.precision = p;
  o.verify = g.verify;
  o.dry_run = g.dry_run;
  o.verify_options.atol = 5e-2;
  o.verify_options.rtol = 5e-2;
  o.verify_options.min_sqnr_db = 30;
  return passes::convert::Convert(loaded, o);
}

int32_t InitType(const pb::ModelProto& m, const std::string& name) {
  for (const pb::TensorProto& t : m.graph->initializer) {
    if (t.name == name) return t.data_type;
  }
  return -1;
}

// x[2,4] in [0, 1) -> mm1 (w1: 100..115) -> h (hundreds) -> mm2 (w2: 60000..)
// -> g (over 1e5 where a row of x sums past about 0.3) -> scale (* 1e-5) -> y
// -> relu -> out: only g passes 65504; mm2 writes it, scale reads it.
pb::ModelProto Overflowing() {
  return ModelFromGraph(GraphBuilder("g")
                            .Input("x", pb::kFloat, {{2, 4}})
                            .Initializer(RawFloatTensor("w1", {4, 4}, 100.f))
                            .Initializer(RawFloatTensor("w2", {4, 4}, 60000.f))
                            .Initializer(RawFloatTensor("s", {}, 1e-5f))
                            .Node("MatMul", {"x", "w1"}, {"h"}, {}, "mm1")
                            .Node("MatMul", {"h", "w2"}, {"g"}, {}, "mm2")
                            .Node("Mul", {"g", "s"}, {"y"}, {}, "scale")
                            .Node("Relu", {"y"}, {"out"}, {}, "relu")
                            .Output("out", pb::kFloat, {{2, 4}})
                            .Build(),
                        17);
}

TEST(RangeGuardTest, UnguardedFloat16Overflows) {
  auto r = Precision(Overflowing(), {.guard = false});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->verified);
  ASSERT_TRUE(r->verification.has_value());
  ASSERT_EQ(r->verification->outputs.size(), 1u);
  EXPECT_GT(r->verification->outputs[0].metrics.nan_inf_mismatches, 0);
  EXPECT_FALSE(r->precision->range_guard.applied);
  EXPECT_THAT(r->precision->range_guard.nodes, IsEmpty());
}

TEST(RangeGuardTest, KeepsTheOverflowingNodesFloat32AndVerifies) {
  auto r = Precision(Overflowing());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->verified) << r->verification->summary;
  const passes::convert::RangeGuardReport& g = r->precision->range_guard;
  EXPECT_TRUE(g.applied);
  EXPECT_EQ(g.limits.high, 32752);
  EXPECT_EQ(g.limits.low, 1.0 / 16384);
  // mm2 writes g, scale reads it; mm1 and relu convert.
  EXPECT_THAT(g.nodes, ElementsAre(HasSubstr("'mm2'"), HasSubstr("'scale'")));
  EXPECT_EQ(r->precision->kept.at("range guard: float32 values beyond +-32752 or all below 6.10352e-05"), 2);
  EXPECT_EQ(r->precision->nodes_converted, 2);
  EXPECT_EQ(InitType(r->model, "w1"), pb::kFloat16);
  EXPECT_EQ(InitType(r->model, "w2"), pb::kFloat);
  EXPECT_EQ(InitType(r->model, "s"), pb::kFloat);
  EXPECT_THAT(r->warnings, ::testing::Contains(HasSubstr("range guard: 2 node(s) kept float32")));
  ExpectValid(r->model);
}

TEST(RangeGuardTest, GuardsWithoutVerificationAndInDryRuns) {
  auto r = Precision(Overflowing(), {.verify = false});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->verification.has_value());
  EXPECT_EQ(r->precision->range_guard.nodes.size(), 2u);
  auto d = Precision(Overflowing(), {.dry_run = true});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->precision->range_guard.nodes.size(), 2u);
}

TEST(RangeGuardTest, Bfloat16HoldsTheValues) {
  auto r = Precision(Overflowing(), {.target = pb::kBfloat16});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->verified) << r->verification->summary;
  EXPECT_TRUE(r->precision->range_guard.applied);
  EXPECT_GT(r->precision->range_guard.limits.high, 1e38);
  EXPECT_LT(r->precision->range_guard.limits.low, 1e-37);
  EXPECT_THAT(r->precision->range_guard.nodes, IsEmpty());
  EXPECT_EQ(r->precision->nodes_converted, 4);
}

TEST(RangeGuardTest, ValuesTooSmallForFloat16StayFloat32) {
  // x * 1e-9 flushes to zero in float16; * 1e9 brings it back in float32.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 4}})
                                        .Initializer(RawFloatTensor("w", {4, 4}, 1.f))
                                        .Initializer(RawFloatTensor("small", {}, 1e-9f))
                                        .Initializer(RawFloatTensor("large", {}, 1e9f))
                                        .Node("MatMul", {"x", "w"}, {"h"}, {}, "mm")
                                        .Node("Mul", {"h", "small"}, {"t"}, {}, "down")
                                        .Node("Mul", {"t", "large"}, {"y"}, {}, "up")
                                        .Output("y", pb::kFloat, {{2, 4}})
                                        .Build(),
                                    17);
  auto unguarded = Precision(m, {.guard = false});
  ASSERT_TRUE(unguarded.ok()) << unguarded.status();
  EXPECT_FALSE(unguarded->verified);
  auto r = Precision(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->verified) << r->verification->summary;
  EXPECT_THAT(r->precision->range_guard.nodes, ElementsAre(HasSubstr("'down'"), HasSubstr("'up'")));
  EXPECT_EQ(InitType(r->model, "w"), pb::kFloat16);
  // bfloat16's normal range goes down to 1e-38.
  auto b = Precision(m, {.target = pb::kBfloat16});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(b->precision->range_guard.nodes, IsEmpty());
}

TEST(RangeGuardTest, InfinityInFloat32IsNoReasonToKeep) {
  // x / 0 is Inf (NaN at 0) in float32 as in float16: Div converts.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 4}})
                                        .Initializer(RawFloatTensor("z", {}, 0.f))
                                        .Initializer(RawFloatTensor("one", {}, 1.f))
                                        .Node("Div", {"x", "z"}, {"d"}, {}, "div")
                                        .Node("Min", {"d", "one"}, {"y"}, {}, "min")
                                        .Output("y", pb::kFloat, {{2, 4}})
                                        .Build(),
                                    17);
  auto r = Precision(m, {.verify = false});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->precision->range_guard.applied);
  EXPECT_THAT(r->precision->range_guard.nodes, IsEmpty());
}

TEST(RangeGuardTest, BodiesOfAnOverflowingIfStayFloat32) {
  // Both branches compute x @ w2 (past 65504) from outer values; the If's
  // output overflows, so every body node stays float32.
  auto branch = [](const std::string& name, const std::string& out) {
    return GraphBuilder(name)
        .Node("MatMul", {"x", "w2"}, {out + "_mm"}, {}, name + "_mm")
        .Node("Relu", {out + "_mm"}, {out}, {}, name + "_relu")
        .Output(out, pb::kFloat, {{2, 4}})
        .Build();
  };
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("c", pb::kBool, {{}})
                                        .Input("x", pb::kFloat, {{2, 4}})
                                        .Initializer(RawFloatTensor("w2", {4, 4}, 60000.f))
                                        .Initializer(RawFloatTensor("s", {}, 1e-5f))
                                        .Node("If", {"c"}, {"g"},
                                              {AttrGraph("then_branch", branch("then", "t")),
                                               AttrGraph("else_branch", branch("else", "e"))},
                                              "if")
                                        .Node("Mul", {"g", "s"}, {"y"}, {}, "scale")
                                        .Output("y", pb::kFloat, {{2, 4}})
                                        .Build(),
                                    17);
  auto unguarded = Precision(m, {.guard = false});
  ASSERT_TRUE(unguarded.ok()) << unguarded.status();
  EXPECT_FALSE(unguarded->verified);
  auto r = Precision(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->verified) << r->verification->summary;
  EXPECT_THAT(r->precision->range_guard.nodes,
              ElementsAre(HasSubstr("'scale'"), HasSubstr("'then_mm'"), HasSubstr("'then_relu'"),
                          HasSubstr("'else_mm'"), HasSubstr("'else_relu'")));
  EXPECT_EQ(InitType(r->model, "w2"), pb::kFloat);
  ExpectValid(r->model);
}

TEST(RangeGuardTest, BodyNodesReadingAnOverflowingOuterValueStayFloat32) {
  // g (past 65504) is computed in the main graph and read inside both
  // branches, whose outputs are small: only the readers stay float32.
  auto branch = [](const std::string& name, const std::string& out) {
    return GraphBuilder(name)
        .Node("Mul", {"g", "s"}, {out + "_small"}, {}, name + "_scale")
        .Node("Relu", {out + "_small"}, {out}, {}, name + "_relu")
        .Output(out, pb::kFloat, {{2, 4}})
        .Build();
  };
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("c", pb::kBool, {{}})
                                        .Input("x", pb::kFloat, {{2, 4}})
                                        .Initializer(RawFloatTensor("w2", {4, 4}, 60000.f))
                                        .Initializer(RawFloatTensor("s", {}, 1e-5f))
                                        .Node("MatMul", {"x", "w2"}, {"g"}, {}, "mm")
                                        .Node("If", {"c"}, {"y"},
                                              {AttrGraph("then_branch", branch("then", "t")),
                                               AttrGraph("else_branch", branch("else", "e"))},
                                              "if")
                                        .Output("y", pb::kFloat, {{2, 4}})
                                        .Build(),
                                    17);
  auto r = Precision(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->verified) << r->verification->summary;
  EXPECT_THAT(r->precision->range_guard.nodes,
              ElementsAre(HasSubstr("'mm'"), HasSubstr("'then_scale'"), HasSubstr("'else_scale'")));
  ExpectValid(r->model);
}

TEST(RangeGuardTest, OverflowInsideABodyKeepsItsNodesFloat32) {
  // The taken branch computes x @ w2 (past 65504) and scales it back down:
  // the If's output is small, and only the guard's view inside the body
  // keeps the two nodes float32.
  pb::GraphProto then_branch = GraphBuilder("then")
                                   .Node("MatMul", {"x", "w2"}, {"big"}, {}, "then_mm")
                                   .Node("Mul", {"big", "s"}, {"t"}, {}, "then_scale")
                                   .Output("t", pb::kFloat, {{2, 4}})
                                   .Build();
  pb::GraphProto else_branch = GraphBuilder("else")
                                   .Node("Relu", {"x"}, {"e"}, {}, "else_relu")
                                   .Output("e", pb::kFloat, {{2, 4}})
                                   .Build();
  runner::Tensor yes = BoolScalar(true);
  pb::ModelProto m = ModelFromGraph(
      GraphBuilder("g")
          .Input("x", pb::kFloat, {{2, 4}})
          .Initializer(InitializerFrom("c", yes))
          .Initializer(RawFloatTensor("w2", {4, 4}, 60000.f))
          .Initializer(RawFloatTensor("s", {}, 1e-5f))
          .Node("If", {"c"}, {"y"},
                {AttrGraph("then_branch", then_branch), AttrGraph("else_branch", else_branch)}, "if")
          .Output("y", pb::kFloat, {{2, 4}})
          .Build(),
      17);
  auto r = Precision(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->verified) << r->verification->summary;
  EXPECT_THAT(r->precision->range_guard.nodes,
              ElementsAre(HasSubstr("'then_mm'"), HasSubstr("'then_scale'")));
  ExpectValid(r->model);
}

TEST(RangeGuardTest, InputsThatCannotBeMadeSkipTheGuardWithAWarning) {
  // An input of unknown rank: random inputs cannot be made.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat)
                                        .Initializer(RawFloatTensor("w", {100}, 1.f))
                                        .Node("Mul", {"x", "w"}, {"y"}, {}, "mul")
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    17);
  auto r = Precision(m, {.verify = false});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->precision->range_guard.applied);
  EXPECT_THAT(r->warnings, ::testing::Contains(HasSubstr("range guard skipped")));
  EXPECT_EQ(r->precision->nodes_converted, 1);
  // Verifying, the same failure is the verification's: an error, as without
  // the guard.
  EXPECT_FALSE(Precision(m).ok());
  EXPECT_FALSE(Precision(m, {.guard = false}).ok());
}

TEST(RangeGuardTest, ObserverKeepsTheLargestFiniteMagnitude) {
  passes::convert::ValueMagnitudes seen;
  auto observe = passes::convert::MagnitudeObserver(&seen);
  auto value = [](std::vector<float> xs) {
    auto t = runner::Tensor::Allocate(pb::kFloat, {static_cast<int64_t>(xs.size())});
    EXPECT_TRUE(t.ok());
    for (size_t i = 0; i < xs.size(); ++i) t->mutable_data<float>()[i] = xs[i];
    return runner::RtValue::FromTensor(std::move(*t));
  };
  auto graph_model = ir::FromProto(Overflowing());
  ASSERT_TRUE(graph_model.ok());
  const ir::Value* h = (*graph_model)->graph().FindValue("h");
  ASSERT_NE(h, nullptr);
  const float inf = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(observe(*h, value({1.f, -7.f, inf})).ok());
  ASSERT_TRUE(observe(*h, value({3.f, std::nanf("")})).ok());
  EXPECT_EQ(seen.at("h"), 7.f);
  ASSERT_TRUE(observe(*h, value({-inf})).ok());
  EXPECT_EQ(seen.at("h"), 7.f);
  const ir::Value* g = (*graph_model)->graph().FindValue("g");
  ASSERT_TRUE(observe(*g, value({inf})).ok());
  EXPECT_FALSE(seen.contains("g"));
}

}  // namespace
}  // namespace onnxkit::testing
