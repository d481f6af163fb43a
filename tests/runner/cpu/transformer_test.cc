// Transformer chains the cpu backend fuses (runner/fusion_transformer.cc,
// runner/cpu/transformer.cc): MatMul + bias and the erf GELU against the
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

absl::StatusOr<Result> Run(const pb::GraphProto& graph, runner::Backend backend, const Feeds& feeds) {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(graph, 18, 9);
  Result result;
  runner::SessionOptions options;
  options.backend = backend;
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
                 bool node_by_node = false) {
  auto ref = Run(graph, runner::Backend::kReference, feeds);
  int64_t fallbacks = runner::ChainFallbackRuns();
  auto cpu = Run(graph, runner::Backend::kCpu, feeds);
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
    ExpectFused(g.Build(), {{"x", RandomFloats({6, 5}, 15)}, {"z", RandomFloats({6, 5}, 16)}},
                {"div", "erf", "add", "mul", "half"});
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
}

}  // namespace
}  // namespace onnxkit::testing
