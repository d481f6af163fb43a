// Tests for lib/ir/from_proto.cc: the structure FromProto builds (producers,
// use lists, outer-scope references, kinds, entries) and every error it
// reports, with its message.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/base/limits.h"
#include "lib/ir/ir.h"
#include "tests/util/model_builder.h"

namespace onnxkit::ir {
namespace {

using ::onnxkit::testing::AttrGraph;
using ::onnxkit::testing::AttrInt;
using ::onnxkit::testing::AttrString;
using ::onnxkit::testing::GraphBuilder;
using ::onnxkit::testing::IfModelWithOuterRefs;
using ::onnxkit::testing::MakeNode;
using ::onnxkit::testing::ModelFromGraph;
using ::onnxkit::testing::RawFloatTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Model> Import(pb::ModelProto proto) {
  auto model = FromProto(std::move(proto));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  EXPECT_TRUE(Verify(**model).ok()) << Verify(**model);
  return std::move(*model);
}

absl::Status ImportError(pb::ModelProto proto) {
  auto model = FromProto(std::move(proto));
  return model.ok() ? absl::OkStatus() : model.status();
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(IrFromProtoTest, LinearGraphKindsProducersAndUses) {
  auto model = Import(ModelFromGraph(GraphBuilder("main")
                                         .Input("x", pb::kFloat, std::vector<int64_t>{2, 3})
                                         .Initializer(RawFloatTensor("w", {2, 3}))
                                         .Node("Add", {"x", "w"}, {"s"}, {}, "add")
                                         .Node("Mul", {"s", "s"}, {"y"}, {}, "mul")
                                         .Output("y", pb::kFloat, std::vector<int64_t>{2, 3})
                                         .Build()));
  ASSERT_NE(model, nullptr);
  Graph& g = model->graph();
  EXPECT_EQ(g.name(), "main");
  ASSERT_EQ(g.num_nodes(), 2);
  Value* x = g.FindValue("x");
  Value* w = g.FindValue("w");
  Value* s = g.FindValue("s");
  Value* y = g.FindValue("y");
  ASSERT_TRUE(x && w && s && y);
  EXPECT_EQ(x->kind(), ValueKind::kGraphInput);
  EXPECT_TRUE(x->is_graph_input());
  EXPECT_EQ(w->kind(), ValueKind::kInitializer);
  EXPECT_TRUE(w->IsConstant());
  ASSERT_NE(w->initializer(), nullptr);
  EXPECT_EQ(w->initializer()->dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(s->kind(), ValueKind::kNodeOutput);
  Node* add = g.FindNode("add");
  Node* mul = g.FindNode("mul");
  EXPECT_EQ(s->producer(), add);
  EXPECT_EQ(s->producer_output(), 0);
  EXPECT_EQ(x->producer(), nullptr);
  // A node naming the same value twice gives two uses.
  EXPECT_THAT(s->uses(), ElementsAre(Use{mul, 0}, Use{mul, 1}));
  EXPECT_THAT(Consumers(*s), ElementsAre(mul));
  EXPECT_THAT(x->uses(), ElementsAre(Use{add, 0}));
  EXPECT_THAT(g.outputs(), ElementsAre(y));
  EXPECT_TRUE(y->IsGraphOutput());
  ASSERT_NE(y->type(), nullptr);
  EXPECT_EQ(y->type()->tensor_type->elem_type, pb::kFloat);
  EXPECT_EQ(model->OpsetVersion(""), 17);
  EXPECT_EQ(model->OpsetVersion("ai.onnx"), 17);
  EXPECT_EQ(model->OpsetVersion("com.microsoft"), std::nullopt);
}

TEST(IrFromProtoTest, IfBranchesUseOuterValues) {
  auto model = Import(IfModelWithOuterRefs());
  ASSERT_NE(model, nullptr);
  Graph& g = model->graph();
  Node* if_node = g.FindNode("if");
  ASSERT_NE(if_node, nullptr);
  std::vector<Graph*> subs = if_node->Subgraphs();
  ASSERT_EQ(subs.size(), 2u);
  Graph* then_g = subs[0];
  Graph* else_g = subs[1];
  EXPECT_EQ(then_g->name(), "then");
  EXPECT_EQ(then_g->parent(), &g);
  EXPECT_EQ(then_g->owner_node(), if_node);
  EXPECT_EQ(then_g->depth(), 1);
  EXPECT_EQ(if_node->FindAttribute("then_branch")->g.get(), then_g);
  Node* add = then_g->FindNode("add");
  Node* neg = else_g->FindNode("neg");
  Value* x = g.FindValue("x");
  // Outer values are the main graph's Values, used from the branches.
  EXPECT_EQ(add->input(0), x);
  EXPECT_EQ(add->input(1), g.FindValue("w"));
  EXPECT_EQ(then_g->FindValue("x"), x);
  EXPECT_EQ(then_g->FindLocalValue("x"), nullptr);
  EXPECT_THAT(x->uses(), ElementsAre(Use{add, 0}, Use{neg, 0}));
  EXPECT_EQ(then_g->FindValue("t")->graph(), then_g);
  EXPECT_EQ(g.FindValue("t"), nullptr);  // not visible from the parent
}

TEST(IrFromProtoTest, LoopBodyShadowsOuterNames) {
  // The body input "x" shadows the outer "x"; "w" resolves outside.
  pb::GraphProto body = GraphBuilder("body")
                            .Input("i", pb::kInt64, std::vector<int64_t>{})
                            .Input("cond", pb::kBool, std::vector<int64_t>{})
                            .Input("x", pb::kFloat)
                            .Node("Identity", {"cond"}, {"cond_out"})
                            .Node("Add", {"x", "w"}, {"x_out"}, {}, "body_add")
                            .Output("cond_out", pb::kBool)
                            .Output("x_out", pb::kFloat)
                            .Build();
  auto model =
      Import(ModelFromGraph(GraphBuilder("main")
                                .Input("n", pb::kInt64)
                                .Input("x", pb::kFloat)
                                .Input("w", pb::kFloat)
                                .Node("Loop", {"n", "", "x"}, {"y"}, {AttrGraph("body", body)}, "loop")
                                .Output("y")
                                .Build()));
  ASSERT_NE(model, nullptr);
  Graph& g = model->graph();
  Node* loop = g.FindNode("loop");
  EXPECT_EQ(loop->input(1), nullptr);  // omitted optional input
  Graph* b = loop->Subgraphs()[0];
  Node* body_add = b->FindNode("body_add");
  EXPECT_EQ(body_add->input(0), b->FindLocalValue("x"));
  EXPECT_NE(body_add->input(0), g.FindValue("x"));
  EXPECT_EQ(body_add->input(1), g.FindValue("w"));
  EXPECT_THAT(g.FindValue("x")->uses(), ElementsAre(Use{loop, 2}));
}

TEST(IrFromProtoTest, EntriesInputInitializersOrphansAndOmittedOutputs) {
  pb::GraphProto gp = GraphBuilder("main")
                          .Input("x", pb::kFloat)
                          .Input("b", pb::kFloat)  // IR < 4: an input with a default
                          .Initializer(RawFloatTensor("b", {1}))
                          .Node("Dropout", {"x"}, {"d", ""}, {}, "drop")
                          .ValueInfo("d", pb::kFloat)
                          .ValueInfo("ghost", pb::kInt32)  // names nothing
                          .Output("d", /*elem_type=*/0)    // untyped
                          .Output("x")                     // an output naming an input directly
                          .Output("b")
                          .Build();
  auto model = Import(ModelFromGraph(std::move(gp), 9, 3));
  ASSERT_NE(model, nullptr);
  Graph& g = model->graph();
  Value* b = g.FindValue("b");
  EXPECT_EQ(b->kind(), ValueKind::kInitializer);
  EXPECT_TRUE(b->is_graph_input());
  EXPECT_FALSE(b->IsConstant());
  EXPECT_THAT(g.inputs(), ElementsAre(g.FindValue("x"), b));
  EXPECT_THAT(g.initializers(), ElementsAre(b));
  Node* drop = g.FindNode("drop");
  ASSERT_EQ(drop->num_outputs(), 2);
  EXPECT_TRUE(drop->output(1)->name().empty());
  EXPECT_EQ(drop->output(1)->producer(), drop);
  Value* ghost = g.FindValue("ghost");
  ASSERT_NE(ghost, nullptr);
  EXPECT_EQ(ghost->kind(), ValueKind::kUndefined);
  EXPECT_THAT(g.value_info(), ElementsAre(g.FindValue("d"), ghost));
  // "d" is described by value_info (typed) and its output entry (untyped).
  EXPECT_NE(g.FindValue("d")->type(), nullptr);
  EXPECT_EQ(g.OutputEntry(0).type.get(), nullptr);
  EXPECT_EQ(g.OutputEntry(0).name, "d");
}

TEST(IrFromProtoTest, KeepsNodeAndAttributeFields) {
  pb::NodeProto n = MakeNode("Gelu", {"x"}, {"y"}, {AttrString("approximate", "tanh")}, "gelu");
  n.domain = "com.example";
  n.overload = "v2";
  n.doc_string = "doc";
  n.unknown_fields = std::string("\xa0\x06\x01", 3);  // field 100, varint 1
  pb::GraphProto gp = GraphBuilder("main").Input("x").Output("y").Build();
  gp.node.push_back(n);
  auto model = Import(ModelFromGraph(std::move(gp)));
  ASSERT_NE(model, nullptr);
  Node* gelu = model->graph().FindNode("gelu");
  EXPECT_EQ(gelu->domain(), "com.example");
  EXPECT_EQ(gelu->overload(), "v2");
  EXPECT_EQ(gelu->doc_string(), "doc");
  EXPECT_EQ(gelu->extra().unknown_fields, std::string("\xa0\x06\x01", 3));
  EXPECT_EQ(gelu->GetString("approximate"), "tanh");
  EXPECT_EQ(gelu->GetInt("approximate"), std::nullopt);
}

// --- Errors ---

TEST(IrFromProtoTest, ErrorNoGraph) {
  pb::ModelProto m;
  absl::Status s = ImportError(m);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), HasSubstr("model has no graph"));
}

TEST(IrFromProtoTest, ErrorTwoProducers) {
  absl::Status s = ImportError(ModelFromGraph(GraphBuilder("main")
                                                  .Input("x")
                                                  .Node("Relu", {"x"}, {"y"}, {}, "r1")
                                                  .Node("Neg", {"x"}, {"y"}, {}, "r2")
                                                  .Output("y")
                                                  .Build()));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      Message(s),
      "graph 'main': value 'y' is defined twice: as output 0 of node 'r1' (Relu) and as output 0 of node "
      "'r2' (Neg)");
}

TEST(IrFromProtoTest, ErrorInputAndNodeOutput) {
  absl::Status s = ImportError(
      ModelFromGraph(GraphBuilder("main").Input("x").Node("Relu", {"x"}, {"x"}).Output("x").Build()));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s),
            "graph 'main': value 'x' is defined twice: as graph input and as output 0 of node #0 (Relu)");
}

