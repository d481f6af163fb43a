// Tests of the graph rules (checker/rules/graph.cc): names, SSA and
// shadowing, inputs in scope, order versus cycles, graph outputs, declared
// types, in the main graph, subgraphs and function bodies.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/checker/check_test_util.h"
#include "tests/util/model_builder.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kArrow[] = " \xe2\x86\x92 ";
constexpr char kSep[] = " \xe2\x80\xba ";

pb::ModelProto Model(const GraphBuilder& g, int64_t ir_version = 9) {
  return ModelFromGraph(g.Build(), 17, ir_version);
}

// x -> Relu 'r1' -> a -> Relu 'r2' -> y.
GraphBuilder Chain() {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2}})
      .Node("Relu", {"x"}, {"a"}, {}, "r1")
      .Node("Relu", {"a"}, {"y"}, {}, "r2")
      .Output("y", pb::kFloat, {{2}});
  return g;
}

// If(c) whose branches are `then_graph` and an Identity of x.
pb::NodeProto IfNode(pb::GraphProto then_graph, std::vector<std::string> outputs, std::string name = "if") {
  pb::GraphProto else_graph =
      GraphBuilder("else").Node("Identity", {"x"}, {"e"}, {}, "id").Output("e").Build();
  return MakeNode("If", {"c"}, std::move(outputs),
                  {AttrGraph("then_branch", std::move(then_graph)), AttrGraph("else_branch", else_graph)},
                  std::move(name));
}

TEST(GraphRulesTest, ValidGraphsHaveNoDiagnostics) {
  EXPECT_THAT(Check(Model(Chain())).diagnostics, IsEmpty());
  checker::CheckResult r = Check(IfModelWithOuterRefs());
  EXPECT_THAT(r.diagnostics, IsEmpty()) << Dump(r);
}

TEST(GraphRulesTest, ValueProducedTwice) {
  GraphBuilder g = Chain();
  g.graph().node[1].output[0] = "a";
  g.graph().output[0].name = "a";
  EXPECT_EQ(Only(Check(Model(g)), "E0300"),
            std::string("graph 'main'") + kSep +
                "node 'r2' (Relu): output 'a' is already produced by node 'r1' (Relu)");
  g.graph().node[1].output[0] = "x";  // a node output redefining a graph input
  g.graph().output[0].name = "x";
  EXPECT_THAT(Only(Check(Model(g)), "E0300"), HasSubstr("output 'x' is already produced by graph input 'x'"));
}

TEST(GraphRulesTest, NodeOutputShadowingAnOuterName) {
  pb::GraphProto then_graph = GraphBuilder("then").Node("Neg", {"x"}, {"x"}, {}, "neg").Output("x").Build();
  pb::GraphProto main = GraphBuilder("main")
                            .Input("c", pb::kBool, {{}})
                            .Input("x", pb::kFloat, {{2}})
                            .Output("y", pb::kFloat, {{2}})
                            .Build();
  main.node.push_back(IfNode(then_graph, {"y"}));
  checker::CheckResult r = Check(ModelFromGraph(main));
  EXPECT_EQ(r.diagnostics.size(), 1u) << Dump(r);  // reading 'x' is not also a cycle
  EXPECT_EQ(Only(r, "E0301"), std::string("graph 'main'") + kSep + "node 'if' (If)" + kSep +
                                  "attribute 'then_branch'" + kSep +
                                  "node 'neg' (Neg): output 'x' shadows a value of an enclosing graph");
  // Near miss: reading the outer value is fine.
  main.node[0] = IfNode(GraphBuilder("then").Node("Neg", {"x"}, {"t"}, {}, "neg").Output("t").Build(), {"y"});
  EXPECT_THAT(Check(ModelFromGraph(main)).diagnostics, IsEmpty());
}

TEST(GraphRulesTest, LaterProducerIsAnOrderError) {
  GraphBuilder g = Chain();
  std::swap(g.graph().node[0], g.graph().node[1]);
  checker::CheckResult r = Check(Model(g));
  EXPECT_EQ(Only(r, "E0302"),
            std::string("graph 'main'") + kSep +
                "node 'r2' (Relu): input 'a' (#0) is produced by a later node, node 'r1' (Relu) "
                "(this node is #0)");
  EXPECT_THAT(Findings(r, "E0303"), IsEmpty());
  EXPECT_THAT(Findings(r, "E0302")[0].hint, HasSubstr("topologically"));
}

