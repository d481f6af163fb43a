// QDQ models on the cpu backend: quantized chains (runner/fusion.h) run in
// int8 and agree with the reference backend's float execution of the same
// model within one quantization step; almost-matching patterns take the
// float path; QuantizeLinear / DequantizeLinear agree exactly.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "lib/io/model_io.h"
#include "lib/ir/model.h"
#include "lib/ir/topo.h"
#include "runner/cpu/conv.h"
#include "runner/fusion.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

struct Result {
  std::vector<runner::Tensor> outputs;
  std::vector<std::string> ran;  // node names reported per run
};

absl::StatusOr<Result> RunOn(const pb::GraphProto& graph, runner::Backend backend, const Feeds& feeds,
                             int64_t opset = 19) {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(graph, opset, 9);
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

int32_t IntAt(const runner::Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case pb::kInt8:
      return t.data<int8_t>()[i];
    case pb::kInt16:
      return t.data<int16_t>()[i];
    case pb::kUint16:
      return t.data<uint16_t>()[i];
    default:
      return t.data<uint8_t>()[i];
  }
}

// The documented bound: every element within `steps` quantization steps of
// the reference, and at most 2% of them off at all (a rounding tie moved
// by float error is rare; a wrong scale, bias or zero point moves most).
void ExpectWithinSteps(const runner::Tensor& ref, const runner::Tensor& cpu, int steps) {
  ASSERT_EQ(ref.dtype(), cpu.dtype());
  ASSERT_EQ(ref.shape(), cpu.shape());
  int64_t off = 0;
  int worst = 0;
  for (int64_t i = 0; i < ref.size(); ++i) {
    int d = std::abs(IntAt(ref, i) - IntAt(cpu, i));
    off += d != 0;
    worst = std::max(worst, d);
  }
  EXPECT_LE(worst, steps);
  EXPECT_LE(off * 50, ref.size()) << off << " of " << ref.size() << " elements differ";
  // The outputs must not be trivially equal: the test data spans the grid.
  int32_t lo = 255, hi = -128;
  for (int64_t i = 0; i < ref.size(); ++i) lo = std::min(lo, IntAt(ref, i)), hi = std::max(hi, IntAt(ref, i));
  EXPECT_GT(hi - lo, 20) << "degenerate test data";
}

// Runs on both backends; `fused`: the cpu backend runs the chain in int8
// as one step named `head` (else node by node, `head` among the steps).
void ExpectQuantized(const pb::GraphProto& graph, const Feeds& feeds, const std::string& head, bool fused,
                     int steps = 1) {
  auto ref = RunOn(graph, runner::Backend::kReference, feeds);
  const int64_t fallbacks = runner::ChainFallbackRuns();
  auto cpu = RunOn(graph, runner::Backend::kCpu, feeds);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_EQ(ref->outputs.size(), cpu->outputs.size());
  for (size_t i = 0; i < ref->outputs.size(); ++i) ExpectWithinSteps(ref->outputs[i], cpu->outputs[i], steps);
  const bool int8 = fused && runner::cpu::QuantizedChainsRunInt8();
  EXPECT_EQ(runner::ChainFallbackRuns() > fallbacks, fused && !int8);
  bool q_ran = false, head_ran = false;
  for (const std::string& n : cpu->ran) {
    q_ran = q_ran || n == "q";
    head_ran = head_ran || n == head;
  }
  EXPECT_TRUE(head_ran);
  EXPECT_EQ(q_ran, !fused) << "the QuantizeLinear ran on its own";
}

struct QdqCase {
  std::string name;
  int32_t act = pb::kUint8;  // activation type
  bool per_channel = true;
  bool relu = false;
  bool bias = true;
  int x_zp = 0, y_zp = 0;
  int32_t weight = pb::kInt8;  // uint8: zero point 128
};

std::vector<QdqCase> Cases() {
  return {
      {"u8_per_channel", pb::kUint8, true, false, true, 7, 100, pb::kInt8},
      {"u8_per_tensor_relu", pb::kUint8, false, true, true, 128, 3, pb::kInt8},
      {"s8_per_channel_relu", pb::kInt8, true, true, false, -5, 10, pb::kInt8},
      {"s8_zero_points_zero", pb::kInt8, true, false, true, 0, 0, pb::kInt8},
      {"u8_weights", pb::kUint8, true, true, true, 20, 60, pb::kUint8},
  };
}

runner::Tensor ScalarOf(int32_t type, int v) {
  return type == pb::kInt8 ? Int8s({}, {static_cast<int8_t>(v)}) : Uint8s({}, {static_cast<uint8_t>(v)});
}

runner::Tensor ZeroPoints(int32_t type, int64_t n, int v) {
  if (type == pb::kInt8) return Int8s({n}, std::vector<int8_t>(static_cast<size_t>(n), static_cast<int8_t>(v)));
  return Uint8s({n}, std::vector<uint8_t>(static_cast<size_t>(n), static_cast<uint8_t>(v)));
}

// DequantizeLinear "dq_<name>" of quantized weights "<name>q" of `shape`,
// per channel along `axis` (size `channels`) or per tensor, into `name`.
void AddWeights(GraphBuilder& g, const QdqCase& qc, const std::string& name, std::vector<int64_t> shape,
                int axis, int64_t channels, uint32_t seed) {
  const bool u8 = qc.weight == pb::kUint8;
  g.Initializer(InitializerFrom(name + "q", RandomInts(qc.weight, shape, seed, u8 ? 1 : -127, u8 ? 255 : 127)));
  const int64_t n = qc.per_channel ? channels : 1;
  g.Initializer(InitializerFrom(name + "_s", RandomFloats({n}, seed + 1, 0.004f, 0.012f)));
  g.Initializer(InitializerFrom(name + "_z", ZeroPoints(qc.weight, n, u8 ? 128 : 0)));
  g.Node("DequantizeLinear", {name + "q", name + "_s", name + "_z"}, {name}, {AttrInt("axis", axis)},
         "dq_" + name);
}

// x (quantized, fed) -> DequantizeLinear "dq_x" -> "x".
void AddSource(GraphBuilder& g, const QdqCase& qc, std::vector<int64_t> shape) {
  g.Input("xq", qc.act, shape);
  g.Initializer(InitializerFrom("x_s", Floats({}, {0.02f})));
  g.Initializer(InitializerFrom("x_z", ScalarOf(qc.act, qc.x_zp)));
  g.Node("DequantizeLinear", {"xq", "x_s", "x_z"}, {"x"}, {}, "dq_x");
}