TEST(IrFromProtoTest, ErrorDuplicateInputsAndInitializers) {
  absl::Status s =
      ImportError(ModelFromGraph(GraphBuilder("main").Input("x").Input("x").Output("x").Build()));
  EXPECT_THAT(Message(s), HasSubstr("value 'x' is defined twice: as graph input and as graph input"));
  s = ImportError(ModelFromGraph(GraphBuilder("main")
                                     .Initializer(RawFloatTensor("w", {1}))
                                     .Initializer(RawFloatTensor("w", {1}))
                                     .Output("w")
                                     .Build()));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), HasSubstr("value 'w' is defined twice: as initializer and as initializer"));
}

TEST(IrFromProtoTest, ErrorSameOutputTwiceInOneNode) {
  absl::Status s = ImportError(ModelFromGraph(
      GraphBuilder("main").Input("x").Node("Split", {"x"}, {"a", "a"}, {}, "split").Output("a").Build()));
  EXPECT_THAT(
      Message(s),
      HasSubstr("'a' is defined twice: as output 0 of node 'split' (Split) and as output 1 of node 'split'"));
}

TEST(IrFromProtoTest, ErrorUndefinedInput) {
  absl::Status s = ImportError(ModelFromGraph(
      GraphBuilder("main").Input("x").Node("Add", {"x", "nope"}, {"y"}, {}, "add").Output("y").Build()));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      Message(s),
      "graph 'main': node 'add' (Add): input 1 'nope' is not defined in this graph or an enclosing one");
}

