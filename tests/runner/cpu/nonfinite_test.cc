// NaN and infinities through the cpu backend: planted before every chain
// the cpu backend fuses (runner/fusion.h: Conv with folded affine nodes,
// activations and residuals on each convolution path; Conv sequences;
// BatchNormalization affine chains) and before its other kernels whose
// oneDNN or vector code compares values (activations, pooling, Max / Min,
// reductions, softmax). The outputs must be non-finite exactly where the
// reference backend's are: NaN where it has NaN, the same infinity where it
// has one; the finite elements agree as usual. Every test runs twice: in
// float32, and with the products in bfloat16 (SessionOptions::bf16; where
// the CPU has no bfloat16 instructions that run is float32 again).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runner/cpu/conv.h"
#include "runner/cpu/threads.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

// Winograd stages for the small convolutions tests use (the product plans
// them from 64 output channels): the path is exercised while it lives.
struct SmallConvWinograd {
  int64_t previous = runner::cpu::SetWinogradMinOutputChannels(1);
  ~SmallConvWinograd() { runner::cpu::SetWinogradMinOutputChannels(previous); }
};


constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// `t` with NaN, +inf and -inf planted at a few positions spread over the
// tensor (first and last elements included): which ones by `kinds`, a
// subset of "n+-".
runner::Tensor Plant(runner::Tensor t, const std::string& kinds, uint32_t seed) {
  float* p = t.mutable_data<float>();
  const int64_t n = t.size();
  std::vector<float> values;
  for (char k : kinds) values.push_back(k == 'n' ? kNaN : k == '+' ? kInf : -kInf);
  if (values.empty() || n == 0) return t;
  const int64_t positions[] = {0, n - 1, n / 2, n / 3 + seed % 7, (n * 2) / 3 + seed % 5, n / 7 + 1};
  size_t k = seed % values.size();
  for (int64_t i : positions) {
    if (i >= 0 && i < n) p[i] = values[k++ % values.size()];
  }
  return t;
}

// Runs `graph` on both backends and expects the same non-finite elements,
// bit for bit for infinities and as NaN for NaN (IEEE leaves the sign and
// payload of a propagated NaN open), and the finite ones close. With
// `planted_nan`, also expects a non-finite output element (a NaN always
// reaches the outputs; an infinity a Clip may bound).
// The precision of the cpu runs of the current test (CpuNonFiniteTest's
// parameter).
bool g_bf16 = false;

class CpuNonFiniteTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { g_bf16 = GetParam(); }
  void TearDown() override { g_bf16 = false; }
};

// `deep`: a long sequence of bfloat16 products, whose rounding errors
// compound: its finite elements are held to 3e-2 of the largest magnitude.
void ExpectSameNonFinite(const pb::GraphProto& graph, const Feeds& feeds, int64_t opset, bool planted_nan,
                         bool deep = false) {
  auto ref = RunGraphOn(runner::Backend::kReference, graph, feeds, opset);
  auto cpu = RunGraphOn(runner::Backend::kCpu, graph, feeds, opset, /*threads=*/1, g_bf16);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_EQ(ref->size(), cpu->size());
  int64_t non_finite = 0;
  for (size_t o = 0; o < ref->size(); ++o) {
    const runner::Tensor& e = (*ref)[o].tensor();
    const runner::Tensor& a = (*cpu)[o].tensor();
    ASSERT_EQ(e.dtype(), pb::kFloat);
    ASSERT_EQ(e.shape(), a.shape());
    int64_t wrong = 0, first = -1;
    for (int64_t i = 0; i < e.size(); ++i) {
      float x = e.data<float>()[i], y = a.data<float>()[i];
      if (std::isfinite(x) && std::isfinite(y)) continue;
      ++non_finite;
      bool same = std::isnan(x) ? std::isnan(y) : std::memcmp(&x, &y, sizeof(float)) == 0;
      if (!same && wrong++ == 0) first = i;
    }
    EXPECT_EQ(wrong, 0) << "output " << o << ": " << wrong << " non-finite elements differ; first at "
                        << first << ": reference " << e.data<float>()[first] << ", cpu "
                        << a.data<float>()[first];
    // bfloat16 keeps 8 significant bits of each factor.
    const double tolerance = g_bf16 ? 3e-2 : 1e-4;
    double atol = tolerance;
    if (deep && g_bf16) {
      double magnitude = 0;
      for (int64_t i = 0; i < e.size(); ++i) {
        const double v = std::fabs(double{e.data<float>()[i]});
        if (std::isfinite(v)) magnitude = std::max(magnitude, v);
      }
      atol = tolerance * std::max(magnitude, 1.0);
    }
    ExpectTensorsClose(e, a, atol, tolerance, "output " + std::to_string(o));
  }
  if (planted_nan) {
    EXPECT_GT(non_finite, 0) << "nothing non-finite reached the outputs";
  }
}

bool HasNaN(const std::string& kinds) { return kinds.find('n') != std::string::npos; }

struct ConvCase {
  std::string name;
  int64_t c, m, group, k, hw;
};

// The convolution paths of the cpu backend (see runner/cpu/conv.cc).
const ConvCase kCases[] = {
    {"pointwise", 8, 16, 1, 1, 12},  // plain layout
    {"depthwise", 16, 16, 16, 3, 9},
    {"spatial", 5, 16, 1, 3, 7},
    {"small_pointwise", 16, 16, 1, 1, 5},
    {"grouped_pointwise", 16, 24, 4, 1, 12},
};

void AddConv(GraphBuilder& g, const ConvCase& cc, const std::string& in, const std::string& out,
             const std::string& name, uint32_t seed) {
  g.Initializer(InitializerFrom(name + "_w", RandomFloats({cc.m, cc.c / cc.group, cc.k, cc.k}, seed)))
      .Initializer(InitializerFrom(name + "_b", RandomFloats({cc.m}, seed + 1)));
  int64_t p = cc.k / 2;
  g.Node("Conv", {in, name + "_w", name + "_b"}, {out},
         {AttrInt("group", cc.group), AttrInts("pads", {p, p, p, p})}, name);
}

void AddBatchNorm(GraphBuilder& g, const std::string& in, const std::string& out, int64_t m, uint32_t seed) {
  g.Initializer(InitializerFrom(out + "_scale", RandomFloats({m}, seed, 0.5f, 2.0f)))
      .Initializer(InitializerFrom(out + "_shift", RandomFloats({m}, seed + 1)))
      .Initializer(InitializerFrom(out + "_mean", RandomFloats({m}, seed + 2)))
      .Initializer(InitializerFrom(out + "_var", RandomFloats({m}, seed + 3, 0.1f, 3.0f)))
      .Node("BatchNormalization", {in, out + "_scale", out + "_shift", out + "_mean", out + "_var"}, {out},
            {}, out);
}

// What follows the Conv in a chain: each adds nodes from "conv" to "y"
// (a residual input "r" where it takes one).
struct Tail {
  std::string name;
  void (*add)(GraphBuilder& g, int64_t m);
  bool residual = false;
  int64_t opset = 18;
};

