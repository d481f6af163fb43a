// The cpu backend's Sum and Dropout against the reference kernels: Sum of
// equally shaped float inputs bit for bit, Dropout in inference as its
// input, and the cases that run on the reference kernels.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

// Runs `graph` on the reference and on the cpu backend with `threads`
// threads and expects byte-identical outputs (float NaNs: any NaN); returns
// the cpu outputs.
std::vector<runner::RtValue> ExpectSameBytes(const pb::GraphProto& graph, const Feeds& feeds,
                                             int64_t opset = 18, int threads = 1) {
  absl::StatusOr<std::vector<runner::RtValue>> ref =
      RunGraphOn(runner::Backend::kReference, graph, feeds, opset);
  EXPECT_TRUE(ref.ok()) << "reference: " << ref.status();
  absl::StatusOr<std::vector<runner::RtValue>> cpu =
      RunGraphOn(runner::Backend::kCpu, graph, feeds, opset, threads);
  EXPECT_TRUE(cpu.ok()) << "cpu: " << cpu.status();
  if (!ref.ok() || !cpu.ok()) return {};
  EXPECT_EQ(ref->size(), cpu->size());
  for (size_t i = 0; i < ref->size() && i < cpu->size(); ++i) {
    const runner::Tensor& r = (*ref)[i].tensor();
    const runner::Tensor& c = (*cpu)[i].tensor();
    EXPECT_EQ(r.dtype(), c.dtype()) << "output " << i;
    EXPECT_EQ(r.shape(), c.shape()) << "output " << i;
    if (r.nbytes() != c.nbytes()) {
      ADD_FAILURE() << "output " << i << ": " << r.nbytes() << " vs " << c.nbytes() << " bytes";
      continue;
    }
    if (r.dtype() != pb::kFloat) {
      EXPECT_EQ(0, std::memcmp(r.raw(), c.raw(), r.nbytes())) << "output " << i << ": bytes differ";
      continue;
    }
    // Floats bit for bit, except that any NaN matches any NaN: which
    // operand's NaN an addition of two NaNs returns is up to the compiler.
    int64_t bad = 0;
    for (int64_t k = 0; k < r.size(); ++k) {
      float rv = r.data<float>()[k], cv = c.data<float>()[k];
      if (std::isnan(rv) && std::isnan(cv)) continue;
      if (std::memcmp(&rv, &cv, sizeof(float)) != 0 && bad++ == 0) {
        ADD_FAILURE() << "output " << i << " element " << k << ": expected " << rv << ", got " << cv;
      }
    }
    EXPECT_EQ(bad, 0) << "output " << i << ": elements differ";
  }
  return *std::move(cpu);
}

// Expects both backends to fail on `graph`.
void ExpectBothFail(const pb::GraphProto& graph, const Feeds& feeds, int64_t opset = 18) {
  EXPECT_FALSE(RunGraphOn(runner::Backend::kReference, graph, feeds, opset).ok());
  EXPECT_FALSE(RunGraphOn(runner::Backend::kCpu, graph, feeds, opset).ok());
}

// Sum of inputs x0, x1... of `dtype`.
pb::GraphProto SumGraph(int inputs, int32_t dtype = pb::kFloat) {
  GraphBuilder g("g");
  std::vector<std::string> names;
  for (int i = 0; i < inputs; ++i) {
    names.push_back("x" + std::to_string(i));
    g.Input(names.back(), dtype);
  }
  g.Node("Sum", names, {"y"}).Output("y", dtype);
  return g.Build();
}

Feeds RandomFeeds(const std::vector<std::vector<int64_t>>& shapes, uint32_t seed) {
  Feeds feeds;
  for (const std::vector<int64_t>& shape : shapes) {
    // Wide ranges, so that the order of the additions shows in the roundings.
    feeds.emplace_back("x" + std::to_string(feeds.size()), RandomFloats(shape, seed++, -1e4f, 1e4f));
  }
  return feeds;
}