TEST(GraphRulesTest, CycleIsReportedAsACycleNamingItsNodes) {
  // a = Add(x, b); b = Relu(a): a cycle, not an order problem.
  pb::ModelProto m = Model(GraphBuilder("main")
                               .Input("x", pb::kFloat, {{2}})
                               .Node("Add", {"x", "b"}, {"a"}, {}, "add")
                               .Node("Relu", {"a"}, {"b"}, {}, "relu")
                               .Output("b", pb::kFloat, {{2}}));
  checker::CheckResult r = Check(m);
  EXPECT_EQ(Only(r, "E0303"), std::string("graph 'main'") + kSep +
                                  "node 'add' (Add): nodes form a cycle: node 'add' (Add)" + kArrow +
                                  "node 'relu' (Relu)" + kArrow + "node 'add' (Add)");
  EXPECT_THAT(Findings(r, "E0302"), IsEmpty()) << Dump(r);
}

TEST(GraphRulesTest, NodeReadingItsOwnOutputIsACycle) {
  pb::ModelProto m = Model(GraphBuilder("main")
                               .Input("x", pb::kFloat, {{2}})
                               .Node("Add", {"x", "a"}, {"a"}, {}, "add")
                               .Output("a", pb::kFloat, {{2}}));
  EXPECT_THAT(Only(Check(m), "E0303"),
              HasSubstr("nodes form a cycle: node 'add' (Add)" + std::string(kArrow) + "node 'add' (Add)"));
}

TEST(GraphRulesTest, CycleThroughASubgraphReference) {
  // The If's then-branch reads 'z', which a later node computes from the
  // If's own output.
  pb::GraphProto then_graph = GraphBuilder("then").Node("Neg", {"z"}, {"t"}, {}, "neg").Output("t").Build();
  pb::GraphProto main = GraphBuilder("main")
                            .Input("c", pb::kBool, {{}})
                            .Input("x", pb::kFloat, {{2}})
                            .Output("z", pb::kFloat, {{2}})
                            .Build();
  main.node.push_back(IfNode(then_graph, {"y"}));
  main.node.push_back(MakeNode("Relu", {"y"}, {"z"}, {}, "relu"));
  checker::CheckResult r = Check(ModelFromGraph(main));
  EXPECT_THAT(Only(r, "E0303"), HasSubstr("nodes form a cycle: node 'if' (If)" + std::string(kArrow) +
                                          "node 'relu' (Relu)" + kArrow + "node 'if' (If)"));
  // Near miss: the later node does not depend on the If: an order error.
  main.node[1] = MakeNode("Relu", {"x"}, {"z"}, {}, "relu");
  main.output[0].name = "z";
  r = Check(ModelFromGraph(main));
  EXPECT_THAT(Findings(r, "E0303"), IsEmpty());
  EXPECT_THAT(
      Only(r, "E0302"),
      HasSubstr("node 'if' (If): attribute 'then_branch' reads 'z', which is produced by a later node, "
                "node 'relu' (Relu)"));
}

TEST(GraphRulesTest, UndefinedInputsInGraphsAndSubgraphs) {
  GraphBuilder g = Chain();
  g.graph().node[1].input[0] = "nope";
  EXPECT_EQ(
      Only(Check(Model(g)), "E0304"),
      std::string("graph 'main'") + kSep +
          "node 'r2' (Relu): input 'nope' (#0) is not defined: no graph input, initializer or node output in "
          "scope has this name");
  pb::GraphProto main = GraphBuilder("main")
                            .Input("c", pb::kBool, {{}})
                            .Input("x", pb::kFloat, {{2}})
                            .Output("y", pb::kFloat, {{2}})
                            .Build();
  main.node.push_back(
      IfNode(GraphBuilder("then").Node("Neg", {"q"}, {"t"}, {}, "neg").Output("t").Build(), {"y"}));
  EXPECT_THAT(Only(Check(ModelFromGraph(main)), "E0304"),
              HasSubstr("attribute 'then_branch'" + std::string(kSep) + "node 'neg' (Neg): input 'q' (#0)"));
}

