// Tests for lib/ir/graph_mutation.cc and node.cc: each mutation, its use-list
// effects, its errors, and Verify afterwards.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/ir.h"
#include "tests/util/model_builder.h"

namespace onnxkit::ir {
namespace {

using ::onnxkit::testing::AttrInt;
using ::onnxkit::testing::GraphBuilder;
using ::onnxkit::testing::IfModelWithOuterRefs;
using ::onnxkit::testing::ModelFromGraph;
using ::onnxkit::testing::RawFloatTensor;
using ::onnxkit::testing::TensorType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

#define EXPECT_VERIFIED(model)       \
  do {                               \
    absl::Status s_ = Verify(model); \
    EXPECT_TRUE(s_.ok()) << s_;      \
  } while (0)

std::string Message(const absl::Status& s) { return std::string(s.message()); }

class IrMutationTest : public ::testing::Test {
 protected:
  // main(x, w = initializer) { a = Relu(x); b = Add(a, w) } -> (b)
  void SetUp() override {
    auto model = FromProto(ModelFromGraph(GraphBuilder("main")
                                              .Input("x")
                                              .Initializer(RawFloatTensor("w", {1}))
                                              .Node("Relu", {"x"}, {"a"}, {}, "relu")
                                              .Node("Add", {"a", "w"}, {"b"}, {}, "add")
                                              .ValueInfo("a", pb::kFloat)
                                              .Output("b")
                                              .Build()));
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    g_ = &model_->graph();
    x_ = g_->FindValue("x");
    w_ = g_->FindValue("w");
    a_ = g_->FindValue("a");
    b_ = g_->FindValue("b");
    relu_ = g_->FindNode("relu");
    add_ = g_->FindNode("add");
  }

  std::vector<std::string> Order() const {
    std::vector<std::string> out;
    for (const Node* n : g_->nodes()) out.push_back(n->name());
    return out;
  }

  std::unique_ptr<Model> model_;
  Graph* g_ = nullptr;
  Value *x_, *w_, *a_, *b_;
  Node *relu_, *add_;
};

TEST_F(IrMutationTest, AddNodeAtEndBeforeAndAfter) {
  auto neg = g_->AddNode({.op_type = "Neg", .name = "neg", .inputs = {b_}, .outputs = {"n"}});
  ASSERT_TRUE(neg.ok()) << neg.status();
  auto first = g_->AddNode({.op_type = "Abs", .name = "abs", .inputs = {x_}, .outputs = {"ab"}},
                           Position::Before(relu_));
  ASSERT_TRUE(first.ok());
  auto mid = g_->AddNode({.op_type = "Sin",
                          .name = "sin",
                          .inputs = {a_, nullptr},
                          .outputs = {"s", ""},
                          .attributes = {AttrInt("k", 3)}},
                         Position::After(relu_));
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(Order(), (std::vector<std::string>{"abs", "relu", "sin", "add", "neg"}));
  EXPECT_THAT(b_->uses(), ElementsAre(Use{*neg, 0}));
  EXPECT_THAT(x_->uses(), ElementsAre(Use{relu_, 0}, Use{*first, 0}));
  EXPECT_THAT(a_->uses(), ElementsAre(Use{add_, 0}, Use{*mid, 0}));
  Value* n = g_->FindValue("n");
  EXPECT_EQ(n->producer(), *neg);
  EXPECT_EQ(n->kind(), ValueKind::kNodeOutput);
  EXPECT_TRUE((*mid)->output(1)->name().empty());
  EXPECT_EQ((*mid)->GetInt("k"), 3);
  EXPECT_VERIFIED(*model_);
}

TEST_F(IrMutationTest, AddNodeErrorsChangeNothing) {
  auto s = g_->AddNode({.op_type = "Neg", .inputs = {x_}, .outputs = {"a"}});  // name taken
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s.status()), HasSubstr("name 'a' is already used in the model"));
  s = g_->AddNode({.op_type = "Neg", .inputs = {x_}, .outputs = {"q", "q"}});
  EXPECT_THAT(Message(s.status()), HasSubstr("names output 'q' twice"));
  Graph other;
  auto foreign = other.AddInput("f");
  ASSERT_TRUE(foreign.ok());
  s = g_->AddNode({.op_type = "Neg", .inputs = {*foreign}, .outputs = {"q"}});
  EXPECT_THAT(Message(s.status()), HasSubstr("input 0 of new node 'f' is not visible here"));
  pb::AttributeProto ga;
  ga.name = "body";
  ga.type = pb::kAttrGraph;
  s = g_->AddNode({.op_type = "Loop", .outputs = {"q"}, .attributes = {ga}});
  EXPECT_THAT(Message(s.status()), HasSubstr("attribute 'body' holds a graph"));
  Node* foreign_anchor = *other.AddNode({.op_type = "Neg", .inputs = {*foreign}, .outputs = {"o"}});
  s = g_->AddNode({.op_type = "Neg", .inputs = {x_}, .outputs = {"q"}}, Position::After(foreign_anchor));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(g_->num_nodes(), 2);
  EXPECT_EQ(g_->FindValue("q"), nullptr);
  EXPECT_VERIFIED(*model_);
}