// `in` -> [Relu] -> QuantizeLinear "q" -> output "yq".
void AddOutput(GraphBuilder& g, const QdqCase& qc, const std::string& in, float scale) {
  std::string v = in;
  if (qc.relu) {
    g.Node("Relu", {in}, {"r"}, {}, "relu");
    v = "r";
  }
  g.Initializer(InitializerFrom("y_s", Floats({}, {scale})));
  g.Initializer(InitializerFrom("y_z", ScalarOf(qc.act, qc.y_zp)));
  g.Node("QuantizeLinear", {v, "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", qc.act);
}

runner::Tensor Source(const QdqCase& qc, std::vector<int64_t> shape, uint32_t seed) {
  return qc.act == pb::kInt8 ? RandomInts(pb::kInt8, shape, seed, -128, 127)
                             : RandomInts(pb::kUint8, shape, seed, 0, 255);
}

pb::GraphProto ConvGraph(const QdqCase& qc, int64_t c, int64_t m, int64_t group, int64_t k, int64_t hw) {
  GraphBuilder g("g");
  AddSource(g, qc, {1, c, hw, hw});
  AddWeights(g, qc, "w", {m, c / group, k, k}, 0, m, 11);
  std::vector<std::string> in = {"x", "w"};
  if (qc.bias) {
    g.Initializer(InitializerFrom("b", RandomFloats({m}, 12, -0.5f, 0.5f)));
    in.push_back("b");
  }
  const int64_t p = k / 2;
  g.Node("Conv", in, {"c"}, {AttrInt("group", group), AttrInts("pads", {p, p, p, p})}, "conv");
  AddOutput(g, qc, "c", 0.02f);
  return g.Build();
}

TEST(CpuQdqTest, Conv) {
  struct Shape {
    int64_t c, m, group, k, hw;
  };
  for (const QdqCase& qc : Cases()) {
    for (Shape s : {Shape{16, 32, 1, 3, 9}, Shape{32, 16, 1, 1, 12}, Shape{16, 16, 16, 3, 8}}) {
      SCOPED_TRACE(qc.name + " c" + std::to_string(s.c) + " g" + std::to_string(s.group));
      ExpectQuantized(ConvGraph(qc, s.c, s.m, s.group, s.k, s.hw), {{"xq", Source(qc, {1, s.c, s.hw, s.hw}, 5)}},
                      "dq_x", true);
    }
  }
}

// A quantized Conv inside an If branch (reading the quantized source from
// the main graph) runs as an int8 chain there too.
TEST(CpuQdqTest, ChainInsideAnIfBranch) {
  for (const QdqCase& qc : Cases()) {
    SCOPED_TRACE(qc.name);
    pb::GraphProto branch = ConvGraph(qc, 16, 16, 1, 3, 8);
    branch.name = "then";
    branch.input.clear();
    pb::GraphProto other =
        GraphBuilder("else").Node("Identity", {"xq"}, {"same"}).Output("same", qc.act).Build();
    GraphBuilder g("g");
    g.Input("xq", qc.act, std::vector<int64_t>{1, 16, 8, 8})
        .Input("cond", pb::kBool, std::vector<int64_t>{})
        .Node("If", {"cond"}, {"yq"}, {AttrGraph("then_branch", branch), AttrGraph("else_branch", other)},
              "if")
        .Output("yq", qc.act);
    ExpectQuantized(g.Build(), {{"xq", Source(qc, {1, 16, 8, 8}, 5)}, {"cond", BoolScalar(true)}}, "dq_x",
                    true);
  }
}

TEST(CpuQdqTest, MatMul) {
  for (const QdqCase& qc : Cases()) {
    SCOPED_TRACE(qc.name);
    GraphBuilder g("g");
    AddSource(g, qc, {2, 5, 64});
    AddWeights(g, qc, "w", {64, 24}, 1, 24, 21);
    g.Node("MatMul", {"x", "w"}, {"c"}, {}, "matmul");
    AddOutput(g, qc, "c", 0.01f);
    ExpectQuantized(g.Build(), {{"xq", Source(qc, {2, 5, 64}, 6)}}, "dq_x", true);
  }
}

TEST(CpuQdqTest, Gemm) {
  for (const QdqCase& qc : Cases()) {
    for (bool trans_b : {false, true}) {
      SCOPED_TRACE(qc.name + (trans_b ? " transB" : ""));
      GraphBuilder g("g");
      AddSource(g, qc, {6, 48});
      AddWeights(g, qc, "w", trans_b ? std::vector<int64_t>{24, 48} : std::vector<int64_t>{48, 24}, trans_b ? 0 : 1,
                 24, 31);
      std::vector<std::string> in = {"x", "w"};
      if (qc.bias) {
        g.Initializer(InitializerFrom("b", RandomFloats({24}, 32, -0.3f, 0.3f)));
        in.push_back("b");
      }
      g.Node("Gemm", in, {"c"},
             {AttrInt("transB", trans_b ? 1 : 0), AttrFloat("alpha", 0.75f), AttrFloat("beta", 1.5f)}, "gemm");
      AddOutput(g, qc, "c", 0.01f);
      ExpectQuantized(g.Build(), {{"xq", Source(qc, {6, 48}, 7)}}, "dq_x", true);
    }
  }
}

// A weighted op whose result is not quantized again (a classifier's last
// Gemm): the int8 primitive writes float32, equal to the reference's float
// computation up to float rounding (the int8 sum is exact).
TEST(CpuQdqTest, FloatResultOfAWeightedOp) {
  for (int form = 0; form < 2; ++form) {
    SCOPED_TRACE(form == 0 ? "Gemm" : "Conv + Relu");
    QdqCase qc = Cases()[0];
    GraphBuilder g("g");
    std::vector<int64_t> x_shape = form == 0 ? std::vector<int64_t>{3, 64} : std::vector<int64_t>{1, 16, 9, 9};
    AddSource(g, qc, x_shape);
    if (form == 0) {
      AddWeights(g, qc, "w", {10, 64}, 0, 10, 33);
      g.Initializer(InitializerFrom("b", RandomFloats({10}, 34, -1.f, 1.f)));
      g.Node("Gemm", {"x", "w", "b"}, {"y"}, {AttrInt("transB", 1)}, "gemm").Output("y", pb::kFloat);
    } else {
      AddWeights(g, qc, "w", {8, 16, 3, 3}, 0, 8, 35);
      g.Node("Conv", {"x", "w"}, {"c"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv");
      g.Node("Relu", {"c"}, {"y"}, {}, "relu").Output("y", pb::kFloat);
    }
    const Feeds feeds = {{"xq", Source(qc, x_shape, 36)}};
    auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
    const int64_t fallbacks = runner::ChainFallbackRuns();
    auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
    ASSERT_TRUE(ref.ok() && cpu.ok());
    ASSERT_EQ(cpu->outputs[0].dtype(), pb::kFloat);
    ExpectTensorsClose(ref->outputs[0], cpu->outputs[0], 1e-4f, 1e-5f, "y");
    // One step from the source (dq_w is folded when the session starts).
    EXPECT_EQ(cpu->ran, (std::vector<std::string>{"dq_w", "dq_x"}));
    if (runner::cpu::QuantizedChainsRunInt8()) {
      EXPECT_EQ(runner::ChainFallbackRuns(), fallbacks);
    }
  }
}

// MatMul of two quantized activations (attention's Q K^T): an int8 matmul
// into int32 with both zero points taken out exactly, one step at most.
// Batched with equal batch dims, and with a 2-D second operand; u8 and s8;
// a Relu before the QuantizeLinear.
TEST(CpuQdqTest, MatMulOfTwoActivations) {
  for (const QdqCase& qc : Cases()) {
    for (bool batched : {true, false}) {
      SCOPED_TRACE(qc.name + (batched ? " batched" : " 2-D B"));
      GraphBuilder g("g");
      AddSource(g, qc, {2, 3, 16, 40});
      const std::vector<int64_t> b_shape = batched ? std::vector<int64_t>{2, 3, 40, 24} : std::vector<int64_t>{40, 24};
      g.Input("bq", qc.weight, b_shape);
      g.Initializer(InitializerFrom("b_s", Floats({}, {0.03f})));
      g.Initializer(InitializerFrom("b_z", ScalarOf(qc.weight, qc.weight == pb::kUint8 ? 140 : -9)));
      g.Node("DequantizeLinear", {"bq", "b_s", "b_z"}, {"b"}, {}, "dq_b");
      g.Node("MatMul", {"x", "b"}, {"c"}, {}, "matmul");
      AddOutput(g, qc, "c", 0.4f);
      const Feeds feeds = {{"xq", Source(qc, {2, 3, 16, 40}, 28)},
                           {"bq", qc.weight == pb::kInt8 ? RandomInts(pb::kInt8, b_shape, 29, -128, 127)
                                                         : RandomInts(pb::kUint8, b_shape, 29, 0, 255)}};
      ExpectQuantized(g.Build(), feeds, "dq_x", true);
    }
  }
}

// The source's DequantizeLinear also feeds another node: the chain starts
// at the Conv and reads the quantized source directly.
TEST(CpuQdqTest, SharedSourceDequantize) {
  QdqCase qc = Cases()[0];
  pb::GraphProto graph = ConvGraph(qc, 16, 16, 1, 3, 8);
  GraphBuilder g("g");
  g.graph() = graph;
  g.Node("Relu", {"x"}, {"x_relu"}, {}, "other").Output("x_relu");
  ExpectQuantized(g.Build(), {{"xq", Source(qc, {1, 16, 8, 8}, 8)}}, "conv", true);
}

// Two quantized convolutions in a row: the int8 result of the first feeds
// the second directly. Each is within one step of the reference; a step
// of the first can move the second by one more.
TEST(CpuQdqTest, TwoConvsInARow) {
  QdqCase qc = Cases()[1];
  GraphBuilder g("g");
  g.graph() = ConvGraph(qc, 16, 16, 1, 3, 8);
  // Rename the first output and append a second quantized convolution.
  for (auto& node : g.graph().node) {
    if (node.name == "q") node.name = "q1";
  }
  g.graph().output.clear();
  g.Node("DequantizeLinear", {"yq", "y_s", "y_z"}, {"x2"}, {}, "dq2");
  AddWeights(g, qc, "w2", {16, 16, 3, 3}, 0, 16, 41);
  g.Node("Conv", {"x2", "w2"}, {"c2"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv2");
  g.Initializer(InitializerFrom("y2_s", Floats({}, {0.05f})));
  g.Initializer(InitializerFrom("y2_z", ScalarOf(qc.act, 40)));
  g.Node("QuantizeLinear", {"c2", "y2_s", "y2_z"}, {"y2"}, {}, "q").Output("y2", qc.act);
  ExpectQuantized(g.Build(), {{"xq", Source(qc, {1, 16, 8, 8}, 9)}}, "dq_x", true, 2);
}

// Almost-matching patterns. A scale that is a graph input (not constant):
// no chain; weights with a non-zero int8 zero point (asymmetric): a chain
// whose kernel runs it node by node. Both stay correct.
TEST(CpuQdqTest, NearMissesTakeTheFloatPath) {
  QdqCase qc = Cases()[0];
  {
    SCOPED_TRACE("non-constant scale");
    pb::GraphProto graph = ConvGraph(qc, 16, 16, 1, 3, 8);
    GraphBuilder g("g");
    g.graph() = graph;
    auto& inits = g.graph().initializer;
    for (size_t i = 0; i < inits.size(); ++i) {
      if (inits[i].name == "x_s") inits.erase(inits.begin() + static_cast<std::ptrdiff_t>(i));
    }
    g.Input("x_s", pb::kFloat, std::vector<int64_t>{});
    ExpectQuantized(g.Build(), {{"xq", Source(qc, {1, 16, 8, 8}, 10)}, {"x_s", Floats({}, {0.02f})}}, "conv",
                    false);
  }
  {
    SCOPED_TRACE("asymmetric weights");
    pb::GraphProto graph = ConvGraph(qc, 16, 16, 1, 3, 8);
    for (auto& t : graph.initializer) {
      if (t.name == "w_z") t = InitializerFrom("w_z", ZeroPoints(pb::kInt8, 16, 3));
    }
    auto ref = RunOn(graph, runner::Backend::kReference, {{"xq", Source(qc, {1, 16, 8, 8}, 11)}});
    const int64_t fallbacks = runner::ChainFallbackRuns();
    auto cpu = RunOn(graph, runner::Backend::kCpu, {{"xq", Source(qc, {1, 16, 8, 8}, 11)}});
    ASSERT_TRUE(ref.ok() && cpu.ok());
    EXPECT_GT(runner::ChainFallbackRuns(), fallbacks);
    ExpectWithinSteps(ref->outputs[0], cpu->outputs[0], 1);
  }
}

// DequantizeLinear -> unary op -> QuantizeLinear: a table, exact.
TEST(CpuQdqTest, TableChainsAreExact) {
  for (int32_t act : {pb::kUint8, pb::kInt8}) {
    for (const char* op : {"Relu", "Sigmoid", "Tanh"}) {
      SCOPED_TRACE(std::string(op) + (act == pb::kInt8 ? " s8" : " u8"));
      QdqCase qc;
      qc.act = act;
      qc.x_zp = act == pb::kInt8 ? -3 : 120;
      qc.y_zp = act == pb::kInt8 ? 2 : 30;
      GraphBuilder g("g");
      AddSource(g, qc, {2, 3, 17, 5});
      g.Node(op, {"x"}, {"u"}, {}, "op");
      g.Initializer(InitializerFrom("y_s", Floats({}, {std::string(op) == "Relu" ? 0.03f : 0.005f})));
      g.Initializer(InitializerFrom("y_z", ScalarOf(act, qc.y_zp)));
      g.Node("QuantizeLinear", {"u", "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", act);
      const Feeds feeds = {{"xq", Source(qc, {2, 3, 17, 5}, 12)}};
      auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
      auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
      ASSERT_TRUE(ref.ok() && cpu.ok());
      ExpectTensorsClose(ref->outputs[0], cpu->outputs[0], 0, 0, "table");
      EXPECT_EQ(cpu->ran, std::vector<std::string>{"dq_x"});
    }
  }
}

// Add / Sub / Mul / Div of dequantized values or float constants, then
// QuantizeLinear: one exact pass. Dequantized operands shared with another
// reader stay computed; the others are skipped.
TEST(CpuQdqTest, BinaryChainsAreExact) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    for (int form = 0; form < 4; ++form) {  // both quantized; bias constant; scalar constant; shared DQ
      SCOPED_TRACE(std::string(op) + " form " + std::to_string(form));
      QdqCase qc;
      qc.act = form % 2 == 0 ? pb::kUint8 : pb::kInt8;
      qc.x_zp = form % 2 == 0 ? 130 : -4;
      GraphBuilder g("g");
      AddSource(g, qc, {2, 7, 40});
      std::string other;
      if (form == 0 || form == 3) {
        g.Input("bq", qc.act, std::vector<int64_t>{2, 7, 40});
        g.Initializer(InitializerFrom("b_s", Floats({}, {0.03f})));
        g.Initializer(InitializerFrom("b_z", ScalarOf(qc.act, qc.act == pb::kInt8 ? 9 : 100)));
        g.Node("DequantizeLinear", {"bq", "b_s", "b_z"}, {"b"}, {}, "dq_b");
      } else {
        g.Initializer(InitializerFrom("b", form == 1 ? RandomFloats({40}, 14, 0.5f, 2.f) : Floats({}, {1.7f})));
      }
      g.Node(op, {"x", "b"}, {"u"}, {}, "op");
      if (form == 3) g.Node("Relu", {"b"}, {"b_relu"}, {}, "other").Output("b_relu");
      g.Initializer(InitializerFrom("y_s", Floats({}, {std::string(op) == "Mul" ? 0.01f : 0.03f})));
      g.Initializer(InitializerFrom("y_z", ScalarOf(qc.act, 5)));
      g.Node("QuantizeLinear", {"u", "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", qc.act);
      Feeds feeds = {{"xq", Source(qc, {2, 7, 40}, 15)}};
      if (form == 0 || form == 3) feeds.push_back({"bq", Source(qc, {2, 7, 40}, 16)});
      auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
      const int64_t fallbacks = runner::ChainFallbackRuns();
      auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
      ASSERT_TRUE(ref.ok() && cpu.ok());
      EXPECT_EQ(runner::ChainFallbackRuns(), fallbacks);
      for (size_t i = 0; i < ref->outputs.size(); ++i) {
        ExpectTensorsClose(ref->outputs[i], cpu->outputs[i], 0, 0, "output " + std::to_string(i));
      }
      std::vector<std::string> want = {"op"};
      if (form == 2) want = {"dq_x"};  // a scalar constant: a lookup chain
      if (form == 3) want = {"dq_b", "other", "op"};  // the chain runs where its QuantizeLinear was
      EXPECT_EQ(cpu->ran, want);
    }
  }
}

// DequantizeLinear -> [Relu | Clip] -> MaxPool -> QuantizeLinear: the 8-bit
// values pooled, then looked up: exact. The same parameters on both sides
// and no step: the pooled 8-bit values themselves. Negative scales (a
// decreasing table or QuantizeLinear, which do not commute with the
// maximum): node by node.
TEST(CpuQdqTest, MaxPoolChainsAreExact) {
  for (int form = 0; form < 6; ++form) {
    SCOPED_TRACE("form " + std::to_string(form));
    QdqCase qc;
    qc.act = form == 2 ? pb::kInt8 : pb::kUint8;
    qc.x_zp = form == 2 ? -7 : 118;
    GraphBuilder g("g");
    AddSource(g, qc, {1, 5, 13, 11});
    std::string v = "x";
    if (form == 0 || form == 2) {
      g.Node("Relu", {v}, {"r"}, {}, "relu");
      v = "r";
    } else if (form == 1) {
      g.Initializer(InitializerFrom("lo", Floats({}, {-0.5f})));
      g.Initializer(InitializerFrom("hi", Floats({}, {1.f})));
      g.Node("Clip", {v, "lo", "hi"}, {"r"}, {}, "clip");
      v = "r";
    }
    g.Node("MaxPool", {v}, {"p"},
           {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1})}, "pool");
    const bool same = form == 3;
    g.Initializer(InitializerFrom("y_s", Floats({}, {same ? 0.02f : form == 5 ? -0.03f : 0.013f})));
    g.Initializer(InitializerFrom("y_z", ScalarOf(qc.act, same ? qc.x_zp : qc.act == pb::kInt8 ? -100 : 9)));
    if (form >= 4) {  // a negative scale on the source (and, form 5, the result)
      for (auto& t : g.graph().initializer) {
        if (t.name == "x_s") t = InitializerFrom("x_s", Floats({}, {-0.02f}));
      }
    }
    g.Node("QuantizeLinear", {"p", "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", qc.act);
    const Feeds feeds = {{"xq", Source(qc, {1, 5, 13, 11}, 30)}};
    auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
    const int64_t fallbacks = runner::ChainFallbackRuns();
    auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ExpectTensorsClose(ref->outputs[0], cpu->outputs[0], 0, 0, "yq");
    EXPECT_EQ(cpu->ran, std::vector<std::string>{"dq_x"});
    EXPECT_EQ(runner::ChainFallbackRuns() > fallbacks, form >= 4);
  }
}

// Concat of dequantized tensors, then QuantizeLinear: each input
// requantized by a table (a copy when its parameters are the output's),
// exact, along any axis; u8 and s8 inputs into one output type.
TEST(CpuQdqTest, ConcatChainsAreExact) {
  for (int axis : {1, -1, 0}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    GraphBuilder g("g");
    std::vector<std::string> ins;
    const std::vector<std::vector<int64_t>> shapes = {{2, 3, 5}, {2, 3, 5}, {2, 3, 5}};
    for (int i = 0; i < 3; ++i) {
      const std::string n = "in" + std::to_string(i);
      const int32_t type = i == 2 ? pb::kInt8 : pb::kUint8;
      g.Input(n + "q", type, shapes[static_cast<size_t>(i)]);
      g.Initializer(InitializerFrom(n + "_s", Floats({}, {i == 0 ? 0.02f : 0.013f + 0.01f * static_cast<float>(i)})));
      g.Initializer(InitializerFrom(n + "_z", ScalarOf(type, i == 0 ? 10 : i == 1 ? 200 : -3)));
      g.Node("DequantizeLinear", {n + "q", n + "_s", n + "_z"}, {n}, {}, "dq" + std::to_string(i));
      ins.push_back(n);
    }
    g.Node("Concat", ins, {"c"}, {AttrInt("axis", axis)}, "concat");
    g.Initializer(InitializerFrom("y_s", Floats({}, {0.02f})));  // input 0's parameters: a copy
    g.Initializer(InitializerFrom("y_z", ScalarOf(pb::kUint8, 10)));
    g.Node("QuantizeLinear", {"c", "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", pb::kUint8);
    Feeds feeds;
    for (int i = 0; i < 3; ++i) {
      const int32_t type = i == 2 ? pb::kInt8 : pb::kUint8;
      feeds.push_back({"in" + std::to_string(i) + "q", RandomInts(type, shapes[static_cast<size_t>(i)], 40 + i,
                                                                   type == pb::kInt8 ? -128 : 0,
                                                                   type == pb::kInt8 ? 127 : 255)});
    }
    auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
    const int64_t fallbacks = runner::ChainFallbackRuns();
    auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
    ASSERT_TRUE(ref.ok() && cpu.ok());
    ExpectTensorsClose(ref->outputs[0], cpu->outputs[0], 0, 0, "yq");
    EXPECT_EQ(runner::ChainFallbackRuns(), fallbacks);
    EXPECT_EQ(cpu->ran, std::vector<std::string>{"concat"});
  }
}

// The pooling branch of an Inception module: the DequantizeLinear also
// feeds another reader, so the chain starts at the MaxPool (ceil rounding
// here) and reads the 8-bit source itself.
TEST(CpuQdqTest, MaxPoolChainAfterASharedDequantize) {
  QdqCase qc;
  qc.x_zp = 30;
  GraphBuilder g("g");
  AddSource(g, qc, {1, 4, 12, 9});
  g.Node("MaxPool", {"x"}, {"p"},
         {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}), AttrInt("ceil_mode", 1)}, "pool");
  g.Initializer(InitializerFrom("y_s", Floats({}, {0.015f})));
  g.Initializer(InitializerFrom("y_z", ScalarOf(pb::kUint8, 4)));
  g.Node("QuantizeLinear", {"p", "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", pb::kUint8);
  g.Node("Sigmoid", {"x"}, {"s"}, {}, "other").Output("s", pb::kFloat);
  const Feeds feeds = {{"xq", Source(qc, {1, 4, 12, 9}, 31)}};
  auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
  const int64_t fallbacks = runner::ChainFallbackRuns();
  auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
  ASSERT_TRUE(ref.ok() && cpu.ok());
  ExpectTensorsClose(ref->outputs[0], cpu->outputs[0], 0, 0, "yq");
  EXPECT_EQ(runner::ChainFallbackRuns(), fallbacks);
  EXPECT_EQ(cpu->ran, (std::vector<std::string>{"dq_x", "pool", "other"}));
}

// A Relu on values quantized from zero with the same parameters is the
// identity: the source passes through (also when the source is read again).
TEST(CpuQdqTest, IdentityLookupPassesTheSourceThrough) {
  QdqCase qc;
  qc.x_zp = 0;
  GraphBuilder g("g");
  AddSource(g, qc, {2, 3, 8});
  g.Node("Relu", {"x"}, {"r"}, {}, "relu");
  g.Initializer(InitializerFrom("y_z", ScalarOf(pb::kUint8, 0)));
  g.Node("QuantizeLinear", {"r", "x_s", "y_z"}, {"yq"}, {}, "q").Output("yq", pb::kUint8);
  g.Node("DequantizeLinear", {"yq", "x_s", "y_z"}, {"y2"}, {}, "dq2");
  g.Node("Neg", {"y2"}, {"n"}, {}, "neg");
  g.Node("QuantizeLinear", {"n", "x_s", "x_z"}, {"nq"}, {}, "q2").Output("nq", pb::kUint8);
  const Feeds feeds = {{"xq", Source(qc, {2, 3, 8}, 27)}};
  auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
  auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
  ASSERT_TRUE(ref.ok() && cpu.ok());
  ExpectTensorsClose(feeds[0].second, cpu->outputs[0], 0, 0, "identity");
  for (size_t i = 0; i < 2; ++i) ExpectTensorsClose(ref->outputs[i], cpu->outputs[i], 0, 0, "output");
}

// Several elementwise ops of one variable between DequantizeLinear and
// QuantizeLinear, constants of one element at either input: one lookup
// chain (the cpu kernels' Erf may differ from the reference's by an ulp,
// which can move a rounding tie: one step at most). A longer constant
// broadcasts: no lookup chain.
TEST(CpuQdqTest, LookupChainsOfSeveralOps) {
  for (int form = 0; form < 3; ++form) {
    SCOPED_TRACE("form " + std::to_string(form));
    QdqCase qc;
    qc.x_zp = 100;
    GraphBuilder g("g");
    AddSource(g, qc, {2, 3, 40});
    g.Initializer(InitializerFrom("k", form == 2 ? RandomFloats({40}, 3, 1.f, 2.f) : Floats({}, {1.41421354f})));
    g.Initializer(InitializerFrom("one", Floats({}, {1.f})));
    if (form == 1) {
      g.Node("Sub", {"one", "x"}, {"d"}, {}, "op");  // the variable second
      g.Node("Sigmoid", {"d"}, {"e"}, {}, "op2");
    } else {
      g.Node("Div", {"x", "k"}, {"d"}, {}, "op");
      g.Node("Erf", {"d"}, {"e"}, {}, "op2");
    }
    g.Node("Add", {"e", "one"}, {"u"}, {}, "op3");
    g.Initializer(InitializerFrom("y_s", Floats({}, {0.008f})));
    g.Initializer(InitializerFrom("y_z", ScalarOf(pb::kUint8, 3)));
    g.Node("QuantizeLinear", {"u", "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", pb::kUint8);
    const Feeds feeds = {{"xq", Source(qc, {2, 3, 40}, 25)}};
    auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
    auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
    ASSERT_TRUE(ref.ok() && cpu.ok());
    ExpectWithinSteps(ref->outputs[0], cpu->outputs[0], 1);
    if (form < 2) {
      EXPECT_EQ(cpu->ran, std::vector<std::string>{"dq_x"});
    } else {
      EXPECT_GT(cpu->ran.size(), 1u);
    }
  }
}

// A lookup chain whose source x is read again by a later step: a
// written-out HardSwish (either operand order, and the ReLU6 form), SiLU
// (also quantized after its Sigmoid) and GELU. Each is one function of the source byte: the whole chain runs
// as one table, on int8 and uint8 sources; x read a third time stops it.
TEST(CpuQdqTest, LookupChainsJoiningTheirSourceAgain) {
  for (int form = 0; form < 7; ++form) {
    for (int32_t act : {pb::kUint8, pb::kInt8}) {
      SCOPED_TRACE("form " + std::to_string(form) + (act == pb::kInt8 ? " int8" : " uint8"));
      QdqCase qc;
      qc.act = act;
      qc.x_zp = act == pb::kInt8 ? -20 : 100;
      GraphBuilder g("g");
      AddSource(g, qc, {1, 8, 6, 6});
      g.Initializer(InitializerFrom("three", Floats({}, {3.f})));
      g.Initializer(InitializerFrom("zero", Floats({}, {0.f})));
      g.Initializer(InitializerFrom("six", Floats({}, {6.f})));
      g.Initializer(InitializerFrom("one", Floats({}, {1.f})));
      g.Initializer(InitializerFrom("half", Floats({}, {0.5f})));
      g.Initializer(InitializerFrom("sqrt2", Floats({}, {1.41421354f})));
      std::string y = "m";
      switch (form) {
        case 0:
        case 5:
          g.Node("HardSigmoid", {"x"}, {"h"}, {AttrFloat("alpha", 1.f / 6.f)}, "op");
          g.Node("Mul", {"x", "h"}, {"m"}, {}, "mul");
          break;
        case 1:
          g.Node("HardSigmoid", {"x"}, {"h"}, {AttrFloat("alpha", 1.f / 6.f)}, "op");
          g.Node("Mul", {"h", "x"}, {"m"}, {}, "mul");
          break;
        case 2:
          g.Node("Add", {"x", "three"}, {"a"}, {}, "op");
          g.Node("Clip", {"a", "zero", "six"}, {"c"}, {}, "clip");
          g.Node("Mul", {"x", "c"}, {"p"}, {}, "mul");
          g.Node("Div", {"p", "six"}, {"m"}, {}, "div");
          break;
        case 3:
          g.Node("Sigmoid", {"x"}, {"h"}, {}, "op");
          g.Node("Mul", {"h", "x"}, {"m"}, {}, "mul");
          break;
        case 4:
          g.Node("Div", {"x", "sqrt2"}, {"d"}, {}, "op");
          g.Node("Erf", {"d"}, {"e"}, {}, "erf");
          g.Node("Add", {"e", "one"}, {"u"}, {}, "add");
          g.Node("Mul", {"x", "u"}, {"p"}, {}, "mul");
          g.Node("Mul", {"p", "half"}, {"m"}, {}, "half");
          break;
        case 6:  // SiLU quantized after its Sigmoid
          g.Node("Sigmoid", {"x"}, {"h"}, {}, "op");
          g.Initializer(InitializerFrom("h_s", Floats({}, {1.f / 255.f})));
          g.Initializer(InitializerFrom("h_z", ScalarOf(act, act == pb::kInt8 ? -128 : 0)));
          g.Node("QuantizeLinear", {"h", "h_s", "h_z"}, {"hq"}, {}, "q_h");
          g.Node("DequantizeLinear", {"hq", "h_s", "h_z"}, {"hd"}, {}, "dq_h");
          g.Node("Mul", {"x", "hd"}, {"m"}, {}, "mul");
          break;
      }
      if (form == 5) g.Output("x", pb::kFloat);  // a third reader of x
      g.Initializer(InitializerFrom("y_s", Floats({}, {0.01f})));
      g.Initializer(InitializerFrom("y_z", ScalarOf(act, act == pb::kInt8 ? -100 : 30)));
      g.Node("QuantizeLinear", {y, "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", act);
      const Feeds feeds = {{"xq", Source(qc, {1, 8, 6, 6}, 31)}};
      auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
      const int64_t fallbacks = runner::ChainFallbackRuns();
      auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
      ASSERT_TRUE(ref.ok()) << ref.status();
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      EXPECT_EQ(runner::ChainFallbackRuns(), fallbacks);
      const size_t yq = form == 5 ? 1 : 0;
      ExpectWithinSteps(ref->outputs[yq], cpu->outputs[yq], 1);
      if (form == 5) {
        EXPECT_GT(cpu->ran.size(), 1u);
      } else {
        EXPECT_EQ(cpu->ran, std::vector<std::string>{"dq_x"});
      }
    }
  }
}

// The GELU of a quantized x, quantized after its Add: x's DequantizeLinear
// feeds Div (-> Erf -> Add -> QuantizeLinear) and the final Mul. With those
// two readers the whole GELU is one table (the QuantizeLinear and
// DequantizeLinear inside it one more function of x). With a third reader
// (a Relu, quantized) each of the three is a chain that bypasses the
// DequantizeLinear (the Div chain a lookup, the Mul an elementwise chain):
// x is never computed in float.
TEST(CpuQdqTest, LookupChainBypassingASharedDequantize) {
  for (bool third : {false, true}) {
    SCOPED_TRACE(third ? "three readers" : "two readers");
    QdqCase qc;
    qc.x_zp = 128;
    GraphBuilder g("g");
    AddSource(g, qc, {1, 4, 8, 8});
    g.Initializer(InitializerFrom("sqrt2", Floats({}, {1.41421354f})));
    g.Initializer(InitializerFrom("one", Floats({}, {1.f})));
    g.Node("Div", {"x", "sqrt2"}, {"d"}, {}, "div");
    g.Node("Erf", {"d"}, {"e"}, {}, "erf");
    g.Node("Add", {"e", "one"}, {"p"}, {}, "add");
    g.Initializer(InitializerFrom("p_s", Floats({}, {0.008f})));
    g.Initializer(InitializerFrom("p_z", ScalarOf(pb::kUint8, 0)));
    g.Node("QuantizeLinear", {"p", "p_s", "p_z"}, {"pq"}, {}, "q_p");
    g.Node("DequantizeLinear", {"pq", "p_s", "p_z"}, {"pd"}, {}, "dq_p");
    g.Node("Mul", {"x", "pd"}, {"m"}, {}, "mul");
    g.Initializer(InitializerFrom("y_s", Floats({}, {0.02f})));
    g.Initializer(InitializerFrom("y_z", ScalarOf(pb::kUint8, 10)));
    g.Node("QuantizeLinear", {"m", "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", pb::kUint8);
    if (third) {
      g.Node("Relu", {"x"}, {"r"}, {}, "relu");
      g.Node("QuantizeLinear", {"r", "y_s", "y_z"}, {"rq"}, {}, "q_r").Output("rq", pb::kUint8);
    }
    const Feeds feeds = {{"xq", Source(qc, {1, 4, 8, 8}, 26)}};
    auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
    const int64_t fallbacks = runner::ChainFallbackRuns();
    auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
    ASSERT_TRUE(ref.ok() && cpu.ok());
    EXPECT_EQ(runner::ChainFallbackRuns(), fallbacks);
    // As two chains, one step of the lookup can move the product by one more.
    ExpectWithinSteps(ref->outputs[0], cpu->outputs[0], third ? 2 : 1);
    std::vector<std::string> ran = cpu->ran;
    std::sort(ran.begin(), ran.end());
    EXPECT_EQ(ran,
              (third ? std::vector<std::string>{"div", "mul", "relu"} : std::vector<std::string>{"dq_x"}));
  }
}

// A bias longer than the kernel's chunks and not a multiple of them, and a
// quantized scalar operand (repeated in rows that do not divide the
// tensor).
TEST(CpuQdqTest, BinaryBroadcastsLongRowsAndScalars) {
  for (bool scalar : {false, true}) {
    SCOPED_TRACE(scalar ? "scalar" : "long bias");
    QdqCase qc;
    qc.x_zp = 90;
    GraphBuilder g("g");
    AddSource(g, qc, {3, 20000});
    if (scalar) {
      g.Input("bq", pb::kUint8, std::vector<int64_t>{});
      g.Initializer(InitializerFrom("b_s", Floats({}, {0.05f})));
      g.Initializer(InitializerFrom("b_z", ScalarOf(pb::kUint8, 7)));
      g.Node("DequantizeLinear", {"bq", "b_s", "b_z"}, {"b"}, {}, "dq_b");
    } else {
      g.Initializer(InitializerFrom("b", RandomFloats({20000}, 17, -1.f, 1.f)));
    }
    g.Node("Add", {"b", "x"}, {"u"}, {}, "op");
    g.Initializer(InitializerFrom("y_s", Floats({}, {0.02f})));
    g.Initializer(InitializerFrom("y_z", ScalarOf(pb::kUint8, 128)));
    g.Node("QuantizeLinear", {"u", "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", pb::kUint8);
    Feeds feeds = {{"xq", Source(qc, {3, 20000}, 18)}};
    if (scalar) feeds.push_back({"bq", Uint8s({}, {201})});
    auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
    auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
    ASSERT_TRUE(ref.ok() && cpu.ok());
    ExpectTensorsClose(ref->outputs[0], cpu->outputs[0], 0, 0, "yq");
    EXPECT_EQ(cpu->ran, std::vector<std::string>{"op"});
  }
}

// DequantizeLinear -> Transpose / Reshape -> QuantizeLinear with the same
// parameters: the op on the 8-bit tensor (exact); other parameters: node by
// node (still exact).
TEST(CpuQdqTest, DataMovementOnQuantizedTensors) {
  for (const char* op : {"Transpose", "Reshape"}) {
    for (bool same : {true, false}) {
      SCOPED_TRACE(std::string(op) + (same ? " same parameters" : " other parameters"));
      QdqCase qc;
      qc.x_zp = 77;
      GraphBuilder g("g");
      AddSource(g, qc, {2, 6, 10});
      if (std::string(op) == "Transpose") {
        g.Node("Transpose", {"x"}, {"u"}, {AttrInts("perm", {0, 2, 1})}, "op");
      } else {
        g.Initializer(InitializerFrom("shape", Int64s({2}, {12, 10})));
        g.Node("Reshape", {"x", "shape"}, {"u"}, {}, "op");
      }
      g.Initializer(InitializerFrom("y_s", Floats({}, {same ? 0.02f : 0.03f})));
      g.Initializer(InitializerFrom("y_z", ScalarOf(pb::kUint8, 77)));
      g.Node("QuantizeLinear", {"u", "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", pb::kUint8);
      const Feeds feeds = {{"xq", Source(qc, {2, 6, 10}, 19)}};
      auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
      const int64_t fallbacks = runner::ChainFallbackRuns();
      auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
      ASSERT_TRUE(ref.ok() && cpu.ok());
      ExpectTensorsClose(ref->outputs[0], cpu->outputs[0], 0, 0, "yq");
      EXPECT_EQ(runner::ChainFallbackRuns() > fallbacks, !same);
    }
  }
}

// A quantized residual block: conv c1 -> Relu table -> conv c2, whose
// result is added to the Relu's, then a final Relu table. Names: "dq_x"
// (the source's DequantizeLinear), "c1", "c2" (the Conv nodes), "add",
// "relu1", "relu2"; output "outq". `asymmetric_c2`: c2's int8 weights have
// a non-zero zero point, which its int8 kernel does not cover. `conv_out`:
// one more conv "c3" reads the final Relu's result and gives the output.
pb::GraphProto ResidualBlock(bool asymmetric_c2, bool conv_out) {
  QdqCase qc = Cases()[0];
  qc.relu = false;
  GraphBuilder g("g");
  AddSource(g, qc, {1, 16, 8, 8});
  int n = 0;
  // DequantizeLinear of `q` with scale `s` and zero point `z` into a new value.
  auto dq = [&](const std::string& q, float s, int z) {
    const std::string name = "dq" + std::to_string(n++);
    g.Initializer(InitializerFrom(name + "_s", Floats({}, {s})));
    g.Initializer(InitializerFrom(name + "_z", ScalarOf(pb::kUint8, z)));
    g.Node("DequantizeLinear", {q, name + "_s", name + "_z"}, {name}, {}, name);
    return name;
  };
  auto q = [&](const std::string& x, float s, int z, const std::string& name) {
    g.Initializer(InitializerFrom(name + "_s", Floats({}, {s})));
    g.Initializer(InitializerFrom(name + "_z", ScalarOf(pb::kUint8, z)));
    g.Node("QuantizeLinear", {x, name + "_s", name + "_z"}, {name}, {}, name);
    return name;
  };
  auto conv = [&](const std::string& x, const std::string& name, uint32_t seed) {
    AddWeights(g, qc, name + "_w", {16, 16, 3, 3}, 0, 16, seed);
    g.Initializer(InitializerFrom(name + "_b", RandomFloats({16}, seed + 7, -0.5f, 0.5f)));
    g.Node("Conv", {x, name + "_w", name + "_b"}, {name}, {AttrInts("pads", {1, 1, 1, 1})}, name);
    return name;
  };
  std::string c1q = q(conv("x", "c1", 51), 0.05f, 128, "q_c1");
  g.Node("Relu", {dq(c1q, 0.05f, 128)}, {"relu1"}, {}, "relu1");
  std::string r1q = q("relu1", 0.03f, 0, "q_relu1");
  std::string c2q = q(conv(dq(r1q, 0.03f, 0), "c2", 61), 0.05f, 120, "q_c2");
  g.Node("Add", {dq(c2q, 0.05f, 120), dq(r1q, 0.03f, 0)}, {"add"}, {}, "add");
  std::string aq = q("add", 0.06f, 110, "q_add");
  g.Node("Relu", {dq(aq, 0.06f, 110)}, {"relu2"}, {}, "relu2");
  std::string out = q("relu2", 0.04f, 0, "q_relu2");
  if (conv_out) out = q(conv(dq(out, 0.04f, 0), "c3", 71), 0.05f, 128, "q_c3");
  g.Node("Identity", {out}, {"outq"}, {}, "out").Output("outq", pb::kUint8);
  pb::GraphProto graph = g.Build();
  if (asymmetric_c2) {
    for (auto& t : graph.initializer) {
      if (t.name == "c2_w_z") t = InitializerFrom("c2_w_z", ZeroPoints(pb::kInt8, 16, 3));
    }
  }
  return graph;
}

// The layouts the cpu backend's planning gives the quantized chains of
// `graph`, by the name of each chain's QuantizeLinear: "in out" with "c"
// for channels-last and "p" for plain.
std::map<std::string, std::string> PlannedLayouts(const pb::GraphProto& graph) {
  std::map<std::string, std::string> out;
  auto model = ir::FromProto(ModelFromGraph(graph, 19, 9));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return out;
  const ir::Graph& g = (*model)->graph();
  auto order = ir::TopologicalOrder(g);
  EXPECT_TRUE(order.ok());
  if (!order.ok()) return out;
  auto is_constant = [](const ir::Value* v) { return v->IsConstant(); };
  auto is_scalar = [](const ir::Value* v) {
    return v != nullptr && v->initializer() != nullptr && v->initializer()->dims.empty();
  };
  std::vector<runner::FusionChain> chains =
      runner::FindQuantizedChains(*order, g, is_constant, is_scalar, [](const ir::Node*) { return false; });
  // The DequantizeLinear nodes all of whose uses fused kernels bypass.
  absl::flat_hash_map<const ir::Node*, size_t> bypassed;
  for (const runner::FusionChain& c : chains) {
    for (const runner::FusionChain::Bypass& by : c.bypass) ++bypassed[by.dequantize];
  }
  absl::flat_hash_set<const ir::Node*> elided;
  for (const auto& [dq, count] : bypassed) {
    if (count == dq->output(0)->uses().size()) elided.insert(dq);
  }
  runner::PlanQuantizedLayouts(chains, g, elided, [](const ir::Value* v) {
    if (v == nullptr) return true;
    return v->initializer() != nullptr && v->initializer()->dims.empty();
  });
  for (const runner::FusionChain& c : chains) {
    out[c.tail().name()] = std::string(c.nhwc_in ? "c" : "p") + (c.nhwc_out ? "c" : "p");
  }
  return out;
}

// The values between quantized Convs, lookups and elementwise chains stay
// channels-last; a graph output and a graph input are plain.
TEST(CpuQdqTest, ChannelsLastBetweenQuantizedChains) {
  std::map<std::string, std::string> plain_end = PlannedLayouts(ResidualBlock(false, false));
  EXPECT_EQ(plain_end, (std::map<std::string, std::string>{
                           {"q_c1", "pc"}, {"q_relu1", "cc"}, {"q_c2", "cc"}, {"q_add", "cc"}, {"q_relu2", "cp"}}));
  std::map<std::string, std::string> conv_end = PlannedLayouts(ResidualBlock(false, true));
  EXPECT_EQ(conv_end["q_relu2"], "cc");
  EXPECT_EQ(conv_end["q_c3"], "cp");
  for (bool conv_out : {false, true}) {
    for (bool asymmetric : {false, true}) {
      SCOPED_TRACE(std::string(conv_out ? "conv at the end" : "lookup at the end") +
                   (asymmetric ? ", c2 node by node" : ""));
      pb::GraphProto graph = ResidualBlock(asymmetric, conv_out);
      const Feeds feeds = {{"xq", Source(Cases()[0], {1, 16, 8, 8}, 23)}};
      auto ref = RunOn(graph, runner::Backend::kReference, feeds);
      const int64_t fallbacks = runner::ChainFallbackRuns();
      auto cpu = RunOn(graph, runner::Backend::kCpu, feeds);
      ASSERT_TRUE(ref.ok()) << ref.status();
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      // Steps add up along the chain: each int8 Conv is within one step.
      ExpectWithinSteps(ref->outputs[0], cpu->outputs[0], conv_out ? 3 : 2);
      if (runner::cpu::QuantizedChainsRunInt8()) {
        EXPECT_EQ(runner::ChainFallbackRuns() > fallbacks, asymmetric);
      }
    }
  }
}

// Max pooling chains between quantized Convs run channels-last: the one
// after a DequantizeLinear that a Conv reads too (an Inception pooling
// branch), the one after its own DequantizeLinear and a Relu (strided,
// ceil_mode), and one on a plain graph input that changes layout on the
// way. Max pooling is exact: only the Convs add steps.
TEST(CpuQdqTest, ChannelsLastMaxPool) {
  for (const QdqCase& qc : {Cases()[0], Cases()[2]}) {
    SCOPED_TRACE(qc.name);
    GraphBuilder g("g");
    AddSource(g, qc, {1, 8, 9, 9});
    auto requantize = [&](const std::string& v, const std::string& name, float scale, int zp) {
      g.Initializer(InitializerFrom(name + "_s", Floats({}, {scale})));
      g.Initializer(InitializerFrom(name + "_z", ScalarOf(qc.act, zp)));
      g.Node("QuantizeLinear", {v, name + "_s", name + "_z"}, {name + "q"}, {}, "q_" + name);
      g.Node("DequantizeLinear", {name + "q", name + "_s", name + "_z"}, {name + "d"}, {}, "dq_" + name);
    };
    auto conv = [&](const std::string& name, const std::string& x, uint32_t seed) {
      AddWeights(g, qc, name + "_w", {8, 8, 3, 3}, 0, 8, seed);
      g.Node("Conv", {x, name + "_w"}, {name}, {AttrInts("pads", {1, 1, 1, 1})}, name);
    };
    const int zp = qc.act == pb::kInt8 ? -10 : 120;
    conv("a", "x", 71);
    requantize("a", "a", 0.05f, zp);
    conv("b", "ad", 72);
    g.Node("MaxPool", {"ad"}, {"p1"}, {AttrInts("kernel_shape", {3, 3}), AttrInts("pads", {1, 1, 1, 1})},
           "p1");
    requantize("p1", "p1", 0.05f, zp);
    requantize("b", "b", 0.04f, zp);
    g.Node("Relu", {"bd"}, {"r"}, {}, "relu");
    g.Node("MaxPool", {"r"}, {"p2"},
           {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}), AttrInt("ceil_mode", 1)}, "p2");
    requantize("p2", "p2", 0.03f, zp);
    g.Node("DequantizeLinear", {"xq", "x_s", "x_z"}, {"x0"}, {}, "dq_x0");
    g.Node("MaxPool", {"x0"}, {"p0"}, {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})}, "p0");
    requantize("p0", "p0", 0.02f, zp);
    const std::vector<std::pair<std::string, std::string>> heads = {{"c", "p1d"}, {"d", "p2d"}, {"e", "p0d"}};
    for (const auto& [name, x] : heads) {
      conv(name, x, static_cast<uint32_t>(73 + name[0]));
      g.Initializer(InitializerFrom(name + "_ys", Floats({}, {0.08f})));
      g.Initializer(InitializerFrom(name + "_yz", ScalarOf(qc.act, zp)));
      g.Node("QuantizeLinear", {name, name + "_ys", name + "_yz"}, {name + "y"}, {}, "q_" + name)
          .Output(name + "y", qc.act);
    }
    std::map<std::string, std::string> layouts = PlannedLayouts(g.Build());
    EXPECT_EQ(layouts["q_a"], "pc");
    EXPECT_EQ(layouts["q_p1"], "cc");
    EXPECT_EQ(layouts["q_b"], "cc");
    EXPECT_EQ(layouts["q_p2"], "cc");
    EXPECT_EQ(layouts["q_p0"], "pc");
    EXPECT_EQ(layouts["q_c"], "cp");
    const Feeds feeds = {{"xq", Source(qc, {1, 8, 9, 9}, 70)}};
    auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
    const int64_t fallbacks = runner::ChainFallbackRuns();
    auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ASSERT_EQ(ref->outputs.size(), 3u);
    ExpectWithinSteps(ref->outputs[0], cpu->outputs[0], 3);  // a, b (c: Conv after the pool)
    ExpectWithinSteps(ref->outputs[1], cpu->outputs[1], 3);
    ExpectWithinSteps(ref->outputs[2], cpu->outputs[2], 1);  // the pool exact, then one Conv
    if (runner::cpu::QuantizedChainsRunInt8()) {
      EXPECT_EQ(runner::ChainFallbackRuns(), fallbacks);
      for (const std::string& n : cpu->ran) EXPECT_TRUE(n != "q_p1" && n != "q_p2" && n != "q_p0") << n;
    }
  }
}

// A squeeze-and-excitation block as `quantize` writes it: the expanded x's
// DequantizeLinear read by GlobalAveragePool and by the Mul with the gate.
// Both run on the 8-bit values channels-last (the average of the bytes exact,
// the Mul a per-channel row); a GlobalAveragePool on a graph input stays
// plain, and one whose result is a graph output gives it plain.
TEST(CpuQdqTest, SqueezeExcitationRunsChannelsLast) {
  for (const QdqCase& qc : {Cases()[0], Cases()[2]}) {
    for (bool gap_out : {false, true}) {
      SCOPED_TRACE(qc.name + (gap_out ? ", pooled value an output" : ""));
      GraphBuilder g("g");
      AddSource(g, qc, {1, 16, 7, 7});
      const int zp = qc.act == pb::kInt8 ? -10 : 120;
      auto requantize = [&](const std::string& v, const std::string& name, float scale) {
        g.Initializer(InitializerFrom(name + "_s", Floats({}, {scale})));
        g.Initializer(InitializerFrom(name + "_z", ScalarOf(qc.act, zp)));
        g.Node("QuantizeLinear", {v, name + "_s", name + "_z"}, {name + "q"}, {}, "q_" + name);
        g.Node("DequantizeLinear", {name + "q", name + "_s", name + "_z"}, {name + "d"}, {}, "dq_" + name);
      };
      auto conv = [&](const std::string& name, const std::string& x, int64_t m, int64_t c, int64_t k,
                      uint32_t seed) {
        AddWeights(g, qc, name + "_w", {m, c, k, k}, 0, m, seed);
        const int64_t pad = k / 2;
        g.Node("Conv", {x, name + "_w"}, {name}, {AttrInts("pads", {pad, pad, pad, pad})}, name);
      };
      conv("a", "x", 16, 16, 3, 81);
      requantize("a", "a", 0.05f);
      g.Node("GlobalAveragePool", {"ad"}, {"gp"}, {}, "gap");
      requantize("gp", "g", 0.01f);
      conv("f", "gd", 16, 16, 1, 82);
      requantize("f", "f", 0.05f);
      g.Node("Sigmoid", {"fd"}, {"sg"}, {}, "sigmoid");
      requantize("sg", "s", 1.f / 255.f);
      g.Node("Mul", {"ad", "sd"}, {"m"}, {}, "mul");
      requantize("m", "m", 0.03f);
      conv("e", "md", 8, 16, 3, 83);
      g.Initializer(InitializerFrom("e_ys", Floats({}, {0.08f})));
      g.Initializer(InitializerFrom("e_yz", ScalarOf(qc.act, zp)));
      g.Node("QuantizeLinear", {"e", "e_ys", "e_yz"}, {"ey"}, {}, "q_e").Output("ey", qc.act);
      g.Node("DequantizeLinear", {"xq", "x_s", "x_z"}, {"x0"}, {}, "dq_x0");
      g.Node("GlobalAveragePool", {"x0"}, {"g0"}, {}, "gap0");
      g.Initializer(InitializerFrom("g0_s", Floats({}, {0.02f})));
      g.Initializer(InitializerFrom("g0_z", ScalarOf(qc.act, zp)));
      g.Node("QuantizeLinear", {"g0", "g0_s", "g0_z"}, {"g0q"}, {}, "q_g0").Output("g0q", qc.act);
      if (gap_out) g.Output("gq", qc.act);
      std::map<std::string, std::string> layouts = PlannedLayouts(g.Build());
      EXPECT_EQ(layouts["q_a"], "pc");
      EXPECT_EQ(layouts["q_g"], gap_out ? "cp" : "cc");
      EXPECT_EQ(layouts["q_m"], "cc");
      EXPECT_EQ(layouts["q_g0"], "pp");
      // Each channel's bytes in its own band, so that the averages spread.
      runner::Tensor xq = Source(qc, {1, 16, 7, 7}, 80);
      uint8_t* bytes = static_cast<uint8_t*>(xq.mutable_raw());
      for (int64_t i = 0; i < xq.size(); ++i) {
        const int64_t channel = i / 49;
        bytes[i] = static_cast<uint8_t>((channel * 13 + bytes[i] % 48) ^ (qc.act == pb::kInt8 ? 0x80 : 0));
      }
      const Feeds feeds = {{"xq", xq}};
      auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
      const int64_t fallbacks = runner::ChainFallbackRuns();
      auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
      ASSERT_TRUE(ref.ok()) << ref.status();
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      ASSERT_EQ(ref->outputs.size(), gap_out ? 3u : 2u);
      ExpectWithinSteps(ref->outputs[0], cpu->outputs[0], 3);
      ExpectWithinSteps(ref->outputs[1], cpu->outputs[1], 1);  // the average itself
      if (gap_out) ExpectWithinSteps(ref->outputs[2], cpu->outputs[2], 1);
      if (runner::cpu::QuantizedChainsRunInt8()) {
        EXPECT_EQ(runner::ChainFallbackRuns(), fallbacks);
        for (const std::string& n : cpu->ran) EXPECT_TRUE(n != "q_g" && n != "q_g0" && n != "q_m") << n;
      }
    }
  }
}

// ONNX Runtime's QOperator form: QLinearConv (int32 bias, per-channel or
// per-tensor weights), MaxPool of its 8-bit result, QLinearConv, and a
// QLinearMatMul. The cpu backend writes them out as the QDQ pattern and runs
// them as int8 chains (the nodes' own names then never run); per-channel
// weights below opset 13, where DequantizeLinear has no axis, run as
// QLinearConv kernels (and the MaxPool on their result as it is).
TEST(CpuQdqTest, QOperatorConvAndMatMulRunAsQuantizedChains) {
  struct Case {
    const char* name;
    bool per_channel;
    int64_t opset;
    bool expanded;
  };
  for (const Case& c : {Case{"per channel", true, 13, true}, Case{"per tensor", false, 10, true},
                        Case{"per channel at 12", true, 12, false}}) {
    SCOPED_TRACE(c.name);
    QdqCase qc = Cases()[0];
    qc.per_channel = c.per_channel;
    GraphBuilder g("g");
    g.Input("xq", qc.act, std::vector<int64_t>{1, 8, 6, 6});
    g.Initializer(InitializerFrom("x_s", Floats({}, {0.02f})));
    g.Initializer(InitializerFrom("x_z", ScalarOf(qc.act, 7)));
    auto weights = [&](const std::string& name, std::vector<int64_t> shape, int64_t channels, uint32_t seed) {
      g.Initializer(InitializerFrom(name + "q", RandomInts(pb::kInt8, shape, seed, -127, 127)));
      const int64_t n = c.per_channel ? channels : 1;
      g.Initializer(InitializerFrom(
          name + "_s", c.per_channel ? RandomFloats({n}, seed + 1, 0.004f, 0.012f) : Floats({}, {0.008f})));
      g.Initializer(
          InitializerFrom(name + "_z", c.per_channel ? ZeroPoints(pb::kInt8, n, 0) : ScalarOf(pb::kInt8, 0)));
    };
    weights("w1", {8, 8, 3, 3}, 8, 91);
    g.Initializer(InitializerFrom("b1", RandomInts(pb::kInt32, {8}, 93, -2000, 2000)));
    g.Initializer(InitializerFrom("y1_s", Floats({}, {0.05f})));
    g.Initializer(InitializerFrom("y1_z", ScalarOf(qc.act, 120)));
    g.Node("QLinearConv", {"xq", "x_s", "x_z", "w1q", "w1_s", "w1_z", "y1_s", "y1_z", "b1"}, {"y1q"},
           {AttrInts("pads", {1, 1, 1, 1})}, "qc1");
    weights("w2", {6, 8, 1, 1}, 6, 94);
    g.Initializer(InitializerFrom("y2_s", Floats({}, {0.04f})));
    g.Initializer(InitializerFrom("y2_z", ScalarOf(qc.act, 128)));
    g.Node("MaxPool", {"y1q"}, {"pq"}, {AttrInts("kernel_shape", {3, 3}), AttrInts("pads", {1, 1, 1, 1})},
           "pool");
    g.Node("QLinearConv", {"pq", "y1_s", "y1_z", "w2q", "w2_s", "w2_z", "y2_s", "y2_z"}, {"y2q"}, {}, "qc2")
        .Output("y2q", qc.act);
    weights("m", {6, 5}, 5, 95);
    g.Initializer(InitializerFrom("ym_s", Floats({}, {0.06f})));
    g.Initializer(InitializerFrom("ym_z", ScalarOf(qc.act, 110)));
    g.Node("Transpose", {"y2q"}, {"y2t"}, {AttrInts("perm", {0, 2, 3, 1})}, "t");
    g.Node("QLinearMatMul", {"y2t", "y2_s", "y2_z", "mq", "m_s", "m_z", "ym_s", "ym_z"}, {"ytq"}, {}, "qmm2")
        .Output("ytq", qc.act);
    const Feeds feeds = {{"xq", Source(qc, {1, 8, 6, 6}, 90)}};
    auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds, c.opset);
    const int64_t fallbacks = runner::ChainFallbackRuns();
    auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds, c.opset);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ASSERT_EQ(cpu->outputs.size(), 2u);
    ExpectWithinSteps(ref->outputs[0], cpu->outputs[0], 2);
    ExpectWithinSteps(ref->outputs[1], cpu->outputs[1], 3);
    if (!runner::cpu::QuantizedChainsRunInt8()) continue;
    EXPECT_EQ(runner::ChainFallbackRuns(), fallbacks);
    int own = 0;
    for (const std::string& n : cpu->ran) own += n == "qc1" || n == "qc2" || n == "qmm2" || n == "pool";
    EXPECT_EQ(own, c.expanded ? 0 : 4);
  }
}

// A SiLU in QOperator form (QLinearSigmoid and QLinearMul, each written out
// with its own DequantizeLinear of x): the two DequantizeLinear nodes of
// one source with the same parameters merge, and the SiLU is one table.
TEST(CpuQdqTest, DuplicateDequantizersMergeIntoOneLookup) {
  QdqCase qc;
  qc.x_zp = 100;
  GraphBuilder g("g");
  AddSource(g, qc, {1, 4, 6, 6});
  g.Node("DequantizeLinear", {"xq", "x_s", "x_z"}, {"x2"}, {}, "dq_x2");
  g.Node("Sigmoid", {"x"}, {"h"}, {}, "sigmoid");
  g.Initializer(InitializerFrom("h_s", Floats({}, {1.f / 255.f})));
  g.Initializer(InitializerFrom("h_z", ScalarOf(pb::kUint8, 0)));
  g.Node("QuantizeLinear", {"h", "h_s", "h_z"}, {"hq"}, {}, "q_h");
  g.Node("DequantizeLinear", {"hq", "h_s", "h_z"}, {"hd"}, {}, "dq_h");
  g.Node("Mul", {"x2", "hd"}, {"m"}, {}, "mul");
  g.Initializer(InitializerFrom("y_s", Floats({}, {0.01f})));
  g.Initializer(InitializerFrom("y_z", ScalarOf(pb::kUint8, 30)));
  g.Node("QuantizeLinear", {"m", "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", pb::kUint8);
  const Feeds feeds = {{"xq", Source(qc, {1, 4, 6, 6}, 98)}};
  auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
  auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ExpectWithinSteps(ref->outputs[0], cpu->outputs[0], 1);
  if (runner::cpu::QuantizedChainsRunInt8()) {
    EXPECT_EQ(cpu->ran, std::vector<std::string>{"dq_x"});
  }
}

// A QLinearConv whose parameters break the operator's rules (an int64
// bias, an int32 x_scale) is not written out: its own kernel refuses it,
// naming it, as on the reference backend.
TEST(CpuQdqTest, MalformedQLinearConvKeepsItsOwnError) {
  for (bool bad_bias : {true, false}) {
    SCOPED_TRACE(bad_bias ? "int64 bias" : "int32 x_scale");
    GraphBuilder g("g");
    g.Input("xq", pb::kUint8, std::vector<int64_t>{1, 4, 5, 5});
    g.Initializer(InitializerFrom("x_s", bad_bias ? Floats({}, {0.02f}) : Int32s({}, {2})));
    g.Initializer(InitializerFrom("x_z", ScalarOf(pb::kUint8, 7)));
    g.Initializer(InitializerFrom("wq", RandomInts(pb::kInt8, {4, 4, 3, 3}, 96, -127, 127)));
    g.Initializer(InitializerFrom("w_s", Floats({}, {0.01f})));
    g.Initializer(InitializerFrom("w_z", ScalarOf(pb::kInt8, 0)));
    g.Initializer(InitializerFrom("y_s", Floats({}, {0.05f})));
    g.Initializer(InitializerFrom("y_z", ScalarOf(pb::kUint8, 100)));
    g.Initializer(InitializerFrom("b", bad_bias ? Int64s({4}, {1, 2, 3, 4}) : Int32s({4}, {1, 2, 3, 4})));
    g.Node("QLinearConv", {"xq", "x_s", "x_z", "wq", "w_s", "w_z", "y_s", "y_z", "b"}, {"yq"}, {}, "qc")
        .Output("yq", pb::kUint8);
    const Feeds feeds = {{"xq", Source(Cases()[0], {1, 4, 5, 5}, 97)}};
    auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
    ASSERT_FALSE(cpu.ok());
    EXPECT_NE(
        std::string(cpu.status().message()).find(bad_bias ? "B must be int32" : "x_scale must be a float"),
        std::string::npos)
        << cpu.status();
  }
}

// DynamicQuantizeLinear on the cpu backend (vectorized range and
// quantization) agrees bit for bit with the reference: NaN skipped by the
// range and quantized to the zero point, infinities, ties to even, tensors
// that hold no positive or no negative value, one element, and tensors long
// enough to be split into chunks (with a tail that is not a whole vector).
TEST(CpuQdqTest, DynamicQuantizeLinearIsExact) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> inputs = {{-2, 0, 253, nan, 1.5f, 2.5f},
                                            {nan},
                                            {0, 0, 0},
                                            {-3, -1, -0.5f},
                                            {4, 8, 0.25f},
                                            {7},
                                            {1, inf, -2},
                                            {-inf, 1}};
  std::vector<float> big(700001);
  uint32_t state = 12345;
  for (float& v : big) {
    state = state * 1664525u + 1013904223u;
    v = (static_cast<float>(state >> 8) / static_cast<float>(1 << 24) - 0.3f) * 7.f;
  }
  big[123457] = nan;
  big[700000] = 9.5f;  // the maximum, the last element (past the last whole vector)
  inputs.push_back(big);
  inputs.push_back(std::vector<float>(big.begin(), big.begin() + 37));
  for (size_t k = 0; k < inputs.size(); ++k) {
    SCOPED_TRACE(k);
    const int64_t n = static_cast<int64_t>(inputs[k].size());
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, n});
    g.Node("DynamicQuantizeLinear", {"x"}, {"y", "s", "z"}, {}, "dql");
    g.Output("y", pb::kUint8).Output("s", pb::kFloat).Output("z", pb::kUint8);
    const Feeds feeds = {{"x", Floats({1, n}, inputs[k])}};
    auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds, 11);
    auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds, 11);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_EQ(Values<uint8_t>(cpu->outputs[0]), Values<uint8_t>(ref->outputs[0]));
    EXPECT_EQ(Values<float>(cpu->outputs[1]), Values<float>(ref->outputs[1]));
    EXPECT_EQ(Values<uint8_t>(cpu->outputs[2]), Values<uint8_t>(ref->outputs[2]));
    if (k == 0) {
      // Range [-2, 253]: scale 1, zero point 2; NaN is the zero point, 1.5 and 2.5 round to 2.
      EXPECT_EQ(Values<float>(cpu->outputs[1]), std::vector<float>{1.f});
      EXPECT_EQ(Values<uint8_t>(cpu->outputs[0]), (std::vector<uint8_t>{0, 2, 255, 2, 4, 4}));
    }
    if (k == 8) {
      float lo = 0;
      for (float v : big) lo = v < lo ? v : lo;
      EXPECT_EQ(Values<float>(cpu->outputs[1]), std::vector<float>{(9.5f - lo) / 255.f});
    }
  }
}