TEST(GraphRulesTest, GraphOutputsMustBeProducedInTheGraph) {
  GraphBuilder g = Chain();
  g.Output("ghost", pb::kFloat, {{2}});
  EXPECT_EQ(Only(Check(Model(g)), "E0305"),
            "graph 'main': graph output 'ghost' is not produced by any node, graph input or initializer");
  // A subgraph output naming an enclosing value.
  pb::GraphProto main = GraphBuilder("main")
                            .Input("c", pb::kBool, {{}})
                            .Input("x", pb::kFloat, {{2}})
                            .Output("y", pb::kFloat, {{2}})
                            .Build();
  main.node.push_back(IfNode(GraphBuilder("then").Output("x").Build(), {"y"}));
  checker::CheckResult r = Check(ModelFromGraph(main));
  EXPECT_THAT(Only(r, "E0305"), HasSubstr("graph output 'x' is a value of an enclosing graph"));
  EXPECT_THAT(Findings(r, "E0305")[0].hint, HasSubstr("Identity"));
}

TEST(GraphRulesTest, DuplicateInputsAndInitializers) {
  GraphBuilder g = Chain();
  g.Input("x", pb::kFloat, {{2}});
  EXPECT_EQ(Only(Check(Model(g)), "E0306"), "graph 'main': graph input 'x' appears twice");

  GraphBuilder h = Chain();
  h.Initializer(RawFloatTensor("w", {2})).Initializer(RawFloatTensor("w", {2}));
  EXPECT_EQ(Only(Check(Model(h)), "E0307"), "graph 'main': initializer 'w' appears twice");
  // Dense and sparse clash.
  GraphBuilder k = Chain();
  k.Initializer(RawFloatTensor("w", {2}));
  pb::SparseTensorProto s;
  s.values = RawFloatTensor("w", {0});
  s.dims = {2};
  k.graph().sparse_initializer.push_back(s);
  EXPECT_EQ(Only(Check(Model(k)), "E0307"), "graph 'main': sparse initializer 'w' appears twice");
  // Near miss: an initializer may share its name with a graph input.
  GraphBuilder ok = Chain();
  ok.Initializer(RawFloatTensor("x", {2}));
  EXPECT_THAT(Check(Model(ok)).diagnostics, IsEmpty());
}

TEST(GraphRulesTest, EmptyNames) {
  GraphBuilder g = Chain();
  g.Input("", pb::kFloat, {{2}}).Initializer(RawFloatTensor("", {1})).ValueInfo("", pb::kFloat);
  checker::CheckResult r = Check(Model(g));
  std::vector<checker::Diagnostic> found = Findings(r, "E0308");
  ASSERT_EQ(found.size(), 3u) << Dump(r);
  EXPECT_EQ(found[0].message, "graph input #1 has an empty name");
  EXPECT_EQ(found[1].message, "initializer #0 has an empty name");
  EXPECT_EQ(found[2].message, "value_info #0 has an empty name");
}

TEST(GraphRulesTest, DeclaredTypes) {
  GraphBuilder g = Chain();
  g.graph().input[0].type.reset();
  EXPECT_EQ(Only(Check(Model(g)), "E0309"), "graph 'main': graph input 'x' has no type");
  g = Chain();
  g.graph().output[0].type->tensor_type->elem_type = 0;
  EXPECT_EQ(Only(Check(Model(g)), "E0309"), "graph 'main': graph output 'y': tensor elem_type is undefined");
  g = Chain();
  g.graph().input[0].type->tensor_type->shape->dim[0].dim_value = -4;
  EXPECT_EQ(Only(Check(Model(g)), "E0309"),
            "graph 'main': graph input 'x': dimension #0 is -4, expected >= 0 (or a symbolic dim_param)");
  g = Chain();
  g.ValueInfo("a", 999);
  EXPECT_EQ(Only(Check(Model(g)), "E0309"),
            "graph 'main': value_info 'a': tensor elem_type 999 is not a known element type");
  // Near miss: subgraph inputs and outputs may leave types out.
  pb::ModelProto m = IfModelWithOuterRefs();
  for (pb::AttributeProto& a : m.graph->node[0].attribute) a.g->output[0].type.reset();
  EXPECT_THAT(Check(m).diagnostics, IsEmpty());
}

