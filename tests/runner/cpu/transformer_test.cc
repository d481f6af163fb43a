// Transformer chains the cpu backend fuses (runner/fusion_transformer.cc,
// runner/cpu/transformer.cc): MatMul + bias, the erf GELU, SiLU and Mish against the
// reference kernels, run as one step; the near misses that must not fuse;
// inputs the fused kernels hand back to the nodes; and NaN / infinities
// planted in the inputs, which must come out where the reference puts them.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/cpu/matmul_packed.h"
#include "runner/fusion.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Without AVX-512 a MatMul + bias chain runs node by node.
bool NoPacked() { return !runner::cpu::PackedGemmAvailable(); }

struct Result {
  std::vector<runner::Tensor> outputs;
  std::vector<std::string> ran;  // node names reported, in order
};

absl::StatusOr<Result> Run(const pb::GraphProto& graph, runner::Backend backend, const Feeds& feeds,
                           int threads = 1, int64_t opset = 18) {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(graph, opset, 9);
  Result result;
  runner::SessionOptions options;
  options.backend = backend;
  options.threads = threads;
  options.on_node_done = [&](const ir::Node& node, double) { result.ran.push_back(node.name()); };
  auto session = runner::Session::Create(std::move(loaded), options);
  if (!session.ok()) return session.status();
  std::vector<std::pair<std::string, runner::RtValue>> in;
  for (const auto& [name, t] : feeds) in.emplace_back(name, runner::RtValue::FromTensor(t));
  auto out = (*session)->Run(std::move(in));
  if (!out.ok()) return out.status();
  for (const runner::RtValue& v : *out) result.outputs.push_back(v.tensor());
  return result;
}

// Both backends agree (non-finite elements exactly: NaN for NaN, the same
// infinity), the cpu backend reports `cpu_ran`, and its fused kernels ran
// fused (or node by node when `node_by_node`).
void ExpectFused(const pb::GraphProto& graph, const Feeds& feeds, const std::vector<std::string>& cpu_ran,
                 bool node_by_node = false, int threads = 1, int64_t opset = 18) {
  auto ref = Run(graph, runner::Backend::kReference, feeds, 1, opset);
  int64_t fallbacks = runner::ChainFallbackRuns();
  auto cpu = Run(graph, runner::Backend::kCpu, feeds, threads, opset);
  EXPECT_EQ(runner::ChainFallbackRuns() > fallbacks, node_by_node);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_EQ(ref->outputs.size(), cpu->outputs.size());
  for (size_t o = 0; o < ref->outputs.size(); ++o) {
    const runner::Tensor& e = ref->outputs[o];
    const runner::Tensor& a = cpu->outputs[o];
    ASSERT_EQ(e.shape(), a.shape());
    for (int64_t i = 0; i < e.size(); ++i) {
      float x = e.data<float>()[i], y = a.data<float>()[i];
      if (std::isfinite(x) && std::isfinite(y)) continue;
      bool same = std::isnan(x) ? std::isnan(y) : std::memcmp(&x, &y, sizeof(float)) == 0;
      EXPECT_TRUE(same) << "output " << o << " element " << i << ": reference " << x << ", cpu " << y;
    }
    ExpectTensorsClose(e, a, 1e-4, 1e-4, "output " + std::to_string(o));
  }
  EXPECT_EQ(cpu->ran, cpu_ran);
}

// x [2, 5, 24] -> MatMul(W [24, 90]) -> Add with bias (first operand when
// `bias_first`) -> "y".
GraphBuilder MatMulBias(std::vector<int64_t> bias_shape, bool bias_first) {
  GraphBuilder g("g");
  g.Input("x");
  g.Initializer(InitializerFrom("w", RandomFloats({24, 90}, 1)));
  g.Initializer(InitializerFrom("b", RandomFloats(bias_shape, 2)));
  g.Node("MatMul", {"x", "w"}, {"m"}, {}, "mm");
  g.Node("Add", bias_first ? std::vector<std::string>{"b", "m"} : std::vector<std::string>{"m", "b"}, {"y"}, {},
         "add");
  g.Output("y");
  return g;
}

runner::Tensor Planted(std::vector<int64_t> shape, uint32_t seed, float scale = 1.f) {
  runner::Tensor t = RandomFloats(std::move(shape), seed, -scale, scale);
  float* p = t.mutable_data<float>();
  const int64_t n = t.size();
  p[0] = kNaN;
  p[n / 3] = kInf;
  p[n / 2] = -kInf;
  p[n - 1] = kNaN;
  return t;
}

TEST(CpuTransformerFusionTest, MatMulBiasRunsAsOneStep) {
  for (bool bias_first : {false, true}) {
    for (std::vector<int64_t> bias : {std::vector<int64_t>{90}, std::vector<int64_t>{1, 90}}) {
      SCOPED_TRACE(::testing::Message() << "bias first " << bias_first << " rank " << bias.size());
      pb::GraphProto graph = MatMulBias(bias, bias_first).Build();
      ExpectFused(graph, {{"x", RandomFloats({2, 5, 24}, 3)}}, {"mm"}, NoPacked());
      ExpectFused(graph, {{"x", Planted({2, 5, 24}, 4)}}, {"mm"}, NoPacked());
    }
  }
}

TEST(CpuTransformerFusionTest, MatMulBiasThatWidensTheOutputRunsNodeByNode) {
  // A bias of the full [5, 90] shape, or one that adds a dimension: not a row.
  ExpectFused(MatMulBias({5, 90}, false).Build(), {{"x", RandomFloats({2, 5, 24}, 5)}}, {"mm"}, true);
  ExpectFused(MatMulBias({1, 1, 1, 90}, true).Build(), {{"x", RandomFloats({2, 5, 24}, 6)}}, {"mm"}, true);
}

TEST(CpuTransformerFusionTest, MatMulBiasNearMissesAreNotFused) {
  {  // fed weights
    GraphBuilder g("g");
    g.Input("x").Input("w");
    g.Initializer(InitializerFrom("b", RandomFloats({90}, 2)));
    g.Node("MatMul", {"x", "w"}, {"m"}, {}, "mm").Node("Add", {"m", "b"}, {"y"}, {}, "add").Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({5, 24}, 7)}, {"w", RandomFloats({24, 90}, 8)}}, {"mm", "add"});
  }
  {  // the product is also an output
    GraphBuilder g = MatMulBias({90}, false);
    g.Output("m");
    ExpectFused(g.Build(), {{"x", RandomFloats({2, 5, 24}, 9)}}, {"mm", "add"});
  }
}

// x -> Div(c) -> Erf -> Add(one) -> Mul(x) -> Mul(half) -> "y", operands in
// the order `swapped` picks.
GraphBuilder Gelu(bool swapped, float c = 1.4142135f, float one = 1.f, float half = 0.5f) {
  GraphBuilder g("g");
  g.Input("x");
  g.Initializer(InitializerFrom("c", Floats({}, {c})))
      .Initializer(InitializerFrom("one", Floats({1}, {one})))
      .Initializer(InitializerFrom("half", Floats({}, {half})));
  auto pair = [&](const std::string& a, const std::string& b) {
    return swapped ? std::vector<std::string>{b, a} : std::vector<std::string>{a, b};
  };
  g.Node("Div", {"x", "c"}, {"d"}, {}, "div")
      .Node("Erf", {"d"}, {"e"}, {}, "erf")
      .Node("Add", pair("e", "one"), {"s"}, {}, "add")
      .Node("Mul", pair("x", "s"), {"p"}, {}, "mul")
      .Node("Mul", pair("p", "half"), {"y"}, {}, "half")
      .Output("y");
  return g;
}

