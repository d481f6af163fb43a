// The cpu backend's MatMul and Gemm against the reference kernels: batch
// broadcasting, 1-D operands, constant (prepared) and fed B, transposes,
// alpha / beta and C broadcasts, fallbacks, and one session run with
// changing shapes (primitive caches rebuilt per shape).
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

// An initializer holding a float tensor's values.

void ExpectMatMul(std::vector<int64_t> a, std::vector<int64_t> b, bool constant_b, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "constant_b " << constant_b << " seed " << seed);
  GraphBuilder g("g");
  g.Input("a");
  Feeds feeds = {{"a", RandomFloats(a, seed)}};
  if (constant_b) {
    g.Initializer(InitializerFrom("b", RandomFloats(b, seed + 1)));
  } else {
    g.Input("b");
    feeds.emplace_back("b", RandomFloats(b, seed + 1));
  }
  g.Node("MatMul", {"a", "b"}, {"y"}).Output("y");
  ExpectCpuMatchesReference(g.Build(), feeds, 18, 1e-4, 1e-4);
}

TEST(CpuMatMulTest, MatchesReferenceOnBatchBroadcastsAndVectors) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{3, 4}, {4, 5}},
      {{2, 3, 4}, {4, 5}},
      {{1, 128, 64}, {64, 96}},
      {{2, 3, 4}, {2, 4, 5}},
      {{2, 1, 3, 4}, {5, 4, 6}},
      {{1, 2, 3, 4}, {3, 1, 4, 2}},
      {{4}, {4, 5}},
      {{2, 3, 4}, {4}},
      {{4}, {4}},
      {{6}, {2, 6, 3}},
      {{2, 2, 1, 2, 3, 4}, {4, 2}},
      {{1, 2, 1, 1, 3, 4}, {2, 2, 1, 4, 2}},
  };
  uint32_t seed = 1;
  for (const auto& [a, b] : cases) {
    ExpectMatMul(a, b, false, seed++);
    ExpectMatMul(a, b, true, seed++);
  }
}

TEST(CpuMatMulTest, FallsBackForMismatchesOtherTypesAndEmptyTensors) {
  GraphBuilder g("g");
  g.Input("a").Input("b").Node("MatMul", {"a", "b"}, {"y"}).Output("y");
  pb::GraphProto graph = g.Build();
  ExpectCpuMatchesReference(graph, {{"a", RandomFloats({0, 3}, 1)}, {"b", RandomFloats({3, 2}, 2)}});
  ExpectCpuMatchesReference(graph, {{"a", RandomFloats({2, 0}, 1)}, {"b", RandomFloats({0, 2}, 2)}});
  // Inner dims differ: both backends report an error.
  auto ref = RunGraphOn(runner::Backend::kReference, graph,
                        {{"a", RandomFloats({2, 3}, 1)}, {"b", RandomFloats({4, 2}, 2)}});
  auto cpu = RunGraphOn(runner::Backend::kCpu, graph,
                        {{"a", RandomFloats({2, 3}, 1)}, {"b", RandomFloats({4, 2}, 2)}});
  EXPECT_FALSE(ref.ok());
  EXPECT_FALSE(cpu.ok());
  GraphBuilder i("g");
  i.Input("a", pb::kInt64).Input("b", pb::kInt64).Node("MatMul", {"a", "b"}, {"y"}).Output("y", pb::kInt64);
  ExpectCpuMatchesReference(i.Build(), {{"a", Int64s({2, 2}, {1, 2, 3, 4})}, {"b", Int64s({2, 1}, {5, 6})}});
}

