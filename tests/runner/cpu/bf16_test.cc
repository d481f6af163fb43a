// The cpu backend's bfloat16 products (SessionOptions::bf16): Conv (each
// convolution path), ConvTranspose, MatMul, MatMul + bias chains and Gemm
// with constant weights compute on the inputs and weights rounded to
// bfloat16 (round to nearest even), accumulating in float32. Checked
// against the reference backend run on inputs and weights rounded the same
// way (close to float32 accuracy), and against the reference on the
// unrounded values (bfloat16 accuracy, and measurably different: the
// rounding did happen). On a CPU without bfloat16 instructions the flag has
// no effect and the float32 results are expected.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runner/cpu/threads.h"
#include "runner/fusion.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

// `in` with every element rounded to the nearest bfloat16 (ties to even),
// as a new tensor (copies of a Tensor share its buffer).
runner::Tensor RoundToBf16(const runner::Tensor& in) {
  runner::Tensor t = in.Clone();
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < t.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &p[i], sizeof(u));
    u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    std::memcpy(&p[i], &u, sizeof(u));
  }
  return t;
}

double MaxAbsDiff(const runner::Tensor& a, const runner::Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::fabs(double{a.data<float>()[i]} - double{b.data<float>()[i]}));
  }
  return m;
}

// One graph: an input x, float initializers (the weights), and which of
// them are rounded (the bias of a product stays float32).
struct Case {
  std::string name;
  GraphBuilder graph{"g"};
  std::vector<int64_t> x_shape;
  std::vector<std::pair<std::string, runner::Tensor>> weights;  // rounded in bfloat16
  std::vector<std::pair<std::string, runner::Tensor>> biases;   // kept
  // A sequence of products rounds its intermediate values too: compared
  // with the unrounded reference only.
  bool exact_rounding = true;
  // Computed in float32 even when bfloat16 is asked for (depthwise
  // convolutions: oneDNN's bfloat16 kernels are slower there).
  bool stays_float32 = false;
};

pb::GraphProto Build(Case& c, bool round) {
  GraphBuilder g = c.graph;
  for (const auto& [name, t] : c.weights) g.Initializer(InitializerFrom(name, round ? RoundToBf16(t) : t));
  for (const auto& [name, t] : c.biases) g.Initializer(InitializerFrom(name, t));
  return g.Build();
}

void ExpectBf16Products(Case& c, uint32_t seed) {
  SCOPED_TRACE(c.name);
  runner::Tensor x = RandomFloats(c.x_shape, seed);
  auto exact = RunGraphOn(runner::Backend::kReference, Build(c, false), {{"x", x}});
  auto rounded = RunGraphOn(runner::Backend::kReference, Build(c, true), {{"x", RoundToBf16(x)}});
  auto bf16 = RunGraphOn(runner::Backend::kCpu, Build(c, false), {{"x", x}}, 18, 1, /*bf16=*/true);
  ASSERT_TRUE(exact.ok()) << exact.status();
  ASSERT_TRUE(rounded.ok()) << rounded.status();
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  const runner::Tensor& e = (*exact)[0].tensor();
  const runner::Tensor& r = (*rounded)[0].tensor();
  const runner::Tensor& y = (*bf16)[0].tensor();
  ASSERT_EQ(e.shape(), y.shape());
  if (!runner::cpu::Bf16Supported() || c.stays_float32) {
    ExpectTensorsClose(e, y, 1e-4, 1e-4, "float32");
    return;
  }
  ExpectTensorsClose(e, y, 3e-2, 3e-2, "bfloat16 against float32");
  if (c.exact_rounding) ExpectTensorsClose(r, y, 1e-4, 1e-4, "against the reference on rounded values");
  // The rounding changed the result (random values are rarely bfloat16s).
  EXPECT_GT(MaxAbsDiff(e, y), 1e-4);
}