// A dynamically quantized MatMul: DynamicQuantizeLinear, MatMulInteger by
// constant int8 weights, Cast to float and Mul by the activation's scale
// times the weights' (per column, one value or a [1, N] row; either Mul
// operand order; weight zero points absent or per column and all 0). The
// cpu backend runs MatMulInteger, Cast and Mul as one step and agrees with
// the reference bit for bit; a scale of another shape or per-column weight
// zero points that are not all 0 run the three nodes one by one, a Cast to
// another type is not such a step.
TEST(CpuTransformerFusionTest, DynamicQuantizedMatMulRunsAsOneStep) {
  struct Case {
    std::vector<int64_t> scale_shape;
    bool scale_first = false;
    int b_zero_points = 0;  // 1: per column, all 0; 2: per column, not all 0
    int64_t to = pb::kFloat;
    bool fused = true, node_by_node = false;
  };
  const std::vector<Case> cases = {
      {{8}},
      {{}, true},
      {{1, 8}},
      {{5, 8}, false, 0, pb::kFloat, false, true},
      {{8}, false, 1},
      {{8}, false, 2, pb::kFloat, false, true},
      {{8}, false, 0, pb::kDouble, false, false},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE(k);
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{2, 5, 16});
    g.Initializer(InitializerFrom("w", RandomInts(pb::kInt8, {16, 8}, 7, -127, 127)));
    g.Initializer(InitializerFrom("ws", RandomFloats(c.scale_shape, 8, 0.001f, 0.01f)));
    g.Node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"}, {}, "dql");
    std::vector<std::string> mmi_inputs = {"xq", "w", "xz"};
    if (c.b_zero_points != 0) {
      std::vector<int8_t> wz(8, 0);
      if (c.b_zero_points == 2) wz[3] = 5;
      g.Initializer(InitializerFrom("wz", Int8s({8}, wz)));
      mmi_inputs.push_back("wz");
    }
    g.Node("MatMulInteger", mmi_inputs, {"i"}, {}, "mmi");
    g.Node("Cast", {"i"}, {"f"}, {AttrInt("to", c.to)}, "cast");
    std::string f = "f";
    if (c.to != pb::kFloat) {
      g.Node("Cast", {"f"}, {"f32"}, {AttrInt("to", pb::kFloat)}, "back");
      f = "f32";
    }
    g.Node("Mul", {"xs", "ws"}, {"s"}, {}, "scale");
    g.Node("Mul", c.scale_first ? std::vector<std::string>{"s", f} : std::vector<std::string>{f, "s"}, {"y"},
           {}, "mul");
    g.Output("y", pb::kFloat);
    const Feeds feeds = {{"x", RandomFloats({2, 5, 16}, 9, -3.f, 2.f)}};
    auto ref = testing::Run(g.Build(), runner::Backend::kReference, feeds);
    const int64_t fallbacks = runner::ChainFallbackRuns();
    auto cpu = testing::Run(g.Build(), runner::Backend::kCpu, feeds);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_EQ(runner::ChainFallbackRuns() > fallbacks, c.node_by_node);
    const runner::Tensor& e = ref->outputs[0];
    const runner::Tensor& a = cpu->outputs[0];
    ASSERT_EQ(e.shape(), a.shape());
    EXPECT_EQ(std::memcmp(e.raw(), a.raw(), e.nbytes()), 0);
    bool cast_ran = false;
    for (const std::string& n : cpu->ran) cast_ran = cast_ran || n == "cast";
    EXPECT_EQ(cast_ran, !c.fused && !c.node_by_node);
  }
}

TEST(CpuTransformerFusionTest, GeluRunsAsOnePass) {
  for (bool swapped : {false, true}) {
    pb::GraphProto graph = Gelu(swapped).Build();
    ExpectFused(graph, {{"x", RandomFloats({3, 7, 40}, 11, -6, 6)}}, {"div"});
    ExpectFused(graph, {{"x", Planted({3, 7, 40}, 12, 6)}}, {"div"});
  }
  // Other constants: the chain's own expression, not a GELU's.
  ExpectFused(Gelu(false, -0.75f, 2.f, 3.f).Build(), {{"x", Planted({90}, 13, 4)}}, {"div"});
}

TEST(CpuTransformerFusionTest, GeluWithTensorConstantsRunsNodeByNode) {
  GraphBuilder g("g");
  g.Input("x");
  g.Initializer(InitializerFrom("c", Floats({2}, {1.5f, 2.f})))
      .Initializer(InitializerFrom("one", Floats({}, {1.f})))
      .Initializer(InitializerFrom("half", Floats({}, {0.5f})));
  g.Node("Div", {"x", "c"}, {"d"}, {}, "div")
      .Node("Erf", {"d"}, {"e"}, {}, "erf")
      .Node("Add", {"e", "one"}, {"s"}, {}, "add")
      .Node("Mul", {"x", "s"}, {"p"}, {}, "mul")
      .Node("Mul", {"p", "half"}, {"y"}, {}, "half")
      .Output("y");
  ExpectFused(g.Build(), {{"x", Planted({4, 2}, 14, 3)}}, {"div"}, true);
}

TEST(CpuTransformerFusionTest, GeluNearMissesAreNotFused) {
  {  // the Mul takes another tensor than the Div's input
    GraphBuilder g("g");
    g.Input("x").Input("z");
    g.Initializer(InitializerFrom("c", Floats({}, {1.4f})))
        .Initializer(InitializerFrom("one", Floats({}, {1.f})))
        .Initializer(InitializerFrom("half", Floats({}, {0.5f})));
    g.Node("Div", {"x", "c"}, {"d"}, {}, "div")
        .Node("Erf", {"d"}, {"e"}, {}, "erf")
        .Node("Add", {"e", "one"}, {"s"}, {}, "add")
        .Node("Mul", {"z", "s"}, {"p"}, {}, "mul")
        .Node("Mul", {"p", "half"}, {"y"}, {}, "half")
        .Output("y");
    // Not a GELU: an element-wise chain (one pass, the same operations).
    ExpectFused(g.Build(), {{"x", RandomFloats({6, 5}, 15)}, {"z", RandomFloats({6, 5}, 16)}}, {"div"});
  }
  {  // the Erf result is also an output
    GraphBuilder g = Gelu(false);
    g.Output("e");
    ExpectFused(g.Build(), {{"x", RandomFloats({6, 5}, 17)}}, {"div", "erf", "add", "mul", "half"});
  }
}

TEST(CpuTransformerFusionTest, MatMulBiasFeedingGelu) {
  // The feed-forward block: the product's result is read by two nodes of
  // the GELU chain.
  GraphBuilder g("g");
  g.Input("x");
  g.Initializer(InitializerFrom("w", RandomFloats({24, 90}, 21)))
      .Initializer(InitializerFrom("b", RandomFloats({90}, 22)))
      .Initializer(InitializerFrom("c", Floats({}, {1.4142135f})))
      .Initializer(InitializerFrom("one", Floats({}, {1.f})))
      .Initializer(InitializerFrom("half", Floats({}, {0.5f})));
  g.Node("MatMul", {"x", "w"}, {"m"}, {}, "mm")
      .Node("Add", {"b", "m"}, {"h"}, {}, "bias")
      .Node("Div", {"h", "c"}, {"d"}, {}, "div")
      .Node("Erf", {"d"}, {"e"}, {}, "erf")
      .Node("Add", {"e", "one"}, {"s"}, {}, "add")
      .Node("Mul", {"h", "s"}, {"p"}, {}, "mul")
      .Node("Mul", {"p", "half"}, {"y"}, {}, "half")
      .Output("y");
  ExpectFused(g.Build(), {{"x", RandomFloats({1, 9, 24}, 23)}}, {"mm", "div"}, NoPacked());
  ExpectFused(g.Build(), {{"x", Planted({1, 9, 24}, 24)}}, {"mm", "div"}, NoPacked());
  ExpectFused(g.Build(), {{"x", RandomFloats({3, 70, 24}, 25)}}, {"mm", "div"}, NoPacked(), 2);
}