TEST(IrFromProtoTest, ErrorInputOnlyDeclaredByValueInfo) {
  absl::Status s = ImportError(ModelFromGraph(
      GraphBuilder("main").Input("x").ValueInfo("v").Node("Add", {"x", "v"}, {"y"}).Output("y").Build()));
  EXPECT_THAT(Message(s), HasSubstr("node #0 (Add): input 1 'v' is not defined"));
}

TEST(IrFromProtoTest, ErrorUndefinedInputInSubgraphNamesThePath) {
  pb::GraphProto then_g = GraphBuilder("then").Node("Neg", {"missing"}, {"t"}, {}, "neg").Output("t").Build();
  pb::GraphProto else_g = GraphBuilder("else").Node("Neg", {"x"}, {"e"}).Output("e").Build();
  absl::Status s = ImportError(
      ModelFromGraph(GraphBuilder("main")
                         .Input("c", pb::kBool)
                         .Input("x")
                         .Node("If", {"c"}, {"y"},
                               {AttrGraph("then_branch", then_g), AttrGraph("else_branch", else_g)}, "if")
                         .Output("y")
                         .Build()));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s),
            "graph 'main' > node 'if' (If) attribute 'then_branch' > graph 'then': node 'neg' (Neg): input 0 "
            "'missing' is not defined in this graph or an enclosing one");
}