const Tail kTails[] = {
    {"relu", [](GraphBuilder& g, int64_t) { g.Node("Relu", {"conv"}, {"y"}, {}, "relu"); }},
    {"leaky_relu", [](GraphBuilder& g,
                      int64_t) { g.Node("LeakyRelu", {"conv"}, {"y"}, {AttrFloat("alpha", 0.1f)}, "act"); }},
    {"clip_inputs",
     [](GraphBuilder& g, int64_t) {
       g.Initializer(InitializerFrom("lo", Floats({}, {0.0f})))
           .Initializer(InitializerFrom("hi", Floats({}, {6.0f})))
           .Node("Clip", {"conv", "lo", "hi"}, {"y"}, {}, "clip");
     }},
    {"clip_open",
     [](GraphBuilder& g, int64_t) {
       g.Initializer(InitializerFrom("hi", Floats({}, {0.5f})))
           .Node("Clip", {"conv", "", "hi"}, {"y"}, {}, "clip");
     }},
    {"clip_attributes",
     [](GraphBuilder& g, int64_t) {
       g.Node("Clip", {"conv"}, {"y"}, {AttrFloat("min", -0.5f), AttrFloat("max", 0.5f)}, "clip");
     },
     false, 10},
    {"batchnorm_relu",
     [](GraphBuilder& g, int64_t m) {
       AddBatchNorm(g, "conv", "n", m, 30);
       g.Node("Relu", {"n"}, {"y"}, {}, "relu");
     }},
    {"mul_add_relu",
     [](GraphBuilder& g, int64_t m) {
       g.Initializer(InitializerFrom("s", RandomFloats({m, 1, 1}, 40, 0.5f, 2.0f)))
           .Initializer(InitializerFrom("t", RandomFloats({1, m, 1, 1}, 41)))
           .Node("Mul", {"conv", "s"}, {"a"}, {}, "mul")
           .Node("Add", {"t", "a"}, {"b"}, {}, "add")
           .Node("Relu", {"b"}, {"y"}, {}, "relu");
     }},
    {"add_relu",
     [](GraphBuilder& g, int64_t) {
       g.Node("Add", {"conv", "r"}, {"a"}, {}, "add").Node("Relu", {"a"}, {"y"}, {}, "relu");
     },
     true},
    {"relu_add",
     [](GraphBuilder& g, int64_t) {
       g.Node("Relu", {"conv"}, {"a"}, {}, "relu").Node("Add", {"r", "a"}, {"y"}, {}, "add");
     },
     true},
    {"relu_sum_clip",
     [](GraphBuilder& g, int64_t) {
       g.Node("Relu", {"conv"}, {"a"}, {}, "relu")
           .Node("Sum", {"a", "r"}, {"b"}, {}, "sum")
           .Node("Clip", {"b"}, {"y"}, {AttrFloat("min", -1.0f), AttrFloat("max", 1.0f)}, "clip");
     },
     true, 10},
    {"add",
     [](GraphBuilder& g, int64_t) {
       g.Node("Add", {"conv", "r"}, {"y"}, {}, "add");
     },
     true},
    {"hardswish", [](GraphBuilder& g, int64_t) { g.Node("HardSwish", {"conv"}, {"y"}, {}, "act"); }},
    {"add_hardswish",
     [](GraphBuilder& g, int64_t) {
       g.Node("Add", {"conv", "r"}, {"a"}, {}, "add").Node("HardSwish", {"a"}, {"y"}, {}, "act");
     },
     true},
    // SiLU as x * Sigmoid(x): the Conv's swish post-op.
    {"silu",
     [](GraphBuilder& g, int64_t) {
       g.Node("Sigmoid", {"conv"}, {"s"}, {}, "sigmoid").Node("Mul", {"s", "conv"}, {"y"}, {}, "mul");
     }},
    {"batchnorm_silu_add",
     [](GraphBuilder& g, int64_t m) {
       AddBatchNorm(g, "conv", "n", m, 31);
       g.Node("Sigmoid", {"n"}, {"s"}, {}, "sigmoid")
           .Node("Mul", {"n", "s"}, {"a"}, {}, "mul")
           .Node("Add", {"a", "r"}, {"y"}, {}, "add");
     },
     true},
    {"add_silu",
     [](GraphBuilder& g, int64_t) {
       g.Node("Add", {"conv", "r"}, {"a"}, {}, "add")
           .Node("Sigmoid", {"a"}, {"s"}, {}, "sigmoid")
           .Node("Mul", {"a", "s"}, {"y"}, {}, "mul");
     },
     true},
    // HardSwish as x * HardSigmoid(x) (alpha 1/6, beta 1/2): the Conv's
    // hardswish post-op (-inf * 0 is NaN on both).
    {"hardswish_gate",
     [](GraphBuilder& g, int64_t) {
       g.Node("HardSigmoid", {"conv"}, {"h"}, {AttrFloat("alpha", 1.0f / 6)}, "gate")
           .Node("Mul", {"h", "conv"}, {"y"}, {}, "mul");
     }},
    {"batchnorm_hardswish_gate_add",
     [](GraphBuilder& g, int64_t m) {
       AddBatchNorm(g, "conv", "n", m, 33);
       g.Node("HardSigmoid", {"n"}, {"h"}, {AttrFloat("alpha", 1.0f / 6), AttrFloat("beta", 0.5f)}, "gate")
           .Node("Mul", {"n", "h"}, {"a"}, {}, "mul")
           .Node("Add", {"a", "r"}, {"y"}, {}, "add");
     },
     true},
    // A MaxPool ending the chain (pooled in oneDNN's layout on bounded
    // values only).
    {"relu_maxpool",
     [](GraphBuilder& g, int64_t) {
       g.Node("Relu", {"conv"}, {"a"}, {}, "relu")
           .Node("MaxPool", {"a"}, {"y"},
                 {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1})},
                 "pool");
     }},
    {"maxpool",
     [](GraphBuilder& g, int64_t) {
       g.Node("MaxPool", {"conv"}, {"y"}, {AttrInts("kernel_shape", {2, 2}), AttrInt("ceil_mode", 1)}, "pool");
     }},
    // A GlobalAveragePool ending the chain (oneDNN's average pooling in the
    // fast plan; the means of the plain result after the safe plan, or
    // after a SiLU run in the kernel's own pass).
    {"relu_gap",
     [](GraphBuilder& g, int64_t) {
       g.Node("Relu", {"conv"}, {"a"}, {}, "relu").Node("GlobalAveragePool", {"a"}, {"y"}, {}, "gap");
     }},
    {"gap", [](GraphBuilder& g, int64_t) { g.Node("GlobalAveragePool", {"conv"}, {"y"}, {}, "gap"); }},
    {"add_relu_gap",
     [](GraphBuilder& g, int64_t) {
       g.Node("Add", {"conv", "r"}, {"a"}, {}, "add")
           .Node("Relu", {"a"}, {"b"}, {}, "relu")
           .Node("GlobalAveragePool", {"b"}, {"y"}, {}, "gap");
     },
     true},
    {"silu_gap",
     [](GraphBuilder& g, int64_t) {
       g.Node("Sigmoid", {"conv"}, {"s"}, {}, "sigmoid")
           .Node("Mul", {"s", "conv"}, {"a"}, {}, "mul")
           .Node("GlobalAveragePool", {"a"}, {"y"}, {}, "gap");
     }},
};

