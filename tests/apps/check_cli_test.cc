// End-to-end tests of `onnxkit check`: exit codes (valid, invalid, refused,
// unreadable, usage), several files, text/JSON/SARIF output, -q, --werror,
// --max-errors, --list-rules.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/proto_codec.h"
#include "tests/apps/cli_runner.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string LightModel(const std::string& name) {
  return TestdataPath("models/light/light_" + name + ".onnx").string();
}

std::string Save(const std::filesystem::path& path, const pb::ModelProto& m) {
  std::ofstream(path, std::ios::binary) << io::Encode(m);
  return path.string();
}

// x -> Relu -> y, with `ops` replacing Relu one after the other.
pb::ModelProto ChainModel(const std::vector<std::string>& ops) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2}});
  std::string prev = "x";
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string out = "v" + std::to_string(i);
    g.Node(ops[i], {prev}, {out}, {}, "n" + std::to_string(i));
    prev = out;
  }
  g.Output(prev, pb::kFloat, {{2}});
  return ModelFromGraph(g.Build());
}

class CheckCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    invalid_ = Save(dir_ / "invalid.onnx", ChainModel({"Relu", "Frobnicate", "Relu"}));
    std::ofstream(dir_ / "secret.bin") << "0123456789abcdef";
    std::filesystem::create_directories(dir_ / "m");
    pb::ModelProto refused = MinimalModel({ExternalTensor("w", {4}, pb::kFloat, "../secret.bin", 0, 16)});
    refused.graph->output[0].type = TensorType(pb::kFloat, std::vector<int64_t>{4});
    refused_ = Save(dir_ / "m" / "refused.onnx", refused);
  }

  std::filesystem::path dir_;
  std::string invalid_;
  std::string refused_;
};

TEST_F(CheckCliTest, ValidModelExits0) {
  CliResult r = RunCli({"check", LightModel("squeezenet")});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "checked 1 file: 1 valid (0 errors, 0 warnings)\n");
  EXPECT_EQ(r.err, "");
}

// A model ONNX Runtime optimized: its contrib ops are warnings that say
// how onnxkit handles them.
TEST_F(CheckCliTest, OnnxRuntimeContribOpsGetAHint) {
  CliResult r = RunCli({"check", TestdataPath("models/contrib/ort_extended.onnx").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out + r.err, HasSubstr("an ONNX Runtime contrib op: `onnxkit run` runs it"));
}

TEST_F(CheckCliTest, InvalidModelExits1) {
  CliResult r = RunCli({"check", invalid_});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr(invalid_ +
                               ": error[E0400 op-known]: graph 'main' \xe2\x80\xba node 'n1' (Frobnicate): "
                               "unknown op 'Frobnicate' in domain ai.onnx"));
  EXPECT_THAT(r.out, HasSubstr("checked 1 file: 1 invalid (1 error, 0 warnings)"));
}

TEST_F(CheckCliTest, BytesThatAreNotAModelExit1) {
  std::ofstream(dir_ / "notes.onnx") << "this is not a model at all\n";
  CliResult r = RunCli({"check", (dir_ / "notes.onnx").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("error[E0101 protobuf-parse]"));
  EXPECT_EQ(r.signal, 0);
}

TEST_F(CheckCliTest, UnsafeExternalDataExits3) {
  CliResult r = RunCli({"check", refused_});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, HasSubstr("error[E0506 external-data-location]"));
  EXPECT_THAT(r.out, HasSubstr("'..' component"));
  EXPECT_THAT(r.out, HasSubstr("1 refused"));
}

TEST_F(CheckCliTest, MissingFileExits3) {
  CliResult r = RunCli({"check", "/nonexistent/model.onnx"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, HasSubstr("/nonexistent/model.onnx: error[E0100 file-unreadable]"));
}

TEST_F(CheckCliTest, UsageErrorsExit2) {
  EXPECT_EQ(RunCli({"check", "--frobnicate", LightModel("squeezenet")}).exit_code, 2);
  EXPECT_EQ(RunCli({"check"}).exit_code, 2);
  EXPECT_EQ(RunCli({"check", "--json", "--sarif", LightModel("squeezenet")}).exit_code, 2);
  EXPECT_EQ(RunCli({"check", "--max-errors", "-1", LightModel("squeezenet")}).exit_code, 2);
  EXPECT_EQ(RunCli({"check", "--max-errors", "many", LightModel("squeezenet")}).exit_code, 2);
}

TEST_F(CheckCliTest, SeveralFilesOneSummaryRefusalWins) {
  CliResult r = RunCli({"check", LightModel("squeezenet"), invalid_, refused_});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, HasSubstr("checked 3 files: 1 invalid, 1 refused, 1 valid (2 errors, 0 warnings)"));
  r = RunCli({"check", LightModel("squeezenet"), invalid_});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("checked 2 files: 1 invalid, 1 valid"));
}

