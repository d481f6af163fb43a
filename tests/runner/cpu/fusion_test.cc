// Conv chains the cpu backend fuses (runner/fusion.h): each chain shape on
// each convolution path (plain pointwise, depthwise, spatial) against the
// reference kernels; that the chain really runs as one step; the cases that
// must not fuse; fused kernels falling back node by node; and runs that
// feed an initializer the fused kernel treated as constant.
#include <omp.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/cpu/conv.h"
#include "runner/cpu/conv_common.h"
#include "runner/session.h"
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


// A convolution geometry: channels in and out, group, kernel, image size.
struct ConvCase {
  std::string name;
  int64_t c, m, group, k, hw;
};

const ConvCase kCases[] = {
    {"pointwise", 8, 16, 1, 1, 12},  // 144 positions: plain layout, post-ops applied by the kernel
    {"depthwise", 16, 16, 16, 3, 9},
    {"spatial", 5, 16, 1, 3, 7},
    {"small_pointwise", 16, 16, 1, 1, 5},  // 25 positions: oneDNN's layout
    {"grouped_pointwise", 16, 24, 4, 1, 12},  // oneDNN's layout at any size
};

// Adds x -> Conv (weights w, bias b) -> "conv" to `g`.
void AddConv(GraphBuilder& g, const ConvCase& cc, bool bias, uint32_t seed) {
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, cc.c, cc.hw, cc.hw});
  g.Initializer(InitializerFrom("w", RandomFloats({cc.m, cc.c / cc.group, cc.k, cc.k}, seed)));
  std::vector<std::string> inputs = {"x", "w"};
  if (bias) {
    g.Initializer(InitializerFrom("b", RandomFloats({cc.m}, seed + 1)));
    inputs.push_back("b");
  }
  int64_t p = cc.k / 2;
  g.Node("Conv", inputs, {"conv"}, {AttrInt("group", cc.group), AttrInts("pads", {p, p, p, p})}, "conv");
}

// Adds BatchNormalization "bn" of `in` with random constant parameters.
void AddBatchNorm(GraphBuilder& g, const std::string& in, const std::string& out, int64_t m, uint32_t seed) {
  g.Initializer(InitializerFrom("scale", RandomFloats({m}, seed, 0.5f, 2.0f)))
      .Initializer(InitializerFrom("shift", RandomFloats({m}, seed + 1)))
      .Initializer(InitializerFrom("mean", RandomFloats({m}, seed + 2)))
      .Initializer(InitializerFrom("var", RandomFloats({m}, seed + 3, 0.1f, 3.0f)))
      .Node("BatchNormalization", {in, "scale", "shift", "mean", "var"}, {out}, {AttrFloat("epsilon", 1e-3f)},
            "bn");
}

// Adds BatchNormalization `out` of `in` with random constant parameters
// named after `out`.
void AddBatchNormNamed(GraphBuilder& g, const std::string& in, const std::string& out, int64_t m, uint32_t seed) {
  g.Initializer(InitializerFrom(out + "_scale", RandomFloats({m}, seed, 0.5f, 2.0f)))
      .Initializer(InitializerFrom(out + "_shift", RandomFloats({m}, seed + 1)))
      .Initializer(InitializerFrom(out + "_mean", RandomFloats({m}, seed + 2)))
      .Initializer(InitializerFrom(out + "_var", RandomFloats({m}, seed + 3, 0.1f, 3.0f)))
      .Node("BatchNormalization", {in, out + "_scale", out + "_shift", out + "_mean", out + "_var"}, {out}, {}, out);
}

std::vector<int64_t> OutShape(const ConvCase& cc) { return {1, cc.m, cc.hw, cc.hw}; }

struct Result {
  std::vector<runner::Tensor> outputs;
  std::vector<std::string> ran;  // node names reported per run, in order
};

absl::StatusOr<Result> Run(const pb::GraphProto& graph, runner::Backend backend, const Feeds& feeds,
                           int64_t opset = 18, int64_t ir_version = 9, int threads = 1) {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(graph, opset, ir_version);
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

// Runs `graph` on both backends: the outputs agree and the cpu backend
// reports the nodes `cpu_ran` (a fused chain once, under its Conv).
// `node_by_node`: the fused kernels are expected to fall back (run their
// chain node by node) rather than run fused.
void ExpectFused(const pb::GraphProto& graph, const Feeds& feeds, const std::vector<std::string>& cpu_ran,
                 int64_t opset = 18, bool node_by_node = false, double tolerance = 1e-4) {
  auto ref = Run(graph, runner::Backend::kReference, feeds, opset);
  int64_t fallbacks = runner::ChainFallbackRuns();
  auto cpu = Run(graph, runner::Backend::kCpu, feeds, opset);
  EXPECT_EQ(runner::ChainFallbackRuns() > fallbacks, node_by_node);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_EQ(ref->outputs.size(), cpu->outputs.size());
  for (size_t i = 0; i < ref->outputs.size(); ++i) {
    ExpectTensorsClose(ref->outputs[i], cpu->outputs[i], tolerance, tolerance, "output " + std::to_string(i));
  }
  EXPECT_EQ(cpu->ran, cpu_ran);
}

TEST(CpuFusionTest, ConvBatchNormRelu) {
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name);
    for (bool bias : {false, true}) {
      GraphBuilder g("g");
      AddConv(g, cc, bias, 1);
      AddBatchNorm(g, "conv", "norm", cc.m, 10);
      g.Node("Relu", {"norm"}, {"y"}, {}, "relu").Output("y");
      ExpectFused(g.Build(), {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 2)}}, {"conv"});
    }
  }
}

TEST(CpuFusionTest, ConvReluAddAndConvAddRelu) {
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name);
    for (bool add_first : {false, true}) {
      for (bool residual_first : {false, true}) {
        GraphBuilder g("g");
        AddConv(g, cc, true, 3);
        g.Input("r", pb::kFloat, OutShape(cc));
        std::string first = add_first ? "Add" : "Relu";
        auto add_inputs = [&](const std::string& v) {
          return residual_first ? std::vector<std::string>{"r", v} : std::vector<std::string>{v, "r"};
        };
        if (add_first) {
          g.Node("Add", add_inputs("conv"), {"t"}, {}, "add").Node("Relu", {"t"}, {"y"}, {}, "relu");
        } else {
          g.Node("Relu", {"conv"}, {"t"}, {}, "relu").Node("Add", add_inputs("t"), {"y"}, {}, "add");
        }
        g.Output("y");
        ExpectFused(
            g.Build(),
            {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 4)}, {"r", RandomFloats(OutShape(cc), 5, -2, 2)}},
            {"conv"});
      }
    }
  }
}

TEST(CpuFusionTest, BatchNormActivationAddActivationAndSum) {
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name);
    GraphBuilder g("g");
    AddConv(g, cc, false, 6);
    AddBatchNorm(g, "conv", "norm", cc.m, 20);
    g.Input("r", pb::kFloat, OutShape(cc))
        .Node("LeakyRelu", {"norm"}, {"a"}, {AttrFloat("alpha", 0.2f)}, "leaky")
        .Node("Sum", {"r", "a"}, {"s"}, {}, "sum")
        .Node("Relu", {"s"}, {"y"}, {}, "relu")
        .Output("y");
    ExpectFused(
        g.Build(),
        {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 7)}, {"r", RandomFloats(OutShape(cc), 8, -2, 2)}},
        {"conv"});
  }
}

TEST(CpuFusionTest, PerChannelMulAndAddFoldIntoTheWeights) {
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name);
    // Scale and shift as [M, 1, 1], [1, M, 1, 1] and scalars, in both operand orders.
    GraphBuilder g("g");
    AddConv(g, cc, true, 80);
    g.Initializer(InitializerFrom("s1", RandomFloats({cc.m, 1, 1}, 81, 0.5f, 2.0f)))
        .Initializer(InitializerFrom("t1", RandomFloats({1, cc.m, 1, 1}, 82)))
        .Initializer(InitializerFrom("s2", Floats({}, {1.5f})))
        .Initializer(InitializerFrom("t2", Floats({1}, {-0.25f})))
        .Node("Mul", {"conv", "s1"}, {"a"}, {}, "mul1")
        .Node("Add", {"t1", "a"}, {"a2"}, {}, "add1")
        .Node("Mul", {"s2", "a2"}, {"c"}, {}, "mul2")
        .Node("Add", {"c", "t2"}, {"d"}, {}, "add2")
        .Node("Relu", {"d"}, {"y"}, {}, "relu")
        .Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 83)}}, {"conv"});
  }
  {
    // A constant that varies along the image: the chain runs node by node.
    const ConvCase& cc = kCases[2];
    GraphBuilder g("g");
    AddConv(g, cc, true, 84);
    g.Initializer(InitializerFrom("s", RandomFloats({cc.m, cc.hw, 1}, 85)))
        .Node("Mul", {"conv", "s"}, {"y"}, {}, "mul")
        .Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 86)}}, {"conv"}, 18,
                /*node_by_node=*/true);
  }
  {
    // A fed operand is a residual, not a fold.
    const ConvCase& cc = kCases[2];
    GraphBuilder g("g");
    AddConv(g, cc, true, 87);
    g.Input("r", pb::kFloat, OutShape(cc)).Node("Add", {"conv", "r"}, {"y"}, {}, "add").Output("y");
    ExpectFused(g.Build(),
                {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 88)}, {"r", RandomFloats(OutShape(cc), 89)}},
                {"conv"});
  }
}

TEST(CpuFusionTest, BatchNormalizationMulAddActivationRunAsOnePass) {
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{2, 6, 5, 7}, {3, 6}, {1, 6, 11}, {1, 6, 300, 300}}) {
    SCOPED_TRACE(shape.size());
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
    ExpectFused(g.Build(), {{"x", RandomFloats(shape, 93, -3, 3)}}, {"bn"});
  }
  {
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 4, 3, 3});
    AddBatchNorm(g, "x", "n", 4, 94);
    g.Node("Clip", {"n"}, {"y"}, {AttrFloat("min", -0.5f), AttrFloat("max", 0.5f)}, "clip").Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 4, 3, 3}, 95, -3, 3)}}, {"bn"}, /*opset=*/10);
  }
  {
    // A Mul whose constant varies along the image: node by node.
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 4, 3, 3});
    AddBatchNorm(g, "x", "n", 4, 96);
    g.Initializer(InitializerFrom("s", RandomFloats({4, 3, 3}, 97)))
        .Node("Mul", {"n", "s"}, {"a"}, {}, "mul")
        .Node("Relu", {"a"}, {"y"}, {}, "relu")
        .Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 4, 3, 3}, 98)}}, {"bn"}, 18, /*node_by_node=*/true);
  }
  {
    // A BatchNormalization alone keeps its own kernel; a fed Mul operand ends the chain.
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 4, 3, 3})
        .Input("s", pb::kFloat, std::vector<int64_t>{4, 1, 1});
    AddBatchNorm(g, "x", "n", 4, 99);
    g.Node("Mul", {"n", "s"}, {"y"}, {}, "mul").Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 4, 3, 3}, 100)}, {"s", RandomFloats({4, 1, 1}, 101)}},
                {"bn", "mul"});
  }
}

// Concat of `parts` (channels each, batch 2 unless `shape` says otherwise)
// along `axis`, then BatchNormalization, Mul by a per-channel constant and
// Relu: DenseNet's pre-activation of its concatenated features.
pb::GraphProto ConcatAffineGraph(const std::vector<int64_t>& parts, int64_t axis, int64_t hw,
                                 bool concat_output = false) {
  GraphBuilder g("g");
  std::vector<std::string> names;
  int64_t m = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    g.Input(names.back(), pb::kFloat, std::vector<int64_t>{2, parts[i], hw, hw + 1});
    m += parts[i];
  }
  g.Node("Concat", names, {"cat"}, {AttrInt("axis", axis)}, "concat");
  AddBatchNorm(g, "cat", "n", m, 540);
  g.Initializer(InitializerFrom("s", RandomFloats({m, 1, 1}, 545, -2.0f, 2.0f)))
      .Node("Mul", {"n", "s"}, {"a"}, {}, "mul")
      .Node("Relu", {"a"}, {"y"}, {}, "relu")
      .Output("y");
  if (concat_output) g.Output("cat");
  return g.Build();
}

Feeds ConcatAffineFeeds(const std::vector<int64_t>& parts, int64_t hw, bool nonfinite) {
  Feeds feeds;
  for (size_t i = 0; i < parts.size(); ++i) {
    runner::Tensor x = RandomFloats({2, parts[i], hw, hw + 1}, 550 + static_cast<uint32_t>(i), -3, 3);
    if (nonfinite) {
      float* p = x.mutable_data<float>();
      p[0] = std::numeric_limits<float>::quiet_NaN();
      p[x.size() / 2] = std::numeric_limits<float>::infinity();
      p[x.size() - 1] = -std::numeric_limits<float>::infinity();
    }
    feeds.push_back({"x" + std::to_string(i), x});
  }
  return feeds;
}

TEST(CpuFusionTest, ConcatThenBatchNormalizationAndActivationRunAsOnePass) {
  // The pass reads each channel from its input: channels that do not line
  // up with any block, one input, a batch of two, NaN and infinities (which
  // must come out where the reference puts them), and a size that runs
  // the channels on both threads.
  for (const std::vector<int64_t>& parts :
       {std::vector<int64_t>{5, 3, 16}, {7}, {1, 1, 1, 1, 30}, {32, 32, 32, 32}}) {
    for (int64_t hw : {3, 24}) {
      for (bool nonfinite : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "parts " << parts.size() << " hw " << hw << " nonfinite " << nonfinite);
        ExpectFused(ConcatAffineGraph(parts, 1, hw), ConcatAffineFeeds(parts, hw, nonfinite), {"concat"});
        const Feeds feeds = ConcatAffineFeeds(parts, hw, nonfinite);
        auto ref = testing::Run(ConcatAffineGraph(parts, 1, hw), runner::Backend::kReference, feeds);
        auto cpu =
            testing::Run(ConcatAffineGraph(parts, 1, hw), runner::Backend::kCpu, feeds, 18, 9, /*threads=*/2);
        ASSERT_TRUE(ref.ok()) << ref.status();
        ASSERT_TRUE(cpu.ok()) << cpu.status();
        ExpectTensorsClose(ref->outputs[0], cpu->outputs[0], 1e-4, 1e-4, "two threads");
      }
    }
  }
  // The channels' axis counted from the end: fused too.
  ExpectFused(ConcatAffineGraph({4, 6}, -3, 5), ConcatAffineFeeds({4, 6}, 5, false), {"concat"});
  // A Concat along another axis: the chain runs node by node (the
  // BatchNormalization then sees the joined channels of one input).
  {
    GraphBuilder g("g");
    g.Input("x0", pb::kFloat, std::vector<int64_t>{1, 4, 3, 5})
        .Input("x1", pb::kFloat, std::vector<int64_t>{1, 4, 3, 5});
    g.Node("Concat", {"x0", "x1"}, {"cat"}, {AttrInt("axis", 2)}, "concat");
    AddBatchNorm(g, "cat", "n", 4, 560);
    g.Node("Relu", {"n"}, {"y"}, {}, "relu").Output("y");
    ExpectFused(
        g.Build(),
        {{"x0", RandomFloats({1, 4, 3, 5}, 561, -3, 3)}, {"x1", RandomFloats({1, 4, 3, 5}, 562, -3, 3)}},
        {"concat"}, 18, /*node_by_node=*/true);
  }
  // The joined features also a graph output: the Concat runs on its own.
  ExpectFused(ConcatAffineGraph({4, 6}, 1, 5, /*concat_output=*/true), ConcatAffineFeeds({4, 6}, 5, false),
              {"concat", "bn"});
}