TEST_P(CpuNonFiniteTest, IntoEveryConvChainOnEveryConvolutionPath) {
  uint32_t seed = 1;
  for (const ConvCase& cc : kCases) {
    for (const Tail& tail : kTails) {
      // Planted in the Conv's input, and (chains with a residual) in the residual.
      for (const char* where : {"x", "r"}) {
        if (std::string(where) == "r" && !tail.residual) continue;
        for (const char* kinds : {"n", "+-", "n+-"}) {
          SCOPED_TRACE(cc.name + " " + tail.name + " into " + where + " " + kinds);
          GraphBuilder g("g");
          std::vector<int64_t> x_shape = {1, cc.c, cc.hw, cc.hw}, y_shape = {1, cc.m, cc.hw, cc.hw};
          g.Input("x", pb::kFloat, x_shape);
          AddConv(g, cc, "x", "conv", "conv", seed);
          Feeds feeds;
          runner::Tensor x = RandomFloats(x_shape, seed + 2);
          feeds.emplace_back("x", std::string(where) == "x" ? Plant(x, kinds, seed) : x);
          if (tail.residual) {
            g.Input("r", pb::kFloat, y_shape);
            runner::Tensor r = RandomFloats(y_shape, seed + 3, -2, 2);
            feeds.emplace_back("r", std::string(where) == "r" ? Plant(r, kinds, seed) : r);
          }
          tail.add(g, cc.m);
          g.Output("y");
          ExpectSameNonFinite(g.Build(), feeds, tail.opset, HasNaN(kinds));
          ++seed;
        }
      }
    }
  }
}

TEST_P(CpuNonFiniteTest, NanPlantedMidNetworkReachesTheOutput) {
  // Sqrt of a negative value, times zero, added to a Conv output before its
  // Relu: the fused Conv + Add + Relu must keep the NaN.
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name);
    GraphBuilder g("g");
    std::vector<int64_t> x_shape = {1, cc.c, cc.hw, cc.hw};
    g.Input("x", pb::kFloat, x_shape)
        .Input("p", pb::kFloat, std::vector<int64_t>{1, cc.m, cc.hw, cc.hw})
        .Initializer(InitializerFrom("zero", Floats({}, {0.0f})));
    AddConv(g, cc, "x", "conv", "conv", 7);
    g.Node("Sqrt", {"p"}, {"sq"}, {}, "sqrt")
        .Node("Mul", {"sq", "zero"}, {"planted"}, {}, "mul")
        .Node("Add", {"conv", "planted"}, {"a"}, {}, "add")
        .Node("Relu", {"a"}, {"y"}, {}, "relu")
        .Output("y");
    // p in [0, 1) but for one negative element.
    runner::Tensor p = RandomFloats({1, cc.m, cc.hw, cc.hw}, 8, 0.0f, 1.0f);
    p.mutable_data<float>()[p.size() / 2] = -1.0f;
    ExpectSameNonFinite(g.Build(), {{"x", RandomFloats(x_shape, 9)}, {"p", p}}, 18, true);
  }
}

// Conv sequences (several Convs run as one kernel, the values between them
// in oneDNN's layouts): an inverted residual block with Clip activations, a
// Conv -> BatchNormalization -> Relu -> Conv pair, and a residual taken by
// an inner stage; channel counts that do not fill 16-channel blocks.
TEST_P(CpuNonFiniteTest, IntoConvSequences) {
  for (int64_t c : {8, 12}) {
    for (const char* kinds : {"n", "+-"}) {
      for (bool into_residual : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "c " << c << " " << kinds << (into_residual ? " residual" : ""));
        const int64_t hw = 9;
        GraphBuilder g("g");
        g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw})
            .Input("r", pb::kFloat, std::vector<int64_t>{1, 4 * c, hw, hw})
            .Initializer(InitializerFrom("lo", Floats({}, {0.0f})))
            .Initializer(InitializerFrom("hi", Floats({}, {6.0f})));
        AddConv(g, {"", c, 4 * c, 1, 1, hw}, "x", "e", "expand", 50);
        g.Node("Clip", {"e", "lo", "hi"}, {"e6"}, {}, "clip1");
        AddConv(g, {"", 4 * c, 4 * c, 4 * c, 3, hw}, "e6", "d", "dw", 52);
        g.Node("Add", {"d", "r"}, {"dr"}, {}, "add_inner").Node("Relu", {"dr"}, {"d6"}, {}, "relu1");
        AddConv(g, {"", 4 * c, c, 1, 1, hw}, "d6", "p", "project", 54);
        AddBatchNorm(g, "p", "pn", c, 56);
        g.Node("Relu", {"pn"}, {"pr"}, {}, "relu2");
        AddConv(g, {"", c, c, 1, 3, hw}, "pr", "y", "last", 58);
        g.Output("y");
        runner::Tensor x = RandomFloats({1, c, hw, hw}, 60);
        runner::Tensor r = RandomFloats({1, 4 * c, hw, hw}, 61);
        ExpectSameNonFinite(
            g.Build(),
            {{"x", into_residual ? x : Plant(x, kinds, 3)}, {"r", into_residual ? Plant(r, kinds, 4) : r}},
            18, HasNaN(kinds));
      }
    }
  }
}

// An EfficientNet / MobileNetV3-style sequence (expand 1x1 + HardSwish,
// depthwise 3x3 + SiLU, project 1x1, residual Add with X): oneDNN's
// hardswish and swish post-ops run only on bounded values.
TEST_P(CpuNonFiniteTest, IntoSiluSequences) {
  for (const char* kinds : {"n", "+-", "n+-"}) {
    SCOPED_TRACE(kinds);
    const int64_t c = 8, hw = 9;
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
    AddConv(g, {"", c, 4 * c, 1, 1, hw}, "x", "e", "expand", 140);
    g.Node("HardSwish", {"e"}, {"ea"}, {}, "m1");
    AddConv(g, {"", 4 * c, 4 * c, 4 * c, 3, hw}, "ea", "d", "dw", 142);
    AddBatchNorm(g, "d", "dn", 4 * c, 144);
    g.Node("Sigmoid", {"dn"}, {"ds"}, {}, "s2").Node("Mul", {"ds", "dn"}, {"da"}, {}, "m2");
    AddConv(g, {"", 4 * c, c, 1, 1, hw}, "da", "p", "project", 146);
    g.Node("Add", {"p", "x"}, {"y"}, {}, "add").Output("y");
    ExpectSameNonFinite(g.Build(), {{"x", Plant(RandomFloats({1, c, hw, hw}, 148), kinds, 6)}}, 18,
                        HasNaN(kinds));
  }
}