// Runs python3 on `json` with `script` (reading the document as `d`);
// returns its stdout, or "SKIP" when python3 is not there.
std::string Python(const std::filesystem::path& dir, const std::string& json, const std::string& script) {
  std::ofstream(dir / "out.json") << json;
  std::ofstream(dir / "probe.py") << "import json,sys\nd=json.load(open(sys.argv[1]))\n" << script << "\n";
  const std::string command =
      "python3 " + (dir / "probe.py").string() + " " + (dir / "out.json").string() + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "SKIP";
  std::string out;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

TEST_F(CheckCliTest, JsonParsesWithTheDocumentedKeys) {
  CliResult r = RunCli({"check", "--json", LightModel("squeezenet"), invalid_, refused_});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, StartsWith("{"));
  std::string probe =
      Python(dir_, r.out,
             "print(sorted(d), sorted(d['files'][1]), sorted(d['files'][1]['diagnostics'][0]),\n"
             "      [f['status'] for f in d['files']], d['summary'])");
  if (probe.find("python3: not found") != std::string::npos) GTEST_SKIP() << "no python3";
  EXPECT_EQ(
      probe,
      "['files', 'summary', 'version'] ['diagnostics', 'errors', 'notes', 'path', 'status', 'truncated', "
      "'warnings'] ['byte_offset', 'code', 'hint', 'location', 'message', 'rule', 'severity'] "
      "['valid', 'invalid', 'refused'] {'files': 3, 'valid': 1, 'invalid': 1, 'refused': 1, 'errors': 2, "
      "'warnings': 0}\n");
  EXPECT_EQ(r.out, RunCli({"check", "--json", LightModel("squeezenet"), invalid_, refused_}).out);
}

TEST_F(CheckCliTest, SarifHasThe210Fields) {
  CliResult r = RunCli({"check", "--sarif", invalid_, refused_});
  EXPECT_EQ(r.exit_code, 3);
  std::string probe =
      Python(dir_, r.out,
             "run=d['runs'][0]; res=run['results'][0]\n"
             "print(d['version'], d['$schema'].endswith('sarif-2.1.0.json'), "
             "run['tool']['driver']['name'],\n"
             "      len(run['tool']['driver']['rules']) > 40, res['ruleId'], res['level'],\n"
             "      res['locations'][0]['physicalLocation']['artifactLocation']['uri'].endswith("
             "'invalid.onnx'),\n"
             "      res['locations'][0]['logicalLocations'][0]['fullyQualifiedName'], "
             "bool(res['message']['text']))");
  if (probe.find("python3: not found") != std::string::npos) GTEST_SKIP() << "no python3";
  EXPECT_EQ(
      probe,
      "2.1.0 True onnxkit True E0400 error True graph 'main' \xe2\x80\xba node 'n1' (Frobnicate) True\n");
}

TEST_F(CheckCliTest, QuietPrintsOnlyErrors) {
  pb::ModelProto warned = ChainModel({"Relu"});
  warned.graph->name = "";
  const std::string warned_path = Save(dir_ / "warned.onnx", warned);
  CliResult r = RunCli({"check", "-q", LightModel("squeezenet"), warned_path});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  r = RunCli({"check", "-q", warned_path, invalid_});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, Not(HasSubstr("warning[")));
  EXPECT_THAT(r.out, HasSubstr("error[E0400"));
  EXPECT_THAT(r.out, HasSubstr("checked 2 files"));
}

TEST_F(CheckCliTest, WerrorFailsOnWarnings) {
  pb::ModelProto warned = ChainModel({"Relu"});
  warned.graph->name = "";
  const std::string path = Save(dir_ / "warned.onnx", warned);
  CliResult r = RunCli({"check", path});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("warning[E0310 graph-name]"));
  r = RunCli({"check", "--werror", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("error[E0310 graph-name]"));
}

TEST_F(CheckCliTest, MaxErrorsStopsEarly) {
  const std::string path = Save(dir_ / "three.onnx", ChainModel({"Bad1", "Bad2", "Bad3"}));
  CliResult all = RunCli({"check", path});
  EXPECT_THAT(all.out, HasSubstr("(3 errors, 0 warnings)"));
  CliResult one = RunCli({"check", "--max-errors", "1", path});
  EXPECT_EQ(one.exit_code, 1);
  EXPECT_THAT(one.out, HasSubstr("'Bad1'"));
  EXPECT_THAT(one.out, Not(HasSubstr("'Bad2'")));
  EXPECT_THAT(one.out, HasSubstr("note: stopped after 1 error (--max-errors 1)"));
}

TEST_F(CheckCliTest, StrictCustom) {
  pb::ModelProto m = ChainModel({"Relu"});
  m.graph->node[0].domain = "com.example";
  pb::OperatorSetIdProto custom;
  custom.domain = "com.example";
  custom.version = 1;
  m.opset_import.push_back(custom);
  const std::string path = Save(dir_ / "custom.onnx", m);
  EXPECT_EQ(RunCli({"check", path}).exit_code, 0);
  CliResult r = RunCli({"check", "--strict-custom", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("error[E0409 custom-domain]"));
}

TEST_F(CheckCliTest, ListRules) {
  CliResult r = RunCli({"check", "--list-rules"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("E0300  ssa-unique-outputs"));
  EXPECT_THAT(r.out, HasSubstr("E0506  external-data-location"));
}

TEST_F(CheckCliTest, FullOnAValidModel) {
  CliResult r = RunCli({"check", "--full", LightModel("resnet50")});
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

}  // namespace
}  // namespace onnxkit::testing
