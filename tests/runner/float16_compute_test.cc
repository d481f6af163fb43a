// float16 nodes computed in float32 on the cpu backend
// (runner/float16_compute.h): the rewrite itself, and runs that agree with
// the reference backend's float16 kernels within float16 rounding.
#include "runner/float16_compute.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "lib/ir/model.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

// x [1, 3, 8, 8] float -> float16; Conv (float16 weights and bias, made by
// Casts of float32 initializers), Relu, Mul by itself, GlobalAveragePool,
// Flatten, MatMul, Softmax in float16; the result cast back to float.
pb::GraphProto Float16Net() {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{1, 3, 8, 8});
  g.Initializer(InitializerFrom("w", RandomFloats({4, 3, 3, 3}, 1)));
  g.Initializer(InitializerFrom("b", RandomFloats({4}, 2)));
  g.Initializer(InitializerFrom("wm", RandomFloats({4, 5}, 3)));
  g.Node("Cast", {"x"}, {"xh"}, {AttrInt("to", pb::kFloat16)}, "cx");
  g.Node("Cast", {"w"}, {"wh"}, {AttrInt("to", pb::kFloat16)}, "cw");
  g.Node("Cast", {"b"}, {"bh"}, {AttrInt("to", pb::kFloat16)}, "cb");
  g.Node("Cast", {"wm"}, {"wmh"}, {AttrInt("to", pb::kFloat16)}, "cwm");
  g.Node("Conv", {"xh", "wh", "bh"}, {"c"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv");
  g.Node("Relu", {"c"}, {"r"}, {}, "relu");
  g.Node("Mul", {"r", "r"}, {"m"}, {}, "square");
  g.Node("GlobalAveragePool", {"m"}, {"p"}, {}, "pool");
  g.Node("Flatten", {"p"}, {"f"}, {}, "flatten");
  g.Node("MatMul", {"f", "wmh"}, {"mm"}, {}, "matmul");
  g.Node("Softmax", {"mm"}, {"s"}, {}, "softmax");
  g.Node("Cast", {"s"}, {"y"}, {AttrInt("to", pb::kFloat)}, "out");
  g.Output("y", pb::kFloat);
  return g.Build();
}

int Count(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op_type() == op ? 1 : 0;
  return n;
}

TEST(Float16ComputeTest, Float16NodesBecomeFloat32NodesBetweenCasts) {
  auto model = ir::FromProto(ModelFromGraph(Float16Net(), 18, 9));
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(runner::MayHoldFloat16(**model));
  auto n = runner::ComputeFloat16InFloat32(**model);
  ASSERT_TRUE(n.ok()) << n.status();
  // Conv, Relu, Mul, GlobalAveragePool, MatMul, Softmax; not Flatten (it
  // moves the 2-byte values as they are) nor the Casts.
  EXPECT_EQ(*n, 6);
  const ir::Graph& g = (*model)->graph();
  // The model's 5 Casts; one to float32 of each float16 input read by a
  // rewritten node (xh, wh, bh, r (read twice by the Mul, cast once), m, f,
  // wmh, mm: 8; the Relu reads the Conv's float32 result, since rounding to
  // float16 commutes with it); one back to float16 after each of the 6 but
  // the Conv's, which nothing reads any more.
  EXPECT_EQ(Count(g, "Cast"), 5 + 8 + 5);
  EXPECT_EQ(Count(g, "Conv"), 1);
  // The outputs keep their names: 'r' is now made by a Cast to float16; 'c'
  // is gone.
  bool found = false;
  for (const ir::Node* node : g.nodes()) {
    EXPECT_NE(node->output(0)->name(), "c");
    if (node->output(0)->name() == "r") {
      found = true;
      EXPECT_EQ(node->op_type(), "Cast");
      EXPECT_EQ(node->GetInt("to").value_or(0), pb::kFloat16);
    }
  }
  EXPECT_TRUE(found);
  for (const ir::Node* node : g.nodes()) {
    if (node->op_type() == "Relu") {
      EXPECT_EQ(node->input(0)->producer()->op_type(), "Conv");
    }
  }
  // A second pass finds nothing left to do.
  auto again = runner::ComputeFloat16InFloat32(**model);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
}

TEST(Float16ComputeTest, Float32ModelsAreNotLookedAt) {
  GraphBuilder g("g");
  g.Input("x").Node("Relu", {"x"}, {"y"}).Output("y");
  auto model = ir::FromProto(ModelFromGraph(g.Build(), 18, 9));
  ASSERT_TRUE(model.ok());
  EXPECT_FALSE(runner::MayHoldFloat16(**model));
}

TEST(Float16ComputeTest, ModelsWhoseDeclaredTypesConflictAreLeftAsTheyAre) {
  // 'h' is float16 but declared float: the types are not to be trusted.
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{2, 3});
  g.Node("Cast", {"x"}, {"h"}, {AttrInt("to", pb::kFloat16)}, "cast");
  g.Node("Relu", {"h"}, {"r"}, {}, "relu");
  g.Node("Cast", {"r"}, {"y"}, {AttrInt("to", pb::kFloat)}, "out");
  g.ValueInfo("h", pb::kFloat);
  g.Output("y", pb::kFloat);
  auto model = ir::FromProto(ModelFromGraph(g.Build(), 18, 9));
  ASSERT_TRUE(model.ok()) << model.status();
  auto n = runner::ComputeFloat16InFloat32(**model);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0);
}