// A block with squeeze-and-excitation (expand 1x1 + Relu, depthwise 3x3 +
// HardSwish, GlobalAveragePool, 1x1 Conv, activation, 1x1 Conv, gate, Mul,
// project 1x1), run as one sequence: NaN and infinities planted into X
// (every channel's gate then becomes NaN); and, with X finite, infinite
// squeeze biases, so that some gates are NaN (inf - inf, or
// HardSwish(-inf)) and others 0 or 1.
TEST_P(CpuNonFiniteTest, IntoSqueezeExcitation) {
  for (const char* act : {"Relu", "HardSwish"}) {
    for (const char* kinds : {"n", "+-", "n+-", ""}) {
      SCOPED_TRACE(std::string(act) + " " + kinds);
      const int64_t c = 24, hw = 7;
      GraphBuilder g("g");
      g.Input("x", pb::kFloat, std::vector<int64_t>{1, 8, hw, hw});
      AddConv(g, {"", 8, c, 1, 1, hw}, "x", "e", "expand", 150);
      g.Node("Relu", {"e"}, {"ea"}, {}, "relu");
      AddConv(g, {"", c, c, c, 3, hw}, "ea", "d", "dw", 152);
      g.Node("HardSwish", {"d"}, {"da"}, {}, "hswish");
      // Without planted values, infinite squeeze biases: Relu passes +inf
      // and zeroes -inf, HardSwish(-inf) is NaN.
      runner::Tensor b1 = RandomFloats({6}, 155);
      if (kinds[0] == '\0') {
        b1.mutable_data<float>()[0] = kInf;
        b1.mutable_data<float>()[1] = -kInf;
        b1.mutable_data<float>()[3] = kInf;
      }
      g.Initializer(InitializerFrom("w1", RandomFloats({6, c, 1, 1}, 154)))
          .Initializer(InitializerFrom("b1", b1))
          .Initializer(InitializerFrom("w2", RandomFloats({c, 6, 1, 1}, 156)))
          .Node("GlobalAveragePool", {"da"}, {"p"}, {}, "pool")
          .Node("Conv", {"p", "w1", "b1"}, {"z"}, {}, "squeeze")
          .Node(act, {"z"}, {"a"}, {}, "act")
          .Node("Conv", {"a", "w2"}, {"s"}, {}, "excite")
          .Node("Sigmoid", {"s"}, {"gate"}, {}, "gate")
          .Node("Mul", {"da", "gate"}, {"se"}, {}, "scale");
      AddConv(g, {"", c, 8, 1, 1, hw}, "se", "y", "project", 158);
      g.Output("y");
      ExpectSameNonFinite(g.Build(), {{"x", Plant(RandomFloats({1, 8, hw, hw}, 160), kinds, 7)}}, 14, true);
    }
  }
}

// A fire module (two Conv branches joined by a Concat, run as one step
// writing into the Concat's result): NaN and infinities into X, with Relu
// and Clip activations, which oneDNN's post-ops would bound.
TEST_P(CpuNonFiniteTest, IntoConvBranchesJoinedByAConcat) {
  SmallConvWinograd winograd;  // 13x13: the 3x3 branch's Winograd gate
  for (const char* kinds : {"n", "+-", "n+-"}) {
    for (int64_t hw : {13, 12, 5}) {
      SCOPED_TRACE(::testing::Message() << kinds << " hw " << hw);
      GraphBuilder g("g");
      g.Input("x", pb::kFloat, std::vector<int64_t>{1, 8, hw, hw});
      AddConv(g, {"", 8, 16, 1, 1, hw}, "x", "a", "e1", 130);
      AddConv(g, {"", 8, 24, 1, 3, hw}, "x", "b", "e3", 132);
      g.Node("Relu", {"a"}, {"ar"}, {}, "relu")
          .Node("Clip", {"b"}, {"br"}, {AttrFloat("min", -1.0f), AttrFloat("max", 6.0f)}, "clip")
          .Node("Concat", {"br", "ar"}, {"y"}, {AttrInt("axis", 1)}, "concat")
          .Output("y");
      ExpectSameNonFinite(g.Build(), {{"x", Plant(RandomFloats({1, 8, hw, hw}, 134), kinds, 5)}}, 10,
                          HasNaN(kinds));
    }
  }
}

// A ShuffleNet unit run as one sequence with its channel shuffle (grouped
// 1x1 Conv + Relu, shuffle, depthwise 3x3 Conv, grouped 1x1 Conv, residual
// Sum with X, Relu): NaN and infinities into X.
TEST_P(CpuNonFiniteTest, IntoConvSequencesWithAChannelShuffle) {
  for (const char* kinds : {"n", "+-", "n+-"}) {
    SCOPED_TRACE(kinds);
    const int64_t c = 12, hw = 7;
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw})
        .Initializer(InitializerFrom("split", Int64s({5}, {1, 3, c / 3, hw, hw})))
        .Initializer(InitializerFrom("join", Int64s({4}, {1, c, hw, hw})));
    AddConv(g, {"", c, c, 3, 1, hw}, "x", "a", "g1", 140);
    g.Node("Relu", {"a"}, {"ar"}, {}, "relu1")
        .Node("Reshape", {"ar", "split"}, {"r5"}, {}, "split")
        .Node("Transpose", {"r5"}, {"t5"}, {AttrInts("perm", {0, 2, 1, 3, 4})}, "transpose")
        .Node("Reshape", {"t5", "join"}, {"sh"}, {}, "join");
    AddConv(g, {"", c, c, c, 3, hw}, "sh", "d", "dw", 142);
    AddConv(g, {"", c, c, 3, 1, hw}, "d", "b", "g2", 144);
    g.Node("Sum", {"b", "x"}, {"s"}, {}, "sum").Node("Relu", {"s"}, {"y"}, {}, "relu2").Output("y");
    ExpectSameNonFinite(g.Build(), {{"x", Plant(RandomFloats({1, c, hw, hw}, 146), kinds, 6)}}, 18, HasNaN(kinds));
  }
}

