// The cpu backend's Conv and ConvTranspose kernels against the reference
// kernels: random shapes and attributes (1-D to 3-D, groups, depthwise,
// strides, dilations, pads, auto_pad, output_padding/output_shape, bias),
// constant and non-constant weights, repeated runs with changing shapes,
// and the cases that fall back.
#include "runner/cpu/conv.h"

#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

struct ConvCase {
  int spatial = 2;
  int64_t n = 1, group = 1, cg = 2, mg = 3;
  std::vector<int64_t> in, kernel, strides, dilations, pads, output_padding, output_shape;
  std::string auto_pad = "NOTSET";
  bool bias = false, constant_w = true;
};

std::string Describe(const ConvCase& c) {
  std::string s = "n=" + std::to_string(c.n) + " group=" + std::to_string(c.group) +
                  " cg=" + std::to_string(c.cg) + " mg=" + std::to_string(c.mg) + " auto_pad=" + c.auto_pad +
                  " bias=" + std::to_string(c.bias) + " constant_w=" + std::to_string(c.constant_w);
  auto list = [&](const char* name, const std::vector<int64_t>& v) {
    s += std::string(" ") + name + "=[";
    for (int64_t x : v) s += std::to_string(x) + ",";
    s += "]";
  };
  list("in", c.in);
  list("kernel", c.kernel);
  list("strides", c.strides);
  list("dilations", c.dilations);
  list("pads", c.pads);
  list("output_padding", c.output_padding);
  list("output_shape", c.output_shape);
  return s;
}

// A Conv (or ConvTranspose) graph and its feeds.
void ExpectConvMatches(const ConvCase& c, bool transpose, uint32_t seed, int* invalid_cases = nullptr) {
  SCOPED_TRACE(Describe(c));
  std::vector<int64_t> x_shape = {c.n, c.group * c.cg};
  x_shape.insert(x_shape.end(), c.in.begin(), c.in.end());
  std::vector<int64_t> w_shape =
      transpose ? std::vector<int64_t>{c.group * c.cg, c.mg} : std::vector<int64_t>{c.group * c.mg, c.cg};
  w_shape.insert(w_shape.end(), c.kernel.begin(), c.kernel.end());
  std::vector<pb::AttributeProto> attrs = {AttrInt("group", c.group), AttrString("auto_pad", c.auto_pad)};
  if (c.kernel.size() == c.in.size() && seed % 2 == 0) attrs.push_back(AttrInts("kernel_shape", c.kernel));
  if (!c.strides.empty()) attrs.push_back(AttrInts("strides", c.strides));
  if (!c.dilations.empty()) attrs.push_back(AttrInts("dilations", c.dilations));
  if (!c.pads.empty()) attrs.push_back(AttrInts("pads", c.pads));
  if (!c.output_padding.empty()) attrs.push_back(AttrInts("output_padding", c.output_padding));
  if (!c.output_shape.empty()) attrs.push_back(AttrInts("output_shape", c.output_shape));
  GraphBuilder g("g");
  g.Input("x");
  Feeds feeds = {{"x", RandomFloats(x_shape, seed)}};
  runner::Tensor w = RandomFloats(w_shape, seed + 1);
  if (c.constant_w) {
    g.Initializer(InitializerFrom("w", w));
  } else {
    g.Input("w");
    feeds.push_back({"w", w});
  }
  std::vector<std::string> inputs = {"x", "w"};
  if (c.bias) {
    g.Input("b");
    feeds.push_back({"b", RandomFloats({c.group * c.mg}, seed + 2)});
    inputs.push_back("b");
  }
  g.Node(transpose ? "ConvTranspose" : "Conv", inputs, {"y"}, attrs).Output("y");
  auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), feeds);
  if (!ref.ok()) {  // e.g. pads that leave no output: the same error
    auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), feeds);
    ASSERT_FALSE(cpu.ok());
    EXPECT_EQ(cpu.status().code(), ref.status().code());
    ASSERT_NE(invalid_cases, nullptr) << ref.status();
    ++*invalid_cases;
    return;
  }
  ExpectCpuMatchesReference(g.Build(), feeds, 18, 1e-4, 1e-4);
}

