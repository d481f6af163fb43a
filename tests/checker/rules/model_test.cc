// Tests of the model rules (checker/rules/model.cc): ir_version, opset
// imports, metadata, model-local functions (unique, well formed, not
// recursive, call depth).
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

// x: float[2] -> Relu -> y.
pb::ModelProto ReluModel() {
  return ModelFromGraph(GraphBuilder("main")
                            .Input("x", pb::kFloat, {{2}})
                            .Node("Relu", {"x"}, {"y"}, {}, "relu")
                            .Output("y", pb::kFloat, {{2}})
                            .Build());
}

pb::OperatorSetIdProto Opset(std::string domain, int64_t version) {
  pb::OperatorSetIdProto o;
  o.domain = std::move(domain);
  o.version = version;
  return o;
}

// A function local::<name>(a) -> b whose body is `nodes` (Relu when empty).
pb::FunctionProto Function(std::string name, std::vector<pb::NodeProto> nodes = {}) {
  pb::FunctionProto f;
  f.domain = "local";
  f.name = std::move(name);
  f.input = {"a"};
  f.output = {"b"};
  if (nodes.empty()) nodes.push_back(MakeNode("Relu", {"a"}, {"b"}));
  f.node = std::move(nodes);
  f.opset_import.push_back(Opset("", 17));
  f.opset_import.push_back(Opset("local", 1));
  return f;
}

pb::NodeProto Call(std::string function, std::string in = "a", std::string out = "b") {
  pb::NodeProto n = MakeNode(std::move(function), {std::move(in)}, {std::move(out)});
  n.domain = "local";
  return n;
}

// ReluModel plus the functions; the main graph calls the first one.
pb::ModelProto WithFunctions(std::vector<pb::FunctionProto> functions) {
  pb::ModelProto m = ModelFromGraph(
      GraphBuilder("main").Input("x", pb::kFloat, {{2}}).Output("y", pb::kFloat, {{2}}).Build());
  m.graph->node.push_back(Call(functions.front().name, "x", "y"));
  m.opset_import.push_back(Opset("local", 1));
  m.functions = std::move(functions);
  return m;
}

TEST(ModelRulesTest, ValidModelHasNoDiagnostics) {
  checker::CheckResult r = Check(ReluModel());
  EXPECT_THAT(r.diagnostics, IsEmpty()) << Dump(r);
  EXPECT_EQ(r.status(), checker::FileStatus::kValid);
}

TEST(ModelRulesTest, IrVersionMissingNegativeOrTooNew) {
  pb::ModelProto m = ReluModel();
  m.ir_version = 0;
  EXPECT_EQ(Only(Check(m), "E0200"), "ir_version: ir_version is missing (expected 1 to 13)");
  m.ir_version = -3;
  EXPECT_EQ(Only(Check(m), "E0200"), "ir_version: ir_version is -3, expected 1 to 13");
  m.ir_version = 14;
  EXPECT_EQ(Only(Check(m), "E0200"),
            "ir_version: ir_version 14 is newer than onnxkit supports (expected 1 to 13)");
  m.ir_version = 13;  // near miss: the newest known
  EXPECT_THAT(Findings(Check(m), "E0200"), IsEmpty());
}

TEST(ModelRulesTest, OpsetImportMissing) {
  pb::ModelProto m = ReluModel();
  m.opset_import.clear();
  checker::CheckResult r = Check(m);
  EXPECT_EQ(Only(r, "E0201"), "opset_import: the model imports no opset (opset_import is empty)");
  EXPECT_THAT(r.notes, ::testing::Contains(HasSubstr("node rules (E04xx) were skipped")));
  // Near miss: before IR 3, no opset_import means ai.onnx 1.
  m.ir_version = 2;
  EXPECT_THAT(Check(m).diagnostics, IsEmpty()) << Dump(Check(m));
}

TEST(ModelRulesTest, OpsetVersionOutOfRange) {
  pb::ModelProto m = ReluModel();
  m.opset_import[0].version = 29;
  checker::CheckResult r = Check(m);
  EXPECT_EQ(Only(r, "E0202"),
            "opset_import[0]: domain 'ai.onnx' is imported at version 29, expected 1 to 28");
  EXPECT_THAT(Findings(r, "E0202")[0].hint, HasSubstr("up to opset 28"));
  m.opset_import[0].version = 0;
  EXPECT_THAT(Only(Check(m), "E0202"), HasSubstr("imported at version 0, expected 1 to 28"));
  // Near miss: a custom domain may use any positive version.
  m.opset_import[0].version = 17;
  m.opset_import.push_back(Opset("com.example", 1000));
  EXPECT_THAT(Findings(Check(m), "E0202"), IsEmpty());
}

TEST(ModelRulesTest, OpsetImportedTwice) {
  pb::ModelProto m = ReluModel();
  m.opset_import.push_back(Opset("ai.onnx", 13));  // "" and "ai.onnx" are one domain
  EXPECT_EQ(
      Only(Check(m), "E0203"),
      "opset_import[1]: domain 'ai.onnx' is imported twice: version 17 (opset_import[0]) and version 13");
  m.opset_import[1].domain = "ai.onnx.ml";  // near miss
  m.opset_import[1].version = 3;
  EXPECT_THAT(Check(m).diagnostics, IsEmpty());
}