// A ShuffleNet stride-2 unit run inside a sequence (grouped 1x1 Conv +
// Relu, shuffle, depthwise 3x3 stride-2 Conv, grouped 1x1 Conv, joined to
// an AveragePool of the unit's input, Relu, then a 1x1 Conv + Relu): NaN
// and infinities into X, the unit reading X or a stem's result.
TEST_P(CpuNonFiniteTest, IntoPooledJoinsOfConvSequences) {
  for (bool stem : {false, true}) {
    for (const char* kinds : {"n", "+-", "n+-"}) {
      SCOPED_TRACE(::testing::Message() << kinds << " stem " << stem);
      const int64_t c = 16, hw = 8;
      GraphBuilder g("g");
      g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw})
          .Initializer(InitializerFrom("split", Int64s({5}, {1, 4, c / 4, hw, hw})))
          .Initializer(InitializerFrom("join", Int64s({4}, {1, c, hw, hw})))
          .Initializer(InitializerFrom("dw_w", RandomFloats({c, 1, 3, 3}, 150)));
      std::string in = "x";
      if (stem) {
        AddConv(g, {"", c, c, 1, 1, hw}, "x", "st", "stem", 151);
        g.Node("Relu", {"st"}, {"str"}, {}, "stem_relu");
        in = "str";
      }
      AddConv(g, {"", c, c, 4, 1, hw}, in, "a", "g1", 153);
      g.Node("Relu", {"a"}, {"ar"}, {}, "relu1")
          .Node("Reshape", {"ar", "split"}, {"r5"}, {}, "split")
          .Node("Transpose", {"r5"}, {"t5"}, {AttrInts("perm", {0, 2, 1, 3, 4})}, "transpose")
          .Node("Reshape", {"t5", "join"}, {"sh"}, {}, "join")
          .Node("Conv", {"sh", "dw_w"}, {"d"},
                {AttrInt("group", c), AttrInts("pads", {1, 1, 1, 1}), AttrInts("strides", {2, 2})}, "dw");
      AddConv(g, {"", c, c, 4, 1, hw / 2}, "d", "b", "g2", 155);
      g.Node("AveragePool", {in}, {"pool"},
             {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1})},
             "avgpool")
          .Node("Concat", {"b", "pool"}, {"cat"}, {AttrInt("axis", 1)}, "concat")
          .Node("Relu", {"cat"}, {"u"}, {}, "relu2");
      AddConv(g, {"", 2 * c, 2 * c, 4, 1, hw / 2}, "u", "n", "next", 157);
      g.Node("Relu", {"n"}, {"y"}, {}, "relu3").Output("y");
      ExpectSameNonFinite(g.Build(), {{"x", Plant(RandomFloats({1, c, hw, hw}, 159), kinds, 6)}}, 18,
                          HasNaN(kinds));
    }
  }
}

// A projection block (two branches of Conv + BatchNormalization meeting in
// a Sum, then Relu, fused as two steps): NaN and infinities into X reach
// the output through both branches. On 28x28 images the 3x3 Conv runs as a
// Winograd convolution for finite inputs (runner/cpu/conv_sequence.cc),
// which must not see these.
// `stem`: a Conv + Relu before the block, so that one sequence runs the
// stem, the shortcut (reading the block's input) and the main branch.
pb::GraphProto ProjectionBlock(int64_t c, int64_t hw, bool stem = false) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
  std::string x = "x";
  if (stem) {
    AddConv(g, {"", c, c, 1, 3, hw}, "x", "st", "stem", 78);
    g.Node("Relu", {"st"}, {"str"}, {}, "stem_relu");
    x = "str";
  }
  AddConv(g, {"", c, c, 1, 1, hw}, x, "a", "a", 80);
  AddBatchNorm(g, "a", "an", c, 82);
  g.Node("Relu", {"an"}, {"ar"}, {}, "relu_a");
  AddConv(g, {"", c, c, 1, 3, hw}, "ar", "b", "b", 86);
  AddBatchNorm(g, "b", "bn", c, 88);
  AddConv(g, {"", c, c, 1, 1, hw}, x, "s", "s", 92);
  AddBatchNorm(g, "s", "sn", c, 94);
  g.Node("Sum", {"bn", "sn"}, {"sum"}, {}, "sum").Node("Relu", {"sum"}, {"y"}, {}, "relu").Output("y");
  return g.Build();
}

TEST_P(CpuNonFiniteTest, IntoProjectionBlocks) {
  SmallConvWinograd winograd;
  for (bool stem : {false, true}) {
    for (int64_t hw : {9, 28}) {
      const int64_t c = 16;
      for (const char* kinds : {"n", "+-", "n+-"}) {
        SCOPED_TRACE(::testing::Message() << kinds << " hw " << hw << (stem ? " stem" : ""));
        ExpectSameNonFinite(ProjectionBlock(c, hw, stem),
                            {{"x", Plant(RandomFloats({1, c, hw, hw}, 96), kinds, 5)}}, 9, HasNaN(kinds));
      }
      SCOPED_TRACE(::testing::Message() << "overflow, hw " << hw << (stem ? " stem" : ""));
      ExpectSameNonFinite(ProjectionBlock(c, hw, stem),
                          {{"x", RandomFloats({1, c, hw, hw}, 97, 1e37f, 3e38f)}}, 9,
                          /*planted_nan=*/false);
    }
  }
}

// Two identity blocks run as one sequence, the first block's result kept
// inside it as the second's residual: NaN and infinities into X, and
// finite inputs so large that the sequence overflows, reach the output as
// on the reference.
TEST_P(CpuNonFiniteTest, IntoResidualBlocksOfOneSequence) {
  SmallConvWinograd winograd;
  const int64_t c = 16;
  for (int64_t hw : {7, 28}) {
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
    std::string in = "x";
    for (std::string p : {"p", "q"}) {
      AddConv(g, {"", c, c, 1, 1, hw}, in, p + "a", p + "c1", 100);
      g.Node("Relu", {p + "a"}, {p + "ar"}, {}, p + "r1");
      AddConv(g, {"", c, c, 1, 3, hw}, p + "ar", p + "b", p + "c2", 102);
      g.Node("Relu", {p + "b"}, {p + "br"}, {}, p + "r2");
      AddConv(g, {"", c, c, 1, 1, hw}, p + "br", p + "c", p + "c3", 104);
      g.Node("Add", {in, p + "c"}, {p + "s"}, {}, p + "add").Node("Relu", {p + "s"}, {p + "y"}, {}, p + "r3");
      in = p + "y";
    }
    g.Output(in);
    pb::GraphProto graph = g.Build();
    for (const char* kinds : {"n", "+-", "n+-"}) {
      SCOPED_TRACE(::testing::Message() << kinds << " hw " << hw);
      ExpectSameNonFinite(graph, {{"x", Plant(RandomFloats({1, c, hw, hw}, 106), kinds, 7)}}, 18, HasNaN(kinds));
    }
    SCOPED_TRACE(::testing::Message() << "overflow, hw " << hw);
    ExpectSameNonFinite(graph, {{"x", RandomFloats({1, c, hw, hw}, 108, 1e37f, 3e38f)}}, 18,
                        /*planted_nan=*/false);
  }
}