// An Inception-style block: two quantized Convs of one source concatenated
// along channels, then a third Conv. The concatenation runs channels-last
// on channels-last inputs; with a negative output scale (which its kernel
// does not take) it runs node by node on plain copies.
TEST(CpuQdqTest, ChannelsLastConcat) {
  for (bool negative : {false, true}) {
    SCOPED_TRACE(negative ? "node by node" : "fused");
    QdqCase qc = Cases()[0];
    GraphBuilder g("g");
    AddSource(g, qc, {1, 8, 6, 7});
    auto conv = [&](const std::string& name, int64_t m, int64_t c, uint32_t seed, const std::string& x) {
      AddWeights(g, qc, name + "_w", {m, c, 3, 3}, 0, m, seed);
      g.Node("Conv", {x, name + "_w"}, {name}, {AttrInts("pads", {1, 1, 1, 1})}, name);
      g.Initializer(InitializerFrom(name + "_s", Floats({}, {0.05f})));
      g.Initializer(InitializerFrom(name + "_z", ScalarOf(pb::kUint8, 128)));
      g.Node("QuantizeLinear", {name, name + "_s", name + "_z"}, {name + "q"}, {}, "q_" + name);
    };
    conv("a", 8, 8, 61, "x");
    g.Node("DequantizeLinear", {"xq", "x_s", "x_z"}, {"x2"}, {}, "dq_x2");
    conv("b", 4, 8, 62, "x2");
    g.Node("DequantizeLinear", {"aq", "a_s", "a_z"}, {"ad"}, {}, "dq_a");
    g.Node("DequantizeLinear", {"bq", "b_s", "b_z"}, {"bd"}, {}, "dq_b");
    g.Node("Concat", {"ad", "bd"}, {"cat"}, {AttrInt("axis", 1)}, "concat");
    g.Initializer(InitializerFrom("cat_s", Floats({}, {negative ? -0.06f : 0.06f})));
    g.Initializer(InitializerFrom("cat_z", ScalarOf(pb::kUint8, 120)));
    g.Node("QuantizeLinear", {"cat", "cat_s", "cat_z"}, {"catq"}, {}, "q_cat");
    g.Node("DequantizeLinear", {"catq", "cat_s", "cat_z"}, {"catd"}, {}, "dq_cat");
    AddWeights(g, qc, "c_w", {5, 12, 3, 3}, 0, 5, 63);
    g.Node("Conv", {"catd", "c_w"}, {"c"}, {AttrInts("pads", {1, 1, 1, 1})}, "c");
    g.Initializer(InitializerFrom("y_s", Floats({}, {0.05f})));
    g.Initializer(InitializerFrom("y_z", ScalarOf(pb::kUint8, 128)));
    g.Node("QuantizeLinear", {"c", "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", pb::kUint8);
    std::map<std::string, std::string> layouts = PlannedLayouts(g.Build());
    EXPECT_EQ(layouts["q_a"], "pc");
    EXPECT_EQ(layouts["q_b"], "pc");
    EXPECT_EQ(layouts["q_cat"], "cc");
    EXPECT_EQ(layouts["q"], "cp");
    const Feeds feeds = {{"xq", Source(qc, {1, 8, 6, 7}, 64)}};
    auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
    const int64_t fallbacks = runner::ChainFallbackRuns();
    auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ExpectWithinSteps(ref->outputs[0], cpu->outputs[0], 2);
    if (runner::cpu::QuantizedChainsRunInt8()) {
      EXPECT_EQ(runner::ChainFallbackRuns() > fallbacks, negative);
    }
  }
}

// A quantized value also read by a float op stays plain.
TEST(CpuQdqTest, ChannelsLastOnlyWhereEveryReaderTakesIt) {
  pb::GraphProto graph = ResidualBlock(false, false);
  GraphBuilder g("g");
  g.graph() = graph;
  // relu1's quantized result also feeds a float Sigmoid.
  g.Initializer(InitializerFrom("f_s", Floats({}, {0.03f})));
  g.Node("DequantizeLinear", {"q_relu1", "f_s"}, {"f"}, {}, "dq_f");
  g.Node("Sigmoid", {"f"}, {"sig"}, {}, "sig").Output("sig", pb::kFloat);
  std::map<std::string, std::string> layouts = PlannedLayouts(g.Build());
  EXPECT_EQ(layouts["q_relu1"], "cp");
  EXPECT_EQ(layouts["q_c2"], "pp") << "its result meets the plain operand";
  EXPECT_EQ(layouts["q_add"], "pp") << "the Add's operands are in one layout";
  EXPECT_EQ(layouts["q_relu2"], "pp");
  const Feeds feeds = {{"xq", Source(Cases()[0], {1, 16, 8, 8}, 24)}};
  auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
  auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
  ASSERT_TRUE(ref.ok() && cpu.ok());
  ExpectWithinSteps(ref->outputs[0], cpu->outputs[0], 2);
  ExpectTensorsClose(ref->outputs[1], cpu->outputs[1], 0.05f, 0.05f, "sig");
}

// QuantizeLinear and DequantizeLinear alone agree exactly with the
// reference: per tensor and per axis, u8 / s8 (and int32 dequantized),
// with ties, NaN, infinities and values far out of range.
// 16-bit activations (quantize --act-type int16/uint16): a Conv chain and a
// lookup chain of the kind the cpu backend keeps channels-last between them
// when 8-bit run node by node, their values changing layout at the chain
// boundaries whatever the element size.
TEST(CpuQdqTest, SixteenBitActivationsBetweenChannelsLastChains) {
  for (int32_t act : {pb::kInt16, pb::kUint16}) {
    SCOPED_TRACE(act == pb::kInt16 ? "int16" : "uint16");
    const int zp = act == pb::kInt16 ? 5 : 30000;
    auto zero_point = [&](uint32_t seed) { return RandomInts(act, {}, seed, zp, zp); };
    QdqCase qc;
    GraphBuilder g("g");
    g.Input("xq", act, std::vector<int64_t>{1, 3, 12, 10});
    g.Initializer(InitializerFrom("x_s", Floats({}, {0.0005f})));
    g.Initializer(InitializerFrom("x_z", zero_point(1)));
    g.Node("DequantizeLinear", {"xq", "x_s", "x_z"}, {"x"}, {}, "dq_x");
    AddWeights(g, qc, "w", {16, 3, 3, 3}, 0, 16, 11);
    g.Node("Conv", {"x", "w"}, {"c"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv");
    g.Initializer(InitializerFrom("c_s", Floats({}, {0.001f})));
    g.Initializer(InitializerFrom("c_z", zero_point(2)));
    g.Node("QuantizeLinear", {"c", "c_s", "c_z"}, {"cq"}, {}, "q_c");
    g.Node("DequantizeLinear", {"cq", "c_s", "c_z"}, {"cd"}, {}, "dq_c");
    g.Node("Relu", {"cd"}, {"r"}, {}, "relu");
    g.Initializer(InitializerFrom("y_s", Floats({}, {0.001f})));
    g.Initializer(InitializerFrom("y_z", zero_point(3)));
    g.Node("QuantizeLinear", {"r", "y_s", "y_z"}, {"yq"}, {}, "q").Output("yq", act);
    // Planned as for 8-bit values: channels-last between the two chains.
    EXPECT_EQ(PlannedLayouts(g.Build()), (std::map<std::string, std::string>{{"q_c", "pc"}, {"q", "cp"}}));
    const Feeds feeds = {{"xq", act == pb::kInt16 ? RandomInts(act, {1, 3, 12, 10}, 4, -8000, 8000)
                                                  : RandomInts(act, {1, 3, 12, 10}, 4, 22000, 38000)}};
    auto ref = RunOn(g.Build(), runner::Backend::kReference, feeds);
    auto cpu = RunOn(g.Build(), runner::Backend::kCpu, feeds);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ExpectWithinSteps(ref->outputs[0], cpu->outputs[0], 1);
  }
}

TEST(CpuQdqTest, QuantizeDequantizeExact) {
  runner::Tensor x = RandomFloats({2, 3, 4, 5}, 13, -6.f, 6.f);
  float* px = x.mutable_data<float>();
  px[0] = std::numeric_limits<float>::quiet_NaN();
  px[1] = std::numeric_limits<float>::infinity();
  px[2] = -std::numeric_limits<float>::infinity();
  px[3] = 1e30f;
  px[4] = 0.25f;  // x / 0.5 = 0.5: a tie, rounds to even
  px[5] = 0.75f;
  for (int32_t type : {pb::kUint8, pb::kInt8}) {
    for (bool per_axis : {false, true}) {
      SCOPED_TRACE(std::string(type == pb::kInt8 ? "s8" : "u8") + (per_axis ? " per axis" : ""));
      GraphBuilder g("g");
      g.Input("x", pb::kFloat, std::vector<int64_t>{2, 3, 4, 5});
      const int64_t n = per_axis ? 3 : 1;
      g.Initializer(InitializerFrom("s", per_axis ? Floats({3}, {0.5f, 0.03f, 0.07f}) : Floats({}, {0.5f})));
      g.Initializer(InitializerFrom("z", per_axis ? ZeroPoints(type, n, 3) : ScalarOf(type, 3)));
      g.Node("QuantizeLinear", {"x", "s", "z"}, {"q"}, {AttrInt("axis", 1)})
          .Node("DequantizeLinear", {"q", "s", "z"}, {"d"}, {AttrInt("axis", 1)})
          .Output("q", type)
          .Output("d");
      ExpectCpuMatchesReference(g.Build(), {{"x", x}}, 19, 0, 0);
    }
  }
  GraphBuilder g("g");
  g.Input("x", pb::kInt32, std::vector<int64_t>{4});
  g.Initializer(InitializerFrom("s", Floats({}, {1e-3f})));
  g.Initializer(InitializerFrom("z", Int32s({}, {-7})));
  g.Node("DequantizeLinear", {"x", "s", "z"}, {"d"}).Output("d");
  ExpectCpuMatchesReference(g.Build(), {{"x", Int32s({4}, {2147483647, -2147483647 - 1, 0, 123456789})}}, 19, 0, 0);
}

}  // namespace
}  // namespace onnxkit::testing