// q [.., s, d] -> MatMul(kt) -> Div(c) -> Add(mask) -> Softmax(axis) ->
// MatMul(v) -> "y"; every tensor a graph input.
pb::GraphProto Attention(bool mask_first, int64_t axis = -1) {
  GraphBuilder g("g");
  g.Input("q").Input("kt").Input("c").Input("mask").Input("v");
  g.Node("MatMul", {"q", "kt"}, {"s"}, {}, "qk")
      .Node("Div", {"s", "c"}, {"d"}, {}, "div")
      .Node("Add", mask_first ? std::vector<std::string>{"mask", "d"} : std::vector<std::string>{"d", "mask"},
            {"m"}, {}, "mask_add")
      .Node("Softmax", {"m"}, {"p"}, {AttrInt("axis", axis)}, "softmax")
      .Node("MatMul", {"p", "v"}, {"y"}, {}, "pv")
      .Output("y");
  return g.Build();
}

Feeds AttentionFeeds(std::vector<int64_t> batch, int64_t s, int64_t d, int64_t sk, int64_t dv,
                     std::vector<int64_t> mask, uint32_t seed) {
  auto with = [&](std::vector<int64_t> tail) {
    std::vector<int64_t> shape = batch;
    shape.insert(shape.end(), tail.begin(), tail.end());
    return shape;
  };
  return {{"q", RandomFloats(with({s, d}), seed)},
          {"kt", RandomFloats(with({d, sk}), seed + 1)},
          {"c", Floats({}, {1.7f})},
          {"mask", RandomFloats(mask, seed + 2, -3, 0)},
          {"v", RandomFloats(with({sk, dv}), seed + 3)}};
}

TEST(CpuTransformerFusionTest, AttentionRunsAsOneStep) {
  const bool no_packed = NoPacked();
  // Value widths on either side of 32, row counts with and without a tail
  // of the 8-row steps, masks of every broadcast.
  ExpectFused(Attention(false), AttentionFeeds({2, 3}, 10, 8, 12, 5, {2, 1, 1, 12}, 31), {"qk"}, no_packed);
  ExpectFused(Attention(true), AttentionFeeds({2, 3}, 16, 8, 70, 40, {70}, 32), {"qk"}, no_packed);
  ExpectFused(Attention(false), AttentionFeeds({3}, 9, 16, 33, 64, {3, 9, 33}, 33), {"qk"}, no_packed);
  ExpectFused(Attention(true), AttentionFeeds({}, 5, 4, 7, 3, {}, 34), {"qk"}, no_packed);
  // Two threads share the heads and row steps.
  ExpectFused(Attention(false), AttentionFeeds({2, 3}, 10, 8, 12, 40, {2, 1, 1, 12}, 35), {"qk"}, no_packed, 2);
}

TEST(CpuTransformerFusionTest, AttentionRowsTheReferenceMakesNaN) {
  // Finite inputs whose scores overflow: head 0's first row meets a key of
  // +inf score (its softmax row is NaN), head 1's a key of -inf (weight 0).
  Feeds feeds = AttentionFeeds({1, 2}, 10, 8, 12, 5, {1, 1, 1, 12}, 41);
  float* q = feeds[0].second.mutable_data<float>();
  float* kt = feeds[1].second.mutable_data<float>();
  for (int64_t i = 0; i < 8; ++i) {
    q[i] = 1e20f;                 // head 0, row 0
    q[10 * 8 + i] = 1e20f;        // head 1, row 0
    kt[i * 12] = 1e20f;           // head 0, key 0
    kt[8 * 12 + i * 12] = -1e20f; // head 1, key 0
  }
  ExpectFused(Attention(false), feeds, {"qk"}, NoPacked());
  auto cpu = RunGraphOn(runner::Backend::kCpu, Attention(false), feeds);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const runner::Tensor& y = (*cpu)[0].tensor();
  int64_t nan = 0;
  for (int64_t i = 0; i < y.size(); ++i) nan += std::isnan(y.data<float>()[i]) ? 1 : 0;
  EXPECT_EQ(nan, 5);  // head 0's first row only
}

TEST(CpuTransformerFusionTest, AttentionWithNonFiniteInputsRunsNodeByNode) {
  for (int which : {0, 1, 3, 4}) {  // q, kt, mask, v
    Feeds feeds = AttentionFeeds({2, 2}, 6, 8, 9, 5, {2, 1, 1, 9}, 50 + which);
    feeds[static_cast<size_t>(which)].second = Planted(feeds[static_cast<size_t>(which)].second.shape(), 60);
    ExpectFused(Attention(false), feeds, {"qk"}, true);
  }
  Feeds zero = AttentionFeeds({2}, 6, 8, 9, 5, {9}, 70);
  zero[2].second = Floats({}, {0.f});
  ExpectFused(Attention(false), zero, {"qk"}, true);
}

TEST(CpuTransformerFusionTest, AttentionShapesItDoesNotTakeRunNodeByNode) {
  // Softmax over another axis; batch dims that broadcast; a mask that widens.
  ExpectFused(Attention(false, 2), AttentionFeeds({2, 3}, 6, 8, 6, 5, {6}, 80), {"qk"}, true);
  Feeds broadcast = AttentionFeeds({2, 3}, 6, 8, 9, 5, {9}, 81);
  broadcast[1].second = RandomFloats({1, 3, 8, 9}, 82);
  ExpectFused(Attention(false), broadcast, {"qk"}, true);
  ExpectFused(Attention(false), AttentionFeeds({3}, 6, 8, 9, 5, {2, 3, 6, 9}, 83), {"qk"}, true);
}

// Attention without the Div (a query scaled beforehand, as torch's
// MultiheadAttention exports it) and/or without the mask.
// With `multiply`, the scale is a Mul by c (torch's baddbmm) instead.
pb::GraphProto AttentionWithout(bool div, bool mask, bool multiply = false) {
  GraphBuilder g("g");
  g.Input("q").Input("kt");
  if (div) g.Input("c");
  if (mask) g.Input("mask");
  g.Input("v");
  std::string last = "s";
  g.Node("MatMul", {"q", "kt"}, {"s"}, {}, "qk");
  if (div) {
    if (multiply) {
      g.Node("Mul", {"c", "s"}, {"d"}, {}, "mul");
    } else {
      g.Node("Div", {"s", "c"}, {"d"}, {}, "div");
    }
    last = "d";
  }
  if (mask) {
    g.Node("Add", {"mask", last}, {"m"}, {}, "mask_add");
    last = "m";
  }
  g.Node("Softmax", {last}, {"p"}, {AttrInt("axis", -1)}, "softmax")
      .Node("MatMul", {"p", "v"}, {"y"}, {}, "pv")
      .Output("y");
  return g.Build();
}

Feeds Without(Feeds feeds, bool div, bool mask) {
  Feeds kept;
  for (auto& [name, t] : feeds) {
    if ((name == "c" && !div) || (name == "mask" && !mask)) continue;
    kept.emplace_back(name, std::move(t));
  }
  return kept;
}

TEST(CpuTransformerFusionTest, AttentionWithoutScaleOrMaskRunsAsOneStep) {
  const bool no_packed = NoPacked();
  for (auto [div, mask] : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
    ExpectFused(AttentionWithout(div, mask),
                Without(AttentionFeeds({2, 3}, 10, 8, 12, 5, {2, 1, 1, 12}, 131), div, mask), {"qk"},
                no_packed);
    ExpectFused(AttentionWithout(div, mask),
                Without(AttentionFeeds({4}, 65, 32, 65, 32, {65}, 132), div, mask), {"qk"}, no_packed, 2);
    // Non-finite inputs still run the nodes.
    Feeds planted = Without(AttentionFeeds({2}, 6, 8, 9, 5, {9}, 133), div, mask);
    planted[0].second = Planted(planted[0].second.shape(), 134);
    ExpectFused(AttentionWithout(div, mask), planted, {"qk"}, true);
  }
}