// A random case whose windows fit the input.
ConvCase RandomCase(std::mt19937& rng, int spatial, bool transpose) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  ConvCase c;
  c.spatial = spatial;
  c.n = pick(1, 2);
  int64_t kind = pick(0, 3);
  c.group = kind == 0 ? pick(2, 3) : 1;
  c.cg = pick(1, 5);
  c.mg = pick(1, 6);
  if (kind == 1 && !transpose) {  // depthwise
    c.group = pick(2, 8);
    c.cg = 1;
    c.mg = pick(1, 2);
  }
  c.bias = pick(0, 1) == 1;
  c.constant_w = pick(0, 1) == 1;
  bool use_dilation = pick(0, 2) == 0;
  for (int d = 0; d < spatial; ++d) {
    int64_t k = pick(1, spatial == 3 ? 3 : 5), dil = use_dilation ? pick(1, 3) : 1;
    c.kernel.push_back(k);
    c.dilations.push_back(dil);
    c.strides.push_back(pick(1, 3));
    c.in.push_back((k - 1) * dil + 1 + pick(0, spatial == 3 ? 4 : 9));
  }
  if (!use_dilation && pick(0, 1) == 0) c.dilations.clear();
  int64_t pad_kind = pick(0, 5);
  static const char* kAutoPads[] = {"SAME_UPPER", "SAME_LOWER", "VALID"};
  if (pad_kind < 3) {
    c.auto_pad = kAutoPads[pad_kind];
  } else if (pad_kind < 5) {
    for (int i = 0; i < 2 * spatial; ++i) c.pads.push_back(pick(0, 2));
  }
  if (transpose) {
    int64_t extra = pick(0, 3);
    if (extra == 1) {
      for (int d = 0; d < spatial; ++d) {
        int64_t s = c.strides[static_cast<size_t>(d)];
        int64_t dil = c.dilations.empty() ? 1 : c.dilations[static_cast<size_t>(d)];
        c.output_padding.push_back(pick(0, std::max<int64_t>(s, dil) - 1));
      }
    } else if (extra == 2) {
      for (int d = 0; d < spatial; ++d)
        c.output_shape.push_back(c.in[static_cast<size_t>(d)] * c.strides[static_cast<size_t>(d)] +
                                 pick(-1, 1));
    }
  }
  return c;
}

TEST(CpuConvTest, Conv2dMatchesReferenceOnRandomAttributes) {
  std::mt19937 rng(2024);
  for (uint32_t i = 0; i < 60; ++i) ExpectConvMatches(RandomCase(rng, 2, false), false, i);
}

TEST(CpuConvTest, Conv1dAnd3dMatchReference) {
  std::mt19937 rng(7);
  for (uint32_t i = 0; i < 20; ++i) ExpectConvMatches(RandomCase(rng, 1, false), false, i);
  for (uint32_t i = 0; i < 12; ++i) ExpectConvMatches(RandomCase(rng, 3, false), false, i);
}

TEST(CpuConvTest, LargeConvolutionsInBothLayoutsMatchReference) {
  // Pointwise over many positions (plain layout), 3x3 and depthwise (blocked).
  ConvCase pointwise{.n = 2, .cg = 16, .mg = 24, .in = {20, 20}, .kernel = {1, 1}, .bias = true};
  ExpectConvMatches(pointwise, false, 1);
  ConvCase spatial{.cg = 32, .mg = 40, .in = {17, 19}, .kernel = {3, 3}, .pads = {1, 1, 1, 1}, .bias = true};
  ExpectConvMatches(spatial, false, 2);
  ConvCase depthwise{.group = 48,
                     .cg = 1,
                     .mg = 1,
                     .in = {15, 15},
                     .kernel = {3, 3},
                     .strides = {2, 2},
                     .auto_pad = "SAME_UPPER"};
  ExpectConvMatches(depthwise, false, 3);
  ConvCase first{.cg = 3,
                 .mg = 16,
                 .in = {32, 32},
                 .kernel = {7, 7},
                 .strides = {2, 2},
                 .pads = {3, 3, 3, 3},
                 .constant_w = false};
  ExpectConvMatches(first, false, 4);
}