TEST(IrFromProtoTest, ErrorSubgraphValueNotVisibleFromSibling) {
  // "t" is defined in then_branch only; else_branch cannot read it.
  pb::GraphProto then_g = GraphBuilder("then").Input("x").Node("Neg", {"x"}, {"t"}).Output("t").Build();
  pb::GraphProto else_g = GraphBuilder("else").Node("Neg", {"t"}, {"e"}).Output("e").Build();
  absl::Status s = ImportError(ModelFromGraph(
      GraphBuilder("main")
          .Input("c", pb::kBool)
          .Node("If", {"c"}, {"y"}, {AttrGraph("then_branch", then_g), AttrGraph("else_branch", else_g)})
          .Output("y")
          .Build()));
  EXPECT_THAT(Message(s), HasSubstr("attribute 'else_branch' > graph 'else': node #0 (Neg): input 0 't'"));
}

TEST(IrFromProtoTest, ErrorUndefinedGraphOutput) {
  absl::Status s =
      ImportError(ModelFromGraph(GraphBuilder("main").Input("x").Output("x").Output("z").Build()));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s), "graph 'main': graph output 1 'z' is not defined in this graph or an enclosing one");
}

TEST(IrFromProtoTest, ErrorEmptyNames) {
  pb::GraphProto gp = GraphBuilder("main").Input("").Build();
  EXPECT_THAT(Message(ImportError(ModelFromGraph(gp))),
              HasSubstr("graph 'main': graph input 0 has an empty name"));
  gp = GraphBuilder("main").Initializer(RawFloatTensor("", {1})).Build();
  EXPECT_THAT(Message(ImportError(ModelFromGraph(gp))), HasSubstr("initializer 0 has an empty name"));
  gp = GraphBuilder("main").ValueInfo("").Build();
  EXPECT_THAT(Message(ImportError(ModelFromGraph(gp))), HasSubstr("value_info entry 0 has an empty name"));
  gp = GraphBuilder("main").Output("").Build();
  EXPECT_THAT(Message(ImportError(ModelFromGraph(gp))), HasSubstr("graph output 0 ''"));
}