TEST(CpuTransformerFusionTest, AttentionScaledByAMulRunsAsOneStep) {
  const bool no_packed = NoPacked();
  for (bool mask : {false, true}) {
    ExpectFused(AttentionWithout(true, mask, true),
                Without(AttentionFeeds({2, 3}, 10, 8, 12, 5, {2, 1, 1, 12}, 151), true, mask), {"qk"},
                no_packed);
    ExpectFused(AttentionWithout(true, mask, true),
                Without(AttentionFeeds({4}, 20, 16, 20, 16, {20}, 152), true, mask), {"qk"}, no_packed, 2);
  }
  // A zero factor runs the nodes.
  Feeds zero = AttentionFeeds({2}, 6, 8, 9, 5, {9}, 153);
  zero[2].second = Floats({}, {0.f});
  ExpectFused(AttentionWithout(true, true, true), zero, {"qk"}, true);
}

TEST(CpuTransformerFusionTest, AttentionWithAPaddingMaskOfMinusInfinityRunsAsOneStep) {
  // Keys masked with -inf per batch row (torch's key_padding_mask), one
  // head's row masked everywhere: the reference makes that row NaN.
  Feeds feeds = AttentionFeeds({2, 3}, 10, 8, 12, 5, {2, 1, 1, 12}, 141);
  float* mask = feeds[3].second.mutable_data<float>();
  for (int64_t k = 9; k < 12; ++k) mask[k] = -kInf;       // batch 0: the last 3 keys
  for (int64_t k = 0; k < 12; ++k) mask[12 + k] = -kInf;  // batch 1: every key
  ExpectFused(Attention(false), feeds, {"qk"}, NoPacked());
  ExpectFused(AttentionWithout(false, true), Without(feeds, false, true), {"qk"}, NoPacked(), 2);
  auto cpu = RunGraphOn(runner::Backend::kCpu, Attention(false), feeds);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const runner::Tensor& y = (*cpu)[0].tensor();
  int64_t nan = 0;
  for (int64_t i = 0; i < y.size(); ++i) nan += std::isnan(y.data<float>()[i]) ? 1 : 0;
  EXPECT_EQ(nan, y.size() / 2);  // batch 1 whole
}

// q -> MatMul(kt) -> Div(c) -> Where(cond, fill, ·) (`fill_first`: masked_fill's
// form) or Where(cond, ·, fill) -> [Add(mask)] -> Softmax -> MatMul(v) -> "y".
pb::GraphProto AttentionWithWhere(bool fill_first, bool add_mask) {
  GraphBuilder g("g");
  g.Input("q").Input("kt").Input("c").Input("cond", pb::kBool).Input("fill").Input("v");
  g.Node("MatMul", {"q", "kt"}, {"s"}, {}, "qk")
      .Node("Div", {"s", "c"}, {"d"}, {}, "div")
      .Node("Where",
            fill_first ? std::vector<std::string>{"cond", "fill", "d"}
                       : std::vector<std::string>{"cond", "d", "fill"},
            {"w"}, {}, "where");
  if (add_mask) {
    g.Input("mask").Node("Add", {"w", "mask"}, {"m"}, {}, "mask_add");
  }
  g.Node("Softmax", {add_mask ? "m" : "w"}, {"p"}, {AttrInt("axis", -1)}, "softmax")
      .Node("MatMul", {"p", "v"}, {"y"}, {}, "pv")
      .Output("y");
  return g.Build();
}

// Feeds of AttentionWithWhere: a causal condition of shape `cond` (true
// where key > row, the masked_fill form's; its complement otherwise) over
// [batch..., s, sk], the fill, and the mask when `add_mask`.
Feeds WhereFeeds(std::vector<int64_t> batch, int64_t s, int64_t sk, std::vector<int64_t> cond,
                 bool fill_first, float fill, bool add_mask, uint32_t seed) {
  Feeds f = AttentionFeeds(batch, s, 8, sk, 5, {1, sk}, seed);
  runner::Tensor mask = f[3].second;
  f.erase(f.begin() + 3);
  absl::StatusOr<runner::Tensor> c = runner::Tensor::Allocate(pb::kBool, cond);
  EXPECT_TRUE(c.ok());
  const int64_t cols = cond.empty() ? 1 : cond.back();
  const int64_t rows = cond.size() < 2 ? 1 : cond[cond.size() - 2];
  uint8_t* p = static_cast<uint8_t*>(c->mutable_raw());
  for (int64_t i = 0; i < c->size(); ++i) {
    const int64_t col = i % cols, row = i / cols % rows;
    const bool later = cols == 1 ? row % 2 == 1 : col > row;  // a column condition: every other row
    p[i] = (later == fill_first) ? 1 : 0;
  }
  f.insert(f.begin() + 3, {"cond", *c});
  f.insert(f.begin() + 4, {"fill", Floats({}, {fill})});
  if (add_mask) f.push_back({"mask", mask});
  return f;
}

TEST(CpuTransformerFusionTest, AttentionWithABooleanMaskRunsAsOneStep) {
  const bool no_packed = NoPacked();
  const float lowest = std::numeric_limits<float>::lowest();
  uint32_t seed = 191;
  for (bool fill_first : {true, false}) {
    for (bool add_mask : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "fill first " << fill_first << " add " << add_mask);
      const pb::GraphProto g = AttentionWithWhere(fill_first, add_mask);
      // Conditions of every broadcast (keys not a multiple of 16, a column
      // condition with one value per row), -inf, the lowest float and -1e4.
      ExpectFused(g, WhereFeeds({2, 3}, 10, 37, {10, 37}, fill_first, -kInf, add_mask, seed++), {"qk"},
                  no_packed);
      ExpectFused(g, WhereFeeds({2, 3}, 16, 16, {2, 1, 16, 16}, fill_first, lowest, add_mask, seed++), {"qk"},
                  no_packed);
      ExpectFused(g, WhereFeeds({3}, 9, 33, {3, 9, 33}, fill_first, -1e4f, add_mask, seed++), {"qk"},
                  no_packed);
      ExpectFused(g, WhereFeeds({2}, 12, 20, {12, 1}, fill_first, -kInf, add_mask, seed++), {"qk"},
                  no_packed);
      ExpectFused(g, WhereFeeds({2, 3}, 40, 40, {40, 40}, fill_first, -kInf, add_mask, seed++), {"qk"},
                  no_packed, 2);
    }
  }
}

TEST(CpuTransformerFusionTest, AttentionWithABooleanMaskTheKernelDoesNotTakeRunsNodeByNode) {
  const pb::GraphProto g = AttentionWithWhere(true, false);
  // A fill that is not one value, or +inf.
  Feeds wide = WhereFeeds({2}, 6, 8, {6, 8}, true, -kInf, false, 201);
  wide[4].second = Floats({8}, {-1, -2, -3, -4, -5, -6, -7, -8});
  ExpectFused(g, wide, {"qk"}, true);
  ExpectFused(g, WhereFeeds({2}, 6, 8, {6, 8}, true, kInf, false, 202), {"qk"}, true);
  // A condition wider than the scores.
  ExpectFused(g, WhereFeeds({2}, 6, 8, {3, 2, 6, 8}, true, -kInf, false, 203), {"qk"}, true);
}