TEST(CpuConvTest, WideningPointwiseOnSmallImagesMatchesReference) {
  // A 1x1 Conv widening 320 channels to 1000 on 13x13 images runs
  // channel-blocked (the last block padded: 1000 of 1008), its Relu after
  // it: two images, NaN and infinities kept where the reference has them.
  ConvCase wide{.n = 2, .cg = 320, .mg = 1000, .in = {13, 13}, .kernel = {1, 1}, .bias = true};
  ExpectConvMatches(wide, false, 5);
  const int64_t c = 320, m = 1000;
  GraphBuilder g("g");
  g.Input("x")
      .Initializer(InitializerFrom("w", RandomFloats({m, c, 1, 1}, 7, -0.1f, 0.1f)))
      .Initializer(InitializerFrom("b", RandomFloats({m}, 8)))
      .Node("Conv", {"x", "w", "b"}, {"y"})
      .Node("Relu", {"y"}, {"r"})
      .Output("r");
  runner::Tensor x = RandomFloats({2, c, 13, 13}, 9);
  float* p = x.mutable_data<float>();
  p[5 * 169 + 40] = std::numeric_limits<float>::quiet_NaN();
  p[c * 169 + 100] = std::numeric_limits<float>::infinity();
  ExpectCpuMatchesReference(g.Build(), {{"x", x}}, 18, 1e-4, 1e-4);
}

TEST(CpuConvTest, ConvTransposeMatchesReferenceOnRandomAttributes) {
  std::mt19937 rng(99);
  int invalid = 0;
  for (uint32_t i = 0; i < 40; ++i) ExpectConvMatches(RandomCase(rng, 2, true), true, i, &invalid);
  for (uint32_t i = 0; i < 10; ++i) ExpectConvMatches(RandomCase(rng, 1, true), true, i, &invalid);
  for (uint32_t i = 0; i < 8; ++i) ExpectConvMatches(RandomCase(rng, 3, true), true, i, &invalid);
  EXPECT_LT(invalid, 10);  // most random cases are valid
}

TEST(CpuConvTest, ConvTransposeOutputPaddingBeyondPadsMatchesReference) {
  ConvCase c{.cg = 3, .mg = 2, .in = {5, 6}, .kernel = {3, 3}, .strides = {2, 2}, .output_padding = {1, 1}};
  ExpectConvMatches(c, true, 5);
  c.output_shape = {12, 13};
  c.output_padding.clear();
  ExpectConvMatches(c, true, 6);
}