TEST(IrFromProtoTest, ErrorGraphAttributeWithoutGraph) {
  pb::AttributeProto a = AttrInt("then_branch", 0);
  a.type = pb::kAttrGraph;
  absl::Status s = ImportError(ModelFromGraph(
      GraphBuilder("main").Input("c", pb::kBool).Node("If", {"c"}, {"y"}, {a}, "if").Output("y").Build()));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s), "graph 'main': node 'if' (If): attribute 'then_branch' has type GRAPH but no graph");
}

// A chain of `levels` nested If nodes, each then_branch holding the next; the
// innermost graph ("leaf") is at depth `levels`.
pb::ModelProto NestedIfs(int levels) {
  pb::GraphProto inner = GraphBuilder("leaf").Node("Identity", {"c"}, {"o"}).Output("o").Build();
  for (int i = levels; i > 0; --i) {
    pb::GraphProto else_g = GraphBuilder("e").Node("Identity", {"c"}, {"o"}).Output("o").Build();
    inner = GraphBuilder("l" + std::to_string(i))
                .Node("If", {"c"}, {"o"}, {AttrGraph("then_branch", inner), AttrGraph("else_branch", else_g)})
                .Output("o")
                .Build();
  }
  inner.name = "main";
  inner.input.insert(inner.input.begin(), onnxkit::testing::MakeValueInfo("c", pb::kBool));
  return ModelFromGraph(inner);
}

TEST(IrFromProtoTest, NestingUpToTheLimitIsAccepted) {
  auto model = FromProto(NestedIfs(limits::kMaxGraphDepth));  // leaf at depth kMaxGraphDepth
  ASSERT_TRUE(model.ok()) << model.status();
  int max_depth = 0;
  ForEachGraph(**model, [&](const Graph& g) { max_depth = std::max(max_depth, g.depth()); });
  EXPECT_EQ(max_depth, limits::kMaxGraphDepth);
  EXPECT_TRUE(Verify(**model).ok());
}

TEST(IrFromProtoTest, ErrorNestingTooDeep) {
  absl::Status s = ImportError(NestedIfs(limits::kMaxGraphDepth + 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(s), HasSubstr("subgraphs nested deeper than 32 levels (limits::kMaxGraphDepth)"));
  EXPECT_THAT(Message(s), HasSubstr("> graph 'leaf'"));
}

TEST(IrFromProtoTest, FunctionBodyAsGraph) {
  pb::ModelProto m =
      ModelFromGraph(GraphBuilder("main").Input("x").Node("F", {"x"}, {"y"}).Output("y").Build());
  pb::FunctionProto f;
  f.name = "F";
  f.domain = "local";
  f.input = {"a"};
  f.output = {"b"};
  f.node.push_back(MakeNode("Relu", {"a"}, {"r"}));
  f.node.push_back(MakeNode("Neg", {"r"}, {"b"}));
  m.functions.push_back(f);
  f.node[1].input[0] = "nowhere";
  m.functions.push_back(f);
  auto model = Import(std::move(m));
  ASSERT_NE(model, nullptr);
  auto body = model->FunctionBody(0);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ((*body)->num_nodes(), 2);
  EXPECT_EQ((*body)->inputs()[0]->name(), "a");
  EXPECT_EQ((*body)->outputs()[0]->producer()->op_type(), "Neg");
  EXPECT_TRUE(Verify(**body).ok());
  pb::FunctionProto back = model->functions()[0];
  FunctionBodyToProto(**body, &back);
  EXPECT_EQ(back.node.size(), 2u);
  EXPECT_EQ(back.input, model->functions()[0].input);
  EXPECT_EQ(back.node[1].input, model->functions()[0].node[1].input);
  auto bad = model->FunctionBody(1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(bad.status()), HasSubstr("function 'local:F': node #1 (Neg): input 0 'nowhere'"));
  EXPECT_EQ(model->FunctionBody(2).status().code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace onnxkit::ir
