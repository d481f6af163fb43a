// Tests of the node rules (checker/rules/node.cc): ops against the
// registry, deprecation, arity, attributes, type constraints, custom
// domains and calls of model-local functions.
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

constexpr char kSep[] = " \xe2\x80\xba ";

// A model whose main graph holds `node` with float inputs x, y (rank 1) and
// float output z, at ai.onnx `opset`.
pb::ModelProto OneNode(pb::NodeProto node, int64_t opset = 17) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2}}).Input("y", pb::kFloat, {{2}});
  g.graph().node.push_back(std::move(node));
  g.Output("z", pb::kFloat);
  return ModelFromGraph(g.Build(), opset);
}

std::string At(const std::string& node) { return std::string("graph 'main'") + kSep + node + ": "; }

TEST(NodeRulesTest, KnownOpsPass) {
  checker::CheckResult r = Check(OneNode(MakeNode("Add", {"x", "y"}, {"z"}, {}, "add")));
  EXPECT_THAT(r.diagnostics, IsEmpty()) << Dump(r);
}

TEST(NodeRulesTest, UnknownOp) {
  EXPECT_EQ(Only(Check(OneNode(MakeNode("Reluu", {"x"}, {"z"}, {}, "r"))), "E0400"),
            At("node 'r' (Reluu)") + "unknown op 'Reluu' in domain ai.onnx; did you mean 'Relu'?");
}

TEST(NodeRulesTest, OpNotYetDefinedAtTheImportedOpset) {
  EXPECT_EQ(
      Only(Check(OneNode(MakeNode("Gelu", {"x"}, {"z"}, {}, "g"), 17)), "E0400"),
      At("node 'g' (Gelu)") + "op 'Gelu' is not defined in ai.onnx opset 17; its first version is opset 20");
  EXPECT_THAT(Check(OneNode(MakeNode("Gelu", {"x"}, {"z"}, {}, "g"), 20)).diagnostics, IsEmpty());
}

TEST(NodeRulesTest, DeprecatedOp) {
  pb::ModelProto m = OneNode(MakeNode("Upsample", {"x", "y"}, {"z"}, {}, "up"), 10);
  EXPECT_EQ(Only(Check(m), "E0401"),
            At("node 'up' (Upsample)") +
                "op 'Upsample' is deprecated since ai.onnx opset 10 (the model imports opset 10)");
  EXPECT_THAT(Check(m).diagnostics[0].hint, HasSubstr("Resize"));  // no later version of Upsample
  m.opset_import[0].version = 9;  // near miss: Upsample-9 is not deprecated
  EXPECT_THAT(Check(m).diagnostics, IsEmpty()) << Dump(Check(m));
  // A later version that is not deprecated: the hint names the conversion.
  pb::ModelProto gn =
      OneNode(MakeNode("GroupNormalization", {"x", "y", "y"}, {"z"}, {AttrInt("num_groups", 1)}, "gn"), 18);
  checker::CheckResult r = Check(gn);
  ASSERT_EQ(r.diagnostics.size(), 1u) << Dump(r);
  EXPECT_EQ(r.diagnostics[0].hint, "`onnxkit convert --opset 21` moves it to GroupNormalization-21");
}

TEST(NodeRulesTest, DomainNotImported) {
  pb::NodeProto n = MakeNode("LabelEncoder", {"x"}, {"z"}, {}, "le");
  n.domain = "ai.onnx.ml";
  EXPECT_EQ(Only(Check(OneNode(n)), "E0204"),
            At("node 'le' (ai.onnx.ml::LabelEncoder)") +
                "domain 'ai.onnx.ml' of op 'LabelEncoder' is not imported by the model");
}