Case ConvCase(const std::string& name, int64_t c, int64_t m, int64_t group, int64_t k, int64_t hw,
              uint32_t seed) {
  Case cc;
  cc.name = name;
  cc.x_shape = {1, c, hw, hw};
  cc.weights.emplace_back("w", RandomFloats({m, c / group, k, k}, seed));
  cc.biases.emplace_back("b", RandomFloats({m}, seed + 1));
  cc.graph.Input("x", pb::kFloat, cc.x_shape)
      .Node("Conv", {"x", "w", "b"}, {"y"},
            {AttrInt("group", group), AttrInts("pads", {k / 2, k / 2, k / 2, k / 2})}, "conv")
      .Output("y");
  return cc;
}

TEST(CpuBf16Test, ConvolutionPaths) {
  uint32_t seed = 1;
  for (Case c : {ConvCase("pointwise", 32, 48, 1, 1, 14, 10), ConvCase("spatial", 16, 32, 1, 3, 12, 20),
                 ConvCase("grouped", 16, 32, 4, 3, 9, 40)}) {
    ExpectBf16Products(c, seed++);
  }
  Case depthwise = ConvCase("depthwise", 32, 32, 32, 3, 10, 30);
  depthwise.stays_float32 = true;
  ExpectBf16Products(depthwise, seed++);
}