void ExpectGemm(std::vector<int64_t> a, std::vector<int64_t> b, std::vector<int64_t> c, bool trans_a,
                bool trans_b, float alpha, float beta, bool constant_b, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "transA " << trans_a << " transB " << trans_b << " alpha " << alpha
                                    << " beta " << beta << " constant_b " << constant_b << " c rank "
                                    << c.size());
  GraphBuilder g("g");
  g.Input("a");
  Feeds feeds = {{"a", RandomFloats(a, seed)}};
  if (constant_b) {
    g.Initializer(InitializerFrom("b", RandomFloats(b, seed + 1)));
  } else {
    g.Input("b");
    feeds.emplace_back("b", RandomFloats(b, seed + 1));
  }
  std::vector<std::string> inputs = {"a", "b"};
  if (c.size() != 1 || c[0] != -1) {
    g.Input("c");
    feeds.emplace_back("c", RandomFloats(c, seed + 2));
    inputs.push_back("c");
  }
  g.Node("Gemm", inputs, {"y"},
         {AttrInt("transA", trans_a), AttrInt("transB", trans_b), AttrFloat("alpha", alpha),
          AttrFloat("beta", beta)})
      .Output("y");
  ExpectCpuMatchesReference(g.Build(), feeds, 18, 1e-4, 1e-4);
}

TEST(CpuGemmTest, MatchesReferenceOnTransposesScalesAndBiases) {
  uint32_t seed = 10;
  const std::vector<std::vector<int64_t>> c_shapes = {{-1}, {5}, {1, 5}, {3, 1}, {3, 5}, {}, {1}};
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      std::vector<int64_t> a = trans_a ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 4};
      std::vector<int64_t> b = trans_b ? std::vector<int64_t>{5, 4} : std::vector<int64_t>{4, 5};
      for (const std::vector<int64_t>& c : c_shapes) {
        ExpectGemm(a, b, c, trans_a, trans_b, 1.f, 1.f, seed % 2 == 0, seed);
        ++seed;
        ExpectGemm(a, b, c, trans_a, trans_b, 0.5f, 2.f, seed % 2 == 0, seed);
        ++seed;
        ExpectGemm(a, b, c, trans_a, trans_b, -1.5f, 0.f, seed % 2 == 0, seed);
        ++seed;
        ExpectGemm(a, b, c, trans_a, trans_b, 0.25f, 1.f, seed % 2 == 0, seed);
        ++seed;
      }
    }
  }
}

TEST(CpuGemmTest, ConstantWeightsOfLinearLayersMatchReference) {
  // Sizes the packed product takes (k >= 16, n >= 32): a classifier's one
  // row and a block of rows, both weight layouts, with and without a bias
  // row; a full C, alpha and beta other than 1 and a transposed A take
  // oneDNN's product instead.
  uint32_t seed = 300;
  for (int64_t m : {1, 9, 65}) {
    for (bool trans_b : {false, true}) {
      std::vector<int64_t> b = trans_b ? std::vector<int64_t>{70, 40} : std::vector<int64_t>{40, 70};
      for (const std::vector<int64_t>& c : std::vector<std::vector<int64_t>>{{-1}, {70}, {1, 70}, {m, 70}}) {
        ExpectGemm({m, 40}, b, c, false, trans_b, 1.f, 1.f, true, seed++);
      }
      ExpectGemm({m, 40}, b, {70}, false, trans_b, 0.5f, 1.f, true, seed++);
      ExpectGemm({m, 40}, b, {70}, false, trans_b, 1.f, 2.f, true, seed++);
      ExpectGemm({40, m}, b, {70}, true, trans_b, 1.f, 1.f, true, seed++);
    }
  }
  // Non-finite values reach the output as through the reference's sums.
  GraphBuilder g("g");
  g.Input("a").Initializer(InitializerFrom("w", RandomFloats({48, 40}, 7)));
  g.Initializer(InitializerFrom("bias", RandomFloats({48}, 8)));
  g.Node("Gemm", {"a", "w", "bias"}, {"y"}, {AttrInt("transB", 1)}).Output("y");
  runner::Tensor a = RandomFloats({3, 40}, 9);
  a.mutable_data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  a.mutable_data<float>()[47] = std::numeric_limits<float>::infinity();
  ExpectCpuMatchesReference(g.Build(), {{"a", a}}, 18, 1e-4, 1e-4);
}