// a + b -> LayerNormalization(axis, scale, [bias]) -> "y".
pb::GraphProto AddNorm(std::vector<int64_t> tail, int64_t axis, bool bias, int outputs = 1) {
  GraphBuilder g("g");
  g.Input("a").Input("b");
  g.Initializer(InitializerFrom("scale", RandomFloats(tail, 91, 0.5f, 2.f)));
  std::vector<std::string> in = {"x", "scale"};
  if (bias) {
    g.Initializer(InitializerFrom("bias", RandomFloats(tail, 92)));
    in.push_back("bias");
  }
  std::vector<std::string> out = {"y"};
  if (outputs > 1) out.push_back("mean");
  g.Node("Add", {"a", "b"}, {"x"}, {}, "add")
      .Node("LayerNormalization", in, out, {AttrInt("axis", axis), AttrFloat("epsilon", 1e-3f)}, "ln");
  for (const std::string& o : out) g.Output(o);
  return g.Build();
}

TEST(CpuTransformerFusionTest, AddLayerNormRunsAsOnePass) {
  ExpectFused(AddNorm({40}, -1, true), {{"a", RandomFloats({2, 7, 40}, 93)}, {"b", RandomFloats({2, 7, 40}, 94)}},
              {"add"});
  ExpectFused(AddNorm({4, 6}, 1, false), {{"a", RandomFloats({3, 4, 6}, 95)}, {"b", RandomFloats({3, 4, 6}, 96)}},
              {"add"});
  ExpectFused(AddNorm({1, 40}, -1, true), {{"a", RandomFloats({64, 40}, 97)}, {"b", RandomFloats({64, 40}, 98)}},
              {"add"}, false, 2);
}

TEST(CpuTransformerFusionTest, AddLayerNormWithNonFiniteRowsRunsNodeByNode) {
  ExpectFused(AddNorm({40}, -1, true), {{"a", Planted({2, 7, 40}, 99)}, {"b", RandomFloats({2, 7, 40}, 100)}},
              {"add"}, true);
  // Finite inputs whose sum overflows.
  runner::Tensor big = RandomFloats({2, 40}, 101);
  big.mutable_data<float>()[3] = 3e38f;
  runner::Tensor big2 = RandomFloats({2, 40}, 102);
  big2.mutable_data<float>()[3] = 3e38f;
  ExpectFused(AddNorm({40}, -1, false), {{"a", big}, {"b", big2}}, {"add"}, true);
}

TEST(CpuTransformerFusionTest, AddLayerNormShapesItDoesNotTake) {
  // A broadcasting Add runs node by node; a requested Mean is not fused.
  ExpectFused(AddNorm({40}, -1, true), {{"a", RandomFloats({2, 7, 40}, 103)}, {"b", RandomFloats({40}, 104)}},
              {"add"}, true);
  ExpectFused(AddNorm({40}, -1, true, 2), {{"a", RandomFloats({2, 40}, 105)}, {"b", RandomFloats({2, 40}, 106)}},
              {"add", "ln"});
}

// The layer normalization exporters write below opset 17:
// ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, then Mul by gamma
// (`affine` >= 1) and Add of beta (2) -> "y". Axes as attributes below
// opset 18, as inputs from it.
struct NormSpec {
  int64_t opset = 18;
  std::vector<int64_t> axes_mean = {-1}, axes_var = {-1};
  float exponent = 2;
  int affine = 2;
  std::vector<int64_t> tail = {40};
  bool sub_is_output = false;
};

pb::GraphProto WrittenOutNorm(const NormSpec& s) {
  GraphBuilder g("g");
  g.Input("x");
  g.Initializer(InitializerFrom("two", Floats({}, {s.exponent})));
  g.Initializer(InitializerFrom("eps", Floats({}, {1e-5f})));
  auto reduce = [&](const std::string& name, const std::string& in, const std::string& out,
                    const std::vector<int64_t>& axes) {
    if (s.opset >= 18) {
      g.Initializer(InitializerFrom(name + "_axes", Int64s({static_cast<int64_t>(axes.size())}, axes)));
      g.Node("ReduceMean", {in, name + "_axes"}, {out}, {}, name);
    } else {
      g.Node("ReduceMean", {in}, {out}, {AttrInts("axes", axes)}, name);
    }
  };
  reduce("mean", "x", "m", s.axes_mean);
  g.Node("Sub", {"x", "m"}, {"d"}, {}, "sub").Node("Pow", {"d", "two"}, {"p"}, {}, "pow");
  reduce("var", "p", "v", s.axes_var);
  g.Node("Add", {"v", "eps"}, {"e"}, {}, "add_eps").Node("Sqrt", {"e"}, {"s"}, {}, "sqrt");
  g.Node("Div", {"d", "s"}, {s.affine == 0 ? "y" : "n"}, {}, "div");
  if (s.affine >= 1) {
    g.Initializer(InitializerFrom("gamma", RandomFloats(s.tail, 111, 0.5f, 2.f)));
    g.Node("Mul", {"gamma", "n"}, {s.affine == 1 ? "y" : "g"}, {}, "scale");
  }
  if (s.affine >= 2) {
    g.Initializer(InitializerFrom("beta", RandomFloats(s.tail, 112)));
    g.Node("Add", {"g", "beta"}, {"y"}, {}, "shift");
  }
  g.Output("y");
  if (s.sub_is_output) g.Output("d");
  return g.Build();
}

TEST(CpuTransformerFusionTest, WrittenOutLayerNormRunsAsOnePass) {
  NormSpec s;
  ExpectFused(WrittenOutNorm(s), {{"x", RandomFloats({2, 7, 40}, 113, -3, 5)}}, {"mean"});
  s.opset = 13;  // axes attributes
  s.affine = 1;
  ExpectFused(WrittenOutNorm(s), {{"x", RandomFloats({2, 7, 40}, 114)}}, {"mean"}, false, 1, 13);
  s.affine = 0;
  ExpectFused(WrittenOutNorm(s), {{"x", RandomFloats({5, 40}, 115)}}, {"mean"}, false, 1, 13);
  // Two trailing axes, given in any order; gamma with a leading 1.
  s = NormSpec();
  s.axes_mean = {2, 1};
  s.axes_var = {-1, -2};
  s.tail = {1, 4, 6};
  ExpectFused(WrittenOutNorm(s), {{"x", RandomFloats({3, 4, 6}, 116)}}, {"mean"});
  s = NormSpec();
  ExpectFused(WrittenOutNorm(s), {{"x", RandomFloats({2048, 40}, 117)}}, {"mean"}, false, 2);
}

TEST(CpuTransformerFusionTest, WrittenOutLayerNormWithNonFiniteRowsRunsNodeByNode) {
  ExpectFused(WrittenOutNorm(NormSpec()), {{"x", Planted({2, 7, 40}, 118)}}, {"mean"}, true);
  // Finite values whose squares overflow.
  runner::Tensor big = RandomFloats({2, 40}, 119);
  big.mutable_data<float>()[5] = 3e37f;
  big.mutable_data<float>()[6] = -3e37f;
  ExpectFused(WrittenOutNorm(NormSpec()), {{"x", big}}, {"mean"}, true);
}

TEST(CpuTransformerFusionTest, WrittenOutLayerNormNearMisses) {
  // Found as a chain, but the kernel hands them to the nodes: another
  // exponent, different axes, axes not trailing.
  NormSpec s;
  s.exponent = 3;
  ExpectFused(WrittenOutNorm(s), {{"x", RandomFloats({2, 40}, 120)}}, {"mean"}, true);
  s = NormSpec();
  s.tail = {4, 6};
  s.axes_var = {-2, -1};
  ExpectFused(WrittenOutNorm(s), {{"x", RandomFloats({3, 4, 6}, 121)}}, {"mean"}, true);
  s = NormSpec();
  s.axes_mean = s.axes_var = {1};
  s.tail = {4, 1};
  ExpectFused(WrittenOutNorm(s), {{"x", RandomFloats({3, 4, 6}, 122)}}, {"mean"}, true);
  // The deviations read outside: no layer-norm chain, but from the Pow on
  // it is the RMS normalization of the deviations (up to the Mul by gamma).
  s = NormSpec();
  s.sub_is_output = true;
  ExpectFused(WrittenOutNorm(s), {{"x", RandomFloats({2, 40}, 123)}}, {"mean", "sub", "pow", "shift"});
}

