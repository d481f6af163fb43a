// Tests of the grouping of main-graph nodes into device kernels
// (runner/device_plan.h), with no device involved: which nodes a cuda
// session runs together, with and without the experimental groups.
#include "runner/device_plan.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"
#include "lib/ir/ir.h"
#include "lib/ir/topo.h"
#include "runner/convert.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::runner {
namespace {

using testing::AttrGraph;
using testing::AttrInt;
using testing::AttrInts;
using testing::GraphBuilder;
using testing::InitializerFrom;
using testing::ModelFromGraph;
using testing::RandomFloats;

// A graph planned with every node on the device but `host_ops`, the
// element-wise ops of the CUDA chain kernels chainable, initializers as
// constants, and every group's kernel made (or refused for `refuse`).
struct Planned {
  std::unique_ptr<ir::Model> model;
  std::vector<ir::Node*> order;
  std::vector<DeviceGroup> groups;
  std::map<const ir::Value*, Tensor> constants;
};

Planned Plan(pb::GraphProto graph, bool experimental, const std::vector<std::string>& host_ops = {},
             DeviceGroupKind* refuse = nullptr, size_t max_inputs = 8) {
  Planned p;
  auto model = ir::FromProto(ModelFromGraph(std::move(graph), 18));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return p;
  p.model = std::move(*model);
  auto order = ir::TopologicalOrder(p.model->graph());
  EXPECT_TRUE(order.ok());
  p.order = *order;
  DevicePlanHooks hooks;
  hooks.on_device = [&](const ir::Node& n) {
    return std::find(host_ops.begin(), host_ops.end(), n.op_type()) == host_ops.end();
  };
  hooks.constant = [&](const ir::Value& v) -> const Tensor* {
    if (!v.IsConstant() || v.initializer() == nullptr) return nullptr;
    auto it = p.constants.find(&v);
    if (it == p.constants.end()) {
      auto t = TensorFromProto(*v.initializer());
      if (!t.ok()) return nullptr;
      it = p.constants.emplace(&v, *std::move(t)).first;
    }
    return &it->second;
  };
  hooks.chainable = [](const ir::Node& n) {
    static const absl::flat_hash_set<std::string> kUnary = {"Relu", "Erf", "Tanh", "Sigmoid", "Exp", "Sqrt"};
    static const absl::flat_hash_set<std::string> kBinary = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"};
    if (n.num_outputs() != 1) return false;
    if (kUnary.contains(n.op_type())) return n.num_inputs() == 1;
    return kBinary.contains(n.op_type()) && n.num_inputs() == 2;
  };
  hooks.make = [&](const DeviceGroup& g) { return refuse == nullptr || g.kind != *refuse; };
  p.groups = PlanDeviceGroups(p.order, hooks, experimental, 8, max_inputs);
  return p;
}

// "Kind: name name ..." per group, the nodes by name.
std::vector<std::string> Describe(const Planned& p) {
  std::vector<std::string> out;
  for (const DeviceGroup& g : p.groups) {
    static const char* kNames[] = {"conv", "linear", "strided", "softmax", "elementwise"};
    std::string s = kNames[static_cast<int>(g.kind)];
    s += ":";
    for (const ir::Node* n : g.nodes) s += " " + n->name();
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> InputNames(const DeviceGroup& g) {
  std::vector<std::string> out;
  for (const ir::Value* v : g.inputs) out.push_back(v == nullptr ? "-" : v->name());
  return out;
}

// One encoder layer as torch exports BERT: Q/K/V linear layers, heads split
// by Reshape + Transpose, scores scaled and masked, Softmax, the context
// merged back, the output projection with its residual, GELU written out.
pb::GraphProto EncoderLayer() {
  GraphBuilder b("g");
  b.Input("x", pb::kFloat, {{1, 6, 8}}).Input("mask", pb::kFloat, {{1, 1, 1, 6}});
  for (const char* w : {"wq", "wk", "wv", "wo"}) b.Initializer(InitializerFrom(w, RandomFloats({8, 8}, 1)));
  for (const char* w : {"bq", "bk", "bv", "bo"}) b.Initializer(InitializerFrom(w, RandomFloats({8}, 2)));
  b.Initializer(InitializerFrom("w1", RandomFloats({8, 16}, 3)))
      .Initializer(InitializerFrom("b1", RandomFloats({16}, 4)))
      .Initializer(InitializerFrom("w2", RandomFloats({16, 8}, 5)))
      .Initializer(InitializerFrom("b2", RandomFloats({8}, 6)))
      .Initializer(InitializerFrom("heads", testing::Int64s({4}, {1, 6, 2, 4})))
      .Initializer(InitializerFrom("merged", testing::Int64s({3}, {1, 6, 8})))
      .Initializer(InitializerFrom("scale", testing::Floats({}, {2.f})))
      .Initializer(InitializerFrom("one", testing::Floats({}, {1.f})));
  for (const char* h : {"q", "k", "v"}) {
    const std::string s(h);
    b.Node("MatMul", {"x", "w" + s}, {s + "_mm"}, {}, s + "_mm")
        .Node("Add", {"b" + s, s + "_mm"}, {s + "_b"}, {}, s + "_bias")
        .Node("Reshape", {s + "_b", "heads"}, {s + "_r"}, {}, s + "_reshape");
  }
  b.Node("Transpose", {"q_r"}, {"qh"}, {AttrInts("perm", {0, 2, 1, 3})}, "q_t")
      .Node("Transpose", {"k_r"}, {"kh"}, {AttrInts("perm", {0, 2, 3, 1})}, "k_t")
      .Node("Transpose", {"v_r"}, {"vh"}, {AttrInts("perm", {0, 2, 1, 3})}, "v_t")
      .Node("MatMul", {"qh", "kh"}, {"scores"}, {}, "qk")
      .Node("Div", {"scores", "scale"}, {"scaled"}, {}, "scale")
      .Node("Add", {"scaled", "mask"}, {"masked"}, {}, "mask")
      .Node("Softmax", {"masked"}, {"probs"}, {AttrInt("axis", -1)}, "softmax")
      .Node("MatMul", {"probs", "vh"}, {"ctx"}, {}, "av")
      .Node("Transpose", {"ctx"}, {"ctx_t"}, {AttrInts("perm", {0, 2, 1, 3})}, "ctx_t")
      .Node("Reshape", {"ctx_t", "merged"}, {"ctx_m"}, {}, "ctx_reshape")
      .Node("MatMul", {"ctx_m", "wo"}, {"o_mm"}, {}, "o_mm")
      .Node("Add", {"bo", "o_mm"}, {"o_b"}, {}, "o_bias")
      .Node("Add", {"x", "o_b"}, {"res"}, {}, "o_res")
      .Node("MatMul", {"res", "w1"}, {"f1_mm"}, {}, "f1_mm")
      .Node("Add", {"b1", "f1_mm"}, {"f1"}, {}, "f1_bias")
      .Node("Div", {"f1", "scale"}, {"g1"}, {}, "g_div")
      .Node("Erf", {"g1"}, {"g2"}, {}, "g_erf")
      .Node("Add", {"g2", "one"}, {"g3"}, {}, "g_add")
      .Node("Mul", {"f1", "g3"}, {"g4"}, {}, "g_mul")
      .Node("MatMul", {"g4", "w2"}, {"f2_mm"}, {}, "f2_mm")
      .Node("Add", {"f2_mm", "b2"}, {"f2"}, {}, "f2_bias")
      .Node("Add", {"f2", "res"}, {"y"}, {}, "f2_res")
      .Output("y", pb::kFloat);
  return b.Build();
}

TEST(DevicePlanTest, EncoderLayerByDefault) {
  Planned p = Plan(EncoderLayer(), /*experimental=*/false);
  EXPECT_EQ(Describe(p), (std::vector<std::string>{"elementwise: scale mask", "elementwise: o_bias o_res",
                                                   "elementwise: f1_bias g_div g_erf g_add g_mul",
                                                   "elementwise: f2_bias f2_res"}));
}

TEST(DevicePlanTest, EncoderLayerExperimental) {
  Planned p = Plan(EncoderLayer(), /*experimental=*/true);
  EXPECT_EQ(Describe(p), (std::vector<std::string>{
                             "linear: q_mm q_bias", "linear: k_mm k_bias", "linear: v_mm v_bias",
                             "linear: o_mm o_bias o_res", "linear: f1_mm f1_bias", "linear: f2_mm f2_bias f2_res",
                             "strided: q_t k_t qk", "strided: v_t av ctx_t", "softmax: scale mask softmax",
                             "elementwise: g_div g_erf g_add g_mul"}));
  ASSERT_EQ(p.groups.size(), 10u);
  // The linear layers read A, the weights, the bias row and the residual.
  EXPECT_EQ(InputNames(p.groups[0]), (std::vector<std::string>{"x", "wq", "bq"}));
  EXPECT_EQ(InputNames(p.groups[3]), (std::vector<std::string>{"ctx_m", "wo", "bo", "x"}));
  EXPECT_EQ(p.groups[3].residual_add->name(), "o_res");
  EXPECT_EQ(InputNames(p.groups[5]), (std::vector<std::string>{"g4", "w2", "b2", "res"}));
  // The strided products read the Transposes' sources.
  EXPECT_EQ(InputNames(p.groups[6]), (std::vector<std::string>{"q_r", "k_r"}));
  EXPECT_EQ(p.groups[6].transpose_y, nullptr);
  EXPECT_EQ(InputNames(p.groups[7]), (std::vector<std::string>{"probs", "v_r"}));
  EXPECT_EQ(p.groups[7].transpose_a, nullptr);
  EXPECT_EQ(p.groups[7].transpose_y->name(), "ctx_t");
  EXPECT_EQ(InputNames(p.groups[8]), (std::vector<std::string>{"scores", "scale", "mask"}));
  EXPECT_EQ(p.groups[8].softmax->name(), "softmax");
}

TEST(DevicePlanTest, RefusedGroupsLeaveTheirNodesToOthers) {
  // Without linear-layer kernels the Adds join element-wise runs again.
  DeviceGroupKind refuse = DeviceGroupKind::kMatMulBias;
  Planned p = Plan(EncoderLayer(), true, {}, &refuse);
  EXPECT_EQ(Describe(p), (std::vector<std::string>{"strided: q_t k_t qk", "strided: v_t av ctx_t",
                                                   "softmax: scale mask softmax", "elementwise: o_bias o_res",
                                                   "elementwise: f1_bias g_div g_erf g_add g_mul",
                                                   "elementwise: f2_bias f2_res"}));
  // Host nodes join nothing: with Softmax on the host the scale and mask
  // are an element-wise run of their own.
  Planned host = Plan(EncoderLayer(), true, {"Softmax", "Transpose"});
  std::vector<std::string> d = Describe(host);
  EXPECT_NE(std::find(d.begin(), d.end(), "elementwise: scale mask"), d.end());
  for (const std::string& s : d) EXPECT_EQ(s.find("strided"), std::string::npos) << s;
}

TEST(DevicePlanTest, ConvChains) {
  GraphBuilder b("g");
  b.Input("x", pb::kFloat, {{1, 4, 5, 5}})
      .Initializer(InitializerFrom("w", RandomFloats({4, 4, 3, 3}, 1)))
      .Initializer(InitializerFrom("w2", RandomFloats({4, 4, 1, 1}, 2)));
  for (const char* n : {"g", "b", "m", "v"}) b.Initializer(InitializerFrom(n, RandomFloats({4}, 3, 0.5f, 1.f)));
  b.Node("Conv", {"x", "w"}, {"c"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv")
      .Node("BatchNormalization", {"c", "g", "b", "m", "v"}, {"n"}, {}, "bn")
      .Node("Add", {"n", "x"}, {"s"}, {}, "res")
      .Node("Relu", {"s"}, {"r"}, {}, "relu")
      // Its result is also a graph output: nothing joins it.
      .Node("Conv", {"r", "w2"}, {"c2"}, {}, "conv2")
      .Node("Relu", {"c2"}, {"r2"}, {}, "relu2")
      // A Conv whose weights are an input: no group.
      .Input("wx", pb::kFloat, {{4, 4, 1, 1}})
      .Node("Conv", {"r2", "wx"}, {"c3"}, {}, "conv3")
      .Node("Relu", {"c3"}, {"y"}, {}, "relu3")
      .Output("c2", pb::kFloat)
      .Output("y", pb::kFloat);
  Planned p = Plan(b.Build(), true);
  EXPECT_EQ(Describe(p), (std::vector<std::string>{"conv: conv bn res relu"}));
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(InputNames(p.groups[0]), (std::vector<std::string>{"x", "w", "-", "g", "b", "m", "v", "x"}));
}

TEST(DevicePlanTest, SubgraphReadersAndInputLimitsStopGroups) {
  // An intermediate value read inside an If branch stays a value: the run
  // stops before the node that makes it would be hidden.
  pb::GraphProto branch = GraphBuilder("branch").Node("Neg", {"a"}, {"o"}).Output("o", pb::kFloat).Build();
  GraphBuilder b("g");
  b.Input("x", pb::kFloat, {{4}})
      .Input("c", pb::kBool, {{}})
      .Node("Relu", {"x"}, {"a"}, {}, "relu")
      .Node("Tanh", {"a"}, {"t"}, {}, "tanh")
      .Node("Sigmoid", {"t"}, {"s"}, {}, "sigmoid")
      .Node("If", {"c"}, {"z"}, {AttrGraph("then_branch", branch), AttrGraph("else_branch", branch)}, "if")
      .Output("s", pb::kFloat)
      .Output("z", pb::kFloat);
  Planned p = Plan(b.Build(), true, {"If", "Neg"});
  EXPECT_EQ(Describe(p), (std::vector<std::string>{"elementwise: tanh sigmoid"}));
  // Nine inputs are one too many for a chain kernel of eight.
  GraphBuilder w("g");
  w.Input("x0", pb::kFloat, {{4}});
  std::string last = "x0";
  for (int i = 1; i <= 8; ++i) {
    const std::string in = "x" + std::to_string(i), out = "s" + std::to_string(i);
    w.Input(in, pb::kFloat, {{4}}).Node("Add", {last, in}, {out}, {}, "add" + std::to_string(i));
    last = out;
  }
  w.Output(last, pb::kFloat);
  Planned wide = Plan(w.Build(), false);
  ASSERT_FALSE(wide.groups.empty());
  for (const DeviceGroup& g : wide.groups) EXPECT_LE(g.inputs.size(), 8u);
  Planned narrow = Plan(w.Build(), false, {}, nullptr, 4);
  for (const DeviceGroup& g : narrow.groups) EXPECT_LE(g.inputs.size(), 4u);
}

}  // namespace
}  // namespace onnxkit::runner