TEST(CpuFusionTest, ClipWithInputsAndWithAttributes) {
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name);
    {
      GraphBuilder g("g");
      AddConv(g, cc, true, 9);
      g.Initializer(InitializerFrom("lo", Floats({}, {-0.25f})))
          .Initializer(InitializerFrom("hi", Floats({}, {0.5f})))
          .Node("Clip", {"conv", "lo", "hi"}, {"y"}, {}, "clip")
          .Output("y");
      ExpectFused(g.Build(), {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 10)}}, {"conv"});
    }
    {
      GraphBuilder g("g");
      AddConv(g, cc, true, 11);
      g.Initializer(InitializerFrom("hi", Floats({}, {0.5f})))
          .Node("Clip", {"conv", "", "hi"}, {"y"}, {}, "clip")
          .Output("y");
      ExpectFused(g.Build(), {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 12)}}, {"conv"});
    }
    {
      GraphBuilder g("g");
      AddConv(g, cc, true, 13);
      g.Node("Clip", {"conv"}, {"y"}, {AttrFloat("min", 0.0f), AttrFloat("max", 0.3f)}, "clip").Output("y");
      ExpectFused(g.Build(), {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 14)}}, {"conv"}, /*opset=*/10);
    }
  }
}

TEST(CpuFusionTest, ClipWithCrossedBoundsRunsNodeByNode) {
  // min > max gives max everywhere: the fused kernel falls back, still one step.
  const ConvCase& cc = kCases[0];
  GraphBuilder g("g");
  AddConv(g, cc, true, 15);
  g.Initializer(InitializerFrom("lo", Floats({}, {0.5f})))
      .Initializer(InitializerFrom("hi", Floats({}, {-0.5f})))
      .Node("Clip", {"conv", "lo", "hi"}, {"y"}, {}, "clip")
      .Output("y");
  ExpectFused(g.Build(), {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 16)}}, {"conv"}, 18,
              /*node_by_node=*/true);
}

TEST(CpuFusionTest, BroadcastResidualRunsNodeByNode) {
  const ConvCase& cc = kCases[2];
  GraphBuilder g("g");
  AddConv(g, cc, true, 17);
  g.Input("r", pb::kFloat, std::vector<int64_t>{1, cc.m, 1, 1})
      .Node("Relu", {"conv"}, {"t"}, {}, "relu")
      .Node("Add", {"t", "r"}, {"y"}, {}, "add")
      .Output("y");
  ExpectFused(g.Build(),
              {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 18)}, {"r", RandomFloats({1, cc.m, 1, 1}, 19)}},
              {"conv"}, 18, /*node_by_node=*/true);
}

TEST(CpuFusionTest, ValuesUsedTwiceOrReturnedAreNotFused) {
  const ConvCase& cc = kCases[0];
  Feeds feeds = {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 20)}};
  {
    // conv feeds Relu and is a graph output: nothing fuses.
    GraphBuilder g("g");
    AddConv(g, cc, true, 21);
    g.Node("Relu", {"conv"}, {"y"}, {}, "relu").Output("y").Output("conv");
    ExpectFused(g.Build(), feeds, {"conv", "relu"});
  }
  {
    // t feeds both Add inputs: Conv+Relu fuse, the Add stays.
    GraphBuilder g("g");
    AddConv(g, cc, true, 22);
    g.Node("Relu", {"conv"}, {"t"}, {}, "relu").Node("Add", {"t", "t"}, {"y"}, {}, "add").Output("y");
    ExpectFused(g.Build(), feeds, {"conv", "add"});
  }
  {
    // conv has two consumers.
    GraphBuilder g("g");
    AddConv(g, cc, true, 23);
    g.Node("Relu", {"conv"}, {"a"}, {}, "relu")
        .Node("Sigmoid", {"conv"}, {"s"}, {}, "sigmoid")
        .Node("Add", {"a", "s"}, {"y"}, {}, "add")
        .Output("y");
    ExpectFused(g.Build(), feeds, {"conv", "relu", "sigmoid", "add"});
  }
}

TEST(CpuFusionTest, BatchNormThatCannotFoldIsNotFused) {
  const ConvCase& cc = kCases[2];
  Feeds feeds = {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 24)}};
  {
    // A fed scale: not constant.
    GraphBuilder g("g");
    AddConv(g, cc, true, 25);
    g.Input("scale", pb::kFloat, std::vector<int64_t>{cc.m})
        .Initializer(InitializerFrom("shift", RandomFloats({cc.m}, 26)))
        .Initializer(InitializerFrom("mean", RandomFloats({cc.m}, 27)))
        .Initializer(InitializerFrom("var", RandomFloats({cc.m}, 28, 0.5f, 1.5f)))
        .Node("BatchNormalization", {"conv", "scale", "shift", "mean", "var"}, {"n"}, {}, "bn")
        .Node("Relu", {"n"}, {"y"}, {}, "relu")
        .Output("y");
    Feeds f = feeds;
    f.emplace_back("scale", RandomFloats({cc.m}, 29));
    ExpectFused(g.Build(), f, {"conv", "bn", "relu"});
  }
  {
    // Training mode (opset 14+) uses the batch's statistics.
    GraphBuilder g("g");
    AddConv(g, cc, true, 30);
    AddBatchNorm(g, "conv", "n", cc.m, 31);
    g.graph().node.back().attribute.push_back(AttrInt("training_mode", 1));
    g.Node("Relu", {"n"}, {"y"}, {}, "relu").Output("y");
    ExpectFused(g.Build(), feeds, {"conv", "bn", "relu"});
  }
}

TEST(CpuFusionTest, FeedingAnInitializerTheChainFoldedUsesTheFedValue) {
  // IR 3: initializers are graph inputs too. Runs that do not feed them use
  // the fused kernel with the BatchNormalization folded; a run feeding new
  // weights must see them.
  const ConvCase& cc = kCases[2];
  GraphBuilder g("g");
  AddConv(g, cc, true, 32);
  AddBatchNorm(g, "conv", "n", cc.m, 33);
  g.Node("Relu", {"n"}, {"y"}, {}, "relu").Output("y");
  pb::GraphProto graph = g.Build();
  for (const pb::TensorProto& t : graph.initializer) {
    pb::ValueInfoProto in = MakeValueInfo(t.name, pb::kFloat, t.dims);
    graph.input.push_back(std::move(in));
  }
  runner::Tensor x = RandomFloats({1, cc.c, cc.hw, cc.hw}, 34);
  runner::Tensor w2 = RandomFloats({cc.m, cc.c, cc.k, cc.k}, 35);
  runner::Tensor mean2 = RandomFloats({cc.m}, 36, 2, 3);
  ExpectRepeatedRunsMatch(graph, {{{"x", x}}, {{"x", x}, {"w", w2}}, {{"x", x}, {"mean", mean2}}, {{"x", x}}},
                          1e-4,
                          /*opset=*/9, /*ir_version=*/3);
}

// Adds Conv `name` of `in` (c -> m channels, group, k x k, stride) with
// constant weights and bias.
void AddStage(GraphBuilder& g, const std::string& name, const std::string& in, const std::string& out,
              int64_t c, int64_t m, int64_t group, int64_t k, int64_t stride, uint32_t seed) {
  g.Initializer(InitializerFrom(name + "_w", RandomFloats({m, c / group, k, k}, seed, -0.5f, 0.5f)))
      .Initializer(InitializerFrom(name + "_b", RandomFloats({m}, seed + 1)));
  int64_t p = k / 2;
  g.Node("Conv", {in, name + "_w", name + "_b"}, {out},
         {AttrInt("group", group), AttrInts("pads", {p, p, p, p}), AttrInts("strides", {stride, stride})},
         name);
}

// An inverted residual block (expand 1x1 + Clip, depthwise 3x3 + Clip,
// project 1x1 + residual Add), then a second block with stride 2 and
// BatchNormalization: one sequence, or two when the first block's result is
// also a graph output.
pb::GraphProto InvertedResidualGraph(int64_t c, int64_t hw, bool block_output = false) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw})
      .Initializer(InitializerFrom("lo", Floats({}, {0.0f})))
      .Initializer(InitializerFrom("hi", Floats({}, {6.0f})));
  AddStage(g, "expand", "x", "e", c, 6 * c, 1, 1, 1, 40);
  g.Node("Clip", {"e", "lo", "hi"}, {"e6"}, {}, "clip1");
  AddStage(g, "dw", "e6", "d", 6 * c, 6 * c, 6 * c, 3, 1, 42);
  g.Node("Clip", {"d", "lo", "hi"}, {"d6"}, {}, "clip2");
  AddStage(g, "project", "d6", "p", 6 * c, c, 1, 1, 1, 44);
  g.Node("Add", {"x", "p"}, {"block"}, {}, "add");
  AddStage(g, "expand2", "block", "f", c, 4 * c, 1, 1, 1, 46);
  AddBatchNorm(g, "f", "fn", 4 * c, 48);
  g.Node("Relu", {"fn"}, {"f6"}, {}, "relu");
  AddStage(g, "dw2", "f6", "y", 4 * c, 4 * c, 4 * c, 3, 2, 50);
  g.Output("y");
  if (block_output) g.Output("block");
  return g.Build();
}

TEST(CpuFusionTest, ConvSequencesKeepBlockedLayoutsBetweenConvolutions) {
  for (int64_t c : {8, 12}) {     // 12: channel counts that do not fill 16-channel blocks
    for (int64_t hw : {14, 5}) {  // 5: small images
      SCOPED_TRACE(::testing::Message() << "c " << c << " hw " << hw);
      for (bool block_output : {false, true}) {
        ExpectFused(InvertedResidualGraph(c, hw, block_output), {{"x", RandomFloats({1, c, hw, hw}, 52)}},
                    block_output ? std::vector<std::string>{"expand", "expand2"}
                                 : std::vector<std::string>{"expand"});
      }
    }
  }
}

// A ResNet projection block as older exporters write it: the main branch
// (1x1, 3x3, 1x1 Convs, each with a BatchNormalization) and the shortcut
// (a strided 1x1 Conv and its BatchNormalization) meet in a Sum, then Relu.
pb::GraphProto ProjectionBlockGraph(int64_t c, int64_t hw, int64_t stride) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
  auto conv_bn = [&](const std::string& name, const std::string& in, int64_t cin, int64_t m, int64_t k,
                     int64_t s, uint32_t seed) {
    AddStage(g, name, in, name + "_c", cin, m, 1, k, s, seed);
    g.Initializer(InitializerFrom(name + "_scale", RandomFloats({m}, seed + 2, 0.5f, 2.0f)))
        .Initializer(InitializerFrom(name + "_shift", RandomFloats({m}, seed + 3)))
        .Initializer(InitializerFrom(name + "_mean", RandomFloats({m}, seed + 4)))
        .Initializer(InitializerFrom(name + "_var", RandomFloats({m}, seed + 5, 0.1f, 3.0f)))
        .Node("BatchNormalization",
              {name + "_c", name + "_scale", name + "_shift", name + "_mean", name + "_var"}, {name + "_n"},
              {AttrFloat("epsilon", 1e-5f)}, name + "_bn");
  };
  conv_bn("a", "x", c, c, 1, 1, 200);
  g.Node("Relu", {"a_n"}, {"a_r"}, {}, "a_relu");
  conv_bn("b", "a_r", c, c, 3, stride, 210);
  g.Node("Relu", {"b_n"}, {"b_r"}, {}, "b_relu");
  conv_bn("c", "b_r", c, 4 * c, 1, 1, 220);
  conv_bn("s", "x", c, 4 * c, 1, stride, 230);
  g.Node("Sum", {"c_n", "s_n"}, {"sum"}, {}, "sum").Node("Relu", {"sum"}, {"y"}, {}, "relu").Output("y");
  return g.Build();
}

TEST(CpuFusionTest, ProjectionBlocksOnTheGraphInputRunAsOneStep) {
  // The chain starts with the shortcut (it reads X), then the main branch
  // reads X again; the Sum takes the shortcut's result from inside it.
  for (int64_t stride : {1, 2}) {
    SCOPED_TRACE(stride);
    ExpectFused(ProjectionBlockGraph(8, 10, stride), {{"x", RandomFloats({1, 8, 10, 10}, 240)}}, {"s"},
                /*opset=*/9);
  }
}

TEST(CpuFusionTest, ConvSequencesRunWinogradOnLargeImagesWithBoundedInputs) {
  SmallConvWinograd winograd;
  // The block's 3x3 stride-1 Conv over a 28x28 image (784 positions) runs
  // as a Winograd convolution; 12 channels do not fill a 16-channel block;
  // stride 2 or a 20x20 image (400 positions) convolve directly.
  struct Case {
    int64_t c, hw, stride;
    bool winograd;
  };
  for (const Case& k : {Case{16, 28, 1, true}, Case{12, 28, 1, true}, Case{16, 28, 2, false},
                        Case{16, 20, 1, false}}) {
    SCOPED_TRACE(::testing::Message() << "c " << k.c << " hw " << k.hw << " stride " << k.stride);
    int64_t before = runner::cpu::WinogradConvolutionRuns();
    ExpectFused(ProjectionBlockGraph(k.c, k.hw, k.stride), {{"x", RandomFloats({1, k.c, k.hw, k.hw}, 250)}},
                {"s"}, /*opset=*/9);
    bool ran = runner::cpu::WinogradConvolutionRuns() > before;
    EXPECT_EQ(ran, k.winograd && runner::cpu::WinogradSupported());
  }
}

TEST(CpuFusionTest, NarrowConvolutionsDoNotRunWinograd) {
  // The product's gate: fewer than 64 output channels convolve directly.
  int64_t before = runner::cpu::WinogradConvolutionRuns();
  ExpectFused(ProjectionBlockGraph(16, 28, 1), {{"x", RandomFloats({1, 16, 28, 28}, 251)}}, {"s"},
              /*opset=*/9);
  EXPECT_EQ(runner::cpu::WinogradConvolutionRuns(), before);
}