TEST_F(IrMutationTest, CreateValueThenDefineIt) {
  Value* t = g_->CreateValue("a");  // "a" is taken
  EXPECT_EQ(t->name(), "a_1");
  EXPECT_EQ(t->kind(), ValueKind::kUndefined);
  EXPECT_VERIFIED(*model_);
  // Using a declared value as an input is refused.
  EXPECT_FALSE(g_->AddNode({.op_type = "Neg", .inputs = {t}, .outputs = {"q"}}).ok());
  auto n = g_->AddNode({.op_type = "Neg", .inputs = {b_}, .outputs = {t->name()}});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ((*n)->output(0), t);
  EXPECT_EQ(t->kind(), ValueKind::kNodeOutput);
  EXPECT_EQ(t->producer(), *n);
  ASSERT_TRUE(g_->AddOutput(t).ok());
  EXPECT_VERIFIED(*model_);
  Value* in = g_->CreateValue("extra");
  ASSERT_TRUE(g_->AddInput(in).ok());
  EXPECT_EQ(in->kind(), ValueKind::kGraphInput);
  EXPECT_VERIFIED(*model_);
}

TEST_F(IrMutationTest, RemoveNode) {
  absl::Status s = g_->RemoveNode(relu_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(s),
            "graph 'main': cannot remove node 'relu' (Relu): its output 'a' is used by node 'add' (Add)");
  s = g_->RemoveNode(add_);
  EXPECT_THAT(Message(s), HasSubstr("its output 'b' is a graph output"));
  ASSERT_TRUE(g_->RemoveOutput(0).ok());
  ASSERT_TRUE(g_->RemoveNode(add_).ok());
  EXPECT_THAT(a_->uses(), IsEmpty());
  EXPECT_THAT(w_->uses(), IsEmpty());
  EXPECT_EQ(g_->FindValue("b"), nullptr);
  ASSERT_TRUE(g_->RemoveNode(relu_).ok());
  EXPECT_THAT(g_->value_info(), IsEmpty());  // a's entry went with it
  EXPECT_THAT(x_->uses(), IsEmpty());
  EXPECT_EQ(g_->num_nodes(), 0);
  EXPECT_VERIFIED(*model_);
}

TEST_F(IrMutationTest, RemoveNodeWithSubgraphDropsItsOuterUses) {
  auto model = FromProto(IfModelWithOuterRefs());
  ASSERT_TRUE(model.ok());
  Graph& g = (*model)->graph();
  Value* x = g.FindValue("x");
  EXPECT_EQ(x->uses().size(), 2u);
  ASSERT_TRUE(g.RemoveOutput(0).ok());
  ASSERT_TRUE(g.RemoveNode(g.FindNode("if")).ok());
  EXPECT_THAT(x->uses(), IsEmpty());
  EXPECT_THAT(g.FindValue("w")->uses(), IsEmpty());
  EXPECT_VERIFIED(**model);
}