// Kernels equal to the strides without padding run as a product and a
// shuffle; near misses (padding, output padding, dilation, groups, a 3-D
// kernel) run on oneDNN's deconvolution. Both against the reference, with
// constant and fed weights, with and without bias, batches, NaN and
// infinities in the input, and 2 threads on a large one.
TEST(CpuConvTest, ConvTransposeWithKernelEqualToStridesRunsAsAProduct) {
  struct Case {
    ConvCase c;
    bool product;
  };
  const std::vector<Case> cases = {
      {{.n = 2, .cg = 5, .mg = 3, .in = {4, 6}, .kernel = {2, 2}, .strides = {2, 2}, .bias = true}, true},
      {{.cg = 8, .mg = 4, .in = {5, 3}, .kernel = {3, 3}, .strides = {3, 3}, .constant_w = false}, true},
      {{.cg = 3, .mg = 2, .in = {3, 5}, .kernel = {2, 3}, .strides = {2, 3}, .bias = true}, true},
      {{.cg = 4, .mg = 4, .in = {6, 6}, .kernel = {1, 1}, .strides = {1, 1}}, true},
      {{.cg = 4, .mg = 2, .in = {4, 4}, .kernel = {2, 2}, .strides = {2, 2}, .pads = {1, 0, 1, 0}}, false},
      {{.cg = 4, .mg = 2, .in = {4, 4}, .kernel = {2, 2}, .strides = {2, 2}, .output_padding = {1, 1}},
       false},
      {{.cg = 4, .mg = 2, .in = {4, 4}, .kernel = {2, 2}, .strides = {2, 2}, .dilations = {2, 2}}, false},
      {{.group = 2, .cg = 2, .mg = 2, .in = {4, 4}, .kernel = {2, 2}, .strides = {2, 2}}, false},
      {{.spatial = 3, .cg = 2, .mg = 2, .in = {2, 3, 2}, .kernel = {2, 2, 2}, .strides = {2, 2, 2}}, false},
  };
  uint32_t seed = 70;
  for (const Case& k : cases) {
    const int64_t before = runner::cpu::DeconvolutionProducts();
    ExpectConvMatches(k.c, true, seed += 2);
    EXPECT_EQ(runner::cpu::DeconvolutionProducts() - before, k.product ? 1 : 0) << Describe(k.c);
  }
  // NaN and infinities go through the product as through a convolution.
  GraphBuilder g("g");
  g.Input("x")
      .Initializer(InitializerFrom("w", RandomFloats({6, 4, 2, 2}, 3)))
      .Initializer(InitializerFrom("b", RandomFloats({4}, 4)))
      .Node("ConvTranspose", {"x", "w", "b"}, {"y"}, {AttrInts("strides", {2, 2})})
      .Output("y");
  runner::Tensor x = RandomFloats({1, 6, 5, 7}, 5);
  x.mutable_data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  x.mutable_data<float>()[40] = std::numeric_limits<float>::infinity();
  x.mutable_data<float>()[41] = -std::numeric_limits<float>::infinity();
  ExpectCpuMatchesReference(g.Build(), {{"x", x}}, 18, 1e-4, 1e-4);
  // Fed weights that change between runs of one session (and shapes).
  GraphBuilder fed("g");
  fed.Input("x")
      .Input("w")
      .Node("ConvTranspose", {"x", "w"}, {"y"}, {AttrInts("strides", {2, 2})})
      .Output("y");
  std::vector<Feeds> runs;
  for (uint32_t r = 0; r < 3; ++r) {
    runs.push_back(
        {{"x", RandomFloats({1, 3, 4, r == 2 ? 6 : 5}, 20 + r)}, {"w", RandomFloats({3, 2, 2, 2}, 30 + r)}});
  }
  ExpectRepeatedRunsMatch(fed.Build(), runs);
  // Large enough for both threads: a U-Net's 64 -> 32 upsampling.
  GraphBuilder big("g");
  big.Input("x")
      .Initializer(InitializerFrom("w", RandomFloats({64, 32, 2, 2}, 6, -0.1f, 0.1f)))
      .Node("ConvTranspose", {"x", "w"}, {"y"},
            {AttrInts("strides", {2, 2}), AttrInts("kernel_shape", {2, 2})})
      .Output("y");
  Feeds feeds = {{"x", RandomFloats({1, 64, 40, 48}, 7)}};
  auto ref = RunGraphOn(runner::Backend::kReference, big.Build(), feeds, 18, 2);
  auto cpu = RunGraphOn(runner::Backend::kCpu, big.Build(), feeds, 18, 2);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ExpectTensorsClose((*ref)[0].tensor(), (*cpu)[0].tensor(), 1e-4, 1e-4, "y");
}

TEST(CpuConvTest, RepeatedRunsWithChangingShapes) {
  for (bool constant_w : {true, false}) {
    GraphBuilder g("g");
    g.Input("x");
    Feeds base;
    runner::Tensor w = RandomFloats({8, 3, 3, 3}, 5);
    if (constant_w) {
      g.Initializer(InitializerFrom("w", w));
    } else {
      g.Input("w");
      base.push_back({"w", w});
    }
    g.Node("Conv", {"x", "w"}, {"y"}, {AttrString("auto_pad", "SAME_UPPER"), AttrInts("strides", {2, 2})})
        .Output("y");
    std::vector<Feeds> runs;
    for (std::vector<int64_t> shape :
         std::vector<std::vector<int64_t>>{{1, 3, 10, 10}, {2, 3, 7, 9}, {1, 3, 10, 10}, {1, 3, 31, 5}}) {
      Feeds f = base;
      f.push_back({"x", RandomFloats(shape, static_cast<uint32_t>(shape[2]))});
      runs.push_back(f);
    }
    ExpectRepeatedRunsMatch(g.Build(), runs);
  }
}

TEST(CpuConvTest, UnsupportedCasesFallBack) {
  // 4 spatial dims: beyond oneDNN, the reference kernel runs.
  ConvCase four{.cg = 2, .mg = 2, .in = {3, 4, 3, 4}, .kernel = {2, 1, 2, 2}};
  ExpectConvMatches(four, false, 1);
  // Empty batch.
  GraphBuilder g("g");
  g.Input("x").Input("w").Node("Conv", {"x", "w"}, {"y"}).Output("y");
  ExpectCpuMatchesReference(g.Build(),
                            {{"x", RandomFloats({0, 2, 4, 4}, 1)}, {"w", RandomFloats({3, 2, 3, 3}, 2)}});
}