TEST(NodeRulesTest, InputArity) {
  EXPECT_EQ(Only(Check(OneNode(MakeNode("Relu", {"x", "y"}, {"z"}, {}, "r"))), "E0402"),
            At("node 'r' (Relu)") + "the node has 2 inputs, but Relu-14 takes at most 1");
  EXPECT_EQ(Only(Check(OneNode(MakeNode("Sub", {"x"}, {"z"}, {}, "s"))), "E0402"),
            At("node 's' (Sub)") + "required input 'B' (#1) of Sub-14 is missing");
  EXPECT_EQ(Only(Check(OneNode(MakeNode("Sub", {"", "y"}, {"z"}, {}, "s"))), "E0402"),
            At("node 's' (Sub)") + "required input 'A' (#0) of Sub-14 has an empty name");
  EXPECT_EQ(Only(Check(OneNode(MakeNode("Concat", {}, {"z"}, {AttrInt("axis", 0)}, "c"))), "E0402"),
            At("node 'c' (Concat)") +
                "variadic input 'inputs' of Concat-13 needs at least 1 value, the node gives 0");
  // Near misses: omitted optional inputs, by empty name or by leaving them out.
  EXPECT_THAT(Check(OneNode(MakeNode("Clip", {"x", "", "y"}, {"z"}))).diagnostics, IsEmpty());
  EXPECT_THAT(Check(OneNode(MakeNode("Clip", {"x"}, {"z"}))).diagnostics, IsEmpty());
  EXPECT_THAT(Check(OneNode(MakeNode("Concat", {"x", "y", "x"}, {"z"}, {AttrInt("axis", 0)}))).diagnostics,
              IsEmpty());
}

TEST(NodeRulesTest, OutputArity) {
  EXPECT_EQ(Only(Check(OneNode(MakeNode("Dropout", {"x"}, {"z", "m", "extra"}, {}, "d"))), "E0403"),
            At("node 'd' (Dropout)") + "the node has 3 outputs, but Dropout-13 takes at most 2");
  pb::ModelProto m = OneNode(MakeNode("Relu", {"x"}, {}, {}, "r"));
  m.graph->output.clear();
  EXPECT_EQ(Only(Check(m), "E0403"),
            At("node 'r' (Relu)") + "required output 'Y' (#0) of Relu-14 is missing");
  EXPECT_THAT(Check(OneNode(MakeNode("Dropout", {"x"}, {"z", ""}))).diagnostics, IsEmpty());
}

TEST(NodeRulesTest, UnknownAttribute) {
  checker::CheckResult r = Check(OneNode(MakeNode("Relu", {"x"}, {"z"}, {AttrInt("alpha", 1)}, "r")));
  EXPECT_EQ(Only(r, "E0404"), At("node 'r' (Relu)") + "attribute 'alpha' is not defined by Relu-14");
  EXPECT_EQ(r.diagnostics[0].hint, "Relu-14 has no attributes");
  r = Check(OneNode(MakeNode("LeakyRelu", {"x"}, {"z"}, {AttrFloat("alpah", 1)}, "r")));
  EXPECT_EQ(r.diagnostics[0].hint, "LeakyRelu-16 accepts: alpha");
  // Near miss: names starting with "__" are allowed.
  EXPECT_THAT(Check(OneNode(MakeNode("Relu", {"x"}, {"z"}, {AttrInt("__debug", 1)}))).diagnostics, IsEmpty());
}