TEST(CpuGemmTest, FallsBackForBadCShapesAndOtherTypes) {
  GraphBuilder g("g");
  g.Input("a").Input("b").Input("c").Node("Gemm", {"a", "b", "c"}, {"y"}).Output("y");
  auto feeds =
      Feeds{{"a", RandomFloats({3, 4}, 1)}, {"b", RandomFloats({4, 5}, 2)}, {"c", RandomFloats({2, 5}, 3)}};
  EXPECT_FALSE(RunGraphOn(runner::Backend::kReference, g.Build(), feeds).ok());
  EXPECT_FALSE(RunGraphOn(runner::Backend::kCpu, g.Build(), feeds).ok());
  GraphBuilder i("g");
  i.Input("a", pb::kInt64).Input("b", pb::kInt64).Node("Gemm", {"a", "b"}, {"y"}).Output("y", pb::kInt64);
  ExpectCpuMatchesReference(i.Build(), {{"a", Int64s({1, 2}, {1, 2})}, {"b", Int64s({2, 1}, {5, 6})}});
}

TEST(CpuMatMulTest, OneSessionFollowsChangingShapes) {
  GraphBuilder g("g");
  g.Input("a").Initializer(InitializerFrom("w", RandomFloats({8, 6}, 3))).Input("b");
  g.Node("MatMul", {"a", "w"}, {"h"}).Node("MatMul", {"h", "b"}, {"y"}).Output("y");
  std::vector<Feeds> runs;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 8}, {6, 3}}, {{5, 2, 8}, {6, 4}}, {{2, 8}, {6, 3}}, {{3, 1, 8}, {3, 6, 1}}, {{8}, {6}}};
  uint32_t seed = 30;
  for (const auto& [a, b] : shapes) {
    runs.push_back({{"a", RandomFloats(a, seed)}, {"b", RandomFloats(b, seed + 1)}});
    seed += 2;
  }
  ExpectRepeatedRunsMatch(g.Build(), runs);
}

TEST(CpuGemmTest, OneSessionFollowsChangingShapes) {
  GraphBuilder g("g");
  g.Input("a").Initializer(InitializerFrom("w", RandomFloats({7, 8}, 3))).Input("c");
  g.Node("Gemm", {"a", "w", "c"}, {"y"}, {AttrInt("transB", 1), AttrFloat("beta", 0.5f)}).Output("y");
  std::vector<Feeds> runs;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 8}, {7}}, {{5, 8}, {5, 7}}, {{5, 8}, {5, 1}}, {{1, 8}, {}}};
  uint32_t seed = 40;
  for (const auto& [a, c] : shapes) {
    runs.push_back({{"a", RandomFloats(a, seed)}, {"c", RandomFloats(c, seed + 1)}});
    seed += 2;
  }
  ExpectRepeatedRunsMatch(g.Build(), runs);
}

TEST(CpuKernelCacheTest, ElementwiseSoftmaxLayoutAndReduceFollowChangingShapes) {
  GraphBuilder g("g");
  g.Input("a").Input("b").Node("Add", {"a", "b"}, {"s"}).Node("Erf", {"s"}, {"e"});
  g.Node("Softmax", {"e"}, {"p"}).Node("Transpose", {"p"}, {"t"}, {AttrInts("perm", {2, 0, 1})});
  g.Node("Concat", {"t", "t"}, {"c"}, {AttrInt("axis", 1)});
  pb::TensorProto axes;
  axes.name = "axes";
  axes.data_type = pb::kInt64;
  axes.dims = {1};
  axes.int64_data = {0};
  g.Initializer(axes).Node("ReduceMean", {"c", "axes"}, {"y"}, {AttrInt("keepdims", 0)}).Output("y");
  std::vector<Feeds> runs;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 3, 4}, {4}}, {{2, 3, 4}, {3, 1}}, {{5, 1, 7}, {5, 2, 1}}, {{2, 3, 4}, {4}}, {{1, 1, 1}, {}}};
  uint32_t seed = 100;
  for (const auto& [a, b] : shapes) {
    runs.push_back({{"a", RandomFloats(a, seed)}, {"b", RandomFloats(b, seed + 1)}});
    seed += 2;
  }
  ExpectRepeatedRunsMatch(g.Build(), runs);
}