TEST(CpuConvTest, InvalidInputsGiveTheReferenceErrors) {
  GraphBuilder g("g");
  g.Input("x").Input("w").Node("Conv", {"x", "w"}, {"y"}).Output("y");
  pb::GraphProto graph = g.Build();
  // Channel mismatch, window larger than the input, rank mismatch.
  std::vector<Feeds> bad = {
      {{"x", RandomFloats({1, 3, 5, 5}, 1)}, {"w", RandomFloats({2, 2, 3, 3}, 2)}},
      {{"x", RandomFloats({1, 2, 2, 2}, 1)}, {"w", RandomFloats({2, 2, 3, 3}, 2)}},
      {{"x", RandomFloats({1, 2, 5}, 1)}, {"w", RandomFloats({2, 2, 3, 3}, 2)}},
  };
  for (const Feeds& feeds : bad) {
    auto ref = RunGraphOn(runner::Backend::kReference, graph, feeds);
    auto cpu = RunGraphOn(runner::Backend::kCpu, graph, feeds);
    EXPECT_FALSE(ref.ok());
    ASSERT_FALSE(cpu.ok());
    EXPECT_EQ(cpu.status().code(), ref.status().code());
  }
}

// --- QLinearConv and ConvInteger ---

pb::TensorProto FloatInitializer(const std::string& name, std::vector<int64_t> dims,
                                 std::vector<float> values) {
  return InitializerFrom(name, Floats(std::move(dims), values));
}

pb::TensorProto IntInitializer(const std::string& name, int32_t dtype, std::vector<int64_t> dims, int64_t lo,
                               int64_t hi, uint32_t seed) {
  return InitializerFrom(name, RandomInts(dtype, std::move(dims), seed, lo, hi));
}

// Runs both backends; expects the same type and shape and values within 1
// (float rounding of the requantization may move a value across a tie).
void ExpectQuantizedClose(const pb::GraphProto& graph, const Feeds& feeds) {
  auto ref = RunGraphOn(runner::Backend::kReference, graph, feeds);
  auto cpu = RunGraphOn(runner::Backend::kCpu, graph, feeds);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const runner::Tensor& e = (*ref)[0].tensor();
  const runner::Tensor& a = (*cpu)[0].tensor();
  ASSERT_EQ(e.dtype(), a.dtype());
  ASSERT_EQ(e.shape(), a.shape());
  int64_t off_by_one = 0;
  for (int64_t i = 0; i < e.size(); ++i) {
    int ev = e.dtype() == pb::kUint8 ? e.data<uint8_t>()[i] : e.data<int8_t>()[i];
    int av = a.dtype() == pb::kUint8 ? a.data<uint8_t>()[i] : a.data<int8_t>()[i];
    ASSERT_LE(std::abs(ev - av), 1) << "element " << i;
    off_by_one += ev != av;
  }
  EXPECT_LE(off_by_one * 100, e.size()) << "more than 1% of the elements differ";
}

