// CLI tests of `onnxkit convert`: every exit code.
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "tests/apps/cli_runner.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string WriteModel(const fs::path& dir, int axis) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2, 3}})
      .Node("Softmax", {"x"}, {"y"}, {AttrInt("axis", axis)}, "soft")
      .Output("y", pb::kFloat, {{2, 3}});
  std::string path = (dir / "m.onnx").string();
  EXPECT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), 13, 7), dir, path).ok());
  return path;
}

TEST(ConvertCliTest, ConvertsVerifiesAndWrites) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir, -1);
  std::string out = (dir / "o.onnx").string();
  CliResult r = RunCli({"convert", in, "--opset", "9", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("outputs match"));
  EXPECT_TRUE(fs::exists(out));
  CliResult j = RunCli({"convert", out, "--opset", "28", "-o", (dir / "p.onnx").string(), "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_THAT(j.out, HasSubstr("\"target_opset\": 28"));
  EXPECT_THAT(j.out, HasSubstr("softmax-flatten"));
}

TEST(ConvertCliTest, DryRunOfAPossibleConversionExits0AndIsDeterministic) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir, -1);
  CliResult d = RunCli({"convert", in, "--opset", "7", "--dry-run", "--json"});
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_THAT(d.out, HasSubstr("\"written\": false"));
  EXPECT_THAT(d.out, HasSubstr("\"ir_version_after\": 3"));
  std::string a = (dir / "a.onnx").string(), b = (dir / "b.onnx").string();
  ASSERT_EQ(RunCli({"convert", in, "--opset", "21", "-o", a, "-q"}).exit_code, 0);
  ASSERT_EQ(RunCli({"convert", in, "--opset", "21", "-o", b, "-q"}).exit_code, 0);
  EXPECT_EQ(ReadFileOrEmpty(a), ReadFileOrEmpty(b));
}

TEST(ConvertCliTest, BlockedConversionExits1AndWritesNothing) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir, 0);
  std::string out = (dir / "o.onnx").string();
  CliResult r = RunCli({"convert", in, "--opset", "11", "-o", out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("'soft'"));
  EXPECT_FALSE(fs::exists(out));
  CliResult d = RunCli({"convert", in, "--opset", "11", "--dry-run"});
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_THAT(d.out, HasSubstr("blocked"));
}

TEST(ConvertCliTest, UsageErrorsExit2) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir, -1);
  EXPECT_EQ(RunCli({"convert", in, "--opset", "99", "-o", (dir / "o.onnx").string()}).exit_code, 2);
  EXPECT_EQ(RunCli({"convert", in, "-o", (dir / "o.onnx").string()}).exit_code, 2);
  EXPECT_EQ(RunCli({"convert", in, "--opset", "12"}).exit_code, 2);
}

TEST(ConvertCliTest, UnreadableModelExits3) {
  fs::path dir = MakeTempDir();
  CliResult r = RunCli({"convert", (dir / "missing.onnx").string(), "--opset", "12", "-o", (dir / "o").string()});
  EXPECT_EQ(r.exit_code, 3);
}

}  // namespace
}  // namespace onnxkit::testing

namespace onnxkit::testing {
namespace {

std::string WriteGraph(const fs::path& dir, pb::GraphProto g, int64_t opset, const std::string& name) {
  std::string path = (dir / name).string();
  pb::ModelProto m = ModelFromGraph(std::move(g), opset, 8);
  pb::OperatorSetIdProto custom;
  custom.domain = "com.example";
  custom.version = 1;
  m.opset_import.push_back(custom);
  EXPECT_TRUE(io::SaveModel(m, dir, path).ok());
  return path;
}

TEST(ConvertCliTest, OriginalThatCannotRunExits3) {
  fs::path dir = MakeTempDir();
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2}}).Output("y", pb::kFloat, {{2}});
  g.graph().node.push_back(MakeNode("Mystery", {"x"}, {"y"}));
  g.graph().node.back().domain = "com.example";
  std::string in = WriteGraph(dir, g.Build(), 13, "custom.onnx");
  std::string out = (dir / "o.onnx").string();
  CliResult r = RunCli({"convert", in, "--opset", "14", "-o", out});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("com.example::Mystery"));
  EXPECT_FALSE(fs::exists(out));
  // Without verification the foreign op is kept, with a warning.
  CliResult nv = RunCli({"convert", in, "--opset", "14", "-o", out, "--no-verify"});
  EXPECT_EQ(nv.exit_code, 0) << nv.err;
  EXPECT_TRUE(fs::exists(out));
}

TEST(ConvertCliTest, OutputsThatDifferExit1) {
  fs::path dir = MakeTempDir();
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{4}})
      .Node("RandomUniformLike", {"x"}, {"y"})
      .Output("y", pb::kFloat, {{4}});
  std::string in = WriteGraph(dir, g.Build(), 13, "random.onnx");
  std::string out = (dir / "o.onnx").string();
  CliResult r = RunCli({"convert", in, "--opset", "14", "-o", out});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("nothing written"));
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace onnxkit::testing
