// Tests of the renderers (checker/report.cc): text lines and summary, JSON
// and SARIF structure, escaping, determinism.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/checker/check_test_util.h"
#include "tests/util/model_builder.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

checker::Diagnostic Make(const char* code, checker::Severity severity, std::string location,
                         std::string message, std::string hint = "", int64_t offset = -1) {
  checker::Diagnostic d;
  d.rule = checker::FindRule(code);
  d.severity = severity;
  d.location = std::move(location);
  d.message = std::move(message);
  d.hint = std::move(hint);
  d.byte_offset = offset;
  return d;
}

// Three files: invalid (an error and a warning), refused, valid.
std::vector<checker::CheckResult> ThreeFiles() {
  checker::CheckResult invalid;
  invalid.path = "a.onnx";
  invalid.diagnostics = {
      Make("E0300", checker::Severity::kError, "graph 'main' \xe2\x80\xba node 'conv1' (Conv)",
           "output 'y' is already produced by node 'relu3' (Relu)",
           "every value must have exactly one producer"),
      Make("E0310", checker::Severity::kWarning, "graph (unnamed)", "the main graph has no name")};
  invalid.errors = 1;
  invalid.warnings = 1;
  invalid.notes = {"node rules (E04xx) were skipped: the graph structure is invalid"};
  checker::CheckResult refused;
  refused.path = "b.onnx";
  refused.diagnostics = {Make("E0101", checker::Severity::kError, "", "not a valid ONNX model", "", 17)};
  refused.diagnostics[0].rule = checker::FindRule("E0103");
  refused.errors = 1;
  refused.refused = true;
  checker::CheckResult valid;
  valid.path = "c.onnx";
  return {invalid, refused, valid};
}

TEST(ReportTest, TextIsOneLinePerDiagnosticThenASummary) {
  EXPECT_EQ(
      checker::RenderText(ThreeFiles()),
      "a.onnx: error[E0300 ssa-unique-outputs]: graph 'main' \xe2\x80\xba node 'conv1' (Conv): output 'y' is "
      "already produced by node 'relu3' (Relu)\n"
      "  hint: every value must have exactly one producer\n"
      "a.onnx: warning[E0310 graph-name]: graph (unnamed): the main graph has no name\n"
      "a.onnx: note: node rules (E04xx) were skipped: the graph structure is invalid\n"
      "b.onnx: error[E0103 file-size-limit]: not a valid ONNX model\n"
      "checked 3 files: 1 invalid, 1 refused, 1 valid (2 errors, 1 warning)\n");
}

TEST(ReportTest, QuietPrintsOnlyErrors) {
  std::string text = checker::RenderText(ThreeFiles(), {.quiet = true});
  EXPECT_THAT(text, HasSubstr("error[E0300"));
  EXPECT_THAT(text, Not(HasSubstr("warning[")));
  EXPECT_THAT(text, Not(HasSubstr("note:")));
  EXPECT_THAT(text, HasSubstr("checked 3 files"));
  std::vector<checker::CheckResult> valid = {ThreeFiles()[2]};
  EXPECT_EQ(checker::RenderText(valid, {.quiet = true}), "");
  EXPECT_EQ(checker::RenderText(valid), "checked 1 file: 1 valid (0 errors, 0 warnings)\n");
}

TEST(ReportTest, ControlBytesCannotForgeLines) {
  std::vector<checker::CheckResult> r = {ThreeFiles()[0]};
  r[0].path = "evil\nb.onnx: error[E0000]: fake";
  EXPECT_THAT(checker::RenderText(r), HasSubstr("evil\\x0ab.onnx"));
}

TEST(ReportTest, NamesAreEscapedButValidUtf8IsKept) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2}})
                                        .Node("Relu", {"x\xc3\x28\n"}, {"y"}, {}, "caf\xc3\xa9")
                                        .Output("y", pb::kFloat, {{2}})
                                        .Build());
  const std::string text = checker::RenderText({Check(m)});
  EXPECT_THAT(text, HasSubstr("node 'caf\xc3\xa9' (Relu): input 'x\\xc3(\\x0a' (#0) is not defined"));
}

TEST(ReportTest, JsonHasTheDocumentedKeys) {
  const std::string json = checker::RenderJson(ThreeFiles());
  for (const char* key : {"\"version\": 1",
                          "\"files\"",
                          "\"path\": \"a.onnx\"",
                          "\"status\": \"invalid\"",
                          "\"status\": \"refused\"",
                          "\"status\": \"valid\"",
                          "\"errors\": 1",
                          "\"warnings\": 1",
                          "\"diagnostics\"",
                          "\"code\": \"E0300\"",
                          "\"rule\": \"ssa-unique-outputs\"",
                          "\"severity\": \"warning\"",
                          "\"location\": \"graph 'main'",
                          "\"message\"",
                          "\"hint\": null",
                          "\"byte_offset\": 17",
                          "\"byte_offset\": null",
                          "\"notes\"",
                          "\"summary\"",
                          "\"invalid\": 1",
                          "\"refused\": 1",
                          "\"valid\": 1"}) {
    EXPECT_THAT(json, HasSubstr(key));
  }
  EXPECT_EQ(json, checker::RenderJson(ThreeFiles()));
}

TEST(ReportTest, SarifHasTheRequiredFields) {
  const std::string sarif = checker::RenderSarif(ThreeFiles());
  for (const char* key : {"\"$schema\": \"https://json.schemastore.org/sarif-2.1.0.json\"",
                          "\"version\": \"2.1.0\"",
                          "\"runs\"",
                          "\"tool\"",
                          "\"driver\"",
                          "\"name\": \"onnxkit\"",
                          "\"rules\"",
                          "\"id\": \"E0100\"",
                          "\"name\": \"file-unreadable\"",
                          "\"shortDescription\"",
                          "\"results\"",
                          "\"ruleId\": \"E0300\"",
                          "\"level\": \"error\"",
                          "\"level\": \"warning\"",
                          "\"message\"",
                          "\"text\"",
                          "\"locations\"",
                          "\"physicalLocation\"",
                          "\"artifactLocation\"",
                          "\"uri\": \"a.onnx\"",
                          "\"logicalLocations\"",
                          "\"fullyQualifiedName\": \"graph 'main'",
                          "\"byteOffset\": 17"}) {
    EXPECT_THAT(sarif, HasSubstr(key));
  }
  EXPECT_EQ(sarif, checker::RenderSarif(ThreeFiles()));
}

TEST(ReportTest, RuleListHasEveryRule) {
  const std::string list = checker::RenderRuleList();
  for (const checker::Rule& rule : checker::AllRules()) {
    EXPECT_THAT(list, HasSubstr(std::string(rule.code) + "  " + std::string(rule.name)));
  }
}

}  // namespace
}  // namespace onnxkit::testing