TEST(CpuConvTest, QLinearConvMatchesReference) {
  std::mt19937 rng(5);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (uint32_t i = 0; i < 24; ++i) {
    int32_t xt = pick(0, 1) ? pb::kUint8 : pb::kInt8, yt = pick(0, 1) ? pb::kUint8 : pb::kInt8;
    bool w_u8 = pick(0, 1) == 1, per_channel = pick(0, 1) == 1, bias = pick(0, 1) == 1;
    int64_t group = pick(0, 2) == 0 ? 4 : 1, cg = group == 4 ? 1 : pick(1, 6), m = group * pick(1, 5);
    int64_t k = pick(1, 3), stride = pick(1, 2), h = pick(k, k + 7);
    SCOPED_TRACE("case " + std::to_string(i));
    GraphBuilder g("g");
    g.Input("x", xt);
    int64_t x_lo = xt == pb::kUint8 ? 0 : -128, x_hi = xt == pb::kUint8 ? 255 : 127;
    g.Initializer(FloatInitializer("xs", {}, {0.02f + 0.001f * static_cast<float>(i)}));
    g.Initializer(IntInitializer("xz", xt, {}, x_lo + 60, x_hi - 60, i));
    // 7-bit weights: no u8 x s8 pair saturation on CPUs without VNNI.
    std::vector<int64_t> w_shape = {m, cg, k, k};
    g.Initializer(w_u8 ? IntInitializer("w", pb::kUint8, w_shape, 64, 191, i + 1)
                       : IntInitializer("w", pb::kInt8, w_shape, -64, 63, i + 1));
    int64_t ws_n = per_channel ? m : 1;
    std::vector<float> ws;
    for (int64_t j = 0; j < ws_n; ++j) ws.push_back(0.003f + 0.0005f * static_cast<float>(j));
    g.Initializer(FloatInitializer("ws", per_channel ? std::vector<int64_t>{m} : std::vector<int64_t>{}, ws));
    if (w_u8) {
      g.Initializer(IntInitializer(
          "wz", pb::kUint8, per_channel ? std::vector<int64_t>{m} : std::vector<int64_t>{}, 128, 128, 0));
    } else {
      g.Initializer(IntInitializer("wz", pb::kInt8, {}, 0, 0, 0));
    }
    g.Initializer(FloatInitializer("ys", {}, {0.05f + 0.01f * static_cast<float>(i % 5)}));
    g.Initializer(
        IntInitializer("yz", yt, {}, yt == pb::kUint8 ? 100 : -20, yt == pb::kUint8 ? 150 : 20, i + 2));
    std::vector<std::string> inputs = {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz"};
    if (bias) {
      g.Initializer(IntInitializer("b", pb::kInt32, {m}, -2000, 2000, i + 3));
      inputs.push_back("b");
    }
    g.Node("QLinearConv", inputs, {"y"},
           {AttrInt("group", group), AttrInts("strides", {stride, stride}), AttrInts("pads", {1, 0, 0, 1})})
        .Output("y", yt);
    ExpectQuantizedClose(g.Build(),
                         {{"x", RandomInts(xt, {pick(1, 2), group * cg, h, h + 2}, i, x_lo, x_hi)}});
  }
}

TEST(CpuConvTest, QLinearConvUnsupportedParametersFallBack) {
  // u8 weights with a zero point other than 128, and scales fed at run time.
  for (bool runtime_scale : {false, true}) {
    GraphBuilder g("g");
    g.Input("x", pb::kUint8);
    if (runtime_scale) {
      g.Input("xs");
    } else {
      g.Initializer(FloatInitializer("xs", {}, {0.02f}));
    }
    g.Initializer(IntInitializer("xz", pb::kUint8, {}, 120, 120, 0));
    g.Initializer(IntInitializer("w", pb::kUint8, {4, 3, 3, 3}, 0, 255, 1));
    g.Initializer(FloatInitializer("ws", {}, {0.004f}));
    g.Initializer(
        IntInitializer("wz", pb::kUint8, {}, runtime_scale ? 128 : 100, runtime_scale ? 128 : 100, 0));
    g.Initializer(FloatInitializer("ys", {}, {0.1f}));
    g.Initializer(IntInitializer("yz", pb::kUint8, {}, 128, 128, 0));
    g.Node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz"}, {"y"}).Output("y", pb::kUint8);
    Feeds feeds = {{"x", RandomInts(pb::kUint8, {1, 3, 6, 6}, 2, 0, 255)}};
    if (runtime_scale) feeds.push_back({"xs", Floats({}, {0.02f})});
    ExpectCpuMatchesReference(g.Build(), feeds);
  }
}

TEST(CpuConvTest, ConvIntegerMatchesReference) {
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    bool w_u8 = variant % 2 == 1, x_zp = variant >= 2;
    GraphBuilder g("g");
    g.Input("x", pb::kUint8);
    g.Initializer(w_u8 ? IntInitializer("w", pb::kUint8, {6, 2, 3, 3}, 64, 191, 3)
                       : IntInitializer("w", pb::kInt8, {6, 2, 3, 3}, -64, 63, 3));
    std::vector<std::string> inputs = {"x", "w"};
    if (x_zp || w_u8) {
      g.Initializer(IntInitializer("xz", pb::kUint8, {}, x_zp ? 77 : 0, x_zp ? 77 : 0, 0));
      inputs.push_back("xz");
    }
    if (w_u8) {
      g.Initializer(IntInitializer("wz", pb::kUint8, {}, 128, 128, 0));
      inputs.push_back("wz");
    }
    g.Node("ConvInteger", inputs, {"y"}, {AttrInt("group", 2), AttrString("auto_pad", "SAME_UPPER")})
        .Output("y", pb::kInt32);
    ExpectCpuMatchesReference(g.Build(), {{"x", RandomInts(pb::kUint8, {2, 4, 7, 5}, 4, 0, 255)}});
  }
}

}  // namespace
}  // namespace onnxkit::testing