TEST(GraphRulesTest, UnnamedMainGraphIsAWarning) {
  GraphBuilder g = Chain();
  g.graph().name = "";
  checker::CheckResult r = Check(Model(g));
  EXPECT_EQ(Only(r, "E0310"), "graph (unnamed): the main graph has no name");
  EXPECT_EQ(r.diagnostics[0].severity, checker::Severity::kWarning);
  EXPECT_EQ(r.status(), checker::FileStatus::kValid);
}

TEST(GraphRulesTest, InitializerMustBeAnInputBeforeIr4) {
  GraphBuilder g = Chain();
  g.Initializer(RawFloatTensor("w", {2}));
  EXPECT_EQ(
      Only(Check(Model(g, 3)), "E0311"),
      "graph 'main': initializer 'w' is not a graph input (required before IR version 4; the model is IR "
      "version 3)");
  EXPECT_THAT(Check(Model(g, 4)).diagnostics, IsEmpty());  // near miss: IR 4
  g.Input("w", pb::kFloat, {{2}});
  EXPECT_THAT(Check(Model(g, 3)).diagnostics, IsEmpty());  // near miss: also an input
}

TEST(GraphRulesTest, DeepNestingIsRefusedWithoutCrashing) {
  // If inside If inside If ... 40 levels.
  pb::GraphProto inner = GraphBuilder("leaf").Node("Identity", {"x"}, {"t40"}).Output("t40").Build();
  for (int level = 39; level >= 0; --level) {
    std::string out = "t" + std::to_string(level);
    pb::GraphProto g = GraphBuilder("level").Output(out).Build();
    g.node.push_back(IfNode(inner, {out}, "if" + std::to_string(level)));
    inner = std::move(g);
  }
  pb::GraphProto main = GraphBuilder("main").Input("c", pb::kBool, {{}}).Input("x").Output("y").Build();
  main.node.push_back(IfNode(inner, {"y"}));
  checker::CheckResult r = Check(ModelFromGraph(main));
  EXPECT_THAT(Only(r, "E0104"), HasSubstr("subgraphs nest deeper than 32 levels"));
  EXPECT_EQ(r.status(), checker::FileStatus::kRefused);
}

TEST(GraphRulesTest, FunctionBodies) {
  pb::FunctionProto f;
  f.domain = "local";
  f.name = "F";
  f.input = {"a"};
  f.output = {"b", "c"};
  f.node = {MakeNode("Relu", {"q"}, {"b"}, {}, "relu")};
  f.opset_import = ModelFromGraph({}).opset_import;
  pb::ModelProto m = Model(Chain());
  m.functions.push_back(f);
  checker::CheckResult r = Check(m);
  EXPECT_EQ(Only(r, "E0304"), std::string("function 'local::F'") + kSep +
                                  "node 'relu' (Relu): input 'q' (#0) is not defined: no graph input, "
                                  "initializer or node output in scope has this name");
  EXPECT_EQ(Only(r, "E0305"),
            "function 'local::F': function output 'c' is not produced by any node or input of the function");
  // Near miss: a function body cannot see the main graph, but its inputs.
  m.functions[0].node[0].input[0] = "a";
  m.functions[0].output = {"b"};
  r = Check(m);
  EXPECT_THAT(r.diagnostics, IsEmpty()) << Dump(r);
}

TEST(GraphRulesTest, StructuralErrorsSkipNodeRules) {
  GraphBuilder g = Chain();
  g.graph().node[0].op_type = "NoSuchOp";
  g.graph().node[1].input[0] = "nope";
  checker::CheckResult r = Check(Model(g));
  EXPECT_EQ(Findings(r, "E0304").size(), 1u);
  EXPECT_THAT(Findings(r, "E0400"), IsEmpty());
  EXPECT_THAT(r.notes,
              ::testing::Contains("node rules (E04xx) were skipped: the graph structure is invalid"));
}

}  // namespace
}  // namespace onnxkit::testing