TEST(CpuSumTest, EqualShapesMatchReferenceBitForBit) {
  uint32_t seed = 1;
  for (int inputs : {2, 3, 4, 7}) {
    for (std::vector<int64_t> shape :
         std::vector<std::vector<int64_t>>{{}, {1}, {5}, {3, 17}, {2, 3, 4, 5}, {4099}}) {
      SCOPED_TRACE(::testing::Message() << inputs << " inputs, rank " << shape.size());
      std::vector<std::vector<int64_t>> shapes(static_cast<size_t>(inputs), shape);
      for (int64_t opset : {6, 8, 13, 21})
        ExpectSameBytes(SumGraph(inputs), RandomFeeds(shapes, seed), opset);
      seed += static_cast<uint32_t>(inputs);
    }
  }
}

TEST(CpuSumTest, SpecialValuesAndEmptyTensors) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  ExpectSameBytes(SumGraph(3), {{"x0", Floats({7}, {inf, -inf, nan, 0.f, -0.f, big, tiny})},
                                {"x1", Floats({7}, {-inf, 1.f, 1.f, -0.f, -0.f, big, tiny})},
                                {"x2", Floats({7}, {1.f, inf, -nan, 0.f, -0.f, -big, -tiny})}});
  // Left to right: (1e8 + 1 - 1e8) rounds differently from (1e8 - 1e8 + 1).
  ExpectSameBytes(SumGraph(3), {{"x0", Floats({2}, {1e8f, 1.f})},
                                {"x1", Floats({2}, {1.f, 1e8f})},
                                {"x2", Floats({2}, {-1e8f, -1e8f})}});
  ExpectSameBytes(SumGraph(2), RandomFeeds({{0, 3}, {0, 3}}, 5));
}

TEST(CpuSumTest, LargeTensorsMatchReferenceOnTwoThreads) {
  uint32_t seed = 100;
  for (int inputs : {2, 3, 5}) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << inputs << " inputs, " << threads << " threads");
      std::vector<std::vector<int64_t>> shapes(static_cast<size_t>(inputs),
                                               std::vector<int64_t>{3, 517, 301});
      ExpectSameBytes(SumGraph(inputs), RandomFeeds(shapes, seed), 18, threads);
      seed += static_cast<uint32_t>(inputs);
    }
  }
}