// The RMS normalization exporters write (LLaMA's and T5's RMSNorm):
// Pow(x, 2) (or Mul(x, x)), ReduceMean, Add, Sqrt, then Div(x, s)
// (`division` 0), Div(1, s) and Mul by x (1) or Reciprocal and Mul by x
// (2), then Mul by gamma when `gamma` -> "y".
struct RmsSpec {
  int64_t opset = 18;
  bool square_by_mul = false;
  int division = 1;
  bool gamma = true;
  float exponent = 2, one = 1;
  std::vector<int64_t> axes = {-1};
  std::vector<int64_t> tail = {40};
  bool root_is_output = false;
};

pb::GraphProto WrittenOutRmsNorm(const RmsSpec& s) {
  GraphBuilder g("g");
  g.Input("x");
  g.Initializer(InitializerFrom("eps", Floats({}, {1e-6f})));
  if (s.square_by_mul) {
    g.Node("Mul", {"x", "x"}, {"p"}, {}, "square");
  } else {
    g.Initializer(InitializerFrom("two", Floats({}, {s.exponent})));
    g.Node("Pow", {"x", "two"}, {"p"}, {}, "square");
  }
  if (s.opset >= 18) {
    g.Initializer(InitializerFrom("axes", Int64s({static_cast<int64_t>(s.axes.size())}, s.axes)));
    g.Node("ReduceMean", {"p", "axes"}, {"v"}, {}, "mean");
  } else {
    g.Node("ReduceMean", {"p"}, {"v"}, {AttrInts("axes", s.axes)}, "mean");
  }
  g.Node("Add", {"eps", "v"}, {"e"}, {}, "add_eps").Node("Sqrt", {"e"}, {"s"}, {}, "sqrt");
  const std::string normed = s.gamma ? "n" : "y";
  if (s.division == 0) {
    g.Node("Div", {"x", "s"}, {normed}, {}, "div");
  } else {
    if (s.division == 1) {
      g.Initializer(InitializerFrom("one", Floats({1}, {s.one})));
      g.Node("Div", {"one", "s"}, {"r"}, {}, "inverse");
    } else {
      g.Node("Reciprocal", {"s"}, {"r"}, {}, "inverse");
    }
    g.Node("Mul", {"r", "x"}, {normed}, {}, "times_x");
  }
  if (s.gamma) {
    g.Initializer(InitializerFrom("gamma", RandomFloats(s.tail, 131, 0.5f, 2.f)));
    g.Node("Mul", {"n", "gamma"}, {"y"}, {}, "scale");
  }
  g.Output("y");
  if (s.root_is_output) g.Output("s");
  return g.Build();
}

TEST(CpuTransformerFusionTest, WrittenOutRmsNormRunsAsOnePass) {
  for (int division : {0, 1, 2}) {
    for (bool square_by_mul : {false, true}) {
      for (bool gamma : {false, true}) {
        RmsSpec s;
        s.division = division;
        s.square_by_mul = square_by_mul;
        s.gamma = gamma;
        SCOPED_TRACE(::testing::Message()
                     << "division " << division << " mul " << square_by_mul << " gamma " << gamma);
        ExpectFused(WrittenOutRmsNorm(s), {{"x", RandomFloats({2, 7, 40}, 132, -3, 5)}}, {"square"});
        s.opset = 13;  // axes as the attribute
        ExpectFused(WrittenOutRmsNorm(s), {{"x", RandomFloats({5, 40}, 133)}}, {"square"}, false, 1, 13);
      }
    }
  }
  // Two trailing axes in any order, gamma with a leading 1; many rows on 2 threads.
  RmsSpec s;
  s.axes = {-1, 1};
  s.tail = {1, 4, 6};
  ExpectFused(WrittenOutRmsNorm(s), {{"x", RandomFloats({3, 4, 6}, 134)}}, {"square"});
  ExpectFused(WrittenOutRmsNorm(RmsSpec()), {{"x", RandomFloats({2048, 40}, 135)}}, {"square"}, false, 2);
}

TEST(CpuTransformerFusionTest, WrittenOutRmsNormWithNonFiniteRowsRunsNodeByNode) {
  for (int division : {0, 2}) {
    RmsSpec s;
    s.division = division;
    ExpectFused(WrittenOutRmsNorm(s), {{"x", Planted({2, 7, 40}, 136)}}, {"square"}, true);
    // Finite values whose squares overflow: the reference gives 0 (x / inf) or NaN.
    runner::Tensor big = RandomFloats({2, 40}, 137);
    big.mutable_data<float>()[5] = 3e37f;
    big.mutable_data<float>()[6] = -3e37f;
    ExpectFused(WrittenOutRmsNorm(s), {{"x", big}}, {"square"}, true);
  }
}

TEST(CpuTransformerFusionTest, WrittenOutRmsNormNearMisses) {
  // Found as a chain, but the kernel hands them to the nodes: another
  // exponent, a numerator other than 1, axes not trailing, gamma that
  // broadcasts x.
  RmsSpec s;
  s.exponent = 3;
  ExpectFused(WrittenOutRmsNorm(s), {{"x", RandomFloats({2, 40}, 138)}}, {"square"}, true);
  s = RmsSpec();
  s.one = 2;
  ExpectFused(WrittenOutRmsNorm(s), {{"x", RandomFloats({2, 40}, 139)}}, {"square"}, true);
  s = RmsSpec();
  s.axes = {1};
  s.tail = {4, 1};
  ExpectFused(WrittenOutRmsNorm(s), {{"x", RandomFloats({3, 4, 6}, 140)}}, {"square"}, true);
  s = RmsSpec();
  s.tail = {2, 40};
  ExpectFused(WrittenOutRmsNorm(s), {{"x", RandomFloats({1, 40}, 141)}}, {"square"}, true);
  // The root read outside: no chain.
  s = RmsSpec();
  s.root_is_output = true;
  ExpectFused(WrittenOutRmsNorm(s), {{"x", RandomFloats({2, 40}, 142)}},
              {"square", "mean", "add_eps", "sqrt", "inverse", "times_x", "scale"});
}

// x -> Sigmoid -> Mul(x, s) [-> Mul by "u"] -> "y", operands in the order
// `swapped` picks.
GraphBuilder Silu(bool swapped, bool gated) {
  GraphBuilder g("g");
  g.Input("x");
  auto pair = [&](const std::string& a, const std::string& b) {
    return swapped ? std::vector<std::string>{b, a} : std::vector<std::string>{a, b};
  };
  g.Node("Sigmoid", {"x"}, {"s"}, {}, "sig").Node("Mul", pair("x", "s"), {gated ? "t" : "y"}, {}, "mul");
  if (gated) g.Input("u").Node("Mul", pair("t", "u"), {"y"}, {}, "gate");
  g.Output("y");
  return g;
}