TEST(CpuFusionTest, WideConvolutionsRunWinogradOnSmallImages) {
  // The product's gates: 256 output channels run as Winograd from 7x7
  // images on, 128 only from 28x28.
  struct Case {
    int64_t c, hw;
    bool winograd;
  };
  for (const Case& k : {Case{256, 7, true}, Case{256, 6, false}, Case{128, 14, false}}) {
    SCOPED_TRACE(::testing::Message() << "c " << k.c << " hw " << k.hw);
    int64_t before = runner::cpu::WinogradConvolutionRuns();
    // Sums of 256 x 9 products, three Convs deep: float rounding (the
    // direct convolution's too) reaches about 1e-3.
    ExpectFused(ProjectionBlockGraph(k.c, k.hw, 1), {{"x", RandomFloats({1, k.c, k.hw, k.hw}, 252)}}, {"s"},
                /*opset=*/9, /*node_by_node=*/false, /*tolerance=*/3e-3);
    bool ran = runner::cpu::WinogradConvolutionRuns() > before;
    EXPECT_EQ(ran, k.winograd && runner::cpu::WinogradSupported());
  }
}

TEST(CpuFusionTest, WideWinogradNeedsWideInputsOnTwoThreads) {
  // A 1x1 Conv to `in` channels, then a 3x3 one to 256 at 14x14: Winograd
  // on one thread whatever `in`; on two only from 256 input channels.
  struct Case {
    int64_t in;
    int threads;
    bool winograd;
  };
  for (const Case& k : {Case{192, 1, true}, Case{192, 2, false}, Case{256, 2, true}}) {
    SCOPED_TRACE(::testing::Message() << "in " << k.in << " threads " << k.threads);
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 16, 14, 14});
    AddStage(g, "a", "x", "a_c", 16, k.in, 1, 1, 1, 260);
    g.Node("Relu", {"a_c"}, {"a_r"}, {}, "a_relu");
    AddStage(g, "b", "a_r", "b_c", k.in, 256, 1, 3, 1, 262);
    g.Node("Relu", {"b_c"}, {"y"}, {}, "b_relu").Output("y");
    const pb::GraphProto graph = g.Build();
    const Feeds feeds = {{"x", RandomFloats({1, 16, 14, 14}, 264)}};
    auto ref = testing::Run(graph, runner::Backend::kReference, feeds);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const int64_t before = runner::cpu::WinogradConvolutionRuns();
    auto cpu = testing::Run(graph, runner::Backend::kCpu, feeds, 18, 9, k.threads);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_EQ(cpu->ran, std::vector<std::string>{"a"});
    ExpectTensorsClose(ref->outputs[0], cpu->outputs[0], 3e-3, 3e-3, "y");
    EXPECT_EQ(runner::cpu::WinogradConvolutionRuns() > before,
              k.winograd && runner::cpu::WinogradSupported());
  }
}

// Two ResNet identity blocks, each y = Relu(x + C3(Relu(C2(Relu(C1(x))))))
// (1x1, 3x3, 1x1). `break_second`: a Sigmoid after the second block's 3x3
// Conv, which no chain takes.
pb::GraphProto IdentityBlocksGraph(int64_t c, int64_t hw, bool break_second = false) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
  std::string in = "x";
  for (int block = 1; block <= 2; ++block) {
    std::string p = "b" + std::to_string(block) + "_";
    uint32_t seed = 300 + 10 * static_cast<uint32_t>(block);
    AddStage(g, p + "c1", in, p + "a", c, c / 2, 1, 1, 1, seed);
    g.Node("Relu", {p + "a"}, {p + "ar"}, {}, p + "r1");
    AddStage(g, p + "c2", p + "ar", p + "b", c / 2, c / 2, 1, 3, 1, seed + 2);
    std::string mid = p + "br";
    g.Node("Relu", {p + "b"}, {mid}, {}, p + "r2");
    if (break_second && block == 2) {
      g.Node("Sigmoid", {mid}, {p + "bs"}, {}, p + "sig");
      mid = p + "bs";
    }
    AddStage(g, p + "c3", mid, p + "c", c / 2, c, 1, 1, 1, seed + 4);
    g.Node("Add", {p + "c", in}, {p + "s"}, {}, p + "add").Node("Relu", {p + "s"}, {p + "y"}, {}, p + "r3");
    in = p + "y";
  }
  g.Output(in);
  return g.Build();
}

// SiLU written as x * Sigmoid(x) (either operand order), and HardSwish (an
// op, or written as x * HardSigmoid(x) with alpha 1/6 and beta 1/2),
// after a Conv and its BatchNormalization run as the Conv's swish /
// hardswish post-op, on every convolution path; an EfficientNet-style
// sequence (expand 1x1 + SiLU or HardSwish,
// depthwise 3x3 + SiLU, project 1x1, residual Add) runs as one step; near
// misses (the Sigmoid's output also used elsewhere, a Mul by the Sigmoid of
// another value, HardSigmoid with another alpha) are not fused.
TEST(CpuFusionTest, SiluRunsAsASwishPostOp) {
  for (const ConvCase& cc : kCases) {
    for (bool swapped : {false, true}) {
      SCOPED_TRACE(cc.name + (swapped ? " swapped" : ""));
      GraphBuilder g("g");
      AddConv(g, cc, true, 20);
      AddBatchNorm(g, "conv", "norm", cc.m, 21);
      g.Node("Sigmoid", {"norm"}, {"s"}, {}, "sigmoid")
          .Node("Mul",
                swapped ? std::vector<std::string>{"s", "norm"} : std::vector<std::string>{"norm", "s"},
                {"y"}, {}, "mul")
          .Output("y");
      ExpectFused(g.Build(), {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 22, -3, 3)}}, {"conv"});
    }
    GraphBuilder g("g");
    AddConv(g, cc, true, 24);
    AddBatchNorm(g, "conv", "norm", cc.m, 25);
    g.Node("HardSwish", {"norm"}, {"y"}, {}, "act").Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 26, -3, 3)}}, {"conv"});
    // HardSwish written out (exports before opset 14): x * HardSigmoid(x)
    // with alpha 1/6 and beta 1/2, in either operand order.
    for (bool swapped : {false, true}) {
      GraphBuilder w("g");
      AddConv(w, cc, true, 27);
      w.Node("HardSigmoid", {"conv"}, {"h"}, {AttrFloat("alpha", 1.0f / 6), AttrFloat("beta", 0.5f)}, "gate")
          .Node("Mul",
                swapped ? std::vector<std::string>{"h", "conv"} : std::vector<std::string>{"conv", "h"},
                {"y"}, {}, "mul")
          .Output("y");
      ExpectFused(w.Build(), {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 28, -4, 4)}}, {"conv"}, 13);
    }
  }
  for (int64_t hw : {6, 20}) {
    SCOPED_TRACE(hw);
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 16, hw, hw});
    AddStage(g, "expand", "x", "e", 16, 64, 1, 1, 1, 23);
    if (hw == 6) {
      g.Node("HardSwish", {"e"}, {"ea"}, {}, "m1");
    } else {
      g.Node("Sigmoid", {"e"}, {"es"}, {}, "s1").Node("Mul", {"e", "es"}, {"ea"}, {}, "m1");
    }
    AddStage(g, "dw", "ea", "d", 64, 64, 64, 3, 1, 25);
    g.Node("Sigmoid", {"d"}, {"ds"}, {}, "s2").Node("Mul", {"ds", "d"}, {"da"}, {}, "m2");
    AddStage(g, "project", "da", "p", 64, 16, 1, 1, 1, 27);
    g.Node("Add", {"p", "x"}, {"y"}, {}, "add").Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 16, hw, hw}, 29, -2, 2)}}, {"expand"});
  }
  {
    // The Sigmoid's output is a graph output too: Conv, Sigmoid, Mul apart.
    GraphBuilder g("g");
    AddConv(g, kCases[2], true, 30);
    g.Node("Sigmoid", {"conv"}, {"s"}, {}, "sigmoid").Node("Mul", {"conv", "s"}, {"y"}, {}, "mul");
    g.Output("y").Output("s");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 5, 7, 7}, 31)}}, {"conv", "sigmoid", "mul"});
  }
  {
    // Double tensors: the chain runs node by node, the Mul reading the
    // Conv's result kept for it.
    GraphBuilder g("g");
    AddConv(g, kCases[2], true, 35);
    g.Node("Sigmoid", {"conv"}, {"s"}, {}, "sigmoid")
        .Node("Mul", {"s", "conv"}, {"y"}, {}, "mul")
        .Output("y");
    pb::GraphProto graph = g.Build();
    for (pb::TensorProto& t : graph.initializer) {
      std::string_view raw = t.raw_data.view();
      const float* p = reinterpret_cast<const float*>(raw.data());
      std::vector<double> d(p, p + raw.size() / sizeof(float));
      t.raw_data =
          Bytes::Own(std::string(reinterpret_cast<const char*>(d.data()), d.size() * sizeof(double)));
      t.data_type = pb::kDouble;
    }
    graph.input[0] = MakeValueInfo("x", pb::kDouble, std::vector<int64_t>{1, 5, 7, 7});
    graph.output[0] = MakeValueInfo("y", pb::kDouble, OutShape(kCases[2]));
    runner::Tensor x = RandomFloats({1, 5, 7, 7}, 36);
    std::vector<double> values(x.data<float>(), x.data<float>() + x.size());
    ExpectFused(graph, {{"x", MakeTensor<double>(pb::kDouble, {1, 5, 7, 7}, values)}}, {"conv"}, 18,
                /*node_by_node=*/true);
  }
  for (float alpha : {0.2f, 0.17f}) {
    // x * HardSigmoid(x) with another alpha: not HardSwish.
    GraphBuilder g("g");
    AddConv(g, kCases[2], true, 37);
    g.Node("HardSigmoid", {"conv"}, {"h"}, {AttrFloat("alpha", alpha)}, "gate")
        .Node("Mul", {"conv", "h"}, {"y"}, {}, "mul")
        .Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 5, 7, 7}, 38, -4, 4)}}, {"conv", "gate", "mul"});
  }
  {
    // x * Sigmoid(r): a gate, not SiLU.
    GraphBuilder g("g");
    AddConv(g, kCases[2], true, 32);
    g.Input("r", pb::kFloat, OutShape(kCases[2]));
    g.Node("Sigmoid", {"r"}, {"s"}, {}, "sigmoid").Node("Mul", {"conv", "s"}, {"y"}, {}, "mul").Output("y");
    ExpectFused(g.Build(),
                {{"x", RandomFloats({1, 5, 7, 7}, 33)}, {"r", RandomFloats(OutShape(kCases[2]), 34)}},
                {"conv", "sigmoid", "mul"});
  }
}

// Squeeze-and-excitation of `v` (c channels) into `out`: GlobalAveragePool,
// 1x1 Conv to `squeezed` channels, the activation `act` ("Relu",
// "HardSwish", "SiLU" or "HardSwishGate": the last two written out), 1x1
// Conv back, the gate ("Sigmoid" or "HardSigmoid"), Mul of v by the gate
// (`swapped`: the gate first).
void AddSqueezeExcite(GraphBuilder& g, const std::string& v, const std::string& out, int64_t c,
                      int64_t squeezed, const std::string& act, const std::string& gate, bool biases,
                      bool swapped, uint32_t seed) {
  g.Initializer(InitializerFrom(out + "_w1", RandomFloats({squeezed, c, 1, 1}, seed, -0.5f, 0.5f)))
      .Initializer(InitializerFrom(out + "_w2", RandomFloats({c, squeezed, 1, 1}, seed + 1, -0.5f, 0.5f)));
  std::vector<std::string> in1 = {out + "_p", out + "_w1"}, in2 = {out + "_a", out + "_w2"};
  if (biases) {
    g.Initializer(InitializerFrom(out + "_b1", RandomFloats({squeezed}, seed + 2)))
        .Initializer(InitializerFrom(out + "_b2", RandomFloats({c}, seed + 3)));
    in1.push_back(out + "_b1");
    in2.push_back(out + "_b2");
  }
  g.Node("GlobalAveragePool", {v}, {out + "_p"}, {}, out + "_pool")
      .Node("Conv", in1, {out + "_z"}, {}, out + "_squeeze");
  if (act == "Relu" || act == "HardSwish") {
    g.Node(act, {out + "_z"}, {out + "_a"}, {}, out + "_act");
  } else if (act == "SiLU") {
    g.Node("Sigmoid", {out + "_z"}, {out + "_s"}, {}, out + "_sig")
        .Node("Mul", {out + "_s", out + "_z"}, {out + "_a"}, {}, out + "_act");
  } else {
    g.Node("HardSigmoid", {out + "_z"}, {out + "_s"}, {AttrFloat("alpha", 1.0f / 6)}, out + "_sig")
        .Node("Mul", {out + "_z", out + "_s"}, {out + "_a"}, {}, out + "_act");
  }
  g.Node("Conv", in2, {out + "_e"}, {}, out + "_excite")
      .Node(gate, {out + "_e"}, {out + "_g"}, {}, out + "_gate")
      .Node("Mul",
            swapped ? std::vector<std::string>{out + "_g", v} : std::vector<std::string>{v, out + "_g"},
            {out}, {}, out + "_scale");
}

