// End-to-end tests of `onnxkit extract`: a valid model that onnx's checker
// accepts, external data written fresh, and every error path.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "tests/apps/cli_runner.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;

std::string Squeezenet() { return TestdataPath("models/light/light_squeezenet.onnx").string(); }

// Runs onnx's full checker on `path` with Debian's python3-onnx; false with
// the reason when it rejects the model; skips when python3-onnx is absent.
bool OnnxChecks(const std::string& path, bool* available) {
  *available = std::system("/usr/bin/python3 -c 'import onnx' >/dev/null 2>&1") == 0;
  if (!*available) return true;
  // onnx.load reads external data too, so the data file is checked as well.
  std::string cmd = "/usr/bin/python3 -c \"import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), "
                    "full_check=True)\" '" + path + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST(ExtractCliTest, WritesAModelOnnxAccepts) {
  auto dir = MakeTempDir();
  std::string out = (dir / "part.onnx").string();
  CliResult r = RunCli({"extract", Squeezenet(), "-i", "data_0", "-o", "r5", "-O", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("9 of 105 nodes"));
  bool available = false;
  EXPECT_TRUE(OnnxChecks(out, &available));
  if (!available) GTEST_SKIP() << "python3-onnx not installed";
}

TEST(ExtractCliTest, CommaSeparatedNamesAndQuiet) {
  auto dir = MakeTempDir();
  std::string out = (dir / "part.onnx").string();
  CliResult r = RunCli({"extract", Squeezenet(), "-i", "r1", "-o", "r3,r5", "-O", out, "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  CliResult info = RunCli({"inspect", "--json", out});
  EXPECT_THAT(info.out, HasSubstr("\"r3\""));
  EXPECT_THAT(info.out, HasSubstr("\"r5\""));
}

TEST(ExtractCliTest, ExternalDataIsWrittenNextToTheOutput) {
  auto dir = MakeTempDir();
  std::string out = (dir / "part.onnx").string();
  CliResult r = RunCli({"extract", Squeezenet(), "-i", "data_0", "-o", "r5", "-O", out, "--external-data", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "part.onnx.data"));
  auto loaded = io::LoadModel(out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  int external = 0;
  for (const auto& t : loaded->proto.graph->initializer) external += t.data_location == 1;
  EXPECT_GT(external, 0);
  bool available = false;
  EXPECT_TRUE(OnnxChecks(out, &available));
}

TEST(ExtractCliTest, UnknownTensorExits2WithASuggestion) {
  auto dir = MakeTempDir();
  CliResult r = RunCli({"extract", Squeezenet(), "-i", "data_0", "-o", "r5x", "-O", (dir / "o.onnx").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("'r5x' is not a tensor"));
  EXPECT_THAT(r.err, HasSubstr("did you mean"));
  EXPECT_FALSE(std::filesystem::exists(dir / "o.onnx"));
}

TEST(ExtractCliTest, UncomputableOutputExits2NamingMissingTensors) {
  auto dir = MakeTempDir();
  CliResult r = RunCli({"extract", Squeezenet(), "-i", "r5", "-o", "r3", "-O", (dir / "o.onnx").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot be computed"));
  EXPECT_THAT(r.err, HasSubstr("'data_0'"));
}

TEST(ExtractCliTest, MissingModelExits3) {
  CliResult r = RunCli({"extract", "/nonexistent.onnx", "-o", "y", "-O", "/tmp/x.onnx"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent.onnx"));
}

TEST(ExtractCliTest, NotAModelExits3) {
  auto dir = MakeTempDir();
  std::ofstream(dir / "bad.onnx") << "\x08\x07garbage";
  CliResult r = RunCli({"extract", (dir / "bad.onnx").string(), "-o", "y", "-O", (dir / "o.onnx").string()});
  EXPECT_EQ(r.exit_code, 3);
}

TEST(ExtractCliTest, UsageErrorsExit2) {
  EXPECT_EQ(RunCli({"extract", Squeezenet(), "-o", "r5"}).exit_code, 2);          // no -O
  EXPECT_EQ(RunCli({"extract", Squeezenet(), "-O", "/tmp/x.onnx"}).exit_code, 2);  // no -o
  EXPECT_EQ(RunCli({"extract", Squeezenet(), "-o", "r5", "-O", "/tmp/x.onnx", "--external-data", "-5"}).exit_code,
            2);
  // Names given twice or empty are the request's fault, not the model's.
  std::filesystem::path out = MakeTempDir() / "o.onnx";
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"extract", Squeezenet(), "-o", "r5", "-o", "r5", "-O", out.string()},
           {"extract", Squeezenet(), "-o", "", "-O", out.string()},
           {"extract", Squeezenet(), "-i", "", "-o", "r5", "-O", out.string()}}) {
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, ::testing::Not(HasSubstr(Squeezenet()))) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  // A mistyped flag is named, not the required option it left out.
  CliResult typo = RunCli({"extract", Squeezenet(), "--outptu", "r5", "-O", out.string()});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("not expected: --outptu")) << typo.err;
  EXPECT_THAT(RunCli({"extract", Squeezenet(), "-O", out.string()}).err, HasSubstr("--output is required"));
}

TEST(ExtractCliTest, MissingOutputFolderExits3AndWritesNothing) {
  CliResult r = RunCli({"extract", Squeezenet(), "-i", "data_0", "-o", "r5", "-O", "/nonexistent/dir/o.onnx"});
  EXPECT_EQ(r.exit_code, 3);
}

}  // namespace
}  // namespace onnxkit::testing