TEST_F(IrMutationTest, ReplaceAllUsesWithUpdatesUsesOutputsAndSubgraphs) {
  auto model = FromProto(IfModelWithOuterRefs());
  ASSERT_TRUE(model.ok());
  Graph& g = (*model)->graph();
  Value* x = g.FindValue("x");
  auto relu = g.AddNode({.op_type = "Relu", .name = "r", .inputs = {x}, .outputs = {"rx"}},
                        Position::Before(g.FindNode("if")));
  ASSERT_TRUE(relu.ok());
  ASSERT_TRUE(g.AddOutput(x).ok());
  Value* rx = g.FindValue("rx");
  Graph* then_g = g.FindNode("if")->Subgraphs()[0];
  Graph* else_g = g.FindNode("if")->Subgraphs()[1];
  // x's own use by the new Relu moves too: ask for the other uses only by
  // replacing, then restoring the Relu input.
  ASSERT_TRUE(g.ReplaceAllUsesWith(x, rx).ok());
  ASSERT_TRUE(g.SetInput(*relu, 0, x).ok());
  EXPECT_EQ(then_g->FindNode("add")->input(0), rx);
  EXPECT_EQ(else_g->FindNode("neg")->input(0), rx);
  EXPECT_THAT(x->uses(), ElementsAre(Use{*relu, 0}));
  EXPECT_EQ(rx->uses().size(), 2u);
  EXPECT_EQ(g.outputs().back(), rx);
  // The output entry keeps describing the output (x's declared type).
  EXPECT_EQ(g.OutputEntry(1).name, "rx");
  ASSERT_NE(g.OutputEntry(1).type.get(), nullptr);
  EXPECT_EQ(g.OutputEntry(1).type->tensor_type->elem_type, pb::kFloat);
  EXPECT_VERIFIED(**model);
  // A value of a subgraph is not visible where x is used in the main graph.
  Value* t = then_g->FindValue("t");
  absl::Status s = g.ReplaceAllUsesWith(rx, t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), HasSubstr("is not visible here"));
  EXPECT_EQ(rx->uses().size(), 2u);
  EXPECT_VERIFIED(**model);
}