// Linear bottlenecks (MobileNetV2, EfficientNet) run as one sequence: a
// stem Conv + BatchNormalization without activation feeding the first
// block and its residual Add, whose result feeds the second block (SiLU
// written out) and its Add. NaN and infinities into X, and overflowing
// inputs, reach the output as on the reference.
TEST_P(CpuNonFiniteTest, IntoLinearBottlenecksOfOneSequence) {
  for (int64_t c : {16, 12}) {
    const int64_t hw = 9;
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw})
        .Initializer(InitializerFrom("lo", Floats({}, {0.0f})))
        .Initializer(InitializerFrom("hi", Floats({}, {6.0f})));
    AddConv(g, {"", c, c, 1, 3, hw}, "x", "s", "stem", 120);
    AddBatchNorm(g, "s", "s0", c, 122);
    AddConv(g, {"", c, 4 * c, 1, 1, hw}, "s0", "e1", "e1", 124);
    g.Node("Clip", {"e1", "lo", "hi"}, {"e1a"}, {}, "e1_clip");
    AddConv(g, {"", 4 * c, 4 * c, 4 * c, 3, hw}, "e1a", "d1", "d1", 126);
    g.Node("Clip", {"d1", "lo", "hi"}, {"d1a"}, {}, "d1_clip");
    AddConv(g, {"", 4 * c, c, 1, 1, hw}, "d1a", "p1", "p1", 128);
    g.Node("Add", {"s0", "p1"}, {"b1"}, {}, "add1");
    AddConv(g, {"", c, 4 * c, 1, 1, hw}, "b1", "e2", "e2", 130);
    g.Node("Sigmoid", {"e2"}, {"e2g"}, {}, "e2_gate").Node("Mul", {"e2", "e2g"}, {"e2a"}, {}, "e2_mul");
    AddConv(g, {"", 4 * c, 4 * c, 4 * c, 3, hw}, "e2a", "d2", "d2", 132);
    g.Node("Sigmoid", {"d2"}, {"d2g"}, {}, "d2_gate").Node("Mul", {"d2g", "d2"}, {"d2a"}, {}, "d2_mul");
    AddConv(g, {"", 4 * c, c, 1, 1, hw}, "d2a", "p2", "p2", 134);
    g.Node("Add", {"p2", "b1"}, {"y"}, {}, "add2").Output("y");
    pb::GraphProto graph = g.Build();
    for (const char* kinds : {"n", "+-", "n+-"}) {
      SCOPED_TRACE(::testing::Message() << kinds << " c " << c);
      ExpectSameNonFinite(graph, {{"x", Plant(RandomFloats({1, c, hw, hw}, 136), kinds, 5)}}, 18,
                          HasNaN(kinds));
    }
    SCOPED_TRACE(::testing::Message() << "overflow, c " << c);
    ExpectSameNonFinite(graph, {{"x", RandomFloats({1, c, hw, hw}, 138, 1e37f, 3e38f)}}, 18,
                        /*planted_nan=*/false);
  }
}

// A long sequence (`stages` 3x3 Convs + Relu): the bound from X gives out
// after about twenty stages (each multiplies it by its weights' largest row
// sum, ~70 here), though the values themselves grow ~5x a stage. The fast
// plan runs on, measuring the values where the bound gives out: outputs as
// the reference's. From inputs so large that the values overflow, the
// measurement sends the sequence to the safe plan: NaN and infinities as
// the reference's.
TEST_P(CpuNonFiniteTest, LongSequencesMeasureTheirValuesWhereTheBoundGivesOut) {
  const int64_t c = 16, hw = 6;
  const int stages = 32;
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
  std::string in = "x";
  for (int k = 0; k < stages; ++k) {
    const std::string name = "c" + std::to_string(k);
    AddConv(g, {"", c, c, 1, 3, hw}, in, name, name, 300 + 2 * static_cast<uint32_t>(k));
    g.Node("Relu", {name}, {name + "r"}, {}, name + "_relu");
    in = name + "r";
  }
  g.Output(in);
  pb::GraphProto graph = g.Build();
  {
    SCOPED_TRACE("finite");
    const int64_t before = runner::cpu::MeasuredConvolutionStages();
    ExpectSameNonFinite(graph, {{"x", RandomFloats({1, c, hw, hw}, 370)}}, 18, /*planted_nan=*/false,
                        /*deep=*/true);
    EXPECT_GT(runner::cpu::MeasuredConvolutionStages(), before);
  }
  {
    SCOPED_TRACE("overflow");
    ExpectSameNonFinite(graph, {{"x", RandomFloats({1, c, hw, hw}, 371, 1e30f, 1e34f)}}, 18,
                        /*planted_nan=*/false);
  }
  for (const char* kinds : {"n", "+-"}) {
    SCOPED_TRACE(kinds);
    ExpectSameNonFinite(graph, {{"x", Plant(RandomFloats({1, c, hw, hw}, 372), kinds, 4)}}, 18,
                        HasNaN(kinds));
  }
}

// Sequences whose layouts oneDNN does not choose alone: a first 1x1 Conv
// narrowing the channels of a 28x28 image (plain tensors, its post-ops in
// ApplyPostOps), and a grouped 3x3 Conv of 16-channel groups between 1x1
// ones (channels-last). NaN and infinities into X reach the output as on
// the reference.
TEST_P(CpuNonFiniteTest, IntoNarrowingAndGroupedSequences) {
  for (bool grouped : {false, true}) {
    const int64_t c = grouped ? 32 : 40, hw = grouped ? 12 : 28;
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
    if (grouped) {
      AddConv(g, {"", c, 64, 1, 1, hw}, "x", "a", "expand", 150);
      g.Node("Relu", {"a"}, {"ar"}, {}, "r1");
      AddConv(g, {"", 64, 64, 4, 3, hw}, "ar", "b", "grouped", 152);
      g.Node("Relu", {"b"}, {"br"}, {}, "r2");
      AddConv(g, {"", 64, c, 1, 1, hw}, "br", "y", "project", 154);
    } else {
      AddConv(g, {"", c, 16, 1, 1, hw}, "x", "b", "bottleneck", 140);
      AddBatchNorm(g, "b", "bn", 16, 142);
      g.Node("Relu", {"bn"}, {"br"}, {}, "relu");
      AddConv(g, {"", 16, 8, 1, 3, hw}, "br", "y", "grow", 144);
    }
    g.Output("y");
    pb::GraphProto graph = g.Build();
    for (const char* kinds : {"n", "+-", "n+-"}) {
      SCOPED_TRACE(::testing::Message() << kinds << (grouped ? " grouped" : " narrowing"));
      ExpectSameNonFinite(graph, {{"x", Plant(RandomFloats({1, c, hw, hw}, 146), kinds, 6)}}, 18,
                          HasNaN(kinds));
    }
  }
}

// Finite inputs so large that a Winograd convolution's transforms could
// overflow where the direct one does not: the bound refuses Winograd, and
// the result agrees with the reference's (tolerances relative to the
// output's magnitude).
TEST_P(CpuNonFiniteTest, LargeInputsIntoAWinogradStage) {
  SmallConvWinograd winograd;
  const int64_t c = 16, hw = 28;
  for (float scale : {1.0f, 1e32f}) {
    SCOPED_TRACE(scale);
    Feeds feeds = {{"x", RandomFloats({1, c, hw, hw}, 98, -scale, scale)}};
    auto ref = RunGraphOn(runner::Backend::kReference, ProjectionBlock(c, hw), feeds, 9);
    int64_t before = runner::cpu::WinogradConvolutionRuns();
    auto cpu = RunGraphOn(runner::Backend::kCpu, ProjectionBlock(c, hw), feeds, 9, /*threads=*/1, g_bf16);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    // Winograd stages stay float32 Winograd in bfloat16 too, but on AMX
    // (there a bfloat16 direct convolution is faster).
    const bool bf16 = g_bf16 && runner::cpu::Bf16Supported();
    EXPECT_EQ(runner::cpu::WinogradConvolutionRuns() > before,
              scale == 1.0f && runner::cpu::WinogradSupported() && !(bf16 && runner::cpu::AmxSupported()));
    const runner::Tensor& e = (*ref)[0].tensor();
    double magnitude = 0;
    for (int64_t i = 0; i < e.size(); ++i) magnitude = std::max(magnitude, std::fabs(double{e.data<float>()[i]}));
    ASSERT_TRUE(std::isfinite(magnitude));
    ExpectTensorsClose(e, (*cpu)[0].tensor(), (bf16 ? 3e-2 : 1e-5) * magnitude, bf16 ? 3e-2 : 1e-4, "y");
  }
}