// EfficientNet's and MobileNetV3's blocks (expand 1x1 + activation,
// depthwise 3x3 + BatchNormalization + activation, squeeze-and-excitation,
// project 1x1, residual Add): one step, squeeze-and-excitation included, with
// every activation and gate, channels filling whole blocks of 16 or not,
// batches of two; also after a dense 3x3 Conv (oneDNN's layout). Near
// misses run apart: the scaled value also a graph output, no Conv after it,
// a squeeze Conv with padding.
TEST(CpuFusionTest, SqueezeExcitationRunsInsideConvSequences) {
  uint32_t seed = 900;
  struct Variant {
    std::string act, gate;
    int64_t c, batch;
    bool biases, swapped;
  };
  for (const Variant& v :
       {Variant{"SiLU", "Sigmoid", 32, 1, true, false}, Variant{"Relu", "HardSigmoid", 24, 2, true, true},
        Variant{"HardSwish", "Sigmoid", 40, 1, false, false},
        Variant{"HardSwishGate", "HardSigmoid", 16, 1, true, true}}) {
    for (int64_t hw : {7, 12}) {
      SCOPED_TRACE(v.act + " " + v.gate + " c " + std::to_string(v.c) + " hw " + std::to_string(hw));
      GraphBuilder g("g");
      g.Input("x", pb::kFloat, std::vector<int64_t>{v.batch, 8, hw, hw});
      AddStage(g, "expand", "x", "e", 8, v.c, 1, 1, 1, seed++);
      g.Node("Relu", {"e"}, {"ea"}, {}, "relu");
      AddStage(g, "dw", "ea", "d", v.c, v.c, v.c, 3, 1, seed++);
      AddBatchNormNamed(g, "d", "dn", v.c, seed++);
      g.Node("HardSwish", {"dn"}, {"da"}, {}, "act");
      AddSqueezeExcite(g, "da", "se", v.c, 8, v.act, v.gate, v.biases, v.swapped, seed++);
      AddStage(g, "project", "se", "p", v.c, 8, 1, 1, 1, seed++);
      g.Node("Add", {"p", "x"}, {"y"}, {}, "add").Output("y");
      ExpectFused(g.Build(), {{"x", RandomFloats({v.batch, 8, hw, hw}, seed++, -2, 2)}}, {"expand"}, 14);
    }
  }
  {
    // A grouped 3x3 Conv (8 channels a group, RegNet's), squeeze-and-
    // excitation, a 1x1 Conv.
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 16, 14, 14});
    AddStage(g, "c1", "x", "a", 16, 48, 1, 1, 1, seed++);
    g.Node("Relu", {"a"}, {"ar"}, {}, "relu1");
    AddStage(g, "grouped", "ar", "b", 48, 48, 6, 3, 1, seed++);
    g.Node("Relu", {"b"}, {"br"}, {}, "relu2");
    AddSqueezeExcite(g, "br", "se", 48, 4, "Relu", "Sigmoid", true, false, seed++);
    AddStage(g, "c2", "se", "y", 48, 16, 1, 1, 1, seed++);
    g.Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 16, 14, 14}, seed++)}}, {"c1"}, 14);
  }
  {
    // 1-D: a depthwise Conv over a sequence, squeeze-and-excitation, a
    // pointwise Conv (speech models' blocks).
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{2, 24, 50});
    g.Initializer(InitializerFrom("dw_w", RandomFloats({24, 1, 5}, seed++, -0.5f, 0.5f)))
        .Initializer(InitializerFrom("pw_w", RandomFloats({16, 24, 1}, seed++, -0.5f, 0.5f)))
        .Initializer(InitializerFrom("se_w1", RandomFloats({6, 24, 1}, seed++, -0.5f, 0.5f)))
        .Initializer(InitializerFrom("se_w2", RandomFloats({24, 6, 1}, seed++, -0.5f, 0.5f)))
        .Node("Conv", {"x", "dw_w"}, {"d"}, {AttrInt("group", 24), AttrInts("pads", {2, 2})}, "dw")
        .Node("Relu", {"d"}, {"da"}, {}, "relu")
        .Node("GlobalAveragePool", {"da"}, {"p"}, {}, "pool")
        .Node("Conv", {"p", "se_w1"}, {"z"}, {}, "squeeze")
        .Node("Relu", {"z"}, {"a"}, {}, "act")
        .Node("Conv", {"a", "se_w2"}, {"e"}, {}, "excite")
        .Node("Sigmoid", {"e"}, {"gate"}, {}, "gate")
        .Node("Mul", {"gate", "da"}, {"se"}, {}, "scale")
        .Node("Conv", {"se", "pw_w"}, {"y"}, {}, "pw")
        .Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({2, 24, 50}, seed++)}}, {"dw"}, 14);
  }
  {
    // A dense 3x3 Conv, squeeze-and-excitation, a 1x1 Conv.
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 8, 9, 9});
    AddStage(g, "c1", "x", "a", 8, 24, 1, 3, 1, seed++);
    g.Node("Relu", {"a"}, {"ar"}, {}, "relu");
    AddSqueezeExcite(g, "ar", "se", 24, 6, "Relu", "Sigmoid", true, false, seed++);
    AddStage(g, "c2", "se", "y", 24, 16, 1, 1, 1, seed++);
    g.Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 8, 9, 9}, seed++)}}, {"c1"}, 14);
  }
  // Near misses.
  for (int miss : {0, 1, 2}) {
    SCOPED_TRACE("near miss " + std::to_string(miss));
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 16, 7, 7});
    AddStage(g, "dw", "x", "d", 16, 16, 16, 3, 1, seed++);
    g.Node("Relu", {"d"}, {"da"}, {}, "relu");
    AddSqueezeExcite(g, "da", "se", 16, 4, "Relu", "HardSigmoid", true, false, seed++);
    if (miss == 0) {
      AddStage(g, "project", "se", "y", 16, 8, 1, 1, 1, seed++);
      g.Output("y").Output("se");
    } else if (miss == 1) {
      g.Output("se");
    } else {
      AddStage(g, "project", "se", "y", 16, 8, 1, 1, 1, seed++);
      g.Output("y");
    }
    pb::GraphProto graph = g.Build();
    if (miss == 2) {
      for (pb::NodeProto& n : graph.node) {
        if (n.name == "se_squeeze") n.attribute.push_back(AttrInts("pads", {0, 0, 0, 0}));
      }
      // Zero pads are no padding: it still fuses.
      ExpectFused(graph, {{"x", RandomFloats({1, 16, 7, 7}, seed)}}, {"dw"}, 14);
      for (pb::NodeProto& n : graph.node) {
        if (n.name == "se_squeeze") n.attribute.back() = AttrInts("pads", {1, 1, 1, 1});
        if (n.name == "se_excite") n.attribute.push_back(AttrInts("pads", {1, 1, 1, 1}));
      }
      // Padded 1x1 Convs: [1, 16, 5, 5] gates do not scale [1, 16, 7, 7].
      Feeds feeds = {{"x", RandomFloats({1, 16, 7, 7}, seed)}};
      auto ref = testing::Run(graph, runner::Backend::kReference, feeds, 14);
      auto cpu = testing::Run(graph, runner::Backend::kCpu, feeds, 14);
      EXPECT_FALSE(ref.ok());
      EXPECT_FALSE(cpu.ok());
      continue;
    }
    // The two 1x1 Convs and the Relu between them still make a sequence.
    std::vector<std::string> apart = {"dw", "se_pool", "se_squeeze", "se_gate", "se_scale"};
    if (miss == 0) apart.push_back("project");
    ExpectFused(graph, {{"x", RandomFloats({1, 16, 7, 7}, seed++)}}, apart, 14);
  }
}

TEST(CpuFusionTest, ConvSequencesRunOnThroughResidualBlocks) {
  SmallConvWinograd winograd;
  // The first block's output is the second's X and its residual: one
  // sequence runs both blocks, the residual kept in its stage's layout.
  // The second block adds onto the first block's result in place (nothing
  // reads it afterwards); the first block's residual is X, which it copies.
  for (int64_t hw : {7, 28}) {  // 28: the 3x3 Convs run as Winograd ones
    SCOPED_TRACE(hw);
    const int64_t before = runner::cpu::InPlaceResidualSums();
    ExpectFused(IdentityBlocksGraph(32, hw), {{"x", RandomFloats({1, 32, hw, hw}, 330)}}, {"b1_c1"});
    EXPECT_EQ(runner::cpu::InPlaceResidualSums(), before + 1);
  }
  // A node no chain takes inside the second block: the first chain ends
  // with the first block; the second block's Add joins its last Conv.
  ExpectFused(IdentityBlocksGraph(32, 8, /*break_second=*/true), {{"x", RandomFloats({1, 32, 8, 8}, 331)}},
              {"b1_c1", "b2_c1", "b2_sig", "b2_c3"});
}

// r = Relu(Conv(x)), then y = act(Conv(r) + r): the second Conv reads r
// both as its source and as its residual, which it may not add onto in
// place. `silu`: act is a SiLU (the backend's own pass), else a Relu.
pb::GraphProto SelfResidualGraph(int64_t c, int64_t hw, bool silu) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
  AddStage(g, "c1", "x", "a", c, c, 1, 3, 1, 900);
  g.Node("Relu", {"a"}, {"r"}, {}, "r1");
  AddStage(g, "c2", "r", "b", c, c, 1, 3, 1, 902);
  g.Node("Add", {"b", "r"}, {"s"}, {}, "add");
  if (silu) {
    g.Node("Sigmoid", {"s"}, {"sg"}, {}, "gate").Node("Mul", {"s", "sg"}, {"y"}, {}, "mul");
  } else {
    g.Node("Relu", {"s"}, {"y"}, {}, "r2");
  }
  return g.Output("y").Build();
}

// A stem (Conv, Relu) whose result r is a block's X and residual: 1x1,
// 3x3 and 1x1 Convs with Relus between, the Add of r and a SiLU (the
// backend's own pass, which adds r itself), then one more Conv.
pb::GraphProto OwnPassResidualGraph(int64_t c, int64_t hw) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
  AddStage(g, "stem", "x", "s", c, c, 1, 3, 1, 910);
  g.Node("Relu", {"s"}, {"r"}, {}, "stem_relu");
  AddStage(g, "c1", "r", "a", c, c / 2, 1, 1, 1, 912);
  g.Node("Relu", {"a"}, {"ar"}, {}, "r1");
  AddStage(g, "c2", "ar", "b", c / 2, c / 2, 1, 3, 1, 914);
  g.Node("Relu", {"b"}, {"br"}, {}, "r2");
  AddStage(g, "c3", "br", "c", c / 2, c, 1, 1, 1, 916);
  g.Node("Add", {"c", "r"}, {"sum"}, {}, "add")
      .Node("Sigmoid", {"sum"}, {"sg"}, {}, "gate")
      .Node("Mul", {"sum", "sg"}, {"z"}, {}, "mul");
  AddStage(g, "tail", "z", "y", c, c, 1, 1, 1, 918);
  return g.Output("y").Build();
}

TEST(CpuFusionTest, ResidualsTheConvolutionOrItsOwnPassReadsAreNotSummedInPlace) {
  SmallConvWinograd winograd;
  for (bool silu : {false, true}) {
    for (int64_t hw : {7, 28}) {
      SCOPED_TRACE(::testing::Message() << (silu ? "silu" : "relu") << " hw " << hw);
      const int64_t before = runner::cpu::InPlaceResidualSums();
      ExpectFused(SelfResidualGraph(32, hw, silu), {{"x", RandomFloats({1, 32, hw, hw}, 904)}}, {"c1"});
      EXPECT_EQ(runner::cpu::InPlaceResidualSums(), before);
    }
  }
  // Nor a residual the stage's own pass adds.
  for (int64_t hw : {7, 28}) {
    SCOPED_TRACE(::testing::Message() << "own pass hw " << hw);
    const int64_t before = runner::cpu::InPlaceResidualSums();
    ExpectFused(OwnPassResidualGraph(32, hw), {{"x", RandomFloats({1, 32, hw, hw}, 920)}}, {"stem"});
    EXPECT_EQ(runner::cpu::InPlaceResidualSums(), before);
  }
}

// Linear bottlenecks as MobileNetV2 and EfficientNet write them: a stem
// Conv with BatchNormalization and no activation, whose result is both the
// first block's X and its residual; that block's result (its residual Add)
// is the second block's X and residual. The second block's activations are
// SiLU written out (Sigmoid, Mul), `se`: with squeeze-and-excitation.
pb::GraphProto LinearBottlenecksGraph(int64_t c, int64_t hw, bool se) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw})
      .Initializer(InitializerFrom("lo", Floats({}, {0.0f})))
      .Initializer(InitializerFrom("hi", Floats({}, {6.0f})));
  AddStage(g, "stem", "x", "s", c, c, 1, 3, 1, 400);
  AddBatchNormNamed(g, "s", "s0", c, 402);
  AddStage(g, "e1", "s0", "e1c", c, 4 * c, 1, 1, 1, 404);
  g.Node("Clip", {"e1c", "lo", "hi"}, {"e1a"}, {}, "e1_clip");
  AddStage(g, "d1", "e1a", "d1c", 4 * c, 4 * c, 4 * c, 3, 1, 406);
  g.Node("Clip", {"d1c", "lo", "hi"}, {"d1a"}, {}, "d1_clip");
  AddStage(g, "p1", "d1a", "p1c", 4 * c, c, 1, 1, 1, 408);
  AddBatchNormNamed(g, "p1c", "p1n", c, 410);
  g.Node("Add", {"s0", "p1n"}, {"b1"}, {}, "add1");
  AddStage(g, "e2", "b1", "e2c", c, 4 * c, 1, 1, 1, 412);
  g.Node("Sigmoid", {"e2c"}, {"e2g"}, {}, "e2_gate").Node("Mul", {"e2c", "e2g"}, {"e2a"}, {}, "e2_mul");
  AddStage(g, "d2", "e2a", "d2c", 4 * c, 4 * c, 4 * c, 3, 1, 414);
  g.Node("Sigmoid", {"d2c"}, {"d2g"}, {}, "d2_gate").Node("Mul", {"d2g", "d2c"}, {"d2a"}, {}, "d2_mul");
  std::string to_project = "d2a";
  if (se) {
    AddSqueezeExcite(g, "d2a", "se", 4 * c, c, "SiLU", "Sigmoid", true, true, 416);
    to_project = "se";
  }
  AddStage(g, "p2", to_project, "p2c", 4 * c, c, 1, 1, 1, 420);
  g.Node("Add", {"p2c", "b1"}, {"y"}, {}, "add2").Output("y");
  return g.Build();
}

TEST(CpuFusionTest, ConvSequencesRunOnThroughLinearBottlenecks) {
  for (int64_t c : {16, 12}) {  // 12: channels that do not fill 16-channel blocks
    for (int64_t hw : {6, 15}) {
      for (bool se : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "c " << c << " hw " << hw << (se ? " se" : ""));
        ExpectFused(LinearBottlenecksGraph(c, hw, se), {{"x", RandomFloats({1, c, hw, hw}, 430)}}, {"stem"});
      }
    }
  }
}

// A DenseNet layer: BatchNormalization + Relu of the concatenated features,
// a narrowing 1x1 Conv (+ BatchNormalization + Relu) and a 3x3 Conv, whose
// result joins the features. On images of 28x28 and more the 1x1 Conv runs
// on plain tensors (the GEMM convolution) and its result is reordered for
// the 3x3 one; on smaller ones the sequence is channels-last throughout.
pb::GraphProto DenseLayerGraph(int64_t c, int64_t hw) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
  AddBatchNormNamed(g, "x", "xn", c, 500);
  g.Node("Relu", {"xn"}, {"xr"}, {}, "pre_relu");
  AddStage(g, "bottleneck", "xr", "b", c, 16, 1, 1, 1, 504);
  AddBatchNormNamed(g, "b", "bn", 16, 506);
  g.Node("Relu", {"bn"}, {"br"}, {}, "mid_relu");
  AddStage(g, "grow", "br", "n", 16, 8, 1, 3, 1, 510);
  g.Node("Concat", {"x", "n"}, {"y"}, {AttrInt("axis", 1)}, "concat").Output("y");
  return g.Build();
}

TEST(CpuFusionTest, SequencesStartingWithANarrowingPointwiseConv) {
  for (int64_t c : {40, 24}) {
    for (int64_t hw : {28, 13}) {
      SCOPED_TRACE(::testing::Message() << "c " << c << " hw " << hw);
      ExpectFused(DenseLayerGraph(c, hw), {{"x", RandomFloats({1, c, hw, hw}, 520)}},
                  {"xn", "bottleneck", "concat"});
    }
  }
}

// A RegNet / ResNeXt block: 1x1 Conv + Relu, grouped 3x3 Conv + Relu
// (`width` channels per group), 1x1 Conv + residual Add + Relu, two
// blocks in a row. Groups of 16 channels run channels-last like the
// convolutions around them, narrower ones in oneDNN's channel blocks.
pb::GraphProto GroupedBlocksGraph(int64_t c, int64_t mid, int64_t width, int64_t hw) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
  std::string in = "x";
  uint32_t seed = 600;
  for (std::string b : {"b1", "b2"}) {
    AddStage(g, b + "_a", in, b + "_ac", c, mid, 1, 1, 1, seed++);
    g.Node("Relu", {b + "_ac"}, {b + "_ar"}, {}, b + "_r1");
    AddStage(g, b + "_g", b + "_ar", b + "_gc", mid, mid, mid / width, 3, 1, seed++);
    g.Node("Relu", {b + "_gc"}, {b + "_gr"}, {}, b + "_r2");
    AddStage(g, b + "_c", b + "_gr", b + "_cc", mid, c, 1, 1, 1, seed++);
    g.Node("Add", {in, b + "_cc"}, {b + "_s"}, {}, b + "_add")
        .Node("Relu", {b + "_s"}, {b + "_y"}, {}, b + "_r3");
    in = b + "_y";
  }
  g.Output(in);
  return g.Build();
}

