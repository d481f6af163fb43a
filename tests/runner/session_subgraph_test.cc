// If / Loop bodies planned like the main graph: constant folding there
// (initializers of enclosing graphs are constants), fused Conv chains on
// the cpu backend, weights prepared once, and per-node times that do not
// count a body twice.
#include <chrono>
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

pb::TensorProto Int64Initializer(std::string name, std::vector<int64_t> values) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.data_type = pb::kInt64;
  t.dims = {static_cast<int64_t>(values.size())};
  t.int64_data = std::move(values);
  return t;
}

// Adds the outer-scope weights of a Conv 4 -> 8 (3x3), stored flat with
// the shape to reshape them to, and BatchNormalization parameters.
void AddOuterWeights(GraphBuilder& g) {
  g.Initializer(InitializerFrom("w_flat", RandomFloats({8 * 4 * 3 * 3}, 1)))
      .Initializer(Int64Initializer("w_shape", {8, 4, 3, 3}))
      .Initializer(InitializerFrom("scale", RandomFloats({8}, 2, 0.5f, 2.0f)))
      .Initializer(InitializerFrom("shift", RandomFloats({8}, 3)))
      .Initializer(InitializerFrom("mean", RandomFloats({8}, 4)))
      .Initializer(InitializerFrom("var", RandomFloats({8}, 5, 0.5f, 2.0f)));
}

// A body computing Relu(BatchNormalization(Conv(in, Reshape(w_flat)))) into `out`.
void AddConvBody(GraphBuilder& b, const std::string& in, const std::string& out) {
  b.Node("Reshape", {"w_flat", "w_shape"}, {"w"}, {}, "reshape")
      .Node("Conv", {in, "w"}, {"c"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv")
      .Node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"n"}, {}, "bn")
      .Node("Relu", {"n"}, {out}, {}, "relu");
}

// y = If(cond) then { the conv body on x } else { zeros }.
pb::GraphProto IfConvGraph() {
  GraphBuilder then_branch("then");
  AddConvBody(then_branch, "x", "t");
  then_branch.Output("t");
  GraphBuilder else_branch("else");
  else_branch.Node("Identity", {"zeros"}, {"e"}, {}, "zeros_out").Output("e");
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, 4, 6, 6}).Input("cond", pb::kBool, std::vector<int64_t>{});
  AddOuterWeights(g);
  g.Initializer(InitializerFrom("zeros", Floats({1, 8, 6, 6}, {})))
      .Node("If", {"cond"}, {"y"},
            {AttrGraph("then_branch", then_branch.Build()), AttrGraph("else_branch", else_branch.Build())},
            "if")
      .Output("y");
  return g.Build();
}

// v_final = Loop(3) { v = the conv body on v (8 -> 8 channels) }.
pb::GraphProto LoopConvGraph() {
  GraphBuilder body("body");
  body.Input("i", pb::kInt64, std::vector<int64_t>{})
      .Input("c_in", pb::kBool, std::vector<int64_t>{})
      .Input("v", pb::kFloat)
      .Node("Identity", {"c_in"}, {"c_out"}, {}, "keep_going");
  // The carried value has 4 channels: the body keeps 4 of the Conv's 8.
  AddConvBody(body, "v", "r");
  body.Initializer(Int64Initializer("starts", {0}))
      .Initializer(Int64Initializer("ends", {4}))
      .Initializer(Int64Initializer("axes", {1}))
      .Node("Slice", {"r", "starts", "ends", "axes"}, {"v_out"}, {}, "slice")
      .Output("c_out")
      .Output("v_out");
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, 4, 6, 6});
  AddOuterWeights(g);
  pb::TensorProto trips = Int64Initializer("trips", {3});
  trips.dims = {};  // a scalar
  g.Initializer(std::move(trips))
      .Node("Loop", {"trips", "", "x"}, {"y"}, {AttrGraph("body", body.Build())}, "loop")
      .Output("y");
  return g.Build();
}

struct Ran {
  std::vector<std::string> names;
  double seconds = 0;      // the nodes' times, summed
  double run_seconds = 0;  // Run's wall-clock time
};

