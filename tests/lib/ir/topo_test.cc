// Tests for lib/ir/topo.cc: stable order, unsorted input, subgraph outer
// uses as edges, cycles named by a node on them.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/ir.h"
#include "tests/util/model_builder.h"

namespace onnxkit::ir {
namespace {

using ::onnxkit::testing::AttrGraph;
using ::onnxkit::testing::GraphBuilder;
using ::onnxkit::testing::ModelFromGraph;
using ::testing::HasSubstr;

std::vector<std::string> Names(const std::vector<Node*>& nodes) {
  std::vector<std::string> out;
  for (const Node* n : nodes) out.push_back(n->name());
  return out;
}

std::vector<std::string> ListOrder(const Graph& g) {
  std::vector<std::string> out;
  for (const Node* n : g.nodes()) out.push_back(n->name());
  return out;
}

std::unique_ptr<Model> Import(pb::GraphProto g) {
  auto model = FromProto(ModelFromGraph(std::move(g)));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

TEST(IrTopoTest, SortedGraphKeepsItsOrder) {
  // Independent nodes b and c: ties keep list order.
  auto model = Import(GraphBuilder("main")
                          .Input("x")
                          .Node("Relu", {"x"}, {"a"}, {}, "a")
                          .Node("Neg", {"x"}, {"c"}, {}, "c")
                          .Node("Abs", {"a"}, {"b"}, {}, "b")
                          .Node("Add", {"b", "c"}, {"y"}, {}, "y")
                          .Output("y")
                          .Build());
  ASSERT_NE(model, nullptr);
  auto order = TopologicalOrder(model->graph());
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(Names(*order), (std::vector<std::string>{"a", "c", "b", "y"}));
}

TEST(IrTopoTest, UnsortedGraphIsSortedStably) {
  auto model = Import(GraphBuilder("main")
                          .Input("x")
                          .Node("Add", {"b", "c"}, {"y"}, {}, "y")
                          .Node("Abs", {"a"}, {"b"}, {}, "b")
                          .Node("Neg", {"x"}, {"c"}, {}, "c")
                          .Node("Relu", {"x"}, {"a"}, {}, "a")
                          .Node("Sin", {"x"}, {"s"}, {}, "s")
                          .Output("y")
                          .Output("s")
                          .Build());
  ASSERT_NE(model, nullptr);
  auto order = TopologicalOrder(model->graph());
  ASSERT_TRUE(order.ok()) << order.status();
  // Ready first: c, a, s (list order); b once a is done; y last.
  EXPECT_EQ(Names(*order), (std::vector<std::string>{"c", "a", "b", "y", "s"}));
  ASSERT_TRUE(SortTopologically(model->graph()).ok());
  EXPECT_EQ(ListOrder(model->graph()), (std::vector<std::string>{"c", "a", "b", "y", "s"}));
  EXPECT_TRUE(Verify(*model).ok());
  auto again = TopologicalOrder(model->graph());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Names(*again), ListOrder(model->graph()));
}

TEST(IrTopoTest, SubgraphOuterUseOrdersTheOwnerNode) {
  // The If's then_branch reads "late", produced after the If in the list.
  pb::GraphProto then_g = GraphBuilder("then").Node("Neg", {"late"}, {"t"}).Output("t").Build();
  pb::GraphProto else_g = GraphBuilder("else").Node("Neg", {"x"}, {"e"}).Output("e").Build();
  auto model = Import(GraphBuilder("main")
                          .Input("c", pb::kBool)
                          .Input("x")
                          .Node("If", {"c"}, {"y"},
                                {AttrGraph("then_branch", then_g), AttrGraph("else_branch", else_g)}, "if")
                          .Node("Relu", {"x"}, {"late"}, {}, "late")
                          .Output("y")
                          .Build());
  ASSERT_NE(model, nullptr);
  auto order = TopologicalOrder(model->graph());
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(Names(*order), (std::vector<std::string>{"late", "if"}));
}

TEST(IrTopoTest, NestedSubgraphOuterUseCountsForTheTopNode) {
  pb::GraphProto inner = GraphBuilder("inner").Node("Neg", {"late"}, {"t"}).Output("t").Build();
  pb::GraphProto mid =
      GraphBuilder("mid")
          .Node("If", {"c"}, {"m"}, {AttrGraph("then_branch", inner), AttrGraph("else_branch", inner)})
          .Output("m")
          .Build();
  auto model = Import(GraphBuilder("main")
                          .Input("c", pb::kBool)
                          .Input("x")
                          .Node("If", {"c"}, {"y"},
                                {AttrGraph("then_branch", mid), AttrGraph("else_branch", mid)}, "outer_if")
                          .Node("Relu", {"x"}, {"late"}, {}, "late")
                          .Output("y")
                          .Build());
  ASSERT_NE(model, nullptr);
  auto order = TopologicalOrder(model->graph());
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(Names(*order), (std::vector<std::string>{"late", "outer_if"}));
}

TEST(IrTopoTest, CycleNamesANodeOnIt) {
  // p feeds the cycle q -> r -> q but is not on it.
  auto model = Import(GraphBuilder("main")
                          .Input("x")
                          .Node("Relu", {"x"}, {"p"}, {}, "p")
                          .Node("Add", {"p", "r"}, {"q"}, {}, "q")
                          .Node("Neg", {"q"}, {"r"}, {}, "r")
                          .Output("r")
                          .Build());
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(Verify(*model).ok());  // a cycle is not an IR invariant violation
  auto order = TopologicalOrder(model->graph());
  ASSERT_FALSE(order.ok());
  EXPECT_EQ(order.status().code(), absl::StatusCode::kInvalidArgument);
  std::string msg(order.status().message());
  EXPECT_THAT(msg, HasSubstr("graph 'main' has a cycle through node "));
  EXPECT_TRUE(msg.find("'q' (Add)") != std::string::npos || msg.find("'r' (Neg)") != std::string::npos)
      << msg;
  std::vector<std::string> before = ListOrder(model->graph());
  EXPECT_FALSE(SortTopologically(model->graph()).ok());
  EXPECT_EQ(ListOrder(model->graph()), before);
}

TEST(IrTopoTest, SelfLoopAndCycleThroughSubgraph) {
  auto self = Import(GraphBuilder("main")
                         .Node("Identity", {"a"}, {"a2"})
                         .Node("Neg", {"a2"}, {"a"}, {}, "n")
                         .Output("a")
                         .Build());
  ASSERT_NE(self, nullptr);
  EXPECT_FALSE(TopologicalOrder(self->graph()).ok());
  // The If reads (through its branch) the output of a node that reads the If.
  pb::GraphProto then_g = GraphBuilder("then").Node("Neg", {"z"}, {"t"}).Output("t").Build();
  auto model = Import(GraphBuilder("main")
                          .Input("c", pb::kBool)
                          .Node("If", {"c"}, {"y"},
                                {AttrGraph("then_branch", then_g), AttrGraph("else_branch", then_g)}, "if")
                          .Node("Relu", {"y"}, {"z"}, {}, "relu")
                          .Output("z")
                          .Build());
  ASSERT_NE(model, nullptr);
  auto order = TopologicalOrder(model->graph());
  ASSERT_FALSE(order.ok());
  EXPECT_THAT(std::string(order.status().message()), HasSubstr("has a cycle through node"));
}

TEST(IrTopoTest, EmptyGraph) {
  Graph g;
  auto order = TopologicalOrder(g);
  ASSERT_TRUE(order.ok());
  EXPECT_TRUE(order->empty());
}

}  // namespace
}  // namespace onnxkit::ir