TEST(CpuFusionTest, GroupedConvolutionsInsideSequences) {
  for (int64_t width : {16, 8}) {
    for (int64_t hw : {12, 30}) {
      SCOPED_TRACE(::testing::Message() << "width " << width << " hw " << hw);
      ExpectFused(GroupedBlocksGraph(32, 64, width, hw), {{"x", RandomFloats({1, 32, hw, hw}, 620)}},
                  {"b1_a"});
    }
  }
}

// A stem (Conv, BatchNormalization, Relu), then two ResNet projection
// blocks in a row: each block's input is read by its main branch (1x1, 3x3
// with `stride` and `group`, 1x1 Conv, each with a BatchNormalization) and
// by its shortcut (a 1x1 Conv with `stride` and a BatchNormalization); a Sum
// joins them, then Relu. `shortcut_first`: the shortcut's nodes come first
// in the graph. `break_at` (0: none): a Sigmoid after that block's middle
// Conv, which no sequence takes.
pb::GraphProto ProjectionSequenceGraph(int64_t c, int64_t hw, int64_t stride, int64_t group,
                                       bool shortcut_first, int break_at = 0) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
  AddStage(g, "stem", "x", "s", c, c, 1, 3, 1, 700);
  AddBatchNormNamed(g, "s", "sn", c, 702);
  g.Node("Relu", {"sn"}, {"sr"}, {}, "stem_relu");
  std::string in = "sr";
  int64_t width = c;
  uint32_t seed = 710;
  for (int block = 1; block <= 2; ++block) {
    const std::string p = "b" + std::to_string(block) + "_";
    const int64_t mid = width, out = 2 * width;
    auto shortcut = [&] {
      AddStage(g, p + "sc", in, p + "scc", width, out, 1, 1, stride, seed + 20);
      AddBatchNormNamed(g, p + "scc", p + "scn", out, seed + 22);
    };
    if (shortcut_first) shortcut();
    AddStage(g, p + "a", in, p + "ac", width, mid, 1, 1, 1, seed);
    AddBatchNormNamed(g, p + "ac", p + "an", mid, seed + 2);
    g.Node("Relu", {p + "an"}, {p + "ar"}, {}, p + "r1");
    AddStage(g, p + "b", p + "ar", p + "bc", mid, mid, group, 3, stride, seed + 4);
    AddBatchNormNamed(g, p + "bc", p + "bn", mid, seed + 6);
    std::string mid_out = p + "br";
    g.Node("Relu", {p + "bn"}, {mid_out}, {}, p + "r2");
    if (break_at == block) {
      g.Node("Sigmoid", {mid_out}, {p + "bs"}, {}, p + "sig");
      mid_out = p + "bs";
    }
    AddStage(g, p + "c", mid_out, p + "cc", mid, out, 1, 1, 1, seed + 8);
    AddBatchNormNamed(g, p + "cc", p + "cn", out, seed + 10);
    if (!shortcut_first) shortcut();
    g.Node("Sum", {p + "cn", p + "scn"}, {p + "sum"}, {}, p + "sum")
        .Node("Relu", {p + "sum"}, {p + "y"}, {}, p + "r3");
    in = p + "y";
    width = out;
    seed += 40;
  }
  g.Output(in);
  return g.Build();
}

TEST(CpuFusionTest, ConvSequencesRunOnThroughProjectionBlocks) {
  // One sequence: the shortcut runs as a stage reading the block's input,
  // then the main branch reads it again; the shortcut's result is the Sum's.
  for (int64_t stride : {1, 2}) {
    for (int64_t group : {1, 4}) {
      for (bool shortcut_first : {true, false}) {
        for (int64_t hw : {7, 16}) {
          SCOPED_TRACE(::testing::Message() << "stride " << stride << " group " << group
                                            << (shortcut_first ? " shortcut first" : "") << " hw " << hw);
          ExpectFused(ProjectionSequenceGraph(8, hw, stride, group, shortcut_first),
                      {{"x", RandomFloats({1, 8, hw, hw}, 760)}}, {"stem"});
        }
      }
    }
  }
}

TEST(CpuFusionTest, StridedConvolutionsOfBlockedSequencesRunChannelsLast) {
  SmallConvWinograd winograd;
  // Both backends on a stem and two projection blocks of `c` channels, as
  // one sequence. Sums of up to 128 x 9 products six Convs deep reach a few
  // thousands, so results near zero carry rounding (the Winograd kernel's
  // the most) of about 1e-5 of the largest: the tolerance scales with it.
  auto expect_fused = [](int64_t c, int64_t hw, int64_t stride, int64_t group, bool shortcut_first) {
    Feeds feeds = {{"x", RandomFloats({1, c, hw, hw}, 770)}};
    const pb::GraphProto graph = ProjectionSequenceGraph(c, hw, stride, group, shortcut_first);
    auto ref = ::onnxkit::testing::Run(graph, runner::Backend::kReference, feeds);
    auto cpu = ::onnxkit::testing::Run(graph, runner::Backend::kCpu, feeds);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    float largest = 0;
    for (float v : Values<float>(ref->outputs[0])) largest = std::max(largest, std::fabs(v));
    ExpectTensorsClose(ref->outputs[0], cpu->outputs[0], 1e-4 * largest, 1e-4, "y");
    EXPECT_EQ(cpu->ran, std::vector<std::string>{"stem"});
  };
  // The stem's 3x3 Conv over 28x28 or 29x29 positions runs as a Winograd
  // one, so the sequence is channel-blocked; each block's strided 3x3 Conv
  // (64, then 128 channels) runs channels-last between reorders, its
  // result read by the next 1x1 Conv.
  for (bool shortcut_first : {true, false}) {
    for (int64_t hw : {28, 29}) {
      SCOPED_TRACE(::testing::Message() << (shortcut_first ? "shortcut first" : "") << " hw " << hw);
      const int64_t winograd_before = runner::cpu::WinogradConvolutionRuns();
      const int64_t before = runner::cpu::StridedChannelsLastRuns();
      expect_fused(64, hw, 2, 1, shortcut_first);
      // (Without AVX-512 there is no Winograd kernel: the sequence runs in
      // the layouts oneDNN picks.)
      const bool blocked = runner::cpu::WinogradSupported();
      EXPECT_EQ(runner::cpu::WinogradConvolutionRuns() > winograd_before, blocked);
      EXPECT_EQ(runner::cpu::StridedChannelsLastRuns(), before + (blocked ? 2 : 0));
    }
  }
  // Grouped, unstrided (a Winograd one), stride-3 or narrower convolutions
  // (16, then 32 channels) keep the blocks.
  struct Kept {
    int64_t c, stride, group;
  };
  for (const Kept& k : {Kept{64, 2, 4}, Kept{64, 1, 1}, Kept{64, 3, 1}, Kept{16, 2, 1}}) {
    SCOPED_TRACE(::testing::Message() << "c " << k.c << " stride " << k.stride << " group " << k.group);
    const int64_t before = runner::cpu::StridedChannelsLastRuns();
    expect_fused(k.c, 28, k.stride, k.group, false);
    EXPECT_EQ(runner::cpu::StridedChannelsLastRuns(), before);
  }
}

// An Inception-like block: a stem Conv + Relu whose result "s" (64
// channels, 14x14) is read by the branches `branches` names: "a" and "b",
// a 1x1 Conv + Relu then a 3x3 Conv each (sequences); "d", a depthwise 3x3
// Conv + Relu then a 1x1 Conv (a sequence in 16-channel blocks); "p", a
// lone narrowing 1x1 Conv (oneDNN's GEMM convolution on the plain tensor);
// "q", a lone 3x3 Conv (channels-last too); "s", "s" itself; joined by a
// Concat.
pb::GraphProto BranchesGraph(const std::string& branches) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, 64, 14, 14});
  AddStage(g, "stem", "x", "sc", 64, 64, 1, 3, 1, 800);
  g.Node("Relu", {"sc"}, {"s"}, {}, "stem_relu");
  std::vector<std::string> joined;
  uint32_t seed = 810;
  for (char b : branches) {
    const std::string n(1, b);
    if (b == 's') {
      joined.push_back("s");
      continue;
    }
    if (b == 'p') {
      AddStage(g, n, "s", n + "_y", 64, 16, 1, 1, 1, seed);
    } else if (b == 'q') {
      AddStage(g, n, "s", n + "_y", 64, 32, 1, 3, 1, seed);
    } else if (b == 'd') {
      AddStage(g, n + "3", "s", n + "_c", 64, 64, 64, 3, 1, seed);
      g.Node("Relu", {n + "_c"}, {n + "_r"}, {}, n + "_relu");
      AddStage(g, n + "1", n + "_r", n + "_y", 64, 32, 1, 1, 1, seed + 2);
    } else {
      AddStage(g, n + "1", "s", n + "_c", 64, 32, 1, 1, 1, seed);
      g.Node("Relu", {n + "_c"}, {n + "_r"}, {}, n + "_relu");
      AddStage(g, n + "3", n + "_r", n + "_y", 32, 48, 1, 3, 1, seed + 2);
    }
    seed += 4;
    joined.push_back(n + "_y");
  }
  g.Node("Concat", joined, {"y"}, {AttrInt("axis", 1)}, "concat").Output("y");
  return g.Build();
}

TEST(CpuFusionTest, BranchesReadingOneTensorShareItsCopyInOneLayoutAndItsBound) {
  // Runs the graph three times in one session against the reference;
  // returns how many layout copies were kept and found over the runs.
  auto run = [](const std::string& branches) {
    SCOPED_TRACE(branches);
    const pb::GraphProto graph = BranchesGraph(branches);
    io::LoadedModel loaded;
    loaded.proto = ModelFromGraph(graph, 18);
    runner::SessionOptions options;
    options.backend = runner::Backend::kCpu;
    auto session = runner::Session::Create(std::move(loaded), options);
    EXPECT_TRUE(session.ok()) << session.status();
    const int64_t kept = runner::cpu::KeptLayoutCopies(), found = runner::cpu::SharedLayoutCopies();
    for (uint32_t r = 0; r < 3 && session.ok(); ++r) {
      Feeds feeds = {{"x", RandomFloats({1, 64, 14, 14}, 830 + r)}};
      auto ref = ::onnxkit::testing::Run(graph, runner::Backend::kReference, feeds);
      auto out = (*session)->Run({{"x", runner::RtValue::FromTensor(feeds[0].second)}});
      EXPECT_TRUE(ref.ok()) << ref.status();
      EXPECT_TRUE(out.ok()) << out.status();
      if (!ref.ok() || !out.ok()) break;
      float largest = 0;
      for (float v : Values<float>(ref->outputs[0])) largest = std::max(largest, std::fabs(v));
      ExpectTensorsClose(ref->outputs[0], (*out)[0].tensor(), 1e-5 * largest, 1e-4, "y");
    }
    return std::pair{runner::cpu::KeptLayoutCopies() - kept, runner::cpu::SharedLayoutCopies() - found};
  };
  // With AVX-512, oneDNN computes these 1x1 and 3x3 Convs channels-last:
  // the first branch keeps its reordered "s" for the second, which finds
  // it, in every run, wherever the plain branch runs. Without, every branch reads the
  // plain tensor (nothing to share).
  const int64_t runs = runner::cpu::WinogradSupported() ? 3 : 0;
  for (const char* branches : {"ab", "pab", "apb", "aq", "qa"}) {
    EXPECT_EQ(run(branches), (std::pair<int64_t, int64_t>{runs, runs})) << branches;
  }
  // A reordering branch whose copy no later reader finds (the one after it
  // reads "s" plain) keeps it in the first run only.
  EXPECT_EQ(run("ap"), (std::pair<int64_t, int64_t>{runs > 0 ? 1 : 0, 0}));
  // Between them a branch reading "s" in channel blocks: it does not take
  // the first one's copy, keeps its own in the first run (nothing finds
  // it), and the third takes the first one's.
  EXPECT_EQ(run("adb"), (std::pair<int64_t, int64_t>{runs > 0 ? runs + 1 : 0, runs}));
  // The sequences bound their values by the largest magnitude in "s": the
  // first measures it, the later ones (in every layout) take it from there.
  for (const auto& [branches, taken] : {std::pair{"ab", 1}, std::pair{"abd", 2}, std::pair{"pa", 0}}) {
    const int64_t before = runner::cpu::SharedInputBounds();
    run(branches);
    EXPECT_EQ(runner::cpu::SharedInputBounds() - before, 3 * taken) << branches;
  }
  // The last Conv reading "s" keeps nothing, even where the Concat reads
  // "s" after it.
  EXPECT_EQ(run("pa"), (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_EQ(run("as"), (std::pair<int64_t, int64_t>{0, 0}));
}

TEST(CpuFusionTest, ProjectionBlocksASequenceCannotFinishEndItBeforeTheShortcut) {
  // A Sigmoid inside the second block's main branch: the sequence ends
  // with the first block (it had taken the second's shortcut, then given it
  // back); the second block runs as its branches' chains, the Sum joining
  // one of them.
  ExpectFused(ProjectionSequenceGraph(8, 9, 1, 1, /*shortcut_first=*/true, /*break_at=*/2),
              {{"x", RandomFloats({1, 8, 9, 9}, 770)}}, {"stem", "b2_a", "b2_sig", "b2_c", "b2_sc"});
  // Inside the first: the stem's sequence ends at the stem; the chain of
  // the first block's last Conv takes its Sum and runs on through the
  // second block.
  ExpectFused(ProjectionSequenceGraph(8, 9, 2, 1, /*shortcut_first=*/false, /*break_at=*/1),
              {{"x", RandomFloats({1, 8, 9, 9}, 771)}}, {"stem", "b1_a", "b1_sig", "b1_sc", "b1_c"});
  // A block on the graph's input whose main branch no chain can finish:
  // the chains begin at its Convs alone.
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, 8, 9, 9});
  AddStage(g, "a", "x", "ac", 8, 8, 1, 1, 1, 780);
  g.Node("Relu", {"ac"}, {"ar"}, {}, "a_relu").Node("Sigmoid", {"ar"}, {"as"}, {}, "a_sig");
  AddStage(g, "c", "as", "cc", 8, 16, 1, 3, 1, 782);
  AddStage(g, "s", "x", "sc", 8, 16, 1, 1, 1, 784);
  AddBatchNormNamed(g, "sc", "sn", 16, 786);
  g.Node("Add", {"cc", "sn"}, {"sum"}, {}, "add").Node("Relu", {"sum"}, {"y"}, {}, "relu").Output("y");
  ExpectFused(g.Build(), {{"x", RandomFloats({1, 8, 9, 9}, 788)}}, {"a", "a_sig", "s", "c"});
}