absl::StatusOr<std::vector<runner::RtValue>> RunOnce(const pb::GraphProto& graph, runner::Backend backend,
                                                     const Feeds& feeds, Ran* ran) {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(graph, 18);
  runner::SessionOptions options;
  options.backend = backend;
  bool recording = false;
  options.on_node_done = [&](const ir::Node& node, double seconds) {
    if (!recording) return;
    ran->names.push_back(node.name());
    ran->seconds += seconds;
  };
  auto session = runner::Session::Create(std::move(loaded), options);
  if (!session.ok()) return session.status();
  std::vector<std::pair<std::string, runner::RtValue>> in;
  for (const auto& [name, t] : feeds) in.emplace_back(name, runner::RtValue::FromTensor(t));
  recording = true;
  auto start = std::chrono::steady_clock::now();
  auto out = (*session)->Run(std::move(in));
  ran->run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

TEST(SessionSubgraphTest, IfBodyFoldsAndFusesAndMatchesTheReference) {
  Feeds feeds = {{"x", RandomFloats({1, 4, 6, 6}, 10)}, {"cond", BoolScalar(true)}};
  Ran ref_ran, cpu_ran;
  auto ref = RunOnce(IfConvGraph(), runner::Backend::kReference, feeds, &ref_ran);
  auto cpu = RunOnce(IfConvGraph(), runner::Backend::kCpu, feeds, &cpu_ran);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ExpectTensorsClose((*ref)[0].tensor(), (*cpu)[0].tensor(), 1e-4, 1e-4, "y");
  // The Reshape of outer-scope initializers folded at creation on both
  // backends; on the cpu backend the Conv, BatchNormalization and Relu of
  // the body run as one step.
  EXPECT_EQ(ref_ran.names, (std::vector<std::string>{"conv", "bn", "relu", "if"}));
  EXPECT_EQ(cpu_ran.names, (std::vector<std::string>{"conv", "if"}));
  // The other branch.
  Feeds other = {{"x", RandomFloats({1, 4, 6, 6}, 10)}, {"cond", BoolScalar(false)}};
  Ran ran;
  auto zeros = RunOnce(IfConvGraph(), runner::Backend::kCpu, other, &ran);
  ASSERT_TRUE(zeros.ok()) << zeros.status();
  EXPECT_EQ(Values<float>((*zeros)[0].tensor()), std::vector<float>(8 * 36, 0.0f));
}

TEST(SessionSubgraphTest, LoopBodyFusesAroundItsCarriedValue) {
  Feeds feeds = {{"x", RandomFloats({1, 4, 6, 6}, 11)}};
  Ran ref_ran, cpu_ran;
  auto ref = RunOnce(LoopConvGraph(), runner::Backend::kReference, feeds, &ref_ran);
  auto cpu = RunOnce(LoopConvGraph(), runner::Backend::kCpu, feeds, &cpu_ran);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ExpectTensorsClose((*ref)[0].tensor(), (*cpu)[0].tensor(), 1e-4, 1e-4, "y");
  std::vector<std::string> iteration = {"keep_going", "conv", "slice"};
  std::vector<std::string> expected;
  for (int i = 0; i < 3; ++i) expected.insert(expected.end(), iteration.begin(), iteration.end());
  expected.push_back("loop");
  EXPECT_EQ(cpu_ran.names, expected);
}

TEST(SessionSubgraphTest, FeedingAnInitializerABodyFoldedRecomputesIt) {
  // IR 3: initializers are graph inputs too; a run feeding w_flat must see it
  // inside the If body, whose Reshape folded it.
  pb::GraphProto graph = IfConvGraph();
  for (const pb::TensorProto& t : graph.initializer)
    graph.input.push_back(MakeValueInfo(t.name, t.data_type, t.dims));
  runner::Tensor x = RandomFloats({1, 4, 6, 6}, 12);
  runner::Tensor cond = BoolScalar(true);
  ExpectRepeatedRunsMatch(graph,
                          {{{"x", x}, {"cond", cond}},
                           {{"x", x}, {"cond", cond}, {"w_flat", RandomFloats({8 * 4 * 3 * 3}, 13)}},
                           {{"x", x}, {"cond", cond}}},
                          1e-4, /*opset=*/18, /*ir_version=*/3);
}

TEST(SessionSubgraphTest, NodeTimesCountABodyOnce) {
  // Each node reports its own time: the If's excludes its body's, so the
  // times add up to no more than the run.
  Feeds feeds = {{"x", RandomFloats({1, 4, 6, 6}, 14)}, {"cond", BoolScalar(true)}};
  for (runner::Backend backend : {runner::Backend::kReference, runner::Backend::kCpu}) {
    Ran ran;
    auto out = RunOnce(IfConvGraph(), backend, feeds, &ran);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_LE(ran.seconds, ran.run_seconds);
    EXPECT_GT(ran.seconds, 0);
  }
}

}  // namespace
}  // namespace onnxkit::testing