TEST(CpuSumTest, OneInputIsTheOutput) {
  runner::Tensor x = RandomFloats({4, 5}, 1);
  std::vector<runner::RtValue> out = ExpectSameBytes(SumGraph(1), {{"x0", x}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tensor().raw(), x.raw());  // no copy
  ExpectSameBytes(SumGraph(1), {{"x0", RandomFloats({0}, 1)}});
}

TEST(CpuSumTest, BroadcastingAndOtherTypesFallBack) {
  ExpectSameBytes(SumGraph(2), RandomFeeds({{3, 4}, {4}}, 1));
  ExpectSameBytes(SumGraph(3), RandomFeeds({{2, 1, 4}, {3, 1}, {}}, 4));
  ExpectSameBytes(SumGraph(2), RandomFeeds({{1, 5}, {3, 5}}, 7));
  ExpectSameBytes(SumGraph(2, pb::kInt32), {{"x0", RandomInts(pb::kInt32, {3, 4}, 1, -1000, 1000)},
                                            {"x1", RandomInts(pb::kInt32, {3, 4}, 2, -1000, 1000)}});
  ExpectSameBytes(SumGraph(2, pb::kInt64),
                  {{"x0", Int64s({2}, {1, 1LL << 62})}, {"x1", Int64s({2}, {2, 1LL << 62})}});
  ExpectSameBytes(SumGraph(1, pb::kInt64), {{"x0", Int64s({2}, {1, 2})}});
  // Opsets before 8 do not broadcast; mixed types are invalid.
  ExpectBothFail(SumGraph(2), RandomFeeds({{3, 4}, {4}}, 1), 7);
  ExpectBothFail(SumGraph(2), RandomFeeds({{3, 4}, {4}}, 1), 6);
  GraphBuilder mixed("g");
  mixed.Input("a").Input("b", pb::kInt64).Node("Sum", {"a", "b"}, {"y"}).Output("y");
  ExpectBothFail(mixed.Build(), {{"a", RandomFloats({2}, 1)}, {"b", Int64s({2}, {1, 2})}});
}

// A bool scalar initializer.
pb::TensorProto BoolInitializer(const std::string& name, bool value) {
  pb::TensorProto t;
  t.name = name;
  t.data_type = pb::kBool;
  t.int32_data = {value ? 1 : 0};
  return t;
}

pb::TensorProto FloatInitializer(const std::string& name, float value) {
  pb::TensorProto t;
  t.name = name;
  t.data_type = pb::kFloat;
  t.float_data = {value};
  return t;
}

TEST(CpuDropoutTest, InferenceIsTheInputAtEveryOpset) {
  for (int64_t opset : {6, 7, 10, 11, 12, 13, 21, 22}) {
    SCOPED_TRACE(::testing::Message() << "opset " << opset);
    GraphBuilder g("g");
    g.Input("x").Node("Dropout", {"x"}, {"y"},
                      opset < 12 ? std::vector<pb::AttributeProto>{AttrFloat("ratio", 0.3f)}
                                 : std::vector<pb::AttributeProto>{});
    g.Output("y");
    runner::Tensor x = RandomFloats({3, 4, 5}, 1);
    std::vector<runner::RtValue> out = ExpectSameBytes(g.Build(), {{"x", x}}, opset);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].tensor().raw(), x.raw());  // no copy
  }
  // Opset 6 with is_test set, and float16 data.
  GraphBuilder t("g");
  t.Input("x").Node("Dropout", {"x"}, {"y"}, {AttrInt("is_test", 1)}).Output("y");
  ExpectSameBytes(t.Build(), {{"x", RandomFloats({2, 3}, 2)}}, 6);
  GraphBuilder h("g");
  h.Input("x", pb::kFloat16).Node("Dropout", {"x"}, {"y"}).Output("y", pb::kFloat16);
  ExpectSameBytes(h.Build(), {{"x", MakeTensor<uint16_t>(pb::kFloat16, {3}, {0x3c00, 0x8000, 0x7e00})}}, 13);
}

TEST(CpuDropoutTest, TrainingModeFalseOrAbsentIsTheInput) {
  // training_mode a false initializer, a fed false, or omitted ("") with a ratio.
  GraphBuilder c("g");
  c.Input("x").Initializer(FloatInitializer("r", 0.5f)).Initializer(BoolInitializer("t", false));
  c.Node("Dropout", {"x", "r", "t"}, {"y"}, {AttrInt("seed", 3)}).Output("y");
  runner::Tensor x = RandomFloats({4, 6}, 3);
  std::vector<runner::RtValue> out = ExpectSameBytes(c.Build(), {{"x", x}}, 13);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tensor().raw(), x.raw());
  GraphBuilder f("g");
  f.Input("x").Input("t", pb::kBool).Node("Dropout", {"x", "", "t"}, {"y"}).Output("y");
  ExpectSameBytes(f.Build(), {{"x", x}, {"t", BoolScalar(false)}}, 13);
  GraphBuilder r("g");
  r.Input("x").Initializer(FloatInitializer("r", 0.9f)).Node("Dropout", {"x", "r"}, {"y"}).Output("y");
  ExpectSameBytes(r.Build(), {{"x", x}}, 22);
}

TEST(CpuDropoutTest, InferenceMaskIsAllOnes) {
  // The input's type before opset 10, bool from 10.
  for (int32_t dtype : {pb::kFloat, pb::kFloat16, pb::kDouble, pb::kBfloat16}) {
    for (int64_t opset : {6, 7, 9, 10, 12, 13, 22}) {
      if (dtype == pb::kBfloat16 && opset < 22) continue;
      SCOPED_TRACE(::testing::Message() << "dtype " << dtype << " opset " << opset);
      GraphBuilder g("g");
      g.Input("x", dtype).Node("Dropout", {"x"}, {"y", "m"}).Output("y", dtype).Output("m", 0);
      runner::Tensor x = MakeTensor<uint8_t>(dtype, {3, 5}, {});
      std::vector<runner::RtValue> out = ExpectSameBytes(g.Build(), {{"x", x}}, opset);
      ASSERT_EQ(out.size(), 2u);
      EXPECT_EQ(out[0].tensor().raw(), x.raw());
    }
  }
}