TEST(CpuFusionTest, ResidualBlocksRunNodeByNodeWhenTheSequenceCannot) {
  // Double tensors: no fused kernel takes them; the chain runs node by node
  // with the block's input kept for its Add.
  pb::GraphProto graph = IdentityBlocksGraph(8, 6);
  auto to_double = [](const float* p, size_t n) {
    std::vector<double> d(p, p + n);
    return std::string(reinterpret_cast<const char*>(d.data()), n * sizeof(double));
  };
  for (pb::TensorProto& t : graph.initializer) {
    std::string_view raw = t.raw_data.view();
    t.raw_data = Bytes::Own(to_double(reinterpret_cast<const float*>(raw.data()), raw.size() / sizeof(float)));
    t.data_type = pb::kDouble;
  }
  graph.input[0] = MakeValueInfo("x", pb::kDouble, std::vector<int64_t>{1, 8, 6, 6});
  graph.output[0] = MakeValueInfo(graph.output[0].name, pb::kDouble, std::vector<int64_t>{1, 8, 6, 6});
  runner::Tensor x = RandomFloats({1, 8, 6, 6}, 332);
  std::vector<double> values(x.data<float>(), x.data<float>() + x.size());
  ExpectFused(graph, {{"x", MakeTensor<double>(pb::kDouble, {1, 8, 6, 6}, values)}}, {"b1_c1"}, 18,
              /*node_by_node=*/true);
}

TEST(CpuFusionTest, ConvSequenceFollowsShapeChangesBetweenRuns) {
  pb::GraphProto graph = InvertedResidualGraph(8, 10);
  graph.input[0] = MakeValueInfo("x", pb::kFloat, std::vector<int64_t>{-1, 8, -1, -1});
  std::vector<Feeds> runs;
  std::vector<std::vector<int64_t>> shapes = {{1, 8, 10, 10}, {2, 8, 7, 9}, {1, 8, 10, 10}};
  for (size_t r = 0; r < shapes.size(); ++r)
    runs.push_back({{"x", RandomFloats(shapes[r], 60 + static_cast<uint32_t>(r))}});
  ExpectRepeatedRunsMatch(graph, runs);
}

TEST(CpuFusionTest, ConvSequenceEdgeCases) {
  {
    // The second Conv's weights are fed: it starts no sequence; each Conv
    // fuses its own activation.
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 4, 9, 9})
        .Input("w2", pb::kFloat, std::vector<int64_t>{8, 8, 3, 3});
    AddStage(g, "c1", "x", "a", 4, 8, 1, 3, 1, 70);
    g.Node("Relu", {"a"}, {"a1"}, {}, "r1")
        .Node("Conv", {"a1", "w2"}, {"b"}, {AttrInts("pads", {1, 1, 1, 1})}, "c2");
    g.Node("Relu", {"b"}, {"y"}, {}, "r2").Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 4, 9, 9}, 71)}, {"w2", RandomFloats({8, 8, 3, 3}, 72)}},
                {"c1", "c2"});
  }
  {
    // Three post-ops on an inner stage: applied by the kernel over the
    // stage's blocked result, the residual reordered to its layout.
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 4, 9, 9})
        .Input("r", pb::kFloat, std::vector<int64_t>{1, 8, 9, 9});
    AddStage(g, "c1", "x", "a", 4, 8, 1, 3, 1, 73);
    g.Node("Relu", {"a"}, {"a1"}, {}, "r1").Node("Add", {"a1", "r"}, {"a2"}, {}, "add");
    g.Node("Relu", {"a2"}, {"a3"}, {}, "r2");
    AddStage(g, "c2", "a3", "y", 8, 8, 1, 1, 1, 74);
    g.Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 4, 9, 9}, 75)}, {"r", RandomFloats({1, 8, 9, 9}, 76)}},
                {"c1"});
  }
  {
    // An inner Clip that maps 0 elsewhere, on 12 channels: not over a
    // layout blocked by 16 (zero padding it would overwrite).
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 12, 9, 9})
        .Initializer(InitializerFrom("lo", Floats({}, {0.5f})))
        .Initializer(InitializerFrom("hi", Floats({}, {6.0f})));
    AddStage(g, "c1", "x", "a", 12, 12, 12, 3, 1, 120);
    g.Node("Clip", {"a", "lo", "hi"}, {"a1"}, {}, "clip");
    AddStage(g, "c2", "a1", "y", 12, 12, 12, 3, 1, 122);
    g.Output("y");
    ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats({1, 12, 9, 9}, 124)}}, 18, 1e-4, 1e-4);
  }
  {
    // A plain Conv -> Conv pair and a 1-D sequence.
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 16, 30});
    g.Initializer(InitializerFrom("w1", RandomFloats({16, 16, 3}, 77)))
        .Initializer(InitializerFrom("w2", RandomFloats({4, 16, 1}, 78)));
    g.Node("Conv", {"x", "w1"}, {"a"}, {AttrInts("pads", {1, 1})}, "c1")
        .Node("Conv", {"a", "w2"}, {"y"}, {}, "c2");
    g.Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 16, 30}, 79)}}, {"c1"});
  }
}

// MaxPool windows a Conv chain may end with (pooled in the layout of the
// last convolution's result): overlapping, with padding, ceil_mode (the
// last window reaching past the padded input), dilations of 1, non-square.
struct PoolCase {
  std::string name;
  std::vector<pb::AttributeProto> attrs;
};

std::vector<PoolCase> PoolCases() {
  return {
      {"k3s2", {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2})}},
      {"k3s2_pads", {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1})}},
      {"k3s2_ceil", {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}), AttrInt("ceil_mode", 1)}},
      {"k2_dilations_1", {AttrInts("kernel_shape", {2, 2}), AttrInts("dilations", {1, 1})}},
      {"k2x3_same", {AttrInts("kernel_shape", {2, 3}), AttrInts("strides", {1, 2}), AttrString("auto_pad", "SAME_UPPER")}},
  };
}

TEST(CpuFusionTest, ConvChainsEndWithMaxPool) {
  for (const ConvCase& cc : kCases) {
    for (const PoolCase& pc : PoolCases()) {
      for (bool batch_norm : {false, true}) {
        SCOPED_TRACE(cc.name + " " + pc.name + (batch_norm ? " bn" : ""));
        GraphBuilder g("g");
        AddConv(g, cc, true, 70);
        std::string act_in = "conv";
        if (batch_norm) {
          AddBatchNorm(g, "conv", "norm", cc.m, 72);
          act_in = "norm";
        }
        g.Node("Relu", {act_in}, {"r"}, {}, "relu").Node("MaxPool", {"r"}, {"y"}, pc.attrs, "pool").Output("y");
        ExpectFused(g.Build(), {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 74)}}, {"conv"});
      }
      {
        // A MaxPool right after the Conv, over a batch of two.
        SCOPED_TRACE(cc.name + " " + pc.name + " conv_pool");
        GraphBuilder g("g");
        g.Input("x", pb::kFloat, std::vector<int64_t>{2, cc.c, cc.hw, cc.hw});
        g.Initializer(InitializerFrom("w", RandomFloats({cc.m, cc.c / cc.group, cc.k, cc.k}, 76)));
        g.Node("Conv", {"x", "w"}, {"conv"}, {AttrInt("group", cc.group)}, "conv")
            .Node("MaxPool", {"conv"}, {"y"}, pc.attrs, "pool")
            .Output("y");
        ExpectFused(g.Build(), {{"x", RandomFloats({2, cc.c, cc.hw, cc.hw}, 77)}}, {"conv"});
      }
    }
  }
}

TEST(CpuFusionTest, ConvSequencesEndWithMaxPool) {
  // The stem of a small CNN: 3x3 stride-2 Conv, BatchNormalization, Relu,
  // a 1x1 Conv and Relu, then MaxPool; and a depthwise sequence (blocked
  // layout) ending with one.
  for (int64_t c : {3, 12}) {
    SCOPED_TRACE(c);
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, 23, 23});
    AddStage(g, "stem", "x", "s", c, 24, 1, 3, 2, 80);
    AddBatchNorm(g, "s", "sn", 24, 82);
    g.Node("Relu", {"sn"}, {"sr"}, {}, "stem_relu");
    AddStage(g, "pw", "sr", "p", 24, 16, 1, 1, 1, 84);
    g.Node("Relu", {"p"}, {"pr"}, {}, "pw_relu");
    AddStage(g, "dw", "pr", "d", 16, 16, 16, 3, 1, 86);
    g.Node("MaxPool", {"d"}, {"y"}, {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2})}, "pool")
        .Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, c, 23, 23}, 88)}}, {"stem"});
  }
}

TEST(CpuFusionTest, ConvChainsEndWithGlobalAveragePool) {
  // The means taken in the last convolution's layout (oneDNN's average
  // pooling), or of the plain result where the last stage's post-ops run in
  // the kernel's own pass (SiLU) or in the safe plan (NaN in X): the chain
  // runs as one step either way, over every convolution path, a batch of
  // two, and a 1-D image.
  for (const ConvCase& cc : kCases) {
    for (const char* tail : {"none", "relu", "bn_relu", "silu"}) {
      SCOPED_TRACE(cc.name + " " + tail);
      GraphBuilder g("g");
      AddConv(g, cc, true, 200);
      std::string v = "conv";
      if (std::string(tail) == "bn_relu") {
        AddBatchNorm(g, "conv", "norm", cc.m, 202);
        v = "norm";
      }
      if (std::string(tail) == "relu" || std::string(tail) == "bn_relu") {
        g.Node("Relu", {v}, {"r"}, {}, "relu");
        v = "r";
      } else if (std::string(tail) == "silu") {
        g.Node("Sigmoid", {v}, {"s"}, {}, "sigmoid").Node("Mul", {v, "s"}, {"r"}, {}, "mul");
        v = "r";
      }
      g.Node("GlobalAveragePool", {v}, {"y"}, {}, "gap").Output("y");
      ExpectFused(g.Build(), {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 204)}}, {"conv"});
      runner::Tensor x = RandomFloats({1, cc.c, cc.hw, cc.hw}, 205);
      x.mutable_data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
      ExpectFused(g.Build(), {{"x", x}}, {"conv"});
    }
  }
  {
    SCOPED_TRACE("batch of two");
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{2, 12, 10, 11});
    AddStage(g, "c1", "x", "a", 12, 20, 1, 3, 1, 206);
    g.Node("Relu", {"a"}, {"r"}, {}, "relu").Node("GlobalAveragePool", {"r"}, {"y"}, {}, "gap").Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({2, 12, 10, 11}, 208)}}, {"c1"});
  }
  {
    SCOPED_TRACE("1-D");
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 16, 30});
    g.Initializer(InitializerFrom("w1", RandomFloats({24, 16, 3}, 210)));
    g.Node("Conv", {"x", "w1"}, {"a"}, {AttrInts("pads", {1, 1})}, "c1")
        .Node("Relu", {"a"}, {"r"}, {}, "relu")
        .Node("GlobalAveragePool", {"r"}, {"y"}, {}, "gap")
        .Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 16, 30}, 212)}}, {"c1"});
  }
  {
    // A sequence (a stem, a 1x1 Conv and a depthwise one) ending with it.
    SCOPED_TRACE("sequence");
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 3, 23, 23});
    AddStage(g, "stem", "x", "s", 3, 24, 1, 3, 2, 214);
    g.Node("Relu", {"s"}, {"sr"}, {}, "stem_relu");
    AddStage(g, "pw", "sr", "p", 24, 32, 1, 1, 1, 216);
    g.Node("Relu", {"p"}, {"pr"}, {}, "pw_relu");
    AddStage(g, "dw", "pr", "d", 32, 32, 32, 3, 1, 218);
    g.Node("GlobalAveragePool", {"d"}, {"y"}, {}, "gap").Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 3, 23, 23}, 220)}}, {"stem"});
  }
  {
    // The Relu's result is also a graph output: the pool runs on its own.
    GraphBuilder g("g");
    AddConv(g, kCases[2], true, 222);
    g.Node("Relu", {"conv"}, {"r"}, {}, "relu")
        .Node("GlobalAveragePool", {"r"}, {"y"}, {}, "gap")
        .Output("y")
        .Output("r");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, kCases[2].c, kCases[2].hw, kCases[2].hw}, 224)}},
                {"conv", "gap"});
  }
}

TEST(CpuFusionTest, MaxPoolNearMissesAndNonFiniteInputs) {
  const ConvCase& cc = kCases[2];
  const std::vector<pb::AttributeProto> pool = {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2})};
  Feeds feeds = {{"x", RandomFloats({1, cc.c, cc.hw, cc.hw}, 90)}};
  {
    // Indices requested: the MaxPool runs on its own.
    GraphBuilder g("g");
    AddConv(g, cc, true, 91);
    g.Node("Relu", {"conv"}, {"r"}, {}, "relu")
        .Node("MaxPool", {"r"}, {"y", "idx"}, pool, "pool")
        .Output("y")
        .Output("idx");
    ExpectFused(g.Build(), feeds, {"conv", "pool"});
  }
  {
    // Dilations: oneDNN's jit pooling takes none, the MaxPool runs on its own.
    GraphBuilder g("g");
    AddConv(g, cc, true, 95);
    g.Node("Relu", {"conv"}, {"r"}, {}, "relu")
        .Node("MaxPool", {"r"}, {"y"}, {AttrInts("kernel_shape", {2, 2}), AttrInts("dilations", {2, 2})}, "pool")
        .Output("y");
    ExpectFused(g.Build(), feeds, {"conv", "pool"});
  }
  {
    // The Relu's result is also a graph output.
    GraphBuilder g("g");
    AddConv(g, cc, true, 92);
    g.Node("Relu", {"conv"}, {"r"}, {}, "relu").Node("MaxPool", {"r"}, {"y"}, pool, "pool").Output("y").Output("r");
    ExpectFused(g.Build(), feeds, {"conv", "pool"});
  }
  {
    // NaN and -inf in X: the chain runs node by node (the reference's
    // MaxPool keeps NaN, oneDNN's skips it).
    GraphBuilder g("g");
    AddConv(g, cc, true, 93);
    g.Node("Relu", {"conv"}, {"r"}, {}, "relu").Node("MaxPool", {"r"}, {"y"}, pool, "pool").Output("y");
    runner::Tensor x = RandomFloats({1, cc.c, cc.hw, cc.hw}, 94);
    x.mutable_data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
    x.mutable_data<float>()[9] = -std::numeric_limits<float>::infinity();
    ExpectFused(g.Build(), {{"x", x}}, {"conv"}, 18, /*node_by_node=*/true);
  }
}