TEST(CpuBf16Test, ConvChainsAndSequences) {
  {
    // Conv + Add (residual input) + Relu as one kernel.
    Case c = ConvCase("conv relu", 16, 16, 1, 3, 10, 50);
    c.graph = GraphBuilder("g");
    c.graph.Input("x", pb::kFloat, c.x_shape)
        .Node("Conv", {"x", "w", "b"}, {"a"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv")
        .Node("Relu", {"a"}, {"y"}, {}, "relu")
        .Output("y");
    ExpectBf16Products(c, 51);
  }
  {
    // Two Convs in a row: the value between them stays bfloat16.
    Case c;
    c.name = "sequence";
    c.exact_rounding = false;
    c.x_shape = {1, 16, 12, 12};
    c.weights.emplace_back("w1", RandomFloats({32, 16, 1, 1}, 60));
    c.weights.emplace_back("w2", RandomFloats({32, 32, 3, 3}, 61, -0.2f, 0.2f));
    c.graph.Input("x", pb::kFloat, c.x_shape)
        .Node("Conv", {"x", "w1"}, {"a"}, {}, "first")
        .Node("Relu", {"a"}, {"a1"}, {}, "relu1")
        .Node("Conv", {"a1", "w2"}, {"b"}, {AttrInts("pads", {1, 1, 1, 1})}, "second")
        .Node("Relu", {"b"}, {"y"}, {}, "relu2")
        .Output("y");
    ExpectBf16Products(c, 62);
  }
}

TEST(CpuBf16Test, SequencesWithInnerResidualsAndChannelShuffles) {
  {
    // A bottleneck block whose residual is the result of its first stage.
    Case c;
    c.name = "inner residual";
    c.exact_rounding = false;
    c.x_shape = {1, 16, 10, 10};
    c.weights.emplace_back("w1", RandomFloats({32, 16, 1, 1}, 100));
    c.weights.emplace_back("w2", RandomFloats({16, 32, 3, 3}, 101, -0.2f, 0.2f));
    c.weights.emplace_back("w3", RandomFloats({32, 16, 1, 1}, 102));
    c.graph.Input("x", pb::kFloat, c.x_shape)
        .Node("Conv", {"x", "w1"}, {"a"}, {}, "c1")
        .Node("Relu", {"a"}, {"r1"}, {}, "relu1")
        .Node("Conv", {"r1", "w2"}, {"b"}, {AttrInts("pads", {1, 1, 1, 1})}, "c2")
        .Node("Relu", {"b"}, {"r2"}, {}, "relu2")
        .Node("Conv", {"r2", "w3"}, {"d"}, {}, "c3")
        .Node("Add", {"d", "r1"}, {"s"}, {}, "add")
        .Node("Relu", {"s"}, {"y"}, {}, "relu3")
        .Output("y");
    ExpectBf16Products(c, 103);
  }
  {
    // A ShuffleNet unit: grouped Conv, channel shuffle, depthwise Conv,
    // grouped Conv, residual.
    const int64_t ch = 12, hw = 7;
    Case c;
    c.name = "channel shuffle";
    c.exact_rounding = false;
    c.x_shape = {1, ch, hw, hw};
    c.weights.emplace_back("g1", RandomFloats({ch, ch / 3, 1, 1}, 110));
    c.weights.emplace_back("dw", RandomFloats({ch, 1, 3, 3}, 111));
    c.weights.emplace_back("g2", RandomFloats({ch, ch / 3, 1, 1}, 112));
    c.graph.Input("x", pb::kFloat, c.x_shape)
        .Initializer(InitializerFrom("split", Int64s({5}, {1, 3, ch / 3, hw, hw})))
        .Initializer(InitializerFrom("join", Int64s({4}, {1, ch, hw, hw})))
        .Node("Conv", {"x", "g1"}, {"a"}, {AttrInt("group", 3)}, "g1")
        .Node("Relu", {"a"}, {"ar"}, {}, "relu1")
        .Node("Reshape", {"ar", "split"}, {"r5"}, {}, "split")
        .Node("Transpose", {"r5"}, {"t5"}, {AttrInts("perm", {0, 2, 1, 3, 4})}, "transpose")
        .Node("Reshape", {"t5", "join"}, {"sh"}, {}, "join")
        .Node("Conv", {"sh", "dw"}, {"d"}, {AttrInt("group", ch), AttrInts("pads", {1, 1, 1, 1})}, "dw")
        .Node("Conv", {"d", "g2"}, {"b"}, {AttrInt("group", 3)}, "g2")
        .Node("Sum", {"b", "x"}, {"s"}, {}, "sum")
        .Node("Relu", {"s"}, {"y"}, {}, "relu2")
        .Output("y");
    ExpectBf16Products(c, 113);
  }
}

TEST(CpuBf16Test, PooledJoinsOfShuffleNetUnitsRunFused) {
  // A stem Conv, then a ShuffleNet stride-2 unit (its input pooled and
  // joined to the branch's result) and a Conv after it: one sequence in
  // bfloat16, no node-by-node run.
  const int64_t ch = 16, hw = 8;
  Case c;
  c.name = "pooled join";
  c.exact_rounding = false;
  c.x_shape = {1, ch, hw, hw};
  c.weights.emplace_back("stem", RandomFloats({ch, ch, 1, 1}, 120));
  c.weights.emplace_back("g1", RandomFloats({ch, ch / 4, 1, 1}, 121));
  c.weights.emplace_back("dw", RandomFloats({ch, 1, 3, 3}, 122));
  c.weights.emplace_back("g2", RandomFloats({ch, ch / 4, 1, 1}, 123));
  c.weights.emplace_back("next", RandomFloats({2 * ch, 2 * ch / 4, 1, 1}, 124));
  c.graph.Input("x", pb::kFloat, c.x_shape)
      .Initializer(InitializerFrom("split", Int64s({5}, {1, 4, ch / 4, hw, hw})))
      .Initializer(InitializerFrom("join", Int64s({4}, {1, ch, hw, hw})))
      .Node("Conv", {"x", "stem"}, {"st"}, {}, "stem")
      .Node("Relu", {"st"}, {"u"}, {}, "stem_relu")
      .Node("Conv", {"u", "g1"}, {"a"}, {AttrInt("group", 4)}, "g1")
      .Node("Relu", {"a"}, {"ar"}, {}, "relu1")
      .Node("Reshape", {"ar", "split"}, {"r5"}, {}, "split")
      .Node("Transpose", {"r5"}, {"t5"}, {AttrInts("perm", {0, 2, 1, 3, 4})}, "transpose")
      .Node("Reshape", {"t5", "join"}, {"sh"}, {}, "unshuffle")
      .Node("Conv", {"sh", "dw"}, {"d"},
            {AttrInt("group", ch), AttrInts("pads", {1, 1, 1, 1}), AttrInts("strides", {2, 2})}, "dw")
      .Node("Conv", {"d", "g2"}, {"b"}, {AttrInt("group", 4)}, "g2")
      .Node("AveragePool", {"u"}, {"pool"},
            {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1})},
            "avgpool")
      .Node("Concat", {"b", "pool"}, {"cat"}, {AttrInt("axis", 1)}, "concat")
      .Node("Relu", {"cat"}, {"v"}, {}, "relu2")
      .Node("Conv", {"v", "next"}, {"n"}, {AttrInt("group", 4)}, "next")
      .Node("Relu", {"n"}, {"y"}, {}, "relu3")
      .Output("y");
  const int64_t fallbacks = runner::ChainFallbackRuns();
  ExpectBf16Products(c, 125);
  EXPECT_EQ(runner::ChainFallbackRuns(), fallbacks);
}