TEST(NodeRulesTest, AttributeTypes) {
  EXPECT_EQ(Only(Check(OneNode(MakeNode("LeakyRelu", {"x"}, {"z"}, {AttrInt("alpha", 1)}, "r"))), "E0405"),
            At("node 'r' (LeakyRelu)") + "attribute 'alpha' is INT, but LeakyRelu-16 expects FLOAT");
  pb::AttributeProto mixed = AttrFloat("alpha", 0.5f);
  mixed.ints = {1, 2};
  EXPECT_EQ(Only(Check(OneNode(MakeNode("LeakyRelu", {"x"}, {"z"}, {mixed}, "r"))), "E0405"),
            At("node 'r' (LeakyRelu)") + "attribute 'alpha' is FLOAT but also sets ints");
  pb::AttributeProto untyped = AttrFloat("alpha", 0.5f);
  untyped.type = 0;
  EXPECT_EQ(Only(Check(OneNode(MakeNode("LeakyRelu", {"x"}, {"z"}, {untyped}, "r"))), "E0405"),
            At("node 'r' (LeakyRelu)") +
                "attribute 'alpha' has no type (AttributeProto.type is unset); expected FLOAT");
  // A GRAPH attribute without g.
  pb::AttributeProto no_graph;
  no_graph.name = "then_branch";
  no_graph.type = pb::kAttrGraph;
  pb::GraphProto else_graph = GraphBuilder("else").Node("Identity", {"x"}, {"e"}).Output("e").Build();
  pb::ModelProto m =
      OneNode(MakeNode("If", {"b"}, {"z"}, {no_graph, AttrGraph("else_branch", else_graph)}, "if"));
  m.graph->input.push_back(MakeValueInfo("b", pb::kBool, std::vector<int64_t>{}));
  EXPECT_EQ(Only(Check(m), "E0405"),
            At("node 'if' (If)") + "attribute 'then_branch' is GRAPH but has no value (g is not set)");
}

TEST(NodeRulesTest, EnumeratedAttributeValues) {
  auto pad = [](const std::string& mode, int64_t opset) {
    return Check(OneNode(MakeNode("Pad", {"x", "y"}, {"z"}, {AttrString("mode", mode)}, "p"), opset));
  };
  checker::CheckResult r = pad("wrap", 18);
  EXPECT_EQ(Only(r, "E0411"),
            At("node 'p' (Pad)") + "attribute 'mode' is 'wrap', which Pad-18 does not accept");
  EXPECT_EQ(r.diagnostics[0].hint,
            "Pad-18 accepts 'constant', 'reflect', 'edge'; Pad accepts 'wrap' from opset 19 "
            "(`onnxkit convert --opset 19`)");
  // Near misses: the version that accepts it, and the other modes.
  EXPECT_THAT(Findings(pad("wrap", 19), "E0411"), IsEmpty()) << Dump(pad("wrap", 19));
  EXPECT_THAT(Findings(pad("reflect", 13), "E0411"), IsEmpty());
  r = pad("Reflect", 19);
  EXPECT_THAT(Only(r, "E0411"), HasSubstr("'Reflect', which Pad-19"));
  EXPECT_EQ(r.diagnostics[0].hint, "Pad-19 accepts 'constant', 'reflect', 'edge', 'wrap'");
  // auto_pad of a conv, a value no version accepts.
  r = Check(OneNode(MakeNode("MaxPool", {"x"}, {"z"},
                             {AttrInts("kernel_shape", {1}), AttrString("auto_pad", "SAME")}, "mp")));
  EXPECT_THAT(Only(r, "E0411"),
              HasSubstr("attribute 'auto_pad' is 'SAME', which MaxPool-12 does not accept"));
  // A mode renamed in a later version (GridSample-20: linear, not bilinear).
  EXPECT_EQ(Findings(Check(OneNode(
                         MakeNode("GridSample", {"x", "y"}, {"z"}, {AttrString("mode", "bilinear")}), 20)),
                     "E0411")
                .size(),
            1u);
  EXPECT_THAT(Findings(Check(OneNode(
                           MakeNode("GridSample", {"x", "y"}, {"z"}, {AttrString("mode", "bilinear")}), 16)),
                       "E0411"),
              IsEmpty());
  // Attributes that are free text are not enumerated.
  EXPECT_THAT(
      Findings(Check(OneNode(MakeNode("Einsum", {"x", "y"}, {"z"}, {AttrString("equation", "i,i->")}), 17)),
               "E0411"),
      IsEmpty());
}