TEST(CpuDropoutTest, MaskReadInsideTheGraphHoldsOnesAcrossRunsAndShapes) {
  // The kernel keeps the mask from run to run; a shape or type change
  // makes a new one.
  for (int64_t opset : {9, 13}) {
    SCOPED_TRACE(::testing::Message() << "opset " << opset);
    GraphBuilder g("g");
    g.Input("x").Node("Dropout", {"x"}, {"y", "m"});
    g.Node("Cast", {"m"}, {"mf"}, {AttrInt("to", pb::kFloat)}).Node("Mul", {"y", "mf"}, {"z"}).Output("z");
    ExpectRepeatedRunsMatch(g.Build(),
                            {{{"x", RandomFloats({2, 3}, 5)}},
                             {{"x", RandomFloats({2, 3}, 6)}},
                             {{"x", RandomFloats({4, 1, 5}, 7)}},
                             {{"x", RandomFloats({2, 3}, 8)}}},
                            0, opset);
  }
}

TEST(CpuDropoutTest, TrainingAndInvalidInputsFallBack) {
  runner::Tensor x = RandomFloats({4, 6}, 4);
  // Training: a seeded random mask, with and without the mask output.
  for (bool with_mask : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "training, mask " << with_mask);
    GraphBuilder g("g");
    g.Input("x").Initializer(FloatInitializer("r", 0.5f)).Initializer(BoolInitializer("t", true));
    std::vector<std::string> outs = {"y"};
    if (with_mask) outs.push_back("m");
    g.Node("Dropout", {"x", "r", "t"}, outs, {AttrInt("seed", 7)}).Output("y");
    if (with_mask) g.Output("m", pb::kBool);
    ExpectSameBytes(g.Build(), {{"x", x}}, 13);
  }
  // Training with ratio 0 (the input), and a fed true.
  GraphBuilder z("g");
  z.Input("x").Initializer(FloatInitializer("r", 0.f)).Initializer(BoolInitializer("t", true));
  z.Node("Dropout", {"x", "r", "t"}, {"y"}).Output("y");
  ExpectSameBytes(z.Build(), {{"x", x}}, 13);
  GraphBuilder f("g");
  f.Input("x").Input("t", pb::kBool).Node("Dropout", {"x", "", "t"}, {"y"}, {AttrInt("seed", 1)}).Output("y");
  ExpectSameBytes(f.Build(), {{"x", x}, {"t", BoolScalar(true)}}, 13);
  // Malformed training_mode and ratio inputs: errors on both backends.
  GraphBuilder bt("g");
  bt.Input("x").Input("t", pb::kBool).Node("Dropout", {"x", "", "t"}, {"y"}).Output("y");
  ExpectBothFail(bt.Build(), {{"x", x}, {"t", Bools({2}, {false, false})}}, 13);
  GraphBuilder br("g");
  br.Input("x").Input("r").Node("Dropout", {"x", "r"}, {"y"}).Output("y");
  ExpectBothFail(br.Build(), {{"x", x}, {"r", Floats({2}, {0.1f, 0.2f})}}, 13);
  // Training with a ratio outside [0, 1).
  GraphBuilder bad("g");
  bad.Input("x").Initializer(FloatInitializer("r", 1.5f)).Initializer(BoolInitializer("t", true));
  bad.Node("Dropout", {"x", "r", "t"}, {"y"}).Output("y");
  ExpectBothFail(bad.Build(), {{"x", x}}, 13);
}

}  // namespace
}  // namespace onnxkit::testing