// A SqueezeNet fire module: a 1x1 "squeeze" Conv + Relu feeding a 1x1 and
// a 3x3 "expand" Conv (+ `act`), joined by a Concat along `axis`
// (`swapped`: the 3x3 branch first). The expand branches and the Concat run
// as one step, under the Conv that comes first.
pb::GraphProto FireGraph(int64_t c, int64_t hw, int64_t n, const std::string& act, bool swapped, int64_t axis = 1,
                         bool batch_norm = false, int64_t e3 = 24, bool pool = false) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{n, c, hw, hw});
  AddStage(g, "squeeze", "x", "s", c, 8, 1, 1, 1, 100);
  g.Node("Relu", {"s"}, {"sr"}, {}, "squeeze_relu");
  AddStage(g, "e1", "sr", "a", 8, 16, 1, 1, 1, 102);
  AddStage(g, "e3", "sr", "b", 8, e3, 1, 3, 1, 104);
  std::string a = "a", b = "b";
  if (batch_norm) {
    g.Initializer(InitializerFrom("bn_scale", RandomFloats({24}, 106, 0.5f, 2.0f)))
        .Initializer(InitializerFrom("bn_shift", RandomFloats({24}, 107)))
        .Initializer(InitializerFrom("bn_mean", RandomFloats({24}, 108)))
        .Initializer(InitializerFrom("bn_var", RandomFloats({24}, 109, 0.1f, 3.0f)))
        .Node("BatchNormalization", {"b", "bn_scale", "bn_shift", "bn_mean", "bn_var"}, {"bn"}, {}, "e3_bn");
    b = "bn";
  }
  if (act == "relu") {
    g.Node("Relu", {a}, {"ar"}, {}, "e1_relu").Node("Relu", {b}, {"br"}, {}, "e3_relu");
    a = "ar";
    b = "br";
  } else if (act == "clip") {
    g.Node("Clip", {a}, {"ar"}, {AttrFloat("min", 0.0f), AttrFloat("max", 6.0f)}, "e1_clip")
        .Node("LeakyRelu", {b}, {"br"}, {AttrFloat("alpha", 0.1f)}, "e3_leaky");
    a = "ar";
    b = "br";
  }
  std::vector<std::string> inputs = swapped ? std::vector<std::string>{b, a} : std::vector<std::string>{a, b};
  if (pool) {
    g.Node("Concat", inputs, {"cat"}, {AttrInt("axis", axis)}, "concat")
        .Node("MaxPool", {"cat"}, {"y"}, {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2})}, "pool");
  } else {
    g.Node("Concat", inputs, {"y"}, {AttrInt("axis", axis)}, "concat");
  }
  g.Output("y");
  return g.Build();
}

TEST(CpuFusionTest, FireModuleBranchesWriteIntoTheConcat) {
  for (int64_t hw : {12, 5}) {  // 144 positions: the 1x1 branch on plain tensors; 25: oneDNN's layout
    for (const char* act : {"relu", "clip", "none"}) {
      for (bool swapped : {false, true}) {
        for (bool batch_norm : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "hw " << hw << " " << act << (swapped ? " swapped" : "")
                                            << (batch_norm ? " bn" : ""));
          // Clip has attributes before opset 11.
          int64_t opset = std::string(act) == "clip" ? 10 : 18;
          ExpectFused(FireGraph(12, hw, 1, act, swapped, 1, batch_norm), {{"x", RandomFloats({1, 12, hw, hw}, 110)}},
                      {"squeeze", "e1"}, opset);
        }
      }
    }
  }
  // A MaxPool of the Concat's result: each branch pools its channels.
  for (bool swapped : {false, true}) {
    for (int64_t hw : {13, 6}) {
      SCOPED_TRACE(::testing::Message() << "pooled hw " << hw << (swapped ? " swapped" : ""));
      ExpectFused(FireGraph(12, hw, 1, "relu", swapped, 1, false, 24, true),
                  {{"x", RandomFloats({1, 12, hw, hw}, 120)}}, {"squeeze", "e1"});
    }
  }
  // NaN: the pooled chain runs node by node.
  runner::Tensor x = RandomFloats({1, 12, 9, 9}, 121);
  x.mutable_data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  ExpectFused(FireGraph(12, 9, 1, "relu", false, 1, false, 24, true), {{"x", x}}, {"squeeze", "e1"}, 18,
              /*node_by_node=*/true);
  // A negative axis naming the channels.
  ExpectFused(FireGraph(12, 7, 1, "relu", false, -3), {{"x", RandomFloats({1, 12, 7, 7}, 111)}}, {"squeeze", "e1"});
}

TEST(CpuFusionTest, FireModuleBranchesRunWinogradFrom13x13) {
  SmallConvWinograd winograd;
  for (int64_t hw : {13, 12}) {
    SCOPED_TRACE(hw);
    int64_t before = runner::cpu::WinogradConvolutionRuns();
    ExpectFused(FireGraph(12, hw, 1, "relu", false), {{"x", RandomFloats({1, 12, hw, hw}, 122)}}, {"squeeze", "e1"});
    bool ran = runner::cpu::WinogradConvolutionRuns() > before;
    EXPECT_EQ(ran, hw == 13 && runner::cpu::WinogradSupported());
  }
}

TEST(CpuFusionTest, FireModulesThatCannotWriteIntoTheConcat) {
  // A batch of two (each branch's channels are not contiguous): node by node.
  ExpectFused(FireGraph(12, 6, 2, "relu", false), {{"x", RandomFloats({2, 12, 6, 6}, 112)}}, {"squeeze", "e1"}, 18,
              /*node_by_node=*/true);
  // NaN in X: the branches run fused with their activations after the
  // convolutions (oneDNN's would drop NaN), keeping NaN as the reference.
  runner::Tensor x = RandomFloats({1, 12, 6, 6}, 113);
  x.mutable_data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  ExpectFused(FireGraph(12, 6, 1, "relu", false), {{"x", x}}, {"squeeze", "e1"});
  // A Concat along the height: each branch fuses with its Relu, the Concat
  // runs on its own.
  ExpectFused(FireGraph(12, 6, 1, "relu", false, 2, false, 16), {{"x", RandomFloats({1, 12, 6, 6}, 114)}},
              {"squeeze", "e1", "e3", "concat"});
  {
    // Branches reading different values, and a branch result also returned.
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 8, 6, 6}).Input("z", pb::kFloat, std::vector<int64_t>{1, 8, 6, 6});
    AddStage(g, "e1", "x", "a", 8, 16, 1, 1, 1, 115);
    AddStage(g, "e3", "z", "b", 8, 16, 1, 3, 1, 116);
    g.Node("Concat", {"a", "b"}, {"y"}, {AttrInt("axis", 1)}, "concat").Output("y");
    ExpectFused(g.Build(), {{"x", RandomFloats({1, 8, 6, 6}, 117)}, {"z", RandomFloats({1, 8, 6, 6}, 118)}},
                {"e1", "e3", "concat"});
    GraphBuilder h("h");
    h.Input("x", pb::kFloat, std::vector<int64_t>{1, 8, 6, 6});
    AddStage(h, "e1", "x", "a", 8, 16, 1, 1, 1, 115);
    AddStage(h, "e3", "x", "b", 8, 16, 1, 3, 1, 116);
    h.Node("Concat", {"a", "b"}, {"y"}, {AttrInt("axis", 1)}, "concat").Output("y").Output("b");
    ExpectFused(h.Build(), {{"x", RandomFloats({1, 8, 6, 6}, 119)}}, {"e1", "e3", "concat"});
  }
}

// A ShuffleNet unit: grouped 1x1 Conv + BatchNormalization + Relu, a
// channel shuffle (Reshape to [1, G, C/G, H, W], Transpose, Reshape back),
// a depthwise 3x3 Conv + BatchNormalization, a grouped 1x1 Conv +
// BatchNormalization, the residual Sum with X and Relu; `units` of them in
// a row. `shape` replaces the first Reshape's shape when given.
pb::GraphProto ShuffleGraph(int64_t c, int64_t groups, int64_t hw, int units, std::vector<int64_t> shape = {}) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, c, hw, hw});
  if (shape.empty()) shape = {1, groups, c / groups, hw, hw};
  g.Initializer(InitializerFrom("split", Int64s({5}, shape)))
      .Initializer(InitializerFrom("join", Int64s({4}, {1, c, hw, hw})));
  std::string in = "x";
  for (int u = 0; u < units; ++u) {
    std::string p = "u" + std::to_string(u) + "_";
    uint32_t seed = 300 + 20 * static_cast<uint32_t>(u);
    AddStage(g, p + "g1", in, p + "a", c, c, groups, 1, 1, seed);
    AddBatchNormNamed(g, p + "a", p + "an", c, seed + 2);
    g.Node("Relu", {p + "an"}, {p + "ar"}, {}, p + "relu1")
        .Node("Reshape", {p + "ar", "split"}, {p + "r5"}, {}, p + "split")
        .Node("Transpose", {p + "r5"}, {p + "t5"}, {AttrInts("perm", {0, 2, 1, 3, 4})}, p + "transpose")
        .Node("Reshape", {p + "t5", "join"}, {p + "sh"}, {}, p + "join");
    AddStage(g, p + "dw", p + "sh", p + "d", c, c, c, 3, 1, seed + 6);
    AddBatchNormNamed(g, p + "d", p + "dn", c, seed + 8);
    AddStage(g, p + "g2", p + "dn", p + "b", c, c, groups, 1, 1, seed + 12);
    AddBatchNormNamed(g, p + "b", p + "bn", c, seed + 14);
    g.Node("Sum", {p + "bn", in}, {p + "s"}, {}, p + "sum").Node("Relu", {p + "s"}, {p + "y"}, {}, p + "relu2");
    in = p + "y";
  }
  g.Output(in);
  return g.Build();
}

// A ShuffleNet stride-2 unit on `in` (c channels, hw x hw): grouped 1x1
// Conv + BatchNormalization + Relu, channel shuffle, depthwise 3x3 stride-2
// Conv + BatchNormalization, grouped 1x1 Conv (c -> m) + BatchNormalization,
// then the Concat of that and an AveragePool 3x3 stride 2 of `in`, and
// Relu; the unit's result (m + c channels) is `prefix` + "y".
void AddJoinUnit(GraphBuilder& g, const std::string& prefix, const std::string& in, int64_t c, int64_t m,
                 int64_t groups, int64_t hw, int64_t include, uint32_t seed) {
  const std::string p = prefix;
  // (0: the batch dim as it is.)
  g.Initializer(InitializerFrom(p + "split", Int64s({5}, {0, groups, c / groups, hw, hw})))
      .Initializer(InitializerFrom(p + "join", Int64s({4}, {0, c, hw, hw})));
  AddStage(g, p + "g1", in, p + "a", c, c, groups, 1, 1, seed);
  AddBatchNormNamed(g, p + "a", p + "an", c, seed + 2);
  g.Node("Relu", {p + "an"}, {p + "ar"}, {}, p + "relu1")
      .Node("Reshape", {p + "ar", p + "split"}, {p + "r5"}, {}, p + "split")
      .Node("Transpose", {p + "r5"}, {p + "t5"}, {AttrInts("perm", {0, 2, 1, 3, 4})}, p + "transpose")
      .Node("Reshape", {p + "t5", p + "join"}, {p + "sh"}, {}, p + "unshuffle");
  AddStage(g, p + "dw", p + "sh", p + "d", c, c, c, 3, 2, seed + 6);
  AddBatchNormNamed(g, p + "d", p + "dn", c, seed + 8);
  AddStage(g, p + "g2", p + "dn", p + "b", c, m, groups, 1, 1, seed + 12);
  AddBatchNormNamed(g, p + "b", p + "bn", m, seed + 14);
  g.Node("AveragePool", {in}, {p + "pool"},
         {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1}),
          AttrInt("count_include_pad", include)},
         p + "avgpool")
      .Node("Concat", {p + "bn", p + "pool"}, {p + "cat"}, {AttrInt("axis", 1)}, p + "concat")
      .Node("Relu", {p + "cat"}, {p + "y"}, {}, p + "relu2");
}

// `stem`: a 1x1 Conv + Relu before the stride-2 unit (which then pools
// the stem's result); `after`: a grouped 1x1 Conv + Relu after the unit.
pb::GraphProto JoinGraph(int64_t c, int64_t m, int64_t groups, int64_t hw, int64_t include, bool stem,
                         bool after, int64_t batch = 1) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{batch, c, hw, hw});
  std::string in = "x";
  if (stem) {
    AddStage(g, "stem", "x", "st", c, c, 1, 1, 1, 360);
    g.Node("Relu", {"st"}, {"str"}, {}, "stem_relu");
    in = "str";
  }
  AddJoinUnit(g, "u_", in, c, m, groups, hw, include, 362);
  std::string out = "u_y";
  if (after) {
    AddStage(g, "next", "u_y", "nx", m + c, m + c, groups, 1, 1, 380);
    g.Node("Relu", {"nx"}, {"ny"}, {}, "next_relu");
    out = "ny";
  }
  g.Output(out);
  return g.Build();
}

TEST(CpuFusionTest, PooledJoinsOfShuffleNetUnitsRunInsideConvSequences) {
  // The unit's input pooled (X itself, or the stem's result from inside
  // the chain), joined after the branch's last Conv; padding counted or
  // not; 12 channels in 3 groups (the oneDNN reorder shuffles them) and 16
  // in 4 (the backend's own loop).
  for (auto [c, m, groups] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{12, 12, 3}, {16, 24, 4}}) {
    for (int64_t hw : {8, 9}) {
      for (int64_t include : {0, 1}) {
        for (bool stem : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "c " << c << " hw " << hw << " include " << include << " stem " << stem);
          ExpectFused(JoinGraph(c, m, groups, hw, include, stem, /*after=*/true),
                      {{"x", RandomFloats({1, c, hw, hw}, 364)}}, {stem ? "stem" : "u_g1"});
        }
      }
    }
  }
}

TEST(CpuFusionTest, PooledJoinsOfABatchOfImages) {
  ExpectFused(JoinGraph(16, 24, 4, 8, 1, /*stem=*/true, /*after=*/true, /*batch=*/3),
              {{"x", RandomFloats({3, 16, 8, 8}, 369)}}, {"stem"});
}

TEST(CpuFusionTest, PooledJoinsRunFusedOnInputsHoldingNaN) {
  // The safe plan (activations in the backend's own loops, which keep NaN)
  // joins too: NaN in X reaches the same outputs as on the reference.
  for (bool stem : {false, true}) {
    SCOPED_TRACE(stem);
    runner::Tensor x = RandomFloats({1, 16, 8, 8}, 368);
    x.mutable_data<float>()[77] = std::numeric_limits<float>::quiet_NaN();
    x.mutable_data<float>()[300] = std::numeric_limits<float>::infinity();
    ExpectFused(JoinGraph(16, 16, 4, 8, 0, stem, /*after=*/true), {{"x", x}}, {stem ? "stem" : "u_g1"});
  }
}

TEST(CpuFusionTest, PooledJoinsWithoutAConvAfterThemRunOnTheirOwn) {
  // No Conv follows the unit: the chain ends where the unit begins (its
  // input is the chain's result), and the unit runs as a sequence of its
  // own, the AveragePool, Concat and Relu node by node after it.
  ExpectFused(JoinGraph(16, 24, 4, 8, 0, /*stem=*/true, /*after=*/false),
              {{"x", RandomFloats({1, 16, 8, 8}, 366)}},
              {"stem", "u_g1", "u_avgpool", "u_concat", "u_relu2"});
  // At the head: the unit's branch alone.
  ExpectFused(JoinGraph(16, 24, 4, 8, 0, /*stem=*/false, /*after=*/false),
              {{"x", RandomFloats({1, 16, 8, 8}, 366)}}, {"u_g1", "u_avgpool", "u_concat", "u_relu2"});
}