TEST(Float16ComputeTest, CpuRunsAgreeWithTheReferenceWithinFloat16Rounding) {
  const Feeds feeds = {{"x", RandomFloats({1, 3, 8, 8}, 4, -2.f, 2.f)}};
  ExpectCpuMatchesReference(Float16Net(), feeds, 18, 2e-3, 2e-3);
  // The cpu backend ran the float32 forms (their nodes are named
  // '<node>/f32/<op>').
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(Float16Net(), 18, 9);
  std::vector<std::string> ran;
  runner::SessionOptions options;
  options.backend = runner::Backend::kCpu;
  options.on_node_done = [&](const ir::Node& node, double) { ran.push_back(node.name()); };
  auto session = runner::Session::Create(std::move(loaded), options);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<std::pair<std::string, runner::RtValue>> in = {{"x", runner::RtValue::FromTensor(feeds[0].second)}};
  ASSERT_TRUE((*session)->Run(std::move(in)).ok());
  bool conv32 = false;
  for (const std::string& name : ran) conv32 = conv32 || name == "conv/f32/Conv";
  EXPECT_TRUE(conv32);
}

// Relu and MaxPool read the float32 result of the node before them (the
// rounding to float16 commutes with them): the values are exactly those of
// rounding first, as the reference computes.
TEST(Float16ComputeTest, ReluAndMaxPoolAfterARoundingAreExact) {
  for (const std::string op : {"Relu", "MaxPool"}) {
    SCOPED_TRACE(op);
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, 2, 6, 6});
    g.Initializer(InitializerFrom("k", RandomFloats({1, 2, 6, 6}, 6)));
    g.Node("Cast", {"x"}, {"xh"}, {AttrInt("to", pb::kFloat16)}, "cx");
    g.Node("Cast", {"k"}, {"kh"}, {AttrInt("to", pb::kFloat16)}, "ck");
    g.Node("Mul", {"xh", "kh"}, {"m"}, {}, "mul");
    if (op == "Relu") {
      g.Node("Relu", {"m"}, {"r"}, {}, "op");
    } else {
      g.Node("MaxPool", {"m"}, {"r"}, {AttrInts("kernel_shape", {3, 3}), AttrInts("pads", {1, 1, 1, 1})},
             "op");
    }
    g.Node("Cast", {"r"}, {"y"}, {AttrInt("to", pb::kFloat)}, "out");
    g.Output("y", pb::kFloat);
    ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats({1, 2, 6, 6}, 7, -3.f, 3.f)}}, 18, 0, 0);
  }
}

// A float16 node inside an If branch is rewritten too.
TEST(Float16ComputeTest, BodiesAreRewrittenToo) {
  pb::GraphProto then_branch = GraphBuilder("then")
                                   .Node("Mul", {"xh", "xh"}, {"t"}, {}, "inner_mul")
                                   .Output("t", pb::kFloat16)
                                   .Build();
  pb::GraphProto else_branch = GraphBuilder("else")
                                   .Node("Sigmoid", {"xh"}, {"e"}, {}, "inner_sigmoid")
                                   .Output("e", pb::kFloat16)
                                   .Build();
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{2, 3}).Input("c", pb::kBool, std::vector<int64_t>{});
  g.Node("Cast", {"x"}, {"xh"}, {AttrInt("to", pb::kFloat16)}, "cx");
  g.Node("If", {"c"}, {"z"}, {AttrGraph("then_branch", then_branch), AttrGraph("else_branch", else_branch)}, "if");
  g.Node("Cast", {"z"}, {"y"}, {AttrInt("to", pb::kFloat)}, "out");
  g.Output("y", pb::kFloat);
  auto model = ir::FromProto(ModelFromGraph(g.Build(), 18, 9));
  ASSERT_TRUE(model.ok()) << model.status();
  auto n = runner::ComputeFloat16InFloat32(**model);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 2);
  for (bool c : {true, false}) {
    ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats({2, 3}, 5, -3.f, 3.f)}, {"c", Bools({}, {c})}}, 18,
                              1e-3, 1e-3);
  }
}

}  // namespace
}  // namespace onnxkit::testing