TEST(CpuTransformerFusionTest, SiluRunsAsOnePass) {
  for (bool swapped : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "swapped " << swapped);
    pb::GraphProto silu = Silu(swapped, false).Build();
    // Lengths that leave a partial vector; values past e^-87.3 and the
    // infinities; many chunks on 2 threads.
    ExpectFused(silu, {{"x", RandomFloats({3, 7, 41}, 151, -12, 12)}}, {"sig"});
    ExpectFused(silu, {{"x", Planted({3, 7, 41}, 152, 100)}}, {"sig"});
    ExpectFused(silu, {{"x", RandomFloats({9, 8000}, 153, -20, 20)}}, {"sig"}, false, 2);
    // SwiGLU: the gate times the other projection, in the same pass.
    pb::GraphProto gated = Silu(swapped, true).Build();
    ExpectFused(gated,
                {{"x", RandomFloats({2, 5, 33}, 154, -8, 8)}, {"u", RandomFloats({2, 5, 33}, 155, -3, 3)}},
                {"sig"});
    ExpectFused(gated, {{"x", Planted({2, 5, 33}, 156, 90)}, {"u", Planted({2, 5, 33}, 157)}}, {"sig"});
    ExpectFused(gated, {{"x", RandomFloats({40, 1000}, 158)}, {"u", RandomFloats({40, 1000}, 159)}}, {"sig"},
                false, 2);
  }
}

// SiLU of three doubles.
absl::StatusOr<Result> RunDoubleSilu(runner::Backend backend) {
  GraphBuilder g("g");
  g.Input("x", pb::kDouble);
  g.Node("Sigmoid", {"x"}, {"s"}, {}, "sig").Node("Mul", {"x", "s"}, {"y"}, {}, "mul").Output("y");
  return Run(g.Build(), backend,
             {{"x", MakeTensor<double>(pb::kDouble, {3}, std::vector<double>{-1, 0, 2})}});
}

TEST(CpuTransformerFusionTest, SiluInputsItDoesNotTakeRunNodeByNode) {
  // The gate's other operand broadcasts (or widens the result).
  pb::GraphProto gated = Silu(false, true).Build();
  ExpectFused(gated, {{"x", RandomFloats({4, 6}, 161)}, {"u", RandomFloats({6}, 162)}}, {"sig"}, true);
  ExpectFused(gated, {{"x", RandomFloats({1, 6}, 163)}, {"u", RandomFloats({4, 6}, 164)}}, {"sig"}, true);
  // Not float, or empty.
  auto ref = RunDoubleSilu(runner::Backend::kReference);
  auto cpu = RunDoubleSilu(runner::Backend::kCpu);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(Values<double>(ref->outputs[0]), Values<double>(cpu->outputs[0]));
  ExpectFused(Silu(false, false).Build(), {{"x", RandomFloats({0, 5}, 165)}}, {"sig"}, true);
}

TEST(CpuTransformerFusionTest, SiluNearMissesAreNotFused) {
  {  // the Mul takes another tensor than the Sigmoid's input: a gate, not SiLU
    GraphBuilder g("g");
    g.Input("x").Input("z");
    g.Node("Sigmoid", {"x"}, {"s"}, {}, "sig").Node("Mul", {"z", "s"}, {"y"}, {}, "mul").Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({6, 5}, 166)}, {"z", RandomFloats({6, 5}, 167)}},
                {"sig", "mul"});
  }
  {  // the Sigmoid is also an output
    GraphBuilder g = Silu(false, false);
    g.Output("s");
    ExpectFused(g.Build(), {{"x", RandomFloats({6, 5}, 168)}}, {"sig", "mul"});
  }
  {  // the SiLU is read twice: no gate in the chain
    GraphBuilder g = Silu(false, true);
    g.Output("t");
    ExpectFused(g.Build(), {{"x", RandomFloats({6, 5}, 169)}, {"u", RandomFloats({6, 5}, 170)}},
                {"sig", "gate"});
  }
  {  // the SiLU squared: the gate's other operand is the chain's own value
    GraphBuilder g("g");
    g.Input("x");
    g.Node("Sigmoid", {"x"}, {"s"}, {}, "sig")
        .Node("Mul", {"x", "s"}, {"t"}, {}, "mul")
        .Node("Mul", {"t", "t"}, {"y"}, {}, "square")
        .Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({6, 5}, 171)}}, {"sig", "square"});
  }
}

// x -> Softplus -> Tanh -> Mul(x, t) -> "y" (Mish as exporters write it
// below opset 18), operands in the order `swapped` picks.
GraphBuilder WrittenOutMish(bool swapped) {
  GraphBuilder g("g");
  g.Input("x");
  g.Node("Softplus", {"x"}, {"s"}, {}, "softplus")
      .Node("Tanh", {"s"}, {"t"}, {}, "tanh")
      .Node("Mul", swapped ? std::vector<std::string>{"t", "x"} : std::vector<std::string>{"x", "t"}, {"y"},
            {}, "mul")
      .Output("y");
  return g;
}

TEST(CpuTransformerFusionTest, WrittenOutMishRunsAsOnePass) {
  for (bool swapped : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "swapped " << swapped);
    pb::GraphProto mish = WrittenOutMish(swapped).Build();
    ExpectFused(mish, {{"x", RandomFloats({3, 7, 41}, 181, -30, 30)}}, {"softplus"});
    ExpectFused(mish, {{"x", Planted({3, 7, 41}, 182, 150)}}, {"softplus"});
    ExpectFused(mish, {{"x", RandomFloats({9, 8000}, 183, -6, 6)}}, {"softplus"}, false, 2);
  }
  // Empty: node by node.
  ExpectFused(WrittenOutMish(false).Build(), {{"x", RandomFloats({0, 4}, 184)}}, {"softplus"}, true);
}

TEST(CpuTransformerFusionTest, WrittenOutMishNearMissesAreNotFused) {
  {  // the Tanh is also an output
    GraphBuilder g = WrittenOutMish(false);
    g.Output("t");
    ExpectFused(g.Build(), {{"x", RandomFloats({6, 5}, 185)}}, {"softplus", "tanh", "mul"});
  }
  {  // the Mul takes another tensor than the Softplus's input
    GraphBuilder g("g");
    g.Input("x").Input("z");
    g.Node("Softplus", {"x"}, {"s"}, {}, "softplus")
        .Node("Tanh", {"s"}, {"t"}, {}, "tanh")
        .Node("Mul", {"z", "t"}, {"y"}, {}, "mul")
        .Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({6, 5}, 186)}, {"z", RandomFloats({6, 5}, 187)}},
                {"softplus", "tanh", "mul"});
  }
}

// The tanh GELU as torch writes F.gelu(x, approximate="tanh") below opset
// 20: x*x, x*·, k*·, x+·, s*·, Tanh, 1+·, x*·, 0.5*·.
pb::GraphProto TanhGeluTorch() {
  GraphBuilder g("g");
  g.Input("x");
  g.Initializer(InitializerFrom("k", Floats({}, {0.044715f})))
      .Initializer(InitializerFrom("s", Floats({}, {0.7978845608f})))
      .Initializer(InitializerFrom("one", Floats({}, {1.f})))
      .Initializer(InitializerFrom("half", Floats({}, {0.5f})));
  g.Node("Mul", {"x", "x"}, {"x2"}, {}, "square")
      .Node("Mul", {"x", "x2"}, {"x3"}, {}, "cube")
      .Node("Mul", {"k", "x3"}, {"kx3"}, {}, "times_k")
      .Node("Add", {"x", "kx3"}, {"inner"}, {}, "plus_x")
      .Node("Mul", {"s", "inner"}, {"arg"}, {}, "times_s")
      .Node("Tanh", {"arg"}, {"t"}, {}, "tanh")
      .Node("Add", {"one", "t"}, {"u"}, {}, "plus_one")
      .Node("Mul", {"x", "u"}, {"xu"}, {}, "times_x")
      .Node("Mul", {"half", "xu"}, {"y"}, {}, "halve")
      .Output("y");
  return g.Build();
}