TEST(CpuFusionTest, ChainsNeverEndWithAPooledJoin) {
  // Two stride-2 units in a row, no Conv after the second: cutting the
  // second unit off leaves the first join last, so it goes too; each unit's
  // branch then runs as a sequence of its own.
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, 16, 16, 16});
  AddStage(g, "stem", "x", "st", 16, 16, 1, 1, 1, 370);
  g.Node("Relu", {"st"}, {"str"}, {}, "stem_relu");
  AddJoinUnit(g, "a_", "str", 16, 16, 4, 16, 0, 372);
  AddJoinUnit(g, "b_", "a_y", 32, 32, 4, 8, 0, 390);
  g.Output("b_y");
  ExpectFused(
      g.Build(), {{"x", RandomFloats({1, 16, 16, 16}, 371)}},
      {"stem", "a_g1", "a_avgpool", "a_concat", "a_relu2", "b_g1", "b_avgpool", "b_concat", "b_relu2"});
}

TEST(CpuFusionTest, PooledJoinsOnTwoThreadsMatchReference) {
  Feeds feeds = {{"x", RandomFloats({1, 32, 40, 40}, 367)}};
  pb::GraphProto graph = JoinGraph(32, 32, 4, 40, 0, /*stem=*/true, /*after=*/true);
  auto ref = RunGraphOn(runner::Backend::kReference, graph, feeds, 18, 1);
  auto cpu = RunGraphOn(runner::Backend::kCpu, graph, feeds, 18, 2);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ExpectTensorsClose((*ref)[0].tensor(), (*cpu)[0].tensor(), 1e-4, 1e-3, "y");
}

TEST(CpuFusionTest, ChannelShufflesRunInsideConvSequences) {
  // 12 and 24 channels: not whole 16-channel blocks. In 2 and 4 groups the
  // shuffle runs on the backend's own loop, a vector at a time (8 or 4
  // channels of each group): 36 / 4 and 20 / 2 leave channels over.
  for (auto [c, groups] :
       std::vector<std::pair<int64_t, int64_t>>{{12, 3}, {24, 4}, {32, 4}, {36, 4}, {20, 2}, {48, 2}}) {
    for (int64_t hw : {9, 14}) {
      for (int units : {1, 3}) {
        SCOPED_TRACE(::testing::Message() << "c " << c << " groups " << groups << " hw " << hw << " units " << units);
        ExpectFused(ShuffleGraph(c, groups, hw, units), {{"x", RandomFloats({1, c, hw, hw}, 340)}}, {"u0_g1"});
      }
    }
  }
}

TEST(CpuFusionTest, LargeChannelShufflesOnTwoThreadsMatchReference) {
  // Over 64K floats: the shuffle splits the pixels among the threads.
  for (auto [c, groups] : std::vector<std::pair<int64_t, int64_t>>{{68, 4}, {58, 2}}) {
    SCOPED_TRACE(::testing::Message() << "c " << c << " groups " << groups);
    Feeds feeds = {{"x", RandomFloats({1, c, 40, 40}, 343)}};
    auto ref = RunGraphOn(runner::Backend::kReference, ShuffleGraph(c, groups, 40, 2), feeds, 18, 1);
    auto cpu = RunGraphOn(runner::Backend::kCpu, ShuffleGraph(c, groups, 40, 2), feeds, 18, 2);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ExpectTensorsClose((*ref)[0].tensor(), (*cpu)[0].tensor(), 1e-4, 1e-3, "y");
  }
}

TEST(CpuFusionTest, ChannelShufflesTheKernelCannotTakeRunNodeByNode) {
  // Shapes with 0 and -1 resolve as Reshape does.
  ExpectFused(ShuffleGraph(12, 3, 9, 1, {0, 3, -1, 9, 9}), {{"x", RandomFloats({1, 12, 9, 9}, 341)}}, {"u0_g1"});
  // A shape the kernel does not read as a shuffle (the image split as 3 x
  // 27): the chain runs node by node, as the reference.
  ExpectFused(ShuffleGraph(12, 3, 9, 1, {1, 3, 4, 3, 27}), {{"x", RandomFloats({1, 12, 9, 9}, 341)}}, {"u0_g1"}, 18,
              /*node_by_node=*/true);
  // Another transposition: not a shuffle, the nodes run on their own.
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, 12, 6, 6});
  g.Initializer(InitializerFrom("split", Int64s({5}, {1, 3, 4, 6, 6})))
      .Initializer(InitializerFrom("join", Int64s({4}, {1, 12, 6, 6})));
  AddStage(g, "a", "x", "a_c", 12, 12, 3, 1, 1, 342);
  g.Node("Relu", {"a_c"}, {"ar"}, {}, "relu")
      .Node("Reshape", {"ar", "split"}, {"r5"}, {}, "split")
      .Node("Transpose", {"r5"}, {"t5"}, {AttrInts("perm", {0, 1, 2, 4, 3})}, "transpose")
      .Node("Reshape", {"t5", "join"}, {"sh"}, {}, "join");
  AddStage(g, "b", "sh", "y", 12, 12, 12, 3, 1, 343);
  g.Output("y");
  ExpectFused(g.Build(), {{"x", RandomFloats({1, 12, 6, 6}, 344)}}, {"a", "split", "transpose", "join", "b"});
}

TEST(CpuFusionTest, ChannelTransposesMatchAPlainLoop) {
  // Where sequences enter and leave channels-last or 16-channel blocks:
  // from plain and back on the backend's own transpose (16 x 16 tiles, the
  // edges in masked tiles or one float at a time, one to three channels
  // gathered by index), for channel and pixel counts around the
  // tile, blocks the channels fill and blocks padded past them (zeros in
  // the padding), one and two images, and tensors large enough to split
  // among two threads.
  if (!runner::cpu::WinogradSupported()) GTEST_SKIP() << "the transpose needs AVX-512";
  using dnnl::memory;
  struct Dims {
    int64_t n, c, h, w;
  };
  std::vector<Dims> cases;
  for (int64_t n : {1, 2}) {
    for (int64_t c : {1, 2, 3, 16, 17, 40}) {
      for (auto [h, w] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {4, 5}, {7, 7}, {14, 14}, {13, 17}})
        cases.push_back({n, c, h, w});
    }
  }
  cases.push_back({1, 64, 40, 40});
  cases.push_back({2, 64, 7, 7});
  cases.push_back({2, 58, 28, 28});
  cases.push_back({1, 1024, 7, 7});
  cases.push_back({1, 1024, 4, 5});
  // An image's colour planes, two planes and one, on both threads (bands
  // of columns; into channels-last, the columns are the pixels).
  cases.push_back({1, 3, 112, 113});
  cases.push_back({1, 2, 130, 131});
  cases.push_back({1, 1, 190, 191});
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  for (const Dims& d : cases) {
    for (const bool blocked : {false, true}) {
      SCOPED_TRACE(::testing::Message() << d.n << "x" << d.c << "x" << d.h << "x" << d.w
                                        << (blocked ? " blocks" : " channels-last"));
      const memory::dims dims = {d.n, d.c, d.h, d.w};
      const memory::desc plain(dims, memory::data_type::f32, memory::format_tag::nchw);
      const memory::desc last(dims, memory::data_type::f32,
                              blocked ? memory::format_tag::nChw16c : memory::format_tag::nhwc);
      const int64_t padded_c = blocked ? (d.c + 15) / 16 * 16 : d.c;
      const bool padded = padded_c != d.c;
      // Chosen over oneDNN's reorder but into or out of blocks the channels
      // fill (unless asked) and for 1024 channels channels-last (the
      // result's rows 4 KiB apart).
      const bool aliasing = !blocked && d.c % 1024 == 0;
      EXPECT_EQ(runner::cpu::OwnTranspose(plain, last, /*blocks=*/true), !aliasing);
      EXPECT_TRUE(runner::cpu::OwnTranspose(last, plain, /*blocks=*/true));
      EXPECT_EQ(runner::cpu::OwnTranspose(plain, last), (!blocked || padded) && !aliasing);
      EXPECT_EQ(runner::cpu::OwnTranspose(last, plain), !blocked || padded);
      const int64_t size = d.n * d.c * d.h * d.w, hw = d.h * d.w, stored = d.n * padded_c * hw;
      runner::Tensor x = RandomFloats({size}, static_cast<uint32_t>(size));
      // Filled with NaN first: the padding must come out zero, nothing past
      // the plain tensor may be written.
      std::vector<float> to_last(static_cast<size_t>(stored), std::nanf("")),
          back(static_cast<size_t>(size + 16), std::nanf(""));
      ASSERT_TRUE(runner::cpu::TransposeChannels(plain, last, x.data<float>(), to_last.data()).ok());
      ASSERT_TRUE(runner::cpu::TransposeChannels(last, plain, to_last.data(), back.data()).ok());
      int64_t wrong = 0;
      for (int64_t i = 0; i < d.n; ++i) {
        for (int64_t ch = 0; ch < padded_c; ++ch) {
          for (int64_t p = 0; p < hw; ++p) {
            const float v = ch < d.c ? x.data<float>()[(i * d.c + ch) * hw + p] : 0.f;
            const int64_t at =
                blocked ? ((i * padded_c + ch / 16 * 16) * hw + p * 16 + ch % 16) : (i * hw + p) * d.c + ch;
            wrong += !(to_last[static_cast<size_t>(at)] == v);
            if (ch < d.c) wrong += !(back[static_cast<size_t>((i * d.c + ch) * hw + p)] == v);
          }
        }
      }
      EXPECT_EQ(wrong, 0);
      for (int64_t i = size; i < size + 16; ++i) EXPECT_TRUE(std::isnan(back[static_cast<size_t>(i)])) << i;
      // The checking form finds NaN and -inf (not +inf) in a tile and at an
      // edge (the padding's zeros are not NaN).
      std::vector<float> copy(x.data<float>(), x.data<float>() + size);
      EXPECT_FALSE(*runner::cpu::TransposeChannelsFindingNaN(plain, last, copy.data(), to_last.data()));
      copy[static_cast<size_t>(size / 2)] = std::numeric_limits<float>::infinity();
      EXPECT_FALSE(*runner::cpu::TransposeChannelsFindingNaN(plain, last, copy.data(), to_last.data()));
      EXPECT_FALSE(*runner::cpu::TransposeChannelsFindingNaN(last, plain, to_last.data(), back.data()));
      for (float planted :
           {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
        for (int64_t at : {int64_t{0}, size - 1, size / 3}) {
          std::vector<float> bad = copy;
          bad[static_cast<size_t>(at)] = planted;
          EXPECT_TRUE(*runner::cpu::TransposeChannelsFindingNaN(plain, last, bad.data(), to_last.data()))
              << at;
          std::vector<float> bad_last = to_last;
          bad_last[static_cast<size_t>(at * stored / size)] = planted;
          EXPECT_TRUE(*runner::cpu::TransposeChannelsFindingNaN(last, plain, bad_last.data(), back.data()))
              << at;
        }
      }
    }
  }
  omp_set_num_threads(threads);
  // Not a transpose: 8-channel blocks, other dims, 5-D.
  const memory::desc plain({1, 32, 4, 4}, memory::data_type::f32, memory::format_tag::nchw);
  EXPECT_FALSE(runner::cpu::OwnTranspose(
      plain, memory::desc({1, 32, 4, 4}, memory::data_type::f32, memory::format_tag::nChw8c), true));
  EXPECT_FALSE(runner::cpu::OwnTranspose(
      plain, memory::desc({1, 32, 4, 5}, memory::data_type::f32, memory::format_tag::nhwc)));
  EXPECT_FALSE(runner::cpu::OwnTranspose(plain, plain));
  std::vector<float> buffer(32 * 16);
  EXPECT_FALSE(runner::cpu::TransposeChannels(plain, plain, buffer.data(), buffer.data()).ok());
  EXPECT_FALSE(runner::cpu::TransposeChannelsFindingNaN(plain, plain, buffer.data(), buffer.data()).ok());
  EXPECT_FALSE(runner::cpu::OwnTranspose(
      memory::desc({1, 32, 4, 4, 2}, memory::data_type::f32, memory::format_tag::ncdhw),
      memory::desc({1, 32, 4, 4, 2}, memory::data_type::f32, memory::format_tag::ndhwc)));
}

TEST(CpuFusionTest, SequenceIntermediatesCountAgainstTheMemoryLimit) {
  // The first Conv's huge pads make a 1.1 GB intermediate that only the
  // sequence's scratch would hold; the limit refuses it cleanly.
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, 4, 4, 4})
      .Initializer(InitializerFrom("w1", RandomFloats({8, 4, 1, 1}, 110)))
      .Initializer(InitializerFrom("w2", RandomFloats({2, 8, 1, 1}, 111)))
      .Node("Conv", {"x", "w1"}, {"a"}, {AttrInts("pads", {3000, 3000, 3000, 3000})}, "c1")
      .Node("Relu", {"a"}, {"r"}, {}, "relu")
      .Node("Conv", {"r", "w2"}, {"y"}, {AttrInts("strides", {1000, 1000})}, "c2")
      .Output("y");
  runner::SetMemoryLimit(int64_t{256} << 20);
  for (runner::Backend backend : {runner::Backend::kReference, runner::Backend::kCpu}) {
    auto out = RunGraphOn(backend, g.Build(), {{"x", RandomFloats({1, 4, 4, 4}, 112)}});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  }
  runner::SetMemoryLimit(0);
}

TEST(CpuFusionTest, ObserverSeesEveryValueAndFusionCanBeTurnedOff) {
  const ConvCase& cc = kCases[0];
  GraphBuilder g("g");
  AddConv(g, cc, true, 37);
  g.Node("Relu", {"conv"}, {"y"}, {}, "relu").Output("y");
  for (bool observe : {false, true}) {
    io::LoadedModel loaded;
    loaded.proto = ModelFromGraph(g.Build(), 18);
    std::vector<std::string> seen, ran;
    runner::SessionOptions options;
    options.backend = runner::Backend::kCpu;
    options.fuse = observe;  // off without an observer; an observer turns it off anyway
    if (observe) {
      options.observer = [&](const ir::Value& v, const runner::RtValue&) {
        seen.push_back(v.name());
        return absl::OkStatus();
      };
    }
    options.on_node_done = [&](const ir::Node& node, double) { ran.push_back(node.name()); };
    auto s = runner::Session::Create(std::move(loaded), options);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(
        (*s)->Run({{"x", runner::RtValue::FromTensor(RandomFloats({1, cc.c, cc.hw, cc.hw}, 38))}}).ok());
    EXPECT_EQ(ran, (std::vector<std::string>{"conv", "relu"}));
    if (observe) {
      EXPECT_EQ(seen, (std::vector<std::string>{"conv", "y"}));
    }
  }
}

}  // namespace
}  // namespace onnxkit::testing