TEST(NodeRulesTest, RequiredAndDuplicateAttributes) {
  EXPECT_EQ(Only(Check(OneNode(MakeNode("Cast", {"x"}, {"z"}, {}, "c"))), "E0406"),
            At("node 'c' (Cast)") + "required attribute 'to' (INT) of Cast-13 is missing");
  EXPECT_EQ(Only(Check(OneNode(MakeNode("Cast", {"x"}, {"z"}, {AttrInt("to", 1), AttrInt("to", 1)}, "c"))),
                 "E0407"),
            At("node 'c' (Cast)") + "attribute 'to' appears twice");
  EXPECT_THAT(Check(OneNode(MakeNode("Cast", {"x"}, {"z"}, {AttrInt("to", 1)}))).diagnostics, IsEmpty());
}

TEST(NodeRulesTest, TypeNotAllowed) {
  GraphBuilder g("main");
  g.Input("i", pb::kInt64, {{2}}).Node("Sqrt", {"i"}, {"z"}, {}, "sqrt").Output("z");
  EXPECT_EQ(
      Only(Check(ModelFromGraph(g.Build())), "E0408"),
      At("node 'sqrt' (Sqrt)") +
          "input 'i' (#0) has type tensor(int64), but Sqrt-13 allows T in {tensor(float16), tensor(float), "
          "tensor(double), tensor(bfloat16)}");
  // A concrete formal type: Reshape's shape must be int64.
  GraphBuilder r("main");
  r.Input("x", pb::kFloat, {{2}})
      .Input("s", pb::kInt32, {{1}})
      .Node("Reshape", {"x", "s"}, {"z"}, {}, "rs")
      .Output("z");
  EXPECT_THAT(Only(Check(ModelFromGraph(r.Build())), "E0408"),
              HasSubstr("input 's' (#1) has type tensor(int32), but Reshape-14 allows {tensor(int64)}"));
}

TEST(NodeRulesTest, TypeVariableBindsOneType) {
  GraphBuilder g("main");
  g.Input("a", pb::kFloat, {{2}})
      .Input("b", pb::kDouble, {{2}})
      .Node("Add", {"a", "b"}, {"z"}, {}, "add")
      .Output("z");
  checker::CheckResult r = Check(ModelFromGraph(g.Build()));
  EXPECT_EQ(Only(r, "E0408"),
            At("node 'add' (Add)") +
                "type variable T of Add-14 is tensor(float) for input 'a' (#0) but tensor(double) "
                "for input 'b' (#1)");
  // Outputs bind too: a declared graph output of another type.
  GraphBuilder o("main");
  o.Input("a", pb::kFloat, {{2}}).Node("Relu", {"a"}, {"z"}, {}, "r").Output("z", pb::kInt64);
  EXPECT_THAT(
      Only(Check(ModelFromGraph(o.Build())), "E0408"),
      HasSubstr("type variable T of Relu-14 is tensor(float) for input 'a' (#0) but tensor(int64) for output "
                "'z' (#0)"));
  // Near miss: types not declared anywhere are not guessed.
  GraphBuilder u("main");
  u.Input("a", pb::kFloat, {{2}}).Node("Relu", {"a"}, {"t"}).Node("Add", {"a", "t"}, {"z"}).Output("z");
  EXPECT_THAT(Check(ModelFromGraph(u.Build())).diagnostics, IsEmpty());
}

TEST(NodeRulesTest, InitializerTypesAreKnown) {
  GraphBuilder g("main");
  pb::TensorProto w = RawFloatTensor("w", {2});
  w.data_type = pb::kDouble;
  w.raw_data = Bytes::Own(std::string(16, '\0'));
  g.Input("a", pb::kFloat, {{2}}).Initializer(w).Node("Mul", {"a", "w"}, {"z"}, {}, "mul").Output("z");
  EXPECT_THAT(Only(Check(ModelFromGraph(g.Build())), "E0408"),
              HasSubstr("tensor(float) for input 'a' (#0) but tensor(double) for input 'w' (#1)"));
}