// Hugging Face's NewGELU: 0.5 * x taken apart, Pow(x, 3), *k, x+, *s, Tanh,
// +1, times the half.
pb::GraphProto TanhGeluPow(float exponent = 3.f) {
  GraphBuilder g("g");
  g.Input("x");
  g.Initializer(InitializerFrom("k", Floats({}, {0.044715f})))
      .Initializer(InitializerFrom("s", Floats({}, {0.7978845608f})))
      .Initializer(InitializerFrom("one", Floats({}, {1.f})))
      .Initializer(InitializerFrom("half", Floats({}, {0.5f})))
      .Initializer(InitializerFrom("e", Floats({}, {exponent})));
  g.Node("Mul", {"x", "half"}, {"hx"}, {}, "half_x")
      .Node("Pow", {"x", "e"}, {"x3"}, {}, "pow")
      .Node("Mul", {"x3", "k"}, {"kx3"}, {}, "times_k")
      .Node("Add", {"x", "kx3"}, {"inner"}, {}, "plus_x")
      .Node("Mul", {"inner", "s"}, {"arg"}, {}, "times_s")
      .Node("Tanh", {"arg"}, {"t"}, {}, "tanh")
      .Node("Add", {"t", "one"}, {"u"}, {}, "plus_one")
      .Node("Mul", {"hx", "u"}, {"y"}, {}, "times_half")
      .Output("y");
  return g.Build();
}

TEST(CpuTransformerFusionTest, ElementwiseChainsRunAsOnePass) {
  // Both tanh GELUs: lengths that leave a partial block, NaN and infinities
  // planted, many blocks on 2 threads.
  for (int64_t n : {41, 5000}) {
    SCOPED_TRACE(::testing::Message() << n << " values a row");
    ExpectFused(TanhGeluTorch(), {{"x", RandomFloats({3, n}, 211, -6, 6)}}, {"square"});
    ExpectFused(TanhGeluTorch(), {{"x", Planted({3, n}, 212, 40)}}, {"square"});
    ExpectFused(TanhGeluPow(), {{"x", RandomFloats({3, n}, 213, -6, 6)}}, {"half_x", "pow"});
    ExpectFused(TanhGeluPow(), {{"x", Planted({3, n}, 214, 1e13f)}}, {"half_x", "pow"});
  }
  ExpectFused(TanhGeluTorch(), {{"x", RandomFloats({16, 3000}, 215, -6, 6)}}, {"square"}, false, 2);
  ExpectFused(TanhGeluPow(2.f), {{"x", RandomFloats({2, 700}, 216, -6, 6)}}, {"half_x", "pow"});
  // Operands of every kind: a row along the last axis (first and second
  // form), a tensor of the chain's shape, one value as the left operand of
  // Sub, and Relu, Sqrt, Neg, Abs, Reciprocal, Erf, Sigmoid between them.
  GraphBuilder g("g");
  g.Input("x").Input("z");
  g.Initializer(InitializerFrom("bias", RandomFloats({40}, 217)))
      .Initializer(InitializerFrom("row", RandomFloats({1, 1, 40}, 218, 0.5f, 2.f)))
      .Initializer(InitializerFrom("c", Floats({1}, {3.f})));
  g.Node("Add", {"bias", "x"}, {"a"}, {}, "bias_add")
      .Node("Relu", {"a"}, {"r"}, {}, "relu")
      .Node("Mul", {"r", "z"}, {"m"}, {}, "times_z")
      .Node("Sub", {"c", "m"}, {"d"}, {}, "from_c")
      .Node("Abs", {"d"}, {"ab"}, {}, "abs")
      .Node("Sqrt", {"ab"}, {"sq"}, {}, "sqrt")
      .Node("Div", {"sq", "row"}, {"q"}, {}, "by_row")
      .Node("Neg", {"q"}, {"ng"}, {}, "neg")
      .Node("Erf", {"ng"}, {"e"}, {}, "erf")
      .Node("Sigmoid", {"e"}, {"sg"}, {}, "sigmoid")
      .Node("Reciprocal", {"sg"}, {"y"}, {}, "reciprocal")
      .Output("y");
  const pb::GraphProto chain = g.Build();
  ExpectFused(chain, {{"x", RandomFloats({3, 7, 40}, 219, -3, 3)}, {"z", RandomFloats({3, 7, 40}, 220)}},
              {"bias_add"});
  ExpectFused(chain, {{"x", Planted({3, 7, 40}, 221)}, {"z", Planted({3, 7, 40}, 222)}}, {"bias_add"});
  ExpectFused(chain, {{"x", RandomFloats({64, 9, 40}, 223)}, {"z", RandomFloats({64, 9, 40}, 224)}},
              {"bias_add"}, false, 2);
}

TEST(CpuTransformerFusionTest, ElementwiseChainsTheKernelDoesNotTakeRunNodeByNode) {
  // An operand that broadcasts otherwise (over the batch, a column), a Pow
  // by another exponent, integers.
  GraphBuilder g("g");
  g.Input("x").Input("z");
  g.Node("Add", {"x", "z"}, {"a"}, {}, "add")
      .Node("Tanh", {"a"}, {"t"}, {}, "tanh")
      .Node("Mul", {"t", "x"}, {"m"}, {}, "mul")
      .Node("Neg", {"m"}, {"y"}, {}, "neg")
      .Output("y");
  const pb::GraphProto chain = g.Build();
  ExpectFused(chain, {{"x", RandomFloats({3, 4, 5}, 231)}, {"z", RandomFloats({4, 5}, 232)}}, {"add"}, true);
  ExpectFused(chain, {{"x", RandomFloats({3, 4, 5}, 233)}, {"z", RandomFloats({3, 4, 1}, 234)}}, {"add"},
              true);
  ExpectFused(TanhGeluPow(0.5f), {{"x", RandomFloats({2, 30}, 235, 0.1f, 4)}}, {"half_x", "pow"}, true);
  // A Pow whose exponent has more values than its base.
  GraphBuilder p("g");
  p.Input("x");
  p.Initializer(InitializerFrom("e", Floats({4}, {2.f, 3.f, 0.5f, 2.f})));
  p.Node("Pow", {"x", "e"}, {"a"}, {}, "pow")
      .Node("Tanh", {"a"}, {"t"}, {}, "tanh")
      .Node("Neg", {"t"}, {"n"}, {}, "neg")
      .Node("Abs", {"n"}, {"y"}, {}, "abs")
      .Output("y");
  ExpectFused(p.Build(), {{"x", Floats({1}, {1.5f})}}, {"pow"}, true);
  // The chain's shape from the second operand of its head (the first a row).
  ExpectFused(chain, {{"x", RandomFloats({5}, 236)}, {"z", RandomFloats({3, 4, 5}, 237)}}, {"add"});
}

TEST(CpuTransformerFusionTest, ShortOrBranchingElementwiseRunsAreNotChains) {
  {  // three nodes
    GraphBuilder g("g");
    g.Input("x");
    g.Node("Tanh", {"x"}, {"t"}, {}, "tanh")
        .Node("Neg", {"t"}, {"n"}, {}, "neg")
        .Node("Abs", {"n"}, {"y"}, {}, "abs");
    g.Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({4, 9}, 241)}}, {"tanh", "neg", "abs"});
  }
  {  // a value read twice inside: the chain stops there
    GraphBuilder g("g");
    g.Input("x");
    g.Node("Tanh", {"x"}, {"t"}, {}, "tanh")
        .Node("Neg", {"t"}, {"n"}, {}, "neg")
        .Node("Mul", {"n", "n"}, {"m"}, {}, "square")
        .Node("Abs", {"m"}, {"a"}, {}, "abs")
        .Node("Sqrt", {"a"}, {"y"}, {}, "sqrt")
        .Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({4, 9}, 242)}}, {"tanh", "neg", "square", "abs", "sqrt"});
  }
}

}  // namespace
}  // namespace onnxkit::testing