TEST(ModelRulesTest, MetadataKeysUnique) {
  pb::ModelProto m = ReluModel();
  m.metadata_props = {Entry("author", "a"), Entry("license", "b"), Entry("author", "c")};
  EXPECT_EQ(Only(Check(m), "E0205"),
            "metadata_props[2]: metadata key 'author' appears twice (first at metadata_props[0])");
  m.metadata_props[2].key = "Author";  // near miss: keys are case-sensitive
  EXPECT_THAT(Check(m).diagnostics, IsEmpty());
}

TEST(ModelRulesTest, ModelWithoutGraph) {
  pb::ModelProto m = ReluModel();
  m.graph.reset();
  checker::CheckResult r = Check(m);
  EXPECT_EQ(Only(r, "E0209"), "the model has no graph");
  EXPECT_EQ(r.status(), checker::FileStatus::kInvalid);
}

TEST(ModelRulesTest, FunctionCallsAreValid) {
  checker::CheckResult r = Check(WithFunctions({Function("F", {Call("G")}), Function("G")}));
  EXPECT_THAT(r.diagnostics, IsEmpty()) << Dump(r);
}

TEST(ModelRulesTest, FunctionDefinedTwice) {
  pb::ModelProto m = WithFunctions({Function("F"), Function("F")});
  EXPECT_EQ(Only(Check(m), "E0206"),
            "function 'local::F': function 'local::F' is defined twice (functions[0] and functions[1])");
  m.functions[1].overload = "v2";  // near miss: another overload
  EXPECT_THAT(Findings(Check(m), "E0206"), IsEmpty());
}

TEST(ModelRulesTest, FunctionSignatureMalformed) {
  pb::ModelProto m = WithFunctions({Function("F")});
  m.functions[0].input = {"a", "a"};
  EXPECT_EQ(Only(Check(m), "E0210"), "function 'local::F': input 'a' is declared twice");
  m.functions[0].input = {"a"};
  m.functions[0].output = {""};
  EXPECT_EQ(Only(Check(m), "E0210"), "function 'local::F': output #0 has an empty name");
  m.functions[0].output = {"b"};
  m.functions[0].attribute = {"alpha", "alpha"};
  EXPECT_EQ(Only(Check(m), "E0210"), "function 'local::F': attribute 'alpha' is declared twice");
}

TEST(ModelRulesTest, DirectRecursion) {
  checker::CheckResult r = Check(WithFunctions({Function("F", {Call("F")})}));
  EXPECT_EQ(Only(r, "E0207"),
            "function 'local::F': model-local functions call themselves: 'local::F' \xe2\x86\x92 'local::F'");
  EXPECT_EQ(r.status(), checker::FileStatus::kInvalid);
}

TEST(ModelRulesTest, MutualRecursionHiddenInAnIfBody) {
  // F calls G from inside an If branch; G calls F.
  pb::GraphProto then_branch = GraphBuilder("then").Output("t").Build();
  then_branch.node.push_back(Call("G", "a", "t"));
  pb::GraphProto else_branch = GraphBuilder("else").Node("Identity", {"a"}, {"e"}).Output("e").Build();
  pb::NodeProto branch = MakeNode(
      "If", {"c"}, {"b"}, {AttrGraph("then_branch", then_branch), AttrGraph("else_branch", else_branch)});
  pb::FunctionProto f = Function("F", {MakeNode("Constant", {}, {"c"},
                                                {AttrTensor("value",
                                                            [] {
                                                              pb::TensorProto t;
                                                              t.data_type = pb::kBool;
                                                              t.int32_data = {1};
                                                              return t;
                                                            }())}),
                                       branch});
  checker::CheckResult r = Check(WithFunctions({f, Function("G", {Call("F")})}));
  EXPECT_EQ(Only(r, "E0207"),
            "function 'local::F': model-local functions call themselves: 'local::F' \xe2\x86\x92 "
            "'local::G' \xe2\x86\x92 'local::F'");
  EXPECT_EQ(r.diagnostics.size(), 1u) << Dump(r);
}

// f0 -> f1 -> ... -> f<n-1>, called from the main graph.
pb::ModelProto CallChain(int n) {
  std::vector<pb::FunctionProto> functions;
  for (int i = 0; i < n; ++i) {
    std::string name = "f" + std::to_string(i);
    functions.push_back(i + 1 < n ? Function(name, {Call("f" + std::to_string(i + 1))}) : Function(name));
  }
  return WithFunctions(std::move(functions));
}

TEST(ModelRulesTest, CallDepthOverTheLimitIsRefused) {
  checker::CheckResult r = Check(CallChain(65));
  EXPECT_THAT(
      Only(r, "E0208"),
      HasSubstr("function 'local::f0': model-local function calls nest 65 deep, over the limit of 64"));
  EXPECT_EQ(r.status(), checker::FileStatus::kRefused);
  // Near miss: exactly the limit.
  checker::CheckResult ok = Check(CallChain(64));
  EXPECT_THAT(ok.diagnostics, IsEmpty()) << Dump(ok);
}

TEST(ModelRulesTest, ManyFunctionsDoNotOverflowTheStack) {
  checker::CheckResult r = Check(CallChain(20000));
  EXPECT_EQ(Findings(r, "E0208").size(), 1u);
}

}  // namespace
}  // namespace onnxkit::testing