TEST_P(CpuNonFiniteTest, OverflowInsideAConvSequence) {
  // Finite inputs near the top of the float range: the first Conv (positive
  // weights) overflows to +inf everywhere, the second (weights of both
  // signs) sums infinities of both signs into NaN, which its Relu must keep.
  for (int64_t c : {8, 16}) {
    SCOPED_TRACE(c);
    const int64_t hw = 6;
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw})
        .Initializer(InitializerFrom("w1", RandomFloats({c, c, 1, 1}, 70, 0.5f, 1.0f)))
        .Initializer(InitializerFrom("w2", RandomFloats({c, c, 3, 3}, 71)))
        .Node("Conv", {"x", "w1"}, {"a"}, {}, "first")
        .Node("Relu", {"a"}, {"a1"}, {}, "relu1")
        .Node("Conv", {"a1", "w2"}, {"b"}, {AttrInts("pads", {1, 1, 1, 1})}, "second")
        .Node("Relu", {"b"}, {"y"}, {}, "relu2")
        .Output("y");
    ExpectSameNonFinite(g.Build(), {{"x", RandomFloats({1, c, hw, hw}, 72, 1e38f, 2e38f)}}, 18,
                        /*planted_nan=*/true);
  }
}

TEST_P(CpuNonFiniteTest, IntoBatchNormAffineChains) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{2, 6, 5, 7}, {3, 6}, {1, 6, 40, 40}}) {
    for (const char* kinds : {"n", "+-", "n+-"}) {
      SCOPED_TRACE(::testing::Message() << shape.size() << " " << kinds);
      std::vector<int64_t> channel_shape(shape.size() - 1, 1);
      channel_shape[0] = 6;
      GraphBuilder g("g");
      g.Input("x", pb::kFloat, shape);
      AddBatchNorm(g, "x", "n", 6, 90);
      g.Initializer(InitializerFrom("s", RandomFloats(channel_shape, 91, 0.5f, 2.0f)))
          .Initializer(InitializerFrom("t", RandomFloats(channel_shape, 92)))
          .Node("Mul", {"n", "s"}, {"a"}, {}, "mul")
          .Node("Add", {"t", "a"}, {"c"}, {}, "add")
          .Node("Relu", {"c"}, {"y"}, {}, "relu")
          .Output("y");
      ExpectSameNonFinite(g.Build(), {{"x", Plant(RandomFloats(shape, 93, -3, 3), kinds, 5)}}, 18,
                          HasNaN(kinds));
    }
  }
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, 4, 3, 3});
  AddBatchNorm(g, "x", "n", 4, 94);
  g.Node("Clip", {"n"}, {"y"}, {AttrFloat("min", -0.5f), AttrFloat("max", 0.5f)}, "clip").Output("y");
  ExpectSameNonFinite(g.Build(), {{"x", Plant(RandomFloats({1, 4, 3, 3}, 95, -3, 3), "n+-", 6)}}, 10, true);
}

// The cpu kernels that are not fused but compare values.
struct SingleOp {
  std::string op;
  std::vector<std::vector<int64_t>> shapes;  // one per input
  std::vector<pb::AttributeProto> attributes;
  int64_t opset = 18;
};

TEST_P(CpuNonFiniteTest, IntoKernelsThatCompareValues) {
  const std::vector<SingleOp> ops = {
      {"Relu", {{2, 3, 50}}, {}},
      {"LeakyRelu", {{2, 3, 50}}, {AttrFloat("alpha", 0.1f)}},
      {"Clip", {{2, 3, 50}}, {}},
      {"Exp", {{2, 3, 50}}, {}},
      {"Sigmoid", {{2, 3, 50}}, {}},
      {"Tanh", {{2, 3, 50}}, {}},
      {"Erf", {{2, 3, 50}}, {}},
      {"Gelu", {{2, 3, 50}}, {}, 20},
      {"HardSwish", {{2, 3, 50}}, {}},
      {"Max", {{2, 3, 50}, {2, 3, 50}}, {}},
      {"Min", {{2, 3, 50}, {3, 1}}, {}},
      {"Add", {{2, 3, 50}, {2, 3, 50}}, {}},
      {"Sum", {{2, 3, 50}, {2, 3, 50}}, {}},
      {"MaxPool", {{1, 3, 9, 9}}, {AttrInts("kernel_shape", {3, 3}), AttrInts("pads", {1, 1, 1, 1})}},
      {"MaxPool", {{1, 3, 40, 40}}, {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})}},
      {"MaxPool", {{1, 3, 30}}, {AttrInts("kernel_shape", {3}), AttrInts("strides", {2})}},
      {"MaxPool", {{1, 2, 6, 6, 6}}, {AttrInts("kernel_shape", {2, 2, 2})}},
      {"AveragePool", {{1, 3, 9, 9}}, {AttrInts("kernel_shape", {3, 3})}},
      {"AveragePool", {{1, 3, 30}}, {AttrInts("kernel_shape", {3})}},
      {"GlobalMaxPool", {{1, 3, 9, 9}}, {}},
      {"GlobalAveragePool", {{1, 3, 9, 9}}, {}},
      {"ReduceMax", {{3, 40, 5}}, {AttrInts("axes", {1})}, 11},
      {"ReduceMin", {{3, 40, 5}}, {AttrInts("axes", {1})}, 11},
      {"ReduceSum", {{3, 40, 5}}, {AttrInts("axes", {1})}, 11},
      {"Softmax", {{4, 30}}, {}},
      {"LogSoftmax", {{4, 30}}, {}},
      {"BatchNormalization", {{1, 3, 9, 9}, {3}, {3}, {3}, {3}}, {}},
      {"MatMul", {{6, 20}, {20, 7}}, {}},
      {"Gemm", {{6, 20}, {7, 20}, {7}}, {AttrInt("transB", 1)}},
      {"Elu", {{2, 3, 50}}, {}},
      {"Sqrt", {{2, 3, 50}}, {}},
      {"Abs", {{2, 3, 50}}, {}},
      {"Neg", {{2, 3, 50}}, {}},
      {"Reciprocal", {{2, 3, 50}}, {}},
      {"Round", {{2, 3, 50}}, {}},
      {"Mul", {{2, 3, 50}, {3, 1}}, {}},
      {"Div", {{2, 3, 50}, {2, 3, 50}}, {}},
      {"LayerNormalization", {{4, 30}, {30}, {30}}, {}},
      {"LRN", {{1, 6, 5, 5}}, {AttrInt("size", 3)}},
      {"ReduceMean", {{3, 40, 5}}, {AttrInts("axes", {1})}, 11},
      {"ReduceL2", {{3, 40, 5}}, {AttrInts("axes", {1})}, 11},
      {"Transpose", {{3, 40, 5}}, {AttrInts("perm", {2, 0, 1})}},
      {"Concat", {{3, 4}, {3, 5}}, {AttrInt("axis", 1)}},
  };
  uint32_t seed = 100;
  for (const SingleOp& op : ops) {
    for (const char* kinds : {"n", "+", "-", "n+-"}) {
      SCOPED_TRACE(op.op + " rank " + std::to_string(op.shapes[0].size()) + " " + kinds);
      GraphBuilder g("g");
      Feeds feeds;
      std::vector<std::string> inputs;
      for (size_t i = 0; i < op.shapes.size(); ++i) {
        std::string name = "x" + std::to_string(i);
        g.Input(name, pb::kFloat, op.shapes[i]);
        inputs.push_back(name);
        // BatchNormalization's variance stays positive; planted only in X.
        runner::Tensor t = RandomFloats(op.shapes[i], seed++, i == 4 ? 0.5f : -2.f, 2.f);
        feeds.emplace_back(name, i == 0 ? Plant(t, kinds, seed) : t);
      }
      g.Node(op.op, inputs, {"y"}, op.attributes, "op").Output("y");
      ExpectSameNonFinite(g.Build(), feeds, op.opset, HasNaN(kinds));
    }
  }
}