TEST(NodeRulesTest, CustomDomainIsAWarningOncePerOp) {
  pb::NodeProto a = MakeNode("FusedThing", {"x"}, {"t"}, {}, "a");
  a.domain = "com.example";
  pb::NodeProto b = MakeNode("FusedThing", {"t"}, {"z"}, {}, "b");
  b.domain = "com.example";
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2}});
  g.graph().node = {a, b};
  g.Output("z");
  pb::ModelProto m = ModelFromGraph(g.Build());
  pb::OperatorSetIdProto custom;
  custom.domain = "com.example";
  custom.version = 1;
  m.opset_import.push_back(custom);
  checker::CheckResult r = Check(m);
  EXPECT_EQ(Only(r, "E0409"),
            At("node 'a' (com.example::FusedThing)") +
                "op 'FusedThing' of custom domain 'com.example' is not checked: onnxkit has no "
                "schema for it (reported once per op)");
  EXPECT_EQ(r.diagnostics[0].severity, checker::Severity::kWarning);
  EXPECT_EQ(r.status(), checker::FileStatus::kValid);
  checker::CheckOptions strict;
  strict.strict_custom = true;
  r = Check(m, strict);
  EXPECT_EQ(r.diagnostics[0].severity, checker::Severity::kError);
  EXPECT_EQ(r.status(), checker::FileStatus::kInvalid);
}

TEST(NodeRulesTest, LocalFunctionCallsAreCheckedAgainstTheFunction) {
  pb::FunctionProto f;
  f.domain = "local";
  f.name = "Scale";
  f.input = {"a"};
  f.output = {"b"};
  f.attribute = {"factor"};
  f.node = {MakeNode("Relu", {"a"}, {"b"})};
  f.opset_import = ModelFromGraph({}).opset_import;
  pb::NodeProto call =
      MakeNode("Scale", {"x", "y"}, {"z"}, {AttrFloat("factor", 2), AttrInt("bias", 1)}, "s");
  call.domain = "local";
  pb::ModelProto m = OneNode(call);
  pb::OperatorSetIdProto local;
  local.domain = "local";
  local.version = 1;
  m.opset_import.push_back(local);
  m.functions.push_back(f);
  checker::CheckResult r = Check(m);
  EXPECT_EQ(Only(r, "E0402"),
            At("node 's' (local::Scale)") + "the node has 2 inputs, but function 'local::Scale' declares 1");
  EXPECT_EQ(Only(r, "E0404"),
            At("node 's' (local::Scale)") + "attribute 'bias' is not defined by function 'local::Scale'");
  EXPECT_THAT(Findings(r, "E0409"), IsEmpty());
  m.graph->node[0].input = {"x"};
  m.graph->node[0].attribute.pop_back();
  EXPECT_THAT(Check(m).diagnostics, IsEmpty()) << Dump(Check(m));
}

TEST(NodeRulesTest, AttributeReferenceOutsideAFunction) {
  pb::AttributeProto ref;
  ref.name = "alpha";
  ref.type = pb::kAttrFloat;
  ref.ref_attr_name = "a";
  EXPECT_EQ(
      Only(Check(OneNode(MakeNode("LeakyRelu", {"x"}, {"z"}, {ref}, "r"))), "E0405"),
      At("node 'r' (LeakyRelu)") +
          "attribute 'alpha' (ref_attr_name 'a') refers to a function attribute, but the node is not in a "
          "function body");
}