TEST_F(IrMutationTest, SetAppendAndRemoveNodeInputs) {
  ASSERT_TRUE(g_->SetInput(add_, 1, x_).ok());
  EXPECT_THAT(w_->uses(), IsEmpty());
  EXPECT_THAT(x_->uses(), ElementsAre(Use{relu_, 0}, Use{add_, 1}));
  ASSERT_TRUE(g_->AppendInput(add_, w_).ok());
  ASSERT_TRUE(g_->AppendInput(add_, nullptr).ok());
  ASSERT_TRUE(g_->AppendInput(add_, a_).ok());
  EXPECT_THAT(add_->inputs(), ElementsAre(a_, x_, w_, nullptr, a_));
  EXPECT_THAT(a_->uses(), ElementsAre(Use{add_, 0}, Use{add_, 4}));
  ASSERT_TRUE(g_->RemoveInput(add_, 1).ok());
  EXPECT_THAT(add_->inputs(), ElementsAre(a_, w_, nullptr, a_));
  EXPECT_THAT(a_->uses(), ElementsAre(Use{add_, 0}, Use{add_, 3}));
  EXPECT_THAT(w_->uses(), ElementsAre(Use{add_, 1}));
  EXPECT_THAT(x_->uses(), ElementsAre(Use{relu_, 0}));
  EXPECT_VERIFIED(*model_);
  EXPECT_EQ(g_->SetInput(add_, 7, x_).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(g_->RemoveInput(add_, -1).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(g_->SetInput(nullptr, 0, x_).code(), absl::StatusCode::kNotFound);
}

TEST_F(IrMutationTest, GraphInputsOutputsAndInitializers) {
  auto y = g_->AddInput("y", TensorType(pb::kInt64));
  ASSERT_TRUE(y.ok());
  EXPECT_THAT(g_->inputs(), ElementsAre(x_, *y));
  EXPECT_EQ((*y)->type()->tensor_type->elem_type, pb::kInt64);
  EXPECT_FALSE(g_->AddInput("w").ok());  // taken
  ASSERT_TRUE(g_->AddOutput(a_).ok());
  EXPECT_THAT(g_->outputs(), ElementsAre(b_, a_));
  EXPECT_EQ(g_->RemoveOutput(5).code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(g_->RemoveOutput(0).ok());
  EXPECT_THAT(g_->outputs(), ElementsAre(a_));
  // An initializer becomes an overridable input, and back.
  ASSERT_TRUE(g_->AddInput(w_).ok());
  EXPECT_TRUE(w_->is_graph_input());
  EXPECT_FALSE(w_->IsConstant());
  EXPECT_VERIFIED(*model_);
  ASSERT_TRUE(g_->RemoveInput(w_).ok());
  EXPECT_TRUE(w_->IsConstant());
  EXPECT_EQ(g_->RemoveInput(x_).code(), absl::StatusCode::kFailedPrecondition);  // used
  ASSERT_TRUE(g_->RemoveInput(*y).ok());
  EXPECT_EQ(g_->FindValue("y"), nullptr);
  EXPECT_VERIFIED(*model_);

  auto init = g_->AddInitializer(RawFloatTensor("", {2}));
  ASSERT_TRUE(init.ok());
  EXPECT_EQ((*init)->name(), "init");
  EXPECT_THAT(g_->initializers(), ElementsAre(w_, *init));
  EXPECT_FALSE(g_->AddInitializer(RawFloatTensor("x", {2})).ok());
  absl::Status s = g_->RemoveInitializer(w_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(g_->RemoveInitializer(*init).ok());
  EXPECT_THAT(g_->initializers(), ElementsAre(w_));
  pb::SparseTensorProto sp;
  sp.values = RawFloatTensor("sp", {1});
  auto sparse = g_->AddSparseInitializer(sp);
  ASSERT_TRUE(sparse.ok());
  EXPECT_THAT(g_->sparse_initializers(), ElementsAre(*sparse));
  EXPECT_VERIFIED(*model_);
  ASSERT_TRUE(g_->RemoveInitializer(*sparse).ok());
  EXPECT_VERIFIED(*model_);
}

TEST_F(IrMutationTest, RemoveInitializerOfAnInputKeepsTheInput) {
  ASSERT_TRUE(g_->AddInput(w_).ok());
  ASSERT_TRUE(g_->RemoveInitializer(w_).ok());
  EXPECT_EQ(w_->kind(), ValueKind::kGraphInput);
  EXPECT_EQ(w_->initializer(), nullptr);
  EXPECT_THAT(g_->initializers(), IsEmpty());
  EXPECT_THAT(w_->uses(), ElementsAre(Use{add_, 1}));
  EXPECT_VERIFIED(*model_);
}

TEST_F(IrMutationTest, RenameValue) {
  ASSERT_TRUE(g_->RenameValue(a_, "activated").ok());
  EXPECT_EQ(g_->FindValue("a"), nullptr);
  EXPECT_EQ(g_->FindValue("activated"), a_);
  EXPECT_EQ(g_->ValueInfoEntry(0).name, "activated");
  EXPECT_THAT(Message(g_->RenameValue(a_, "w")), HasSubstr("name 'w' is already used"));
  EXPECT_VERIFIED(*model_);
  // Names used in subgraphs count as used.
  auto model = FromProto(IfModelWithOuterRefs());
  ASSERT_TRUE(model.ok());
  Graph& g = (*model)->graph();
  EXPECT_FALSE(g.RenameValue(g.FindValue("x"), "t").ok());  // "t" lives in then_branch
  EXPECT_TRUE(g.RenameValue(g.FindValue("x"), "fresh").ok());
  EXPECT_VERIFIED(**model);
}

TEST_F(IrMutationTest, MoveNode) {
  ASSERT_TRUE(g_->MoveNode(add_, Position::Before(relu_)).ok());
  EXPECT_EQ(Order(), (std::vector<std::string>{"add", "relu"}));
  ASSERT_TRUE(g_->MoveNode(add_, Position::End()).ok());
  EXPECT_EQ(Order(), (std::vector<std::string>{"relu", "add"}));
  ASSERT_TRUE(g_->MoveNode(relu_, Position::After(add_)).ok());
  EXPECT_EQ(Order(), (std::vector<std::string>{"add", "relu"}));
  EXPECT_VERIFIED(*model_);
}

TEST_F(IrMutationTest, BuildAnIfInCode) {
  auto c = g_->AddInput("c", TensorType(pb::kBool));
  ASSERT_TRUE(c.ok());
  auto if_node = g_->AddNode({.op_type = "If", .name = "if", .inputs = {*c}, .outputs = {"y"}});
  ASSERT_TRUE(if_node.ok());
  EXPECT_FALSE(g_->MayHoldSubgraphs());
  Graph* then_g = (*if_node)->AddSubgraph("then_branch");
  Graph* else_g = (*if_node)->AddSubgraph("else_branch");
  // Walks over the graphs see subgraphs added after the model was read.
  EXPECT_TRUE(g_->MayHoldSubgraphs());
  std::vector<const Graph*> walked;
  ForEachGraph(*g_, [&](const Graph& g) { walked.push_back(&g); });
  EXPECT_THAT(walked, ElementsAre(g_, then_g, else_g));
  EXPECT_EQ(then_g->parent(), g_);
  EXPECT_EQ(then_g->owner_node(), *if_node);
  uint64_t version = g_->version();
  auto t = then_g->AddNode({.op_type = "Neg", .inputs = {b_}, .outputs = {"t"}});
  ASSERT_TRUE(t.ok()) << t.status();
  // A change inside a subgraph is a change of the whole tree.
  EXPECT_GT(g_->version(), version);
  EXPECT_EQ(then_g->version(), g_->version());
  ASSERT_TRUE(then_g->AddOutput((*t)->output(0)).ok());
  ASSERT_TRUE(else_g->AddOutput(a_).ok());  // an outer value as a branch output
  ASSERT_TRUE(g_->AddOutput(g_->FindValue("y")).ok());
  EXPECT_THAT(b_->uses(), ElementsAre(Use{*t, 0}));
  EXPECT_VERIFIED(*model_);
  auto order = TopologicalOrder(*g_);
  ASSERT_TRUE(order.ok());
  // Round trip through pb keeps it all.
  pb::ModelProto proto = ToProto(*model_);
  auto back = FromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_VERIFIED(**back);
  // The else output names the outer "a", whose uses do not include outputs.
  EXPECT_TRUE(a_->IsGraphOutput());
  // Replacing the attribute drops the branch's outer uses.
  (*if_node)->AddSubgraph("then_branch");
  EXPECT_THAT(b_->uses(), IsEmpty());
  EXPECT_TRUE((*if_node)->RemoveAttribute("else_branch"));
  EXPECT_FALSE(a_->IsGraphOutput());
  EXPECT_VERIFIED(*model_);
}

TEST_F(IrMutationTest, SetAttributeKeepsPosition) {
  add_->SetAttribute(AttrInt("alpha", 1));
  add_->SetAttribute(AttrInt("beta", 2));
  add_->SetAttribute(AttrInt("alpha", 3));
  ASSERT_EQ(add_->attributes().size(), 2u);
  EXPECT_EQ(add_->attributes()[0].name(), "alpha");
  EXPECT_EQ(add_->GetInt("alpha"), 3);
  EXPECT_TRUE(add_->RemoveAttribute("alpha"));
  EXPECT_FALSE(add_->RemoveAttribute("alpha"));
  EXPECT_EQ(add_->attributes()[0].name(), "beta");
}

TEST_F(IrMutationTest, MoveNodeToSubgraph) {
  auto model = FromProto(IfModelWithOuterRefs());
  ASSERT_TRUE(model.ok());
  Graph& g = (*model)->graph();
  Node* if_node = g.FindNode("if");
  Graph* then_g = if_node->Subgraphs()[0];
  Graph* else_g = if_node->Subgraphs()[1];
  // pre = Abs(x) feeds only then_branch's add: it can move there.
  auto pre = g.AddNode({.op_type = "Abs", .name = "pre", .inputs = {g.FindValue("x")}, .outputs = {"px"}},
                       Position::Before(if_node));
  ASSERT_TRUE(pre.ok());
  Node* add = then_g->FindNode("add");
  ASSERT_TRUE(then_g->SetInput(add, 0, g.FindValue("px")).ok());
  absl::Status s = g.MoveNodeToSubgraph(*pre, else_g);  // px is used in then_branch
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(s), HasSubstr("is used by node 'add' (Add) outside graph 'else'"));
  ASSERT_TRUE(g.MoveNodeToSubgraph(*pre, then_g).ok());
  EXPECT_EQ((*pre)->graph(), then_g);
  EXPECT_EQ(g.FindValue("px"), nullptr);
  EXPECT_EQ(then_g->FindLocalValue("px")->graph(), then_g);
  EXPECT_EQ(g.num_nodes(), 1);
  EXPECT_VERIFIED(**model);
  // Order inside then_branch is now add, pre: sorting fixes it.
  ASSERT_TRUE(SortTopologically(*then_g).ok());
  EXPECT_EQ(*then_g->nodes().begin(), *pre);
  EXPECT_FALSE(g.MoveNodeToSubgraph(if_node, then_g).ok());  // into its own subgraph
  EXPECT_VERIFIED(**model);
}

}  // namespace
}  // namespace onnxkit::ir
