// Tests for lib/ir/names.cc: fresh names are deterministic and never collide
// with any name of the model (subgraphs, node names, functions, names added
// after seeding).
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/ir.h"
#include "tests/util/model_builder.h"

namespace onnxkit::ir {
namespace {

using ::onnxkit::testing::IfModelWithOuterRefs;
using ::onnxkit::testing::MakeNode;

// Every name a pb graph mentions, subgraphs included.
void Collect(const pb::GraphProto& g, std::set<std::string>* out) {
  for (const auto* list : {&g.input, &g.output, &g.value_info}) {
    for (const auto& vi : *list) out->insert(vi.name);
  }
  for (const auto& t : g.initializer) out->insert(t.name);
  for (const auto& n : g.node) {
    out->insert(n.name);
    out->insert(n.input.begin(), n.input.end());
    out->insert(n.output.begin(), n.output.end());
    for (const auto& a : n.attribute) {
      if (a.g) Collect(*a.g, out);
      for (const auto& sub : a.graphs) Collect(sub, out);
    }
  }
}

TEST(IrNamesTest, GeneratorCountsPerHint) {
  NameGenerator gen;
  gen.Reserve("x");
  EXPECT_EQ(gen.Fresh("y"), "y");
  EXPECT_EQ(gen.Fresh("y"), "y_1");
  EXPECT_EQ(gen.Fresh("x"), "x_1");
  gen.Reserve("x_2");
  EXPECT_EQ(gen.Fresh("x"), "x_3");
  EXPECT_EQ(gen.Fresh(""), "v");
  EXPECT_EQ(gen.Fresh("z", [](std::string_view n) { return n == "z" || n == "z_1"; }), "z_2");
  EXPECT_TRUE(gen.IsReserved("z_2"));
  EXPECT_FALSE(gen.IsReserved("z_1"));
}

TEST(IrNamesTest, FreshNamesAvoidSubgraphsNodesAndFunctions) {
  pb::ModelProto m = IfModelWithOuterRefs();
  pb::FunctionProto f;
  f.name = "F";
  f.input = {"fa"};
  f.output = {"fb"};
  f.node.push_back(MakeNode("Neg", {"fa"}, {"fb"}, {}, "fnode"));
  m.functions.push_back(f);
  auto model = FromProto(m);
  ASSERT_TRUE(model.ok());
  Graph& g = (*model)->graph();
  Graph* then_g = g.FindNode("if")->Subgraphs()[0];
  EXPECT_EQ(g.FreshName("t"), "t_1");      // value of then_branch
  EXPECT_EQ(g.FreshName("add"), "add_1");  // node of then_branch
  EXPECT_EQ(g.FreshName("if"), "if_1");    // node name
  EXPECT_EQ(g.FreshName("fa"), "fa_1");    // function input
  EXPECT_EQ(g.FreshName("fnode"), "fnode_1");
  EXPECT_EQ(then_g->FreshName("x"), "x_1");  // same generator from any graph
  EXPECT_EQ(g.FreshName("x"), "x_2");
  EXPECT_EQ(g.FreshName("new"), "new");
  EXPECT_EQ(g.FreshName("new"), "new_1");
  // A name added after seeding is seen too.
  ASSERT_TRUE(g.RenameValue(g.FindValue("w"), "later").ok());
  EXPECT_EQ(g.FreshName("later"), "later_1");
  auto added = then_g->AddNode({.op_type = "Neg", .inputs = {g.FindValue("x")}, .outputs = {"sub_out"}});
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(g.FreshName("sub_out"), "sub_out_1");
}

TEST(IrNamesTest, ManyFreshNamesNeverCollide) {
  pb::ModelProto m = IfModelWithOuterRefs();
  std::set<std::string> existing;
  Collect(*m.graph, &existing);
  ASSERT_GT(existing.size(), 8u);
  auto model = FromProto(m);
  ASSERT_TRUE(model.ok());
  Graph& g = (*model)->graph();
  Graph* else_g = g.FindNode("if")->Subgraphs()[1];
  std::set<std::string> made;
  std::vector<std::string> hints = {"x", "t", "e", "w", "y", "x_1", "", "add"};
  for (int i = 0; i < 500; ++i) {
    const std::string& hint = hints[static_cast<size_t>(i) % hints.size()];
    // Alternate the graph asking, and really create values so that the live
    // index is exercised as well.
    Value* v = (i % 2 == 0 ? &g : else_g)->CreateValue(hint);
    EXPECT_TRUE(made.insert(v->name()).second) << v->name();
    EXPECT_EQ(existing.count(v->name()), 0u) << v->name();
  }
  EXPECT_TRUE(Verify(**model).ok()) << Verify(**model);
}

TEST(IrNamesTest, Deterministic) {
  std::vector<std::string> runs[2];
  for (auto& run : runs) {
    auto model = FromProto(IfModelWithOuterRefs());
    ASSERT_TRUE(model.ok());
    Graph& g = (*model)->graph();
    for (const char* hint : {"x", "x", "t", "q", "q", "w"}) run.push_back(g.FreshName(hint));
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], (std::vector<std::string>{"x_1", "x_2", "t_1", "q", "q_1", "w_1"}));
}

}  // namespace
}  // namespace onnxkit::ir