TEST(CpuMatMulTest, TransposedConstantWeightsAreReusedAcrossRuns) {
  GraphBuilder g("g");
  g.Input("a").Initializer(InitializerFrom("w", RandomFloats({6, 8}, 5)));
  g.Node("Transpose", {"w"}, {"wt"}, {AttrInts("perm", {1, 0})});
  g.Node("MatMul", {"a", "wt"}, {"h"}).Node("Gemm", {"h", "wt"}, {"y"}, {AttrInt("transB", 1)}).Output("y");
  std::vector<Feeds> runs;
  for (uint32_t seed = 60; seed < 64; ++seed)
    runs.push_back({{"a", RandomFloats({seed % 2 == 0 ? 3 : 5, 8}, seed)}});
  ExpectRepeatedRunsMatch(g.Build(), runs);
}

void ExpectMatMulInteger(int32_t a_type, int32_t b_type, std::vector<int64_t> a, std::vector<int64_t> b,
                         int zero_points, bool constant_b, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "a type " << a_type << " b type " << b_type << " zero points "
                                    << zero_points << " constant_b " << constant_b);
  auto lo = [](int32_t t) { return t == pb::kInt8 ? -128 : 0; };
  auto hi = [](int32_t t) { return t == pb::kInt8 ? 127 : 255; };
  GraphBuilder g("g");
  g.Input("a", a_type);
  Feeds feeds = {{"a", RandomInts(a_type, a, seed, lo(a_type), hi(a_type))}};
  runner::Tensor tb = RandomInts(b_type, b, seed + 1, lo(b_type), hi(b_type));
  if (constant_b) {
    g.Initializer(InitializerFrom("b", tb));
  } else {
    g.Input("b", b_type);
    feeds.emplace_back("b", tb);
  }
  std::vector<std::string> inputs = {"a", "b"};
  if (zero_points & 1) {
    g.Input("za", a_type);
    feeds.emplace_back("za", RandomInts(a_type, {}, seed + 2, lo(a_type), hi(a_type)));
    inputs.push_back("za");
  }
  if (zero_points & 2) {
    if (inputs.size() == 2) inputs.push_back("");
    g.Input("zb", b_type);
    feeds.emplace_back("zb", RandomInts(b_type, {1}, seed + 3, lo(b_type), hi(b_type)));
    inputs.push_back("zb");
  }
  g.Node("MatMulInteger", inputs, {"y"}).Output("y", pb::kInt32);
  ExpectCpuMatchesReference(g.Build(), feeds);
}

TEST(CpuMatMulIntegerTest, MatchesReferenceWithZeroPoints) {
  uint32_t seed = 70;
  for (int32_t a_type : {pb::kUint8, pb::kInt8}) {
    for (int zero_points = 0; zero_points < 4; ++zero_points) {
      ExpectMatMulInteger(a_type, pb::kInt8, {2, 16, 64}, {64, 48}, zero_points, true, seed++);
      ExpectMatMulInteger(a_type, pb::kInt8, {5, 7}, {7, 3}, zero_points, false, seed++);
    }
  }
}

TEST(CpuMatMulIntegerTest, FallsBackForUint8WeightsAndPerColumnZeroPoints) {
  ExpectMatMulInteger(pb::kUint8, pb::kUint8, {4, 8}, {8, 3}, 3, true, 80);
  ExpectMatMulInteger(pb::kUint8, pb::kInt8, {8}, {8, 3}, 1, false, 81);
  GraphBuilder g("g");
  g.Input("a", pb::kUint8).Input("b", pb::kInt8).Input("zb", pb::kInt8);
  g.Node("MatMulInteger", {"a", "b", "", "zb"}, {"y"}).Output("y", pb::kInt32);
  ExpectCpuMatchesReference(g.Build(), {{"a", RandomInts(pb::kUint8, {4, 8}, 1, 0, 255)},
                                        {"b", RandomInts(pb::kInt8, {8, 3}, 2, -128, 127)},
                                        {"zb", RandomInts(pb::kInt8, {3}, 3, -128, 127)}});
}