TEST(CpuBf16Test, ConvTranspose) {
  Case c;
  c.name = "convtranspose";
  c.x_shape = {1, 16, 7, 7};
  c.weights.emplace_back("w", RandomFloats({16, 8, 3, 3}, 70));
  c.graph.Input("x", pb::kFloat, c.x_shape)
      .Node("ConvTranspose", {"x", "w"}, {"y"}, {AttrInts("strides", {2, 2})}, "deconv")
      .Output("y");
  ExpectBf16Products(c, 71);
}

TEST(CpuBf16Test, MatrixProducts) {
  {
    Case c;
    c.name = "matmul";
    c.x_shape = {2, 24, 64};
    c.weights.emplace_back("w", RandomFloats({64, 96}, 80));
    c.graph.Input("x", pb::kFloat, c.x_shape).Node("MatMul", {"x", "w"}, {"y"}, {}, "mm").Output("y");
    ExpectBf16Products(c, 81);
  }
  {
    // MatMul + bias: a transformer chain.
    Case c;
    c.name = "matmul bias";
    c.x_shape = {1, 32, 64};
    c.weights.emplace_back("w", RandomFloats({64, 128}, 82));
    c.biases.emplace_back("bias", RandomFloats({128}, 83));
    c.graph.Input("x", pb::kFloat, c.x_shape)
        .Node("MatMul", {"x", "w"}, {"m"}, {}, "mm")
        .Node("Add", {"m", "bias"}, {"y"}, {}, "add")
        .Output("y");
    ExpectBf16Products(c, 84);
  }
  {
    Case c;
    c.name = "gemm";
    c.x_shape = {16, 48};
    c.weights.emplace_back("w", RandomFloats({40, 48}, 85));
    c.biases.emplace_back("bias", RandomFloats({40}, 86));
    c.graph.Input("x", pb::kFloat, c.x_shape)
        .Node("Gemm", {"x", "w", "bias"}, {"y"}, {AttrInt("transB", 1)}, "gemm")
        .Output("y");
    ExpectBf16Products(c, 87);
  }
}

TEST(CpuBf16Test, FedWeightsStayFloat32) {
  // A MatMul whose B is an input is not a model's weights: float32.
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{8, 32})
      .Input("w", pb::kFloat, std::vector<int64_t>{32, 16})
      .Node("MatMul", {"x", "w"}, {"y"}, {}, "mm")
      .Output("y");
  Feeds feeds = {{"x", RandomFloats({8, 32}, 90)}, {"w", RandomFloats({32, 16}, 91)}};
  auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), feeds);
  auto bf16 = RunGraphOn(runner::Backend::kCpu, g.Build(), feeds, 18, 1, /*bf16=*/true);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  ExpectTensorsClose((*ref)[0].tensor(), (*bf16)[0].tensor(), 1e-5, 1e-5, "y");
}

}  // namespace
}  // namespace onnxkit::testing