TEST(NodeRulesTest, AFunctionPassesItsAttributeOnToAnotherFunction) {
  // local::Inner(a) = LeakyRelu(a, alpha=@alpha); local::Outer(a) calls
  // Inner with alpha=@beta, its own attribute.
  pb::AttributeProto alpha_ref;
  alpha_ref.name = "alpha";
  alpha_ref.type = pb::kAttrFloat;
  alpha_ref.ref_attr_name = "alpha";
  pb::FunctionProto inner;
  inner.domain = "local";
  inner.name = "Inner";
  inner.input = {"a"};
  inner.output = {"b"};
  inner.attribute = {"alpha"};
  inner.node = {MakeNode("LeakyRelu", {"a"}, {"b"}, {alpha_ref})};
  inner.opset_import = ModelFromGraph({}).opset_import;
  pb::AttributeProto beta_ref = alpha_ref;
  beta_ref.ref_attr_name = "beta";
  pb::FunctionProto outer = inner;
  outer.name = "Outer";
  outer.attribute = {"beta"};
  pb::NodeProto call = MakeNode("Inner", {"a"}, {"b"}, {beta_ref}, "inner");
  call.domain = "local";
  outer.node = {call};
  pb::OperatorSetIdProto local;
  local.domain = "local";
  local.version = 1;
  outer.opset_import.push_back(local);
  pb::NodeProto top = MakeNode("Outer", {"x"}, {"z"}, {AttrFloat("beta", 0.5f)}, "o");
  top.domain = "local";
  pb::ModelProto m = OneNode(top);
  m.opset_import.push_back(local);
  m.functions = {inner, outer};
  EXPECT_THAT(Check(m).diagnostics, IsEmpty()) << Dump(Check(m));
  // A reference to an attribute Outer does not declare is still an error.
  m.functions[1].node[0].attribute[0].ref_attr_name = "gamma";
  EXPECT_THAT(Only(Check(m), "E0405"), HasSubstr("refers to an attribute the function does not declare"));
}

TEST(NodeRulesTest, FunctionsImportingAnotherVersionOfAnOpTheModelImports) {
  // local::F calls Softmax under ai.onnx 11 while the model imports 17:
  // Softmax-11 and Softmax-13 differ (the axis semantics).
  auto model_with = [](int64_t function_version) {
    pb::FunctionProto f;
    f.domain = "local";
    f.name = "F";
    f.input = {"a"};
    f.output = {"b"};
    f.node = {MakeNode("Softmax", {"a"}, {"s"}), MakeNode("Relu", {"s"}, {"b"})};
    pb::OperatorSetIdProto onnx;
    onnx.version = function_version;
    f.opset_import = {onnx};
    pb::NodeProto call = MakeNode("F", {"x"}, {"z"}, {}, "f");
    call.domain = "local";
    pb::ModelProto m = OneNode(call);
    m.opset_import[0].version = 17;
    pb::OperatorSetIdProto local;
    local.domain = "local";
    local.version = 1;
    m.opset_import.push_back(local);
    m.functions.push_back(f);
    return m;
  };
  const std::vector<checker::Diagnostic> findings = Findings(Check(model_with(11)), "E0211");
  ASSERT_EQ(findings.size(), 2u);  // Softmax 11 / 13 and Relu 6 / 14
  EXPECT_THAT(findings[0].message, HasSubstr("imports 'ai.onnx' 11 where the model imports 17, "
                                             "and 'Softmax' differs between them (version 11 against 13)"));
  // Opset 14 defines Softmax and Relu as 17 does: compatible.
  EXPECT_THAT(Check(model_with(14)).diagnostics, IsEmpty()) << Dump(Check(model_with(14)));
}

TEST(NodeRulesTest, EmptyOpType) {
  EXPECT_EQ(Only(Check(OneNode(MakeNode("", {"x"}, {"z"}))), "E0410"),
            At("node #0 ()") + "the node has an empty op_type");
}

TEST(NodeRulesTest, NodesInSubgraphsAreChecked) {
  pb::ModelProto m = IfModelWithOuterRefs();
  m.graph->node[0].attribute[1].g->node[0].op_type = "Negg";
  EXPECT_THAT(Only(Check(m), "E0400"), HasSubstr(std::string("node 'if' (If)") + kSep +
                                                 "attribute 'else_branch'" + kSep + "node 'neg' (Negg)"));
}

}  // namespace
}  // namespace onnxkit::testing