void ExpectQLinearMatMul(int32_t a_type, int32_t y_type, std::vector<int64_t> a, std::vector<int64_t> b,
                         bool constant_b, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "a type " << a_type << " y type " << y_type << " constant_b "
                                    << constant_b);
  auto lo = [](int32_t t) { return t == pb::kInt8 ? -128 : 0; };
  auto hi = [](int32_t t) { return t == pb::kInt8 ? 127 : 255; };
  GraphBuilder g("g");
  g.Input("a", a_type).Input("sa").Input("za", a_type);
  Feeds feeds = {{"a", RandomInts(a_type, a, seed, lo(a_type), hi(a_type))},
                 {"sa", Floats({}, {0.02f})},
                 {"za", RandomInts(a_type, {}, seed + 1, lo(a_type), hi(a_type))}};
  runner::Tensor tb = RandomInts(pb::kInt8, b, seed + 2, -128, 127);
  if (constant_b) {
    g.Initializer(InitializerFrom("b", tb));
  } else {
    g.Input("b", pb::kInt8);
    feeds.emplace_back("b", tb);
  }
  g.Input("sb").Input("zb", pb::kInt8).Input("sy").Input("zy", y_type);
  feeds.emplace_back("sb", Floats({1}, {0.013f}));
  feeds.emplace_back("zb", RandomInts(pb::kInt8, {}, seed + 3, -5, 5));
  feeds.emplace_back("sy", Floats({}, {0.7f}));
  feeds.emplace_back("zy", RandomInts(y_type, {}, seed + 4, lo(y_type) + 50, hi(y_type) - 50));
  g.Node("QLinearMatMul", {"a", "sa", "za", "b", "sb", "zb", "sy", "zy"}, {"y"}).Output("y", y_type);
  ExpectCpuMatchesReference(g.Build(), feeds);
}

TEST(CpuQLinearMatMulTest, MatchesReferenceExactly) {
  uint32_t seed = 90;
  for (int32_t a_type : {pb::kUint8, pb::kInt8}) {
    for (int32_t y_type : {pb::kUint8, pb::kInt8}) {
      ExpectQLinearMatMul(a_type, y_type, {1, 32, 96}, {96, 80}, true, seed);
      ExpectQLinearMatMul(a_type, y_type, {6, 9}, {9, 4}, false, seed + 5);
      seed += 10;
    }
  }
  // uint8 B and per-column scales fall back.
  GraphBuilder g("g");
  g.Input("a", pb::kUint8).Input("sa").Input("za", pb::kUint8).Input("b", pb::kUint8).Input("sb");
  g.Input("zb", pb::kUint8).Input("sy").Input("zy", pb::kUint8);
  g.Node("QLinearMatMul", {"a", "sa", "za", "b", "sb", "zb", "sy", "zy"}, {"y"}).Output("y", pb::kUint8);
  ExpectCpuMatchesReference(g.Build(), {{"a", RandomInts(pb::kUint8, {3, 4}, 1, 0, 255)},
                                        {"sa", Floats({}, {0.1f})},
                                        {"za", RandomInts(pb::kUint8, {}, 2, 0, 255)},
                                        {"b", RandomInts(pb::kUint8, {4, 2}, 3, 0, 255)},
                                        {"sb", Floats({2}, {0.1f, 0.2f})},
                                        {"zb", RandomInts(pb::kUint8, {2}, 4, 0, 255)},
                                        {"sy", Floats({}, {0.5f})},
                                        {"zy", RandomInts(pb::kUint8, {}, 5, 0, 255)}});
}

}  // namespace
}  // namespace onnxkit::testing