TEST_P(CpuNonFiniteTest, IntoResize) {
  for (const char* mode : {"nearest", "linear"}) {
    for (const char* kinds : {"n", "+", "n+-"}) {
      SCOPED_TRACE(std::string(mode) + " " + kinds);
      GraphBuilder g("g");
      g.Input("x", pb::kFloat, std::vector<int64_t>{1, 2, 6, 6})
          .Initializer(InitializerFrom("roi", Floats({0}, {})))
          .Initializer(InitializerFrom("scales", Floats({4}, {1, 1, 2, 2})))
          .Node("Resize", {"x", "roi", "scales"}, {"y"}, {AttrString("mode", mode)}, "resize")
          .Output("y");
      ExpectSameNonFinite(g.Build(), {{"x", Plant(RandomFloats({1, 2, 6, 6}, 130), kinds, 7)}}, 18,
                          HasNaN(kinds));
    }
  }
}

TEST_P(CpuNonFiniteTest, NonFiniteWeightsOfAPaddedConvReachTheBorder) {
  // The padding's zeros times an infinite or NaN weight are NaN by the
  // definition; a convolution that skips padded taps would keep the border
  // finite.
  for (float bad : {kInf, kNaN}) {
    for (const char* auto_pad : {"NOTSET", "SAME_UPPER"}) {
      SCOPED_TRACE(std::string(auto_pad) + (std::isnan(bad) ? " nan" : " inf"));
      runner::Tensor w = RandomFloats({4, 3, 3, 3}, 171);
      w.mutable_data<float>()[27 + 4] = bad;  // channel 1, the centre tap
      w.mutable_data<float>()[0] = bad;       // channel 0, a corner tap
      GraphBuilder g("g");
      g.Input("x", pb::kFloat, std::vector<int64_t>{1, 3, 6, 6}).Initializer(InitializerFrom("w", w));
      std::vector<pb::AttributeProto> attrs = {AttrString("auto_pad", auto_pad)};
      if (std::string(auto_pad) == "NOTSET") attrs.push_back(AttrInts("pads", {1, 1, 1, 1}));
      g.Node("Conv", {"x", "w"}, {"y"}, attrs, "conv").Output("y");
      ExpectSameNonFinite(g.Build(), {{"x", RandomFloats({1, 3, 6, 6}, 172)}}, 13, true);
    }
  }
}

TEST_P(CpuNonFiniteTest, InfiniteFoldedFactorsKeepTheirInfinities) {
  // A BatchNormalization with var 0 and epsilon 0 (scale / 0 = inf) or a
  // Mul by inf after a Conv, or a BatchNormalization -> Mul -> Add -> Relu
  // run as one pass: folded into one affine step they made NaN (inf - inf,
  // 0 x inf) where the ops, one by one, give +-inf.
  runner::Tensor v = RandomFloats({4}, 181, 0.25f, 2.f);
  v.mutable_data<float>()[1] = 0;
  runner::Tensor mc = RandomFloats({4, 1, 1}, 182, 0.5f, 2.f);
  mc.mutable_data<float>()[2] = kInf;
  auto params = [&](GraphBuilder& g) {
    g.Initializer(InitializerFrom("s", RandomFloats({4}, 183, 0.5f, 1.5f)))
        .Initializer(InitializerFrom("o", RandomFloats({4}, 184)))
        .Initializer(InitializerFrom("m", RandomFloats({4}, 185)))
        .Initializer(InitializerFrom("v", v))
        .Initializer(InitializerFrom("mc", mc))
        .Initializer(InitializerFrom("ac", RandomFloats({4, 1, 1}, 186)));
  };
  const std::vector<pb::AttributeProto> bn_attrs = {AttrFloat("epsilon", 0.f)};
  {
    SCOPED_TRACE("Conv, BatchNormalization, Relu");
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 3, 6, 6})
        .Initializer(InitializerFrom("w", RandomFloats({4, 3, 3, 3}, 187)));
    params(g);
    g.Node("Conv", {"x", "w"}, {"c"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv")
        .Node("BatchNormalization", {"c", "s", "o", "m", "v"}, {"b"}, bn_attrs, "bn")
        .Node("Relu", {"b"}, {"y"}, {}, "relu")
        .Output("y");
    ExpectSameNonFinite(g.Build(), {{"x", RandomFloats({1, 3, 6, 6}, 188)}}, 15, true);
  }
  {
    SCOPED_TRACE("Conv, Mul by inf, Add");
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 3, 6, 6})
        .Initializer(InitializerFrom("w", RandomFloats({4, 3, 3, 3}, 187)));
    params(g);
    g.Node("Conv", {"x", "w"}, {"c"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv")
        .Node("Mul", {"c", "mc"}, {"p"}, {}, "mul")
        .Node("Add", {"p", "ac"}, {"y"}, {}, "add")
        .Output("y");
    ExpectSameNonFinite(g.Build(), {{"x", RandomFloats({1, 3, 6, 6}, 188)}}, 15, true);
  }
  {
    SCOPED_TRACE("BatchNormalization, Mul, Add, Relu");
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 4, 6, 6});
    params(g);
    g.Node("BatchNormalization", {"x", "s", "o", "m", "v"}, {"b"}, bn_attrs, "bn")
        .Node("Mul", {"b", "ac"}, {"p"}, {}, "mul")
        .Node("Add", {"p", "ac"}, {"q"}, {}, "add")
        .Node("Relu", {"q"}, {"y"}, {}, "relu")
        .Output("y");
    ExpectSameNonFinite(g.Build(), {{"x", RandomFloats({1, 4, 6, 6}, 189)}}, 15, true);
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, CpuNonFiniteTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Bfloat16" : "Float32";
                         });

}  // namespace
}  // namespace onnxkit::testing
